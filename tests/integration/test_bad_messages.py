"""Bad messages on a real cluster: a message stored flagged compressed whose body is not
zlib, and a zlib bomb, both sent with the raw remoting protocol, then good messages. A
push consumer (concurrent or orderly) consumes every good one and moves the bad ones, as
stored, to its group's DLQ; a lite pull consumer's poll() raises each bad one
(BadMessageError with its offset) and then returns the messages after it. Neither stops
the queue."""

from __future__ import annotations

import time
import zlib

import pytest

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.message import SysFlag
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.transport import connect
from rocketq.sdk.admin import Admin
from rocketq.sdk.message_body import INFLATE_CAP, NOT_ZLIB, BadMessageError
from rocketq.sdk.pull_consumer import PullConsumer
from rocketq.sdk.wire import send_request
from tests.integration.waiting import wait_until

TOPIC = "BadBodies"
GOOD = [f"good-{i}" for i in range(5)]
NOT_ZLIB_BODY = b"\x00this is not a zlib stream"
COMPRESSED = int(SysFlag.COMPRESSED)


def zlib_bomb(inflated: int) -> bytes:
    deflate = zlib.compressobj(9)
    block = bytes(1024 * 1024)
    parts = [deflate.compress(block) for _ in range(inflated // len(block))]
    return b"".join([*parts, deflate.flush()])


# 64 MiB of zeros in about 64 KiB: four times the default cap (4 MiB x 4).
BOMB = zlib_bomb(64 * 1024 * 1024)


async def store_bad_then_good(cluster: LocalCluster) -> None:
    """On TOPIC (one queue): the two bad messages at offsets 0 and 1, then GOOD."""
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
    conn = await connect(cluster.brokers[0].addr, {})
    try:
        for key, body in (("not-zlib", NOT_ZLIB_BODY), ("bomb", BOMB)):
            req = send_request(
                body,
                f"KEYS\x01{key}\x02",
                group="pg-bad",
                topic=TOPIC,
                queue_id=0,
                born_timestamp=int(time.time() * 1000),
                sys_flag=COMPRESSED,
            )
            answer = await conn.invoke(req, 10.0)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
    finally:
        conn.close()
    async with Producer("pg-good", ns) as producer:
        for text in GOOD:
            await producer.send(Message(TOPIC, text.encode()))


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
async def test_a_push_consumer_dead_letters_bad_messages_and_consumes_the_rest(
    cluster: LocalCluster, orderly: bool
) -> None:
    ns = cluster.namesrv_addr
    group = "cg-bad-push"
    await store_bad_then_good(cluster)
    got: list[MessageExt] = []
    consumer = PushConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET, orderly=orderly)
    consumer.subscribe(TOPIC, "*")

    async def keep(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(keep)
    await consumer.start()
    try:
        await wait_until(
            lambda: {m.body.decode() for m in got} >= set(GOOD),
            lambda: f"every good message consumed (got {[m.body[:20] for m in got]})",
            timeout=60,
        )
        assert sorted(m.queue_offset for m in got if m.topic == TOPIC) == [2, 3, 4, 5, 6]
        assert consumer.bad_messages == {NOT_ZLIB: 1, INFLATE_CAP: 1}
        dead: list[MessageExt] = []
        async with Admin(ns) as admin:

            async def both_dead() -> bool:
                dead[:] = await admin.dlq_messages(group)
                return len(dead) >= 2

            await wait_until(both_dead, f"the two bad messages in %DLQ%{group}", timeout=30)
        # As stored: the raw bytes, still flagged compressed, under the group's DLQ.
        assert sorted(m.body for m in dead) == sorted([NOT_ZLIB_BODY, BOMB])
        assert all(m.sys_flag & COMPRESSED for m in dead)
        assert {m.properties["RETRY_TOPIC"] for m in dead} == {TOPIC}
        assert {k for m in dead for k in m.keys} == {"not-zlib", "bomb"}

        # The committed offset passes everything.
        async def committed() -> bool:
            await consumer.offsets.persist_all(list(consumer.process_queues))
            return all(
                consumer.offsets.read_memory(mq) == 7
                for mq in consumer.process_queues
                if mq.topic == TOPIC
            )

        await wait_until(committed, "the offset of the queue committed past the last message")
    finally:
        await consumer.shutdown()


async def test_a_pull_consumer_raises_each_bad_message_then_returns_the_rest(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    await store_bad_then_good(cluster)
    got: list[MessageExt] = []
    errors: list[BadMessageError] = []
    consumer = PullConsumer("cg-bad-pull", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    try:
        deadline = time.monotonic() + 60
        while len(got) < len(GOOD):
            assert time.monotonic() < deadline, (
                f"timed out: got {[m.body for m in got]}, errors {errors}"
            )
            try:
                got.extend(await consumer.poll(timeout=1.0))
            except BadMessageError as exc:
                assert not got  # raised in queue order, before the messages after it
                errors.append(exc)
        assert [m.body.decode() for m in got] == GOOD
        assert [(e.queue_offset, e.reason) for e in errors] == [(0, NOT_ZLIB), (1, INFLATE_CAP)]
        stored = errors[0].message
        assert stored is not None and stored.body == NOT_ZLIB_BODY and errors[1].topic == TOPIC
        assert consumer.bad_messages == {NOT_ZLIB: 1, INFLATE_CAP: 1}
        await consumer.commit()
        (mq,) = consumer.assignment()
        assert consumer.offsets.read_memory(mq) == 7
    finally:
        await consumer.shutdown()
