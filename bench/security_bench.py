"""``rocketq bench produce --compare-security`` and ``rocketq bench replication
--compare-security``: what authentication and TLS cost a producer, as ratios.

Four clusters of the same shape run side by side, started through the launcher: ``plain``
(no auth, no TLS), ``auth`` (authentication and authorization on, every request signed by
the cluster's super user), ``tls`` (every remoting port TLS enforcing) and ``auth_tls``
(both). Each gets the same two loads through the SDK, its client built with the cluster's
``client_settings()``: ``concurrency`` single sends in flight (32 by default) and one send
at a time.

How the comparison is kept fair on a small shared machine: the four clusters stay up for
the whole run, so an idle cluster's background work burdens every measurement alike; each
cluster first takes an untimed load of ``warmup`` seconds (by default 3, or ``duration``
when shorter: a fresh broker's first seconds are slower, its files and caches still
cold); then in every round each load runs on the four clusters one right after the other,
each round starting one variant further along (plain, auth, tls, auth_tls; then auth,
tls, auth_tls, plain; ...), so over every four rounds each variant runs once in each
position and after each load; and every timed load starts on a quiet machine: dirty
pages written out (``sync``) and the clusters' processes back to their idle CPU use
(``settle``), so no load runs while the one before it is still being flushed and
dispatched on another cluster. Each round gives every variant's rate as a ratio to that
round's ``plain`` rate; the report gives each variant's median rate and median ratio over
the rounds, and the rounds' ratios.

Other work on the machine moves rates from one slice of seconds to the next, so every
timed load also reads the CPU time the client process and the cluster's processes spent
(``/proc/<pid>/stat``) and reports it per message, with its ratio to plain taken the same
way (plain's CPU per message over the variant's: 0.95 means 5 % more CPU per message). CPU
time spent is what the checks and the encryption add, whatever else shares the cores.
The clients sign as the cluster's super user, which passes every gate: a normal user's
request also has its policy decided.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rocketq.bench.client_bench import EMBEDDED_SETTINGS, produce, run
from rocketq.bench.report import cpu_clock
from rocketq.common.exceptions import RocketqError

VARIANTS: Final = {
    "plain": (False, False),
    "auth": (True, False),
    "tls": (False, True),
    "auth_tls": (True, True),
}
"""Each variant's (auth, tls)."""

LOADS: Final = ("in_flight", "one_at_a_time")
"""The two loads every variant takes: ``concurrency`` sends in flight, one send at a time."""

WARMUP: Final = 3.0
"""Seconds of untimed load each cluster takes first, unless the timed loads are shorter."""

AUTH_GOAL: Final = 0.95
"""The issue's goal: with auth on, at least 95 % of the plain rate under both loads."""

# The shapes a security comparison can run on: (replication, master role).
SHAPES: Final = {
    "lone": ("none", "ASYNC_MASTER"),
    "async_master": ("ha", "ASYNC_MASTER"),
    "sync_master": ("ha", "SYNC_MASTER"),
    "raft": ("raft", "ASYNC_MASTER"),
}

_CLIENT_ENV: Final = (
    "ROCKETQ_ACCESS_KEY",
    "ROCKETQ_SECRET_KEY",
    "ROCKETQ_SECURITY_TOKEN",
    "ROCKETQ_CREDENTIALS_FILE",
)


class SecurityBenchError(RocketqError):
    """The comparison cannot run as asked (the plain clients would sign, say)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed load on one variant: its rate and latencies."""

    msgs_per_s: float
    avg_rt_ms: float
    p50_ms: float
    p99_ms: float
    failed: int
    # CPU time of the client and every node of the cluster per message sent, in µs.
    cpu_us_per_msg: float = 0.0


@contextlib.contextmanager
def unsigned_by_default() -> Iterator[None]:
    """While it is open, an SDK client given no credentials signs nothing: the credential
    variables of this process's environment are set aside (and put back after). A
    ``~/.rocketq/credentials`` file would still be picked up, so it is refused."""
    from rocketq.auth.credentials import load_credentials

    saved = {k: os.environ.pop(k) for k in _CLIENT_ENV if k in os.environ}
    try:
        if load_credentials() is not None:
            raise SecurityBenchError(
                "~/.rocketq/credentials exists: the plain and tls clients would sign with it; "
                "move it aside for the comparison"
            )
        yield
    finally:
        os.environ.update(saved)


# A load starts once the clusters spend at most this many times their idle CPU (or
# _QUIET_FLOOR of a core, whichever is more) over _QUIET_WINDOW seconds; never later than
# _SETTLE_LIMIT seconds after the load before it.
_QUIET_FACTOR: Final = 1.5
_QUIET_FLOOR: Final = 0.1
_QUIET_WINDOW: Final = 0.25
_SETTLE_LIMIT: Final = 10.0


def idle_rate(clock: Callable[[], float], seconds: float = 1.0) -> float:
    """The share of a core ``clock``'s processes spend over ``seconds`` (their idle use,
    measured before any load)."""
    start, t0 = clock(), time.monotonic()
    time.sleep(seconds)
    return (clock() - start) / (time.monotonic() - t0)


def settle(clock: Callable[[], float], idle: float, limit: float = _SETTLE_LIMIT) -> float | None:
    """Write dirty pages out, then wait until ``clock``'s processes are back near their
    ``idle`` share of a core (see _QUIET_FACTOR): the seconds it took, or None when
    ``limit`` seconds passed first."""
    started = time.monotonic()
    os.sync()
    quiet = max(idle * _QUIET_FACTOR, _QUIET_FLOOR)
    deadline = started + limit
    last, t0 = clock(), time.monotonic()
    while True:
        time.sleep(_QUIET_WINDOW)
        now, t1 = clock(), time.monotonic()
        if (now - last) / (t1 - t0) <= quiet:
            return t1 - started
        if t1 >= deadline:
            return None
        last, t0 = now, t1


def _order(round_no: int) -> list[str]:
    """The variants in round ``round_no``'s order (from 1): each round starts one further
    along, so over every four rounds each variant runs once in each position."""
    names = list(VARIANTS)
    k = (round_no - 1) % len(names)
    return names[k:] + names[:k]


def security_compare(
    *,
    shape: str = "lone",
    rounds: int,
    size: int,
    concurrency: int,
    batch: int,
    duration: float,
    queues: int,
    data_dir: str | None,
    echo: Callable[[str], None],
    warmup: float | None = None,
) -> dict[str, Any]:
    """Run the four variants of one cluster ``shape`` (``lone``, ``async_master``,
    ``sync_master`` or ``raft``) side by side and report each load's rates and ratios to
    ``plain``: ``{"variants": {variant: {load: {...}}}, "auth_within_goal": bool, ...}``."""
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    if shape not in SHAPES:
        raise ValueError(f"unknown cluster {shape!r}; choose from {', '.join(SHAPES)}")
    replication, role = SHAPES[shape]
    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    samples: dict[str, dict[str, list[Sample]]] = {
        v: {load: [] for load in LOADS} for v in VARIANTS
    }
    with contextlib.ExitStack() as stack:
        stack.enter_context(unsigned_by_default())
        clusters: dict[str, tuple[str, dict[str, Any], Callable[[], float]]] = {}
        pids: list[int] = []
        for name, (auth, tls) in VARIANTS.items():
            tmp = stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"bench-security-{name}-", dir=base)
            )
            spec = ClusterSpec(
                data_dir=Path(tmp),
                broker_settings={**EMBEDDED_SETTINGS, "broker_role": role},
                replication=replication,  # type: ignore[arg-type]
                auth=auth,
                tls=tls,
            )
            cluster = stack.enter_context(LocalCluster(spec))
            pids.extend(n.pid for n in cluster.nodes)
            clusters[name] = (
                cluster.namesrv_addr,
                cluster.client_settings(),
                cpu_clock([n.pid for n in cluster.nodes]),
            )
            echo(
                f"{name}: {shape} cluster, auth {auth}, tls {tls}, nameserver "
                f"{cluster.namesrv_addr}"
            )

        def load_on(name: str, in_flight: int, seconds: float) -> Sample:
            namesrv, client, cpu = clusters[name]
            result = run(
                lambda: produce(
                    namesrv,
                    topic="BenchmarkTest",
                    size=size,
                    concurrency=in_flight,
                    batch=batch,
                    duration=seconds,
                    messages=0,
                    queues=queues,
                    echo=echo,
                    client=client,
                    cpu_seconds=cpu,
                )
            )
            return Sample(
                msgs_per_s=float(result["msgs_per_s"]),  # type: ignore[arg-type]
                avg_rt_ms=float(result["avg_rt_ms"]),  # type: ignore[arg-type]
                p50_ms=float(result["p50_ms"]),  # type: ignore[arg-type]
                p99_ms=float(result["p99_ms"]),  # type: ignore[arg-type]
                failed=int(result["failed"]),  # type: ignore[call-overload]
                cpu_us_per_msg=float(result["cpu_us_per_msg"]),  # type: ignore[arg-type]
            )

        nodes_clock = cpu_clock(pids, own=False)
        idle = idle_rate(nodes_clock)
        echo(f"the clusters' processes use {idle * 100:.1f} % of a core idle")
        unsettled = 0
        if warmup is None:
            warmup = min(WARMUP, duration)
        if warmup > 0:
            for name in VARIANTS:
                echo(f"--- {name}: warm-up, {warmup:g} s untimed ---")
                load_on(name, concurrency, warmup)
        for r in range(1, rounds + 1):
            for load in LOADS:
                in_flight = concurrency if load == "in_flight" else 1
                for name in _order(r):
                    waited = settle(nodes_clock, idle)
                    if waited is None:
                        unsettled += 1
                    quiet = "not quiet" if waited is None else f"quiet after {waited:.1f} s"
                    echo(f"--- {name}, {in_flight} in flight (round {r}/{rounds}; {quiet}) ---")
                    samples[name][load].append(load_on(name, in_flight, duration))
    return _summary(
        samples,
        shape=shape,
        rounds=rounds,
        size=size,
        concurrency=concurrency,
        batch=batch,
        duration=duration,
        unsettled=unsettled,
    )


def _summary(
    samples: dict[str, dict[str, list[Sample]]],
    *,
    shape: str,
    rounds: int,
    size: int,
    concurrency: int,
    batch: int,
    duration: float,
    unsettled: int = 0,
) -> dict[str, Any]:
    variants: dict[str, dict[str, Any]] = {}
    for name, loads in samples.items():
        variants[name] = {}
        for load, runs in loads.items():
            plain = samples["plain"][load]
            ratios = [
                s.msgs_per_s / p.msgs_per_s if p.msgs_per_s else 0.0
                for s, p in zip(runs, plain, strict=True)
            ]
            cpu_ratios = [
                p.cpu_us_per_msg / s.cpu_us_per_msg if s.cpu_us_per_msg else 0.0
                for s, p in zip(runs, plain, strict=True)
            ]
            variants[name][load] = {
                "msgs_per_s": round(statistics.median(s.msgs_per_s for s in runs), 1),
                "p50_ms": round(statistics.median(s.p50_ms for s in runs), 3),
                "p99_ms": round(statistics.median(s.p99_ms for s in runs), 3),
                "avg_rt_ms": round(statistics.median(s.avg_rt_ms for s in runs), 3),
                "failed": sum(s.failed for s in runs),
                "ratio": round(statistics.median(ratios), 3),
                "round_ratios": [round(x, 3) for x in ratios],
                "runs_msgs_per_s": [round(s.msgs_per_s, 1) for s in runs],
                "cpu_us_per_msg": round(statistics.median(s.cpu_us_per_msg for s in runs), 1),
                "cpu_ratio": round(statistics.median(cpu_ratios), 3),
                "round_cpu_ratios": [round(x, 3) for x in cpu_ratios],
            }
    auth = variants["auth"]
    return {
        "shape": shape,
        "settings": {name: {"auth": a, "tls": t} for name, (a, t) in VARIANTS.items()},
        "rounds": rounds,
        "size": size,
        "concurrency": concurrency,
        "batch": batch,
        "duration_s": duration,
        # Timed loads that started before the clusters were quiet (settle's limit passed).
        "unsettled_loads": unsettled,
        "variants": variants,
        "auth_goal_ratio": AUTH_GOAL,
        "auth_within_goal": all(auth[load]["ratio"] >= AUTH_GOAL for load in LOADS),
    }


def table(result: dict[str, Any]) -> list[str]:
    """The report's lines: per variant and load, the median rate, p50/p99 and the ratio to
    plain with the rounds' ratios; then whether auth is within the goal."""
    c = result["concurrency"]
    lines = [
        f"{result['shape']}: {result['rounds']} round(s) of {result['duration_s']:g} s per load "
        f"and variant, {result['size']} B bodies",
        f"{'variant':<9} {'load':<14} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'x plain':>8} {'cpu us':>7} {'x plain':>8}  rounds (msgs/s x plain)",
    ]
    for name, loads in result["variants"].items():
        for load, s in loads.items():
            label = f"{c} in flight" if load == "in_flight" else "one at a time"
            lines.append(
                f"{name:<9} {label:<14} {s['msgs_per_s']:>9,.0f} {s['p50_ms']:>8.3f} "
                f"{s['p99_ms']:>8.3f} {s['ratio']:>8.3f} {s['cpu_us_per_msg']:>7.1f} "
                f"{s['cpu_ratio']:>8.3f}  "
                + ", ".join(f"{x:.3f}" for x in s["round_ratios"])
                + (f"  ({s['failed']} failed)" if s["failed"] else "")
            )
    auth = result["variants"]["auth"]
    verdict = "met" if result["auth_within_goal"] else "not met"
    lines.append(
        f"auth costs {(1 - auth['in_flight']['ratio']) * 100:.1f} % at {c} in flight and "
        f"{(1 - auth['one_at_a_time']['ratio']) * 100:.1f} % one at a time "
        f"(goal <= {(1 - AUTH_GOAL) * 100:.0f} %: {verdict}); in CPU per message "
        f"{(1 - auth['in_flight']['cpu_ratio']) * 100:.1f} % and "
        f"{(1 - auth['one_at_a_time']['cpu_ratio']) * 100:.1f} %"
    )
    if result.get("unsettled_loads"):
        lines.append(
            f"{result['unsettled_loads']} timed load(s) started before the clusters were quiet"
        )
    return lines


__all__ = [
    "AUTH_GOAL",
    "LOADS",
    "SHAPES",
    "VARIANTS",
    "Sample",
    "SecurityBenchError",
    "security_compare",
    "table",
    "unsigned_by_default",
]
