"""Ordered messages on real processes: a sharding key keeps a key's messages in one queue,
orderly consumers lock their queues and consume each strictly in order, also while one
consumer (a separate process) is SIGKILLed and another joins; SUSPEND retries the same
message without letting later ones pass, and a message that keeps failing goes to the DLQ.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    MessageModel,
    Producer,
    PushConsumer,
)
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import ClientStateError
from rocketq.sdk.admin import Admin
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until

KEYS = 12
PER_KEY = 30
# Queue locks of a killed consumer expire on the broker after 3 s instead of 60 s; the
# consumers renew theirs every second and trust one for 2 s (20 s and 30 s by default).
FAST_LOCKS = {"rebalance_lock_max_live_time": "3000"}
CLIENT_LOCKS = {"rebalance_lock_interval": 1.0, "rebalance_lock_max_live_time": 2.0}

CONSUMER_SCRIPT = r"""
import asyncio, sys, time
from rocketq import ConsumeFrom, ConsumeResult, PushConsumer

async def main():
    out = open(sys.argv[2], "a", buffering=1)
    c = PushConsumer("cg-ordered", sys.argv[1], orderly=True,
                     consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval=1.0,
                     rebalance_lock_interval=1.0, rebalance_lock_max_live_time=2.0)
    c.subscribe("Ordered", "*")

    async def handler(msgs):
        for m in msgs:
            out.write(f"{m.body.decode()} {time.monotonic()}\n")
        await asyncio.sleep(0.002)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    await c.start()
    print("started", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def orderly(ns: str, sink: list[tuple[str, int, float]]) -> PushConsumer:
    c = PushConsumer(
        "cg-ordered",
        ns,
        orderly=True,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        rebalance_interval=1.0,
        **CLIENT_LOCKS,
    )
    c.subscribe("Ordered", "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        for m in msgs:
            key, seq = m.body.decode().split(":")
            sink.append((key, int(seq), time.monotonic()))
        await asyncio.sleep(0.002)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    return c


def first_seen_in_order(events: list[tuple[str, int, float]]) -> dict[str, list[int]]:
    """Per key, the sequence numbers in the order each was first consumed."""
    seen: dict[str, list[int]] = defaultdict(list)
    done: set[tuple[str, int]] = set()
    for key, seq, _ in sorted(events, key=lambda e: e[2]):
        if (key, seq) not in done:
            done.add((key, seq))
            seen[key].append(seq)
    return seen


async def test_orderly_consumers_keep_each_keys_order_through_a_kill_and_a_join(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster = make_cluster(broker_settings=FAST_LOCKS)
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("Ordered", read_queue_nums=8, write_queue_nums=8)
    events: list[tuple[str, int, float]] = []
    out_file = tmp_path / "killed.txt"
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSUMER_SCRIPT, ns, str(out_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    a, b = orderly(ns, events), orderly(ns, events)
    joiner = orderly(ns, events)
    try:
        assert proc.stdout is not None
        started = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        assert started.strip() == b"started"
        await a.start()
        await b.start()
        async with Producer("pg-ordered", ns) as producer:
            for seq in range(PER_KEY):
                for k in range(KEYS):
                    key = f"key{k}"
                    await producer.send(
                        Message("Ordered", f"{key}:{seq}".encode()), sharding_key=key
                    )
                if seq == PER_KEY // 3:
                    await wait_until(
                        lambda: out_file.exists() and out_file.stat().st_size > 0,
                        "the consumer process to consume something",
                    )
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(10)
                if seq == PER_KEY // 2:
                    await joiner.start()

        def killed_events() -> list[tuple[str, int, float]]:
            rows = []
            for line in out_file.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    key, seq = parts[0].split(":")
                    rows.append((key, int(seq), float(parts[1])))
            return rows

        def consumed() -> int:
            return len({(k, s) for k, s, _ in events + killed_events()})

        await wait_until(
            lambda: consumed() >= KEYS * PER_KEY,
            lambda: f"all {KEYS * PER_KEY} messages (have {consumed()})",
            timeout=60,
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in (a, b, joiner):
            await c.shutdown()
    order = first_seen_in_order(events + killed_events())
    assert len(order) == KEYS
    for key, seqs in order.items():
        assert seqs == list(range(PER_KEY)), f"{key} consumed out of order: {seqs}"
    assert killed_events(), "the killed consumer consumed nothing"


async def test_suspend_retries_in_place_then_dead_letters(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("Strict", read_queue_nums=1, write_queue_nums=1)
    seen: list[tuple[bytes, int]] = []

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        m = msgs[0]
        seen.append((m.body, m.reconsume_times))
        if m.body == b"poison":
            return ConsumeResult.SUSPEND
        if m.body == b"flaky" and m.reconsume_times < 2:
            raise RuntimeError("not yet")
        return ConsumeResult.SUCCESS

    c = PushConsumer(
        "cg-strict",
        ns,
        orderly=True,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        max_reconsume_times=3,
        suspend_current_queue_time=0.05,
    )
    c.subscribe("Strict", "*")
    c.on_message(handler)
    async with Producer("pg", ns) as producer:
        for body in (b"first", b"flaky", b"poison", b"last"):
            await producer.send(Message("Strict", body), sharding_key="k")
    await c.start()
    try:
        await wait_until(lambda: any(b == b"last" for b, _ in seen), "the last message", 30)
    finally:
        await c.shutdown()
    assert seen == [
        (b"first", 0),
        (b"flaky", 0),
        (b"flaky", 1),
        (b"flaky", 2),
        (b"poison", 0),
        (b"poison", 1),
        (b"poison", 2),
        (b"poison", 3),
        (b"last", 0),
    ]
    async with Admin(ns) as admin:
        dlq = await admin.topic_status("%DLQ%cg-strict")
    assert sum(q.max_offset for q in dlq) == 1


def test_orderly_broadcasting_is_refused() -> None:
    with pytest.raises(ClientStateError, match="broadcasting consumers cannot be orderly"):
        PushConsumer("g", "127.0.0.1:9876", orderly=True, model=MessageModel.BROADCASTING)
