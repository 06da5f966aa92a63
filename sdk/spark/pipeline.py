"""The archive and replay pipeline (``rocketq pipeline``): a topic kept in files beyond the
CommitLog's retention, and sent back from them.

``archive`` is a streaming query from the ``rocketq`` source to Spark's file sink,
partitioned by the messages' store date and hour (UTC): ``<dir>/date=2026-11-25/hour=7/``.
The sink and its checkpoint together write each message exactly once, across restarts.
``replay`` reads such a directory (a time window of it) and writes the messages to a topic
with their keys, tags and properties; each carries ``SPARK_ROW_KEY`` = its original message
id, so a consumer can drop a message replayed twice.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from rocketq.common import times
from rocketq.common.exceptions import RocketqError

log = logging.getLogger(__name__)

Format = Literal["parquet", "json"]
MIN_JAVA: Final = 17
ARCHIVE_COLUMNS: Final = (
    "topic",
    "broker",
    "queue_id",
    "queue_offset",
    "msg_id",
    "keys",
    "tags",
    "body",
    "properties",
    "born_timestamp",
    "store_timestamp",
    "born_host",
    "store_host",
    "reconsume_times",
)


class PipelineError(RocketqError):
    """The pipeline cannot run here, or was given something it cannot use."""


def check_runtime() -> None:
    """The spark extra and Java 17 or later, or a PipelineError saying what to install."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise PipelineError(
            f"rocketq pipeline needs the spark extra ({exc.name} is missing): "
            "pip install 'rocketq[spark]'"
        ) from None
    java = shutil.which("java")
    if java is None:
        raise PipelineError(
            f"rocketq pipeline needs Java {MIN_JAVA} or later (Spark runs on it) and found no "
            "java on PATH: install a JDK (apt-get install openjdk-17-jre-headless) or set "
            "JAVA_HOME and PATH"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        raise PipelineError(f"cannot tell the version of {java}: {out.stderr.strip()[:200]}")
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))  # "1.8.0" is Java 8
    if major < MIN_JAVA:
        raise PipelineError(
            f"rocketq pipeline needs Java {MIN_JAVA} or later (Spark 4); {java} is Java {major}"
        )


def session(app: str, *, master: str = "local[*]") -> Any:
    """A SparkSession with the ``rocketq`` data source registered, times in UTC."""
    from pyspark.sql import SparkSession

    from rocketq.sdk.spark import register

    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    register(spark)
    return spark


def parse_time(text: str, what: str) -> datetime:
    """The instant ``text`` names, as an aware datetime in UTC: epoch milliseconds, ``now``,
    or ISO 8601, UTC unless it has an offset (``rocketq.common.times``). A bad one is a
    PipelineError naming ``what`` (the option)."""
    try:
        return times.parse_datetime(text)
    except ValueError as exc:
        raise PipelineError(f"{what} {text!r} is not a time: {exc}") from None


def parse_trigger(text: str) -> str:
    """``10s``, ``500ms``, ``2min`` -> Spark's processing-time interval."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|sec|seconds?|m|min|minutes?)\s*", text)
    if match is None or int(match.group(1)) == 0:
        raise PipelineError(f"--trigger {text!r} is not an interval: give 500ms, 10s or 2min")
    n, unit = int(match.group(1)), match.group(2)
    if unit == "ms":
        return f"{n} milliseconds"
    if unit.startswith("m"):
        return f"{n} minutes"
    return f"{n} seconds"


def start_archive(
    spark: Any,
    *,
    namesrv: str,
    topic: str,
    to: Path,
    fmt: Format = "parquet",
    checkpoint: Path | None = None,
    trigger: str = "10s",
    starting_offsets: str = "earliest",
    options: Mapping[str, str] | None = None,
) -> Any:
    """Start the archive query; returns the StreamingQuery (stop it to end the archive).
    ``options`` go to the source as well (credentials and TLS: ``accessKey``, ``tls`` ...,
    see :func:`rocketq.sdk.spark.options.security_options`)."""
    from pyspark.sql import functions as F  # noqa: N812

    if fmt not in ("parquet", "json"):
        raise PipelineError(f"--format {fmt!r}: give parquet or json")
    checkpoint = checkpoint if checkpoint is not None else to / "_checkpoint"
    stream = (
        spark.readStream.format("rocketq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", starting_offsets)
        .options(**dict(options or {}))
        .load()
        .withColumn("date", F.date_format("store_timestamp", "yyyy-MM-dd"))
        .withColumn("hour", F.hour("store_timestamp"))
    )
    return (
        stream.writeStream.format(fmt)
        .option("path", str(to))
        .option("checkpointLocation", str(checkpoint))
        .partitionBy("date", "hour")
        .trigger(processingTime=parse_trigger(trigger))
        .queryName(f"rocketq-archive-{topic}")
        .start()
    )


def archived(spark: Any, directory: Path, fmt: Format | None = None) -> Any:
    """The archive under ``directory`` as a DataFrame of the source's schema plus
    ``date`` and ``hour``."""
    from rocketq.sdk.spark import SCHEMA

    if not (directory / "_spark_metadata").is_dir():
        raise PipelineError(
            f"{directory} is not an archive (no _spark_metadata): give the --to directory of "
            "`rocketq pipeline archive`"
        )
    if fmt is None:
        fmt = "json" if any(directory.rglob("part-*.json")) else "parquet"
    return spark.read.format(fmt).schema(f"{SCHEMA}, date string, hour int").load(str(directory))


def replay(
    spark: Any,
    *,
    namesrv: str,
    source: Path,
    topic: str,
    since: datetime | None = None,
    until: datetime | None = None,
    fmt: Format | None = None,
    options: Mapping[str, str] | None = None,
) -> int:
    """Send the archived messages stored in [since, until) to ``topic``; returns how many.
    ``options`` go to the sink as well (credentials and TLS)."""
    from pyspark.sql import functions as F  # noqa: N812

    df = archived(spark, source, fmt)
    if since is not None:
        df = df.where(F.col("store_timestamp") >= F.lit(since))
        df = df.where(F.col("date") >= since.strftime("%Y-%m-%d"))  # prunes partitions
    if until is not None:
        df = df.where(F.col("store_timestamp") < F.lit(until))
        df = df.where(F.col("date") <= until.strftime("%Y-%m-%d"))
    out = df.select(
        "body", "keys", "tags", "properties", "msg_id", "store_timestamp"
    ).sortWithinPartitions("store_timestamp")
    out = out.cache()
    count = int(out.count())
    if count:
        (
            out.write.format("rocketq")
            .option("namesrv", namesrv)
            .option("topic", topic)
            .options(**dict(options or {}))
            .mode("append")
            .save()
        )
    out.unpersist()
    return count
