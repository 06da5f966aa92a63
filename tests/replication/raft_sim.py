"""A deterministic simulation of a Raft group: simulated clock, a network that drops,
delays, duplicates, reorders and partitions messages, and crashes that keep only what was
persisted, all drawn from one seeded random generator (a seed replays a run exactly).

It records what the invariants need: the leader of every term, every commit each node
reached, and every entry acknowledged to a client.
"""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass, field

from rocketq.common.exceptions import NotLeaderError
from rocketq.replication.raft.node import Entry, Message, RaftConfig, RaftNode, Role


class MemoryLog:
    def __init__(self) -> None:
        self.items: list[Entry] = []

    def first_index(self) -> int:
        return 1  # never compacted

    def last_index(self) -> int:
        return len(self.items)

    def term_at(self, index: int) -> int:
        return self.items[index - 1].term if index > 0 else 0

    def entries(self, start: int, max_count: int) -> list[Entry]:
        return self.items[start - 1 : start - 1 + max_count]

    def append(self, entries: list[Entry]) -> None:
        self.items.extend(entries)

    def truncate_after(self, index: int) -> None:
        del self.items[index:]


class MemoryHardState:
    def __init__(self) -> None:
        self.term = 0
        self.voted_for: str | None = None

    def load(self) -> tuple[int, str | None]:
        return self.term, self.voted_for

    def save(self, term: int, voted_for: str | None) -> None:
        self.term, self.voted_for = term, voted_for


@dataclass
class SimNetwork:
    rng: random.Random
    drop: float = 0.05
    duplicate: float = 0.02
    min_delay: float = 0.001
    max_delay: float = 0.030
    # Pairs that cannot talk (both directions), and nodes that are down.
    cut: set[frozenset[str]] = field(default_factory=set)
    down: set[str] = field(default_factory=set)
    queue: list[tuple[float, int, str, str, Message]] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)
    now: float = 0.0

    def deliverable(self, src: str, dst: str) -> bool:
        return (
            src not in self.down and dst not in self.down and frozenset((src, dst)) not in self.cut
        )

    def send(self, src: str, dst: str, msg: Message) -> None:
        if not self.deliverable(src, dst) or self.rng.random() < self.drop:
            return
        copies = 2 if self.rng.random() < self.duplicate else 1
        for _ in range(copies):
            # Independent delays reorder messages.
            at = self.now + self.rng.uniform(self.min_delay, self.max_delay)
            heapq.heappush(self.queue, (at, next(self.seq), src, dst, msg))


class SimTransport:
    def __init__(self, net: SimNetwork, node_id: str) -> None:
        self.net, self.node_id = net, node_id

    def send(self, to: str, msg: Message) -> None:
        self.net.send(self.node_id, to, msg)


@dataclass
class Simulation:
    seed: int
    size: int = 3
    config: RaftConfig = field(default_factory=RaftConfig)
    propose_rate: float = 0.2  # chance per 10 ms step that a client proposes

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.net = SimNetwork(random.Random(self.rng.random()))
        # Each seed its own weather: how lossy the network is, how often things break.
        self.net.drop = self.rng.uniform(0.0, 0.3)
        self.net.duplicate = self.rng.uniform(0.0, 0.1)
        self.net.max_delay = self.rng.uniform(0.005, 0.2)
        self.fault_rate = self.rng.uniform(0.5, 2.0)
        self.ids = [f"n{i}" for i in range(self.size)]
        self.logs = {i: MemoryLog() for i in self.ids}
        self.states = {i: MemoryHardState() for i in self.ids}
        self.nodes: dict[str, RaftNode] = {}
        self.leaders: dict[int, set[str]] = {}  # term -> nodes that led it
        self.acked: dict[int, bytes] = {}  # index -> data acknowledged to a client
        self.pending: dict[int, tuple[int, bytes, str]] = {}  # index -> (term, data, leader)
        self.commits: dict[str, int] = {}
        self.committed_log: list[Entry] = []  # the longest committed prefix seen
        self.proposals = itertools.count()
        for i in self.ids:
            self._start(i)

    def _start(self, node_id: str) -> None:
        def on_role(role: Role, term: int, leader: str | None, node_id: str = node_id) -> None:
            if role is Role.LEADER:
                self.leaders.setdefault(term, set()).add(node_id)

        def on_commit(index: int, node_id: str = node_id) -> None:
            self._on_commit(node_id, index)

        self.nodes[node_id] = RaftNode(
            node_id,
            [p for p in self.ids if p != node_id],
            self.logs[node_id],
            self.states[node_id],
            SimTransport(self.net, node_id),
            clock=lambda: self.net.now,
            rng=random.Random(self.rng.random()),
            config=self.config,
            on_commit=on_commit,
            on_role=on_role,
        )

    def _on_commit(self, node_id: str, index: int) -> None:
        log = self.logs[node_id]
        prefix = log.items[:index]
        known = self.committed_log
        common = min(len(prefix), len(known))
        assert prefix[:common] == known[:common], (
            f"seed {self.seed}: {node_id} committed a log that differs from one committed "
            "before (state machine safety)"
        )
        if len(prefix) > len(known):
            self.committed_log = list(prefix)
        self.commits[node_id] = max(self.commits.get(node_id, 0), index)
        # Client acknowledgements: a leader answers a proposal once it is committed.
        node = self.nodes[node_id]
        if node.role is Role.LEADER:
            for i, (term, data, leader) in list(self.pending.items()):
                if i <= index and leader == node_id and term == node.term:
                    assert log.items[i - 1] == Entry(term, data)
                    self.acked[i] = data
                    del self.pending[i]

    # -- faults ------------------------------------------------------------------------

    def crash(self, node_id: str) -> None:
        """The process dies: only the hard state and the log (fsynced) remain."""
        self.net.down.add(node_id)
        self.nodes.pop(node_id, None)

    def restart(self, node_id: str) -> None:
        self.net.down.discard(node_id)
        self._start(node_id)

    def partition(self, group: set[str]) -> None:
        self.net.cut = {frozenset((a, b)) for a in group for b in self.ids if b not in group}

    def heal(self) -> None:
        self.net.cut = set()

    # -- running -----------------------------------------------------------------------

    def leader(self) -> RaftNode | None:
        live = [n for n in self.nodes.values() if n.role is Role.LEADER]
        return max(live, key=lambda n: n.term) if live else None

    def propose(self) -> None:
        node = self.leader()
        if node is None:
            return
        data = b"cmd-%d" % next(self.proposals)
        try:
            index = node.propose(data)
        except NotLeaderError:
            return
        self.pending[index] = (node.term, data, node.node_id)

    def run(self, until: float, *, step: float = 0.01, faults: bool = True) -> None:
        rng = self.rng
        while self.net.now < until:
            self.net.now = round(self.net.now + step, 6)
            while self.net.queue and self.net.queue[0][0] <= self.net.now:
                _, _, src, dst, msg = heapq.heappop(self.net.queue)
                node = self.nodes.get(dst)
                if node is not None and self.net.deliverable(src, dst):
                    node.receive(msg)
            for node in list(self.nodes.values()):
                node.tick()
            if rng.random() < self.propose_rate:
                self.propose()
            if faults:
                self._maybe_fault(rng)

    def _maybe_fault(self, rng: random.Random) -> None:
        r = rng.random() / self.fault_rate
        live = [i for i in self.ids if i not in self.net.down]
        if r < 0.004 and len(live) > 1:
            # Crash the leader more often than not: that is where the danger is.
            leader = self.leader()
            victim = leader.node_id if leader and rng.random() < 0.6 else rng.choice(live)
            self.crash(victim)
        elif r < 0.008 and self.net.down:
            self.restart(rng.choice(sorted(self.net.down)))
        elif r < 0.012:
            side = {i for i in self.ids if rng.random() < 0.5}
            self.partition(side)
        elif r < 0.018:
            self.heal()

    def settle(self, until: float) -> None:
        """Heal everything and run without faults, so a leader commits what it can."""
        self.heal()
        for i in sorted(self.net.down):
            self.restart(i)
        self.run(until, faults=False)

    # -- invariants --------------------------------------------------------------------

    def check(self) -> None:
        seed = self.seed
        for term, nodes in self.leaders.items():
            assert len(nodes) == 1, f"seed {seed}: term {term} had leaders {sorted(nodes)}"
        logs = [self.logs[i].items for i in self.ids]
        for a, b in itertools.combinations(logs, 2):
            # Log matching: the same index and term means the same prefix.
            for idx in range(min(len(a), len(b)), 0, -1):
                if a[idx - 1].term == b[idx - 1].term:
                    assert a[:idx] == b[:idx], f"seed {seed}: logs diverge below index {idx}"
                    break
        final = self.committed_log
        for index, data in self.acked.items():
            assert index <= len(final) and final[index - 1].data == data, (
                f"seed {seed}: acknowledged entry {index} ({data!r}) is not in the final "
                "committed log"
            )
        # Leader completeness: the newest leader holds everything committed.
        leader = self.leader()
        if leader is not None:
            mine = self.logs[leader.node_id].items
            committed = max(self.commits.values(), default=0)
            assert mine[:committed] == final[:committed], (
                f"seed {seed}: leader {leader.node_id} lacks committed entries"
            )
