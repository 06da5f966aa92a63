"""A Raft member's state on disk: the term and vote, the raft index, and the CommitLog as
the Raft log (a follower's CommitLog byte-identical to its leader's, segment rolls too)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.exceptions import StoreCorruptError
from rocketq.replication.raft.node import Entry
from rocketq.replication.raft.store import UNIT, CommitLogRaftLog, HardStateFile, RaftIndex
from rocketq.storage.message_store import MessageStore
from tests.storage.conftest import batch
from tests.storage.test_replica import log_bytes


def test_hard_state_round_trip_and_damage(tmp_path: Path) -> None:
    hs = HardStateFile(tmp_path / "raft" / "state.json")
    hs.path.parent.mkdir()
    assert hs.load() == (0, None)
    hs.save(7, "n2")
    assert HardStateFile(hs.path).load() == (7, "n2")
    hs.path.write_text('{"term": "x"}')
    with pytest.raises(StoreCorruptError, match="vote twice"):
        hs.load()


def test_raft_index_reopens_and_cuts_a_torn_unit(tmp_path: Path) -> None:
    path = tmp_path / "raft" / "index"
    idx = RaftIndex(path)
    for i in range(1, 6):
        idx.append(i, i * 100, 10)
    idx.truncate_after(4)
    idx.close()
    with path.open("ab") as f:
        f.write(b"\x01" * (UNIT.size // 2))  # a unit torn by a crash
    again = RaftIndex(path)
    assert again.last_index() == 4 and again.term_at(4) == 4 and again.position(2) == (200, 10)
    assert path.stat().st_size == 4 * UNIT.size
    again.close()


async def test_follower_commitlog_is_the_leaders_byte_for_byte(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    leader_store: MessageStore = await store_factory(tmp_path / "leader")
    follower_store: MessageStore = await store_factory(tmp_path / "follower")
    leader = CommitLogRaftLog(leader_store, RaftIndex(tmp_path / "leader-raft" / "index"))
    follower = CommitLogRaftLog(follower_store, RaftIndex(tmp_path / "follower-raft" / "index"))
    leader.record(1, leader_store.max_phy_offset, 0)  # a new leader's empty entry
    for i in range(40):  # 16 KiB segments: several rolls
        r = leader_store.append(batch("T", [b"x" * 900, b"y%d" % i]), "T", i % 2)
        leader.record(1 + i // 20, r.wrote_offset, r.wrote_bytes)
    assert leader.last_index() == 41
    follower.append(leader.entries(1, 100))
    assert follower.last_index() == 41
    assert [follower.term_at(i) for i in (1, 20, 41)] == [1, 1, 2]
    assert log_bytes(follower_store) == log_bytes(leader_store)
    assert follower.entries(5, 3) == leader.entries(5, 3)
    # A divergent suffix goes: entries, and the CommitLog bytes behind them.
    follower.truncate_after(30)
    assert follower.last_index() == 30
    assert follower_store.max_phy_offset == leader.end_of(30)
    follower.append(leader.entries(31, 100))
    assert log_bytes(follower_store) == log_bytes(leader_store)
    assert follower.entries(41, 1) == [Entry(2, leader.entries(41, 1)[0].data)]


async def test_raft_over_two_commitlogs_commits_and_copies_byte_for_byte(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A leader and two followers, each a RaftNode over a real store: the leader appends
    batches to its CommitLog, records them at its term and replicates; the followers'
    CommitLogs become byte-identical and everything commits."""
    from rocketq.replication.raft.node import Message, RaftNode, Role
    from tests.replication.raft_sim import MemoryHardState

    ids = ["n0", "n1", "n2"]
    stores = {i: await store_factory(tmp_path / i) for i in ids}
    logs = {
        i: CommitLogRaftLog(stores[i], RaftIndex(tmp_path / f"{i}-raft" / "index")) for i in ids
    }
    inbox: list[tuple[str, Message]] = []

    class Direct:
        def __init__(self, me: str) -> None:
            self.me = me

        def send(self, to: str, msg: Message) -> None:
            inbox.append((to, msg))

    nodes = {
        i: RaftNode(
            i,
            [p for p in ids if p != i],
            logs[i],
            MemoryHardState(),
            Direct(i),
            clock=lambda: 0.0,
        )
        for i in ids
    }

    def pump() -> None:
        while inbox:
            to, msg = inbox.pop(0)
            nodes[to].receive(msg)

    nodes["n0"]._start_election()
    pump()
    leader = nodes["n0"]
    assert leader.role is Role.LEADER
    for i in range(30):
        r = stores["n0"].append(batch("T", [b"m" * 800, b"%d" % i]), "T", i % 2)
        logs["n0"].record(leader.term, r.wrote_offset, r.wrote_bytes)
        leader.replicate()
        pump()
    last = logs["n0"].last_index()
    assert leader.commit_index == last
    leader._broadcast(heartbeat=True)  # the next heartbeat tells the followers
    pump()
    assert all(n.commit_index == last for n in nodes.values())
    for i in ("n1", "n2"):
        assert log_bytes(stores[i]) == log_bytes(stores["n0"])


async def test_reconcile_after_a_crash_between_append_and_record(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    store: MessageStore = await store_factory(tmp_path / "s")
    raft = CommitLogRaftLog(store, RaftIndex(tmp_path / "raft" / "index"))
    for i in range(3):
        r = store.append(batch("T", [b"kept %d" % i]), "T", 0)
        raft.record(1, r.wrote_offset, r.wrote_bytes)
    recorded_end = store.max_phy_offset
    store.append(batch("T", [b"written, never recorded"]), "T", 0)
    raft.reconcile()
    assert store.max_phy_offset == recorded_end and raft.last_index() == 3
    # And units past the CommitLog's end (its recovery cut a torn tail) go.
    raft.index.append(1, recorded_end, 500)
    raft.reconcile()
    assert raft.last_index() == 3 and store.max_phy_offset == recorded_end
