"""Transactional messages on real processes: commit, rollback, UNKNOWN resolved by a check,
a producer killed mid-transaction whose group-mate answers, a broker restart in between,
and a half message discarded after transaction_check_max checks.

The brokers here check every 300 ms and ask about half messages older than 1 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    PushConsumer,
    SendStatus,
    TransactionProducer,
    TransactionState,
)
from rocketq.sdk.admin import Admin
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until

FAST_CHECKS = {
    "transaction_check_interval": "300",
    "transaction_timeout": "1000",
    "transaction_check_max": "3",
}


class Listener:
    def __init__(self, execute: TransactionState, check: TransactionState) -> None:
        self.execute, self.check = execute, check
        self.executed: list[tuple[bytes, Any]] = []
        self.checked: list[MessageExt] = []

    async def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
        self.executed.append((msg.body, arg))
        return self.execute

    def check_local_transaction(self, msg: MessageExt) -> TransactionState:  # plain: a thread
        self.checked.append(msg)
        return self.check


async def checker_passed(ns: str) -> bool:
    """The check service's progress has reached the end of the half queue: every half
    message so far was ended, asked about or discarded."""
    async with Admin(ns) as admin:
        progress = await admin.consumer_progress("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC")
    return bool(progress) and all(p.consumer_offset >= p.broker_offset > 0 for p in progress)


async def visible(ns: str, topic: str) -> int:
    async with Admin(ns) as admin:
        return sum(q.max_offset for q in await admin.topic_status(topic))


async def make_topic(ns: str, topic: str) -> None:
    async with Admin(ns) as admin:
        await admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)


async def test_commit_is_seen_once_and_rollback_never(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(broker_settings=FAST_CHECKS)
    ns = cluster.namesrv_addr
    await make_topic(ns, "Tx")
    got: list[MessageExt] = []
    consumer = PushConsumer("cg-tx", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("Tx", "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(handler)
    await consumer.start()
    commit = Listener(TransactionState.COMMIT, TransactionState.ROLLBACK)
    rollback = Listener(TransactionState.ROLLBACK, TransactionState.COMMIT)
    try:
        async with TransactionProducer("tpg-commit", ns, listener=commit) as p:
            r = await p.send_message_in_transaction(Message("Tx", b"paid"), arg=42)
            assert r.status is SendStatus.SEND_OK and r.local_state is TransactionState.COMMIT
        async with TransactionProducer("tpg-rollback", ns, listener=rollback) as p:
            r = await p.send_message_in_transaction(Message("Tx", b"cancelled"))
            assert r.local_state is TransactionState.ROLLBACK
        assert commit.executed == [(b"paid", 42)]
        await wait_until(lambda: len(got) >= 1, "the committed message")
        # The check service goes past both half messages without asking anybody.
        await wait_until(lambda: checker_passed(ns), "the check service to pass them")
    finally:
        await consumer.shutdown()
    assert [m.body for m in got] == [b"paid"]
    assert got[0].properties.get("TRAN_MSG") is None and got[0].topic == "Tx"
    assert await visible(ns, "Tx") == 1
    assert commit.checked == [] and rollback.checked == []


async def test_unknown_is_resolved_by_a_check(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(broker_settings=FAST_CHECKS)
    ns = cluster.namesrv_addr
    await make_topic(ns, "TxUnknown")
    listener = Listener(TransactionState.UNKNOWN, TransactionState.COMMIT)
    async with TransactionProducer("tpg-unknown", ns, listener=listener) as p:
        r = await p.send_message_in_transaction(Message("TxUnknown", b"later"))
        assert r.local_state is TransactionState.UNKNOWN
        assert await visible(ns, "TxUnknown") == 0
        await wait_until(lambda: listener.checked, "a transaction check", timeout=15)

        async def committed() -> bool:
            return await visible(ns, "TxUnknown") == 1

        await wait_until(committed, "the checked message to be committed")
    assert listener.checked[0].body == b"later"
    assert listener.checked[0].msg_id == r.msg_id


async def test_unanswered_half_message_is_discarded_after_max_checks(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(broker_settings=FAST_CHECKS)
    ns = cluster.namesrv_addr
    await make_topic(ns, "TxNever")
    listener = Listener(TransactionState.UNKNOWN, TransactionState.UNKNOWN)
    async with TransactionProducer("tpg-never", ns, listener=listener) as p:
        await p.send_message_in_transaction(Message("TxNever", b"limbo"))
        await wait_until(lambda: len(listener.checked) >= 3, "three checks", timeout=20)
        # The third copy is discarded, not asked about: the checker passes it.
        await wait_until(lambda: checker_passed(ns), "the check service to discard it")
    assert len(listener.checked) == 3  # transaction_check_max
    assert await visible(ns, "TxNever") == 0
    log = (cluster.brokers[0].log).read_text()
    assert "checked 3 times without an answer; discarded" in log


KILLED_PRODUCER = r"""
import asyncio, sys
from rocketq import Message
from rocketq import TransactionProducer, TransactionState

class Stuck:
    async def execute_local_transaction(self, msg, arg):
        print("executing", flush=True)
        await asyncio.Event().wait()  # killed here, mid-transaction
    def check_local_transaction(self, msg):
        return TransactionState.UNKNOWN

async def main():
    async with TransactionProducer("tpg-shared", sys.argv[1], listener=Stuck()) as p:
        await p.send_message_in_transaction(Message("TxKilled", b"orphan"))

asyncio.run(main())
"""


async def test_group_mate_answers_for_a_killed_producer_across_a_broker_restart(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(broker_settings={**FAST_CHECKS, "transaction_check_max": "15"})
    ns = cluster.namesrv_addr
    await make_topic(ns, "TxKilled")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_PRODUCER, ns],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        assert line.strip() == b"executing"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The half message survives a broker restart (it is in the store, not in memory).
    cluster.restart(cluster.brokers[0].name)
    assert await visible(ns, "TxKilled") == 0
    mate = Listener(TransactionState.UNKNOWN, TransactionState.COMMIT)
    async with TransactionProducer("tpg-shared", ns, listener=mate):

        async def committed() -> bool:
            return await visible(ns, "TxKilled") == 1

        await wait_until(committed, "the group-mate's answer to commit it", timeout=20)
    assert [m.body for m in mate.checked][:1] == [b"orphan"]


async def test_ended_transactions_stay_ended_across_a_restart(make_cluster: MakeCluster) -> None:
    """Op records are in the store too: after a restart nothing already ended is checked."""
    cluster = make_cluster(broker_settings={**FAST_CHECKS, "transaction_timeout": "500"})
    ns = cluster.namesrv_addr
    await make_topic(ns, "TxEnded")
    listener = Listener(TransactionState.COMMIT, TransactionState.ROLLBACK)
    async with TransactionProducer("tpg-ended", ns, listener=listener) as p:
        await p.send_message_in_transaction(Message("TxEnded", b"done"))
        cluster.restart(cluster.brokers[0].name)
        await wait_until(lambda: checker_passed(ns), "the check service to pass it")
    assert listener.checked == []
    assert await visible(ns, "TxEnded") == 1


async def test_check_immunity_time_delays_the_first_check(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(broker_settings=FAST_CHECKS)
    ns = cluster.namesrv_addr
    await make_topic(ns, "TxImmune")
    listener = Listener(TransactionState.UNKNOWN, TransactionState.COMMIT)
    async with TransactionProducer("tpg-immune", ns, listener=listener) as p:
        sent_at = time.monotonic()
        msg = Message("TxImmune", b"wait", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "3"})
        await p.send_message_in_transaction(msg)
        await wait_until(lambda: listener.checked, "the first check", timeout=15)
        first_check = time.monotonic() - sent_at
    assert first_check >= 3.0, f"checked after {first_check:.1f} s, before its immunity"
