"""The Raft state machine under a simulated network that drops, delays, duplicates,
reorders and partitions messages and crashes nodes, over many seeds: one leader per term,
matching logs, leaders holding everything committed, and every entry acknowledged to a
client in the final committed log. A failing seed is named in the assertion; replay it
with ``RAFT_SEED=<seed> pytest tests/replication/test_raft_sim.py -k replay``.
"""

from __future__ import annotations

import os

import pytest

from rocketq.common.exceptions import NotLeaderError
from rocketq.replication.raft.node import (
    AppendResponse,
    RaftConfig,
    Role,
    VoteResponse,
)
from tests.replication.raft_sim import Simulation

# Fast timers so a short simulated run sees many elections.
FAST = RaftConfig(heartbeat_interval=0.2, min_vote_interval=0.1, max_vote_interval=0.3)
SEEDS = int(os.environ.get("RAFT_SEEDS", "300"))


def config_of(seed: int) -> RaftConfig:
    """A third of the seeds run without pre-vote, so the vote's own log check is tested;
    half send spare followers their entries in batches (as brokers do by default)."""
    return RaftConfig(
        heartbeat_interval=0.2,
        min_vote_interval=0.1,
        max_vote_interval=0.3,
        pre_vote=seed % 3 != 0,
        spare_append_interval=0.005 if seed % 2 else 0.0,
    )


def run_seed(seed: int, size: int = 3, config: RaftConfig | None = None) -> Simulation:
    sim = Simulation(seed, size=size, config=config or config_of(seed))
    sim.run(30.0)
    sim.settle(40.0)
    sim.check()
    return sim


@pytest.mark.parametrize("seed", range(SEEDS))
def test_safety_under_faults(seed: int) -> None:
    run_seed(seed, size=3 if seed % 4 else 5)


def test_replay() -> None:
    """Runs the seed in RAFT_SEED (default 0): the same seed, the same run."""
    seed = int(os.environ.get("RAFT_SEED", "0"))
    a, b = run_seed(seed), run_seed(seed)
    assert a.committed_log == b.committed_log and a.leaders == b.leaders


def test_progress_after_faults_heal() -> None:
    """Once the network heals, a leader is elected and commits new entries."""
    sims = [run_seed(seed) for seed in range(5)]
    for sim in sims:
        leader = sim.leader()
        assert leader is not None, f"seed {sim.seed}: no leader after healing"
        before = len(sim.committed_log)
        for _ in range(5):
            sim.propose()
        sim.run(sim.net.now + 5.0, faults=False)
        assert len(sim.committed_log) > before, f"seed {sim.seed}: nothing committed"
        assert len(sim.acked) > 0


def test_default_timers_elect_within_dledger_bounds() -> None:
    """With DLedger's timers (2 s heartbeats, 3 missed), a group elects a leader within
    about 7 s of start and again after its leader dies."""
    sim = Simulation(7, config=RaftConfig())
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(8.0, faults=False)
    first = sim.leader()
    assert first is not None and first.role is Role.LEADER
    sim.crash(first.node_id)
    died = sim.net.now
    while sim.leader() is None or sim.leader() is first:
        sim.run(sim.net.now + 0.1, faults=False)
        assert sim.net.now - died < 10.0, "no new leader within 10 s"
    assert sim.net.now - died <= 8.0


def test_isolated_node_does_not_depose_the_leader() -> None:
    """Pre-vote: a node cut off for a long time does not raise its term, so when it comes
    back the healthy leader stays."""
    sim = Simulation(3, config=FAST)
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(3.0, faults=False)
    leader = sim.leader()
    assert leader is not None
    loner = next(i for i in sim.ids if i != leader.node_id)
    term = leader.term
    sim.partition({loner})
    sim.run(sim.net.now + 10.0, faults=False)
    assert sim.nodes[loner].term == term  # pre-votes failed: no term raised
    sim.heal()
    sim.run(sim.net.now + 3.0, faults=False)
    assert sim.leader() is leader and leader.term == term


def test_leader_without_a_majority_steps_down() -> None:
    sim = Simulation(5, size=5, config=FAST)
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(3.0, faults=False)
    leader = sim.leader()
    assert leader is not None
    sim.partition({leader.node_id})
    sim.run(sim.net.now + 2.0, faults=False)
    assert leader.role is not Role.LEADER  # stepped down: no writes on the minority side


def test_figure_8_an_old_term_entry_is_never_committed_by_counting() -> None:
    """Raft paper, figure 8: a leader must not commit an entry of an earlier term because
    a majority holds it (a later leader could still overwrite it); it commits such entries
    only through an entry of its own term."""
    from rocketq.replication.raft.node import Entry, RaftNode
    from tests.replication.raft_sim import MemoryHardState, MemoryLog

    class Silent:
        def send(self, to: str, msg: object) -> None:
            pass

    log = MemoryLog()
    log.append([Entry(1, b""), Entry(1, b"X")])
    state = MemoryHardState()
    state.term = 2
    commits: list[int] = []
    node = RaftNode(
        "n0",
        ["n1", "n2", "n3", "n4"],
        log,
        state,
        Silent(),  # type: ignore[arg-type]
        clock=lambda: 0.0,
        on_commit=commits.append,
    )
    node._start_election()  # term 3
    for voter in ("n1", "n2"):
        node.receive(VoteResponse(3, voter, True))
    assert node.role is Role.LEADER and log.items[-1] == Entry(3, b"")  # its own empty entry
    # n1 and n2 hold X (index 2, term 1): a majority with the leader, but not of term 3.
    for follower in ("n1", "n2"):
        node.receive(AppendResponse(3, follower, True, 2))
    assert node.commit_index == 0 and commits == []
    # Once a majority holds the term-3 entry, it and everything before it commit.
    node.receive(AppendResponse(3, "n1", True, 3))
    node.receive(AppendResponse(3, "n2", True, 3))
    assert node.commit_index == 3 and commits == [3]


def test_votes_go_only_to_candidates_with_a_log_at_least_as_new() -> None:
    from rocketq.replication.raft.node import Entry, RaftNode, VoteRequest
    from tests.replication.raft_sim import MemoryHardState, MemoryLog

    sent: list[object] = []

    class Capture:
        def send(self, to: str, msg: object) -> None:
            sent.append(msg)

    log = MemoryLog()
    log.append([Entry(1, b""), Entry(2, b"a")])
    state = MemoryHardState()
    node = RaftNode("n1", ["n0", "n2"], log, state, Capture(), clock=lambda: 0.0)  # type: ignore[arg-type]
    node.receive(VoteRequest(3, "n0", last_index=5, last_term=1))  # longer, but older term
    node.receive(VoteRequest(3, "n2", last_index=2, last_term=2))
    node.receive(VoteRequest(3, "n0", last_index=9, last_term=2))  # already voted for n2
    assert [(m.granted, m.reason) for m in sent] == [  # type: ignore[attr-defined]
        (False, "LOG_BEHIND"),
        (True, ""),
        (False, "ALREADY_VOTED"),
    ]
    assert state.load() == (3, "n2")  # saved before the answer went out


def test_leadership_transfer_hands_over_to_the_target() -> None:
    sim = Simulation(21, size=3, config=FAST, propose_rate=0.0)
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(3.0, faults=False)
    old = sim.leader()
    assert old is not None
    for i in range(5):
        old.propose(b"before %d" % i)
    target = next(i for i in sim.ids if i != old.node_id)
    old.transfer_leadership(target)
    with pytest.raises(NotLeaderError):
        old.propose(b"during the handover")  # no new entries while handing over
    sim.run(sim.net.now + 1.0, faults=False)
    new = sim.leader()
    assert new is not None and new.node_id == target and new.term == old.term
    assert old.role is Role.FOLLOWER
    new.propose(b"after")
    sim.run(sim.net.now + 1.0, faults=False)
    sim.check()
    assert [e.data for e in sim.committed_log if e.data][-6:] == [
        *(b"before %d" % i for i in range(5)),
        b"after",
    ]


def test_transfer_to_a_dead_member_is_abandoned() -> None:
    sim = Simulation(22, size=3, config=FAST, propose_rate=0.0)
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(3.0, faults=False)
    leader = sim.leader()
    assert leader is not None
    target = next(i for i in sim.ids if i != leader.node_id)
    sim.crash(target)
    leader.transfer_leadership(target)
    sim.run(sim.net.now + 1.0, faults=False)  # longer than the election timeout
    assert leader.role is Role.LEADER
    leader.propose(b"still leading")  # accepts writes again


def test_a_lost_connection_from_the_leader_starts_a_fast_election() -> None:
    """With DLedger's timers, followers whose connection from a dead leader broke stand
    after the short vote pause, not after three missed heartbeats (6 s)."""
    sim = Simulation(11, config=RaftConfig())
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(8.0, faults=False)
    first = sim.leader()
    assert first is not None
    sim.crash(first.node_id)
    died = sim.net.now
    for node in sim.nodes.values():
        if node is not first:
            node.peer_lost(first.node_id)
    while sim.leader() is None or sim.leader() is first:
        sim.run(sim.net.now + 0.05, faults=False)
        assert sim.net.now - died < 5.0, "no new leader within 5 s"
    assert sim.net.now - died <= 2.5


def test_a_lost_connection_alone_does_not_depose_a_live_leader() -> None:
    """Pre-vote: one follower losing its connection from a healthy leader asks, the other
    follower still hears the leader and refuses (LEADER_ALIVE); the leader stays."""
    sim = Simulation(12, config=FAST)
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(3.0, faults=False)
    leader = sim.leader()
    assert leader is not None
    term = leader.term
    follower = next(n for n in sim.nodes.values() if n is not leader)
    follower.peer_lost(leader.node_id)
    sim.run(sim.net.now + 3.0, faults=False)
    assert sim.leader() is leader and leader.term == term


def test_a_member_that_lost_its_log_is_copied_again() -> None:
    """A follower whose disk was wiped answers GAP below what it had acknowledged: the
    leader lowers its match index and sends everything again (no tight resend loop)."""
    sim = Simulation(13, config=FAST)
    sim.net.drop = sim.net.duplicate = 0.0
    sim.run(3.0, faults=False)
    leader = sim.leader()
    assert leader is not None
    for _ in range(20):
        sim.propose()
    sim.run(sim.net.now + 2.0, faults=False)
    victim = next(i for i in sim.ids if i != leader.node_id)
    assert leader.progress[victim].match_index >= 20
    sim.crash(victim)
    sim.logs[victim].items.clear()
    sim.states[victim].term, sim.states[victim].voted_for = 0, None
    had = len(sim.logs[leader.node_id].items)
    sim.restart(victim)
    sim.run(sim.net.now + 3.0, faults=False)
    copied = sim.logs[victim].items
    assert len(copied) >= had
    assert copied == sim.logs[leader.node_id].items[: len(copied)]
