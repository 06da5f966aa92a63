"""The peer benchmark's harness against a fake system: the same workload for every
system, rows and ratios (missing and failed peers included), the Markdown table, the JSON
line, the installer's messages and the CLI's output; and the concurrent scenario against a
real rocketq."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.bench.peers.chart import panel_values
from rocketq.bench.peers.install import (
    BENCH_EXTRA,
    Client,
    Installer,
    Requirement,
    SystemMissingError,
)
from rocketq.bench.peers.processes import ProcessGroup, start_time
from rocketq.bench.peers.results import FAILED, MISSING, Report, ScenarioResult, compute_ratios
from rocketq.bench.peers.runner import PeerRunOptions, run_peers
from rocketq.bench.peers.systems.base import ServerInfo
from rocketq.bench.peers.systems.rabbitmq import RabbitmqDriver
from rocketq.bench.peers.systems.rocketq import RocketqSystem
from rocketq.bench.peers.systems.stub import FakeSystem
from rocketq.bench.peers.workload import (
    Durability,
    Scenario,
    Workload,
    WorkloadError,
    make_body,
    stamp_of,
    stamped,
)

FAST = Workload(
    duration=0.2,
    backlog=600,
    e2e_rate=500,
    warmup=0.05,
    drain_timeout=2.0,
    producers=2,
    consumers=2,
    batch=8,
)


def _run(systems: list[FakeSystem], w: Workload = FAST) -> Report:
    lines: list[str] = []
    return run_peers(PeerRunOptions(w), systems, lines.append)


@pytest.fixture(scope="module")
def two_systems() -> Report:
    """rocketq, a peer and a missing peer, run once for the output tests."""
    return _run([FakeSystem("rocketq"), FakeSystem("peer"), FakeSystem("gone", missing=True)])


def _row(report: Report, system: str, scenario: Scenario) -> ScenarioResult:
    return next(r for r in report.results if r.system == system and r.scenario == scenario)


# -- workload -------------------------------------------------------------------------------


def test_workload_defaults_are_the_issue_s() -> None:
    w = Workload()
    assert w.durability is Durability.PAGE_CACHE
    assert w.size == 1024
    assert w.e2e_rate == 5_000
    assert w.in_flight == 32
    assert set(w.scenarios) == set(Scenario)


@pytest.mark.parametrize(
    "kwargs",
    [{"producers": 0}, {"consumers": 0}, {"size": 4}, {"batch": 0}, {"duration": 0},
     {"scenarios": ()}, {"e2e_rate": 0}, {"backlog": 0}, {"in_flight": 0}],
)  # fmt: skip
def test_workload_refuses_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(WorkloadError):
        Workload(**kwargs)  # type: ignore[arg-type]


def test_bodies_carry_their_send_time() -> None:
    body = make_body(1024)
    assert len(body) == 1024
    assert len(stamped(body, 123)) == 1024
    assert stamp_of(stamped(body, 123_456_789)) == 123_456_789


# -- one run over fake systems ----------------------------------------------------------------


def test_every_system_runs_the_same_workload() -> None:
    a, b = FakeSystem("rocketq"), FakeSystem("peer")
    report = _run([a, b])
    assert a.driver_made is not None and b.driver_made is not None
    assert a.driver_made.prepared == b.driver_made.prepared
    assert [str(s) for s in FAST.scenarios] == [
        p.removeprefix("bench_peers_") for p in a.driver_made.prepared
    ]
    # Only the batch sizes the workload asks for: full batches, single messages.
    for d in (a.driver_made, b.driver_made):
        assert set(d.calls) <= {1, FAST.batch}
        assert d.closed
    for system in ("rocketq", "peer"):
        consume = _row(report, system, Scenario.CONSUME)
        assert consume.ok and consume.messages == FAST.backlog
        e2e = _row(report, system, Scenario.E2E)
        assert e2e.ok and e2e.p99_ms is not None and "missing" not in e2e.note
        assert e2e.messages >= FAST.e2e_rate * FAST.duration * 0.5
        produce = _row(report, system, Scenario.PRODUCE)
        assert produce.ok and produce.msgs_per_s > 0 and produce.p50_ms is not None
        assert produce.mb_s == pytest.approx(produce.msgs_per_s * 1024 / 1e6)
        assert _row(report, system, Scenario.SYNC_SEND).msgs_per_s > 0
        concurrent = _row(report, system, Scenario.CONCURRENT)
        assert concurrent.ok and concurrent.msgs_per_s > 0 and concurrent.p99_ms is not None


def test_concurrent_keeps_its_single_sends_in_flight_together() -> None:
    """32 coroutines on one producer, one message per send: with sends that take 2 ms each,
    that is many times one sender's rate, and latency is per send."""
    w = Workload(duration=0.3, scenarios=(Scenario.SYNC_SEND, Scenario.CONCURRENT))
    slow = FakeSystem("rocketq", send_delay=0.002)
    report = _run([slow], w)
    assert slow.driver_made is not None
    assert set(slow.driver_made.calls) == {1}  # single sends only
    assert slow.driver_made.peak_in_flight == w.in_flight == 32
    one = _row(report, "rocketq", Scenario.SYNC_SEND)
    many = _row(report, "rocketq", Scenario.CONCURRENT)
    assert many.ok and many.msgs_per_s > 8 * one.msgs_per_s
    assert many.p50_ms is not None and many.p50_ms >= 2.0
    assert many.p99_ms is not None and many.p999_ms is not None
    assert many.mb_s == pytest.approx(many.msgs_per_s * 1024 / 1e6)
    assert many.elapsed_s >= w.duration


def test_rabbitmq_reports_its_confirmed_transient_sends_where_they_differ() -> None:
    page_cache = RabbitmqDriver("127.0.0.1", 1, confirms=False)
    for scenario in (Scenario.SYNC_SEND, Scenario.CONCURRENT):
        assert "transient message" in (page_cache.durability_of(scenario) or "")
    assert page_cache.durability_of(Scenario.PRODUCE) is None
    fsync = RabbitmqDriver("127.0.0.1", 1, confirms=True)
    assert fsync.durability_of(Scenario.CONCURRENT) is None


def test_produce_stops_after_the_message_budget() -> None:
    w = Workload(duration=5.0, messages=100, batch=8, producers=3, scenarios=(Scenario.PRODUCE,))
    report = _run([FakeSystem("rocketq")], w)
    row = _row(report, "rocketq", Scenario.PRODUCE)
    assert row.messages == 100
    assert row.elapsed_s < 5.0


def test_a_missing_and_a_failing_peer_are_reported_not_fatal() -> None:
    systems = [
        FakeSystem("rocketq"),
        FakeSystem("gone", missing=True),
        FakeSystem("broken", fail=Scenario.CONSUME),
        FakeSystem("slow", send_delay=0.002),
    ]
    w = dataclasses.replace(FAST, scenarios=(Scenario.PRODUCE, Scenario.CONSUME))
    report = _run(systems, w)
    assert {r.status for r in report.results if r.system == "gone"} == {MISSING}
    assert "--install" in report.missing["gone"]
    broken = _row(report, "broken", Scenario.CONSUME)
    assert broken.status == FAILED and "fake failure" in broken.note
    assert _row(report, "broken", Scenario.PRODUCE).ok  # the other scenarios still ran
    ratios = {r.name: r for r in report.ratios()}
    assert ratios["consume"].best_peer == "slow"
    assert all(r.best_peer != "gone" for r in ratios.values())


def test_servers_are_stopped_by_pid_after_each_system(tmp_path: Path) -> None:
    systems = [FakeSystem("rocketq"), FakeSystem("peer", fail=Scenario.PRODUCE)]
    w = dataclasses.replace(FAST, scenarios=(Scenario.PRODUCE, Scenario.SYNC_SEND))
    run_peers(PeerRunOptions(w, workdir=tmp_path), systems, lambda _l: None)
    for s in systems:
        assert s.server_pid and start_time(s.server_pid) is None
        assert s.workdir is not None and not s.workdir.exists()  # temp dir removed


# -- ratios ---------------------------------------------------------------------------------


def _res(system: str, scenario: Scenario, tps: float = 0.0, p99: float | None = None,
         **kw: object) -> ScenarioResult:  # fmt: skip
    return ScenarioResult(system, str(scenario), msgs_per_s=tps, p99_ms=p99, **kw)  # type: ignore[arg-type]


def test_ratios_against_the_best_peer() -> None:
    rows = [
        _res("rocketq", Scenario.PRODUCE, 130.0),
        _res("a", Scenario.PRODUCE, 100.0),
        _res("b", Scenario.PRODUCE, 50.0),
        _res("rocketq", Scenario.E2E, 5000, p99=2.0),
        _res("a", Scenario.E2E, 5000, p99=4.0),
        _res("b", Scenario.E2E, 5000, p99=3.0),
        _res("rocketq", Scenario.SYNC_SEND, 1000.0),
        _res("a", Scenario.SYNC_SEND, 4000.0),
        _res("rocketq", Scenario.CONCURRENT, 30_000.0),
        _res("a", Scenario.CONCURRENT, 10_000.0),
        _res("b", Scenario.CONCURRENT, 20_000.0),
    ]
    ratios = {r.name: r for r in compute_ratios(rows)}
    assert ratios["produce"].value == pytest.approx(1.3)
    assert ratios["produce"].best_peer == "a"
    assert ratios["e2e_p99"].value == pytest.approx(1.5)  # best peer p99 / rocketq p99
    assert ratios["e2e_p99"].best_peer == "b"
    assert ratios["sync_send"].value == pytest.approx(0.25)
    assert ratios["concurrent"].value == pytest.approx(1.5)  # msgs/s, higher is better
    assert ratios["concurrent"].best_peer == "b"
    assert ratios["consume"].value is None and ratios["consume"].best_peer is None


def test_ratios_skip_failed_peers_and_peers_of_another_durability() -> None:
    rows = [
        _res("rocketq", Scenario.PRODUCE, 100.0),
        _res("fast_but_failed", Scenario.PRODUCE, 900.0, status=FAILED),
        _res("fast_but_weaker", Scenario.PRODUCE, 800.0, matches_class=False),
        _res("fair", Scenario.PRODUCE, 200.0),
    ]
    produce = next(r for r in compute_ratios(rows) if r.name == "produce")
    assert produce.best_peer == "fair" and produce.value == pytest.approx(0.5)


def test_no_ratio_when_rocketq_is_missing() -> None:
    rows = [_res("rocketq", Scenario.PRODUCE, status=MISSING), _res("a", Scenario.PRODUCE, 10.0)]
    produce = next(r for r in compute_ratios(rows) if r.name == "produce")
    assert produce.value is None and produce.best_peer == "a"


# -- output ---------------------------------------------------------------------------------


def test_json_line_shape(two_systems: Report) -> None:
    report = two_systems
    doc = json.loads(report.json_line())
    assert set(doc["ratios"]) == {"produce", "consume", "sync_send", "concurrent", "e2e_p99"}
    fields = {"system", "scenario", "msgs_per_s", "mb_s", "p50_ms", "p99_ms", "p999_ms",
              "durability"}  # fmt: skip
    for row in doc["results"]:
        assert fields <= set(row)
    assert doc["ratios"]["produce"] > 0
    assert doc["best_peers"]["produce"] == "peer"
    assert "gone" in doc["missing"]
    assert "\n" not in report.json_line()


def test_markdown_table_has_a_row_per_system_and_scenario(two_systems: Report) -> None:
    report = two_systems
    text = report.markdown()
    lines = text.splitlines()
    assert lines[0].startswith("| system | scenario | msgs/s | MB/s | p50 ms | p99 ms | p999 ms")
    assert sum(1 for line in lines if line.startswith("| peer |")) == len(FAST.scenarios)
    assert any(line.startswith("| gone | produce | missing |") for line in lines)
    assert "| rocketq / best (produce) |" in text
    assert "| rocketq / best (concurrent) |" in text
    assert "| best peer / rocketq p99 |" in text
    assert panel_values(report, "produce", "msgs_per_s")[0][0] == "rocketq"
    assert [s for s, _ in panel_values(report, "concurrent", "msgs_per_s")] == ["rocketq", "peer"]


def test_chart_is_a_png(two_systems: Report, tmp_path: Path) -> None:
    from rocketq.bench.peers.chart import write_chart  # matplotlib comes with the dev extra

    path = write_chart(two_systems, tmp_path / "peers.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


# -- installer ------------------------------------------------------------------------------


def test_missing_server_names_the_package_and_the_flag() -> None:
    req = Requirement("/nonexistent/bin/some-server", "some-server-pkg")
    with pytest.raises(SystemMissingError) as err:
        Installer(False, print).ensure("some", req)
    assert "apt-get install some-server-pkg" in str(err.value)
    assert "--install" in str(err.value)


def test_missing_client_names_the_extra() -> None:
    client = Client("no_such_module_xyz", "xyz-py>=1.2")
    req = Requirement(os.path.realpath("/bin/sh"), "dash", (client,))
    with pytest.raises(SystemMissingError) as err:
        Installer(False, print).ensure("some", req)
    assert BENCH_EXTRA in str(err.value) and "pip install 'xyz-py>=1.2'" in str(err.value)


def test_install_runs_apt_get_only_when_allowed() -> None:
    ran: list[list[str]] = []

    def fake_run(argv: object) -> int:
        ran.append(list(argv))  # type: ignore[call-overload]
        return 0

    req = Requirement("/nonexistent/bin/some-server", "some-server-pkg")
    with pytest.raises(SystemMissingError, match="still missing"):
        Installer(True, lambda _l: None, run=fake_run).ensure("some", req)
    assert ran[0][:2] == ["apt-get", "update"]
    assert ran[1][:3] == ["apt-get", "install", "-y"] and ran[1][-1] == "some-server-pkg"


# -- CLI ------------------------------------------------------------------------------------


def test_cli_prints_the_table_and_one_json_line_last(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import rocketq.bench.peers.systems as systems
    from rocketq.cli.main import app

    monkeypatch.setattr(
        systems, "make_systems", lambda names: [FakeSystem("rocketq"), FakeSystem("peer")]
    )
    md = tmp_path / "peers.md"
    result = CliRunner().invoke(
        app,
        ["bench", "peers", "--duration", "0.2", "--backlog", "300", "--rate", "300",
         "--scenarios", "produce,e2e,concurrent", "--json", "--markdown", str(md)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    last = json.loads(result.output.strip().splitlines()[-1])
    assert last["bench"] == "peers" and last["durability"] == "page-cache"
    assert "| rocketq / best (produce) |" in result.output
    assert last["ratios"]["concurrent"] > 0
    assert md.read_text().startswith("| system |")


def test_cli_refuses_an_unknown_system() -> None:
    from rocketq.cli.main import app

    result = CliRunner().invoke(app, ["bench", "peers", "--systems", "kafka"])
    assert result.exit_code == 2
    assert "unknown system" in result.output


# -- a real rocketq -------------------------------------------------------------------------


def test_concurrent_against_a_real_rocketq(tmp_path: Path) -> None:
    """The concurrent scenario through the SDK against a nameserver and a broker started by
    the run (this package's, so never missing), stopped by pid at its end."""

    class Recorded(RocketqSystem):
        pids: tuple[int, ...] = ()

        def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
            info = super().start(durability, workdir, procs)
            self.pids = info.pids
            return info

    w = Workload(duration=0.5, scenarios=(Scenario.CONCURRENT,))
    system = Recorded()
    lines: list[str] = []
    report = run_peers(PeerRunOptions(w, workdir=tmp_path), [system], lines.append)
    row = _row(report, "rocketq", Scenario.CONCURRENT)
    assert row.ok, row.note
    assert row.messages > w.in_flight and row.msgs_per_s > 0
    assert row.p50_ms is not None and row.p99_ms is not None
    assert "ASYNC_FLUSH" in row.durability
    assert any(line.startswith("[rocketq] concurrent:") for line in lines)
    assert system.pids and all(start_time(pid) is None for pid in system.pids)
    assert list(tmp_path.iterdir()) == []  # the servers' temp dir is gone with them
