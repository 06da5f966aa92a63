"""``rocketq bench produce|consume --protocol v5``: one broker measured in one run over both
of its client protocols, the SDK over RocketMQ's remoting protocol and RocketMQ 5's
official Python client over the apache.rocketmq.v2 gRPC endpoint, with the ratio of the
two rates.

The cluster is one started for the run (``--embedded``, a broker with its endpoint on) or
a running one (``-n`` and ``--v5-endpoint`` as ``rocketq cluster up --grpc`` prints it).
Each round measures the remoting path (:func:`rocketq.bench.client_bench.produce` or
``consume`` in this process, as ``rocketq bench produce|consume`` does) and the v5 path
(``processes`` driver processes, ``python -m rocketq.bench.v5_driver``) one after the
other, the order alternating from round to round, so that a slow spell of a shared machine
lands on both sides; the summary gives each side's median rate, each round's ratio
v5/remoting and their median against the goal (:data:`GOAL_RATIO`).

The drivers are started before their window and report ``ready``; all of them are then
told ``go`` at once, so no client start-up is timed, and each reports its count and time
(JSON lines, see :mod:`rocketq.bench.v5_driver`). A driver that cannot start, fails, or does
not answer in time stops the run with its error; every driver is stopped by its pid on the
way out. The official client and rocketq's own apache.rocketmq.v2 modules cannot share a
process, so this module never imports the client: it only starts the driver as a program.

Where the broker's pid is known (``--embedded``) each window also reports the broker's CPU
time: the share of one core it was busy (the broker runs one event loop, so about 100 %
means the broker is the limit) and its CPU time per message, on each side. On a machine
where the clients and the broker share the cores, CPU per message is the steadier measure
of what each protocol costs the broker. With ``profile_dir`` py-spy records the broker and
one client (this process for remoting, the first driver for v5) in every window
(:mod:`rocketq.bench.profiling`), and the busiest thread of each file is summarized after
the run.

How many driver processes (:func:`default_processes`): the broker needs a core to itself
to be measured (one event loop: it cannot use more than about one core of Python), and one
driver at full load keeps about half a core busy (the official client sends one message per
RPC through its own I/O thread and callback threads, ~0.5 ms of CPU a message here). So on a
machine of ``C`` cores, ``2 * (C - 1)`` drivers fill what the broker leaves; more would take
CPU time from the broker and measure the machine instead. On 2 cores: 2 drivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocketq.bench.client_bench import EMBEDDED_SETTINGS, consume, ensure_topic, produce, run
from rocketq.bench.profiling import echo_summaries, recording
from rocketq.bench.report import MB, cpu_clock
from rocketq.bench.v5_drivers import (
    V5BenchError,
    driver_argv,
    run_window,
    started_drivers,
)
from rocketq.common.message import Message

GOAL_RATIO: Final = 0.7
"""The issue's goal: v5 at least 0.7 times the remoting rate at the same message size."""
CONSUME_RECEIVERS: Final = 8  # receiving threads over all drivers of a consume window
CONSUME_ACKERS: Final = 32  # acknowledging threads over all drivers
DEFAULT_BACKLOG: Final = 100_000


def default_processes(cores: int | None = None) -> int:
    """Driver processes for a machine of ``cores`` cores (default: this one's): the broker
    keeps one core, a driver at full load takes about half of one."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, 2 * (cores - 1))


def processes_reason(processes: int, chosen: bool, cores: int | None = None) -> str:
    cores = cores if cores is not None else (os.cpu_count() or 1)
    if chosen:
        return f"{processes} v5 driver process(es) as asked ({cores} cores here)"
    return (
        f"{processes} v5 driver process(es): on {cores} cores the broker keeps one core (one "
        f"event loop) and a driver at full load takes about half a core, so "
        f"2 x ({cores} - 1) drivers fill the rest without starving the broker"
    )


def parse_endpoints(text: str) -> tuple[str, ...]:
    """``HOST:PORT[;HOST:PORT...]`` (as ``rocketq cluster up --grpc`` prints them)."""
    endpoints = tuple(e.strip() for e in text.replace(",", ";").split(";") if e.strip())
    for e in endpoints:
        host, sep, port = e.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise V5BenchError(f"--v5-endpoint: {e!r} is not HOST:PORT")
    if not endpoints:
        raise V5BenchError("--v5-endpoint: no endpoint given")
    return endpoints


# -- the cluster -------------------------------------------------------------------------


@dataclass(frozen=True)
class V5Target:
    """Where both protocols reach the same brokers; ``broker_pids`` when they are known
    (a cluster started for the run), for CPU figures and profiles."""

    namesrv: str
    endpoints: tuple[str, ...]
    broker_pids: tuple[int, ...] = ()


@contextlib.contextmanager
def v5_target(
    namesrv: str | None,
    v5_endpoint: str | None,
    embedded: bool,
    data_dir: str | None,
    echo: Callable[[str], None],
) -> Iterator[V5Target]:
    """The given cluster, or one broker (and a nameserver) with its v2 endpoint on, started
    for the run in a temp dir under ``data_dir`` (default ``data``) and stopped after it."""
    if not embedded:
        if not v5_endpoint:
            raise V5BenchError(
                "--protocol v5 against a running cluster needs its brokers' v2 endpoints: "
                "--v5-endpoint HOST:PORT (`rocketq cluster up --grpc` prints them), or "
                "--embedded"
            )
        yield V5Target(
            namesrv or os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
            parse_endpoints(v5_endpoint),
        )
        return
    if v5_endpoint:
        raise V5BenchError("--v5-endpoint is for a running cluster; --embedded starts its own")
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-cluster-", dir=base) as tmp:
        spec = ClusterSpec(data_dir=Path(tmp), broker_settings=dict(EMBEDDED_SETTINGS), grpc=True)
        with LocalCluster(spec) as cluster:
            endpoints = tuple(f"{b.host}:{b.grpc_port}" for b in cluster.brokers if b.grpc_port)
            if not endpoints:
                raise V5BenchError("the embedded broker reported no apache.rocketmq.v2 port")
            echo(
                f"embedded cluster: nameserver {cluster.namesrv_addr}, v2 endpoint "
                f"{';'.join(endpoints)}, broker pid {cluster.brokers[0].pid}, data in {tmp}"
            )
            yield V5Target(cluster.namesrv_addr, endpoints, tuple(b.pid for b in cluster.brokers))


# -- one window --------------------------------------------------------------------------


@dataclass
class Window:
    """One side's timed load in one round."""

    protocol: str
    msgs: int
    errors: int
    elapsed_s: float
    broker_cpu_s: float | None  # None: the broker's pid is not known
    wall_s: float  # the time the broker's CPU time was taken over
    client_cpu_s: float
    # Cores' worth of CPU every process of the machine used over the window (None: no
    # /proc/stat): the broker and the clients, and whatever else runs.
    machine_busy: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def msgs_per_s(self) -> float:
        return self.msgs / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def broker_busy(self) -> float | None:
        """The share of one core the broker was busy."""
        if self.broker_cpu_s is None or self.wall_s <= 0:
            return None
        return self.broker_cpu_s / self.wall_s

    @property
    def clients_busy(self) -> float:
        """The cores' worth of CPU the clients spent over the window."""
        return self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def broker_us_per_msg(self) -> float | None:
        if self.broker_cpu_s is None or not self.msgs:
            return None
        return self.broker_cpu_s / self.msgs * 1e6

    @property
    def client_us_per_msg(self) -> float:
        return self.client_cpu_s / self.msgs * 1e6 if self.msgs else 0.0

    def to_dict(self) -> dict[str, Any]:
        busy, broker_us = self.broker_busy, self.broker_us_per_msg
        return {
            "protocol": self.protocol,
            "msgs": self.msgs,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "msgs_per_s": round(self.msgs_per_s, 1),
            "broker_cpu_s": None if self.broker_cpu_s is None else round(self.broker_cpu_s, 3),
            "broker_busy": None if busy is None else round(busy, 3),
            "broker_us_per_msg": None if broker_us is None else round(broker_us, 1),
            "client_us_per_msg": round(self.client_us_per_msg, 1),
            "clients_busy": round(self.clients_busy, 3),
            "machine_busy": None if self.machine_busy is None else round(self.machine_busy, 3),
            **self.detail,
        }

    def cost_line(self) -> str:
        busy, broker_us = self.broker_busy, self.broker_us_per_msg
        client = (
            f"clients {self.client_us_per_msg:,.0f} µs CPU per message, "
            f"{100 * self.clients_busy:.0f} % of a core"
        )
        if self.machine_busy is not None:
            client += f"; the whole machine {self.machine_busy:.2f} cores busy"
        if busy is None or broker_us is None:
            return f"[{self.protocol}] {client} (the broker's pid is not known: no broker CPU)"
        return (
            f"[{self.protocol}] broker busy {100 * busy:.0f} % of a core, {broker_us:,.0f} µs "
            f"CPU per message; {client}"
        )


def machine_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every core so far, from /proc/stat; (0, 0) without it."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return 0, 0
    if not fields or fields[0] != "cpu":
        return 0, 0
    ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = sum(ticks[3:5])
    return sum(ticks) - idle, sum(ticks)


def machine_busy(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The cores' worth of CPU the whole machine used between two :func:`machine_ticks`."""
    busy, total = after[0] - before[0], after[1] - before[1]
    if total <= 0:
        return None
    return busy / total * (os.cpu_count() or 1)


class Windows:
    """Measures each window of one comparison: the broker's CPU time and the machine's
    over it and, when ``profile_dir`` is given, py-spy on the broker and one client. The
    drivers of a window get a ``HOME`` of their own under ``home`` (the client logs there)."""

    def __init__(
        self,
        target: V5Target,
        home: Path,
        echo: Callable[[str], None],
        profile_dir: Path | None = None,
    ) -> None:
        if profile_dir is not None and not target.broker_pids:
            raise V5BenchError("--profile records the broker of --embedded; add --embedded")
        self.target = target
        self.home = home
        self.echo = echo
        self.profile_dir = profile_dir
        self.profiles: list[Path] = []
        pids = list(target.broker_pids)
        self._broker_cpu = cpu_clock(pids, own=False) if pids else None

    @contextlib.contextmanager
    def _measured(
        self, prefix: str, client: tuple[str, int], out: dict[str, Any]
    ) -> Iterator[None]:
        """While the block runs: py-spy (with ``profile_dir``); then into ``out`` the wall
        time, the broker's CPU time and the machine's busy cores."""
        profiling: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        if self.profile_dir is not None:
            targets = [
                (f"{prefix}-broker{i + 1}", pid) for i, pid in enumerate(self.target.broker_pids)
            ]
            targets.append((f"{prefix}-{client[0]}", client[1]))
            profiling = recording(targets, self.profile_dir, self.echo)
        with profiling as files:
            cpu0 = self._broker_cpu() if self._broker_cpu else 0.0
            ticks0 = machine_ticks()
            t0 = time.monotonic()
            yield
            out["wall"] = time.monotonic() - t0
            out["machine"] = machine_busy(ticks0, machine_ticks())
            out["broker_cpu"] = self._broker_cpu() - cpu0 if self._broker_cpu else None
        if isinstance(files, dict):
            self.profiles.extend(p for p in files.values() if p.exists())

    def remoting(self, prefix: str, call: Callable[[], Any]) -> Window:
        """The SDK's load (a coroutine ``call`` makes), in this process."""
        got: dict[str, Any] = {}
        with self._measured(prefix, ("client", os.getpid()), got):
            own0 = time.process_time()
            result: dict[str, Any] = run(call)
            own = time.process_time() - own0
        keys = ("p50_ms", "p99_ms", "avg_rt_ms", "natural_batches")
        return Window(
            "remoting",
            int(result["msgs"]),
            int(result.get("failed", 0)),
            float(result["elapsed_s"]),
            got["broker_cpu"],
            got["wall"],
            own,
            got["machine"],
            {k: result[k] for k in keys if k in result},
        )

    def v5(
        self,
        prefix: str,
        role: str,
        topic: str,
        duration: float,
        per_driver: Sequence[Mapping[str, object]],
    ) -> Window:
        """One driver process per entry of ``per_driver`` (its options), the endpoints
        dealt round robin; started, then told to go at once."""
        endpoints = self.target.endpoints
        argvs = [
            driver_argv(role, endpoints[i % len(endpoints)], topic, duration, opts)
            for i, opts in enumerate(per_driver)
        ]
        got: dict[str, Any] = {}
        with (
            started_drivers(argvs, self.home / prefix) as drivers,
            self._measured(prefix, ("driver1", drivers[0].pid), got),
        ):
            results = run_window(drivers, duration)
        detail: dict[str, Any] = {
            "processes": len(results),
            "drivers": [{k: v for k, v in r.items() if k != "event"} for r in results],
        }
        if role == "produce":
            detail["p50_ms"] = statistics.median(float(r["p50_ms"]) for r in results)
            detail["p99_ms"] = max(float(r["p99_ms"]) for r in results)
        first_errors = [r["first_error"] for r in results if r.get("first_error")]
        if first_errors:
            detail["first_error"] = first_errors[0]
        return Window(
            "v5",
            sum(int(r["msgs"]) for r in results),
            sum(int(r["errors"]) for r in results),
            max(float(r["elapsed_s"]) for r in results),
            got["broker_cpu"],
            got["wall"],
            sum(float(r["cpu_s"]) for r in results),
            got["machine"],
            detail,
        )


# -- the comparison ----------------------------------------------------------------------


def alternate(
    rounds: int, window: Callable[[int, str], Window], echo: Callable[[str], None]
) -> list[tuple[Window, Window]]:
    """``rounds`` rounds of both sides (``window(round, side)``), remoting first in the
    even rounds and v5 first in the odd ones: (remoting, v5) per round."""
    pairs = []
    for r in range(rounds):
        got: dict[str, Window] = {}
        for side in ("remoting", "v5") if r % 2 == 0 else ("v5", "remoting"):
            got[side] = window(r, side)
            echo(got[side].cost_line())
        pairs.append((got["remoting"], got["v5"]))
    return pairs


def _summary(
    bench: str,
    windows: list[tuple[Window, Window]],
    echo: Callable[[str], None],
    profiles: list[Path],
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """Each side's median, each round's ratio v5/remoting and their median; the broker's
    CPU per message on each side and its ratio; the profiles' summaries."""
    ratios = [v.msgs_per_s / r.msgs_per_s if r.msgs_per_s else 0.0 for r, v in windows]
    sides: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(("remoting", "v5")):
        ws = [pair[i] for pair in windows]
        busy = [w.broker_busy for w in ws if w.broker_busy is not None]
        cost = [w.broker_us_per_msg for w in ws if w.broker_us_per_msg is not None]
        machine = [w.machine_busy for w in ws if w.machine_busy is not None]
        sides[name] = {
            "msgs_per_s": round(statistics.median(w.msgs_per_s for w in ws), 1),
            "round_msgs_per_s": [round(w.msgs_per_s, 1) for w in ws],
            "errors": sum(w.errors for w in ws),
            "broker_busy": round(statistics.median(busy), 3) if busy else None,
            "broker_us_per_msg": round(statistics.median(cost), 1) if cost else None,
            "client_us_per_msg": round(statistics.median(w.client_us_per_msg for w in ws), 1),
            "clients_busy": round(statistics.median(w.clients_busy for w in ws), 3),
            "machine_busy": round(statistics.median(machine), 3) if machine else None,
        }
    ratio = statistics.median(ratios)
    remoting_us, v5_us = sides["remoting"]["broker_us_per_msg"], sides["v5"]["broker_us_per_msg"]
    cost_ratio = remoting_us / v5_us if remoting_us and v5_us else None
    echo("--- summary ---")
    for name, side in sides.items():
        line = f"{name:<9} {side['msgs_per_s']:>10,.0f} msgs/s (median of {len(windows)})"
        if side["broker_us_per_msg"] is not None:
            line += (
                f", broker {side['broker_us_per_msg']:,.0f} µs CPU per message, busy "
                f"{100 * side['broker_busy']:.0f} % of a core"
            )
        line += f", clients {side['client_us_per_msg']:,.0f} µs CPU per message"
        echo(line)
    met = ratio >= GOAL_RATIO
    echo(
        f"v5/remoting: {ratio:.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)}); goal >= "
        f"{GOAL_RATIO}: {'met' if met else 'not met'}"
    )
    if cost_ratio is not None:
        echo(
            f"the broker's CPU per message, remoting/v5: {cost_ratio:.3f} (what v5 could reach "
            "against remoting if the broker alone were the limit on both sides)"
        )
    busy_v5 = sides["v5"]["broker_busy"]
    v5_limit = None
    if busy_v5 is not None:
        v5_limit = limit(busy_v5, sides["v5"]["clients_busy"], sides["v5"]["machine_busy"])
    if v5_limit is not None:
        echo(f"v5: {v5_limit}")
    echo_summaries(profiles, echo, top=12)
    summary: dict[str, Any] = {
        "bench": bench,
        "protocol": "v5",
        **extra,
        "rounds": len(windows),
        "remoting": sides["remoting"],
        "v5": sides["v5"],
        "ratio": round(ratio, 4),
        "round_ratios": [round(x, 4) for x in ratios],
        "broker_cost_ratio": None if cost_ratio is None else round(cost_ratio, 4),
        "v5_limit": v5_limit,
        "goal_ratio": GOAL_RATIO,
        "goal_met": met,
        "windows": [[r.to_dict(), v.to_dict()] for r, v in windows],
    }
    if profiles:
        summary["profiles"] = [str(p) for p in profiles]
    return summary


BROKER_FULL: Final = 0.85  # busy share of one core from which the broker is the limit
MACHINE_FULL: Final = 0.85  # share of all cores from which the machine is


def limit(
    broker_busy: float,
    clients_busy: float,
    machine: float | None = None,
    cores: int | None = None,
) -> str:
    """What limited a window: from the broker's busy share of a core, the cores' worth the
    clients used, and the cores' worth the whole machine used (``machine``; without it, the
    broker's and the clients' together)."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    used = machine if machine is not None else broker_busy + clients_busy
    shares = (
        f"CPU in cores: broker {broker_busy:.2f}, clients {clients_busy:.2f}, the whole "
        f"machine {used:.2f} of {cores}"
    )
    if broker_busy >= BROKER_FULL:
        return f"the broker is the limit ({shares})"
    if used >= MACHINE_FULL * cores:
        return (
            f"the cores are full ({shares}): the broker shares them with the clients and any "
            "other work, so its CPU per message is the steadier figure"
        )
    return f"neither the broker nor the cores are full ({shares}): the clients' pace is the limit"


def _processes(processes: int, cap: int, echo: Callable[[str], None]) -> tuple[int, str]:
    chosen = processes > 0
    count = min(processes if chosen else default_processes(), max(1, cap))
    reason = processes_reason(count, chosen)
    echo(reason)
    return count, reason


def v5_produce_bench(
    target: V5Target,
    *,
    topic: str,
    size: int,
    concurrency: int,
    duration: float,
    messages: int,
    queues: int,
    rounds: int,
    processes: int,
    echo: Callable[[str], None],
    client: Mapping[str, Any] | None = None,
    producer_settings: Mapping[str, Any] | None = None,
    profile_dir: Path | None = None,
) -> dict[str, Any]:
    """``rounds`` rounds of the SDK's sends and the official client's on ``topic``, each
    side with ``concurrency`` sends in flight (the v5 side's spread over its processes)."""
    count, reason = _processes(processes, concurrency, echo)
    in_flight = math.ceil(concurrency / count)
    client = dict(client or {})
    options: dict[str, object] = {"size": size, "in_flight": in_flight}
    if messages > 0:
        options["messages"] = math.ceil(messages / count)
    if client.get("access_key"):
        options |= {"access_key": client["access_key"], "secret_key": client["secret_key"]}

    def window(r: int, side: str) -> Window:
        prefix = f"produce-r{r + 1}-{side}"
        head = f"--- round {r + 1}/{rounds}:"
        if side == "remoting":
            echo(f"{head} remoting (the SDK, {concurrency} in flight)")
            return windows.remoting(
                prefix,
                lambda: produce(
                    target.namesrv,
                    topic=topic,
                    size=size,
                    concurrency=concurrency,
                    batch=1,
                    duration=duration,
                    messages=messages,
                    queues=queues,
                    echo=echo,
                    client=client,
                    producer_settings=producer_settings,
                ),
            )
        echo(f"{head} v5 (the official client, {count} process(es), {in_flight} in flight each)")
        w = windows.v5(prefix, "produce", topic, duration, [options] * count)
        echo(
            f"[Total Send v5] Send TPS: {w.msgs_per_s:,.0f} | {w.msgs_per_s * size / MB:,.1f} "
            f"MB/s | p50(ms): {w.detail['p50_ms']:.3f} | p99(ms): {w.detail['p99_ms']:.3f} | "
            f"Send Failed: {w.errors}"
        )
        return w

    with tempfile.TemporaryDirectory(prefix="bench-v5-") as tmp:
        windows = Windows(target, Path(tmp), echo, profile_dir)
        run(lambda: ensure_topic(target.namesrv, topic, queues, client))
        pairs = alternate(rounds, window, echo)
    extra = {
        "topic": topic,
        "size": size,
        "concurrency": concurrency,
        "processes": count,
        "processes_reason": reason,
        "in_flight_per_process": in_flight,
        "duration_s": duration,
    }
    return _summary("produce-v5", pairs, echo, windows.profiles, extra)


async def write_backlog(
    namesrv: str,
    topic: str,
    size: int,
    count: int,
    echo: Callable[[str], None],
    client: Mapping[str, Any] | None = None,
) -> None:
    """``count`` messages of ``size`` bytes on ``topic``, in batches of 32 from 16 senders."""
    from rocketq import Producer

    body = b"x" * size
    echo(f"writing a backlog of {count:,} messages to {topic} ...")
    async with Producer(
        group="benchmark_backlog", namesrv=namesrv, **dict(client or {})
    ) as producer:
        left = count

        async def writer() -> None:
            nonlocal left
            while left > 0:
                n = min(32, left)
                left -= n
                await producer.send_batch([Message(topic, body) for _ in range(n)])

        await asyncio.gather(*(writer() for _ in range(16)))


def v5_consume_bench(
    target: V5Target,
    *,
    topic: str,
    group: str,
    size: int,
    backlog: int,
    duration: float,
    queues: int,
    consume_batch: int,
    rounds: int,
    processes: int,
    echo: Callable[[str], None],
    profile_dir: Path | None = None,
) -> dict[str, Any]:
    """A backlog of ``backlog`` messages written once; each round a new remoting group (a
    PushConsumer) and a new v5 group (SimpleConsumers receiving 32 at a time and
    acknowledging each message) consume it from the oldest message, each until it is
    consumed or ``duration`` seconds have passed."""
    backlog = backlog or DEFAULT_BACKLOG
    count, reason = _processes(processes, CONSUME_RECEIVERS, echo)
    options: dict[str, object] = {
        "receivers": max(1, CONSUME_RECEIVERS // count),
        "ackers": max(1, CONSUME_ACKERS // count),
        "batch": 32,
    }
    # New groups each run start at the oldest message, also against a running cluster.
    run_id = f"{int(time.time()) % 1_000_000}"

    def window(r: int, side: str) -> Window:
        prefix = f"consume-r{r + 1}-{side}"
        name = f"{group}_{run_id}_r{r + 1}_{side}"
        head = f"--- round {r + 1}/{rounds}:"
        if side == "remoting":
            echo(f"{head} remoting (a PushConsumer, group {name})")
            return windows.remoting(
                prefix,
                lambda: consume(
                    target.namesrv,
                    topic=topic,
                    group=name,
                    size=size,
                    backlog=0,
                    duration=duration,
                    queues=queues,
                    consume_batch=consume_batch,
                    echo=echo,
                    expect=backlog,
                ),
            )
        echo(f"{head} v5 (SimpleConsumers in {count} process(es), group {name})")
        w = windows.v5(prefix, "consume", topic, duration, [{**options, "group": name}] * count)
        echo(
            f"[Total v5] Consume TPS: {w.msgs_per_s:,.0f} | {w.msgs_per_s * size / MB:,.1f} "
            f"MB/s | {w.msgs:,} messages in {w.elapsed_s:.3f} s | errors {w.errors}"
        )
        return w

    with tempfile.TemporaryDirectory(prefix="bench-v5-") as tmp:
        windows = Windows(target, Path(tmp), echo, profile_dir)
        run(lambda: ensure_topic(target.namesrv, topic, queues))
        run(lambda: write_backlog(target.namesrv, topic, size, backlog, echo))
        pairs = alternate(rounds, window, echo)
    extra = {
        "topic": topic,
        "size": size,
        "backlog": backlog,
        "processes": count,
        "processes_reason": reason,
        "duration_s": duration,
    }
    return _summary("consume-v5", pairs, echo, windows.profiles, extra)


__all__ = [
    "GOAL_RATIO",
    "V5BenchError",
    "V5Target",
    "Windows",
    "alternate",
    "default_processes",
    "v5_consume_bench",
    "v5_produce_bench",
    "v5_target",
]
