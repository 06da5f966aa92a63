"""``rocketq bench replication``: what replication costs a producer, as ratios.

A lone broker and each replicated cluster (an ASYNC_MASTER or a SYNC_MASTER with a slave, a
three-member Raft group) take the same load one after the other, each in a cluster started
for it. With ``rounds`` > 1 the whole sequence runs again, so a slow minute of a shared
machine lands on one round instead of one cluster: each round gives every cluster's ratio
to that round's lone broker, and the summary gives each cluster's median ratio over the
rounds, its range, and the rate over all rounds.

With ``compare_security`` each cluster kind instead runs as four clusters side by side
(plain, auth, tls, auth_tls: ``bench/security_bench.py``), one kind after the other; each
variant's rates and ratios are to the plain cluster of the same kind, so what the HA or
Raft links' signing and encryption cost shows beside the client's.

With ``profile_dir`` py-spy records every broker of each cluster and this process (the
client) while the load runs (``<cluster>-r<round>-<node>.txt``), and the busiest thread of
each file is summarized after the run (``bench/profiling.py``, ``rocketq bench profile``).
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from rocketq.bench.client_bench import embedded_cluster, produce, run
from rocketq.bench.profiling import echo_summaries, recording

MODES: Final = {
    "async_master": ("ha", "ASYNC_MASTER"),
    "sync_master": ("ha", "SYNC_MASTER"),
    "raft": ("raft", "ASYNC_MASTER"),
}


def replication_bench(
    *,
    modes: list[str],
    rounds: int,
    size: int,
    concurrency: int,
    batch: int,
    duration: float,
    data_dir: str | None,
    echo: Callable[[str], None],
    profile_dir: Path | None = None,
) -> dict[str, object]:
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown cluster {m!r}; choose from {', '.join(MODES)}")
    runs = [("lone", "none", "ASYNC_MASTER")] + [(m, *MODES[m]) for m in modes]
    rates: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    lags: dict[str, int] = {}
    profiles: list[Path] = []
    for r in range(rounds):
        for name, replication, role in runs:
            echo(f"--- {name} (round {r + 1}/{rounds}) ---")
            with (
                embedded_cluster(data_dir, echo, replication=replication, role=role) as cluster,
                _profiled(cluster.brokers, f"{name}-r{r + 1}", profile_dir, echo, profiles),
            ):
                result = run(
                    lambda ns=cluster.namesrv_addr: produce(  # type: ignore[misc]
                        ns,
                        topic="BenchmarkTest",
                        size=size,
                        concurrency=concurrency,
                        batch=batch,
                        duration=duration,
                        messages=0,
                        queues=8,
                        echo=echo,
                    )
                )
            rates[name].append(float(result["msgs_per_s"]))  # type: ignore[arg-type]
            lag = result.get("max_replication_lag_bytes", -1)
            if isinstance(lag, int):
                lags[name] = max(lags.get(name, -1), lag)
    summary: dict[str, object] = {
        "bench": "replication",
        "concurrency": concurrency,
        "rounds": rounds,
    }
    lone = rates["lone"]
    echo("--- summary ---")
    for name, values in rates.items():
        ratios = [v / b if b else 0.0 for v, b in zip(values, lone, strict=True)]
        mean = statistics.fmean(values)
        lag = lags.get(name, -1)
        echo(
            f"{name:<13} {mean:>10,.0f} msgs/s  {statistics.median(ratios):6.2f} of the lone "
            f"broker (rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
            + (f"  max lag {lag:,} bytes" if lag >= 0 else "")
        )
        summary[name] = {
            "msgs_per_s": round(mean, 1),
            "ratio": round(statistics.median(ratios), 3),
            "round_ratios": [round(x, 3) for x in ratios],
            "max_lag_bytes": lag,
        }
    echo_summaries(profiles, echo, top=10)
    if profiles:
        summary["profiles"] = [str(p) for p in profiles]
    return summary


@contextlib.contextmanager
def _profiled(
    brokers: list[Any],
    prefix: str,
    profile_dir: Path | None,
    echo: Callable[[str], None],
    profiles: list[Path],
) -> Any:
    """py-spy on each broker of the cluster and on this process while the block runs."""
    if profile_dir is None:
        yield
        return
    targets = [(f"{prefix}-{b.name}", b.pid) for b in brokers]
    targets.append((f"{prefix}-client", os.getpid()))
    with recording(targets, profile_dir, echo) as files:
        yield
    profiles.extend(p for p in files.values() if p.exists())


def replication_security_bench(
    *,
    modes: list[str],
    rounds: int,
    size: int,
    concurrency: int,
    batch: int,
    duration: float,
    data_dir: str | None,
    echo: Callable[[str], None],
    warmup: float | None = None,
) -> dict[str, Any]:
    """For each cluster kind in ``modes`` (``lone`` and the kinds of :data:`MODES`), its
    four security variants side by side (:func:`~rocketq.bench.security_bench.security_compare`):
    ``{"bench": "replication-security", "modes": {mode: result}, ...}``."""
    from rocketq.bench.security_bench import SHAPES, security_compare, table

    for m in modes:
        if m not in SHAPES:
            raise ValueError(f"unknown cluster {m!r}; choose from {', '.join(SHAPES)}")
    results: dict[str, Any] = {}
    for m in modes:
        echo(f"=== {m}: plain, auth, tls and auth_tls ===")
        results[m] = security_compare(
            shape=m,
            rounds=rounds,
            size=size,
            concurrency=concurrency,
            batch=batch,
            duration=duration,
            queues=8,
            data_dir=data_dir,
            echo=echo,
            warmup=warmup,
        )
    echo("--- summary ---")
    for m in modes:
        for line in table(results[m]):
            echo(line)
    return {
        "bench": "replication-security",
        "concurrency": concurrency,
        "rounds": rounds,
        "duration_s": duration,
        "modes": results,
        "auth_within_goal": all(r["auth_within_goal"] for r in results.values()),
    }


__all__ = ["MODES", "replication_bench", "replication_security_bench"]
