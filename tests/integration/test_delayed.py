"""Delayed messages by level on real processes: held in SCHEDULE_TOPIC_XXXX until due,
delivered to their real topic, capped at the highest level, surviving a broker restart,
refused in batches. The test clusters' levels are "1s 2s" then 100 ms (conftest)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rocketq import ConsumeFrom, ConsumeResult, Producer, PushConsumer
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.message import SCHEDULE_TOPIC, Message, MessageExt
from rocketq.common.record import encode_properties, message_properties
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.transport import request_once
from rocketq.sdk.admin import Admin
from rocketq.sdk.wire import batch_body, send_request
from tests.integration.waiting import wait_until


async def make_topic(namesrv: str, topic: str, queues: int = 2) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def consumer(ns: str, group: str, topic: str, sink: list[tuple[float, MessageExt]]) -> PushConsumer:
    c = PushConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    c.subscribe(topic, "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        sink.extend((time.monotonic(), m) for m in msgs)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    return c


async def schedule_depth(admin: Admin, level: int) -> int:
    stats = await admin.topic_status(SCHEDULE_TOPIC)
    return sum(q.max_offset for q in stats if q.queue_id == level - 1)


async def test_delayed_message_arrives_after_its_level(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Later")
    got: list[tuple[float, MessageExt]] = []
    c = consumer(ns, "cg-later", "Later", got)
    await c.start()
    try:
        async with Producer("pg", ns) as producer:
            await producer.send(Message("Later", b"now"))
            sent_at = time.monotonic()
            result = await producer.send(Message("Later", b"in 2 s", delay_level=2))
            assert result.ok
        await wait_until(lambda: any(m.body == b"now" for _, m in got), "the plain message")
        assert not any(m.body == b"in 2 s" for _, m in got)
        async with Admin(ns) as admin:
            assert await schedule_depth(admin, 2) == 1  # held in level 2's queue
        await wait_until(lambda: len(got) >= 2, "the delayed message", timeout=15)
    finally:
        await c.shutdown()
    at, late = next((t, m) for t, m in got if m.body == b"in 2 s")
    assert at - sent_at >= 1.9
    assert late.topic == "Later" and late.properties["REAL_TOPIC"] == "Later"
    assert late.delay_level == 2


async def test_level_above_the_highest_is_capped(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Capped")
    got: list[tuple[float, MessageExt]] = []
    c = consumer(ns, "cg-capped", "Capped", got)
    await c.start()
    try:
        async with Producer("pg", ns) as producer:
            await producer.send(Message("Capped", b"x", delay_level=99))
        await wait_until(lambda: len(got) >= 1, "the capped message")
    finally:
        await c.shutdown()
    assert got[0][1].delay_level == 18  # stored in the last level's queue
    async with Admin(ns) as admin:
        assert await schedule_depth(admin, 18) == 1


async def test_pending_delayed_message_survives_a_broker_restart(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Durable")
    async with Producer("pg", ns) as producer:
        await producer.send(Message("Durable", b"early", delay_level=3))  # 100 ms
        await producer.send(Message("Durable", b"pending", delay_level=2))  # 2 s
    broker = cluster.brokers[0]
    async with Admin(ns) as admin:

        async def stored_in_topic() -> int:
            return sum(q.max_offset for q in await admin.topic_status("Durable"))

        async def early_delivered() -> bool:
            return await stored_in_topic() >= 1

        await wait_until(early_delivered, "the 100 ms message to be delivered")
    cluster.restart(broker.name)  # graceful: progress saved at stop
    saved = json.loads((broker.store / "config" / "delay_offset.json").read_text())
    assert saved["offsetTable"]["3"] == 1 and saved["offsetTable"].get("2", 0) == 0
    got: list[tuple[float, MessageExt]] = []
    c = consumer(ns, "cg-durable", "Durable", got)
    await c.start()
    try:
        await wait_until(lambda: len(got) >= 2, "both messages after the restart", timeout=20)
    finally:
        await c.shutdown()
    assert sorted(m.body for _, m in got) == [b"early", b"pending"]
    # Nothing delivered twice: the restart resumed level 3 after its delivered message (a
    # second copy of it would have been due long before the 2 s one).
    async with Admin(ns) as admin:
        assert sum(q.max_offset for q in await admin.topic_status("Durable")) == 2


async def test_delayed_messages_in_a_batch_are_refused(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "NoDelayBatch")
    async with Producer("pg", ns) as producer:
        with pytest.raises(MessageIllegalError, match="delayed"):
            await producer.send_batch([Message("NoDelayBatch", b"a", delay_level=1)] * 2)
    # The broker refuses it too, whoever encoded the batch; nothing is stored.
    props = encode_properties(
        message_properties(Message("NoDelayBatch", b"b", delay_level=1), None)
    )
    body = batch_body([(b"b", props, 0)] * 2)
    batch = send_request(
        body, "", group="pg", topic="NoDelayBatch", queue_id=0, born_timestamp=0, batch=True
    )
    answer = await request_once(cluster.brokers[0].addr, batch, 5.0)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert "batch cannot hold delayed" in str(answer.remark)
    async with Admin(ns) as admin:
        assert sum(q.max_offset for q in await admin.topic_status("NoDelayBatch")) == 0
