"""One peer benchmark run: for each system in turn, make sure it is here (installing it
if allowed), start its server in a temp dir, run every scenario against it, stop it by
pid, and collect the rows; a system that cannot run is reported missing, a scenario that
fails is reported failed, and the run goes on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any, Final

from rocketq.bench.peers.install import Installer, SystemMissingError
from rocketq.bench.peers.processes import ProcessGroup
from rocketq.bench.peers.results import FAILED, MISSING, Report, ScenarioResult
from rocketq.bench.peers.scenarios import run_scenario
from rocketq.bench.peers.systems.base import PeerSystem, ServerInfo
from rocketq.bench.peers.workload import Scenario, Workload
from rocketq.bench.profiling import echo_summaries, recording

Echo = Callable[[str], None]
# A scenario is cut off after this many seconds on top of its own bounds.
SCENARIO_SLACK_S: Final = 240.0


@dataclass(frozen=True)
class PeerRunOptions:
    workload: Workload
    install: bool = False
    workdir: Path | None = None  # where the servers' temp dirs go (default: system temp)
    profile_dir: Path | None = None  # py-spy raw profiles of rocketq's broker and client


def run_peers(
    options: PeerRunOptions,
    systems: Sequence[PeerSystem],
    echo: Echo = print,
    *,
    installer: Installer | None = None,
) -> Report:
    """``installer``: what checks and installs the systems (default: one allowed to install
    when ``options.install``, running real commands)."""
    w = options.workload
    report = Report(durability=str(w.durability), workload=w.describe())
    if installer is None:
        installer = Installer(options.install, echo)
    with _sigterm_as_interrupt():
        for system in systems:
            echo(f"--- {system.name} ---")
            try:
                system.ensure_installed(installer)
            except SystemMissingError as exc:
                echo(f"{system.name}: missing: {exc}")
                report.missing[system.name] = str(exc)
                for s in w.scenarios:
                    report.add(_row(system.name, s, MISSING, str(exc)))
                continue
            for row in _run_system(system, options, echo):
                report.add(row)
    return report


def _row(
    system: str, scenario: Scenario, status: str, note: str, durability: str = ""
) -> ScenarioResult:
    return ScenarioResult(
        system=system, scenario=str(scenario), status=status, note=note, durability=durability
    )


def _run_system(system: PeerSystem, options: PeerRunOptions, echo: Echo) -> list[ScenarioResult]:
    w = options.workload
    if options.workdir is not None:
        options.workdir.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(
            prefix=f"bench-peers-{system.name}-", dir=options.workdir
        ) as tmp,
        ProcessGroup() as procs,
    ):
        try:
            server = system.start(w.durability, Path(tmp), procs)
        except Exception as exc:  # one system failing must not end the run
            echo(f"{system.name}: server did not start: {exc}")
            return [
                _row(system.name, s, FAILED, f"server did not start: {exc}") for s in w.scenarios
            ]
        echo(f"{system.name}: {server.settings}; durability {server.durability}")
        try:
            rows: list[ScenarioResult] = _in_loop(
                lambda: _scenarios(system, server, options, procs, echo)
            )
            return rows
        finally:
            system.stop(procs)


async def _scenarios(
    system: PeerSystem,
    server: ServerInfo,
    options: PeerRunOptions,
    procs: ProcessGroup,
    echo: Echo,
) -> list[ScenarioResult]:
    w = options.workload
    driver = system.driver(server, w.durability)
    rows: list[ScenarioResult] = []
    bound = w.duration * 3 + w.drain_timeout + SCENARIO_SLACK_S
    try:
        for scenario in w.scenarios:
            stream = f"bench_peers_{scenario}"
            with _profiled(system, server, scenario, options, echo):
                try:
                    r = await asyncio.wait_for(run_scenario(driver, scenario, w, stream), bound)
                except Exception as exc:  # reported as failed; the others still run
                    why = f"{type(exc).__name__}: {exc}"
                    echo(f"{system.name} {scenario}: failed: {why}")
                    rows.append(_row(system.name, scenario, FAILED, why, server.durability))
                    continue
            r = replace(
                r,
                system=system.name,
                durability=driver.durability_of(scenario) or server.durability,
                matches_class=server.matches_class,
            )
            echo(_progress_line(r))
            rows.append(r)
    finally:
        with contextlib.suppress(Exception):
            await driver.close()
    return rows


def _progress_line(r: ScenarioResult) -> str:
    lat = ""
    if r.p99_ms is not None:
        lat = f" | p50 {r.p50_ms:.2f} ms p99 {r.p99_ms:.2f} ms p999 {r.p999_ms:.2f} ms"
    note = f" ({r.note})" if r.note else ""
    return (
        f"[{r.system}] {r.scenario}: {r.msgs_per_s:,.0f} msgs/s | {r.mb_s:,.1f} MB/s"
        f"{lat} | {r.messages:,} msgs in {r.elapsed_s:.2f} s{note}"
    )


@contextlib.contextmanager
def _profiled(
    system: PeerSystem,
    server: ServerInfo,
    scenario: Scenario,
    options: PeerRunOptions,
    echo: Echo,
) -> Iterator[None]:
    """With a profile dir: py-spy records rocketq's broker and this process (the client)
    for the scenario, as collapsed stacks (``py-spy record --format raw``), and their
    summaries are printed after it (``rocketq bench profile``)."""
    if options.profile_dir is None or system.name != "rocketq" or not server.pids:
        yield
        return
    prefix = f"{options.workload.durability}-{scenario}"
    targets = [(f"{prefix}-broker", server.pids[0]), (f"{prefix}-client", os.getpid())]
    with recording(targets, options.profile_dir, echo) as files:
        yield
    echo_summaries(files.values(), echo, top=10)


def _in_loop(factory: Callable[[], Any]) -> Any:
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover
        runner = asyncio.Runner()
    with runner:
        return runner.run(factory())


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C, so every server is still stopped by pid."""

    def interrupt(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
