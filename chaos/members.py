"""What a chaos run reads from the brokers themselves, from the outside: each member's
CommitLog offsets (``GET_BROKER_RUNTIME_INFO``, the table behind ``rocketq admin
cluster-list``), whether every member holds what its leader or master holds, and whether a
group takes writes (:class:`WriteProbe`).

A member *leads* its group when its runtime info says ``raftRole`` ``LEADER`` (Raft) or,
without Raft, when it is broker id 0 (the master). A group is *caught up* when it has one
leader and every other member's ``commitLogMaxOffset`` equals the leader's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.cluster.launcher import LocalCluster, Node
from rocketq.common.exceptions import RocketqError
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.transport import request_blocking
from rocketq.sdk import admin_wire as aw
from rocketq.sdk.wire import send_request

RUNTIME_TIMEOUT_S: Final = 2.0
POLL_S: Final = 0.25
PROBE_TOPIC: Final = "ChaosProbe"  # no consumer reads it; the workload never sends to it
PROBE_GROUP: Final = "chaos_probe"
PROBE_PERIOD_S: Final = 0.25
PROBE_TIMEOUT_S: Final = 1.0
PROBE_BODY: Final = b"probe"


@dataclass(frozen=True)
class MemberOffsets:
    """One member's CommitLog offsets as it reported them (None: it did not answer)."""

    name: str
    group: str
    leads: bool
    min_offset: int | None
    max_offset: int | None
    error: str | None = None


def runtime_info(cluster: LocalCluster, node: Node) -> dict[str, str]:
    """The broker's runtime table; RocketqError or OSError when it does not answer."""
    answer = request_blocking(
        node.addr,
        aw.broker_runtime_info_request(),
        RUNTIME_TIMEOUT_S,
        security=cluster.client_security(),
    )
    return aw.parse_broker_runtime_info(answer).table


def _int(table: dict[str, str], key: str) -> int | None:
    try:
        return int(table[key])
    except (KeyError, ValueError):
        return None


def offsets_of(cluster: LocalCluster, node: Node) -> MemberOffsets:
    """What ``node`` says of its CommitLog, and whether it leads its group."""
    if not cluster.is_alive(node.name):
        return MemberOffsets(node.name, node.broker_name, False, None, None, "not running")
    try:
        table = runtime_info(cluster, node)
    except (RocketqError, OSError) as exc:
        return MemberOffsets(node.name, node.broker_name, False, None, None, str(exc)[:200])
    # A Raft member leads by its own account; a master is broker id 0.
    leads = table["raftRole"] == "LEADER" if "raftRole" in table else node.broker_id == 0
    return MemberOffsets(
        node.name,
        node.broker_name,
        leads,
        _int(table, "commitLogMinOffset"),
        _int(table, "commitLogMaxOffset"),
    )


def leader_of(members: Sequence[MemberOffsets]) -> MemberOffsets | None:
    """The one member that leads (None when none or more than one does)."""
    leaders = [m for m in members if m.leads and m.max_offset is not None]
    return leaders[0] if len(leaders) == 1 else None


def group_view(members: Sequence[MemberOffsets]) -> dict[str, Any]:
    """One group's figures for the history: its leader, each member's max offset and how
    many bytes each is behind the leader (None where unknown), ``caught_up``."""
    leader = leader_of(members)
    behind: dict[str, int | None] = {}
    for m in members:
        if leader is None or m.max_offset is None or leader.max_offset is None:
            behind[m.name] = None
        else:
            behind[m.name] = leader.max_offset - m.max_offset
    return {
        "leader": leader.name if leader else None,
        "max_offset": {m.name: m.max_offset for m in members},
        "min_offset": {m.name: m.min_offset for m in members},
        "behind": behind,
        "errors": {m.name: m.error for m in members if m.error},
        "caught_up": leader is not None and all(b == 0 for b in behind.values()),
    }


def members_view(cluster: LocalCluster, nodes: Iterable[Node]) -> dict[str, dict[str, Any]]:
    """:func:`group_view` of every group of ``nodes``, by group name."""
    groups: dict[str, list[MemberOffsets]] = {}
    for node in nodes:
        groups.setdefault(node.broker_name, []).append(offsets_of(cluster, node))
    return {name: group_view(members) for name, members in sorted(groups.items())}


def wait_caught_up(
    cluster: LocalCluster, nodes: Sequence[Node], timeout: float
) -> tuple[bool, dict[str, dict[str, Any]], float]:
    """Poll until every group of ``nodes`` is caught up, or ``timeout`` seconds pass;
    -> (caught up, the last view, seconds waited)."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        view = members_view(cluster, nodes)
        done = all(g["caught_up"] for g in view.values())
        if done or time.monotonic() >= deadline:
            return done, view, time.monotonic() - start
        time.sleep(POLL_S)


def wait_member_has(
    cluster: LocalCluster, node: Node, target: int, deadline: float
) -> MemberOffsets:
    """Poll ``node`` until its max offset reaches ``target`` or the deadline passes; -> its
    last offsets."""
    while True:
        state = offsets_of(cluster, node)
        if (state.max_offset is not None and state.max_offset >= target) or (
            time.monotonic() >= deadline
        ):
            return state
        time.sleep(POLL_S)


def group_leader(cluster: LocalCluster, group: str, deadline: float) -> MemberOffsets | None:
    """The member leading ``group`` by its own account (waiting for one until the
    deadline)."""
    while True:
        leader = leader_of([offsets_of(cluster, n) for n in cluster.group_members(group)])
        if leader is not None or time.monotonic() >= deadline:
            return leader
        time.sleep(POLL_S)


# ---------------------------------------------------------------- write probe


@dataclass
class ProbeLog:
    """What a :class:`WriteProbe` saw: each probe's (Unix time, outcome, text)."""

    outcomes: list[tuple[float, str, str]] = field(default_factory=list)

    def add(self, outcome: str, text: str = "") -> None:
        self.outcomes.append((time.time(), outcome, text))

    def count(self, outcome: str) -> int:
        return sum(1 for _t, o, _x in self.outcomes if o == outcome)

    def refused_span(self) -> tuple[float, float | None] | None:
        """(first refusal, first accepted probe after it or None); None if never refused."""
        first = next((t for t, o, _x in self.outcomes if o == "refused"), None)
        if first is None:
            return None
        back = next((t for t, o, _x in self.outcomes if o == "ok" and t > first), None)
        return first, back

    def first_text(self, outcome: str) -> str | None:
        return next((x for _t, o, x in self.outcomes if o == outcome), None)


def classify(code: int, remark: str) -> str:
    """A send's answer: ``ok``, ``refused`` (SERVICE_NOT_AVAILABLE: the broker refuses
    writes, a full disk among the reasons) or ``error`` (anything else)."""
    if code == ResponseCode.SUCCESS:
        return "ok"
    if code == ResponseCode.SERVICE_NOT_AVAILABLE:
        return "refused"
    return "error"


class WriteProbe:
    """A thread sending one small message every ``period`` seconds to queue 0 of
    :data:`PROBE_TOPIC` on ``group``'s master (the one the nameservers list as broker id
    0), straight to that broker with no retry elsewhere, so each answer says whether
    *that group* takes writes. ``master`` finds the address (None: no master now)."""

    def __init__(
        self,
        cluster: LocalCluster,
        master: Callable[[], str | None],
        *,
        period: float = PROBE_PERIOD_S,
    ) -> None:
        self.cluster = cluster
        self.master = master
        self.period = period
        self.log = ProbeLog()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-write-probe", daemon=True)

    def probe(self) -> str:
        """One probe; -> its outcome (also logged)."""
        addr = self.master()
        if addr is None:
            self.log.add("error", "no master")
            return "error"
        request = send_request(
            PROBE_BODY,
            "",
            group=PROBE_GROUP,
            topic=PROBE_TOPIC,
            queue_id=0,
            born_timestamp=int(time.time() * 1000),
        )
        try:
            answer = request_blocking(
                addr, request, PROBE_TIMEOUT_S, security=self.cluster.client_security()
            )
        except (RocketqError, OSError) as exc:
            self.log.add("error", f"{type(exc).__name__}: {exc}"[:200])
            return "error"
        outcome = classify(answer.code, answer.remark or "")
        self.log.add(outcome, f"{answer.code} {answer.remark or ''}"[:200])
        return outcome

    def _run(self) -> None:
        while not self._stop.is_set():
            self.probe()
            self._stop.wait(self.period)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=PROBE_TIMEOUT_S * 4 + RUNTIME_TIMEOUT_S)

    def alive(self) -> bool:
        return self._thread.is_alive()
