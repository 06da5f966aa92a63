"""``async for`` over consumers on a real cluster, with the ack semantics: a message counts
as consumed when the loop asks for the next one; one whose loop body raised (the exception
leaving the consumer's ``async with``), or that ``reconsume_later`` sent back, is delivered
again; a pull consumer's batch whose body raised is read again by the group."""

from __future__ import annotations

import asyncio

import pytest

from rocketq import ConsumeFrom, Message, MessageExt, Producer, PullConsumer, PushConsumer
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import ClientStateError
from rocketq.sdk.admin import Admin


class BodyError(Exception):
    """Raised in a loop body."""


async def setup(ns: str, topic: str, bodies: list[bytes], *, queues: int = 4) -> None:
    async with Admin(ns) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    async with Producer("pg-iter", ns) as producer:
        for body in bodies:
            await producer.send(Message(topic, body), sharding_key="one-queue")


async def test_push_async_for_acks_on_next_and_redelivers_what_failed(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    await setup(ns, "Iter", [b"a", b"b", b"c", b"d"])
    first = PushConsumer("cg-iter", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    first.subscribe("Iter")
    seen: list[tuple[bytes, int]] = []
    later: list[bytes] = []
    with pytest.raises(BodyError):
        async with asyncio.timeout(20), first:
            async for msg in first:
                seen.append((msg.body, msg.reconsume_times))
                if msg.body == b"a" and msg.reconsume_times == 0:
                    first.reconsume_later(msg)  # back for retry; the loop goes on
                    later.append(msg.body)
                elif msg.body == b"c":
                    raise BodyError("the body fails on c")
    assert (b"c", 0) in seen
    # a came back to this consumer (through %RETRY%cg-iter) before it stopped, or comes to
    # the next one; c went back when the exception left `async with`.
    again = PushConsumer("cg-iter", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    again.subscribe("Iter")
    redelivered: dict[bytes, int] = {}
    async with asyncio.timeout(20), again:
        async for msg in again:
            redelivered[msg.body] = msg.reconsume_times
            if b"c" in redelivered and (b"a" in redelivered or (b"a", 1) in seen):
                break
    assert redelivered[b"c"] == 1
    with pytest.raises(ClientStateError, match="iterate a started consumer"):
        again.messages()


async def test_orderly_async_for_redelivers_in_queue_order(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await setup(ns, "IterOrdered", [b"1", b"2", b"3"], queues=1)
    consumer = PushConsumer(
        "cg-iter-ordered",
        ns,
        orderly=True,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        suspend_current_queue_time=0.05,
    )
    consumer.subscribe("IterOrdered")
    order: list[bytes] = []
    async with asyncio.timeout(20), consumer:
        async for msg in consumer:
            order.append(msg.body)
            if msg.body == b"2" and msg.reconsume_times == 0:
                consumer.reconsume_later(msg)
            if msg.body == b"3":
                break
    assert order == [b"1", b"2", b"2", b"3"]
    # The body raising on 2 (no ack) leaves 2 and 3 to the group's next consumer, in order.
    failing = PushConsumer(
        "cg-iter-ordered-2", ns, orderly=True, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    failing.subscribe("IterOrdered")
    with pytest.raises(BodyError):
        async with asyncio.timeout(20), failing:
            async for msg in failing:
                if msg.body == b"2":
                    raise BodyError("the body fails on 2")
    after = PushConsumer(
        "cg-iter-ordered-2", ns, orderly=True, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    after.subscribe("IterOrdered")
    rest: list[bytes] = []
    async with asyncio.timeout(20), after:
        async for msg in after:
            rest.append(msg.body)
            if msg.body == b"3":
                break
    assert rest == [b"2", b"3"]


async def test_pull_async_for_reads_a_failed_batch_again(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await setup(ns, "IterPull", [b"x", b"y", b"z"], queues=1)
    first = PullConsumer("cg-iter-pull", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    first.subscribe("IterPull")
    failed: list[bytes] = []
    with pytest.raises(BodyError):
        async with asyncio.timeout(20), first:
            async for batch in first:
                failed = [m.body for m in batch]
                raise BodyError("the body fails on the first batch")
    assert failed and set(failed) <= {b"x", b"y", b"z"}
    again = PullConsumer("cg-iter-pull", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    again.subscribe("IterPull")
    got: list[MessageExt] = []
    async with asyncio.timeout(20), again:
        async for batch in again:
            got.extend(batch)
            if len(got) >= 3:
                break
    assert [m.body for m in got] == [b"x", b"y", b"z"]


async def test_a_pull_consumer_started_before_its_topic_exists_reads_it_within_seconds(
    cluster: LocalCluster,
) -> None:
    """The topic a producer's first send creates is taken well before the 20 s rebalance
    interval: a rebalance that found no route looks again a second later."""
    ns = cluster.namesrv_addr
    consumer = PullConsumer("cg-late-topic", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("LateTopic")
    assert consumer.config.rebalance_interval == 20.0
    async with consumer:
        assert consumer.assignment() == []  # no such topic yet
        async with Producer("pg-late-topic", ns) as producer:
            await producer.send(Message("LateTopic", b"first"))
        got: list[bytes] = []
        async with asyncio.timeout(8):
            async for batch in consumer:
                got += [m.body for m in batch]
                if got:
                    break
    assert got == [b"first"]
