"""A SYNC_MASTER's slave whose store was wiped, on real processes: the master's retention
already deleted its oldest segments, and the slave, started again on an empty store,
copies everything from the master's min offset: its CommitLog from there is the master's
byte for byte, every message the master still holds is pulled from the slave, and SYNC
sends are acknowledged again."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path

from rocketq import Message, Producer, SendStatus
from rocketq.remoting.transport import connect
from rocketq.sdk.wire import PullOutcome, parse_pull, pull_request
from tests.integration.conftest import MakeCluster
from tests.integration.test_ha import make_topic, runtime, slave_connected
from tests.integration.waiting import wait_until

SEGMENT = 1024 * 1024
QUEUES = 4
SETTINGS = {
    "broker_role": "SYNC_MASTER",
    "mapped_file_size_commit_log": str(SEGMENT),
    # Segments written over an hour ago go at the next run, every 200 ms, at any hour:
    # the test ages the master's first segments by hand.
    "file_reserved_time": "1",
    "delete_when": ";".join(str(h) for h in range(24)),
    "clean_resource_interval": "200",
}


def log_from(store: Path, start: int, end: int) -> bytes:
    """The CommitLog bytes [start, end) of a store's segments."""
    out = bytearray()
    for segment in sorted((store / "commitlog").iterdir()):
        base = int(segment.name)
        if base + SEGMENT <= start or base >= end:
            continue
        data = segment.read_bytes()
        out += data[max(start - base, 0) : min(end - base, SEGMENT)]
    return bytes(out)


async def queue_records(addr: str, topic: str, queue_id: int) -> tuple[int, int, list[bytes]]:
    """(min offset, max offset, the records from the min) of one queue, pulled."""
    conn = await connect(addr, {}, timeout=5)
    records: list[bytes] = []
    try:

        async def pull(offset: int) -> tuple[int, int, int, bytes]:
            request = pull_request(
                group="cg-rebuild", topic=topic, queue_id=queue_id, offset=offset, subscription="*"
            )
            reply = parse_pull(await conn.invoke(request, 10))
            if reply.outcome is PullOutcome.FOUND:
                return reply.min_offset, reply.max_offset, reply.next_begin_offset, reply.records
            return reply.min_offset, reply.max_offset, -1, b""

        lo, hi, _, _ = await pull(0)  # (offset 0 is gone: the answer names the min)
        offset = lo
        while offset < hi:
            _, _, offset, chunk = await pull(offset)
            assert offset > 0, f"queue {queue_id}: nothing found at an offset below {hi}"
            records.append(chunk)
    finally:
        conn.close()
    return lo, hi, records


async def test_a_wiped_slave_copies_the_master_from_its_min_offset(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(replication="ha", broker_settings=SETTINGS)
    ns = cluster.namesrv_addr
    master, slave = cluster.brokers
    await make_topic(ns, "Rebuild", queues=QUEUES)
    await slave_connected(ns)
    body = os.urandom(16 * 1024)  # (random: the producer compresses what it can)
    async with Producer("pg-rebuild", ns, retry_times_when_send_failed=0) as producer:
        sends = iter(range(300))  # about 4.8 MiB: five segments

        async def sender() -> None:
            for i in sends:
                result = await producer.send(Message("Rebuild", b"%04d" % i + body))
                assert result.status is SendStatus.SEND_OK, result.status

        await asyncio.gather(*(sender() for _ in range(8)))

        # The slave's disk is wiped; the master's first three segments age past
        # file_reserved_time (while it is stopped: a running store knows when it wrote).
        cluster.kill(slave.name, signal.SIGKILL)
        shutil.rmtree(slave.store)
        cluster.kill(master.name, signal.SIGTERM)
        segments = sorted((master.store / "commitlog").iterdir())
        assert len(segments) >= 5
        hours_ago = time.time() - 2 * 3600
        for segment in segments[:3]:
            os.utime(segment, (hours_ago, hours_ago))
        cluster.restart(master.name)

        async def retained() -> bool:
            info = (await runtime(ns))[("broker-a", 0)]
            return int(info["commitLogMinOffset"]) == 3 * SEGMENT

        await wait_until(retained, "the master to delete its three aged segments")
        cluster.restart(slave.name)

        async def copied() -> bool:
            info = await runtime(ns)
            m, s = info[("broker-a", 0)], info[("broker-a", 1)]
            return (
                m["commitLogMaxOffset"] == s["commitLogMaxOffset"]
                and s["dispatchBehindBytes"] == "0"
            )

        await wait_until(copied, "the wiped slave to copy the master")
        info = await runtime(ns)
        assert info[("broker-a", 1)]["commitLogMinOffset"] == str(3 * SEGMENT)
        end = int(info[("broker-a", 0)]["commitLogMaxOffset"])
        assert log_from(slave.store, 3 * SEGMENT, end) == log_from(master.store, 3 * SEGMENT, end)
        for q in range(QUEUES):
            held = await queue_records(master.addr, "Rebuild", q)
            assert held[0] > 0, "the master's queue still starts at 0"
            assert await queue_records(slave.addr, "Rebuild", q) == held
        assert "its CommitLog starts at the master's offset 3145728" in slave.log.read_text()

        # SYNC_MASTER is acknowledged by its rebuilt slave again.
        await slave_connected(ns)
        after = await producer.send(Message("Rebuild", b"after the rebuild"))
        assert after.status is SendStatus.SEND_OK
