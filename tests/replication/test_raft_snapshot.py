"""Rebuilding a Raft member from a snapshot, over real stores: compaction of the raft index
with the CommitLog, a leader that sends a snapshot when a follower needs entries below its
first index, chunks checked, refused and sent again, resumed after a follower's restart,
the rebuilt store consumable; members that are being rebuilt do not vote, and commits
count only members holding the entries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rocketq.replication.raft.membership import MemberHistory, Members
from rocketq.replication.raft.node import (
    AppendRequest,
    CompactedError,
    Entry,
    Message,
    RaftNode,
    Role,
    SnapshotAck,
    SnapshotChunk,
    VoteRequest,
    VoteResponse,
)
from rocketq.replication.raft.snapshot import CommitLogSnapshots
from rocketq.replication.raft.store import CommitLogRaftLog, RaftIndex
from rocketq.storage.message_store import MessageStore
from tests.replication.raft_sim import MemoryHardState
from tests.storage.conftest import batch
from tests.storage.test_replica import log_bytes

CHUNK = 8 * 1024  # small chunks: a test snapshot spans several


class Group:
    """Three members over real stores, messages carried by :meth:`pump` (a filter may
    drop or change them on the way)."""

    def __init__(self, tmp_path: Path, stores: dict[str, MessageStore]) -> None:
        self.tmp = tmp_path
        self.stores = stores
        self.inbox: list[tuple[str, Message]] = []
        self.filter: Callable[[str, Message], Message | None] = lambda to, m: m
        self.nodes: dict[str, RaftNode] = {}
        self.logs: dict[str, CommitLogRaftLog] = {}
        self.snaps: dict[str, CommitLogSnapshots] = {}
        self.hard: dict[str, MemoryHardState] = {}
        for i in stores:
            self.start(i)

    def start(self, i: str) -> RaftNode:
        group = self

        class Direct:
            def send(self, to: str, msg: Message) -> None:
                group.inbox.append((to, msg))

        idx = RaftIndex(self.tmp / f"{i}-raft" / "index")
        self.logs[i] = CommitLogRaftLog(self.stores[i], idx)
        self.snaps[i] = CommitLogSnapshots(
            self.logs[i], self.tmp / f"{i}-raft" / "snapshot", chunk_size=CHUNK
        )
        self.hard.setdefault(i, MemoryHardState())
        node = RaftNode(
            i,
            [p for p in self.stores if p != i],
            self.logs[i],
            self.hard[i],
            Direct(),
            clock=lambda: 0.0,
            snapshots=self.snaps[i],
            on_commit=lambda index, i=i: self.stores[i].commit(self.logs[i].end_of(index)),
        )
        self.nodes[i] = node
        return node

    def pump(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if not self.inbox:
                return
            to, msg = self.inbox.pop(0)
            kept = self.filter(to, msg)
            if kept is not None and to in self.nodes:
                self.nodes[to].receive(kept)
        raise AssertionError("messages never settled")

    def write(self, leader: str, count: int) -> None:
        node, store = self.nodes[leader], self.stores[leader]
        for i in range(count):
            r = store.append(batch("T", [b"m" * 700, b"%d" % i]), "T", i % 2)
            self.logs[leader].record(node.term, r.wrote_offset, r.wrote_bytes)
            node.replicate()
            self.pump()


async def make_group(
    store_factory: Callable[..., Any], tmp_path: Path, ids: tuple[str, ...] = ("n0", "n1", "n2")
) -> Group:
    stores = {i: await store_factory(tmp_path / i) for i in ids}
    return Group(tmp_path, stores)


def compact(group: Group, member: str, segments: int) -> None:
    """Retention on ``member``: its oldest segments go (committed ones only)."""
    store = group.stores[member]
    assert store.commitlog.files.files[segments].file_from_offset <= store.committed_offset
    store.commitlog.files.delete_first(segments)
    group.logs[member].compact()


async def trimmed_group(
    store_factory: Callable[..., Any], tmp_path: Path, writes: int, segments: int
) -> Group:
    """A group whose leader n0 wrote ``writes`` entries and whose members all deleted
    their oldest ``segments`` segments."""
    g = await make_group(store_factory, tmp_path)
    g.nodes["n0"]._start_election()
    g.pump()
    g.write("n0", writes)
    for m in ("n0", "n1", "n2"):
        compact(g, m, segments)
    return g


async def wipe(g: Group, store_factory: Callable[..., Any], tmp_path: Path) -> RaftNode:
    """n2 loses its disk and starts again: a new store, index and hard state."""
    await g.stores["n2"].shutdown()
    g.stores["n2"] = await store_factory(tmp_path / "n2-new")
    g.tmp = tmp_path / "new"
    g.hard.pop("n2")
    return g.start("n2")


async def test_index_compacts_with_the_commitlog_and_answers_compacted(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    store: MessageStore = await store_factory(tmp_path / "s")
    raft = CommitLogRaftLog(store, RaftIndex(tmp_path / "raft" / "index"))
    for i in range(60):  # 16 KiB segments: several
        r = store.append(batch("T", [b"x" * 900, b"%d" % i]), "T", 0)
        raft.record(1 + i // 30, r.wrote_offset, r.wrote_bytes)
    assert raft.first_index() == 1
    store.commitlog.files.delete_first(2)
    first = raft.first_index()
    assert first > 1 and raft.index.position(first)[0] >= store.min_phy_offset
    assert raft.term_at(first - 1) in (1, 2)  # the base's term is kept
    with pytest.raises(CompactedError, match="compacted"):
        raft.entries(first - 1, 5)
    with pytest.raises(CompactedError):
        raft.term_at(first - 2)
    assert raft.entries(first, 2)[0].data  # what is held reads as before
    # The compacted index survives a reopen: the base unit and the units after it.
    raft.index.close()
    again = RaftIndex(tmp_path / "raft" / "index")
    assert (again.first_index(), again.last_index()) == (first, 60)
    assert again.units == raft.index.units
    again.close()


async def test_leader_sends_a_snapshot_and_the_rebuilt_member_follows(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    g = await trimmed_group(store_factory, tmp_path, writes=60, segments=2)
    leader = g.nodes["n0"]
    assert g.logs["n0"].first_index() > 1
    fresh = await wipe(g, store_factory, tmp_path)
    assert fresh.blank and not fresh.installing
    chunks: list[SnapshotChunk] = []

    def watch(to: str, msg: Message) -> Message | None:
        if isinstance(msg, SnapshotChunk):
            chunks.append(msg)
            assert not g.nodes["n2"].rebuilding_for(0) or g.nodes["n2"].installing
        return msg

    g.filter = watch
    leader._broadcast(heartbeat=True)
    g.pump()
    assert chunks and len({c.offset for c in chunks}) > 1  # several chunks
    assert not fresh.installing and fresh.commit_index >= chunks[0].last_index
    store, lead_store = g.stores["n2"], g.stores["n0"]
    assert store.min_phy_offset == lead_store.min_phy_offset
    assert log_bytes(store) == log_bytes(lead_store)
    assert g.logs["n2"].first_index() == g.logs["n0"].first_index()
    # It follows the log as usual from there, and its queues are consumable.
    g.write("n0", 10)
    leader._broadcast(heartbeat=True)
    g.pump()
    assert g.logs["n2"].last_index() == g.logs["n0"].last_index()
    assert log_bytes(store) == log_bytes(lead_store)
    store.refresh_queue_offsets()
    lead_store.refresh_queue_offsets()
    for q in (0, 1):
        assert store.max_offset_in_queue("T", q) == lead_store.max_offset_in_queue("T", q)
        low = store.min_offset_in_queue("T", q)
        assert low == lead_store.min_offset_in_queue("T", q) > 0
        got = store.get_messages("T", q, low, max_count=4)
        assert got.message_count == 4 and got.status.name == "FOUND"


async def test_bad_chunks_are_refused_and_sent_again_and_a_restart_resumes(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    g = await trimmed_group(store_factory, tmp_path, writes=80, segments=3)
    await wipe(g, store_factory, tmp_path)
    acks: list[SnapshotAck] = []
    state = {"corrupted": 0, "delivered": 0}

    def faults(to: str, msg: Message) -> Message | None:
        if isinstance(msg, SnapshotAck):
            acks.append(msg)
        if isinstance(msg, SnapshotChunk):
            if msg.offset == CHUNK and not state["corrupted"]:
                state["corrupted"] += 1
                return replace(msg, payload=b"\0" + msg.payload[1:])  # a flipped byte
            state["delivered"] += 1
            if state["delivered"] == 4:
                return None  # the link breaks here: everything after it is lost too
            if state["delivered"] > 4:
                return None
        return msg

    g.filter = faults
    leader = g.nodes["n0"]
    leader._broadcast(heartbeat=True)
    g.pump()
    assert any(a.reason == "BAD_CHUNK" and a.next_offset == CHUNK for a in acks)
    received, size = g.snaps["n2"].progress()
    assert 0 < received < size and received % CHUNK == 0
    # n2 restarts mid-snapshot: it still is rebuilding (votes refused), and goes on
    # from the bytes it has, not from zero.
    restarted = g.start("n2")
    assert restarted.installing and g.snaps["n2"].progress() == (received, size)
    g.inbox.append(("n2", VoteRequest(leader.term + 1, "n1", 10_000, leader.term, pre=True)))
    refused: list[VoteResponse] = []
    sent_again: list[int] = []

    def healed(to: str, msg: Message) -> Message | None:
        if isinstance(msg, VoteResponse):
            refused.append(msg)
            return None
        if isinstance(msg, SnapshotChunk):
            sent_again.append(msg.offset)
        return msg

    g.filter = healed
    g.pump()
    assert refused and not refused[0].granted and refused[0].reason == "REBUILDING"
    leader.next_heartbeat = 0.0
    leader._broadcast(heartbeat=True)  # the leader sends again what was not acknowledged
    g.pump()
    assert not restarted.installing
    # Only what it lacked crossed again (one chunk may be asked for twice on the way).
    assert sent_again and min(sent_again) >= received - CHUNK
    assert log_bytes(g.stores["n2"]) == log_bytes(g.stores["n0"])


async def test_quorum_counts_only_members_holding_the_entries(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A leader and one rebuilding follower (the third member down) commit nothing new
    until the follower has installed and holds the entries; afterwards they commit."""
    g = await trimmed_group(store_factory, tmp_path, writes=60, segments=2)
    del g.nodes["n1"]  # down
    await wipe(g, store_factory, tmp_path)
    leader = g.nodes["n0"]
    held = {"chunks": []}  # type: dict[str, list[tuple[str, Message]]]

    def hold(to: str, msg: Message) -> Message | None:
        if isinstance(msg, SnapshotChunk) and to == "n2":
            held["chunks"].append((to, msg))
            return None
        return msg

    g.filter = hold
    before = leader.commit_index
    store = g.stores["n0"]
    r = store.append(batch("T", [b"during the rebuild"]), "T", 0)
    g.logs["n0"].record(leader.term, r.wrote_offset, r.wrote_bytes)
    leader.replicate()
    g.pump()
    assert leader.commit_index == before  # n2 holds none of it: no quorum
    assert held["chunks"]
    g.filter = lambda to, m: m
    g.inbox.extend(held["chunks"])
    leader._broadcast(heartbeat=True)
    g.pump()
    assert leader.commit_index == g.logs["n0"].last_index() > before


async def test_a_blank_member_votes_only_in_a_new_group(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    g = await make_group(store_factory, tmp_path)
    n2 = g.nodes["n2"]
    assert n2.blank
    # A new group: every log empty, the candidate's too: granted.
    g.inbox.append(("n2", VoteRequest(1, "n0", 0, 0)))
    # A candidate with entries asks a blank member (a wiped disk): refused.
    g.inbox.append(("n2", VoteRequest(2, "n1", 5, 1)))
    responses: list[tuple[str, Message]] = []

    def record(to: str, msg: Message) -> Message | None:
        if to == "n2":
            return msg
        responses.append((to, msg))  # its answers are kept, not delivered
        return None

    g.filter = record
    g.pump()
    votes = [m for _, m in responses if isinstance(m, VoteResponse)]
    assert [(v.granted, v.reason) for v in votes] == [(True, ""), (False, "REBUILDING")]
    # A heartbeat alone changes nothing; once a leader has sent it entries it is an
    # ordinary voter again.
    n2.receive(AppendRequest(2, "n1", 0, 0, (), 0))
    assert n2.blank
    r = g.stores["n2"].append(batch("T", [b"x"]), "T", 0)
    data = bytes(g.stores["n2"].commitlog.read(r.wrote_offset, r.wrote_bytes) or b"")
    g.stores["n2"].truncate_to(0)
    n2.receive(AppendRequest(2, "n1", 0, 0, (Entry(2, data),), 0))
    assert not n2.blank and n2.log.last_index() == 1
    responses.clear()
    n2.receive(VoteRequest(3, "n1", 5, 2))
    g.pump()
    assert [(m.granted, m.reason) for _, m in responses if isinstance(m, VoteResponse)] == [
        (True, "")
    ]


async def test_a_leader_never_starts_counting_a_snapshot_it_cannot_read(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """Retention on the leader mid-snapshot: the offer is dropped and another one made
    from the new min offset; the follower ends up with the leader's bytes."""
    g = await trimmed_group(store_factory, tmp_path, writes=80, segments=2)
    await wipe(g, store_factory, tmp_path)
    ids: set[int] = set()
    state = {"n": 0}

    def retention_mid_way(to: str, msg: Message) -> Message | None:
        if isinstance(msg, SnapshotChunk):
            ids.add(msg.snapshot_id)
            state["n"] += 1
            if state["n"] == 3:
                compact(g, "n0", 1)
        return msg

    g.filter = retention_mid_way
    leader = g.nodes["n0"]
    leader._broadcast(heartbeat=True)
    g.pump()
    leader._broadcast(heartbeat=True)
    g.pump()
    assert len(ids) == 2 and not g.nodes["n2"].installing
    assert g.stores["n2"].min_phy_offset == g.stores["n0"].min_phy_offset
    assert log_bytes(g.stores["n2"]) == log_bytes(g.stores["n0"])
    assert g.nodes["n0"].role is Role.LEADER


async def test_a_snapshot_carries_the_group_configurations(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A membership change's entry holds no CommitLog bytes: its configuration travels in
    the snapshot and replaces what the rebuilt member's history held."""
    leader_store: MessageStore = await store_factory(tmp_path / "leader")
    follower_store: MessageStore = await store_factory(tmp_path / "follower")
    lead = CommitLogRaftLog(leader_store, RaftIndex(tmp_path / "l-raft" / "index"))
    bootstrap = Members.of({"n0": "127.0.0.1:1", "n1": "127.0.0.1:2", "n2": "127.0.0.1:3"})
    lead_history = MemberHistory(bootstrap)
    for i in range(60):
        r = leader_store.append(batch("T", [b"x" * 900, b"%d" % i]), "T", 0)
        lead.record(1, r.wrote_offset, r.wrote_bytes)
        if i in (10, 50):  # a change entry: a unit of no bytes, its data in the history
            lead.record(1, leader_store.max_phy_offset, 0)
            members = bootstrap.with_learner("n3", "127.0.0.1:4")
            lead_history.record(lead.last_index(), 1, members if i == 10 else bootstrap)
    leader_store.commitlog.files.delete_first(2)
    source = CommitLogSnapshots(lead, tmp_path / "l-snap", chunk_size=CHUNK, history=lead_history)
    follow = CommitLogRaftLog(follower_store, RaftIndex(tmp_path / "f-raft" / "index"))
    stale = MemberHistory(bootstrap)
    stale.record(3, 1, bootstrap.with_learner("n9", "127.0.0.1:9"))  # from its old log
    sink = CommitLogSnapshots(follow, tmp_path / "f-snap", chunk_size=CHUNK, history=stale)
    offer = source.offer(lead.last_index())
    assert offer is not None and offer.last_index == lead.last_index()
    offset, installed = 0, 0
    while not installed:
        chunk = replace(source.chunk(offer, offset), term=1, leader="n0")
        offset, _, installed = sink.accept(chunk)
    assert installed == lead.last_index()
    assert [(i, t) for i, t, _ in stale.configs] == [(i, t) for i, t, _ in lead_history.configs]
    assert stale.latest()[1].voter_ids == {"n0", "n1", "n2"} and not stale.latest()[1].learner_ids
    assert log_bytes(follower_store) == log_bytes(leader_store)
    assert (follow.first_index(), follow.last_index()) == (lead.first_index(), lead.last_index())


async def test_a_member_behind_the_compaction_point_keeps_nothing_stale(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A member down while the others wrote and trimmed their logs comes back with its old
    store: it is sent a snapshot, empties its store (CommitLog, queues, index) and ends
    with the leader's bytes and queues, consumable."""
    g = await make_group(store_factory, tmp_path)
    g.nodes["n0"]._start_election()
    g.pump()
    g.write("n0", 20)
    away = g.nodes.pop("n2")  # down
    g.write("n0", 80)
    for m in ("n0", "n1"):
        compact(g, m, 4)
    assert g.logs["n0"].first_index() > g.logs["n2"].last_index() + 1
    g.nodes["n2"] = away  # back, with its old store
    leader = g.nodes["n0"]
    leader._broadcast(heartbeat=True)
    g.pump()
    store, lead_store = g.stores["n2"], g.stores["n0"]
    assert g.snaps["n2"].installed == 1 and not away.installing
    assert log_bytes(store) == log_bytes(lead_store)
    store.refresh_queue_offsets()
    lead_store.refresh_queue_offsets()
    for q in (0, 1):
        low = store.min_offset_in_queue("T", q)
        assert low == lead_store.min_offset_in_queue("T", q)
        assert store.max_offset_in_queue("T", q) == lead_store.max_offset_in_queue("T", q)
        got = store.get_messages("T", q, low, max_count=4)
        assert got.message_count == 4
