"""A pop of queue -1 (what RocketMQ 5's proxy asks for every receive): it takes from every
queue of the topic up to the batch, orderly too (each queue it took from locked on its
own), and a new group starts where RocketMQ's getInitOffset starts it."""

from __future__ import annotations

from dataclasses import replace

from rocketq.broker.pop import INIT_MODE_MAX, INIT_MODE_MIN
from tests.broker.test_pop import GROUP, TOPIC, Start, ack, cluster, pop, send, setup_topic

__all__ = ["cluster"]  # the fixture, used by name


async def test_a_pop_of_any_queue_takes_from_every_queue_up_to_the_batch(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=4)
    for q in range(4):
        await send(conn, [f"q{q}-{i}".encode() for i in range(3)], queue=q)
    _, five = await pop(conn, n=5)
    _, rest = await pop(conn, n=32)
    assert len(five) == 5 and len(rest) == 7
    assert sorted(m.body for m in five + rest) == sorted(
        f"q{q}-{i}".encode() for q in range(4) for i in range(3)
    )


async def test_an_orderly_pop_of_any_queue_locks_each_queue_it_took_from(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=3)
    for q in range(3):
        await send(conn, [f"q{q}-0".encode(), f"q{q}-1".encode()], queue=q)
    answer, first = await pop(conn, n=32, order=True)
    by_queue: dict[int, list[bytes]] = {}
    for m in first:
        by_queue.setdefault(m.queue_id, []).append(m.body)
    assert by_queue == {q: [f"q{q}-0".encode(), f"q{q}-1".encode()] for q in range(3)}
    assert len((answer.ext or {})["orderCountInfo"].split(";")) == 6
    # Every queue is locked while its messages are out: new ones wait behind them.
    await send(conn, [b"q1-2"], queue=1)
    assert (await pop(conn, n=32, order=True))[1] == []
    for m in first:
        if m.queue_id == 1:
            assert (await ack(conn, m)).code == 0
    # Queue 1 is free again, the others still held.
    _, after = await pop(conn, n=32, order=True)
    assert [(m.queue_id, m.body) for m in after] == [(1, b"q1-2")]


async def test_a_new_group_starts_where_rocketmq_starts_it(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=2)
    await send(conn, [b"a", b"b", b"c"], queue=0)
    pops = b.pop
    # MIN, and a queue still holding its first message in memory under MAX: the start.
    assert pops.init_offset(TOPIC, 0, INIT_MODE_MIN) == 0
    assert pops.init_offset(TOPIC, 0, INIT_MODE_MAX) == 0
    # Out of the memory window (or with the check off): the queue's last message.
    kept = b.config
    b.config = replace(kept, access_message_in_memory_max_ratio=0)
    assert pops.init_offset(TOPIC, 0, INIT_MODE_MAX) == 2
    b.config = replace(kept, init_pop_offset_by_check_msg_in_mem=False)
    assert pops.init_offset(TOPIC, 0, INIT_MODE_MAX) == 2
    assert pops.init_offset(TOPIC, 0, INIT_MODE_MIN) == 0
    # A pop retry topic always starts at its oldest message.
    assert pops.init_offset(f"%RETRY%{GROUP}_{TOPIC}", 0, INIT_MODE_MAX) == 0
    # The start is committed at the group's first pop (the empty queue 1 too): what
    # arrives after it is the group's, however much it is.
    first = await pops.pop("max-group", TOPIC, -1, max_nums=32,
                           invisible_time=60_000, init_mode=INIT_MODE_MAX)  # fmt: skip
    assert len(first.records) == 1 and b.offsets.query("max-group", TOPIC, 1) == 0
    await send(conn, [b"x", b"y"], queue=1)
    _, later = await pop(conn, group="max-group", n=32)
    assert sorted(m.body for m in later) == [b"x", b"y"]
    # Another group's offsets are untouched.
    assert b.offsets.query(GROUP, TOPIC, 0) < 0
