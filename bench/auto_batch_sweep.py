"""``rocketq bench produce --sweep``: the producer's natural batching (``auto_batch``) on
against off over a grid of topic counts, sends in flight and message sizes, on one
cluster, in one run.

For each topic count (ascending) the topics it adds are created through the admin (once:
a larger count reuses the smaller counts' topics) and two producers are started, one with
``auto_batch`` on and one with it off, each sending one warm-up message to every topic (so
routes, connections and topic creation stay outside the timed region). Then, for every
number of sends in flight and message size, both producers run single sends round robin
over the topics for ``duration`` seconds, ``rounds`` times each, alternating (which of the
two goes first alternates too, so neither always follows the other). A row reports each
mode's rate (the median of its rounds), their ratio, on / off, and the share of the
messages sent with ``auto_batch`` on that left in batches of two or more; the summary names
the worst ratio, and of the rows where on was slower, those where it batched nothing (it
sent the same requests as off: the difference is the machine's, from one run to the next).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.bench.report import BenchOptionError, json_line, rate

SWEEP_TOPICS: Final = "1,10,100,1000,10000"
SWEEP_THREADS: Final = "1,4,32,256"
SWEEP_SIZES: Final = "128,1024,65536"
SWEEP_DURATION: Final = 2.0
# Queues per topic: 10,000 topics of 4 queues fit in a broker's memory maps on a Linux
# default (vm.max_map_count 65,530); of 8 they do not.
SWEEP_QUEUES: Final = 4
MAX_TOPICS: Final = 100_000
MAX_THREADS: Final = 4096
MAX_SIZE: Final = 4 * 1024 * 1024  # the broker's default max_message_size
MODES: Final = ("on", "off")
# The body of the warm-up sends (one per topic and producer).
_WARM_SIZE: Final = 128


def parse_grid_list(flag: str, text: str, low: int, high: int) -> tuple[int, ...]:
    """``"1,10,100"`` -> (1, 10, 100): distinct, ascending, each in ``low..high``;
    BenchOptionError naming ``flag`` otherwise."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise BenchOptionError(flag, f"{text!r} is not a comma list of whole numbers") from None
    if not values:
        raise BenchOptionError(flag, "give at least one value")
    if values[0] < low or values[-1] > high:
        raise BenchOptionError(flag, f"values must be between {low:,} and {high:,}, got {text!r}")
    return tuple(values)


@dataclass(frozen=True)
class SweepGrid:
    """The combinations a sweep measures: every topic count with every number of sends in
    flight and every message size."""

    topics: tuple[int, ...]
    threads: tuple[int, ...]
    sizes: tuple[int, ...]

    @classmethod
    def parse(
        cls, topics: str = SWEEP_TOPICS, threads: str = SWEEP_THREADS, sizes: str = SWEEP_SIZES
    ) -> SweepGrid:
        return cls(
            parse_grid_list("--sweep-topics", topics, 1, MAX_TOPICS),
            parse_grid_list("--sweep-threads", threads, 1, MAX_THREADS),
            parse_grid_list("--sweep-sizes", sizes, 1, MAX_SIZE),
        )

    @property
    def cells(self) -> int:
        return len(self.topics) * len(self.threads) * len(self.sizes)


@dataclass
class SweepRow:
    """One combination: each mode's rate per round (msgs/s) and failed sends."""

    topics: int
    in_flight: int
    size: int
    rates: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    failed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MODES, 0))
    # Messages sent with auto_batch on, and how many of them left in batches (of 2+).
    on_sent: int = 0
    on_batched: int = 0

    @property
    def batched_share(self) -> float:
        """The share of on's messages that left in batches (0 when it sent none)."""
        return self.on_batched / self.on_sent if self.on_sent else 0.0

    def msgs_per_s(self, mode: str) -> float:
        """The median of the mode's rounds (0 before any)."""
        return statistics.median(self.rates[mode]) if self.rates[mode] else 0.0

    @property
    def ratio(self) -> float:
        """on / off (0 when off sent nothing)."""
        off = self.msgs_per_s("off")
        return self.msgs_per_s("on") / off if off > 0 else 0.0

    def label(self) -> str:
        return f"{topics_text(self.topics)}, {self.in_flight:,} in flight, {size_text(self.size)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "topics": self.topics,
            "in_flight": self.in_flight,
            "size": self.size,
            "on_msgs_per_s": round(self.msgs_per_s("on"), 1),
            "off_msgs_per_s": round(self.msgs_per_s("off"), 1),
            "ratio": round(self.ratio, 3),
            "on_rounds": [round(r, 1) for r in self.rates["on"]],
            "off_rounds": [round(r, 1) for r in self.rates["off"]],
            "on_failed": self.failed["on"],
            "off_failed": self.failed["off"],
            "on_batched_share": round(self.batched_share, 3),
        }


def topics_text(count: int) -> str:
    """1 -> "1 topic", 1000 -> "1,000 topics"."""
    return f"{count:,} topic" + ("" if count == 1 else "s")


def size_text(size: int) -> str:
    """128 -> "128 B", 1024 -> "1 KiB", 65536 -> "64 KiB", 1048576 -> "1 MiB"."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


TABLE_HEAD: Final = (
    f"{'topics':>7} {'in flight':>9} {'size':>7} {'msgs/s on':>10} {'msgs/s off':>10} "
    f"{'on/off':>6} {'batched':>7}"
)


def table(rows: Sequence[SweepRow]) -> list[str]:
    """The sweep's table: a head line, then one line per row."""
    lines = [TABLE_HEAD]
    for r in rows:
        lines.append(
            f"{r.topics:>7,} {r.in_flight:>9,} {size_text(r.size):>7} "
            f"{r.msgs_per_s('on'):>10,.0f} {r.msgs_per_s('off'):>10,.0f} {r.ratio:>6.2f} "
            f"{100 * r.batched_share:>6.0f}%"
        )
    return lines


def worst(rows: Sequence[SweepRow]) -> SweepRow | None:
    """The row of the lowest on / off ratio (None without rows)."""
    return min(rows, key=lambda r: r.ratio, default=None)


def summary_line(rows: Sequence[SweepRow]) -> str:
    """The worst ratio and its row, how many rows ran slower with batching on, and of
    those how many batched nothing (the same requests as off), and the worst of the
    others."""
    row = worst(rows)
    if row is None:
        return "no rows"
    slower = [r for r in rows if r.ratio < 1.0]
    line = (
        f"worst on/off: {row.ratio:.2f} at {row.label()} (on {row.msgs_per_s('on'):,.0f}, "
        f"off {row.msgs_per_s('off'):,.0f} msgs/s); on slower than off in {len(slower)} of "
        f"{len(rows)} rows"
    )
    if not slower:
        return line
    unbatched = sum(1 for r in slower if r.on_batched == 0)
    line += f", {unbatched} of them with no message batched (the same requests as off)"
    batched = worst([r for r in slower if r.on_batched > 0])
    if batched is not None:
        line += f"; worst where on batched: {batched.ratio:.2f} at {batched.label()}"
    return line


async def sweep(
    namesrv: str,
    grid: SweepGrid,
    *,
    topic: str,
    queues: int,
    duration: float,
    rounds: int,
    echo: Callable[[str], None],
    client: Mapping[str, Any] | None = None,
    producer_settings: Mapping[str, Any] | None = None,
) -> list[SweepRow]:
    """Measure every combination of ``grid`` with ``auto_batch`` on and off (see the module
    docstring); ``client``: the SDK settings of the producers and the admin besides the
    nameserver (credentials, TLS); ``producer_settings``: more of the producers' settings
    (``auto_batch`` is set per mode)."""
    from rocketq import Producer
    from rocketq.bench.client_bench import (
        WARM_IN_FLIGHT,
        SendCounters,
        _wait_slaves_attached,
        ensure_topics,
        make_body,
        send_load,
        topic_names,
    )
    from rocketq.bench.topics_bench import send_one_each

    client = dict(client or {})
    await _wait_slaves_attached(namesrv, echo, client=client)
    settings = {**client, **(producer_settings or {})}
    created: set[str] = set()
    rows: list[SweepRow] = []
    cell = 0
    for count in grid.topics:
        names = topic_names(topic, count)
        new = [n for n in names if n not in created]
        t0 = time.monotonic()
        await ensure_topics(namesrv, new, queues, client)
        created.update(new)
        echo(
            f"[{topics_text(count)}] created {len(new):,} of {queues} queues in "
            f"{time.monotonic() - t0:.2f} s"
        )
        async with contextlib.AsyncExitStack() as stack:
            producers: dict[str, Any] = {}
            t0 = time.monotonic()
            for mode in MODES:
                producer = Producer(
                    group=f"benchmark_sweep_{mode}",
                    namesrv=namesrv,
                    **{**settings, "auto_batch": mode == "on"},
                )
                producers[mode] = await stack.enter_async_context(producer)
                await send_one_each(
                    producer, names, make_body(_WARM_SIZE), in_flight=WARM_IN_FLIGHT
                )
            echo(
                f"[{topics_text(count)}] both producers sent a warm-up message to each in "
                f"{time.monotonic() - t0:.2f} s"
            )
            for in_flight in grid.threads:
                for size in grid.sizes:
                    row = SweepRow(count, in_flight, size)
                    body = make_body(size)
                    for r in range(rounds):
                        order = MODES if (cell + r) % 2 == 0 else MODES[::-1]
                        for mode in order:
                            c = SendCounters()
                            batcher = producers[mode].batcher
                            batched = batcher.batched_messages if batcher is not None else 0
                            elapsed = await send_load(
                                producers[mode],
                                names,
                                body,
                                c,
                                concurrency=in_flight,
                                duration=duration,
                            )
                            row.rates[mode].append(rate(c.sent, elapsed))
                            row.failed[mode] += c.failed
                            if mode == "on":
                                row.on_sent += c.sent
                                if batcher is not None:
                                    row.on_batched += batcher.batched_messages - batched
                    cell += 1
                    rows.append(row)
                    failed = row.failed["on"] + row.failed["off"]
                    echo(
                        f"[{row.label()}] on {row.msgs_per_s('on'):,.0f} msgs/s, off "
                        f"{row.msgs_per_s('off'):,.0f} msgs/s, on/off {row.ratio:.2f}"
                        + (
                            f" (failed sends: on {row.failed['on']:,}, off {row.failed['off']:,})"
                            if failed
                            else ""
                        )
                    )
    return rows


def report(
    rows: Sequence[SweepRow], grid: SweepGrid, *, duration: float, rounds: int, queues: int
) -> dict[str, Any]:
    """The sweep as one JSON object: its settings, every row and the worst one."""
    row = worst(rows)
    return {
        "bench": "produce-sweep",
        "duration_s": duration,
        "rounds": rounds,
        "queues": queues,
        "grid": {"topics": grid.topics, "in_flight": grid.threads, "sizes": grid.sizes},
        "rows": [r.to_dict() for r in rows],
        "worst": row.to_dict() if row is not None else None,
        "slower_rows": sum(1 for r in rows if r.ratio < 1.0),
        "slower_rows_unbatched": sum(1 for r in rows if r.ratio < 1.0 and r.on_batched == 0),
    }


def json_report(result: Mapping[str, Any]) -> str:
    return json_line(result)
