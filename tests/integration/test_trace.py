"""Message trace on real processes: a traced producer and consumer leave Pub, SubBefore and
SubAfter events that the admin client and ``rocketq admin trace`` find by message id."""

from __future__ import annotations

import asyncio
import json

from typer.testing import CliRunner

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin
from rocketq.sdk.trace import TraceEvent
from tests.integration.waiting import wait_until


async def test_send_and_consume_are_traced(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("Traced", read_queue_nums=2, write_queue_nums=2)
    got: list[MessageExt] = []
    consumer = PushConsumer(
        "cg-traced", ns, consume_from=ConsumeFrom.FIRST_OFFSET, enable_trace=True
    )
    consumer.subscribe("Traced", "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(handler)
    await consumer.start()
    try:
        async with Producer("pg-traced", ns, enable_trace=True) as producer:
            sent = await producer.send(Message("Traced", b"follow me", tags="T1"))
            untraced = await producer.send_batch([Message("Traced", b"a"), Message("Traced", b"b")])
        await wait_until(lambda: len(got) >= 3, "the consumer")
    finally:
        await consumer.shutdown()  # writes its pending trace events
    events: list[TraceEvent] = []
    async with Admin(ns) as admin:

        async def traced() -> bool:
            events[:] = await admin.trace(sent.msg_id)
            return {e.type for e in events} >= {"Pub", "SubBefore", "SubAfter"}

        await wait_until(traced, lambda: f"Pub, SubBefore, SubAfter (have {events})")
        batch_events = await admin.trace(untraced.msg_ids[1])
    pub = next(e for e in events if e.type == "Pub")
    assert (pub.group, pub.topic, pub.tags, pub.status) == ("pg-traced", "Traced", "T1", "SEND_OK")
    assert pub.offset_msg_id == sent.offset_msg_id
    after = next(e for e in events if e.type == "SubAfter")
    assert after.group == "cg-traced" and after.success
    assert {e.type for e in batch_events} >= {"Pub"}  # each message of a batch too
    # The CLI runs its own event loop: on a thread of its own here.
    cli = CliRunner()
    out = await asyncio.to_thread(
        cli.invoke, app, ["admin", "trace", "-n", ns, "-i", sent.msg_id, "--json"]
    )
    assert out.exit_code == 0, out.output
    assert {row["type"] for row in json.loads(out.output)} >= {"Pub", "SubAfter"}
    missing = await asyncio.to_thread(cli.invoke, app, ["admin", "trace", "-n", ns, "-i", "0" * 32])
    assert missing.exit_code == 1 and "enable_trace=True" in missing.output


async def test_a_trace_before_any_trace_topic_is_empty(cluster: LocalCluster) -> None:
    # The trace topic is made by the first traced send and reaches the nameserver with the
    # broker's next registration; until then a trace query finds nothing rather than failing.
    async with Admin(cluster.namesrv_addr) as admin:
        assert await admin.trace("0" * 32, topic="NoTraceWrittenHere") == []
