"""The ``rocketq`` command line (console script ``rocketq = "rocketq.cli.main:app"``,
also ``python -m rocketq``).

Commands are grouped by component, one sub-app each, added as the components land
(nameserver, broker, cluster, admin). Each command imports its implementation inside its
body, so ``rocketq --help`` stays fast and a component's imports cost only its own commands.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from rocketq.cli.options import (
    DEFAULT_BROKER_PORT,
    DEFAULT_CONSOLE_PORT,
    DEFAULT_GRPC_PORT,
    DEFAULT_NAMESRV_PORT,
    Replication,
    fail,
    parse_settings,
)

app = typer.Typer(
    name="rocketq",
    help="rocketq: a RocketMQ-style message queue.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)


def _announce(kind: str, ports: dict[str, int]) -> None:
    """One line on stdout that the launcher waits for: the server is up, its client port
    in ``port`` and every port it serves (client, ha, raft, metrics) in ``ports``, as bound
    (what port 0 turned into)."""
    import json
    import sys

    served = {name: port for name, port in ports.items() if port}
    sys.stdout.write(json.dumps({"ready": kind, "port": ports["client"], "ports": served}) + "\n")
    sys.stdout.flush()


def _announce_bind_failure(kind: str, exc: OSError) -> None:
    """The line a server that could not listen on one of its ports leaves on stdout
    before it exits: which port, and whether another process holds it (the launcher
    starts it again on other ports when it chose them)."""
    import json
    import sys

    from rocketq.common.ports import PortBindError

    if not isinstance(exc, PortBindError):
        return
    doc = {"failed": kind, "port_name": exc.name, "port": exc.port, "in_use": exc.in_use}
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


ListenFdOption = typer.Option(
    "--listen-fd",
    metavar="NAME=FD",
    help="Serve the port NAME on the listening socket open at file descriptor FD, handed "
    "down by the process that started this one, instead of binding it (repeatable).",
)


def _listen_fds(specs: list[str], allowed: tuple[str, ...]) -> dict[str, socket.socket]:
    """The ``--listen-fd`` sockets by port name (exit 2 naming a bad one)."""
    from rocketq.common.ports import parse_listen_fds

    try:
        return parse_listen_fds(specs, allowed)
    except ValueError as exc:
        raise fail(str(exc), 2) from None


@app.command("nameserver")
def nameserver_cmd(
    port: Annotated[
        int | None, typer.Option("--port", "-p", help="Remoting port (0: any free).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML file of nameserver keys.")
    ] = None,
    bind: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    kv_config_path: Annotated[str | None, typer.Option(help="Where the KV config lives.")] = None,
    settings: Annotated[
        list[str], typer.Option("--set", help="Any nameserver key: --set KEY=VALUE.")
    ] = [],  # noqa: B006 - typer reads the default
    listen_fds: Annotated[list[str], ListenFdOption] = [],  # noqa: B006 - typer reads the default
) -> None:
    """Run a nameserver until SIGTERM or Ctrl-C."""
    from rocketq.cluster.server_main import run_server, setup_logging
    from rocketq.common.config import load_config
    from rocketq.common.exceptions import ConfigError
    from rocketq.nameserver.config import NameServerConfig
    from rocketq.nameserver.server import NameServer

    overrides = {
        "listen_port": port,
        "bind_address": bind,
        "kv_config_path": kv_config_path,
        **parse_settings(settings),
    }
    try:
        cfg = load_config(NameServerConfig, config, overrides=overrides, strict_env=False)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    sockets = _listen_fds(listen_fds, ("client", "metrics"))
    setup_logging()

    async def started(server: object) -> None:
        assert isinstance(server, NameServer)
        metrics = server.metrics_server.port if server.metrics_server is not None else 0
        _announce("nameserver", {"client": server.port, "metrics": metrics})

    try:
        run_server(lambda: NameServer(cfg, sockets=sockets), started)
    except OSError as exc:
        _announce_bind_failure("nameserver", exc)
        raise fail(str(exc)) from None


@app.command("broker")
def broker_cmd(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="broker.toml (broker and store keys).")
    ] = None,
    listen_port: Annotated[
        int | None, typer.Option(help="Remoting port, clients and admin (0: any free).")
    ] = None,
    namesrv_addr: Annotated[
        str | None, typer.Option("--namesrv-addr", "-n", help="Nameservers, 'a:9876;b:9876'.")
    ] = None,
    broker_name: Annotated[str | None, typer.Option(help="Broker group name.")] = None,
    broker_id: Annotated[int | None, typer.Option(help="0 master, >= 1 slave.")] = None,
    store_path_root_dir: Annotated[str | None, typer.Option(help="Store directory.")] = None,
    settings: Annotated[
        list[str], typer.Option("--set", help="Any broker or store key: --set KEY=VALUE.")
    ] = [],  # noqa: B006 - typer reads the default
    ordinal: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="The broker's place in its group: 0 the master, N a slave of broker id N; "
            "with Raft member nN.",
        ),
    ] = None,
    ordinal_from_hostname: Annotated[
        bool,
        typer.Option(
            "--ordinal-from-hostname",
            help="--ordinal from the -N suffix of $HOSTNAME or the host name (a StatefulSet "
            "pod's ordinal).",
        ),
    ] = False,
    listen_fds: Annotated[list[str], ListenFdOption] = [],  # noqa: B006 - typer reads the default
) -> None:
    """Run a broker until SIGTERM or Ctrl-C (graceful stop: unregister, flush, checkpoint)."""
    import os
    import socket

    from rocketq.broker.broker import Broker
    from rocketq.broker.config import load_broker_config, ordinal_of, ordinal_settings
    from rocketq.cluster.server_main import run_server, setup_logging
    from rocketq.common.exceptions import ConfigError, RocketqError

    if ordinal_from_hostname:
        if ordinal is not None:
            raise fail("give --ordinal or --ordinal-from-hostname, not both", 2)
        try:
            # Kubernetes sets HOSTNAME to the pod's name.
            ordinal = ordinal_of(os.environ.get("HOSTNAME") or socket.gethostname())
        except ValueError as exc:
            raise fail(f"--ordinal-from-hostname: {exc}", 2) from None
    if ordinal is not None and broker_id is not None:
        raise fail("--broker-id and the ordinal both set the broker id; give one", 2)
    overrides = {
        "listen_port": listen_port,
        "namesrv_addr": namesrv_addr,
        "broker_name": broker_name,
        "broker_id": broker_id,
        "store_path_root_dir": store_path_root_dir,
        **(ordinal_settings(ordinal) if ordinal is not None else {}),
        **parse_settings(settings),
    }
    try:
        broker_cfg, store_cfg = load_broker_config(config, overrides=overrides)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    sockets = _listen_fds(listen_fds, ("client", "ha", "raft", "metrics"))
    setup_logging()

    async def started(server: object) -> None:
        assert isinstance(server, Broker)
        ports = {
            "client": server.port,
            "ha": server.ha_socket.getsockname()[1] if server.ha_socket is not None else 0,
            "raft": server.raft.server.port if server.raft is not None else 0,
            "metrics": server.metrics_server.port if server.metrics_server is not None else 0,
            "grpc": server.grpc.port if server.grpc is not None else 0,
        }
        _announce("broker", ports)

    try:
        run_server(lambda: Broker(broker_cfg, store_cfg, sockets=sockets), started)
    except (OSError, RocketqError) as exc:
        if isinstance(exc, OSError):
            _announce_bind_failure("broker", exc)
        raise fail(str(exc)) from None


# ---------------------------------------------------------------------------- cluster

cluster_app = typer.Typer(
    help="A local cluster: nameservers and brokers as processes on this machine.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
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
    namesrv_port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65535,
            help="The first nameserver's port when it is free (RocketMQ's default, which "
            "`rocketq send`, `consume` and `admin` use without -n); taken: a free port, "
            "and the output says so. 0: a free port.",
        ),
    ] = DEFAULT_NAMESRV_PORT,
    broker_port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65533,
            help="The first broker's port when it is free (RocketMQ's listenPort), its HA "
            "and metrics ports 1 and 2 above it when those are free; taken: free ports, "
            "and the output says so. 0: free ports.",
        ),
    ] = DEFAULT_BROKER_PORT,
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
    monitor: Annotated[
        bool,
        typer.Option(
            "--monitor",
            help="Also start a Prometheus (the prometheus binary) scraping every node; "
            "`cluster down` stops it.",
        ),
    ] = False,
    console: Annotated[
        bool,
        typer.Option(
            "--console",
            help="Also start the web console (`rocketq console`) on --console-port; "
            "`cluster down` stops it.",
        ),
    ] = False,
    console_port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65535,
            help="With --console, the console's port when it is free (rocketmq-dashboard's); "
            "taken: a free port, and the output says so. 0: a free port.",
        ),
    ] = DEFAULT_CONSOLE_PORT,
    auth: Annotated[
        bool,
        typer.Option(
            "--auth",
            help="Authentication and authorization on every node: a super user 'rocketq', "
            "the nodes' inner credentials and the metrics ports' bearer token are made once "
            "in DATA_DIR/secrets.",
        ),
    ] = False,
    tls: Annotated[
        bool,
        typer.Option(
            "--tls",
            help="TLS only on every remoting port, HTTPS only on every metrics port and the "
            "console, with a local CA and certificate made once in DATA_DIR/tls (needs the "
            "tls extra).",
        ),
    ] = False,
    grpc: Annotated[
        bool,
        typer.Option(
            "--grpc",
            help="Every broker serves the apache.rocketmq.v2 endpoint for RocketMQ 5's "
            "clients too (needs the grpc extra): the first on --grpc-port, the others on "
            "free ports, all shown after the table.",
        ),
    ] = False,
    grpc_port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65535,
            help="With --grpc, the first broker's endpoint port when it is free (RocketMQ "
            "5's proxy's); taken: a free port, and the output says so. 0: a free port.",
        ),
    ] = DEFAULT_GRPC_PORT,
) -> None:
    """Start a nameserver and broker groups as local processes and write cluster.json."""
    import contextlib
    import shlex
    import signal
    import threading

    from rocketq.cluster.launcher import ClusterSpec, LocalCluster
    from rocketq.common.exceptions import RocketqError

    if console:
        from rocketq.cluster.console_launch import console_missing

        if (missing := console_missing()) is not None:
            raise fail(missing)  # before anything starts
    try:
        spec = ClusterSpec(
            data_dir=data_dir,
            nameservers=nameservers,
            brokers=brokers,
            replication=replication.value,
            broker_settings={k: str(v) for k, v in parse_settings(settings).items()},
            namesrv_port=namesrv_port or None,
            auth=auth,
            tls=tls,
            grpc=grpc,
            grpc_port=grpc_port or None,
            broker_port=broker_port or None,
        )
        cluster = LocalCluster(spec)
        cluster.start()
    except (RocketqError, OSError) as exc:
        raise fail(str(exc)) from None
    typer.echo(f"rocketq cluster is up (data dir {spec.data_dir})")
    typer.echo(f"namesrv addr: {cluster.namesrv_addr}")
    if cluster.namesrv_port_busy:
        addr = shlex.quote(cluster.namesrv_addr)
        typer.echo(
            f"port {namesrv_port} is taken, so the nameserver listens on "
            f"{cluster.nameservers[0].addr} instead: give clients -n {addr} "
            f"or export NAMESRV_ADDR={addr}"
        )
    elif namesrv_port == DEFAULT_NAMESRV_PORT:
        typer.echo(
            f"(port {namesrv_port}, RocketMQ's default: `rocketq send`, `consume` and "
            "`admin` find it without -n)"
        )
    rows = [["NAME", "ROLE", "ADDRESS", "METRICS", "PID", "LOG"]]
    rows += [
        [n.name, n.role, n.addr, n.metrics_url or "-", str(n.pid), str(n.log)]
        for n in cluster.nodes
    ]
    for line in _node_table(rows):
        typer.echo(line)
    for fallback in cluster.port_fallbacks:
        if fallback.what != f"{cluster.nameservers[0].name}'s client port":  # said above
            typer.echo(f"({fallback})")
    if cluster.secrets is not None and spec.metrics:
        typer.echo(
            f"/metrics asks for the bearer token in {cluster.secrets.metrics_token_file} "
            "(/healthz and /readyz need none)"
        )
    if grpc:
        endpoints = ";".join(f"{n.host}:{n.grpc_port}" for n in cluster.brokers if n.grpc_port)
        typer.echo(f"RocketMQ 5 clients (apache.rocketmq.v2): endpoints {endpoints}")
        first = cluster.brokers[0].grpc_port
        if grpc_port and first != grpc_port:
            typer.echo(f"(port {grpc_port} is taken, so the first endpoint is on {first})")
    if auth or tls:
        # What a client of this cluster needs: the super user's credentials file, the CA.
        env = cluster.client_env()
        typer.echo("clients of this cluster: export " + " ".join(
            f"{k}={shlex.quote(v)}" for k, v in env.items()
        ))  # fmt: skip
    if monitor:
        from rocketq.cluster.monitor import start_monitor

        try:
            prometheus = start_monitor(cluster)
        except (RocketqError, OSError) as exc:
            with contextlib.suppress(RocketqError):
                cluster.stop()
            raise fail(str(exc)) from None
        typer.echo(f"prometheus: {prometheus.url} (config and data in {prometheus.home})")
    if console:
        from rocketq.cluster.console_launch import start_console

        try:
            web = start_console(cluster, port=console_port)
        except (RocketqError, OSError) as exc:
            with contextlib.suppress(RocketqError):
                if monitor:
                    from rocketq.cluster.monitor import stop_monitor

                    stop_monitor(spec.data_dir)
                cluster.stop()
            raise fail(str(exc)) from None
        typer.echo(f"console: {web.url} (log in {web.home})")
        if console_port and web.port != console_port:
            typer.echo(f"(port {console_port} is taken, so the console is on {web.port})")
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
            if monitor:
                from rocketq.cluster.monitor import stop_monitor

                stop_monitor(spec.data_dir)
            if console:
                from rocketq.cluster.console_launch import stop_console

                stop_console(spec.data_dir)
            cluster.stop()
        except RocketqError as exc:
            raise fail(str(exc)) from None


@cluster_app.command("down")
def cluster_down(data_dir: DataDirOption = Path("data/cluster")) -> None:
    """Stop the cluster described by `<data-dir>/cluster.json` (brokers first)."""
    from rocketq.cluster.console_launch import stop_console
    from rocketq.cluster.launcher import LocalCluster
    from rocketq.cluster.monitor import stop_monitor
    from rocketq.common.exceptions import RocketqError

    try:
        cluster = LocalCluster.load(data_dir)
        running = [n.name for n in cluster.nodes if cluster.is_alive(n.name)]
        if stop_monitor(cluster.data_dir):
            running.append("prometheus")
        if stop_console(cluster.data_dir):
            running.append("console")
        cluster.stop()
    except (RocketqError, OSError) as exc:
        raise fail(str(exc)) from None
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

    from rocketq.cluster.launcher import LocalCluster
    from rocketq.common.exceptions import RocketqError

    try:
        cluster = LocalCluster.load(data_dir)
        status = cluster.status()
    except (RocketqError, OSError) as exc:
        raise fail(str(exc)) from None
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


# -- admin, send, consume (cli/admin_cli.py) --------------------------------------------

from rocketq.cli.admin_cli import admin_app, consume_cmd, send_cmd  # noqa: E402
from rocketq.cli.auth_cli import acl_app, user_app  # noqa: E402
from rocketq.cli.dlq_cli import dlq_app, resend_message  # noqa: E402
from rocketq.cli.options import secure_commands, secured  # noqa: E402
from rocketq.cli.raft_cli import raft_app  # noqa: E402

admin_app.command("resend-message")(resend_message)
admin_app.add_typer(dlq_app, name="dlq")
admin_app.add_typer(user_app, name="user")
admin_app.add_typer(acl_app, name="acl")
admin_app.add_typer(raft_app, name="raft")
# Every command that talks to a cluster takes --access-key, --tls ... (cli/options.py).
secure_commands(admin_app)
app.add_typer(admin_app, name="admin")
app.command("send")(secured(send_cmd))
app.command("consume")(secured(consume_cmd))


# -- benchmarks (cli/bench_cli.py) ------------------------------------------------------

from rocketq.cli.bench_cli import bench_app  # noqa: E402

app.add_typer(bench_app, name="bench")


# -- the chaos harness (cli/chaos_cli.py) -----------------------------------------------

from rocketq.cli.chaos_cli import chaos_app  # noqa: E402

app.add_typer(chaos_app, name="chaos")


# -- the Spark pipeline (cli/pipeline_cli.py) -------------------------------------------

from rocketq.cli.pipeline_cli import pipeline_app  # noqa: E402

secure_commands(pipeline_app)
app.add_typer(pipeline_app, name="pipeline")


# -- the web console (cli/console_cli.py, console/) ---------------------------------------

from rocketq.cli.console_cli import console_cmd  # noqa: E402

app.command("console")(secured(console_cmd))


if __name__ == "__main__":
    app()
