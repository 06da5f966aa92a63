"""A real broker that stops answering or goes away, seen through the SDK's public calls:
a paused broker (SIGSTOP: its sockets stay open, nothing answers) is a ``TimeoutError``, a
killed one a ``ConnectionError``, both rocketq errors that say they may be retried."""

from __future__ import annotations

import signal

import pytest

from rocketq import Message, Producer
from rocketq.cluster.launcher import LocalCluster
from rocketq.errors import ConnectBrokerError, RequestTimeoutError, RocketqError
from rocketq.sdk.admin import Admin
from tests.integration.waiting import wait_until

TOPIC = "ErrorsTopic"


async def test_a_paused_broker_times_out_and_a_killed_one_cannot_be_reached(
    cluster: LocalCluster,
) -> None:
    broker = cluster.brokers[0]
    async with Admin(cluster.namesrv_addr, timeout=0.5) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
        async with Producer("pg-errors", cluster.namesrv_addr) as producer:
            assert (await producer.send(Message(TOPIC, b"before"))).ok
            cluster.pause(broker.name)
            try:
                try:
                    await producer.send(Message(TOPIC, b"paused"), timeout=0.6)
                except TimeoutError as exc:
                    sent: BaseException = exc
                else:
                    pytest.fail("a paused broker stored a message")
                with pytest.raises(TimeoutError) as status:
                    await admin.topic_status(TOPIC)
            finally:
                cluster.resume(broker.name)
            assert isinstance(sent, RequestTimeoutError) and sent.retriable
            assert isinstance(status.value, RequestTimeoutError)

            async def sends() -> bool:
                # The broker first refuses what waited in its queue while paused (broker
                # busy, TIMEOUT_CLEAN_QUEUE); then it stores again.
                try:
                    return (await producer.send(Message(TOPIC, b"resumed"), timeout=1)).ok
                except RocketqError as exc:
                    if exc.retriable:
                        return False
                    raise

            await wait_until(sends, "a send to the resumed broker", timeout=10)

        # Without retries a send goes to the broker its route names (with them, the retry
        # asks the nameserver, which forgot the topic with its only broker).
        async with Producer(
            "pg-errors-once", cluster.namesrv_addr, retry_times_when_send_failed=0
        ) as once:

            async def known() -> bool:
                # On a loaded machine the resumed broker may still be clearing its queue.
                try:
                    return (await once.send(Message(TOPIC, b"route known"), timeout=1)).ok
                except RocketqError as exc:
                    if exc.retriable:
                        return False
                    raise

            await wait_until(known, "a send that learns the route", timeout=10)
            cluster.kill(broker.name, signal.SIGKILL)
            with pytest.raises(ConnectionError) as refused:
                await once.send(Message(TOPIC, b"killed"), timeout=5)
            assert isinstance(refused.value, ConnectBrokerError) and refused.value.retriable
            assert broker.addr in str(refused.value)
            with pytest.raises(ConnectionError):
                await admin.broker_config(broker.addr)
