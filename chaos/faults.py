"""The faults a chaos run injects, each made by :meth:`Faults.inject` and undone by the
:class:`ActiveFault`'s ``heal``:

- ``kill-master``: SIGKILL the master (``ha``) or Raft leader of a group; restart it.
- ``kill-random``: SIGKILL any broker; restart it.
- ``pause``: SIGSTOP the master/leader of a group; SIGCONT.
- ``partition``: cut the master/leader off from the rest of its group (nftables rules in
  its network namespace as root, the TCP proxy between Raft members otherwise); reconnect.
- ``kill-nameserver``: SIGKILL a nameserver; restart it.
- ``kill-consumer``: SIGKILL a consumer process (its queues move to the others); start it
  again (they come back).
- ``restart``: SIGTERM the master/leader of a group (a graceful stop); start it again.
- ``hostile``: a hostile neighbour (:mod:`rocketq.chaos.hostile`) sends every port of every
  live node mutated frames, bombs, floods and slow connections from threads of the harness;
  the heal stops it and closes every socket it opened. Against a cluster with TLS, half
  of its connections to the TLS ports handshake first, so its frames reach the decoders
  behind TLS (and, with auth on, the access check: they are never signed).
- ``disk-full``: fill the small disk of every member of a group while a probe sends to
  it; delete the fillers (:mod:`rocketq.chaos.store_faults`).
- ``wipe-member``: once retention trimmed a group's log, stop a follower or slave and
  delete its store; start it again and time its catch-up.
- ``replace-member`` (Raft): a new member joins a group on new ports; once it caught up, a
  follower is removed from the group and stopped.

Targets are drawn from the run's seeded random generator; the master of a group is the
broker its nameservers list as broker id 0 (with Raft, the leader that registered).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from rocketq.chaos.disk import SmallDisks
from rocketq.chaos.history import ChaosError
from rocketq.chaos.hostile import Hostile, HostileLimits, NodePorts, targets_of
from rocketq.chaos.membership import RaftMembership
from rocketq.chaos.store_faults import DiskFull, ReplaceMember, WipeMember
from rocketq.chaos.workers import Workers
from rocketq.cluster.launcher import LocalCluster, Node
from rocketq.cluster.pids import wait_until

FAULT_KINDS: Final = (
    "kill-master",
    "kill-random",
    "pause",
    "partition",
    "kill-nameserver",
    "kill-consumer",
    "restart",
    "hostile",
    "disk-full",
    "wipe-member",
    "replace-member",
)
# Faults that hit the master / leader of a group.
MASTER_FAULTS: Final = frozenset({"kill-master", "pause", "partition", "restart"})
MASTER_WAIT_S: Final = 15.0  # for a group to have a registered, live master to fault


class Partitioner(Protocol):
    def isolate(self, node: Node) -> None: ...

    def heal(self, node: Node) -> None: ...


@dataclass
class ActiveFault:
    kind: str
    target: str  # a node's or a consumer's name
    group: str | None  # the broker group hit; None for a nameserver or a consumer
    heal: Callable[[], None]
    detail: dict[str, Any] = field(default_factory=dict)  # what the heal reports
    # Undoes what must not outlive the run (a full disk's fillers) when it is torn down
    # before the heal; None when stopping the cluster is enough.
    undo: Callable[[], None] | None = None


def parse_faults(text: str) -> tuple[str, ...]:
    """``"kill-master,pause"`` -> the kinds, each known, in the given order, no repeats."""
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise ChaosError(
            f"--faults: unknown fault {', '.join(unknown) or '(none given)'}; choose from "
            + ", ".join(FAULT_KINDS)
        )
    return kinds


class Faults:
    def __init__(
        self,
        cluster: LocalCluster,
        workers: Workers,
        consumers: list[str],
        rng: random.Random,
        *,
        partitioner: Partitioner | None = None,
        hostile_limits: HostileLimits | None = None,
        disks: SmallDisks | None = None,
    ) -> None:
        self.cluster = cluster
        self.workers = workers
        self.consumers = consumers
        self.rng = rng
        self.partitioner = partitioner
        self.hostile_limits = hostile_limits
        self.disks = disks
        self.groups = sorted({b.broker_name for b in cluster.brokers})
        # Members taken out of their group for good (replace-member): not restarted, not
        # expected to catch up.
        self.removed: set[str] = set()
        self.membership = RaftMembership(cluster, self.removed, disks)

    # ---------------------------------------------------------------- targets

    def master(self, group: str) -> Node | None:
        """The live broker the nameservers list as the group's broker id 0."""
        status = self.cluster.status()
        if status.registered is None:
            return None
        addr = status.registered.get(group, {}).get(0)
        for node in self.cluster.group_members(group):
            if node.addr == addr and self.cluster.is_alive(node.name):
                return node
        return None

    def _pick_master(self) -> Node:
        group = self.rng.choice(self.groups)
        found: list[Node] = []

        def registered() -> bool:
            node = self.master(group)
            if node is not None:
                found.append(node)
            return node is not None

        if not wait_until(registered, time.monotonic() + MASTER_WAIT_S):
            raise ChaosError(f"{group} has no live registered master to fault")
        return found[-1]

    # ---------------------------------------------------------------- faults

    def inject(self, kind: str) -> ActiveFault:
        """Make the fault now; -> how to heal it."""
        c = self.cluster
        if kind in MASTER_FAULTS:
            node = self._pick_master()
            if kind == "kill-master":
                c.kill(node.name, signal.SIGKILL)
                return ActiveFault(kind, node.name, node.broker_name, lambda: c.restart(node.name))
            if kind == "restart":
                c.kill(node.name, signal.SIGTERM)
                return ActiveFault(kind, node.name, node.broker_name, lambda: c.restart(node.name))
            if kind == "pause":
                c.pause(node.name)
                return ActiveFault(kind, node.name, node.broker_name, lambda: c.resume(node.name))
            partitioner = self.partitioner
            if partitioner is None:
                raise ChaosError("this run was started without a way to partition")
            partitioner.isolate(node)
            return ActiveFault(kind, node.name, node.broker_name, lambda: partitioner.heal(node))
        if kind == "kill-random":
            node = self.rng.choice([b for b in c.brokers if c.is_alive(b.name)])
            c.kill(node.name, signal.SIGKILL)
            return ActiveFault(kind, node.name, node.broker_name, lambda: c.restart(node.name))
        if kind == "kill-nameserver":
            node = self.rng.choice(c.nameservers)
            c.kill(node.name, signal.SIGKILL)
            return ActiveFault(kind, node.name, None, lambda: c.restart(node.name))
        if kind == "kill-consumer":
            name = self.rng.choice(self.consumers)
            self.workers.kill(name, signal.SIGKILL)
            return ActiveFault(kind, name, None, lambda: self.workers.start(name))
        if kind == "hostile":
            return self._hostile()
        if kind in ("disk-full", "wipe-member", "replace-member"):
            return self._store_fault(kind)
        raise ChaosError(f"unknown fault {kind!r}; choose from {', '.join(FAULT_KINDS)}")

    def _store_fault(self, kind: str) -> ActiveFault:
        c = self.cluster
        group = self.rng.choice(self.groups)
        if kind == "disk-full":
            if self.disks is None:
                raise ChaosError("this run was started without small disks for disk-full")

            def master_addr() -> str | None:
                node = self.master(group)
                return node.addr if node is not None else None

            full = DiskFull(c, self.disks, group, master_addr)
            full.start()
            return ActiveFault(kind, group, group, full.heal, full.detail, undo=full.stop_quietly)
        if kind == "wipe-member":
            wipe = WipeMember(c, group, self.rng.choice)
            wipe.start()
            return ActiveFault(kind, wipe.target, group, wipe.heal, wipe.detail)
        replace = ReplaceMember(c, self.membership, group, self.rng.choice)
        replace.start()
        return ActiveFault(kind, replace.target, group, replace.heal, replace.detail)

    def _hostile(self) -> ActiveFault:
        c = self.cluster
        nodes = []
        for node in c.nodes:
            if not c.is_alive(node.name):
                continue
            known = {node.port: "remoting"}
            if node.raft_port:
                known[node.raft_port] = "raft"
            if node.metrics_port:
                known[node.metrics_port] = "metrics"
            nodes.append(NodePorts(node.name, node.role, node.host, node.pid, known))
        # A cluster with TLS serves it on every remoting, HA and Raft port, HTTPS on metrics.
        tls_kinds = ("remoting", "ha", "raft", "metrics") if c.certs is not None else ()
        targets = targets_of(nodes, tls_kinds=tls_kinds)
        if not targets:
            raise ChaosError("no live node to send hostile traffic to")
        neighbour = Hostile(targets, seed=self.rng.randrange(2**31), limits=self.hostile_limits)
        fault = ActiveFault("hostile", "every-node", None, lambda: None)

        def heal() -> None:
            fault.detail.update(neighbour.stop())
            if neighbour.alive() or neighbour.open_sockets():
                raise ChaosError(
                    f"the hostile traffic did not stop: {neighbour.open_sockets()} sockets open"
                )

        fault.heal = heal
        neighbour.start()
        return fault
