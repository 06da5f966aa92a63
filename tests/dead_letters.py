"""Shared by the dead-letter tests (SDK, CLI, console): fill a group's DLQ with messages a
consumer fails, and consume a topic with a consumer that succeeds."""

from __future__ import annotations

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.sdk.admin import Admin
from tests.integration.waiting import wait_until


async def fill_dlq(ns: str, topic: str, group: str, count: int, prefix: str = "pay") -> list[str]:
    """Send ``count`` messages (body and key ``<prefix>-<i>``) to ``topic`` on two queues,
    which a consumer of ``group`` fails at once (no retries): they land in %DLQ%<group>.
    -> their bodies."""
    async with Admin(ns) as admin:
        await admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)
    failing = PushConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET, max_reconsume_times=0)
    failing.subscribe(topic, "*")

    async def refuse(msgs: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.RECONSUME_LATER

    failing.on_message(refuse)
    bodies = [f"{prefix}-{i}" for i in range(count)]
    await failing.start()
    try:
        async with Producer(f"pg-{group}", ns) as producer:
            for body in bodies:
                await producer.send(Message(topic, body.encode(), keys=[body]))
        async with Admin(ns) as admin:

            async def all_dead() -> bool:
                return len(await admin.dlq_messages(group)) >= count

            await wait_until(all_dead, f"every message in the DLQ of {group}")
    finally:
        await failing.shutdown()
    return bodies


async def consume_fixed(ns: str, topic: str, group: str, want: set[str]) -> list[MessageExt]:
    """A consumer of ``group`` that succeeds, until it has every body of ``want``; its
    offsets are committed when it shuts down. -> what it got."""
    got: list[MessageExt] = []
    fixed = PushConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    fixed.subscribe(topic, "*")

    async def keep(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    fixed.on_message(keep)
    await fixed.start()
    try:
        await wait_until(
            lambda: want <= {m.body.decode() for m in got},
            lambda: f"{want - {m.body.decode() for m in got}} consumed by {group}",
        )
    finally:
        await fixed.shutdown()
    return got
