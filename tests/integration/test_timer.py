"""Messages with a delivery time (``deliver_at``) on real processes: delivered when due to
about a second, kept across a graceful restart and a SIGKILL, refused beyond the limit."""

from __future__ import annotations

import signal
import time

import pytest

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import MessageIllegalError
from rocketq.sdk.admin import Admin
from tests.integration.waiting import wait_until


def now_ms() -> int:
    return int(time.time() * 1000)


async def make_topic(ns: str, topic: str) -> None:
    async with Admin(ns) as admin:
        await admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)


async def stored(ns: str, topic: str) -> int:
    async with Admin(ns) as admin:
        return sum(q.max_offset for q in await admin.topic_status(topic))


def consumer(ns: str, group: str, topic: str, sink: list[tuple[int, MessageExt]]) -> PushConsumer:
    c = PushConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    c.subscribe(topic, "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        sink.extend((now_ms(), m) for m in msgs)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    return c


async def test_message_arrives_at_its_time(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "AtTime")
    got: list[tuple[int, MessageExt]] = []
    c = consumer(ns, "cg-at", "AtTime", got)
    await c.start()
    try:
        async with Producer("pg", ns) as producer:
            at = now_ms() + 2500
            await producer.send(Message("AtTime", b"on time", deliver_at=at))
            await producer.send(Message("AtTime", b"past", deliver_at=now_ms() - 1000))
        await wait_until(lambda: any(m.body == b"past" for _, m in got), "the overdue one")
        assert not any(m.body == b"on time" for _, m in got)
        await wait_until(lambda: len(got) >= 2, "the timed message", timeout=15)
    finally:
        await c.shutdown()
    when, msg = next((t, m) for t, m in got if m.body == b"on time")
    assert at <= when <= at + 1500, f"delivered {when - at} ms after its time"
    assert msg.topic == "AtTime" and int(msg.properties["TIMER_DELIVER_MS"]) == at


async def test_timed_messages_survive_restart_and_sigkill(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "AtLater")
    broker = cluster.brokers[0].name
    async with Producer("pg", ns) as producer:
        at = now_ms() + 6000  # after the graceful restart, even on a loaded machine
        await producer.send(Message("AtLater", b"graceful", deliver_at=at))
        await producer.send(Message("AtLater", b"killed", deliver_at=at + 500))
    cluster.restart(broker)  # graceful: checkpoint and timer log saved
    restarted = now_ms()
    assert restarted < at, f"the restart took {restarted - at + 6000} ms"
    assert await stored(ns, "AtLater") == 0
    cluster.kill(broker, signal.SIGKILL)  # no checkpoint this time
    cluster.restart(broker)
    got: list[tuple[int, MessageExt]] = []
    c = consumer(ns, "cg-later", "AtLater", got)
    await c.start()
    try:
        await wait_until(lambda: len(got) >= 2, "both timed messages", timeout=20)
    finally:
        await c.shutdown()
    assert sorted(m.body for _, m in got) == [b"graceful", b"killed"]
    assert all(t >= at for t, _ in got)
    assert await stored(ns, "AtLater") == 2  # each delivered once


async def test_delivery_time_limits(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "AtLimit")
    async with Producer("pg", ns) as producer:
        with pytest.raises(MessageIllegalError, match="the limit is 40 days"):
            await producer.send(Message("AtLimit", b"x", deliver_at=now_ms() + 41 * 86_400_000))
        with pytest.raises(MessageIllegalError, match="delay_level or a deliver_at"):
            await producer.send(Message("AtLimit", b"x", delay_level=2, deliver_at=now_ms()))
        with pytest.raises(MessageIllegalError, match="cannot be delayed"):
            await producer.send_batch([Message("AtLimit", b"x", deliver_at=now_ms() + 5000)] * 2)
    assert await stored(ns, "AtLimit") == 0
