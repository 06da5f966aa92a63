"""A Raft member rebuilt from a snapshot, on real processes: a group of three with 64 KiB
CommitLog segments and retention at every run (``delete_when`` every hour,
``file_reserved_time`` 0, a run every 300 ms) fills past several segments and every member
trims its log; a follower's store is wiped and it restarts; it is sent a snapshot,
catches up (the same CommitLog bytes from the leader's min offset, its Raft lag shown in
cluster-list), and when the leader is then killed, the two remaining members (the rebuilt
one and the other) elect a leader that commits, and what was sent is consumable."""

from __future__ import annotations

import asyncio
import shutil
import signal
from pathlib import Path

from rocketq import Message, Producer
from rocketq.cli.cluster_list import HEADER, rows
from rocketq.sdk.admin import Admin
from tests.integration.conftest import MakeCluster
from tests.integration.test_raft import (
    FAST_RAFT,
    consume_all,
    make_topic,
    members,
    wait_leader,
)
from tests.integration.waiting import wait_until

SEGMENT = 64 * 1024
RETENTION_EVERY_RUN = {
    "mapped_file_size_commit_log": str(SEGMENT),
    "delete_when": ";".join(f"{h:02d}" for h in range(24)),
    "file_reserved_time": "0",
    "clean_resource_interval": "300",
}


def commitlog_range(store: Path, start: int, end: int) -> bytes:
    """CommitLog bytes [start, end) read from a member's segment files."""
    root = store / "commitlog"
    out = bytearray()
    pos = start
    while pos < end:
        seg = pos - pos % SEGMENT
        with (root / f"{seg:020d}").open("rb") as f:
            f.seek(pos - seg)
            piece = f.read(min(end, seg + SEGMENT) - pos)
        assert piece, f"segment {seg} ends early"
        out += piece
        pos += len(piece)
    return bytes(out)


async def test_wiped_member_is_rebuilt_after_retention_and_the_group_commits_without_the_leader(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(replication="raft", broker_settings={**FAST_RAFT, **RETENTION_EVERY_RUN})
    ns = cluster.namesrv_addr
    await make_topic(ns, "Rebuild")
    leader = await wait_leader(cluster)
    victim, other = (n for n in cluster.brokers if n is not leader)
    body = b"r" * 2000
    async with Producer("pg-rebuild", ns) as producer:
        for i in range(200):  # about 400 KiB: six segments and more
            assert (await producer.send(Message("Rebuild", body + b"%d" % i))).ok

    async def trimmed_everywhere() -> bool:
        info = await members(ns)
        mins = [int(info.get(n.addr, {}).get("commitLogMinOffset", "0")) for n in cluster.brokers]
        return all(m >= 4 * SEGMENT for m in mins)

    await wait_until(trimmed_everywhere, "retention to trim every member", timeout=15)
    cluster.kill(victim.name, signal.SIGKILL)
    shutil.rmtree(victim.store)  # the disk is lost
    await asyncio.to_thread(cluster.restart, victim.name)

    async def caught_up() -> bool:
        info = await members(ns)
        lead, v = info.get(leader.addr, {}), info.get(victim.addr, {})
        return (
            v.get("raftRebuilding") == "false"
            and v.get("raftSnapshotsInstalled") == "1"
            and v.get("commitLogMinOffset") == lead.get("commitLogMinOffset")
            and v.get("commitLogMaxOffset") == lead.get("commitLogMaxOffset")
            and v.get("raftCommittedOffset") == lead.get("raftCommittedOffset")
            and v.get("dispatchBehindBytes") == "0"
        )

    await wait_until(caught_up, "the wiped member to be rebuilt and catch up", timeout=20)
    info = await members(ns)
    start = int(info[leader.addr]["commitLogMinOffset"])
    end = int(info[leader.addr]["commitLogMaxOffset"])
    assert start > 0 and end > start
    assert commitlog_range(victim.store, start, end) == commitlog_range(leader.store, start, end)
    # cluster-list shows each member's Raft lag, not "-": the leader its followers', each
    # follower its own (as the leader counts it).
    async with Admin(ns) as admin:
        table = {r[3]: dict(zip(HEADER, r, strict=True)) for r in rows(await admin.cluster_list())}
    victim_id = info[victim.addr]["raftSelfId"]
    assert table[victim.addr]["replication_lag"] == "0"
    assert f"{victim_id}:0" in str(table[leader.addr]["replication_lag"]).split()

    # The leader dies: the rebuilt member and the other one elect a leader that commits.
    cluster.kill(leader.name, signal.SIGKILL)
    new_leader = await wait_leader(cluster, not_=leader)
    assert new_leader in (victim, other)
    after = {b"after %d" % i for i in range(20)}
    async with Producer("pg-rebuild-2", ns) as producer:
        for b in sorted(after):
            assert (await producer.send(Message("Rebuild", b), timeout=10)).ok
    await consume_all(ns, "cg-rebuild", "Rebuild", after)
