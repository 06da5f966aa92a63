"""The ``rocketq`` command line (console script ``rocketq = "rocketq.cluster.cli:app"``,
also ``python -m rocketq``).

Commands are grouped by component, one sub-app each, added as the components land
(nameserver, broker, cluster, admin). Each command imports its implementation inside its
body, so ``rocketq --help`` stays fast and a component's imports cost only its own commands.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

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
    from rocketq.bench.store_bench import (
        BenchOptionError,
        FlushMode,
        StoreBenchOptions,
        run_store_bench,
    )
    from rocketq.cluster.errors import RocketqError

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
    from rocketq.cluster.config import load_config
    from rocketq.cluster.errors import ConfigError
    from rocketq.cluster.process import run_server, setup_logging
    from rocketq.nameserver.config import NameServerConfig
    from rocketq.nameserver.server import NameServer

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
    from rocketq.broker.broker import Broker
    from rocketq.broker.config import load_broker_config
    from rocketq.cluster.errors import ConfigError, RocketqError
    from rocketq.cluster.process import run_server, setup_logging

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


# ---------------------------------------------------------------------------- cluster

cluster_app = typer.Typer(
    help="A local cluster: nameservers and brokers as processes on this machine.",
    no_args_is_help=True,
)
app.add_typer(cluster_app, name="cluster")

DataDirOption = Annotated[
    Path,
    typer.Option(
        "--data-dir",
        file_okay=False,
        help="Where the nodes keep their stores and logs, and cluster.json.",
    ),
]


class Replication(enum.StrEnum):
    NONE = "none"
    HA = "ha"
    RAFT = "raft"


class MasterRole(enum.StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"


def _node_table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return [line.rstrip() for line in lines]


@cluster_app.command("up")
def cluster_up(
    data_dir: DataDirOption = Path("data/cluster"),
    brokers: Annotated[int, typer.Option(min=1, help="Broker groups (broker-a, ...).")] = 1,
    nameservers: Annotated[int, typer.Option(min=1, help="Nameservers.")] = 1,
    replication: Annotated[
        Replication,
        typer.Option(
            case_sensitive=False,
            help="none, ha (a slave per group) or raft (three members per group).",
        ),
    ] = Replication.NONE,
    settings: Annotated[
        list[str], typer.Option("--set", help="Any broker or store key for every broker.")
    ] = [],  # noqa: B006 - typer reads the default
    foreground: Annotated[
        bool, typer.Option("--foreground", help="Stay attached; Ctrl-C or SIGTERM stops it.")
    ] = False,
) -> None:
    """Start a nameserver and broker groups as local processes and write cluster.json."""
    import signal
    import threading

    from rocketq.cluster.errors import RocketqError
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    try:
        spec = ClusterSpec(
            data_dir=data_dir,
            nameservers=nameservers,
            brokers=brokers,
            replication=replication.value,
            broker_settings={k: str(v) for k, v in _settings(settings).items()},
        )
        cluster = LocalCluster(spec)
        cluster.start()
    except (RocketqError, OSError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"rocketq cluster is up (data dir {spec.data_dir})")
    typer.echo(f"namesrv addr: {cluster.namesrv_addr}")
    rows = [["NAME", "ROLE", "ADDRESS", "PID", "LOG"]]
    rows += [[n.name, n.role, n.addr, str(n.pid), str(n.log)] for n in cluster.nodes]
    for line in _node_table(rows):
        typer.echo(line)
    if not foreground:
        typer.echo(f"stop it with: rocketq cluster down --data-dir {spec.data_dir}")
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    typer.echo("press Ctrl-C to stop it")  # only once the signals are ours
    try:
        while not stop.wait(1.0):
            pass
    finally:
        typer.echo("stopping the cluster", err=True)
        try:
            cluster.stop()
        except RocketqError as exc:
            raise _fail(str(exc)) from None


@cluster_app.command("down")
def cluster_down(data_dir: DataDirOption = Path("data/cluster")) -> None:
    """Stop the cluster described by <data-dir>/cluster.json (brokers first)."""
    from rocketq.cluster.errors import RocketqError
    from rocketq.cluster.launcher import LocalCluster

    try:
        cluster = LocalCluster.load(data_dir)
        running = [n.name for n in cluster.nodes if cluster.is_alive(n.name)]
        cluster.stop()
    except (RocketqError, OSError) as exc:
        raise _fail(str(exc)) from None
    if running:
        typer.echo(f"stopped {', '.join(running)}")
    else:
        typer.echo(f"the cluster in {cluster.data_dir} was not running")


@cluster_app.command("status")
def cluster_status(
    data_dir: DataDirOption = Path("data/cluster"),
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Which nodes are alive, and which brokers a nameserver knows."""
    import json

    from rocketq.cluster.errors import RocketqError
    from rocketq.cluster.launcher import LocalCluster

    try:
        cluster = LocalCluster.load(data_dir)
        status = cluster.status()
    except (RocketqError, OSError) as exc:
        raise _fail(str(exc)) from None
    if json_out:
        doc = {"data_dir": str(cluster.data_dir), "namesrv_addr": cluster.namesrv_addr}
        typer.echo(json.dumps(doc | status.to_dict()))
        return
    typer.echo(f"namesrv addr: {cluster.namesrv_addr}")
    rows = [["NAME", "ROLE", "ADDRESS", "PID", "STATE"]]
    for n in status.nodes:
        state = ("paused" if n.paused else "alive") if n.alive else "dead"
        rows.append([n.name, n.role, n.addr, str(n.pid), state])
    for line in _node_table(rows):
        typer.echo(line)
    if status.registered is None:
        typer.echo("no nameserver answered")
        return
    typer.echo(f"registered with {status.info_from}:")
    for name, ids in sorted(status.registered.items()):
        addrs = ", ".join(f"{i}={a}" for i, a in sorted(ids.items()))
        typer.echo(f"  {name}: {addrs}")


# -- admin, send, consume (cluster/admin_cli.py) --------------------------------------------

from rocketq.cluster.admin_cli import admin_app, consume_cmd, send_cmd  # noqa: E402

app.add_typer(admin_app, name="admin")
app.command("send")(send_cmd)
app.command("consume")(consume_cmd)


# -- client benchmarks (bench/client_bench.py) -----------------------------------------------


def _bench_target(
    namesrv: str | None,
    embedded: bool,
    data_dir: Path | None,
    replication: str = "none",
    role: str = "ASYNC_MASTER",
) -> Any:
    from rocketq.bench.client_bench import target_cluster

    return target_cluster(
        namesrv,
        embedded,
        str(data_dir) if data_dir else None,
        typer.echo,
        replication=replication,
        role=role,
    )


@bench_app.command("produce")
def bench_produce(
    namesrv: Annotated[str | None, typer.Option("--namesrv", "-n", envvar="NAMESRV_ADDR")] = None,
    embedded: Annotated[bool, typer.Option(help="Start a local cluster for the run.")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="Where --embedded keeps its data.")] = None,
    topic: Annotated[str, typer.Option("--topic", "-t")] = "BenchmarkTest",
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    concurrency: Annotated[
        int, typer.Option("--threads", "-c", min=1, help="Sends in flight.")
    ] = 1,
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=1024)] = 1,
    duration: Annotated[float, typer.Option("--duration", "-d", min=0.1)] = 10.0,
    messages: Annotated[int, typer.Option(min=0, help="Stop after N messages (0: duration).")] = 0,
    queues: Annotated[int, typer.Option(min=1)] = 8,
    replication: Annotated[
        Replication, typer.Option(help="--embedded: each broker group with a slave (ha).")
    ] = Replication.NONE,
    role: Annotated[
        MasterRole, typer.Option(help="--embedded: the masters' broker_role.")
    ] = MasterRole.ASYNC_MASTER,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Send messages as fast as the given concurrency allows; TPS, RT, p50/p99/p999."""
    from rocketq.bench.client_bench import json_line, produce, run
    from rocketq.cluster.errors import RocketqError

    try:
        with _bench_target(namesrv, embedded, data_dir, replication.value, role.value) as ns:
            result = run(
                lambda: produce(
                    ns,
                    topic=topic,
                    size=size,
                    concurrency=concurrency,
                    batch=batch,
                    duration=duration,
                    messages=messages,
                    queues=queues,
                    echo=typer.echo,
                )
            )
    except (RocketqError, OSError) as exc:
        raise _fail(str(exc)) from None
    if json_out:
        typer.echo(json_line(result))


@bench_app.command("replication")
def bench_replication(
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the clusters keep their data.")
    ] = None,
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    concurrency: Annotated[
        int, typer.Option("--threads", "-c", min=1, help="Sends in flight.")
    ] = 32,
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=1024)] = 1,
    duration: Annotated[float, typer.Option("--duration", "-d", min=0.1)] = 10.0,
    modes: Annotated[
        str,
        typer.Option(
            help="Comma-separated clusters to run after the lone broker: async_master, "
            "sync_master (master + slave), raft (a three-member Raft group)."
        ),
    ] = "async_master,sync_master,raft",
    rounds: Annotated[int, typer.Option(min=1, help="Run the whole sequence this many times.")] = 1,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """One run, clusters one after the other: a lone broker, an ASYNC_MASTER with a slave,
    a SYNC_MASTER with a slave and a three-member Raft group; each one's TPS as a ratio to
    the lone broker's (the median over --rounds)."""
    from rocketq.bench.client_bench import json_line
    from rocketq.bench.replication_bench import replication_bench
    from rocketq.cluster.errors import RocketqError

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    try:
        summary = replication_bench(
            modes=chosen,
            rounds=rounds,
            size=size,
            concurrency=concurrency,
            batch=batch,
            duration=duration,
            data_dir=str(data_dir) if data_dir else None,
            echo=typer.echo,
        )
    except ValueError as exc:
        raise _fail(f"--modes: {exc}") from None
    except (RocketqError, OSError) as exc:
        raise _fail(str(exc)) from None
    if json_out:
        typer.echo(json_line(summary))


@bench_app.command("failover")
def bench_failover(
    kills: Annotated[int, typer.Option(min=1, help="Leader kills in the run.")] = 10,
    concurrency: Annotated[
        int, typer.Option("--threads", "-c", min=1, help="Sends in flight.")
    ] = 8,
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    data_dir: Annotated[Path | None, typer.Option(help="Where the cluster keeps its data.")] = None,
    settings: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE for every broker (e.g. Raft timers)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """SIGKILL a Raft group's leader under load, again and again: the time from each kill
    to the first SEND_OK on the new leader, with its median and max."""
    from rocketq.bench.client_bench import json_line, run
    from rocketq.bench.failover_bench import FailoverBenchError, failover
    from rocketq.cluster.errors import RocketqError

    extra = {}
    for item in settings or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _fail(f"--set takes KEY=VALUE, got {item!r}")
        extra[key.strip()] = value.strip()
    try:
        result = run(
            lambda: failover(
                kills=kills,
                concurrency=concurrency,
                size=size,
                data_dir=str(data_dir) if data_dir else None,
                settings=extra,
                echo=typer.echo,
            )
        )
    except (RocketqError, OSError, FailoverBenchError) as exc:
        raise _fail(str(exc)) from None
    typer.echo(
        f"failover over {kills} kills: median {result['median_ms']} ms, max "
        f"{result['max_ms']} ms; {result['send_ok']:,} sends OK, {result['send_failed']:,} failed"
    )
    if json_out:
        typer.echo(json_line(result))


@bench_app.command("consume")
def bench_consume(
    namesrv: Annotated[str | None, typer.Option("--namesrv", "-n", envvar="NAMESRV_ADDR")] = None,
    embedded: Annotated[bool, typer.Option(help="Start a local cluster for the run.")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="Where --embedded keeps its data.")] = None,
    topic: Annotated[str, typer.Option("--topic", "-t")] = "BenchmarkTest",
    group: Annotated[str, typer.Option("--group", "-g")] = "benchmark_consumer",
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    backlog: Annotated[
        int,
        typer.Option(
            min=0,
            help="Write N messages first, then consume "
            "them all (a new group starts at the oldest).",
        ),
    ] = 0,
    duration: Annotated[float, typer.Option("--duration", "-d", min=0.1)] = 60.0,
    queues: Annotated[int, typer.Option(min=1)] = 8,
    consume_batch: Annotated[
        int, typer.Option(min=1, max=1024, help="consume_message_batch_max_size")
    ] = 1,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Consume as fast as possible (a backlog, or what arrives); consume TPS."""
    from rocketq.bench.client_bench import consume, json_line, run
    from rocketq.cluster.errors import RocketqError

    try:
        with _bench_target(namesrv, embedded, data_dir) as ns:
            result = run(
                lambda: consume(
                    ns,
                    topic=topic,
                    group=group,
                    size=size,
                    backlog=backlog,
                    duration=duration,
                    queues=queues,
                    consume_batch=consume_batch,
                    echo=typer.echo,
                )
            )
    except (RocketqError, OSError) as exc:
        raise _fail(str(exc)) from None
    if json_out:
        typer.echo(json_line(result))


class PeerDurability(enum.StrEnum):
    PAGE_CACHE = "page-cache"
    FSYNC = "fsync"


@bench_app.command("peers")
def bench_peers(
    install: Annotated[
        bool,
        typer.Option(
            help="Install what is missing: redis-server, rabbitmq-server, nats-server with "
            "apt-get and the Python clients (rocketq[bench]) with pip."
        ),
    ] = False,
    durability: Annotated[
        PeerDurability,
        typer.Option(help="page-cache (acknowledged once written) or fsync (once on disk)."),
    ] = PeerDurability.PAGE_CACHE,
    duration: Annotated[
        float, typer.Option("--duration", "-d", min=0.1, help="Seconds per timed scenario.")
    ] = 10.0,
    systems: Annotated[
        str, typer.Option(help="Comma-separated, in run order.")
    ] = "rocketq,redis,nats,rabbitmq",
    scenarios: Annotated[
        str, typer.Option(help="Comma-separated: produce, consume, e2e, sync_send.")
    ] = "produce,consume,e2e,sync_send",
    producers: Annotated[int, typer.Option(min=1)] = 4,
    consumers: Annotated[int, typer.Option(min=1)] = 1,
    size: Annotated[int, typer.Option("--size", "-s", min=8)] = 1024,
    batch: Annotated[
        int, typer.Option("--batch", "-b", min=1, max=1024, help="Messages per send call.")
    ] = 32,
    messages: Annotated[
        int, typer.Option(min=0, help="produce: stop after N messages (0: duration).")
    ] = 0,
    backlog: Annotated[int, typer.Option(min=1, help="consume: backlog to drain.")] = 200_000,
    rate: Annotated[int, typer.Option(min=1, help="e2e: messages/s in all.")] = 5_000,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the servers' temp dirs go (default: /tmp).")
    ] = None,
    chart: Annotated[
        Path | None,
        typer.Option(help="PNG bar chart (needs rocketq[chart]). Default: no chart."),
    ] = None,
    markdown: Annotated[Path | None, typer.Option(help="Also write the tables here.")] = None,
    profile: Annotated[
        Path | None,
        typer.Option(help="py-spy profiles (raw) of rocketq's broker and client per scenario."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """rocketq side by side with Redis Streams, NATS JetStream and RabbitMQ on this
    machine: the same workload for each, a table, and rocketq's ratio to the best peer."""
    from rocketq.bench.peers.chart import ChartUnavailableError, write_chart
    from rocketq.bench.peers.runner import PeerRunOptions, run_peers
    from rocketq.bench.peers.systems import make_systems
    from rocketq.bench.peers.workload import Durability, Scenario, Workload, WorkloadError

    try:
        workload = Workload(
            durability=Durability(durability.value),
            scenarios=tuple(Scenario(s.strip()) for s in scenarios.split(",") if s.strip()),
            producers=producers,
            consumers=consumers,
            size=size,
            batch=batch,
            duration=duration,
            messages=messages,
            backlog=backlog,
            e2e_rate=rate,
        )
        chosen = make_systems([s.strip() for s in systems.split(",") if s.strip()])
    except (WorkloadError, ValueError) as exc:
        raise _fail(str(exc), 2) from None
    typer.echo(f"workload: {workload.describe()}")
    options = PeerRunOptions(workload, install=install, workdir=data_dir, profile_dir=profile)
    report = run_peers(options, chosen, typer.echo)
    table = report.markdown()
    typer.echo("")
    typer.echo(table)
    if markdown is not None:
        markdown.write_text(table + "\n")
    if chart is not None:
        try:
            typer.echo(f"chart: {write_chart(report, chart)}")
        except ChartUnavailableError as exc:
            typer.echo(f"no chart: {exc}", err=True)
    if json_out:
        typer.echo(report.json_line())


if __name__ == "__main__":
    app()
