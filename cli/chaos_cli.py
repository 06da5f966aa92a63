"""``rocketq chaos run|check``: the fault-injection harness (chaos/) from the command line."""

from __future__ import annotations

import enum
import json
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from rocketq.chaos.disk import DEFAULT_DISK_MIB, MIN_DISK_MIB
from rocketq.cli.options import MasterRole, fail, parse_settings

chaos_app = typer.Typer(
    help="Kill, pause and cut off masters under load, and prove nothing acknowledged is lost.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


class ChaosReplication(enum.StrEnum):
    RAFT = "raft"
    HA = "ha"


class ChaosProtocol(enum.StrEnum):
    REMOTING = "remoting"
    V5 = "v5"


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _report(
    history_path: Path,
    *,
    replication: str,
    role: str,
    orderly: bool,
    chart: Path | None,
    json_out: bool,
    extra_broken: list[str] | None = None,
) -> int:
    """Check a history, print the summary (and chart, JSON); -> the exit status."""
    from rocketq.chaos.checker import broken_promises, check
    from rocketq.chaos.history import ChaosError, read_history
    from rocketq.chaos.report import (
        hostile_broken,
        hostile_json,
        render_hostile,
        render_markdown,
        result_json,
        run_protocol,
        write_chart,
    )
    from rocketq.chaos.store_report import render_store, store_broken, store_json

    history = read_history(history_path)
    result = check(history, str(history_path))
    hostile = hostile_json(history)
    protocol = run_protocol(history)
    store = store_json(history)
    broken = broken_promises(result, replication=replication, role=role, orderly=orderly)
    broken += hostile_broken(hostile) + store_broken(store) + (extra_broken or [])
    typer.echo(render_markdown(result, broken=broken, protocol=protocol))
    if hostile is not None:
        typer.echo(render_hostile(hostile))
    if store is not None:
        typer.echo(render_store(store))
    if chart is not None:
        try:
            write_chart(history, result, chart)
            typer.echo(f"chart: {chart}")
        except ChaosError as exc:
            typer.echo(f"no chart: {exc}", err=True)
    if json_out:
        doc = result_json(result)
        doc["protocol"] = protocol
        if hostile is not None:
            doc["hostile"] = hostile
        if store is not None:
            doc["store"] = store
        typer.echo(json.dumps(doc, sort_keys=True))
    return 1 if broken else 0


@chaos_app.command("run")
def chaos_run(
    replication: Annotated[
        ChaosReplication,
        typer.Option(
            case_sensitive=False, help="raft (DLedger groups of 3) or ha (master + slave)."
        ),
    ] = ChaosReplication.RAFT,
    role: Annotated[
        MasterRole, typer.Option(case_sensitive=False, help="The masters' role with ha.")
    ] = MasterRole.SYNC_MASTER,
    groups: Annotated[int, typer.Option(min=1, help="Broker groups.")] = 2,
    nameservers: Annotated[int, typer.Option(min=1)] = 2,
    producers: Annotated[int, typer.Option(min=1, help="Producer processes.")] = 2,
    consumers: Annotated[int, typer.Option(min=1, help="Consumer processes.")] = 2,
    orderly: Annotated[
        bool, typer.Option("--orderly", help="Add sharding-key sends and orderly consumers.")
    ] = False,
    faults: Annotated[
        str,
        typer.Option(
            help="Comma list of kill-master, kill-random, pause, partition, kill-nameserver, "
            "kill-consumer, restart, hostile, disk-full, wipe-member and replace-member (each "
            "described above)."
        ),
    ] = "kill-master",
    in_turn: Annotated[
        bool,
        typer.Option(
            "--in-turn",
            help="Inject the faults in the order given, round after round, instead of "
            "drawing each from the seed.",
        ),
    ] = False,
    rounds: Annotated[
        int,
        typer.Option(
            min=0, help="With --in-turn: end the faults after this many rounds (0: at --duration)."
        ),
    ] = 0,
    interval: Annotated[float, typer.Option(help="Seconds of calm before each fault.")] = 5.0,
    fault_duration: Annotated[float, typer.Option(help="Seconds each fault lasts.")] = 5.0,
    duration: Annotated[float, typer.Option(help="Seconds of faults under load.")] = 60.0,
    seed: Annotated[int, typer.Option(help="Seeds the fault schedule and the workload.")] = 0,
    rate: Annotated[float, typer.Option(help="Messages a second per producer.")] = 200.0,
    disk_mib: Annotated[
        int, typer.Option(min=MIN_DISK_MIB, help="With disk-full: each broker's small disk, MiB.")
    ] = DEFAULT_DISK_MIB,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="The run's directory (default: `data/chaos-YYYYmmdd-HHMMSS`); must be new."
        ),
    ] = None,
    settings: Annotated[
        list[str] | None, typer.Option("--set", help="KEY=VALUE for every broker.")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="One JSON object on the last line.")
    ] = False,
    chart: Annotated[Path | None, typer.Option(help="Write a PNG timeline here.")] = None,
    auth: Annotated[
        bool,
        typer.Option(
            "--auth",
            help="Authentication and authorization on every node; every client of the run "
            "signs as the cluster's super user.",
        ),
    ] = False,
    tls: Annotated[
        bool,
        typer.Option(
            "--tls",
            help="TLS enforcing on every remoting, HA and Raft port and v2 endpoint (a test CA "
            "made in the run's directory; needs `rocketq[tls]`); every client connects over TLS.",
        ),
    ] = False,
    protocol: Annotated[
        ChaosProtocol,
        typer.Option(
            case_sensitive=False,
            help="The producers' and consumers' client: remoting (rocketq's SDK) or v5 "
            "(RocketMQ 5's official Python client over every broker's apache.rocketmq.v2 "
            "gRPC endpoint; needs `rocketq[v5client]`; with --orderly its FIFO messages and "
            "FIFO group, with --tls the endpoints over TLS).",
        ),
    ] = ChaosProtocol.REMOTING,
) -> None:
    """Launch a cluster, run producers and consumers as processes, inject faults on a seeded
    schedule, heal them, drain, check the history, report and tear everything down. Exits
    1 when the mode's promise is broken (a lost or unexpected message for SYNC_MASTER and
    Raft; an order violation with --orderly; a member not caught up at the end).

    Besides kills, pauses, partitions and restarts: hostile is a neighbour sending every
    port of every node mutated frames, zlib bombs, frames at the size limit, slow partial
    frames, connection floods, garbage and slowloris HTTP for the fault's duration;
    disk-full (as root) puts each broker on a small tmpfs and fills a group's disks, then
    frees them; wipe-member stops a follower or slave, deletes its store once retention
    has trimmed the log, and starts it again; replace-member (raft) adds a member on new
    ports and removes a follower."""
    from rocketq.chaos.faults import parse_faults
    from rocketq.chaos.history import ChaosError
    from rocketq.chaos.runner import ChaosOptions, ChaosRun
    from rocketq.common.exceptions import RocketqError

    extra = {k: str(v) for k, v in parse_settings(settings or []).items()}
    run_dir = data_dir or Path("data") / time.strftime("chaos-%Y%m%d-%H%M%S")
    try:
        opts = ChaosOptions(
            replication=replication.value,
            role=role.value,
            groups=groups,
            nameservers=nameservers,
            producers=producers,
            consumers=consumers,
            orderly=orderly,
            faults=parse_faults(faults),
            in_turn=in_turn,
            rounds=rounds,
            interval=interval,
            fault_duration=fault_duration,
            duration=duration,
            seed=seed,
            rate=rate,
            data_dir=run_dir,
            settings=extra,
            auth=auth,
            tls=tls,
            protocol=protocol.value,
            disk_mib=disk_mib,
        )
        run = ChaosRun(opts, echo=typer.echo)
    except ChaosError as exc:
        raise typer.BadParameter(str(exc)) from None
    # Ctrl-C and SIGTERM end the run the same way, even where the shell started it with
    # SIGINT ignored (a background job).
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = run.run()
    except KeyboardInterrupt:
        typer.echo("interrupted: everything the run started is stopped", err=True)
        raise typer.Exit(130) from None
    except (RocketqError, OSError) as exc:
        raise fail(str(exc)) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for error in outcome.errors:
        typer.echo(f"note: {error}", err=True)
    extra_broken = [] if outcome.recovered else ["the cluster did not recover"]
    code = _report(
        outcome.history,
        replication=replication.value,
        role=role.value,
        orderly=orderly,
        chart=chart,
        json_out=json_out,
        extra_broken=extra_broken,
    )
    raise typer.Exit(code)


@chaos_app.command("check")
def chaos_check(
    history: Annotated[Path, typer.Argument(help="A run's history.jsonl.")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
    chart: Annotated[Path | None, typer.Option(help="Write a PNG timeline here.")] = None,
) -> None:
    """Check a saved history again: the same summary, promises and exit status as the run
    (the mode is read from the history's first record)."""
    from rocketq.chaos.history import ChaosError, read_history

    try:
        records = read_history(history)
    except ChaosError as exc:
        raise fail(str(exc)) from None
    config = next((r.get("config") or {} for r in records.of_type("run")), {})
    code = _report(
        history,
        replication=str(config.get("replication", "raft")),
        role=str(config.get("role", "SYNC_MASTER")),
        orderly=bool(config.get("orderly", False)),
        chart=chart,
        json_out=json_out,
    )
    raise typer.Exit(code)
