"""The faults of a member's disk: a full disk (``disk-full``), a member whose disk was
replaced (``wipe-member``), and a Raft member replaced by a new one on another address
(``replace-member``). Each is started by ``start`` and undone by ``heal``; what the heal
measured goes into ``detail``, which the run writes into the fault's ``fault_end`` record
and the report reads (:mod:`rocketq.chaos.store_report`).

- ``disk-full``: every member of a group with a small disk (:class:`~rocketq.chaos.disk.
  SmallDisks`) gets a filler file grown until ENOSPC and kept full while the fault holds;
  the heal deletes the fillers. A :class:`~rocketq.chaos.members.WriteProbe` sends to the
  group's master all along: ``refused_ms`` is from its first refused send to its first
  accepted one after it, ``resumed_ms`` from the fillers' deletion to that accepted send.
  A member process that exits while its disk is full is noted in ``exits``.
- ``wipe-member``: once retention has trimmed the group's log (its leader's or master's
  min offset above 0; the run's brokers are given small segments and retention for
  that), a follower or slave is stopped (SIGTERM) and its store deleted; the heal starts
  it again and waits until it holds what its leader or master held when it was started:
  ``catch_up_ms`` from the start to that moment.
- ``replace-member``: a new member of a Raft group joins on new ports and is added to the
  group; the heal waits until it has caught up (``catch_up_ms``, from the add), then
  removes a follower of the group (never its leader) and stops it for good. A new member
  that does not catch up is left in the group and nothing is removed.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from rocketq.chaos.disk import Filler, SmallDisks, wipe_store
from rocketq.chaos.history import ChaosError
from rocketq.chaos.members import (
    MemberOffsets,
    WriteProbe,
    group_leader,
    wait_member_has,
)
from rocketq.chaos.membership import RaftMembership
from rocketq.cluster.launcher import LocalCluster, Node

KEEP_FULL_PERIOD_S: Final = 0.2
RESUME_TIMEOUT_S: Final = 30.0  # for a group to take writes again once space is back
RETENTION_WAIT_S: Final = 60.0  # for retention to trim a group's log before a wipe
LEADER_WAIT_S: Final = 15.0
CATCH_UP_TIMEOUT_S: Final = 60.0  # for a wiped or new member to hold what its leader held


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


class DiskFull:
    """Fill every small disk of ``group``'s members while a probe sends to its master."""

    def __init__(
        self,
        cluster: LocalCluster,
        disks: SmallDisks,
        group: str,
        master: Callable[[], str | None],
    ) -> None:
        self.cluster = cluster
        self.group = group
        self.members = [
            n
            for n in cluster.group_members(group)
            if n.home in disks.mounts and cluster.is_alive(n.name)
        ]
        if not self.members:
            raise ChaosError(f"no live member of {group} has a small disk to fill")
        self.target = group
        self.fillers = [Filler(n.home) for n in self.members]
        self.probe = WriteProbe(cluster, master)
        self.detail: dict[str, Any] = {"group": group, "members": [n.name for n in self.members]}
        self.exits: dict[str, float] = {}
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep_full, name="chaos-disk-full", daemon=True)
        self._errors: list[str] = []

    def _fill_all(self) -> None:
        for filler in self.fillers:
            try:
                filler.fill()
            except OSError as exc:
                self._errors.append(f"{filler.path}: {exc}")

    def _note_exits(self) -> None:
        for node in self.members:
            if node.name not in self.exits and not self.cluster.is_alive(node.name):
                self.exits[node.name] = time.time()

    def _keep_full(self) -> None:
        while not self._stop.wait(KEEP_FULL_PERIOD_S):
            self._fill_all()
            self._note_exits()

    def start(self) -> None:
        self.probe.start()
        self._fill_all()
        self.detail["filled_at"] = time.time()
        self._keeper.start()

    def heal(self) -> None:
        self._stop.set()
        self._keeper.join(timeout=10.0)
        self._note_exits()
        self.detail["filler_bytes"] = {
            n.name: f.written for n, f in zip(self.members, self.fillers, strict=True)
        }
        self.detail["full_seen"] = all(f.full_seen for f in self.fillers)
        for filler in self.fillers:
            filler.remove()
        released = time.time()
        self.detail["released_at"] = released
        deadline = time.monotonic() + RESUME_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if any(o == "ok" and t > released for t, o, _x in self.probe.log.outcomes):
                    break
                time.sleep(0.05)
        finally:
            self.probe.stop()
        log = self.probe.log
        span = log.refused_span()
        back = next((t for t, o, _x in log.outcomes if o == "ok" and t > released), None)
        self.detail.update(
            refused_ms=_ms(span[1] - span[0]) if span and span[1] is not None else None,
            refused_from=span[0] if span else None,
            resumed_ms=_ms(back - released) if back is not None else None,
            probes={o: log.count(o) for o in ("ok", "refused", "error")},
            refusal=log.first_text("refused"),
            exits=[{"node": name, "t": t} for name, t in sorted(self.exits.items())],
            errors=self._errors[:5],
        )

    def stop_quietly(self) -> None:
        """Undo the fault without measuring (the run is being torn down)."""
        self._stop.set()
        if self._keeper.is_alive():
            self._keeper.join(timeout=10.0)
        for filler in self.fillers:
            filler.remove()
        self.probe.stop()


def _wait_trimmed(cluster: LocalCluster, group: str) -> MemberOffsets:
    """The group's leader once its log was trimmed by retention (min offset above 0)."""
    deadline = time.monotonic() + RETENTION_WAIT_S
    last: MemberOffsets | None = None
    while time.monotonic() < deadline:
        last = group_leader(cluster, group, min(deadline, time.monotonic() + LEADER_WAIT_S))
        if last is not None and last.min_offset:
            return last
        time.sleep(0.5)
    how = "has no leader" if last is None else f"kept min offset {last.min_offset}"
    raise ChaosError(
        f"{group} {how} after {RETENTION_WAIT_S:g} s: retention did not trim its log; "
        "wipe-member runs give the brokers small segments and file_reserved_time=0 unless "
        "--set overrides them"
    )


class WipeMember:
    """Stop a follower or slave of ``group``, delete its store; start it again on heal."""

    def __init__(self, cluster: LocalCluster, group: str, pick: Callable[[list[Node]], Node]):
        self.cluster = cluster
        self.group = group
        self.pick = pick
        self.node: Node | None = None
        self.target = group
        self.detail: dict[str, Any] = {"group": group}

    def start(self) -> None:
        c = self.cluster
        leader = _wait_trimmed(c, self.group)
        others = [
            n for n in c.group_members(self.group) if n.name != leader.name and c.is_alive(n.name)
        ]
        if not others:
            raise ChaosError(f"{self.group} has no live follower or slave to wipe")
        node = self.node = self.pick(others)
        self.target = node.name
        c.kill(node.name, signal.SIGTERM)
        self.detail.update(
            member=node.name,
            leader=leader.name,
            leader_min_offset=leader.min_offset,
            wiped_entries=wipe_store(node.store),
        )

    def heal(self) -> None:
        node = self.node
        assert node is not None
        started = time.monotonic()
        self.cluster.restart(node.name)
        self.detail.update(catch_up(self.cluster, node, started))


def catch_up(cluster: LocalCluster, node: Node, started: float) -> dict[str, Any]:
    """Wait until ``node`` holds what its group's leader held once ``node`` was up;
    -> ``catch_up_ms`` (from ``started``, None if it did not within
    :data:`CATCH_UP_TIMEOUT_S`), ``target_offset`` and ``member_offset``."""
    deadline = started + CATCH_UP_TIMEOUT_S
    leader = group_leader(cluster, node.broker_name, min(deadline, time.monotonic() + 30.0))
    if leader is None or leader.max_offset is None:
        return {"catch_up_ms": None, "target_offset": None, "member_offset": None}
    state = wait_member_has(cluster, node, leader.max_offset, deadline)
    done = state.max_offset is not None and state.max_offset >= leader.max_offset
    return {
        "catch_up_ms": _ms(time.monotonic() - started) if done else None,
        "target_offset": leader.max_offset,
        "member_offset": state.max_offset,
    }


class ReplaceMember:
    """A new member joins a Raft group on new ports; on heal, once it has caught up, a
    follower of the group is removed and stopped."""

    def __init__(
        self,
        cluster: LocalCluster,
        membership: RaftMembership,
        group: str,
        pick: Callable[[list[Node]], Node],
    ) -> None:
        self.cluster = cluster
        self.membership = membership
        self.group = group
        self.pick = pick
        self.new: Node | None = None
        self.started = 0.0
        self.target = group
        self.detail: dict[str, Any] = {"group": group}

    def start(self) -> None:
        self.started = time.monotonic()
        self.new = self.membership.add(self.group)
        self.target = self.new.name
        self.detail.update(added=self.new.name, added_addr=self.new.addr)

    def heal(self) -> None:
        new = self.new
        assert new is not None
        self.detail.update(catch_up(self.cluster, new, self.started))
        if self.detail["catch_up_ms"] is None:
            raise ChaosError(
                f"{new.name} did not catch up within {CATCH_UP_TIMEOUT_S:g} s; no member "
                f"of {self.group} was removed"
            )
        c = self.cluster
        leader = group_leader(c, self.group, time.monotonic() + LEADER_WAIT_S)
        if leader is None:
            raise ChaosError(f"{self.group} has no single leader to take a member out")
        followers = [
            n
            for n in c.group_members(self.group)
            if n.name not in (new.name, leader.name)
            and n.name not in self.membership.removed
            and c.is_alive(n.name)
        ]
        if not followers:
            raise ChaosError(f"{self.group} has no follower to remove")
        self.detail["leader"] = leader.name
        old = self.pick(followers)
        self.membership.remove(self.group, old)
        self.detail["removed"] = old.name
        self.detail["members_after"] = [
            n.name for n in c.group_members(self.group) if n.name not in self.membership.removed
        ]
