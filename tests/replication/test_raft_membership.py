"""Membership changes of a Raft group (the membership module and RaftNode): a new member
learns as a learner and votes once caught up, one change at a time, a leader that removes
itself steps down, changes survive a restart and win over the configured peers, a change
cut from a log is undone, and many seeds of changes under faults keep Raft's safety."""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.common.exceptions import NotLeaderError, StoreCorruptError
from rocketq.replication.raft.membership import (
    CONFIG_PREFIX,
    MemberHistory,
    Members,
    MembershipError,
    is_config,
)
from rocketq.replication.raft.node import (
    AppendRequest,
    Entry,
    RaftConfig,
    RaftNode,
    Role,
    VoteRequest,
    VoteResponse,
)
from tests.replication.raft_sim import MemoryHardState, MemoryLog, SimTransport, Simulation

FAST = RaftConfig(heartbeat_interval=0.2, min_vote_interval=0.1, max_vote_interval=0.3)
SEEDS = int(os.environ.get("RAFT_MEMBERSHIP_SEEDS", "60"))


def addr(member: str) -> str:
    return f"10.0.0.{int(member[1:]) + 1}:40911"


class MemberSimulation(Simulation):
    """The simulated group with member histories: each node keeps the peers it was first
    started with (its config file) and a history that survives its crashes (or a file in
    ``root``), and members can be added at run time."""

    def __init__(self, seed: int, size: int = 3, root: Path | None = None, **kw: object) -> None:
        self.root = root
        self.histories: dict[str, MemberHistory] = {}
        self.started_with: dict[str, list[str]] = {}
        self.changes = 0  # membership changes a leader accepted (randomized runs)
        super().__init__(seed, size=size, **kw)  # type: ignore[arg-type]

    def _history(self, node_id: str) -> MemberHistory:
        peers = self.started_with.setdefault(node_id, list(self.ids))
        bootstrap = Members.bootstrap({p: addr(p) for p in peers})
        if self.root is not None:  # read back from the file at every start
            return MemberHistory(bootstrap, self.root / node_id / "members.json")
        return self.histories.setdefault(node_id, MemberHistory(bootstrap))

    def _start(self, node_id: str) -> None:
        history = self._history(node_id)
        super()._start(node_id)
        old = self.nodes[node_id]
        self.nodes[node_id] = RaftNode(
            node_id,
            old.peers,
            old.log,
            old.hard_state,
            old.transport,
            clock=old.clock,
            rng=old.rng,
            config=old.config,
            on_commit=old.on_commit,
            on_role=old.on_role,
            history=history,
        )

    def join(self, node_id: str) -> None:
        """Start a new member, configured with the group it joins and itself."""
        self.ids.append(node_id)
        self.logs[node_id] = MemoryLog()
        self.states[node_id] = MemoryHardState()
        self._start(node_id)

    def run_until(self, done: Callable[[], bool], limit: float = 20.0) -> None:
        end = self.net.now + limit
        while not done():
            assert self.net.now < end, "the condition did not hold in time"
            self.run(self.net.now + 0.1, faults=False)

    def _maybe_fault(self, rng: random.Random) -> None:
        super()._maybe_fault(rng)
        if rng.random() >= 0.003:
            return
        leader = self.leader()
        if leader is None:
            return
        try:
            if rng.random() < 0.5 or len(leader.voters) <= 2:
                new = f"n{len(self.ids)}"
                leader.add_member(new, addr(new))
                self.join(new)
            else:
                leader.remove_member(rng.choice(sorted(leader.voters)))
            self.changes += 1
        except (MembershipError, NotLeaderError):
            pass


def quiet(seed: int = 1, size: int = 3, root: Path | None = None) -> MemberSimulation:
    """A group on a reliable network that has elected a leader."""
    sim = MemberSimulation(seed, size=size, root=root, config=FAST, propose_rate=0.3)
    sim.net.drop = sim.net.duplicate = 0.0
    sim.net.max_delay = 0.01
    sim.run_until(lambda: sim.leader() is not None)
    sim.run(sim.net.now + 0.5, faults=False)  # every follower has heard from it
    return sim


def leader_of(sim: MemberSimulation) -> RaftNode:
    node = sim.leader()
    assert node is not None
    return node


def committed_everywhere(sim: MemberSimulation, index: int, members: list[str]) -> bool:
    return all(m in sim.nodes and sim.nodes[m].commit_index >= index for m in members)


# -- the configuration and its bytes ---------------------------------------------------


def test_members_changes_and_their_errors() -> None:
    start = Members.of({"n0": "h:1", "n1": "h:2", "n2": "h:3"})
    added = start.with_learner("n3", "h:4")
    assert added.voter_ids == {"n0", "n1", "n2"} and added.learner_ids == {"n3"}
    assert added.promoted("n3").voter_ids == {"n0", "n1", "n2", "n3"}
    assert added.without("n0").addresses == {"n1": "h:2", "n2": "h:3", "n3": "h:4"}
    assert Members.decode(added.encode()) == added
    with pytest.raises(MembershipError, match="n1 is a member already"):
        start.with_learner("n1", "h:9")
    with pytest.raises(MembershipError, match="address h:2 is member n1's already"):
        start.with_learner("n3", "h:2")
    with pytest.raises(MembershipError, match="'n9' is not a member"):
        start.without("n9")
    with pytest.raises(MembershipError, match="last voter"):
        Members.of({"n0": "h:1"}).without("n0")
    with pytest.raises(MembershipError, match="not host:port"):
        start.with_learner("n3", "nohost")
    with pytest.raises(MembershipError, match="member id"):
        start.with_learner("bad id", "h:5")


@given(st.binary(max_size=300))
def test_decoding_any_bytes_gives_members_or_a_clear_error(data: bytes) -> None:
    for candidate in (data, CONFIG_PREFIX + data):
        try:
            members = Members.decode(candidate)
        except MembershipError:
            continue
        assert members.voters and is_config(members.encode())


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=12,
    )
)
def test_decoding_any_json_gives_members_or_a_clear_error(doc: object) -> None:
    with contextlib.suppress(MembershipError):
        members = Members.decode(CONFIG_PREFIX + json.dumps(doc).encode())
        assert members.voters


def test_a_damaged_history_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "members.json"
    path.write_text('{"version": 1, "configs": [{"index": "x"}]}')
    with pytest.raises(StoreCorruptError, match="members are unreadable"):
        MemberHistory(Members.bootstrap({"n0": "h:1"}), path)


# -- the node ------------------------------------------------------------------------------


def test_a_new_member_is_a_learner_until_caught_up_then_votes() -> None:
    sim = quiet()
    leader = leader_of(sim)
    assert leader.quorum == 2
    index = leader.add_member("n3", addr("n3"))
    assert leader.learners == {"n3"} and leader.quorum == 2  # the quorum is the old one
    # The new member is not running yet: commits go on without it.
    sim.run_until(lambda: committed_everywhere(sim, index, ["n0", "n1", "n2"]))
    before = leader.commit_index
    sim.run(sim.net.now + 1.0, faults=False)
    assert leader.commit_index > before and leader.learners == {"n3"}
    with pytest.raises(MembershipError, match="n3 is still catching up"):
        leader.add_member("n4", addr("n4"))
    sim.join("n3")
    sim.run_until(lambda: "n3" in leader_of(sim).voters)
    leader = leader_of(sim)
    assert leader.quorum == 3 and not leader.learners
    sim.run_until(lambda: committed_everywhere(sim, leader.config_index, sim.ids))
    for node in sim.nodes.values():
        assert node.voters == {"n0", "n1", "n2", "n3"}
    assert (
        sim.logs["n3"].items[: leader.commit_index]
        == sim.logs[leader.node_id].items[: leader.commit_index]
    )
    # n3 counts for the quorum now: with one old member down, n3's acknowledgement is
    # what commits (three of four); with n3 down too, nothing commits.
    sim.propose_rate = 0.0
    sim.crash(next(m for m in ("n0", "n1", "n2") if m != leader.node_id))
    mark = leader.propose(b"with n3")
    sim.run_until(lambda: leader.commit_index >= mark, limit=2.0)
    sim.crash("n3")
    mark = leader.propose(b"without n3")
    sim.run(sim.net.now + 0.5, faults=False)
    assert leader.commit_index < mark


def test_one_change_at_a_time() -> None:
    sim = quiet()
    leader = leader_of(sim)
    sim.net.down.update(m for m in sim.ids if m != leader.node_id)  # nothing can commit
    leader.remove_member(sorted(leader.voters - {leader.node_id})[0])
    with pytest.raises(MembershipError, match="change is in progress"):
        leader.remove_member(leader.node_id)
    with pytest.raises(MembershipError, match="change is in progress"):
        leader.add_member("n7", addr("n7"))


def test_changes_only_at_the_leader_and_errors_name_the_cause() -> None:
    sim = quiet()
    leader = leader_of(sim)
    follower = next(n for n in sim.nodes.values() if n is not leader)
    with pytest.raises(NotLeaderError, match=f"the leader is {leader.node_id}"):
        follower.add_member("n5", addr("n5"))
    with pytest.raises(MembershipError, match="not a member"):
        leader.remove_member("n9")
    with pytest.raises(MembershipError, match="member already"):
        leader.add_member(follower.node_id, addr("n8"))
    with pytest.raises(MembershipError, match="already"):
        leader.add_member("n8", addr(follower.node_id))
    index = leader.remove_member(follower.node_id)
    sim.run_until(lambda: leader.commit_index >= index)
    with pytest.raises(MembershipError, match="was a member of this group before"):
        leader.add_member(follower.node_id, addr("n9"))


def test_a_removed_leader_steps_down_after_the_commit_and_the_group_goes_on() -> None:
    sim = quiet()
    leader = leader_of(sim)
    gone = leader.node_id
    index = leader.remove_member(gone)
    assert leader.role is Role.LEADER and gone not in leader.voters  # until committed
    sim.run_until(lambda: leader.role is not Role.LEADER)
    assert leader.commit_index >= index
    sim.run_until(lambda: sim.leader() is not None and sim.leader() is not leader, limit=3.0)
    new = leader_of(sim)
    assert new.voters == set(sim.ids) - {gone} and new.quorum == 2
    mark = new.propose(b"after")
    sim.run_until(lambda: new.commit_index >= mark)
    # The removed member never stands again, and its votes are refused.
    term = new.term
    sim.run(sim.net.now + 3.0, faults=False)
    assert leader.role is Role.FOLLOWER and new.term == term
    assert leader.node_id not in sim.leaders.get(leader.term + 1, set())


def test_a_vote_from_a_non_member_is_refused_without_raising_the_term() -> None:
    sent: list[tuple[str, object]] = []

    class Capture:
        def send(self, to: str, msg: object) -> None:
            sent.append((to, msg))

    node = RaftNode(
        "n0",
        ["n1", "n2"],
        MemoryLog(),
        MemoryHardState(),
        Capture(),  # type: ignore[arg-type]
        clock=lambda: 0.0,
        config=FAST,
    )
    node.receive(VoteRequest(9, "n7", 5, 5))
    assert node.term == 0
    assert sent == [("n7", VoteResponse(0, "n0", False, False, "NOT_A_MEMBER"))]


def test_a_change_cut_from_the_log_is_undone() -> None:
    net_log = MemoryLog()
    history = MemberHistory(Members.bootstrap({m: addr(m) for m in ("n0", "n1", "n2")}))
    seen: list[dict[str, str]] = []
    node = RaftNode(
        "n1",
        ["n0", "n2"],
        net_log,
        MemoryHardState(),
        SimTransport.__new__(SimTransport),
        clock=lambda: 0.0,
        config=FAST,
        history=history,
        on_members=seen.append,
    )
    node.transport = type("T", (), {"send": lambda self, to, msg: None})()
    change = Members.bootstrap({m: addr(m) for m in ("n0", "n1", "n2")}).with_learner(
        "n3", addr("n3")
    )
    node.receive(AppendRequest(1, "n0", 0, 0, (Entry(1, b""), Entry(1, change.encode())), 0))
    assert node.learners == {"n3"} and "n3" in node.peers and node.config_index == 2
    assert seen[-1].keys() == {"n0", "n2", "n3"}
    # A new leader of term 2 never had the change: its entry 2 replaces it.
    node.receive(AppendRequest(2, "n2", 1, 1, (Entry(2, b"x"),), 0))
    assert node.learners == set() and node.config_index == 0 and "n3" not in node.peers
    assert history.latest() == (0, history.bootstrap)
    assert seen[-1].keys() == {"n0", "n2"}


def test_the_stored_members_win_over_the_configured_peers_on_restart(tmp_path: Path) -> None:
    sim = quiet(root=tmp_path)
    leader = leader_of(sim)
    victim = next(m for m in sim.ids if m != leader.node_id)
    index = leader.remove_member(victim)
    sim.run_until(lambda: committed_everywhere(sim, index, [m for m in sim.ids if m != victim]))
    for m in list(sim.nodes):
        sim.crash(m)
    for m in sim.ids:
        sim.restart(m)  # each started with its configured peers: all three
    for m in sim.ids:
        if m != victim:
            assert sim.nodes[m].voters == set(sim.ids) - {victim}, m
            assert sim.nodes[m].peers == sorted(set(sim.ids) - {victim, m})
    sim.run_until(lambda: sim.leader() is not None)
    assert leader_of(sim).node_id != victim and leader_of(sim).quorum == 2


# -- safety under faults -----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(SEEDS))
def test_safety_with_membership_changes_under_faults(seed: int) -> None:
    sim = MemberSimulation(
        seed,
        size=3,
        config=RaftConfig(
            heartbeat_interval=0.2,
            min_vote_interval=0.1,
            max_vote_interval=0.3,
            spare_append_interval=0.005 if seed % 2 else 0.0,
        ),
    )
    sim.run(30.0)
    sim.settle(45.0)
    sim.check()
    # Every member agrees on the configuration once the group has settled.
    leader = sim.leader()
    if leader is not None and leader.commit_index >= leader.config_index:
        for m in leader.voters | leader.learners:
            node = sim.nodes.get(m)
            if node is not None and node.log.last_index() >= leader.config_index:
                assert node.voters == leader.voters, (seed, m)


def test_randomized_runs_do_make_changes() -> None:
    """The safety test above is only worth something if its runs change members."""
    made = 0
    for seed in range(10):
        sim = MemberSimulation(seed, size=3, config=FAST)
        sim.run(30.0)
        made += sim.changes
    assert made >= 5


# -- over a real CommitLog -------------------------------------------------------------------


async def test_a_change_entry_is_kept_beside_the_commitlog_not_in_it(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A change entry's raft index unit covers no CommitLog bytes (a follower's CommitLog
    stays the leader's byte for byte); its data is in the member history, which a leader
    puts back into the entries it sends, also after a reopen."""
    from rocketq.replication.raft.store import CommitLogRaftLog, RaftIndex
    from tests.storage.conftest import batch
    from tests.storage.test_replica import log_bytes

    start = Members.bootstrap({m: addr(m) for m in ("n0", "n1", "n2")})
    change = start.with_learner("n3", addr("n3"))
    leader_store = await store_factory(tmp_path / "leader")
    leader = CommitLogRaftLog(leader_store, RaftIndex(tmp_path / "leader-raft" / "index"))
    r = leader_store.append(batch("T", [b"before"]), "T", 0)
    leader.record(1, r.wrote_offset, r.wrote_bytes)
    leader.append([Entry(1, change.encode())])  # as RaftNode._propose_config appends it
    r = leader_store.append(batch("T", [b"after"]), "T", 0)
    leader.record(1, r.wrote_offset, r.wrote_bytes)
    assert leader.index.position(2)[1] == 0 and leader.entries(2, 1) == [Entry(1, b"")]
    history = MemberHistory(start, tmp_path / "leader-raft" / "members.json")
    history.record(2, 1, change)
    node = RaftNode(
        "n0",
        ["n1", "n2"],
        leader,
        MemoryHardState(),
        type("T", (), {"send": lambda self, to, msg: None})(),
        clock=lambda: 0.0,
        history=history,
    )
    sent = node._with_changes(1, leader.entries(1, 10))
    assert [e.data for e in sent][1] == change.encode() and sent[0].data and sent[2].data

    follower_store = await store_factory(tmp_path / "follower")
    follower = CommitLogRaftLog(follower_store, RaftIndex(tmp_path / "follower-raft" / "index"))
    follower.append(sent)
    assert log_bytes(follower_store) == log_bytes(leader_store)  # messages only
    assert follower.index.position(2)[1] == 0
    reopened = MemberHistory(start, tmp_path / "leader-raft" / "members.json")
    assert reopened.latest() == (2, change) and reopened.between(1, 3) == {2: change.encode()}
    assert reopened.between(3, 9) == {}


async def test_a_member_rebuilt_from_a_snapshot_gets_the_membership_again(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """A member rebuilt from a snapshot taken after a change does not go on with the
    membership of its dledger_peers: the change's entry holds no CommitLog bytes, so the
    snapshot carries the group's configurations, and the node takes the newest."""
    from tests.replication.test_raft_snapshot import compact, make_group

    g = await make_group(store_factory, tmp_path)
    for m, node in g.nodes.items():  # members with addresses, as a broker's are
        node.members_history = MemberHistory(Members.bootstrap({m: addr(m) for m in g.nodes}))
        node._use_config()
        g.snaps[m].history = node.members_history  # as RaftMember wires them
    g.nodes["n0"]._start_election()
    g.pump()
    leader = g.nodes["n0"]
    changed = leader.remove_member("n2")
    g.pump()
    assert leader.commit_index >= changed and g.nodes["n1"].voters == {"n0", "n1"}
    g.write("n0", 60)
    for m in ("n0", "n1"):
        compact(g, m, 2)
    assert g.logs["n0"].first_index() > changed
    # n1 loses its disk (its membership file too): it starts from its configured peers.
    await g.stores["n1"].shutdown()
    g.stores["n1"] = await store_factory(tmp_path / "n1-new")
    g.tmp = tmp_path / "new"
    g.hard.pop("n1")
    rebuilt = g.start("n1")
    g.snaps["n1"].history = rebuilt.members_history
    assert rebuilt.voters == {"n0", "n1", "n2"} and rebuilt.config_index == 0
    leader._broadcast(heartbeat=True)
    g.pump()
    assert rebuilt.commit_index > changed
    assert rebuilt.voters == {"n0", "n1"} and rebuilt.config_index == changed
    assert rebuilt.members_history.latest() == leader.members_history.latest()
    assert leader.config_index == changed  # no change entry beyond the one made


def test_a_change_the_log_could_not_take_is_not_kept() -> None:
    """A follower whose store refuses the leader's entries (a full disk) keeps no change
    its log lacks: the membership stays the one its log holds."""
    from rocketq.common.exceptions import ServiceNotAvailableError

    class FullLog(MemoryLog):
        full = True

        def append(self, entries: list[Entry]) -> None:
            if self.full:
                raise ServiceNotAvailableError("the disk is full")
            super().append(entries)

    members = Members.bootstrap({m: addr(m) for m in ("n0", "n1", "n2")})
    history = MemberHistory(members)
    sent: list[object] = []
    log_ = FullLog()
    node = RaftNode(
        "n1",
        ["n0", "n2"],
        log_,
        MemoryHardState(),
        type("T", (), {"send": lambda self, to, msg: sent.append(msg)})(),
        clock=lambda: 0.0,
        history=history,
    )
    change = members.with_learner("n3", addr("n3"))
    request = AppendRequest(1, "n0", 0, 0, (Entry(1, b""), Entry(1, change.encode())), 0)
    node.receive(request)
    assert history.latest() == (0, members) and node.learners == set() and not sent
    log_.full = False
    node.receive(request)
    assert history.latest() == (2, change) and node.learners == {"n3"}


def test_changes_past_a_log_cut_outside_the_node_are_dropped() -> None:
    """A restart's reconcile may cut the log's tail after the node was made: the changes
    there go, and the node uses the newest membership left."""
    members = Members.bootstrap({m: addr(m) for m in ("n0", "n1", "n2")})
    history = MemberHistory(members)
    log_ = MemoryLog()
    change = members.without("n2")
    log_.append([Entry(1, b""), Entry(1, change.encode())])
    history.record(2, 1, change)
    node = RaftNode(
        "n0",
        ["n1", "n2"],
        log_,
        MemoryHardState(),
        type("T", (), {"send": lambda self, to, msg: None})(),
        clock=lambda: 0.0,
        history=history,
    )
    assert node.voters == {"n0", "n1"}
    log_.truncate_after(1)
    node.reload_members()
    assert node.voters == {"n0", "n1", "n2"} and history.latest() == (0, members)
