"""The checker of a chaos run: what a history proves about the cluster, in
OpenMessaging-Chaos's terms (lost, duplicated, unexpected, order violations) plus failover
times and availability.

Keys are unique per message (``<process>-<sequence>``); a key is in more than one ``send``
record only when a producer retried the very same message. The definitions, all over the
records in file order (``History.records``), not over ``t``:

- ``sent``: distinct keys of ``send`` records; ``acked``: of ``send_ok`` records;
  ``received``: of ``receive`` records; ``receipts``: the number of ``receive`` records.
- ``lost``: acked keys with no ``receive`` record anywhere in the history.
- ``duplicated``: keys with more than one ``receive`` record; ``duplicate_rate`` is
  duplicated / received (0 when nothing was received); ``redeliveries`` is
  receipts - received.
- ``unexpected``: received keys that are in no ``send`` record.
- ``indeterminate``: keys sent but never acked (failed, timed out, or no outcome at all);
  never lost. ``indeterminate_received``: how many of them were received anyway.
- ``order_violations``: per shard of the ``orderly`` sends, over the shard's acked and
  received keys in send order (their first ``send`` record), the adjacent pairs (a, b) where
  b's first ``receive`` record comes before a's.
- ``failover_ms``: per fault kind, the time from each ``fault_start`` to the first later
  ``send_ok`` of the fault's group (of any group when the fault's group is null) for a send
  invoked after the fault started (one in flight across it proves nothing), as
  nearest-rank p50/p99/max; faults with no such ``send_ok`` are ``failover_missing``.
- ``availability``: acked messages per second over the workload window, from the ``run``
  record (or the first record) to the ``producers_stopped`` phase (or the last send
  outcome); ``ok_seconds``: the fraction of the window's whole seconds with a ``send_ok``.
- ``loss_window``: when and how long lost messages were acknowledged (an ASYNC_MASTER run
  may lose the tail a master had not replicated when it died).
- ``partial``: the history has no ``done`` phase, so ``lost`` counts messages not received
  *yet*.
- ``caught_up``: from the ``members`` record, whether every member of every group held what
  its leader or master held once the producers stopped (None without the record: a
  history from before the check, or a run cut short); ``lagging`` names the members that
  did not, with the bytes they lacked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Final

from rocketq.chaos.history import History

# How many keys a sentence or a report names as examples.
SAMPLE_KEYS: Final = 5
SEND_OUTCOMES: Final = frozenset({"send_ok", "send_failed", "send_timeout"})


@dataclass(frozen=True)
class Failover:
    """One ``fault_start`` and how long until the first later ``send_ok`` of its group
    (``ms`` is None when there was none)."""

    kind: str
    target: str
    group: str | None
    t: float
    ms: float | None


@dataclass(frozen=True)
class FailoverStats:
    """Nearest-rank percentiles (whole ms) of one fault kind's measured failovers; None
    when none was measured."""

    p50: int | None
    p99: int | None
    max: int | None
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> FailoverStats:
        ordered = sorted(values)
        if not ordered:
            return cls(None, None, None, 0)
        return cls(
            round(nearest_rank(ordered, 50)),
            round(nearest_rank(ordered, 99)),
            round(ordered[-1]),
            len(ordered),
        )


@dataclass(frozen=True)
class LossWindow:
    """The span of the ``send_ok`` times of the lost messages."""

    count: int
    first_t: float
    last_t: float

    @property
    def ms(self) -> int:
        return round((self.last_t - self.first_t) * 1000)


@dataclass
class CheckResult:
    """What a history proves; see the module's docstring for each figure's definition."""

    history: str = ""
    sent: int = 0
    acked: int = 0
    received: int = 0
    receipts: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    indeterminate: int = 0
    indeterminate_received: int = 0
    order_violations: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    failover_ms: dict[str, FailoverStats] = field(default_factory=dict)
    failover_missing: dict[str, int] = field(default_factory=dict)
    availability: float = 0.0
    window_s: float = 0.0
    ok_seconds: float = 0.0
    loss_window: LossWindow | None = None
    partial: bool = False
    partial_reason: str | None = None
    bad_lines: int = 0
    # Examples for sentences and reports (the first few, in file order).
    lost_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    bad_line_samples: list[tuple[int, str]] = field(default_factory=list)
    # Each fault with its failover, in file order (the chart marks them).
    failovers: list[Failover] = field(default_factory=list)
    # The workload window, Unix seconds.
    start_t: float = 0.0
    end_t: float = 0.0
    # What the run's cluster required of its clients (from the ``run`` record's options:
    # ``{"auth": bool, "tls": bool}``); None for a history without a ``run`` record.
    security: dict[str, bool] | None = None
    caught_up: bool | None = None
    caught_up_ms: int | None = None  # how long the check waited
    lagging: list[str] = field(default_factory=list)

    @property
    def duplicate_rate(self) -> float:
        return self.duplicated / self.received if self.received else 0.0

    @property
    def redeliveries(self) -> int:
        return self.receipts - self.received


def nearest_rank(ordered: Sequence[float], percentile: float) -> float:
    """The nearest-rank percentile of a non-empty sorted sequence."""
    rank = max(1, math.ceil(percentile / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _keys(record: dict[str, Any]) -> list[str]:
    keys = record.get("keys")
    return [str(k) for k in keys] if isinstance(keys, list) else []


def _group(record: dict[str, Any]) -> str | None:
    group = record.get("group")
    return None if group is None else str(group)


def _window_start(history: History) -> float:
    """The ``t`` of the ``run`` record (the first line of a run), else of the first record."""
    for record in history.records:
        if record["type"] == "run":
            return float(record["t"])
    return float(history.records[0]["t"]) if history.records else 0.0


@dataclass
class _Pass:
    """What one walk over the records gathers."""

    first_send: dict[str, int] = field(default_factory=dict)  # key -> index of its 1st send
    shards: dict[str, list[str]] = field(default_factory=dict)  # orderly shard -> keys
    ack_t: dict[str, float] = field(default_factory=dict)  # key -> t of its first send_ok
    first_receive: dict[str, int] = field(default_factory=dict)  # key -> index of 1st receive
    duplicated: set[str] = field(default_factory=set)
    receipts: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    failovers: list[Failover] = field(default_factory=list)
    ok_bins: set[int] = field(default_factory=set)  # whole seconds since start with a send_ok
    last_outcome_t: float | None = None
    producers_stopped_t: float | None = None
    last_phase: str | None = None
    done: bool = False


def _walk(history: History, start: float) -> _Pass:
    """One pass over the records. A fault waits in ``pending`` (per group, None for any
    group) until the next ``send_ok`` that answers it, so failover is linear too."""
    p = _Pass()
    pending: dict[str | None, list[tuple[int, dict[str, Any]]]] = {}
    measured: dict[int, float] = {}
    invoked: dict[tuple[Any, Any], float] = {}  # (process, op) -> t of the send in flight
    fault_records: list[dict[str, Any]] = []
    for index, record in enumerate(history.records):
        type_ = record["type"]
        t = float(record["t"])
        if type_ == "receive":
            key = str(record.get("key"))
            p.receipts += 1
            if key in p.first_receive:
                p.duplicated.add(key)
            else:
                p.first_receive[key] = index
        elif type_ == "send":
            invoked[(record.get("process"), record.get("op"))] = t
            orderly = record.get("mode") == "orderly"
            for key in _keys(record):
                if key not in p.first_send:
                    p.first_send[key] = index
                    if orderly:
                        p.shards.setdefault(str(record.get("shard")), []).append(key)
        elif type_ in SEND_OUTCOMES:
            p.last_outcome_t = t
            if type_ == "send_ok":
                for key in _keys(record):
                    p.ack_t.setdefault(key, t)
                if t >= start:
                    p.ok_bins.add(int(t - start))
                # Only a send invoked after the fault answers it: one already in flight
                # may have been stored before the fault and says nothing of the failover.
                invoked_t = invoked.pop((record.get("process"), record.get("op")), t)
                group = _group(record)
                for waiting in (pending.get(group), pending.get(None)):
                    while waiting and float(waiting[0][1]["t"]) <= invoked_t:
                        number, fault = waiting.pop(0)
                        # Processes' clocks are one machine's; clamp a tie's jitter at 0.
                        measured[number] = max(0.0, (t - float(fault["t"])) * 1000)
            else:
                invoked.pop((record.get("process"), record.get("op")), None)
        elif type_ == "fault_start":
            kind = str(record.get("fault"))
            p.faults[kind] = p.faults.get(kind, 0) + 1
            pending.setdefault(_group(record), []).append((len(fault_records), record))
            fault_records.append(record)
        elif type_ == "phase":
            phase = str(record.get("phase"))
            p.last_phase = phase
            if phase == "done":
                p.done = True
            elif phase == "producers_stopped" and p.producers_stopped_t is None:
                p.producers_stopped_t = t
    p.failovers = [
        Failover(
            kind=str(r.get("fault")),
            target=str(r.get("target")),
            group=_group(r),
            t=float(r["t"]),
            ms=measured.get(number),
        )
        for number, r in enumerate(fault_records)
    ]
    return p


def count_order_violations(
    shards: Iterable[Sequence[str]], acked: Iterable[str], first_receive: dict[str, int]
) -> int:
    """Adjacent inversions per shard: over each shard's acked and received keys in send
    order, the pairs (a, b) whose b was first received before a."""
    acked_set = set(acked)
    violations = 0
    for keys in shards:
        positions = [first_receive[k] for k in keys if k in acked_set and k in first_receive]
        violations += sum(1 for a, b in pairwise(positions) if b < a)
    return violations


def _partial_reason(last_phase: str | None) -> str:
    how_far = f"the last phase seen was {last_phase!r}" if last_phase else "no phase recorded"
    return (
        f"the history has no 'done' phase ({how_far}): the run was cut short, and 'lost' "
        "counts acknowledged messages not received yet"
    )


def check(history: History, path: str = "") -> CheckResult:
    """Check a history: count what was sent, acknowledged, received, lost, duplicated and
    unexpected, order violations, faults with their failover times, and availability."""
    start = _window_start(history)
    p = _walk(history, start)
    sent = p.first_send.keys()
    acked = p.ack_t.keys()
    lost_keys = [k for k in acked if k not in p.first_receive]
    unexpected_keys = [k for k in p.first_receive if k not in p.first_send]
    indeterminate = [k for k in sent if k not in p.ack_t]

    end = p.producers_stopped_t if p.producers_stopped_t is not None else p.last_outcome_t
    end = start if end is None else end
    window_s = max(0.0, end - start)
    acked_in_window = sum(1 for t in p.ack_t.values() if start <= t <= end)
    whole_seconds = max(1, int(window_s)) if window_s > 0 else 0
    ok_bins = sum(1 for b in p.ok_bins if b < whole_seconds)

    kinds = list(p.faults)
    caught_up, caught_up_ms, lagging = _members(history)
    lost_t = [p.ack_t[k] for k in lost_keys]
    config = next((r.get("config") for r in history.of_type("run")), None)
    security = None
    if isinstance(config, dict):
        security = {"auth": bool(config.get("auth")), "tls": bool(config.get("tls"))}
    return CheckResult(
        history=path,
        security=security,
        sent=len(sent),
        acked=len(acked),
        received=len(p.first_receive),
        receipts=p.receipts,
        lost=len(lost_keys),
        duplicated=len(p.duplicated),
        unexpected=len(unexpected_keys),
        indeterminate=len(indeterminate),
        indeterminate_received=sum(1 for k in indeterminate if k in p.first_receive),
        order_violations=count_order_violations(p.shards.values(), acked, p.first_receive),
        faults=dict(p.faults),
        failover_ms={
            kind: FailoverStats.of(
                [f.ms for f in p.failovers if f.kind == kind and f.ms is not None]
            )
            for kind in kinds
        },
        failover_missing={
            kind: sum(1 for f in p.failovers if f.kind == kind and f.ms is None) for kind in kinds
        },
        availability=acked_in_window / window_s if window_s > 0 else 0.0,
        window_s=window_s,
        ok_seconds=ok_bins / whole_seconds if whole_seconds else 0.0,
        loss_window=LossWindow(len(lost_t), min(lost_t), max(lost_t)) if lost_t else None,
        partial=not p.done,
        partial_reason=None if p.done else _partial_reason(p.last_phase),
        bad_lines=len(history.bad_lines),
        lost_keys=lost_keys[:SAMPLE_KEYS],
        unexpected_keys=unexpected_keys[:SAMPLE_KEYS],
        bad_line_samples=history.bad_lines[:SAMPLE_KEYS],
        failovers=p.failovers,
        start_t=start,
        end_t=end,
        caught_up=caught_up,
        caught_up_ms=caught_up_ms,
        lagging=lagging,
    )


def _members(history: History) -> tuple[bool | None, int | None, list[str]]:
    """(caught up, ms waited, the lagging members) from the last ``members`` record."""
    records = list(history.of_type("members"))
    if not records:
        return None, None, []
    record = records[-1]
    lagging = []
    groups = record.get("groups")
    for name, group in sorted(groups.items()) if isinstance(groups, dict) else ():
        if not isinstance(group, dict):
            continue
        leader = group.get("leader")
        raw_behind, raw_errors = group.get("behind"), group.get("errors")
        behind: dict[str, Any] = raw_behind if isinstance(raw_behind, dict) else {}
        errors: dict[str, Any] = raw_errors if isinstance(raw_errors, dict) else {}
        if leader is None:
            lagging.append(f"{name}: no single leader")
            continue
        for member, lack in sorted(behind.items()):
            if lack == 0:
                continue
            why = errors.get(member) or ("offset unknown" if lack is None else f"{lack} bytes")
            lagging.append(f"{member} ({why} behind {leader})")
    waited = record.get("waited_ms")
    return (
        bool(record.get("caught_up")),
        int(waited) if isinstance(waited, int | float) else None,
        lagging,
    )


def promises_no_loss(replication: str, role: str) -> bool:
    """Whether a mode promises that an acknowledged message is never lost: Raft, and HA
    with a SYNC_MASTER (an ASYNC_MASTER, or no replication, may lose a dead master's tail)."""
    replication = replication.lower()
    return replication == "raft" or (replication == "ha" and role.upper() == "SYNC_MASTER")


def _examples(keys: Sequence[str], total: int) -> str:
    more = ", ..." if total > len(keys) else ""
    return f" (e.g. {', '.join(keys)}{more})" if keys else ""


def broken_promises(
    result: CheckResult, *, replication: str, role: str, orderly: bool
) -> list[str]:
    """One sentence per promise the run broke, for its replication ("none", "ha", "raft"),
    its masters' role and whether it sent orderly: acknowledged messages lost (Raft or
    SYNC_MASTER only), messages received that nobody sent (always), order violations
    (orderly runs only), members that did not catch up with their leader or master once
    the producers stopped (always). Empty when every promise was kept."""
    broken: list[str] = []
    if result.lost and promises_no_loss(replication, role):
        were = "message was" if result.lost == 1 else "messages were"
        broken.append(
            f"{result.lost} acknowledged {were} lost{_examples(result.lost_keys, result.lost)}"
        )
    if result.unexpected:
        were = "message was" if result.unexpected == 1 else "messages were"
        broken.append(
            f"{result.unexpected} received {were} never sent"
            f"{_examples(result.unexpected_keys, result.unexpected)}"
        )
    if result.order_violations and orderly:
        broken.append(
            f"{result.order_violations} order violations: orderly messages consumed out of "
            "send order within their shard"
        )
    if result.caught_up is False:
        broken.append(
            "members did not catch up with their leader or master after the producers "
            f"stopped: {'; '.join(result.lagging) or 'see the members record'}"
        )
    return broken
