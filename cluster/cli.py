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


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _settings(values: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="'--set'")
        out[key.strip()] = value.strip()
    return out


def _announce(kind: str, port: int) -> None:
    """One line on stdout that the launcher waits for: the server is up on this port."""
    import json
    import sys

    sys.stdout.write(json.dumps({"ready": kind, "port": port}) + "\n")
    sys.stdout.flush()


@app.command("nameserver")
def nameserver_cmd(
    port: Annotated[
        int | None, typer.Option("--port", "-p", help="gRPC port (0: any free).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML file of nameserver keys.")
    ] = None,
    bind: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    kv_config_path: Annotated[str | None, typer.Option(help="Where the KV config lives.")] = None,
    settings: Annotated[
        list[str], typer.Option("--set", help="Any nameserver key: --set KEY=VALUE.")
    ] = [],  # noqa: B006 - typer reads the default
) -> None:
    """Run a nameserver until SIGTERM or Ctrl-C."""
    from cluster.config import load_config
    from cluster.errors import ConfigError
    from cluster.process import run_server, setup_logging
    from nameserver.config import NameServerConfig
    from nameserver.server import NameServer

    overrides = {
        "listen_port": port,
        "bind_address": bind,
        "kv_config_path": kv_config_path,
        **_settings(settings),
    }
    try:
        cfg = load_config(NameServerConfig, config, overrides=overrides, strict_env=False)
    except ConfigError as exc:
        raise _fail(str(exc), 2) from None
    setup_logging()

    async def started(server: object) -> None:
        assert isinstance(server, NameServer)
        _announce("nameserver", server.port)

    try:
        run_server(lambda: NameServer(cfg), started)
    except OSError as exc:
        raise _fail(str(exc)) from None


@app.command("broker")
def broker_cmd(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="broker.toml (broker and store keys).")
    ] = None,
    listen_port: Annotated[int | None, typer.Option(help="gRPC port (0: any free).")] = None,
    namesrv_addr: Annotated[
        str | None, typer.Option("--namesrv-addr", "-n", help="Nameservers, 'a:9876;b:9876'.")
    ] = None,
    broker_name: Annotated[str | None, typer.Option(help="Broker group name.")] = None,
    broker_id: Annotated[int | None, typer.Option(help="0 master, >= 1 slave.")] = None,
    store_path_root_dir: Annotated[str | None, typer.Option(help="Store directory.")] = None,
    settings: Annotated[
        list[str], typer.Option("--set", help="Any broker or store key: --set KEY=VALUE.")
    ] = [],  # noqa: B006 - typer reads the default
) -> None:
    """Run a broker until SIGTERM or Ctrl-C (graceful stop: unregister, flush, checkpoint)."""
    from broker.broker import Broker
    from broker.config import load_broker_config
    from cluster.errors import ConfigError, RocketqError
    from cluster.process import run_server, setup_logging

    overrides = {
        "listen_port": listen_port,
        "namesrv_addr": namesrv_addr,
        "broker_name": broker_name,
        "broker_id": broker_id,
        "store_path_root_dir": store_path_root_dir,
        **_settings(settings),
    }
    try:
        broker_cfg, store_cfg = load_broker_config(config, overrides=overrides)
    except ConfigError as exc:
        raise _fail(str(exc), 2) from None
    setup_logging()

    async def started(server: object) -> None:
        assert isinstance(server, Broker)
        _announce("broker", server.port)

    try:
        run_server(lambda: Broker(broker_cfg, store_cfg), started)
    except (OSError, RocketqError) as exc:
        raise _fail(str(exc)) from None
