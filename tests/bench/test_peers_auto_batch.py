"""``rocketq bench peers --compare-auto-batch``: rocketq run a second time with its
producer's natural batching off, never taken for a peer, and the on / off ratios in the
tables and the JSON line; against fake systems, and the off variant against a real
rocketq."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rocketq.bench.peers.processes import ProcessGroup, start_time
from rocketq.bench.peers.results import (
    FAILED,
    ROCKETQ,
    ROCKETQ_NO_AUTO_BATCH,
    Report,
    ScenarioResult,
    compute_auto_batch_ratios,
    compute_ratios,
)
from rocketq.bench.peers.runner import PeerRunOptions, run_peers
from rocketq.bench.peers.systems import make_systems, with_auto_batch_off
from rocketq.bench.peers.systems.base import Driver, ServerInfo
from rocketq.bench.peers.systems.rocketq import RocketqDriver, RocketqSystem
from rocketq.bench.peers.systems.stub import FakeSystem
from rocketq.bench.peers.workload import Durability, Scenario, Workload


def _res(system: str, scenario: Scenario, tps: float = 0.0, p99: float | None = None,
         **kw: Any) -> ScenarioResult:  # fmt: skip
    return ScenarioResult(system, str(scenario), msgs_per_s=tps, p99_ms=p99, **kw)


def test_on_against_off_per_scenario() -> None:
    rows = [
        _res(ROCKETQ, Scenario.CONCURRENT, 36_000.0),
        _res(ROCKETQ_NO_AUTO_BATCH, Scenario.CONCURRENT, 24_000.0),
        _res(ROCKETQ, Scenario.SYNC_SEND, 3_900.0),
        _res(ROCKETQ_NO_AUTO_BATCH, Scenario.SYNC_SEND, 4_000.0),
        _res(ROCKETQ, Scenario.E2E, 5_000.0, p99=2.0),
        _res(ROCKETQ_NO_AUTO_BATCH, Scenario.E2E, 5_000.0, p99=3.0),
        _res(ROCKETQ, Scenario.PRODUCE, 90_000.0),
        _res(ROCKETQ_NO_AUTO_BATCH, Scenario.PRODUCE, status=FAILED),
        _res("peer", Scenario.CONSUME, 50_000.0),  # neither rocketq ran it: no row
    ]
    ratios = {r.name: r for r in compute_auto_batch_ratios(rows)}
    assert set(ratios) == {"concurrent", "sync_send", "e2e_p99", "produce"}
    assert ratios["concurrent"].value == pytest.approx(1.5)
    assert ratios["sync_send"].value == pytest.approx(0.975)
    assert ratios["e2e_p99"].value == pytest.approx(1.5)  # off p99 / on p99
    assert ratios["produce"].value is None and ratios["produce"].off is None
    # Without the off variant there is nothing to compare.
    assert compute_auto_batch_ratios([r for r in rows if r.system != ROCKETQ_NO_AUTO_BATCH]) == []


def test_the_off_variant_is_never_the_best_peer() -> None:
    rows = [
        _res(ROCKETQ, Scenario.CONCURRENT, 30_000.0),
        _res(ROCKETQ_NO_AUTO_BATCH, Scenario.CONCURRENT, 50_000.0),
        _res("nats", Scenario.CONCURRENT, 20_000.0),
    ]
    concurrent = next(r for r in compute_ratios(rows) if r.name == "concurrent")
    assert concurrent.best_peer == "nats" and concurrent.value == pytest.approx(1.5)


def test_the_off_variant_follows_rocketq() -> None:
    peer = FakeSystem("peer")
    rocketq = RocketqSystem()
    systems = with_auto_batch_off([peer, rocketq, FakeSystem("other")])
    assert [s.name for s in systems] == ["peer", ROCKETQ, ROCKETQ_NO_AUTO_BATCH, "other"]
    off = systems[2]
    assert isinstance(off, RocketqSystem) and not off.auto_batch and rocketq.auto_batch
    driver = off.driver(ServerInfo("127.0.0.1:9876", "page-cache", ""), Durability.PAGE_CACHE)
    assert isinstance(driver, RocketqDriver) and driver.auto_batch is False
    with pytest.raises(ValueError, match="add rocketq"):
        with_auto_batch_off(make_systems(["redis"]))


def test_report_and_cli_print_on_against_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import rocketq.bench.peers.systems as systems
    from rocketq.cli.main import app

    made: list[list[str]] = []

    def fake_off(chosen: list[Any]) -> list[Any]:
        made.append([s.name for s in chosen])
        return [*chosen[:1], FakeSystem(ROCKETQ_NO_AUTO_BATCH), *chosen[1:]]

    monkeypatch.setattr(
        systems, "make_systems", lambda names: [FakeSystem(ROCKETQ), FakeSystem("peer")]
    )
    monkeypatch.setattr(systems, "with_auto_batch_off", fake_off)
    md = tmp_path / "peers.md"
    args = ["bench", "peers", "--duration", "0.2", "--rate", "300",
            "--scenarios", "sync_send,concurrent", "--json", "--markdown", str(md)]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--compare-auto-batch"])
    assert result.exit_code == 0, result.output
    assert made == [[ROCKETQ, "peer"]]
    doc = json.loads(result.output.strip().splitlines()[-1])
    assert set(doc["auto_batch_ratios"]) == {"sync_send", "concurrent"}
    assert all(v > 0 for v in doc["auto_batch_ratios"].values())
    assert doc["best_peers"]["concurrent"] == "peer"
    text = md.read_text()
    assert "| rocketq, natural batching | on | off | on against off |" in text
    assert "| on / off (concurrent) |" in text
    # Without the flag: no off variant, no on / off section.
    plain = CliRunner().invoke(app, args)
    assert plain.exit_code == 0 and len(made) == 1
    assert "auto_batch_ratios" not in json.loads(plain.output.strip().splitlines()[-1])
    assert "natural batching" not in md.read_text()


def test_cli_refuses_the_comparison_without_rocketq() -> None:
    from rocketq.cli.main import app

    result = CliRunner().invoke(
        app, ["bench", "peers", "--systems", "redis", "--compare-auto-batch"]
    )
    assert result.exit_code == 2 and "add rocketq" in result.output


def test_the_off_variant_sends_without_natural_batching(tmp_path: Path) -> None:
    """rocketq-no-auto-batch against a real nameserver and broker: its producer has no
    batcher, its concurrent scenario runs, and its servers are stopped by pid."""
    seen: dict[str, Any] = {}

    class Watched(RocketqDriver):
        async def close(self) -> None:
            if self._producer is not None:
                seen["auto_batch"] = self._producer.config.auto_batch
                seen["batcher"] = self._producer.batcher
            await super().close()

    class Off(RocketqSystem):
        def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
            info = super().start(durability, workdir, procs)
            seen["pids"] = info.pids
            seen["settings"] = info.settings
            return info

        def driver(self, server: ServerInfo, durability: Durability) -> Driver:
            return Watched(server.address, auto_batch=self.auto_batch)

    w = Workload(duration=0.3, scenarios=(Scenario.CONCURRENT,))
    report: Report = run_peers(
        PeerRunOptions(w, workdir=tmp_path), [Off(auto_batch=False)], lambda _line: None
    )
    row = report.results[0]
    assert row.system == ROCKETQ_NO_AUTO_BATCH and row.ok, row.note
    assert row.messages > w.in_flight
    assert seen["auto_batch"] is False and seen["batcher"] is None
    assert "auto_batch off" in seen["settings"]
    assert seen["pids"] and all(start_time(pid) is None for pid in seen["pids"])
    assert list(tmp_path.iterdir()) == []
