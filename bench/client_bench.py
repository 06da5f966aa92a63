"""``rocketq bench produce`` and ``rocketq bench consume``: the SDK against a running
cluster (or one started for the run with ``--embedded``), printing what RocketMQ's
benchmark tools print: a progress line every second, then TPS, average and max RT and
p50/p99/p999, and with ``--json`` one JSON object on the last line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rocketq.bench.report import MB, BenchOptionError, json_line, rate, summarize_ns, tps_line
from rocketq.common.exceptions import RocketqError
from rocketq.common.message import Message

if TYPE_CHECKING:
    from rocketq.cluster.launcher import LocalCluster

EMBEDDED_SETTINGS = {"mapped_file_size_commit_log": str(1 << 30)}
# Where Linux says how many memory maps a process may have, and the maps a broker needs
# besides its ConsumeQueue files (CommitLog segments, index files, libraries).
MAX_MAP_COUNT = "/proc/sys/vm/max_map_count"
MAP_MARGIN = 5_000
# Admin requests creating topics at once, and warm-up sends (one per topic) at once.
CREATE_IN_FLIGHT = 16
WARM_IN_FLIGHT = 64
T = TypeVar("T")


@contextlib.contextmanager
def target_cluster(
    namesrv: str | None,
    embedded: bool,
    data_dir: str | None,
    echo: Callable[[str], None],
    *,
    replication: str = "none",
    role: str = "ASYNC_MASTER",
    pin: bool = False,
) -> Iterator[str]:
    """The nameserver address to use: the given one, or a local cluster started for the
    run (with ``replication`` "ha", each group a master of ``role`` and a slave; with
    ``pin``, its processes on one CPU and this one on the others: :func:`pin_apart`)."""
    if pin:
        check_pin(embedded)
    if not embedded:
        yield namesrv or os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
        return
    with embedded_cluster(data_dir, echo, replication=replication, role=role) as cluster:
        if not pin:
            yield cluster.namesrv_addr
            return
        mine = os.sched_getaffinity(0)
        pin_apart([n.pid for n in cluster.nodes if n.pid], echo)
        try:
            yield cluster.namesrv_addr
        finally:
            _pin_threads(os.getpid(), mine)  # this process as it was


def check_pin(embedded: bool) -> None:
    """BenchOptionError when ``--pin`` cannot be done: without ``--embedded`` (no cluster
    processes of the run's own) or with fewer than two CPUs to use."""
    if not embedded:
        raise BenchOptionError("--pin", "pinning needs --embedded (the cluster's processes)")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise BenchOptionError("--pin", f"pinning needs two CPUs; this process may use {cpus}")


def pin_apart(pids: list[int], echo: Callable[[str], None]) -> None:
    """Every thread of the processes ``pids`` (the cluster's) on the last CPU this process
    may use, and every thread of this process (the client) on the others: on a small
    machine the scheduler then no longer moves the two sides between CPUs from one run to
    the next, which at one send in flight changes a run's rate by more than what is
    measured (:func:`check_pin` first)."""
    cpus = sorted(os.sched_getaffinity(0))
    for pid in pids:
        _pin_threads(pid, {cpus[-1]})
    _pin_threads(os.getpid(), set(cpus[:-1]))
    echo(
        f"pinned: the cluster's {len(pids)} processes to CPU {cpus[-1]}, the client to "
        f"CPU {','.join(map(str, cpus[:-1]))}"
    )


def _pin_threads(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` (threads started later inherit the affinity of the thread
    that starts them)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            continue


@contextlib.contextmanager
def embedded_cluster(
    data_dir: str | None,
    echo: Callable[[str], None],
    *,
    replication: str = "none",
    role: str = "ASYNC_MASTER",
) -> Iterator[LocalCluster]:
    """A local cluster started for the run in a temp dir under ``data_dir`` (default
    ``data``), stopped and removed after it."""
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    settings = {**EMBEDDED_SETTINGS, "broker_role": role}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-", dir=base) as tmp:
        spec = ClusterSpec(
            data_dir=Path(tmp),
            broker_settings=settings,
            replication=replication,  # type: ignore[arg-type]
        )
        with LocalCluster(spec) as cluster:
            echo(
                f"embedded cluster: nameserver {cluster.namesrv_addr}, replication "
                f"{replication}, master {role}, data in {tmp}"
            )
            yield cluster


@dataclass
class SendCounters:
    """What a load counted: messages sent and failed, and the calls' time (ns)."""

    sent: int = 0
    failed: int = 0
    max_ns: int = 0
    total_ns: int = 0
    calls: int = 0

    def snapshot(self) -> tuple[int, int, int, int]:
        return self.sent, self.failed, self.calls, self.total_ns


async def ensure_topic(
    namesrv: str, topic: str, queues: int, client: Mapping[str, Any] | None = None
) -> None:
    from rocketq.sdk.admin import Admin

    async with Admin(namesrv, **(client or {})) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def check_memory_maps(topics: int, queues: int, *, flag: str = "--queues") -> None:
    """Refuse (BenchOptionError naming ``flag``) a load whose queues would need more memory
    maps than this machine lets one process have (``vm.max_map_count``): a broker maps
    every ConsumeQueue file, and past the limit its CommitLog cannot map its next segment
    (the send fails with ENOMEM). Checked for the clusters a benchmark starts here."""
    try:
        limit = int(Path(MAX_MAP_COUNT).read_text())
    except (OSError, ValueError):
        return  # not Linux, or not readable: nothing to check against
    needed = topics * queues + MAP_MARGIN
    if needed > limit:
        raise BenchOptionError(
            flag,
            f"{topics:,} topics of {queues} queues need about {needed:,} memory maps in the "
            f"broker, more than vm.max_map_count ({limit:,}) allows; use fewer queues per "
            "topic (--queues) or raise vm.max_map_count",
        )


def topic_names(topic: str, count: int) -> list[str]:
    """The topics a run over ``count`` topics sends to: ``topic`` itself for one,
    ``<topic>-0`` .. ``<topic>-<count - 1>`` for more."""
    if count < 1:
        raise BenchOptionError("--topics", f"at least one topic, got {count}")
    return [topic] if count == 1 else [f"{topic}-{i}" for i in range(count)]


async def ensure_topics(
    namesrv: str,
    names: Sequence[str],
    queues: int,
    client: Mapping[str, Any] | None = None,
    *,
    in_flight: int = CREATE_IN_FLIGHT,
) -> None:
    """Create (or update) every topic of ``names`` with ``queues`` queues on every master
    of the cluster, ``in_flight`` admin requests at a time, then wait until the brokers
    have made the new queues' files, so that sends timed afterwards pay neither."""
    from rocketq.bench.topics_bench import queues_ready
    from rocketq.sdk.admin import Admin

    if not names:
        return
    async with Admin(namesrv, **(client or {})) as admin:
        masters = sorted({b.addr for b in await admin.cluster_list() if b.broker_id == 0})
        if not masters:
            raise RocketqError("no broker master is registered with the nameserver")
        pending = iter(names)

        async def creator() -> None:
            for name in pending:  # one iterator shared by the creators: each name once
                for addr in masters:
                    await admin.update_topic(
                        name, read_queue_nums=queues, write_queue_nums=queues, broker_addr=addr
                    )

        await asyncio.gather(*(creator() for _ in range(min(in_flight, len(names)))))
    await queues_ready(namesrv, client=client)


async def produce(
    namesrv: str,
    *,
    topic: str,
    size: int,
    concurrency: int,
    batch: int,
    duration: float,
    messages: int,
    queues: int,
    echo: Callable[[str], None],
    client: Mapping[str, Any] | None = None,
    cpu_seconds: Callable[[], float] | None = None,
    producer_settings: Mapping[str, Any] | None = None,
    topics: int = 1,
) -> dict[str, object]:
    """Send ``size``-byte messages from ``concurrency`` senders for ``duration`` seconds
    (or ``messages`` in all), round robin over ``topics`` topics (see
    :func:`topic_names`), all created and each sent one warm-up message before the clock
    starts; ``client`` holds the SDK settings the producer and the admin calls take
    besides the nameserver (credentials, TLS); ``producer_settings`` more settings of the
    producer alone (``auto_batch``). With ``cpu_seconds`` (a clock of CPU time spent), the
    result adds ``cpu_us_per_msg``: its advance over the timed region per message sent."""
    from rocketq import Producer
    from rocketq.bench.topics_bench import send_one_each

    client = dict(client or {})
    names = topic_names(topic, topics)
    if topics == 1:
        await ensure_topic(namesrv, topic, queues, client)
    else:
        t0 = time.monotonic()
        await ensure_topics(namesrv, names, queues, client)
        echo(f"created {topics:,} topics of {queues} queues in {time.monotonic() - t0:.2f} s")
    body = make_body(size)
    lat: list[int] = []
    c = SendCounters()

    lags: list[int] = []
    settings = {**client, **(producer_settings or {})}
    async with Producer(group="benchmark_producer", namesrv=namesrv, **settings) as producer:
        await _wait_slaves_attached(namesrv, echo, client=client)
        # One warm-up send per topic opens its route and the broker stream outside the
        # timed region.
        await send_one_each(producer, names, body, in_flight=WARM_IN_FLIGHT)
        sampler = asyncio.ensure_future(_sample_lag(namesrv, lags, client))
        cpu_start = cpu_seconds() if cpu_seconds is not None else 0.0
        progress = asyncio.ensure_future(_progress(c, "Send", echo))
        try:
            elapsed = await send_load(
                producer,
                names,
                body,
                c,
                concurrency=concurrency,
                duration=duration,
                batch=batch,
                messages=messages,
                lat=lat,
            )
        finally:
            progress.cancel()
            sampler.cancel()
        cpu = cpu_seconds() - cpu_start if cpu_seconds is not None else 0.0
        batcher = producer.batcher
        batches = batcher.batches_sent if batcher is not None else 0
        batched = batcher.batched_messages if batcher is not None else 0
    summary = summarize_ns(lat)
    tps = rate(c.sent, elapsed)
    echo(tps_line("Total Send", tps, tps * size / MB, summary, c.failed))
    max_lag = max(lags, default=-1)
    mean_lag = sum(lags) / len(lags) if lags else -1
    if lags:
        echo(
            f"[Replication] lag of the slaves under this load: max {max_lag:,} bytes, mean "
            f"{mean_lag:,.0f} bytes ({len(lags)} samples)"
        )
    if batches:
        echo(
            f"[Natural batching] {batched:,} messages left in {batches:,} batches "
            f"({batched / batches:.1f} per batch)"
        )
    extra: dict[str, object] = {}
    if cpu_seconds is not None:
        extra["cpu_us_per_msg"] = round(cpu / c.sent * 1e6, 2) if c.sent else 0.0
    return {
        "bench": "produce",
        "topic": topic,
        "topics": topics,
        "size": size,
        "concurrency": concurrency,
        "batch": batch,
        "msgs": c.sent,
        "failed": c.failed,
        "elapsed_s": round(elapsed, 3),
        "msgs_per_s": round(tps, 1),
        "mb_s": round(tps * size / MB, 3),
        "avg_rt_ms": summary.avg_ms,
        "max_rt_ms": summary.max_ms,
        "p50_ms": summary.p50_ms,
        "p99_ms": summary.p99_ms,
        "p999_ms": summary.p999_ms,
        "natural_batches": batches,
        "naturally_batched_msgs": batched,
        "max_replication_lag_bytes": max_lag,
        "mean_replication_lag_bytes": round(mean_lag),
        **extra,
    }


def make_body(size: int) -> bytes:
    """A body of ``size`` bytes that does not compress to nothing."""
    return os.urandom(size // 2).hex().encode()[:size].ljust(size, b"x")


async def send_load(
    producer: Any,
    names: Sequence[str],
    body: bytes,
    c: SendCounters,
    *,
    concurrency: int,
    duration: float,
    batch: int = 1,
    messages: int = 0,
    lat: list[int] | None = None,
) -> float:
    """``concurrency`` senders on ``producer``, each sending ``body`` (``batch`` messages
    a call: one ``send``, or one ``send_batch`` of one topic) and the next once its last
    returned, taking the topics of ``names`` in turn, for ``duration`` seconds or until
    ``messages`` (0: no budget); counts into ``c`` and, given ``lat``, appends each call's
    latency (ns). -> the seconds from the start until the last call under way returned."""
    from rocketq import Message

    stop_at = time.monotonic() + duration
    budget = messages if messages > 0 else None
    topics = len(names)
    turn = 0

    async def worker() -> None:
        nonlocal budget, turn
        while time.monotonic() < stop_at:
            if budget is not None:
                if budget <= 0:
                    return
                budget -= batch
            topic = names[turn % topics]
            turn += 1
            t0 = time.perf_counter_ns()
            try:
                if batch > 1:
                    await producer.send_batch([Message(topic, body) for _ in range(batch)])
                else:
                    await producer.send(Message(topic, body))
            except Exception:
                c.failed += batch
                continue
            dt = time.perf_counter_ns() - t0
            if lat is not None:
                lat.append(dt)
            c.sent += batch
            c.calls += 1
            c.total_ns += dt
            c.max_ns = max(c.max_ns, dt)

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.monotonic() - start


async def _wait_slaves_attached(
    namesrv: str,
    echo: Callable[[str], None],
    timeout: float = 30.0,
    client: Mapping[str, Any] | None = None,
) -> None:
    """With master/slave groups: wait until every master has its slave connected, so a
    SYNC_MASTER is measured replicating (not answering SLAVE_NOT_AVAILABLE at once while
    its slave is still connecting). Gives up, saying so, after ``timeout`` seconds."""
    from rocketq.sdk.admin import Admin

    deadline = time.monotonic() + timeout
    async with Admin(namesrv, **(client or {})) as admin:
        while True:
            brokers = await admin.cluster_list()
            groups = {b.broker_name for b in brokers if b.broker_id > 0}
            masters = [
                b
                for b in brokers
                if b.broker_id == 0 and b.broker_name in groups and "haSlaves" in b.runtime
            ]
            if all(int(b.runtime["haSlaves"]) > 0 for b in masters):
                return
            if time.monotonic() >= deadline:
                echo(f"[Replication] a slave is still not connected after {timeout:g} s")
                return
            await asyncio.sleep(0.2)


async def _sample_lag(
    namesrv: str, lags: list[int], client: Mapping[str, Any] | None = None
) -> None:
    """Every 200 ms: the largest replication lag (bytes) any master reports, if any has
    slaves."""
    from rocketq.sdk.admin import Admin

    async with Admin(namesrv, **(client or {})) as admin:
        while True:
            try:
                brokers = await admin.cluster_list()
            except Exception:  # a sample lost is no reason to stop the run
                brokers = []
            if brokers and not any(b.broker_id > 0 for b in brokers):
                return  # no slaves: nothing to sample, and nothing to slow the run with
            masters = [b for b in brokers if b.broker_id == 0 and "haSlaves" in b.runtime]
            if any(int(b.runtime["haSlaves"]) > 0 for b in masters):
                lags.append(max(int(b.runtime.get("haLagBytes", 0)) for b in masters))
            await asyncio.sleep(0.2)


async def _progress(c: SendCounters, label: str, echo: Callable[[str], None]) -> None:
    last = c.snapshot()
    while True:
        await asyncio.sleep(1.0)
        now = c.snapshot()
        calls = now[2] - last[2]
        avg = (now[3] - last[3]) / calls / 1e6 if calls else 0.0
        echo(
            f"{label} TPS: {now[0] - last[0]:,} Max RT(ms): {c.max_ns / 1e6:.3f} "
            f"Average RT(ms): {avg:.3f} {label} Failed: {now[1]}"
        )
        last = now


async def consume(
    namesrv: str,
    *,
    topic: str,
    group: str,
    size: int,
    backlog: int,
    duration: float,
    queues: int,
    consume_batch: int,
    echo: Callable[[str], None],
    expect: int = 0,
) -> dict[str, object]:
    """Consume ``topic`` with ``group`` until ``expect`` messages (default: the
    ``backlog`` written first; with neither, what arrives) or ``duration`` seconds."""
    from rocketq import ConsumeFrom, ConsumeResult, MessageExt, Producer, PushConsumer

    await ensure_topic(namesrv, topic, queues)
    if backlog:
        body = b"x" * size
        echo(f"writing a backlog of {backlog:,} messages to {topic} ...")
        async with Producer(group="benchmark_backlog", namesrv=namesrv) as producer:
            left = backlog

            async def writer() -> None:
                nonlocal left
                while left > 0:
                    n = min(32, left)
                    left -= n
                    await producer.send_batch([Message(topic, body) for _ in range(n)])

            await asyncio.gather(*(writer() for _ in range(16)))
    c = SendCounters()
    done = asyncio.Event()
    target = expect or backlog or None

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        c.sent += len(msgs)
        now_ms = time.time() * 1000
        for m in msgs:
            c.max_ns = max(c.max_ns, int((now_ms - m.store_timestamp) * 1e6))
        if target is not None and c.sent >= target:
            done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        group,
        namesrv,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        consume_message_batch_max_size=consume_batch,
    )
    consumer.subscribe(topic, "*")
    consumer.on_message(handler)
    start = time.monotonic()
    await consumer.start()
    progress = asyncio.ensure_future(_progress(c, "Consume", echo))
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), duration)
    finally:
        progress.cancel()
        elapsed = time.monotonic() - start
        await consumer.shutdown()
    tps = rate(c.sent, elapsed)
    echo(
        f"[Total] Consume TPS: {tps:,.0f} | {tps * size / MB:,.1f} MB/s | {c.sent:,} messages "
        f"in {elapsed:.3f} s (consume batch {consume_batch})"
    )
    return {
        "bench": "consume",
        "topic": topic,
        "group": group,
        "size": size,
        "backlog": backlog,
        "msgs": c.sent,
        "elapsed_s": round(elapsed, 3),
        "msgs_per_s": round(tps, 1),
        "mb_s": round(tps * size / MB, 3),
        "consume_batch": consume_batch,
        "max_store_to_consume_ms": round(c.max_ns / 1e6, 3),
    }


def run(coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``coro_factory()`` makes in a new event loop (uvloop's when it is
    installed) and return its result."""
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover
        runner = asyncio.Runner()
    with runner:
        return runner.run(coro_factory())


__all__ = ["consume", "json_line", "produce", "run", "send_load", "target_cluster", "topic_names"]
