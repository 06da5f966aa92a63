"""``rocketq bench``: the store alone, rocketq end to end, replication, failover and peer
brokers. Each command imports its benchmark inside its body."""

from __future__ import annotations

import enum
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from rocketq.bench.report import BenchOptionError
from rocketq.cli.options import MasterRole, Replication, fail, secured, security_settings

bench_app = typer.Typer(
    help="Benchmarks that print TPS, RT and p50/p99/p999 like RocketMQ's, or JSON.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@bench_app.callback()
def _bench(ctx: typer.Context) -> None:
    """SIGTERM ends a benchmark as Ctrl-C does: every cluster and server it started is
    stopped on the way out."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    ctx.call_on_close(lambda: signal.signal(signal.SIGTERM, previous))


class Flush(enum.StrEnum):
    ASYNC = "async"
    SYNC = "sync"


class ClientProtocol(enum.StrEnum):
    """The protocol ``bench produce|consume`` measures: the SDK's alone, or the SDK's and
    RocketMQ 5's official client's (apache.rocketmq.v2) on one cluster, with their ratio."""

    REMOTING = "remoting"
    V5 = "v5"


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
        FlushMode,
        StoreBenchOptions,
        run_store_bench,
    )
    from rocketq.common.exceptions import RocketqError

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


# -- many topics (bench/topics_bench.py) ---------------------------------------------------


@bench_app.command("topics")
def bench_topics(
    topics: Annotated[
        str, typer.Option("--topics", help="Topic counts, ascending, as a comma list.")
    ] = "1,100,1000,10000",
    queues: Annotated[int, typer.Option(min=1, max=1024, help="Queues per topic.")] = 4,
    concurrency: Annotated[
        int, typer.Option("--threads", "-c", min=1, help="Sends in flight.")
    ] = 32,
    duration: Annotated[
        float, typer.Option("--duration", "-d", min=0.1, help="Seconds of sending per count.")
    ] = 10.0,
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    data_dir: Annotated[Path | None, typer.Option(help="Where the broker keeps its data.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            help="py-spy profiles (raw) of the broker and this client while each count's "
            "sends run, written here and summarized after each (`rocketq bench profile`)."
        ),
    ] = None,
    rounds: Annotated[
        int,
        typer.Option(
            min=1,
            help="Run every count's sends this many times, the counts in turn; the ratio to "
            "one topic is the median of the rounds' ratios.",
        ),
    ] = 1,
) -> None:
    """One broker as its topics grow: for each count the topics are auto-created one by one,
    then single sends go round-robin over all of them. Prints msgs/s and the ratio to one
    topic, the time to create the topics, the broker's registration size with the
    nameservers and its resident memory."""
    from rocketq.bench.topics_bench import (
        json_report,
        parse_counts,
        run_topics_bench,
    )
    from rocketq.common.exceptions import RocketqError

    try:
        counts = parse_counts(topics)
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    try:
        result = run_topics_bench(
            counts,
            queues=queues,
            concurrency=concurrency,
            duration=duration,
            size=size,
            data_dir=str(data_dir) if data_dir else None,
            echo=typer.echo,
            profile_dir=profile,
            rounds=rounds,
        )
    except (RocketqError, OSError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    if json_out:
        typer.echo(json_report(result))


# -- client benchmarks (bench/client_bench.py) -----------------------------------------------


def _bench_target(
    namesrv: str | None,
    embedded: bool,
    data_dir: Path | None,
    replication: str = "none",
    role: str = "ASYNC_MASTER",
    *,
    pin: bool = False,
) -> Any:
    from rocketq.bench.client_bench import target_cluster

    return target_cluster(
        namesrv,
        embedded,
        str(data_dir) if data_dir else None,
        typer.echo,
        replication=replication,
        role=role,
        pin=pin,
    )


_PROTOCOL_HELP = (
    "remoting: the SDK. v5: the SDK and RocketMQ 5's official Python client (its "
    "apache.rocketmq.v2 endpoint, in --processes driver processes) on the same cluster, "
    "rounds alternating; both rates and their ratio (bench/v5_bench.py)."
)
_ProtocolOption = Annotated[ClientProtocol, typer.Option("--protocol", help=_PROTOCOL_HELP)]
_ProcessesOption = Annotated[
    int,
    typer.Option(
        "--processes",
        min=0,
        help="--protocol v5: driver processes of the official client; 0: 2 x (cores - 1), "
        "what the cores leave beside the broker (2 on a 2-core machine).",
    ),
]
_V5EndpointOption = Annotated[
    str | None,
    typer.Option(
        "--v5-endpoint",
        help="--protocol v5 against a running cluster: its brokers' v2 endpoints, "
        "HOST:PORT[;HOST:PORT] (`rocketq cluster up --grpc` prints them).",
    ),
]
_V5ProfileOption = Annotated[
    Path | None,
    typer.Option(
        "--profile",
        file_okay=False,
        help="--protocol v5 --embedded: py-spy profiles (raw) of the broker and a client in "
        "every window, written here and summarized after the run (`rocketq bench profile`).",
    ),
]


def _v5_refusal(
    protocol: ClientProtocol, processes: int, v5_endpoint: str | None, profile: Path | None
) -> str | None:
    """Why the v5 options cannot be taken with --protocol remoting, if they cannot."""
    if protocol is ClientProtocol.V5:
        return None
    given = [
        flag
        for flag, value in (
            ("--processes", processes),
            ("--v5-endpoint", v5_endpoint),
            ("--profile", profile),
        )
        if value
    ]
    return f"{', '.join(given)}: only with --protocol v5" if given else None


def _v5_run(bench: Callable[[], dict[str, Any]], *, echo_json: bool) -> None:
    """Run a v5 comparison, ``bench()``: its errors as the CLI says them, and with --json
    its result as the last line."""
    from rocketq.bench.client_bench import json_line
    from rocketq.common.exceptions import RocketqError

    try:
        result = bench()
    except (RocketqError, OSError) as exc:
        raise fail(str(exc)) from None
    if echo_json:
        typer.echo(json_line(result))


def _produce_sweep(
    namesrv: str | None,
    embedded: bool,
    data_dir: Path | None,
    replication: Replication,
    role: MasterRole,
    *,
    topic: str,
    queues: int | None,
    duration: float | None,
    rounds: int | None,
    lists: tuple[str | None, str | None, str | None],
    batch_in_flight: int,
    echo_json: bool,
    pin: bool = False,
) -> None:
    """``bench produce --sweep``: auto_batch on and off over the grid
    (bench/auto_batch_sweep.py)."""
    from rocketq.bench import auto_batch_sweep as ab
    from rocketq.bench.client_bench import run
    from rocketq.common.exceptions import RocketqError

    try:
        grid = ab.SweepGrid.parse(
            lists[0] or ab.SWEEP_TOPICS, lists[1] or ab.SWEEP_THREADS, lists[2] or ab.SWEEP_SIZES
        )
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    run_s = ab.SWEEP_DURATION if duration is None else duration
    rounds = 1 if rounds is None else rounds
    queues = ab.SWEEP_QUEUES if queues is None else queues
    if embedded:
        from rocketq.bench.client_bench import check_memory_maps

        try:
            check_memory_maps(grid.topics[-1], queues)
        except BenchOptionError as exc:
            raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    typer.echo(
        f"sweep: {grid.cells} combinations x {rounds} round(s) x 2 modes x {run_s:g} s; "
        f"topics {','.join(map(str, grid.topics))}, in flight "
        f"{','.join(map(str, grid.threads))}, sizes {','.join(map(str, grid.sizes))} bytes"
    )
    try:
        with _bench_target(
            namesrv, embedded, data_dir, replication.value, role.value, pin=pin
        ) as ns:
            rows = run(
                lambda: ab.sweep(
                    ns,
                    grid,
                    topic=topic,
                    queues=queues,
                    duration=run_s,
                    rounds=rounds,
                    echo=typer.echo,
                    client=security_settings(),
                    producer_settings={"batch_max_in_flight": batch_in_flight},
                )
            )
    except (RocketqError, OSError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    typer.echo("--- auto_batch on against off ---")
    for line in ab.table(rows):
        typer.echo(line)
    typer.echo(ab.summary_line(rows))
    if echo_json:
        typer.echo(
            ab.json_report(ab.report(rows, grid, duration=run_s, rounds=rounds, queues=queues))
        )


@bench_app.command("produce")
@secured
def bench_produce(
    namesrv: Annotated[str | None, typer.Option("--namesrv", "-n", envvar="NAMESRV_ADDR")] = None,
    embedded: Annotated[bool, typer.Option(help="Start a local cluster for the run.")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="Where --embedded keeps its data.")] = None,
    topic: Annotated[str, typer.Option("--topic", "-t")] = "BenchmarkTest",
    topics: Annotated[
        int,
        typer.Option(
            "--topics",
            min=1,
            max=100_000,
            help="Send round robin over this many topics (TOPIC-0 .. TOPIC-<N-1>; TOPIC itself "
            "for 1), all created, and each sent one warm-up message, before the clock starts.",
        ),
    ] = 1,
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    concurrency: Annotated[
        int, typer.Option("--threads", "-c", min=1, help="Sends in flight.")
    ] = 1,
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=1024)] = 1,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            "-d",
            min=0.1,
            help="Seconds of sending (per run with --sweep).  [default: 10; 2 with --sweep]",
        ),
    ] = None,
    messages: Annotated[int, typer.Option(min=0, help="Stop after N messages (0: duration).")] = 0,
    queues: Annotated[
        int | None,
        typer.Option(min=1, max=1024, help="Queues per topic.  [default: 8; 4 with --sweep]"),
    ] = None,
    auto_batch: Annotated[
        bool,
        typer.Option(
            "--auto-batch/--no-auto-batch",
            help="The producer's natural batching (auto_batch): sends in flight leave in batches.",
        ),
    ] = True,
    batch_in_flight: Annotated[
        int,
        typer.Option(
            "--batch-in-flight",
            min=1,
            help="The producer's batch_max_in_flight: requests of a lane in flight at once.",
        ),
    ] = 2,
    pin: Annotated[
        bool,
        typer.Option(
            "--pin",
            help="--embedded, a plain run or --sweep: the cluster's processes on one CPU and "
            "this client on the others, so the scheduler does not move them between runs.",
        ),
    ] = False,
    replication: Annotated[
        Replication, typer.Option(help="--embedded: each broker group with a slave (ha).")
    ] = Replication.NONE,
    role: Annotated[
        MasterRole, typer.Option(help="--embedded: the masters' broker_role.")
    ] = MasterRole.ASYNC_MASTER,
    metrics_compare: Annotated[
        bool,
        typer.Option(
            "--metrics-compare",
            help="--embedded: run clusters with metrics off and on (scraped), alternating, "
            "and report both and their ratio.",
        ),
    ] = False,
    rounds: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="--metrics-compare: clusters of each kind; --compare-security: rounds over "
            "the four clusters (medians); --protocol v5: rounds of both protocols; --sweep: "
            "runs of each mode per combination (medians).  [default: 4; 1 with --sweep]",
        ),
    ] = None,
    scrape_interval: Annotated[
        float, typer.Option(min=0.1, help="--metrics-compare: seconds between scrapes.")
    ] = 1.0,
    compare_security: Annotated[
        bool,
        typer.Option(
            "--compare-security",
            help="--embedded: plain, auth, tls and auth_tls clusters side by side; -c in "
            "flight (32 if -c is 1), then one at a time; ratios to plain.",
        ),
    ] = False,
    protocol: _ProtocolOption = ClientProtocol.REMOTING,
    processes: _ProcessesOption = 0,
    v5_endpoint: _V5EndpointOption = None,
    profile: _V5ProfileOption = None,
    sweep: Annotated[
        bool,
        typer.Option(
            "--sweep",
            help="auto_batch on against off on one cluster: every combination of "
            "--sweep-topics, --sweep-threads and --sweep-sizes, a --duration run of each mode "
            "per round, alternating; a table of both rates and their ratio.",
        ),
    ] = False,
    sweep_topics: Annotated[
        str | None,
        typer.Option(
            "--sweep-topics",
            help="--sweep: topic counts, a comma list.  [default: 1,10,100,1000,10000]",
        ),
    ] = None,
    sweep_threads: Annotated[
        str | None,
        typer.Option(
            "--sweep-threads", help="--sweep: sends in flight, a comma list.  [default: 1,4,32,256]"
        ),
    ] = None,
    sweep_sizes: Annotated[
        str | None,
        typer.Option(
            "--sweep-sizes",
            help="--sweep: message sizes in bytes, a comma list.  [default: 128,1024,65536]",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Send messages as fast as the given concurrency allows; TPS, RT, p50/p99/p999.

    With --sweep, the producer's natural batching (auto_batch) on and off on one cluster
    (--embedded or -n) over a grid: every topic count of --sweep-topics with every number
    of sends in flight of --sweep-threads and every size of --sweep-sizes, a --duration
    run of each mode per --rounds, alternating. Each topic count's topics are created
    once, before its runs. Prints both rates and their ratio (on/off) per combination,
    then the worst ratio.

    With --protocol v5, the SDK and RocketMQ 5's official client send to the same broker
    in one run (the official client over the broker's apache.rocketmq.v2 endpoint, from
    --processes driver processes sharing the -c sends in flight), --rounds rounds
    alternating; both rates, their ratio and what each costs the broker.

    With --compare-security, four clusters of the --replication/--role shape run side by
    side (plain, auth, tls, auth_tls) for --rounds rounds: each one's rates, latencies and
    CPU per message, and their ratios to plain.

    Against a secured cluster, give credentials and TLS with --access-key/--secret-key (or
    ROCKETQ_ACCESS_KEY/ROCKETQ_SECRET_KEY or a credentials file) and --tls --tls-ca-file."""
    from rocketq.bench.client_bench import json_line, produce, run
    from rocketq.common.exceptions import RocketqError

    if (why := _v5_refusal(protocol, processes, v5_endpoint, profile)) is not None:
        raise fail(why, 2)
    sweep_lists = {"--sweep-topics": sweep_topics, "--sweep-threads": sweep_threads,
                   "--sweep-sizes": sweep_sizes}  # fmt: skip
    if not sweep and (given := [flag for flag, value in sweep_lists.items() if value]):
        raise fail(f"{', '.join(given)}: only with --sweep", 2)
    if pin:
        from rocketq.bench.client_bench import check_pin

        try:
            check_pin(embedded)
        except BenchOptionError as exc:
            raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    if sweep:
        others = {
            "--compare-security": compare_security,
            "--metrics-compare": metrics_compare,
            "--protocol v5": protocol is ClientProtocol.V5,
            "--topics (use --sweep-topics)": topics != 1,
            "-c (use --sweep-threads)": concurrency != 1,
            "-s (use --sweep-sizes)": size != 1024,
            "-b (the sweep measures single sends)": batch != 1,
            "--messages (the sweep's runs last --duration)": messages != 0,
            "--no-auto-batch (the sweep runs both)": not auto_batch,
        }
        if given := [flag for flag, value in others.items() if value]:
            raise fail(f"--sweep: leave out {', '.join(given)}", 2)
        _produce_sweep(
            namesrv,
            embedded,
            data_dir,
            replication,
            role,
            topic=topic,
            queues=queues,
            duration=duration,
            rounds=rounds,
            lists=(sweep_topics, sweep_threads, sweep_sizes),
            batch_in_flight=batch_in_flight,
            echo_json=json_out,
            pin=pin,
        )
        return
    if topics != 1 and (compare_security or metrics_compare or protocol is ClientProtocol.V5):
        raise fail("--topics: only with a plain run or --sweep (as --sweep-topics)", 2)
    if pin and (compare_security or metrics_compare or protocol is ClientProtocol.V5):
        raise fail("--pin: only with a plain run or --sweep", 2)
    run_s = 10.0 if duration is None else duration
    rounds = 4 if rounds is None else rounds
    queues = 8 if queues is None else queues
    if embedded:
        from rocketq.bench.client_bench import check_memory_maps

        try:
            check_memory_maps(topics, queues)
        except BenchOptionError as exc:
            raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    if protocol is ClientProtocol.V5:
        if compare_security or metrics_compare:
            raise fail("--protocol v5: leave out --compare-security and --metrics-compare", 2)
        if batch > 1:
            raise fail("--protocol v5: the v5 API sends one message per call; leave out -b", 2)
        if replication is not Replication.NONE:
            raise fail("--protocol v5 measures one broker: leave out --replication", 2)
        from rocketq.bench.v5_bench import v5_produce_bench, v5_target

        def v5_compare() -> dict[str, Any]:
            with v5_target(
                namesrv, v5_endpoint, embedded, str(data_dir) if data_dir else None, typer.echo
            ) as target:
                return v5_produce_bench(
                    target,
                    topic=topic,
                    size=size,
                    concurrency=concurrency,
                    duration=run_s,
                    messages=messages,
                    queues=queues,
                    rounds=rounds,
                    processes=processes,
                    echo=typer.echo,
                    client=security_settings(),
                    producer_settings={
                        "auto_batch": auto_batch,
                        "batch_max_in_flight": batch_in_flight,
                    },
                    profile_dir=profile,
                )

        _v5_run(v5_compare, echo_json=json_out)
        return
    if compare_security:
        if not embedded:
            raise fail("--compare-security starts its own clusters: add --embedded", 2)
        if metrics_compare:
            raise fail("--compare-security and --metrics-compare: one at a time", 2)
        from rocketq.bench.security_bench import security_compare, table

        shape = "lone"
        if replication is Replication.HA:
            shape = "sync_master" if role is MasterRole.SYNC_MASTER else "async_master"
        elif replication is Replication.RAFT:
            shape = "raft"
        try:
            result = security_compare(
                shape=shape,
                rounds=rounds,
                size=size,
                concurrency=concurrency if concurrency > 1 else 32,
                batch=batch,
                duration=run_s,
                queues=queues,
                data_dir=str(data_dir) if data_dir else None,
                echo=typer.echo,
            )
        except (RocketqError, OSError) as exc:
            raise fail(str(exc)) from None
        typer.echo("--- summary ---")
        for line in table(result):
            typer.echo(line)
        if json_out:
            typer.echo(json_line({"bench": "produce-security", **result}))
        return
    if metrics_compare:
        if not embedded:
            raise fail("--metrics-compare starts its own clusters: add --embedded", 2)
        from rocketq.bench.metrics_bench import metrics_compare as compare

        try:
            summary = compare(
                topic=topic,
                size=size,
                concurrency=concurrency,
                batch=batch,
                duration=run_s,
                queues=queues,
                rounds=rounds,
                scrape_interval=scrape_interval,
                data_dir=str(data_dir) if data_dir else None,
                echo=typer.echo,
            )
        except (RocketqError, OSError, RuntimeError) as exc:
            raise fail(str(exc)) from None
        if json_out:
            typer.echo(json_line(summary))
        return
    try:
        with _bench_target(
            namesrv, embedded, data_dir, replication.value, role.value, pin=pin
        ) as ns:
            result = run(
                lambda: produce(
                    ns,
                    topic=topic,
                    size=size,
                    concurrency=concurrency,
                    batch=batch,
                    duration=run_s,
                    messages=messages,
                    queues=queues,
                    echo=typer.echo,
                    client=security_settings(),
                    producer_settings={
                        "auto_batch": auto_batch,
                        "batch_max_in_flight": batch_in_flight,
                    },
                    topics=topics,
                )
            )
    except (RocketqError, OSError, RuntimeError) as exc:
        raise fail(str(exc)) from None
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
    compare_security: Annotated[
        bool,
        typer.Option(
            "--compare-security",
            help="Each kind of --modes (lone too, if listed) as plain, auth, tls and auth_tls "
            "clusters side by side, each taking -c sends in flight and one send at a time for "
            "--rounds rounds; rates, latencies, CPU per message and ratios to plain.",
        ),
    ] = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            file_okay=False,
            help="py-spy profiles (raw) of every broker and the client, per cluster and "
            "round, written here and summarized after the run (`rocketq bench profile`).",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """One run, clusters one after the other: a lone broker, an ASYNC_MASTER with a slave,
    a SYNC_MASTER with a slave and a three-member Raft group; each one's TPS as a ratio to
    the lone broker's (the median over --rounds). With --compare-security, what auth and
    TLS cost each of them instead."""
    from rocketq.bench.client_bench import json_line
    from rocketq.bench.replication_bench import replication_bench, replication_security_bench
    from rocketq.common.exceptions import RocketqError

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    if compare_security and profile is not None:
        raise typer.BadParameter(
            "profiles are taken of the plain comparison; leave out --compare-security",
            param_hint="'--profile'",
        )
    if compare_security:
        try:
            result = replication_security_bench(
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
            raise fail(f"--modes: {exc}") from None
        except (RocketqError, OSError) as exc:
            raise fail(str(exc)) from None
        if json_out:
            typer.echo(json_line(result))
        return
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
            profile_dir=profile,
        )
    except ValueError as exc:
        raise fail(f"--modes: {exc}") from None
    except (RocketqError, OSError) as exc:
        raise fail(str(exc)) from None
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
    from rocketq.common.exceptions import RocketqError

    extra = {}
    for item in settings or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise fail(f"--set takes KEY=VALUE, got {item!r}")
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
        raise fail(str(exc)) from None
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
    protocol: _ProtocolOption = ClientProtocol.REMOTING,
    processes: _ProcessesOption = 0,
    v5_endpoint: _V5EndpointOption = None,
    profile: _V5ProfileOption = None,
    rounds: Annotated[int, typer.Option(min=1, help="--protocol v5: rounds of both.")] = 3,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Consume as fast as possible (a backlog, or what arrives); consume TPS.

    With --protocol v5, a backlog (--backlog, default 100,000) is written once and consumed
    in each of --rounds rounds by a new SDK group and by a new group of RocketMQ 5's
    official client (SimpleConsumers in --processes driver processes, receiving 32 at a
    time and acknowledging each message), alternating; both rates and their ratio."""
    from rocketq.bench.client_bench import consume, json_line, run
    from rocketq.common.exceptions import RocketqError

    if (why := _v5_refusal(protocol, processes, v5_endpoint, profile)) is not None:
        raise fail(why, 2)
    if protocol is ClientProtocol.V5:
        from rocketq.bench.v5_bench import v5_consume_bench, v5_target

        def v5_compare() -> dict[str, Any]:
            with v5_target(
                namesrv, v5_endpoint, embedded, str(data_dir) if data_dir else None, typer.echo
            ) as target:
                return v5_consume_bench(
                    target,
                    topic=topic,
                    group=group,
                    size=size,
                    backlog=backlog,
                    duration=duration,
                    queues=queues,
                    consume_batch=consume_batch,
                    rounds=rounds,
                    processes=processes,
                    echo=typer.echo,
                    profile_dir=profile,
                )

        _v5_run(v5_compare, echo_json=json_out)
        return
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
        raise fail(str(exc)) from None
    if json_out:
        typer.echo(json_line(result))


@bench_app.command("spark")
def bench_spark(
    namesrv: Annotated[
        str | None,
        typer.Option(
            "--namesrv", "-n", envvar="NAMESRV_ADDR", help="A running cluster (default: embedded)."
        ),
    ] = None,
    embedded: Annotated[
        bool, typer.Option(help="Start a local cluster for the run (the default without -n).")
    ] = False,
    data_dir: Annotated[Path | None, typer.Option(help="Where --embedded keeps its data.")] = None,
    messages: Annotated[int, typer.Option(min=1, help="Messages per phase.")] = 1_000_000,
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    queues: Annotated[int, typer.Option(min=1, help="Queues of each topic.")] = 8,
    master: Annotated[
        str, typer.Option(help="Spark master; the write uses one task per core.")
    ] = "local[2]",
    profile: Annotated[
        Path | None,
        typer.Option(
            help="py-spy profiles (raw) of the Spark Python workers in each Spark phase, "
            "written here (`rocketq bench profile`)."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The Spark data source against the plain SDK on one cluster in one run: writes of N
    messages (SDK batches of 32 / a DataFrame saved), then reads of the same backlog (a new
    push consumer group / a DataFrame loaded / a streaming query); msgs/s of each, the
    ratios spark/sdk (goal >= 0.50 for the write and the read), each phase's CPU per
    message by process, and the Spark session's start and warm-up (in no rate). Needs
    rocketq[spark]."""
    from rocketq.bench.client_bench import json_line
    from rocketq.bench.spark_bench import SparkBenchError, check_runtime, spark_bench, table
    from rocketq.common.exceptions import RocketqError

    try:
        check_runtime()
    except SparkBenchError as exc:
        raise fail(str(exc)) from None
    try:
        with _bench_target(namesrv, embedded or namesrv is None, data_dir) as ns:
            result = spark_bench(
                ns,
                messages=messages,
                size=size,
                queues=queues,
                master=master,
                echo=typer.echo,
                profile_dir=profile,
            )
    except (RocketqError, OSError) as exc:
        raise fail(str(exc)) from None
    for line in table(result):
        typer.echo(line)
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
        str,
        typer.Option(help="Comma-separated: produce, consume, e2e, sync_send, concurrent."),
    ] = "produce,consume,e2e,sync_send,concurrent",
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
    compare_auto_batch: Annotated[
        bool,
        typer.Option(
            "--compare-auto-batch",
            help="Run rocketq's scenarios a second time with the producer's natural batching "
            "(auto_batch) off, as the system rocketq-no-auto-batch, and print on / off.",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """rocketq side by side with Redis Streams, NATS JetStream and RabbitMQ on this
    machine: the same workload for each, a table, and rocketq's ratio to the best peer
    (with --compare-auto-batch also rocketq's natural batching on against off)."""
    from rocketq.bench.peers.chart import ChartUnavailableError, write_chart
    from rocketq.bench.peers.runner import PeerRunOptions, run_peers
    from rocketq.bench.peers.systems import make_systems, with_auto_batch_off
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
        if compare_auto_batch:
            chosen = with_auto_batch_off(chosen)
    except (WorkloadError, ValueError) as exc:
        raise fail(str(exc), 2) from None
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


# -- recovery after a SIGKILL (bench/recovery_bench.py) --------------------------------------


@bench_app.command("recovery")
def bench_recovery(
    gb: Annotated[
        str | None,
        typer.Option(
            "--gb",
            help="CommitLog sizes in GB (decimal), two at most, comma-separated; one size N "
            "also runs N/8, so a run always compares two sizes. Default 0.4,3.",
        ),
    ] = None,
    topics: Annotated[
        str | None,
        typer.Option(
            "--topics",
            help="Compare topic counts instead of CommitLog sizes: two at most, "
            "comma-separated (e.g. 1,10000); one count N also runs 1. Each count gets a "
            "fresh broker with that many topics of 4 queues, --messages single sends, a "
            "graceful restart (SIGTERM) and a crash recovery (SIGKILL).",
        ),
    ] = None,
    messages: Annotated[
        int | None,
        typer.Option(
            "--messages",
            help="With --topics: messages sent round-robin over the topics before each "
            "restart (32 single sends in flight). Default 100,000.",
        ),
    ] = None,
    senders: Annotated[
        int | None, typer.Option(min=1, help="Concurrent senders while filling. Default 8.")
    ] = None,
    batch: Annotated[
        int | None,
        typer.Option("--batch", "-b", min=1, max=1024, help="Messages per send. Default 32."),
    ] = None,
    size: Annotated[int, typer.Option("--size", "-s", min=1)] = 1024,
    segment_size: Annotated[
        int, typer.Option(min=4096, help="CommitLog segment size in bytes.")
    ] = 1 << 30,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the brokers keep their data.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """For each size, fill a fresh ASYNC_FLUSH broker with batches from concurrent senders,
    SIGKILL it, restart it and time the first SEND_OK of a new producer; the broker's log
    adds what its recovery checked and re-dispatched. With --topics, for each topic count
    instead: stop (SIGTERM) and restart, then SIGKILL and restart, each timed to the first
    SEND_OK and checked to serve every topic."""
    import asyncio

    from rocketq.bench import recovery_bench, restart_bench
    from rocketq.common.exceptions import RocketqError

    try:
        restart_bench.check_mode(
            topics=topics, gb=gb, messages=messages, senders=senders, batch=batch
        )
        if topics is not None:
            counts = restart_bench.parse_topic_counts(topics)
            n_messages = restart_bench.DEFAULT_MESSAGES if messages is None else messages
            restart_bench.check_topics_options(messages=n_messages, size=size)
        else:
            sizes = recovery_bench.parse_sizes(recovery_bench.DEFAULT_SIZES if gb is None else gb)
            n_senders = 8 if senders is None else senders
            n_batch = 32 if batch is None else batch
            recovery_bench.check_options(
                senders=n_senders, batch=n_batch, size=size, segment_size=segment_size
            )
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    where = str(data_dir) if data_dir else None
    try:
        if topics is not None:
            counted = asyncio.run(
                restart_bench.run_restart_bench(
                    counts,
                    messages=n_messages,
                    size=size,
                    segment_size=segment_size,
                    data_dir=where,
                    echo=typer.echo,
                )
            )
        else:
            results = asyncio.run(
                recovery_bench.run_recovery_bench(
                    sizes,
                    senders=n_senders,
                    batch=n_batch,
                    size=size,
                    segment_size=segment_size,
                    data_dir=where,
                    echo=typer.echo,
                )
            )
    except (RocketqError, OSError, RuntimeError) as exc:
        raise fail(str(exc)) from None
    if topics is not None:
        for line in restart_bench.table(counted):
            typer.echo(line)
        if json_out:
            typer.echo(restart_bench.json_report(counted, messages=n_messages, size=size))
        return
    for line in recovery_bench.table(results):
        typer.echo(line)
    if json_out:
        typer.echo(recovery_bench.json_report(results, senders=n_senders, batch=n_batch, size=size))


@bench_app.command("transport")
def bench_transport(
    size: Annotated[int, typer.Option("--size", "-s", min=1, max=4 << 20)] = 1024,
    duration: Annotated[
        float, typer.Option("--duration", "-d", min=0.1, help="Seconds per case.")
    ] = 5.0,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """One request in flight, in one run: blocking sockets between two processes (the
    loopback floor), the remoting transport in one process, and across two processes with
    an echo server. The last is the ceiling of one-at-a-time sends to a broker."""
    import json

    from rocketq.bench import transport_bench

    results = transport_bench.run(size, duration)
    for r in results:
        s = r.latency
        typer.echo(
            f"{r.case:<20} {r.per_s:>10,.0f} round trips/s | p50 {s.p50_ms:.3f} ms "
            f"p99 {s.p99_ms:.3f} ms | {r.per_s / (results[0].per_s or 1):.2f}x the socket floor"
        )
    if json_out:
        typer.echo(json.dumps(transport_bench.report(results)))


@bench_app.command(
    "builds",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def bench_builds(
    ctx: typer.Context,
    rounds: Annotated[int, typer.Option(min=1, help="Rounds of both builds.")] = 3,
    metric: Annotated[
        str, typer.Option(help="The JSON figure compared (a dotted path for nested ones).")
    ] = "msgs_per_s",
    timeout: Annotated[
        float, typer.Option(min=1.0, help="Seconds one benchmark run may take.")
    ] = 900.0,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The compiled build against the pure package in one run: the benchmark after `--`
    (`rocketq bench builds --rounds 3 -- produce --embedded -c 32 --duration 6`) runs on
    each in turn, and each round's compiled/pure ratio of `--metric` is printed with
    their median."""
    import json

    from rocketq.bench import builds_bench

    try:
        result = builds_bench.run(
            list(ctx.args), rounds=rounds, metric=metric, timeout=timeout, echo=typer.echo
        )
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    except builds_bench.BuildsError as exc:
        raise fail(str(exc)) from None
    if json_out:
        typer.echo(json.dumps(result))


@bench_app.command("profile")
def bench_profile(
    files: Annotated[
        list[Path],
        typer.Argument(help="py-spy raw profiles (what --profile of a benchmark writes)."),
    ],
    top: Annotated[int, typer.Option(min=1, help="Functions listed per file.")] = 15,
    thread: Annotated[
        str | None, typer.Option(help="The thread to break down (default: the busiest).")
    ] = None,
    rate: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="The sampling rate the profile was taken at (Hz), if it does not say "
            "(default 200).",
        ),
    ] = None,
    side_by_side: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="Two files, BASE then OTHER: each function's own time in both and how it "
            "changed, as µs of CPU per message when the benchmark noted its messages "
            "(rocketq bench topics --profile), else as shares of all samples.",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Where the time went in profiles taken by `rocketq bench peers --profile DIR`,
    `rocketq bench topics --profile DIR` or `rocketq bench replication --profile DIR`:
    each thread's samples, and for the busiest thread (the event loop) each function's
    share of its samples, by itself and with what it calls; with --compare, what changed
    from one profile to another. Compiled functions show under their nearest Python
    caller: profile with ROCKETQ_PURE=1 to see them by name."""
    import json

    from rocketq.bench.profiling import (
        ProfileError,
        comparison_json,
        format_comparison,
        format_summary,
        summarize,
        summary_json,
    )

    if side_by_side:
        if len(files) != 2:
            raise typer.BadParameter(
                f"--compare takes two profiles, BASE then OTHER; got {len(files)}",
                param_hint="'--compare'",
            )
        try:
            base, other = summarize(files[0]), summarize(files[1])
        except ProfileError as exc:
            raise fail(str(exc)) from None
        if json_out:
            typer.echo(json.dumps(comparison_json(base, other, rate=rate)))
        else:
            for line in format_comparison(base, other, top=top, rate=rate):
                typer.echo(line)
        return
    out: list[dict[str, object]] = []
    for path in files:
        try:
            profile = summarize(path)
            if json_out:
                out.append(summary_json(profile, top=top, rate=rate))
            else:
                for line in format_summary(profile, top=top, thread=thread, rate=rate):
                    typer.echo(line)
        except ProfileError as exc:
            raise fail(str(exc)) from None
    if json_out:
        typer.echo(json.dumps(out))


# -- fuzzing the decoders (bench/fuzz/) ------------------------------------------------------


@bench_app.command("fuzz")
def bench_fuzz(
    seconds: Annotated[
        float, typer.Option("--seconds", "-d", min=1, help="Seconds of fuzzing per harness.")
    ] = 180.0,
    harness: Annotated[
        list[str] | None,
        typer.Option("--harness", help="A harness to run (repeat for more). Default: all."),
    ] = None,
    runs: Annotated[
        int, typer.Option(min=0, help="Stop a harness after N executions (0: --seconds).")
    ] = 0,
    findings: Annotated[
        Path,
        typer.Option(
            "--findings",
            file_okay=False,
            help="Where each harness's findings, working corpus and log go.",
        ),
    ] = Path("fuzz-findings"),
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Harnesses at once.")] = 1,
    time_limit: Annotated[
        float, typer.Option(min=0.01, help="CPU seconds an input may take before it is a hang.")
    ] = 1.0,
    memory_mb: Annotated[
        int, typer.Option(min=64, help="Memory a worker may add to what it uses at start (MB).")
    ] = 2048,
    max_len: Annotated[int, typer.Option(min=1, help="Longest input in bytes.")] = 16384,
    list_only: Annotated[
        bool, typer.Option("--list", help="Print the harnesses and what each fuzzes, and stop.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Coverage-guided fuzzing (atheris) of every decoder of outside bytes, each harness in
    a process of its own: executions, exec/s, corpus size and findings per harness; each
    finding's input goes to FINDINGS/HARNESS/ with the exception beside it. Exits 1 when
    anything was found. Needs rocketq[fuzz]."""
    import importlib.util

    from rocketq.bench.fuzz.runner import HARNESS_NAMES, FuzzOptions, json_report, run_fuzz, summary

    if list_only:
        from rocketq.bench.fuzz.targets import HARNESSES

        for h in HARNESSES.values():
            typer.echo(f"{h.name:<20} {h.summary}")
        return
    try:
        options = FuzzOptions(
            seconds=seconds,
            harnesses=tuple(harness) if harness else HARNESS_NAMES,
            runs=runs,
            findings=findings,
            jobs=jobs,
            time_limit=time_limit,
            memory_mb=memory_mb,
            max_len=max_len,
        )
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{exc.flag}'") from None
    if importlib.util.find_spec("atheris") is None:
        raise fail("atheris is not installed: pip install 'rocketq[fuzz]'")
    try:
        results = run_fuzz(options, typer.echo)
    except OSError as exc:
        raise fail(str(exc)) from None
    typer.echo(summary(results))
    if json_out:
        typer.echo(json_report(results))
    if not all(r.ok for r in results):
        raise typer.Exit(1)
