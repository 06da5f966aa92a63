"""``rocketq bench topics``: what a broker's throughput, topic creation, registration and
memory cost as its topics grow from one to thousands (RocketMQ's promise over Kafka:
"hundreds to thousands of topics with small throughput drop", every topic sharing one
CommitLog).

One run, one ASYNC_FLUSH broker and one nameserver started for it. For each topic count,
in increasing order, the topics the count adds are auto-created one by one (one producer
send each, as a new user's first sends create them), then single sends with ``concurrency``
in flight go round-robin over all topics for ``duration`` seconds. Each count reports
msgs/s and its ratio to one topic, the time it took to create that many topics one by one
(summed over the counts so far), when the broker had made the files of their new queues
(it does that on a thread after answering; the sends start once it is done, so the figure
is the throughput of a broker with that many topics, not of one still making files), the
failed sends by error, the broker's registration with
the nameservers (the compressed body a full registration of its table carries, and the
bytes it sent them during the step: one small change per new topic, then heartbeats), and
the broker's resident memory.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketq.bench.report import BenchOptionError, cpu_clock, json_line, rate

TOPIC_PREFIX = "BenchTopic-"
MAX_TOPICS = 100_000
# How long the broker may take to make the new queues' files after the last creation.
READY_TIMEOUT = 600.0


def parse_counts(text: str) -> list[int]:
    """``"1,100,1000"`` -> [1, 100, 1000]: distinct, ascending, 1..MAX_TOPICS."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise BenchOptionError(
            "--topics", f"{text!r} is not a comma list of topic counts such as 1,100,1000"
        ) from None
    if not counts:
        raise BenchOptionError("--topics", "give at least one topic count, e.g. 1,100,1000")
    if counts[0] < 1 or counts[-1] > MAX_TOPICS:
        raise BenchOptionError(
            "--topics", f"topic counts must be between 1 and {MAX_TOPICS:,}, got {text!r}"
        )
    return counts


@dataclass
class StepResult:
    topics: int
    msgs: int = 0
    elapsed_s: float = 0.0
    failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    created: int = 0
    create_s: float = 0.0
    create_total_s: float = 0.0
    ready_s: float = 0.0
    register_full_bytes: int = -1
    register_sent_bytes: int = -1
    broker_rss_mb: float = -1.0
    ratio: float = 0.0
    # CPU time per message sent during the step's sends, in µs: the broker's process and
    # this one (the producer).
    broker_cpu_us: float = 0.0
    client_cpu_us: float = 0.0
    # With rounds: msgs/s of each round's sends at this count (the first is the step's own)
    # and the ratio to one topic in each round; ``ratio`` is then their median.
    round_msgs_per_s: list[float] = field(default_factory=list)
    round_ratios: list[float] = field(default_factory=list)

    @property
    def msgs_per_s(self) -> float:
        return rate(self.msgs, self.elapsed_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topics": self.topics,
            "msgs": self.msgs,
            "elapsed_s": round(self.elapsed_s, 3),
            "msgs_per_s": round(self.msgs_per_s, 1),
            "ratio_to_one_topic": round(self.ratio, 3),
            "failed": self.failed,
            "errors": self.errors,
            "created": self.created,
            "create_s": round(self.create_s, 3),
            "create_total_s": round(self.create_total_s, 3),
            "queues_ready_s": round(self.ready_s, 3),
            "register_full_bytes": self.register_full_bytes,
            "register_sent_bytes": self.register_sent_bytes,
            "broker_rss_mb": round(self.broker_rss_mb, 1),
            "broker_cpu_us_per_msg": round(self.broker_cpu_us, 1),
            "client_cpu_us_per_msg": round(self.client_cpu_us, 1),
            "round_msgs_per_s": [round(r, 1) for r in self.round_msgs_per_s],
            "round_ratios_to_one_topic": [round(r, 3) for r in self.round_ratios],
        }


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (VmRSS), -1 when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return -1.0


def topic_name(index: int) -> str:
    return f"{TOPIC_PREFIX}{index:05d}"


async def send_one_each(
    producer: Any, names: Sequence[str], body: bytes, *, in_flight: int = 1
) -> None:
    """One send to every topic of ``names``, ``in_flight`` at a time (1: one by one, in
    order): a broker with ``auto_create_topic_enable`` creates those it does not have yet
    (as a new user's first sends do), and the producer opens each one's route, so sends
    timed afterwards pay neither. RuntimeError, naming the topic, when a send is not
    answered SEND_OK."""
    from rocketq import Message

    if in_flight < 1:
        raise ValueError(f"in_flight must be >= 1, got {in_flight}")
    pending = iter(names)
    failed: list[str] = []

    async def sender() -> None:
        for name in pending:  # one iterator shared by the senders: each name sent once
            if failed:
                return  # another sender failed: the rest is not sent
            try:
                result = await producer.send(Message(name, body))
            except Exception:
                failed.append(name)
                raise
            if not result.ok:
                failed.append(name)
                raise RuntimeError(f"sending to {name}: the broker answered {result.status.name}")

    outcomes = await asyncio.gather(
        *(sender() for _ in range(min(in_flight, len(names)))), return_exceptions=True
    )
    for outcome in outcomes:  # every sender has stopped: one's error is raised
        if isinstance(outcome, BaseException):
            raise outcome


async def _load(
    producer: Any, topics: int, concurrency: int, duration: float, body: bytes, step: StepResult
) -> None:
    """Single sends, ``concurrency`` in flight, round-robin over the topics."""
    from rocketq import Message

    names = [topic_name(i) for i in range(topics)]
    errors: collections.Counter[str] = collections.Counter()
    turn = 0
    stop_at = time.monotonic() + duration

    async def worker() -> None:
        nonlocal turn
        while time.monotonic() < stop_at:
            topic = names[turn % topics]
            turn += 1
            try:
                result = await producer.send(Message(topic, body))
            except Exception as exc:
                step.failed += 1
                errors[type(exc).__name__] += 1
                continue
            if result.ok:
                step.msgs += 1
            else:
                step.failed += 1
                errors[result.status.name] += 1

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    step.elapsed_s = time.monotonic() - start
    step.errors = dict(errors)


async def _broker_runtime(namesrv: str) -> dict[str, str]:
    """The broker's runtime table (GET_BROKER_RUNTIME_INFO), empty if it is not listed."""
    from rocketq.sdk.admin import Admin

    async with Admin(namesrv) as admin:
        brokers = await admin.cluster_list()
    return brokers[0].runtime if brokers else {}


async def _registration(namesrv: str) -> tuple[int, int]:
    """What a full registration of the broker's table carries now (its compressed body),
    and the bytes it sent to the nameservers so far."""
    runtime = await _broker_runtime(namesrv)
    return (
        int(runtime.get("registerFullBodyBytes", -1)),
        int(runtime.get("registerTotalBytes", -1)),
    )


async def queues_ready(
    namesrv: str, timeout: float = READY_TIMEOUT, client: Mapping[str, Any] | None = None
) -> float:
    """Wait until every broker has made the files of every new queue (each does so on a
    thread of its own after a topic's creation is answered); -> the seconds waited.
    ``client``: the SDK settings the admin calls take besides the nameserver (credentials,
    TLS)."""
    from rocketq.sdk.admin import Admin

    start = time.monotonic()
    async with Admin(namesrv, **(client or {})) as admin:
        while True:
            brokers = await admin.cluster_list()
            pending = sum(int(b.runtime.get("consumeQueuesPreparing", 0)) for b in brokers)
            waited = time.monotonic() - start
            if pending == 0:
                return waited
            if waited > timeout:
                raise RuntimeError(
                    f"the brokers still had {pending:,} queues' files to make after {timeout:g} s"
                )
            await asyncio.sleep(0.05)


async def _run_steps(
    namesrv: str,
    broker_pid: int,
    counts: Sequence[int],
    *,
    queues: int,
    concurrency: int,
    duration: float,
    size: int,
    echo: Callable[[str], None],
    profile_dir: Path | None = None,
    rounds: int = 1,
) -> list[StepResult]:
    from rocketq import Producer

    body = b"x" * size
    steps: list[StepResult] = []
    created = 0
    create_total = 0.0
    sent_before = 0
    async with Producer(
        group="benchmark_topics", namesrv=namesrv, default_topic_queue_nums=queues
    ) as producer:
        for count in counts:
            step = StepResult(count)
            t0 = time.monotonic()
            await send_one_each(producer, [topic_name(i) for i in range(created, count)], body)
            step.create_s = time.monotonic() - t0
            step.created = count - created
            create_total += step.create_s
            step.create_total_s = create_total
            created = count
            step.ready_s = await queues_ready(namesrv) + step.create_s
            echo(
                f"[Topics {count:,}] created {step.created:,} topics one by one in "
                f"{step.create_s:.2f} s ({create_total:.2f} s for all {count:,}); their queues' "
                f"files ready after {step.ready_s:.2f} s; sending for {duration:g} s"
            )
            broker_cpu = cpu_clock([broker_pid], own=False)
            cpu_before = (broker_cpu(), time.process_time())
            with _profiled(profile_dir, count, broker_pid, echo, step):
                await _load(producer, count, concurrency, duration, body, step)
            if step.msgs:
                step.broker_cpu_us = (broker_cpu() - cpu_before[0]) / step.msgs * 1e6
                step.client_cpu_us = (time.process_time() - cpu_before[1]) / step.msgs * 1e6
            step.register_full_bytes, sent = await _registration(namesrv)
            step.register_sent_bytes = sent - sent_before
            sent_before = sent
            step.broker_rss_mb = rss_mb(broker_pid)
            steps.append(step)
            base = steps[0].msgs_per_s if steps[0].topics == 1 else 0.0
            step.ratio = step.msgs_per_s / base if base else 0.0
            echo(
                f"[Topics {count:,}] {step.msgs_per_s:,.0f} msgs/s"
                + (f" ({step.ratio:.2f} of one topic)" if base else "")
                + f", CPU per message: broker {step.broker_cpu_us:.1f} µs, producer "
                f"{step.client_cpu_us:.1f} µs"
                + f", failed {step.failed:,}{_errors_text(step.errors)}, registration body "
                f"{step.register_full_bytes:,} bytes, {step.register_sent_bytes:,} bytes sent, "
                f"broker RSS {step.broker_rss_mb:,.0f} MiB"
            )
        for step in steps:
            step.round_msgs_per_s = [step.msgs_per_s]
        for n in range(2, rounds + 1):
            # The same sends again, every count in turn, on the topics made already: a
            # machine whose speed drifts moves each round's counts alike.
            for step in steps:
                again = StepResult(step.topics)
                await _load(producer, step.topics, concurrency, duration, body, again)
                step.round_msgs_per_s.append(again.msgs_per_s)
                step.failed += again.failed
                echo(
                    f"[Round {n}, topics {step.topics:,}] {again.msgs_per_s:,.0f} msgs/s, "
                    f"failed {again.failed:,}"
                )
    if steps and steps[0].topics == 1:
        ones = steps[0].round_msgs_per_s
        for step in steps:
            step.round_ratios = [
                r / one if one else 0.0 for r, one in zip(step.round_msgs_per_s, ones, strict=True)
            ]
            step.ratio = statistics.median(step.round_ratios)
    return steps


@contextlib.contextmanager
def _profiled(
    profile_dir: Path | None,
    count: int,
    broker_pid: int,
    echo: Callable[[str], None],
    step: StepResult,
) -> Iterator[None]:
    """With ``profile_dir``: py-spy records the broker and this process (the producer)
    while one count's sends run (``topics-<count>-broker.txt``, ``...-client.txt``, with
    the messages sent noted beside them), and their summaries are printed after it.
    ``rocketq bench profile topics-1-broker.txt topics-1000-broker.txt --compare`` shows
    what each function costs per message at each count."""
    if profile_dir is None:
        yield
        return
    from rocketq.bench.profiling import echo_summaries, note_messages, recording

    targets = [(f"topics-{count}-broker", broker_pid), (f"topics-{count}-client", os.getpid())]
    with recording(targets, profile_dir, echo) as files:
        yield
    note_messages(files.values(), step.msgs)
    echo_summaries(files.values(), echo, top=12)


def _errors_text(errors: dict[str, int]) -> str:
    return " (" + ", ".join(f"{k} {v:,}" for k, v in errors.items()) + ")" if errors else ""


def table(steps: Sequence[StepResult]) -> list[str]:
    head = (
        f"{'topics':>7} {'msgs/s':>9} {'of 1 topic':>10} {'broker µs':>9} {'client µs':>9} "
        f"{'failed':>7} {'create s':>9} "
        f"{'create all s':>12} {'ready s':>8} {'reg. body B':>11} {'reg. sent B':>11} "
        f"{'RSS MiB':>8}"
    )
    lines = [head]
    for s in steps:
        ratio = f"{s.ratio:.2f}" if s.ratio else "-"
        lines.append(
            f"{s.topics:>7,} {s.msgs_per_s:>9,.0f} {ratio:>10} {s.broker_cpu_us:>9.1f} "
            f"{s.client_cpu_us:>9.1f} {s.failed:>7,} "
            f"{s.create_s:>9.2f} {s.create_total_s:>12.2f} {s.ready_s:>8.2f} "
            f"{s.register_full_bytes:>11,} "
            f"{s.register_sent_bytes:>11,} "
            f"{s.broker_rss_mb:>8,.0f}"
        )
    return lines


def run_topics_bench(
    counts: Sequence[int],
    *,
    queues: int = 4,
    concurrency: int = 32,
    duration: float = 10.0,
    size: int = 1024,
    data_dir: str | None = None,
    echo: Callable[[str], None] = print,
    profile_dir: Path | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    """Start one nameserver and one ASYNC_FLUSH broker, run every step, stop them (with
    ``profile_dir``, py-spy profiles of the broker and the producer per step). With
    ``rounds`` > 1 every count's sends run that many times, the counts in turn, and each
    count's ratio to one topic is the median of the rounds' ratios."""
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    if concurrency < 1:
        raise BenchOptionError("-c", "at least one send in flight")
    if duration <= 0:
        raise BenchOptionError("--duration", "the duration must be > 0 seconds")
    if not 1 <= queues <= 1024:
        raise BenchOptionError("--queues", "queues per topic must be 1-1024")
    if rounds < 1:
        raise BenchOptionError("--rounds", "at least one round")
    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    settings = {
        "flush_disk_type": "ASYNC_FLUSH",
        "auto_create_topic_enable": "true",
        "default_topic_queue_nums": str(queues),
    }
    with tempfile.TemporaryDirectory(prefix="bench-topics-", dir=base) as tmp:
        spec = ClusterSpec(data_dir=Path(tmp), broker_settings=settings)
        with LocalCluster(spec) as cluster:
            broker = cluster.brokers[0]
            echo(
                f"one broker ({broker.addr}, pid {broker.pid}) and a nameserver "
                f"({cluster.namesrv_addr}); {queues} queues per topic, {concurrency} single "
                f"{size}-byte sends in flight"
            )
            steps = asyncio.run(
                _run_steps(
                    cluster.namesrv_addr,
                    broker.pid,
                    counts,
                    queues=queues,
                    concurrency=concurrency,
                    duration=duration,
                    size=size,
                    echo=echo,
                    profile_dir=profile_dir,
                    rounds=rounds,
                )
            )
    for line in table(steps):
        echo(line)
    if rounds > 1:
        for step in steps[1:] if steps and steps[0].topics == 1 else ():
            echo(
                f"topics {step.topics:,}: ratio to one topic per round "
                + ", ".join(f"{r:.2f}" for r in step.round_ratios)
                + f"; median {step.ratio:.2f}"
            )
    return {
        "bench": "topics",
        "rounds": rounds,
        "queues": queues,
        "concurrency": concurrency,
        "duration_s": duration,
        "size": size,
        "steps": [s.to_dict() for s in steps],
    }


def json_report(result: dict[str, Any]) -> str:
    return json_line(result)
