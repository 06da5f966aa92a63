"""``rocketq bench recovery --topics``: a broker's graceful restart and crash recovery, by
its number of topics.

For each topic count, one fresh ASYNC_FLUSH broker and one nameserver (the launcher that
``rocketq cluster up`` uses) get that many topics of ``QUEUES`` queues, auto-created one by
one as ``rocketq bench topics`` creates them (a producer's first send to each), then
``messages`` single sends, ``IN_FLIGHT`` in flight, round-robin over the topics. Then:

1. graceful: SIGTERM (the time until the process exited is the stop), start it again and
   time the first SEND_OK of a new producer to the last topic created;
2. crash: the same ``messages`` again (so the recovery has the same data to check at every
   count), SIGKILL, start it again and time the first SEND_OK the same way; the broker's
   recovery log lines add what it checked and re-dispatched, and when the re-dispatch
   caught up.

After each restart the nameserver must route every topic, and a sample of them must hold
every message acknowledged to them and take a new one: a fast restart that lost topics
fails the run. The broker's own log times its start-up steps (store loaded, boot, first
registration) from the start. Two counts in one run, so a restart that grows with the
topics shows as a ratio.
"""

from __future__ import annotations

import asyncio
import collections
import random
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rocketq.bench.recovery_bench import (
    SizeResult,
    fresh_cluster,
    read_recovery_log,
    stop_and_restart,
)
from rocketq.bench.report import MB, BenchOptionError, json_line, rate
from rocketq.bench.topics_bench import parse_counts, rss_mb, topic_name

if TYPE_CHECKING:
    from rocketq.cluster.launcher import LocalCluster

QUEUES: Final = 4
IN_FLIGHT: Final = 32
DEFAULT_MESSAGES: Final = 100_000
SAMPLE: Final = 8  # random topics checked after each restart, besides the first and last
VERIFY_WAIT_S: Final = 30.0  # for a sampled topic's queues to show its messages again
KINDS: Final = ("graceful", "crash")

# Start-up steps in the broker's log (storage.message_store, broker.broker,
# broker.registration), timed from the start by the line's own clock.
_LOG_TIME: Final = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", re.M)
_STEPS: Final = (
    ("first_line", re.compile(r"^\d{4}-", re.M)),
    ("store_loaded", re.compile(r"store loaded from ")),
    ("boot", re.compile(r"boot success")),
    ("registered", re.compile(r"registered with nameserver")),
)
_LOADED: Final = re.compile(
    r"store loaded from .*?: CommitLog \[\d+, (\d+)\), (\d+) queues, (fast|checked)"
)


def parse_topic_counts(text: str) -> list[int]:
    """``"1,10000"`` -> [1, 10000]: one or two counts, ascending, 1 to 100,000. One count
    N > 1 also runs one topic, so every run compares two counts."""
    counts = parse_counts(text)
    if len(counts) > 2:
        raise BenchOptionError("--topics", f"at most two topic counts per run, got {text!r}")
    if len(counts) == 1 and counts[0] > 1:
        counts = [1, counts[0]]
    return counts


def check_mode(
    *,
    topics: str | None,
    gb: str | None,
    messages: int | None,
    senders: int | None,
    batch: int | None,
) -> None:
    """The flags of one mode (CommitLog sizes, topic counts) given to the other."""
    if topics is None:
        if messages is not None:
            raise BenchOptionError(
                "--messages",
                "--messages sets the data of a --topics run; without --topics "
                "the run fills to the --gb sizes",
            )
        return
    for flag, value in (("--gb", gb), ("--senders", senders), ("--batch", batch)):
        if value is not None:
            raise BenchOptionError(
                flag,
                f"--topics and {flag} do not go together: --topics compares topic counts "
                f"with --messages single sends, {flag} belongs to the CommitLog size mode",
            )


def check_topics_options(*, messages: int, size: int) -> None:
    if messages < 1:
        raise BenchOptionError("--messages", f"must be at least 1, got {messages}")
    if not 1 <= size <= 4 * 1024 * 1024:
        raise BenchOptionError("--size", f"must be 1 B to 4 MiB, got {size}")


@dataclass
class RestartResult:
    """One stop and start of the broker."""

    kind: str  # "graceful" (SIGTERM) or "crash" (SIGKILL)
    stop_s: float = 0.0  # the signal until the process exited
    restart_to_ready_s: float = 0.0
    restart_to_send_ok_s: float = 0.0
    failed_sends_after_restart: int = 0
    # From the broker's log (-1 / None: not found).
    steps_s: dict[str, float] = field(default_factory=dict)
    queues_loaded: int = -1
    recovery: str = ""  # "fast" after a clean stop, "checked" after a crash
    scanned_records: int = -1
    scanned_bytes: int = -1
    from_checkpoint: bool | None = None
    redispatch_bytes: int = -1
    redispatch_caught_up_s: float = -1.0
    commitlog_bytes: int = -1  # where the CommitLog ends, as the store loaded it
    # What was checked after it: topics the nameserver routes, topics sampled.
    topics_routed: int = 0
    topics_verified: int = 0
    broker_rss_mb: float = -1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "stop_s": round(self.stop_s, 3),
            "restart_to_ready_s": round(self.restart_to_ready_s, 3),
            "restart_to_send_ok_s": round(self.restart_to_send_ok_s, 3),
            "failed_sends_after_restart": self.failed_sends_after_restart,
            "log_steps_s": {k: round(v, 3) for k, v in self.steps_s.items()},
            "queues_loaded": self.queues_loaded,
            "recovery": self.recovery,
            "scanned_records": self.scanned_records,
            "scanned_bytes": self.scanned_bytes,
            "from_checkpoint": self.from_checkpoint,
            "redispatch_bytes": self.redispatch_bytes,
            "redispatch_caught_up_s": round(self.redispatch_caught_up_s, 3),
            "commitlog_bytes": self.commitlog_bytes,
            "topics_routed": self.topics_routed,
            "topics_verified": self.topics_verified,
            "broker_rss_mb": round(self.broker_rss_mb, 1),
        }


@dataclass
class CountResult:
    """One topic count: its fresh broker, its data and its two restarts."""

    topics: int
    messages: int = 0  # per fill; the run fills twice (before each restart)
    create_s: float = 0.0
    fill_s: list[float] = field(default_factory=list)
    send_failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    restarts: dict[str, RestartResult] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topics": self.topics,
            "messages": self.messages,
            "create_s": round(self.create_s, 3),
            "fill_s": [round(s, 3) for s in self.fill_s],
            "fill_msgs_per_s": [round(rate(self.messages, s), 1) for s in self.fill_s],
            "send_failed": self.send_failed,
            "errors": self.errors,
            **{kind: r.to_dict() for kind, r in self.restarts.items()},
        }


def read_start_log(text: str, started_wall: float, result: RestartResult) -> None:
    """Fill the start-up facts of ``result`` from the log lines of one start of the broker
    (``text``), begun at ``started_wall`` (``time.time()``)."""
    for name, pattern in _STEPS:
        found = pattern.search(text)
        if found is None:
            continue
        line_start = text.rfind("\n", 0, found.start()) + 1
        stamp = _LOG_TIME.match(text, line_start)
        if stamp is None:
            continue
        at = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        result.steps_s[name] = max(0.0, at - started_wall)
    if m := _LOADED.search(text):
        result.commitlog_bytes = int(m[1])
        result.queues_loaded = int(m[2])
        result.recovery = m[3]
    facts = SizeResult(0.0)
    read_recovery_log(text, facts)
    result.scanned_records, result.scanned_bytes = facts.scanned_records, facts.scanned_bytes
    result.from_checkpoint = facts.from_checkpoint
    result.redispatch_bytes = facts.redispatch_bytes
    result.redispatch_caught_up_s = facts.redispatch_caught_up_s


class _Sent:
    """Messages acknowledged per topic, and the sends that failed."""

    def __init__(self) -> None:
        self.ok: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


async def _create(producer: Any, names: Sequence[str], body: bytes, sent: _Sent) -> None:
    """Auto-create the topics one by one: one send each (as ``rocketq bench topics``)."""
    from rocketq import Message

    for name in names:
        out = await producer.send(Message(name, body))
        if not out.ok:
            raise RuntimeError(f"creating {name}: the send answered {out.status.name}")
        sent.ok[name] += 1


async def _fill(
    producer: Any, names: Sequence[str], messages: int, body: bytes, sent: _Sent
) -> None:
    """``messages`` single sends, ``IN_FLIGHT`` in flight, round-robin over the topics."""
    from rocketq import Message

    turns = iter(range(messages))
    limit = max(1000, messages // 10)

    async def worker() -> None:
        for i in turns:
            topic = names[i % len(names)]
            try:
                out = await producer.send(Message(topic, body))
            except Exception as exc:
                sent.errors[type(exc).__name__] += 1
            else:
                if out.ok:
                    sent.ok[topic] += 1
                    continue
                sent.errors[out.status.name] += 1
            if sent.failed > limit:
                raise RuntimeError(f"filling: {sent.failed:,} sends failed ({dict(sent.errors)})")

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))


async def _fill_timed(
    namesrv: str, names: Sequence[str], messages: int, body: bytes, sent: _Sent
) -> float:
    from rocketq import Producer

    async with Producer(
        group="recovery_bench_topics_fill", namesrv=namesrv, default_topic_queue_nums=QUEUES
    ) as producer:
        t0 = time.monotonic()
        await _fill(producer, names, messages, body, sent)
        return time.monotonic() - t0


async def _stored(admin: Any, topic: str) -> tuple[int, int]:
    """(queues, messages) the topic's route and its broker show."""
    status = await admin.topic_status(topic)
    return len(status), sum(q.max_offset for q in status)


async def verify(
    namesrv: str, names: Sequence[str], sent: _Sent, body: bytes, rng: random.Random, kind: str
) -> tuple[int, int]:
    """After a restart: the nameserver routes every topic, and the sampled topics (the
    first, the last and ``SAMPLE`` random ones) have ``QUEUES`` queues holding every message
    acknowledged to them and take a new one. -> (topics routed, topics sampled)."""
    from rocketq import Message, Producer
    from rocketq.sdk.admin import Admin

    picks = sorted({names[0], names[-1], *rng.sample(list(names), min(SAMPLE, len(names)))})
    async with Admin(namesrv) as admin:
        listed = set(await admin.topic_list())
        missing = [t for t in names if t not in listed]
        if missing:
            raise RuntimeError(
                f"after the {kind} restart the nameserver routes {len(names) - len(missing):,} "
                f"of the {len(names):,} topics (missing {', '.join(missing[:3])} ...)"
            )
        deadline = time.monotonic() + VERIFY_WAIT_S
        for topic in picks:
            while True:
                queues, stored = await _stored(admin, topic)
                if queues == QUEUES and stored >= sent.ok[topic]:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"after the {kind} restart topic {topic} has {queues} queues holding "
                        f"{stored} messages; {QUEUES} queues and {sent.ok[topic]} were expected"
                    )
                await asyncio.sleep(0.1)
    async with Producer(group="recovery_bench_verify", namesrv=namesrv) as producer:
        for topic in picks:
            out = await producer.send(Message(topic, body))
            if not out.ok:
                raise RuntimeError(
                    f"after the {kind} restart a send to {topic} answered {out.status.name}"
                )
            sent.ok[topic] += 1
    return len(listed & set(names)), len(picks)


async def _restart(
    cluster: LocalCluster,
    names: Sequence[str],
    sent: _Sent,
    body: bytes,
    rng: random.Random,
    kind: str,
) -> RestartResult:
    result = RestartResult(kind)
    sig = signal.SIGTERM if kind == "graceful" else signal.SIGKILL
    restart = await stop_and_restart(cluster, sig, names[-1], body, SizeResult(0.0))
    sent.ok[names[-1]] += 1
    result.stop_s = restart.stop_s
    result.restart_to_ready_s = restart.timed.to_ready_s
    result.restart_to_send_ok_s = restart.timed.to_send_ok_s
    result.failed_sends_after_restart = restart.timed.failed_sends
    read_start_log(restart.log, restart.timed.started_wall, result)
    result.topics_routed, result.topics_verified = await verify(
        cluster.namesrv_addr, names, sent, body, rng, kind
    )
    result.broker_rss_mb = rss_mb(cluster.brokers[0].pid)
    return result


async def _one_count(
    count: int,
    *,
    base: Path,
    messages: int,
    size: int,
    segment_size: int,
    echo: Callable[[str], None],
) -> CountResult:
    from rocketq import Producer

    result = CountResult(count, messages=messages)
    body = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    names = [topic_name(i) for i in range(count)]
    sent = _Sent()
    rng = random.Random(count)
    settings = {"auto_create_topic_enable": "true", "default_topic_queue_nums": str(QUEUES)}
    async with fresh_cluster(
        base, "bench-restart-", segment_size=segment_size, settings=settings
    ) as cluster:
        broker = cluster.brokers[0]
        namesrv = cluster.namesrv_addr
        async with Producer(
            group="recovery_bench_topics", namesrv=namesrv, default_topic_queue_nums=QUEUES
        ) as producer:
            t0 = time.monotonic()
            await _create(producer, names, body, sent)
            result.create_s = time.monotonic() - t0
            echo(
                f"[Topics {count:,}] created {count:,} topics one by one in "
                f"{result.create_s:.2f} s; {messages:,} sends of {size} B, {IN_FLIGHT} in "
                "flight"
            )
            t0 = time.monotonic()
            await _fill(producer, names, messages, body, sent)
            result.fill_s.append(time.monotonic() - t0)
        for kind in KINDS:
            if kind == "crash":
                result.fill_s.append(await _fill_timed(namesrv, names, messages, body, sent))
            echo(
                f"[Topics {count:,}] {messages:,} messages in {result.fill_s[-1]:.1f} s; "
                f"{'SIGTERM' if kind == 'graceful' else 'SIGKILL'} {broker.name} and "
                "start it again"
            )
            r = await _restart(cluster, names, sent, body, rng, kind)
            result.restarts[kind] = r
            echo(
                f"[Topics {count:,}] {kind}: stopped in {r.stop_s:.2f} s, first SEND_OK "
                f"{r.restart_to_send_ok_s:.2f} s after the start; {r.topics_routed:,} "
                f"topics routed, {r.topics_verified} checked"
            )
    result.send_failed = sent.failed
    result.errors = dict(sent.errors)
    return result


async def run_restart_bench(
    counts: Sequence[int],
    *,
    messages: int = DEFAULT_MESSAGES,
    size: int = 1024,
    segment_size: int = 1 << 30,
    data_dir: str | None = None,
    echo: Callable[[str], None] = print,
) -> list[CountResult]:
    """Run every topic count (ascending) on a fresh broker; -> one result per count."""
    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    results = []
    for count in counts:
        results.append(
            await _one_count(
                count,
                base=base,
                messages=messages,
                size=size,
                segment_size=segment_size,
                echo=echo,
            )
        )
    return results


def _mb(n: int) -> str:
    return "-" if n < 0 else f"{n / MB:,.1f}"


def _ratios(results: Sequence[CountResult]) -> dict[str, dict[str, float]]:
    """Large over small count, per restart kind: stop and time to the first SEND_OK."""
    if len(results) != 2:
        return {}
    small, large = results
    out: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        a, b = small.restarts.get(kind), large.restarts.get(kind)
        if a is None or b is None or a.restart_to_send_ok_s <= 0:
            continue
        out[kind] = {
            "stop": round(rate(b.stop_s, a.stop_s), 3),
            "restart_to_send_ok": round(rate(b.restart_to_send_ok_s, a.restart_to_send_ok_s), 3),
        }
    return out


def table(results: Sequence[CountResult]) -> list[str]:
    """The results as text lines, one row per topic count and restart kind, then the ratios."""
    head = (
        f"{'topics':>7} {'restart':>8} {'stop s':>7} {'to ready s':>11} {'to SEND_OK s':>13} "
        f"{'store loaded s':>15} {'queues':>7} {'checked MB':>11} {'re-dispatch MB':>15} "
        f"{'caught up s':>12} {'routed':>7} {'checked topics':>15}"
    )
    lines = [head]
    for c in results:
        for kind, r in c.restarts.items():
            caught = "-" if r.redispatch_caught_up_s < 0 else f"{r.redispatch_caught_up_s:.2f}"
            loaded = r.steps_s.get("store_loaded")
            lines.append(
                f"{c.topics:>7,} {kind:>8} {r.stop_s:>7.2f} {r.restart_to_ready_s:>11.2f} "
                f"{r.restart_to_send_ok_s:>13.2f} "
                f"{'-' if loaded is None else f'{loaded:.2f}':>15} {r.queues_loaded:>7,} "
                f"{_mb(r.scanned_bytes):>11} {_mb(r.redispatch_bytes):>15} {caught:>12} "
                f"{r.topics_routed:>7,} {r.topics_verified:>15}"
            )
    ratios = _ratios(results)
    if ratios:
        small, large = results
        for kind, ratio in ratios.items():
            lines.append(
                f"{kind}: topics x{rate(large.topics, small.topics):,.0f}, stop "
                f"x{ratio['stop']:.2f}, time to the first SEND_OK "
                f"x{ratio['restart_to_send_ok']:.2f}"
            )
    return lines


def json_report(results: Sequence[CountResult], *, messages: int, size: int) -> str:
    fields: dict[str, object] = {
        "bench": "recovery",
        "mode": "topics",
        "queues": QUEUES,
        "in_flight": IN_FLIGHT,
        "messages": messages,
        "size": size,
        "counts": [r.to_dict() for r in results],
    }
    if ratios := _ratios(results):
        fields["ratios"] = ratios
    return json_line(fields)


__all__ = [
    "DEFAULT_MESSAGES",
    "CountResult",
    "RestartResult",
    "check_mode",
    "check_topics_options",
    "json_report",
    "parse_topic_counts",
    "read_start_log",
    "run_restart_bench",
    "table",
    "verify",
]
