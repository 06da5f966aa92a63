"""The ``rocketq`` command line (console script ``rocketq = "cluster.cli:app"``).

Commands are grouped by component, one sub-app each, added as the components land
(nameserver, broker, cluster, admin). Each command imports its implementation inside its
body, so ``rocketq --help`` stays fast and a component's imports cost only its own commands.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="rocketq",
    help="rocketq: a RocketMQ-style message queue.",
    no_args_is_help=True,
    add_completion=False,
)
bench_app = typer.Typer(
    help="Benchmarks that print TPS, RT and p50/p99/p999 like RocketMQ's, or JSON.",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")


class Flush(enum.StrEnum):
    ASYNC = "async"
    SYNC = "sync"


@bench_app.command("store")
def bench_store(
    size: Annotated[int, typer.Option(min=1, help="Message body size in bytes.")] = 1024,
    messages: Annotated[int, typer.Option(min=1, help="Messages to append in all.")] = 200_000,
    batch: Annotated[int, typer.Option(min=1, help="Messages per put (one batch).")] = 32,
    flush: Annotated[
        Flush,
        typer.Option(
            case_sensitive=False,
            help="async: ASYNC_FLUSH, raw baseline without fsync; sync: SYNC_FLUSH group "
            "commit, raw baseline with one os.fsync per batch.",
        ),
    ] = Flush.ASYNC,
    writers: Annotated[
        int | None,
        typer.Option(min=1, help="Concurrent writers (default: 1 for async, 32 for sync)."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Also print one JSON object on the last line.")
    ] = False,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            file_okay=False,
            help="Base directory; the run uses a new temporary directory inside it, and the "
            "raw baseline writes there too (same file system). Default: ./data/bench-store.",
        ),
    ] = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the run's store files instead of removing them.")
    ] = False,
    segment_size: Annotated[
        int, typer.Option(min=4096, help="CommitLog segment size in bytes.")
    ] = 1 << 30,
) -> None:
    """Append messages through the message store, then write the same bytes with os.write.

    TPS counts until every message is appended and dispatched; the ratio is store / raw MB/s.
    """
    from bench.store_bench import BenchOptionError, FlushMode, StoreBenchOptions, run_store_bench
    from cluster.errors import RocketqError

    mode: FlushMode = "sync" if flush is Flush.SYNC else "async"
    try:
        options = StoreBenchOptions(
            size=size,
            messages=messages,
            batch=batch,
            flush=mode,
            writers=writers,
            directory=str(directory) if directory is not None else None,
            keep=keep,
            segment_size=segment_size,
        )
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    try:
        result = run_store_bench(options)
    except (RocketqError, OSError) as exc:  # StoreBenchError, a full disk, a bad --dir
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for line in result.lines():
        typer.echo(line)
    if json_out:
        typer.echo(result.json())
