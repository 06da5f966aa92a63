"""How benchmarks report: latency summaries, RocketMQ-style lines and one JSON line.

Every ``rocketq bench`` command prints what RocketMQ's benchmark tools print (TPS, average
and max RT, p50/p99/p999) for people, and with ``--json`` one JSON object on the last line
for scripts. Rates use decimal megabytes (1 MB = 1,000,000 bytes), as ``dd`` and ``fio`` do.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MB: Final = 1_000_000
_NS_PER_MS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latencies of one kind of call, in milliseconds."""

    count: int
    avg_ms: float
    max_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float

    def fields(self) -> dict[str, float]:
        """The JSON fields: ``avg_rt_ms``, ``max_rt_ms``, ``p50_ms``, ``p99_ms``, ``p999_ms``."""
        return {
            "avg_rt_ms": self.avg_ms,
            "max_rt_ms": self.max_ms,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "p999_ms": self.p999_ms,
        }


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """The nearest-rank ``q``-quantile (0 < q <= 1) of values sorted ascending."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summarize_ns(samples_ns: Sequence[int]) -> LatencySummary:
    """Summary of latencies measured in nanoseconds (``time.perf_counter_ns`` deltas)."""
    if not samples_ns:
        return LatencySummary(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    ordered = sorted(samples_ns)
    return LatencySummary(
        count=len(ordered),
        avg_ms=sum(ordered) / len(ordered) / _NS_PER_MS,
        max_ms=ordered[-1] / _NS_PER_MS,
        p50_ms=percentile(ordered, 0.50) / _NS_PER_MS,
        p99_ms=percentile(ordered, 0.99) / _NS_PER_MS,
        p999_ms=percentile(ordered, 0.999) / _NS_PER_MS,
    )


def rate(count: float, seconds: float) -> float:
    """``count`` per second; 0 when nothing was timed."""
    return count / seconds if seconds > 0 else 0.0


def tps_line(label: str, tps: float, mb_s: float, latency: LatencySummary, failed: int) -> str:
    """One line the way RocketMQ's producer benchmark prints it, plus MB/s and percentiles."""
    return (
        f"[{label}] Send TPS: {tps:,.0f} | {mb_s:,.1f} MB/s | "
        f"Max RT(ms): {latency.max_ms:.3f} | Average RT(ms): {latency.avg_ms:.3f} | "
        f"p50(ms): {latency.p50_ms:.3f} | p99(ms): {latency.p99_ms:.3f} | "
        f"p999(ms): {latency.p999_ms:.3f} | Send Failed: {failed}"
    )


def json_line(fields: Mapping[str, object]) -> str:
    """One JSON object on one line; floats rounded to 4 decimals to keep it readable."""
    return json.dumps(
        {k: round(v, 4) if isinstance(v, float) else v for k, v in fields.items()},
        separators=(", ", ": "),
    )


class BenchOptionError(ValueError):
    """Options that cannot run; ``flag`` names the command-line flag at fault. Every
    benchmark raises it before it starts anything."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag


_TICKS: Final = os.sysconf("SC_CLK_TCK")


def cpu_clock(pids: list[int], *, own: bool = True) -> Callable[[], float]:
    """A clock of the CPU seconds this process (unless ``own`` is False) and the processes
    ``pids`` have spent (a process that is gone counts nothing): what a load costs in CPU,
    whatever else runs on the machine."""

    def seconds() -> float:
        total = time.process_time() if own else 0.0
        for pid in pids:
            try:
                raw = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = raw[raw.rfind(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        return total

    return seconds
