"""``rocketq bench spark``: the ``rocketq`` Spark data source (sdk/spark/) against the plain
SDK on the same cluster in the same run, as rates and ratios spark/sdk.

One run, one phase after the other:

1. a Spark session starts (``local[2]`` by default); its start is reported on its own and
   is in no rate;
2. Spark warm-up: a write of :data:`WARMUP_MESSAGES` messages into a topic of their own, then
   a batch and a streaming read of them. Spark starts a Python process per kind of planning
   call and per task slot on first use, and imports the data source in each: seconds that a
   session pays once. The warm-up is reported on its own and is in no rate, as the SDK
   phases' own warm-up (their clients' start and first send);
3. SDK write: ``produce`` (bench/client_bench.py) sends N messages into topic A in
   batches of 32, :data:`SDK_IN_FLIGHT` batches in flight (what one Spark write task has);
4. Spark write: a DataFrame of N rows, one ``size``-byte body each, computed by Spark from
   ``range`` (the driver holds no row), split over the master's cores, saved into topic B
   (same queue count) by the data source's writer with its default options;
5. SDK read: ``consume`` of topic A's backlog with a new group;
6. Spark read: topic A loaded by the data source and reduced to ``count(*)`` and
   ``sum(length(body))`` in the JVM, so every row and every body crosses from the Python
   reader to the JVM; both numbers are checked against what topic A holds;
7. Spark stream: topic A's backlog read by a streaming query of the data source
   (``readStream``, trigger ``availableNow``, Spark's ``noop`` sink, a new checkpoint); the
   rows its micro-batches report are checked against what topic A holds.

Each rate is messages over the wall time of its phase (for Spark: from the start of the
action to its end, planning included). The goal is spark/sdk >= :data:`GOAL` for the write
and the read; the stream's rate is reported beside the read's, against the same SDK read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from rocketq.bench.client_bench import consume, ensure_topic, produce, run
from rocketq.bench.report import MB, rate
from rocketq.common.exceptions import RocketqError

SDK_BATCH: Final = 32  # messages per send, as `rocketq bench produce -b 32` and the writer
SDK_IN_FLIGHT: Final = 8  # the SDK's sends in flight: the writer's maxInFlight per task
SDK_CONSUME_BATCH: Final = 32  # messages per handler call: one pull's worth
DRIVER_MEMORY: Final = "2g"
PHASE_TIMEOUT_S: Final = 3600.0  # an SDK phase gives up after this long
GOAL: Final = 0.5
WARMUP_MESSAGES: Final = 1000


class SparkBenchError(RocketqError):
    """The benchmark cannot run here, or a phase did not move what it should have."""


# -- where the CPU goes -------------------------------------------------------------------

ROLES: Final = (
    "bench process",
    "broker",
    "nameserver",
    "Spark JVM",
    "Spark Python workers",
    "Spark Python planners",
)
"""The processes of a run, by what they do: the bench process is the SDK's client in the
SDK phases and Spark's driver in the Spark phases; the Python workers run the data source's
tasks; the planners are the Python processes Spark starts for the data source's calls on
the driver (options, partitions, offsets, commits)."""

_CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _role(cmdline: str) -> str | None:
    argv0 = cmdline.split(" ", 1)[0]
    if argv0.endswith("java"):
        return "Spark JVM"
    if "pyspark.daemon pyspark.worker" in cmdline:
        return "Spark Python workers"
    if "pyspark" in cmdline and "python" in argv0:
        return "Spark Python planners"
    if " broker " in cmdline and "rocketq" in cmdline:
        return "broker"
    if " nameserver " in cmdline and "rocketq" in cmdline:
        return "nameserver"
    return None


def _processes() -> dict[int, tuple[str, int, float]]:
    """pid -> (command line, parent pid, CPU seconds), from /proc; {} where there is none.
    A process's CPU includes its reaped children's (the tasks' workers Spark's daemons fork
    and reap), except for the bench process and the JVM, whose children have roles of
    their own (py-spy, Spark's Python processes)."""
    out: dict[int, tuple[str, int, float]] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        own_only = pid == os.getpid() or cmdline.split(" ", 1)[0].endswith("java")
        ticks = sum(int(x) for x in fields[11 : 13 if own_only else 15])  # u/stime, cu/cstime
        out[pid] = (cmdline, int(fields[1]), ticks / _CLOCK_TICKS)
    return out


def process_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of this process and every process under it, by pid, with its
    role (see :data:`ROLES`)."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (_, parent, _) in procs.items():
        children.setdefault(parent, []).append(pid)
    me = os.getpid()
    out: dict[int, tuple[str, float]] = {}
    todo = [me]
    while todo:
        pid = todo.pop()
        if pid in out or pid not in procs:
            continue
        cmdline, _, cpu = procs[pid]
        role = "bench process" if pid == me else _role(cmdline)
        if role is not None:
            out[pid] = (role, cpu)
        todo.extend(children.get(pid, []))
    return out


def cpu_between(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds each role spent between two :func:`process_cpu` readings (a process
    started between them counts from zero)."""
    out: dict[str, float] = {}
    for pid, (role, cpu) in after.items():
        earlier = before.get(pid)
        spent = cpu - (earlier[1] if earlier is not None and earlier[0] == role else 0.0)
        out[role] = out.get(role, 0.0) + spent
    return out


def spark_worker_pids() -> list[int]:
    """The Python processes that run the data source's tasks now: the workers Spark's
    worker daemon forked (it keeps them for the tasks after)."""
    procs = _processes()
    daemons = {
        pid
        for pid, (cmdline, _, _) in procs.items()
        if "pyspark.daemon pyspark.worker" in cmdline
        and "pyspark.daemon" not in procs.get(procs[pid][1], ("", 0, 0.0))[0]
    }
    return sorted(pid for pid, (_, parent, _) in procs.items() if parent in daemons)


class Meter:
    """Each phase's CPU by role (:func:`process_cpu`), and with ``profile_dir`` py-spy
    profiles of the Spark Python workers during the Spark phases (one file per worker,
    ``<phase>-worker-<n>.txt``, for ``rocketq bench profile``)."""

    def __init__(self, profile_dir: Path | None, echo: Callable[[str], None]) -> None:
        self.profile_dir = profile_dir
        self.echo = echo
        self.cpu_s: dict[str, dict[str, float]] = {}

    @contextlib.contextmanager
    def phase(self, name: str, *, spark: bool) -> Iterator[None]:
        from rocketq.bench.profiling import recording

        before = process_cpu()
        targets: list[tuple[str, int]] = []
        if self.profile_dir is not None and spark:
            targets = [(f"{name}-worker-{i}", pid) for i, pid in enumerate(spark_worker_pids())]
        with contextlib.ExitStack() as stack:
            if targets and self.profile_dir is not None:
                stack.enter_context(recording(targets, self.profile_dir, self.echo))
            yield
        self.cpu_s[name] = cpu_between(before, process_cpu())

    def per_message(self, name: str, messages: int) -> dict[str, float]:
        """The phase's CPU microseconds per message by role (roles that spent none left
        out)."""
        spent = self.cpu_s.get(name, {})
        return {
            role: round(spent[role] / messages * 1e6, 2)
            for role in ROLES
            if spent.get(role, 0.0) > 0 and messages > 0
        }


def check_runtime() -> None:
    """pyspark and pyarrow importable, or a SparkBenchError naming the extra to install."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise SparkBenchError(
            f"rocketq bench spark needs the spark extra ({exc.name} is missing): "
            "pip install 'rocketq[spark]'"
        ) from None


def start_session(master: str) -> tuple[Any, float]:
    """A SparkSession with the ``rocketq`` data source registered, and the seconds it took
    to start (the JVM, the context, the registration)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketq.sdk.spark import register

    t0 = time.monotonic()
    try:
        spark = (
            SparkSession.builder.master(master)
            .appName("rocketq-bench-spark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", DRIVER_MEMORY)
            .getOrCreate()
        )
    except Exception as exc:
        raise SparkBenchError(
            f"Spark ({master}) did not start: {exc}; it needs Java 17 or later (java on PATH "
            "or JAVA_HOME)"
        ) from None
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark, time.monotonic() - t0


async def stored(namesrv: str, topic: str) -> int:
    """Messages ``topic`` holds now (max - min offset over its queues)."""
    from rocketq.sdk.admin import Admin

    async with Admin(namesrv) as admin:
        return sum(q.max_offset - q.min_offset for q in await admin.topic_status(topic))


def spark_write(spark: Any, namesrv: str, topic: str, *, messages: int, size: int) -> float:
    """Seconds to save ``messages`` rows of ``size``-byte bodies into ``topic``.

    ``range`` with one slice per core is what ``repartition(cores)`` would give, without a
    shuffle stage in the timed action; the bodies are made by a SQL expression in each
    task, so the driver holds no rows: the row's id written over the start of a constant
    ``size``-byte body (distinct per row, as the SDK's one body is not). Spark folds the
    constant once; ``rpad`` to the size, per row, cost the JVM about 10 us a row, more than
    the rest of its part of a write.
    """
    cores = int(spark.sparkContext.defaultParallelism)
    df = spark.range(0, messages, 1, cores).selectExpr(
        f"substr(overlay(cast(repeat('x', {size}) AS binary) placing "
        f"cast(cast(id AS string) AS binary) from 1), 1, {size}) AS body"
    )
    writer = df.write.format("rocketq").option("namesrv", namesrv).option("topic", topic)
    t0 = time.monotonic()
    writer.mode("append").save()
    return time.monotonic() - t0


def spark_read(spark: Any, namesrv: str, topic: str) -> tuple[float, int, int]:
    """Seconds to load ``topic`` and reduce it in the JVM, the rows and the body bytes."""
    t0 = time.monotonic()
    df = spark.read.format("rocketq").option("namesrv", namesrv).option("topic", topic).load()
    row = df.selectExpr("count(*) AS n", "coalesce(sum(length(body)), 0) AS bytes").collect()[0]
    return time.monotonic() - t0, int(row["n"]), int(row["bytes"])


def spark_stream(spark: Any, namesrv: str, topic: str) -> tuple[float, int]:
    """Seconds for a streaming query to read what ``topic`` holds now (trigger
    ``availableNow`` into Spark's ``noop`` sink, with a checkpoint of its own), and the
    rows its micro-batches read."""
    with tempfile.TemporaryDirectory(prefix="rocketq-bench-stream-") as checkpoint:
        t0 = time.monotonic()
        query = (
            spark.readStream.format("rocketq")
            .option("namesrv", namesrv)
            .option("topic", topic)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:
            finished = query.awaitTermination(PHASE_TIMEOUT_S)
        finally:
            if query.isActive:
                query.stop()
        elapsed = time.monotonic() - t0
        if query.exception() is not None:
            raise SparkBenchError(f"the streaming read of {topic} failed: {query.exception()}")
        if not finished:
            raise SparkBenchError(
                f"the streaming read of {topic} did not end in {PHASE_TIMEOUT_S:.0f} s"
            )
        rows = sum(int(p.numInputRows) for p in query.recentProgress)
    return elapsed, rows


def warm_up(spark: Any, namesrv: str, topic: str, queues: int) -> float:
    """Seconds to write :data:`WARMUP_MESSAGES` messages into ``topic`` through the data
    source and read them back, batch and streaming (see the module's docstring)."""
    t0 = time.monotonic()
    asyncio.run(ensure_topic(namesrv, topic, queues))
    spark_write(spark, namesrv, topic, messages=WARMUP_MESSAGES, size=16)
    _, rows, _ = spark_read(spark, namesrv, topic)
    _, streamed = spark_stream(spark, namesrv, topic)
    if rows != WARMUP_MESSAGES or streamed != WARMUP_MESSAGES:
        raise SparkBenchError(
            f"the warm-up wrote {WARMUP_MESSAGES:,} messages into {topic} and read back "
            f"{rows:,} (batch) and {streamed:,} (streaming)"
        )
    return time.monotonic() - t0


def _pair(
    sdk_msgs_per_s: float, spark_msgs_per_s: float, sdk_s: float, spark_s: float
) -> dict[str, float]:
    return {
        "sdk_msgs_per_s": round(sdk_msgs_per_s, 1),
        "spark_msgs_per_s": round(spark_msgs_per_s, 1),
        # Three significant digits: a tiny run's ratio may be far below 0.001.
        "ratio": float(f"{spark_msgs_per_s / sdk_msgs_per_s:.3g}") if sdk_msgs_per_s > 0 else 0.0,
        "sdk_s": round(sdk_s, 3),
        "spark_s": round(spark_s, 3),
    }


def spark_bench(
    namesrv: str,
    *,
    messages: int,
    size: int,
    queues: int,
    master: str,
    echo: Callable[[str], None],
    profile_dir: Path | None = None,
) -> dict[str, object]:
    """The phases against the cluster of ``namesrv``; the summary as a JSON-ready dict
    (see :func:`table` for the people's version). Each phase's CPU is counted by process
    (:class:`Meter`); with ``profile_dir``, the Spark phases' Python workers are profiled
    with py-spy into it."""
    check_runtime()
    meter = Meter(profile_dir, echo)
    run_id = uuid.uuid4().hex[:8]
    sdk_topic = f"BenchSparkSdk-{run_id}"
    spark_topic = f"BenchSparkWrite-{run_id}"
    warm_topic = f"BenchSparkWarm-{run_id}"
    echo(f"starting Spark ({master}, driver memory {DRIVER_MEMORY}) ...")
    spark, session_s = start_session(master)
    try:
        cores = int(spark.sparkContext.defaultParallelism)
        echo(f"Spark started in {session_s:.1f} s ({cores} cores)")

        echo(
            f"--- Spark warm-up: {WARMUP_MESSAGES:,} messages written into {warm_topic} and "
            "read back, batch and streaming ---"
        )
        try:
            warmup_s = warm_up(spark, namesrv, warm_topic, queues)
        except Exception as exc:
            raise SparkBenchError(f"the Spark warm-up failed: {exc}") from exc
        echo(f"Spark warm-up took {warmup_s:.1f} s (in no rate)")

        echo(
            f"--- SDK write: {messages:,} x {size} bytes into {sdk_topic} ({queues} queues), "
            f"batches of {SDK_BATCH}, {SDK_IN_FLIGHT} in flight ---"
        )
        with meter.phase("sdk_write", spark=False):
            produced = run(
                lambda: produce(
                    namesrv,
                    topic=sdk_topic,
                    size=size,
                    concurrency=SDK_IN_FLIGHT,
                    batch=SDK_BATCH,
                    duration=PHASE_TIMEOUT_S,
                    messages=messages,
                    queues=queues,
                    echo=echo,
                )
            )
        sdk_write_s = float(produced["elapsed_s"])  # type: ignore[arg-type]
        sdk_write_rate = float(produced["msgs_per_s"])  # type: ignore[arg-type]
        backlog = asyncio.run(stored(namesrv, sdk_topic))
        if int(produced["msgs"]) < messages:  # type: ignore[call-overload]
            raise SparkBenchError(
                f"the SDK sent {produced['msgs']:,} of {messages:,} messages "
                f"({produced['failed']:,} failed) in {PHASE_TIMEOUT_S:.0f} s"
            )

        echo(f"--- Spark write: {messages:,} x {size} bytes into {spark_topic}, {cores} tasks ---")
        asyncio.run(ensure_topic(namesrv, spark_topic, queues))
        try:
            with meter.phase("spark_write", spark=True):
                spark_write_s = spark_write(
                    spark, namesrv, spark_topic, messages=messages, size=size
                )
        except Exception as exc:  # a Spark job's failure: Py4J and PySpark errors
            raise SparkBenchError(f"the Spark write into {spark_topic} failed: {exc}") from exc
        written = asyncio.run(stored(namesrv, spark_topic))
        if written != messages:
            raise SparkBenchError(
                f"Spark wrote {written:,} messages to {spark_topic}, not {messages:,}"
            )
        spark_write_rate = rate(messages, spark_write_s)
        echo(
            f"[Spark write] {spark_write_rate:,.0f} msgs/s | "
            f"{spark_write_rate * size / MB:,.1f} MB/s | {messages:,} in {spark_write_s:.3f} s"
        )

        echo(f"--- SDK read: the {backlog:,} messages of {sdk_topic}, a new group ---")
        with meter.phase("sdk_read", spark=False):
            consumed = run(
                lambda: consume(
                    namesrv,
                    topic=sdk_topic,
                    group=f"bench_spark_{run_id}",
                    size=size,
                    backlog=0,
                    expect=backlog,
                    duration=PHASE_TIMEOUT_S,
                    queues=queues,
                    consume_batch=SDK_CONSUME_BATCH,
                    echo=echo,
                )
            )
        if int(consumed["msgs"]) < backlog:  # type: ignore[call-overload]
            raise SparkBenchError(
                f"the SDK consumed {consumed['msgs']:,} of {backlog:,} messages in "
                f"{PHASE_TIMEOUT_S:.0f} s"
            )
        sdk_read_s = float(consumed["elapsed_s"])  # type: ignore[arg-type]
        sdk_read_rate = float(consumed["msgs_per_s"])  # type: ignore[arg-type]

        echo(f"--- Spark read: the {backlog:,} messages of {sdk_topic} ---")
        try:
            with meter.phase("spark_read", spark=True):
                spark_read_s, rows, body_bytes = spark_read(spark, namesrv, sdk_topic)
        except Exception as exc:
            raise SparkBenchError(f"the Spark read of {sdk_topic} failed: {exc}") from exc
        if (rows, body_bytes) != (backlog, backlog * size):
            raise SparkBenchError(
                f"Spark read {rows:,} rows and {body_bytes:,} body bytes of {sdk_topic}, not "
                f"{backlog:,} and {backlog * size:,}"
            )
        spark_read_rate = rate(rows, spark_read_s)
        echo(
            f"[Spark read] {spark_read_rate:,.0f} msgs/s | "
            f"{spark_read_rate * size / MB:,.1f} MB/s | {rows:,} in {spark_read_s:.3f} s"
        )

        echo(f"--- Spark stream: the {backlog:,} messages of {sdk_topic}, availableNow ---")
        try:
            with meter.phase("spark_stream", spark=True):
                stream_s, streamed = spark_stream(spark, namesrv, sdk_topic)
        except SparkBenchError:
            raise
        except Exception as exc:
            raise SparkBenchError(f"the streaming read of {sdk_topic} failed: {exc}") from exc
        if streamed != backlog:
            raise SparkBenchError(
                f"the streaming query read {streamed:,} rows of {sdk_topic}, not {backlog:,}"
            )
        stream_rate = rate(streamed, stream_s)
        echo(
            f"[Spark stream] {stream_rate:,.0f} msgs/s | {stream_rate * size / MB:,.1f} MB/s "
            f"| {streamed:,} in {stream_s:.3f} s"
        )
    finally:
        spark.stop()
    return {
        "bench": "spark",
        "messages": messages,
        "size": size,
        "queues": queues,
        "master": master,
        "cores": cores,
        "backlog": backlog,
        "sdk_in_flight": SDK_IN_FLIGHT,
        "sdk_consume_batch": SDK_CONSUME_BATCH,
        "write": _pair(sdk_write_rate, spark_write_rate, sdk_write_s, spark_write_s),
        "read": _pair(sdk_read_rate, spark_read_rate, sdk_read_s, spark_read_s),
        "stream": _pair(sdk_read_rate, stream_rate, sdk_read_s, stream_s),
        "session_start_s": round(session_s, 3),
        "warmup_s": round(warmup_s, 3),
        "warmup_messages": WARMUP_MESSAGES,
        "goal_ratio": GOAL,
        "cpu_us_per_msg": {
            "sdk_write": meter.per_message("sdk_write", messages),
            "spark_write": meter.per_message("spark_write", messages),
            "sdk_read": meter.per_message("sdk_read", backlog),
            "spark_read": meter.per_message("spark_read", backlog),
            "spark_stream": meter.per_message("spark_stream", backlog),
        },
        **({"profile_dir": str(profile_dir)} if profile_dir is not None else {}),
    }


def table(result: dict[str, Any]) -> list[str]:
    """The summary for people: msgs/s of each side, the ratio, the session start and the
    warm-up. The stream's row compares it with the SDK's read; it has no goal."""
    lines = [f"{'':8}{'SDK msgs/s':>14}{'Spark msgs/s':>14}{'spark/sdk':>11}  goal >= {GOAL:.2f}"]
    for name in ("write", "read", "stream"):
        p = result[name]
        if name == "stream":
            verdict = "(beside the read: the SDK's read rate)"
        else:
            verdict = "ok" if p["ratio"] >= GOAL else "BELOW"
        lines.append(
            f"{name:8}{p['sdk_msgs_per_s']:>14,.0f}{p['spark_msgs_per_s']:>14,.0f}"
            f"{p['ratio']:>11.3g}  {verdict}"
        )
    cpu = result.get("cpu_us_per_msg") or {}
    if any(cpu.values()):
        phases = ("sdk_write", "spark_write", "sdk_read", "spark_read", "spark_stream")
        lines.append(
            f"{'CPU us per message':24}" + "".join(f"{p.replace('_', ' '):>14}" for p in phases)
        )
        for role in ROLES:
            if any(role in cpu.get(p, {}) for p in phases):
                cells = "".join(
                    f"{cpu[p][role]:>14.1f}" if role in cpu.get(p, {}) else f"{'-':>14}"
                    for p in phases
                )
                lines.append(f"  {role:22}{cells}")
    lines.append(
        f"Spark session start: {result['session_start_s']:.1f} s, warm-up: "
        f"{result['warmup_s']:.1f} s ({result['master']}, {result['cores']} cores; in no "
        f"rate); {result['messages']:,} messages of {result['size']} bytes, "
        f"{result['queues']} queues"
    )
    return lines


__all__ = ["ROLES", "Meter", "SparkBenchError", "check_runtime", "spark_bench", "table"]
