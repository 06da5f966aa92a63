"""``rocketq pipeline archive|replay``: a topic kept in files beyond the CommitLog's
retention, and sent back from them (sdk/spark/pipeline.py), on a local Spark.

Needs the spark extra and Java 17 or later; without them each command says what to
install. Spark is imported only when a command runs.
"""

from __future__ import annotations

import enum
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from rocketq.cli.options import fail, security_settings
from rocketq.sdk.spark.options import security_options

pipeline_app = typer.Typer(
    help="Archive a topic to Parquet/JSON files with Spark, and replay an archive into a topic.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


class ArchiveFormat(enum.StrEnum):
    PARQUET = "parquet"
    JSON = "json"


NAMESRV = Annotated[str, typer.Option("--namesrv", help="Nameserver address(es), host:port;…")]
MASTER = Annotated[
    str, typer.Option("--master", help="Spark master (local[*]: every core of this machine)")
]


def _ready() -> None:
    from rocketq.sdk.spark.pipeline import PipelineError, check_runtime

    try:
        check_runtime()
    except PipelineError as exc:
        raise fail(str(exc)) from None


@pipeline_app.command("archive")
def archive(
    topic: Annotated[str, typer.Option("--topic", help="The topic to archive")],
    to: Annotated[Path, typer.Option("--to", help="The archive directory")],
    namesrv: NAMESRV = "127.0.0.1:9876",
    fmt: Annotated[
        ArchiveFormat, typer.Option("--format", help="File format of the archive")
    ] = ArchiveFormat.PARQUET,
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Spark checkpoint directory (default: TO/_checkpoint)"),
    ] = None,
    trigger: Annotated[
        str, typer.Option("--trigger", help="How often a micro-batch runs: 500ms, 10s, 2min")
    ] = "10s",
    master: MASTER = "local[*]",
) -> None:
    """Write TOPIC to files under TO, partitioned by store date and hour (UTC), exactly
    once, until Ctrl-C; run it again with the same directories to go on where it stopped."""
    _ready()
    from rocketq.sdk.spark.pipeline import PipelineError, parse_trigger, session, start_archive

    try:
        parse_trigger(trigger)
    except PipelineError as exc:
        raise fail(str(exc)) from None
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    spark = session(f"rocketq-archive-{topic}", master=master)
    # After the session starts: pyspark puts a SIGINT handler of its own in place.
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    query = None
    try:
        query = start_archive(
            spark,
            namesrv=namesrv,
            topic=topic,
            to=to.absolute(),
            fmt="json" if fmt is ArchiveFormat.JSON else "parquet",
            checkpoint=checkpoint.absolute() if checkpoint is not None else None,
            trigger=trigger,
            options=security_options(security_settings()),
        )
        typer.echo(f"archiving {topic} to {to} ({fmt.value}); Ctrl-C stops", err=True)
        # Wait in short steps: the signal handler runs between them, never inside a call
        # to the JVM.
        while not stop.is_set() and not query.awaitTermination(0.5):
            pass
        if stop.is_set():
            typer.echo("stopping the archive (the batch in progress finishes first)", err=True)
            _let_the_batch_finish(query)
    except Exception as exc:
        raise fail(f"the archive of {topic} failed: {exc}") from None
    finally:
        if query is not None:
            query.stop()
        spark.stop()


def _let_the_batch_finish(query: Any, timeout: float = 120.0) -> None:
    """Wait until no micro-batch runs: stopping a query in the middle of one throws away
    the files it wrote (the next run writes them again, but the archive then lacks them)."""
    import time

    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.1)


@pipeline_app.command("replay")
def replay(
    source: Annotated[Path, typer.Option("--from", help="An archive directory")],
    topic: Annotated[str, typer.Option("--topic", help="The topic to send the messages to")],
    namesrv: NAMESRV = "127.0.0.1:9876",
    since: Annotated[
        str | None, typer.Option("--since", help="Stored at or after (ISO 8601, UTC, or epoch ms)")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Stored before (ISO 8601, UTC, or epoch ms)")
    ] = None,
    master: MASTER = "local[*]",
) -> None:
    """Send the archived messages (stored in [--since, --until)) to TOPIC, keys, tags and
    properties kept; each carries SPARK_ROW_KEY = its original message id."""
    _ready()
    from rocketq.sdk.spark.pipeline import PipelineError, parse_time, session
    from rocketq.sdk.spark.pipeline import replay as run_replay

    try:
        start = parse_time(since, "--since") if since is not None else None
        end = parse_time(until, "--until") if until is not None else None
        if start is not None and end is not None and end <= start:
            raise PipelineError(f"--until {until} is not after --since {since}")
        if not source.is_dir():
            raise PipelineError(f"--from {source}: no such directory")
    except PipelineError as exc:
        raise fail(str(exc)) from None
    spark = session(f"rocketq-replay-{topic}", master=master)
    try:
        count = run_replay(
            spark,
            namesrv=namesrv,
            source=source.absolute(),
            topic=topic,
            since=start,
            until=end,
            options=security_options(security_settings()),
        )
    except PipelineError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:
        raise fail(f"the replay into {topic} failed: {exc}") from None
    finally:
        spark.stop()
    typer.echo(f"replayed {count} message(s) from {source} into {topic}")
