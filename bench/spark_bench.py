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
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
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
) -> dict[str, object]:
    """The four phases against the cluster of ``namesrv``; the summary as a JSON-ready dict
    (see :func:`table` for the people's version)."""
    check_runtime()
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
            spark_write_s = spark_write(spark, namesrv, spark_topic, messages=messages, size=size)
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
    lines.append(
        f"Spark session start: {result['session_start_s']:.1f} s, warm-up: "
        f"{result['warmup_s']:.1f} s ({result['master']}, {result['cores']} cores; in no "
        f"rate); {result['messages']:,} messages of {result['size']} bytes, "
        f"{result['queues']} queues"
    )
    return lines


__all__ = ["SparkBenchError", "check_runtime", "spark_bench", "table"]
