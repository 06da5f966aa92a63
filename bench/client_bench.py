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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketq.bench.report import MB, json_line, rate, summarize_ns, tps_line
from rocketq.common.message import Message

if TYPE_CHECKING:
    from rocketq.cluster.launcher import LocalCluster

EMBEDDED_SETTINGS = {"mapped_file_size_commit_log": str(1 << 30)}


@contextlib.contextmanager
def target_cluster(
    namesrv: str | None,
    embedded: bool,
    data_dir: str | None,
    echo: Callable[[str], None],
    *,
    replication: str = "none",
    role: str = "ASYNC_MASTER",
) -> Iterator[str]:
    """The nameserver address to use: the given one, or a local cluster started for the
    run (with ``replication`` "ha", each group a master of ``role`` and a slave)."""
    if not embedded:
        yield namesrv or os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876")
        return
    with embedded_cluster(data_dir, echo, replication=replication, role=role) as cluster:
        yield cluster.namesrv_addr


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
class _Counters:
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
) -> dict[str, object]:
    """Send ``size``-byte messages to ``topic`` from ``concurrency`` senders for
    ``duration`` seconds (or ``messages`` in all); ``client`` holds the SDK settings the
    producer and the admin calls take besides the nameserver (credentials, TLS);
    ``producer_settings`` more settings of the producer alone (``auto_batch``). With
    ``cpu_seconds`` (a clock of CPU time spent), the result adds ``cpu_us_per_msg``: its
    advance over the timed region per message sent."""
    from rocketq import Producer

    client = dict(client or {})
    await ensure_topic(namesrv, topic, queues, client)
    body = os.urandom(size // 2).hex().encode()[:size].ljust(size, b"x")
    lat: list[int] = []
    c = _Counters()
    stop_at = time.monotonic() + duration
    budget = messages if messages > 0 else None

    lags: list[int] = []
    settings = {**client, **(producer_settings or {})}
    async with Producer(group="benchmark_producer", namesrv=namesrv, **settings) as producer:
        # One warm-up send opens the route and the broker stream outside the timed region.
        await producer.send(Message(topic, body))
        await _wait_slaves_attached(namesrv, echo, client=client)
        sampler = asyncio.ensure_future(_sample_lag(namesrv, lags, client))

        async def worker() -> None:
            nonlocal budget
            while time.monotonic() < stop_at:
                if budget is not None:
                    if budget <= 0:
                        return
                    budget -= batch
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
                lat.append(dt)
                c.sent += batch
                c.calls += 1
                c.total_ns += dt
                c.max_ns = max(c.max_ns, dt)

        cpu_start = cpu_seconds() if cpu_seconds is not None else 0.0
        start = time.monotonic()
        progress = asyncio.ensure_future(_progress(c, "Send", echo))
        try:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        finally:
            progress.cancel()
            sampler.cancel()
        elapsed = time.monotonic() - start
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


async def _progress(c: _Counters, label: str, echo: Callable[[str], None]) -> None:
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
    c = _Counters()
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


def run(coro_factory: Callable[[], object]) -> dict[str, object]:
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover
        runner = asyncio.Runner()
    with runner:
        return runner.run(coro_factory())  # type: ignore[arg-type]


__all__ = ["consume", "json_line", "produce", "run", "target_cluster"]
