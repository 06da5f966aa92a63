"""Results of a peer benchmark: one row per system and scenario, the ratios of rocketq to
the best peer (and, when rocketq also ran with its producer's natural batching off, of
rocketq with it on to off), a Markdown table for people and one JSON line for scripts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Final

from rocketq.bench.peers.workload import Scenario

ROCKETQ: Final = "rocketq"
# rocketq with the producer's natural batching (auto_batch) off: not a peer, the other side
# of the on / off ratios.
ROCKETQ_NO_AUTO_BATCH: Final = "rocketq-no-auto-batch"
ROCKETQ_SYSTEMS: Final = frozenset({ROCKETQ, ROCKETQ_NO_AUTO_BATCH})
OK: Final = "ok"
MISSING: Final = "missing"  # could not run here (not installed, unavailable)
FAILED: Final = "failed"  # started but the scenario raised
# ratio name -> (scenario, field, higher is better)
RATIOS: Final = {
    "produce": (Scenario.PRODUCE, "msgs_per_s", True),
    "consume": (Scenario.CONSUME, "msgs_per_s", True),
    "sync_send": (Scenario.SYNC_SEND, "msgs_per_s", True),
    "concurrent": (Scenario.CONCURRENT, "msgs_per_s", True),
    "e2e_p99": (Scenario.E2E, "p99_ms", False),
}


@dataclass(frozen=True)
class ScenarioResult:
    system: str
    scenario: str
    msgs_per_s: float = 0.0
    mb_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    durability: str = ""
    status: str = OK
    messages: int = 0
    elapsed_s: float = 0.0
    matches_class: bool = True  # False: the system could not do the asked durability
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_json(self) -> dict[str, object]:
        doc = asdict(self)
        for key in ("msgs_per_s", "mb_s", "p50_ms", "p99_ms", "p999_ms", "elapsed_s"):
            if isinstance(doc[key], float):
                doc[key] = round(doc[key], 3)
        return doc


@dataclass(frozen=True)
class Ratio:
    """rocketq against the best peer for one scenario (>= 1.0: rocketq is ahead)."""

    name: str
    value: float | None  # None: rocketq or every peer missing
    best_peer: str | None
    rocketq: float | None
    peer: float | None


@dataclass(frozen=True)
class AutoBatchRatio:
    """rocketq with natural batching on against off for one scenario (>= 1.0: on is no
    worse). Throughput: on / off; e2e p99: off / on."""

    name: str
    value: float | None  # None: either side missing, failed or zero
    on: float | None
    off: float | None


@dataclass
class Report:
    durability: str
    workload: str
    results: list[ScenarioResult] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # system -> why

    def add(self, result: ScenarioResult) -> None:
        self.results.append(result)

    def ratios(self) -> list[Ratio]:
        return compute_ratios(self.results)

    def auto_batch_ratios(self) -> list[AutoBatchRatio]:
        """On / off per scenario; empty when rocketq did not also run with it off."""
        return compute_auto_batch_ratios(self.results)

    def to_json(self) -> dict[str, object]:
        ratios = self.ratios()
        doc: dict[str, object] = {
            "bench": "peers",
            "durability": self.durability,
            "workload": self.workload,
            "results": [r.to_json() for r in self.results],
            "ratios": {r.name: None if r.value is None else round(r.value, 3) for r in ratios},
            "best_peers": {r.name: r.best_peer for r in ratios},
            "missing": dict(self.missing),
        }
        if on_off := self.auto_batch_ratios():
            doc["auto_batch_ratios"] = {
                r.name: None if r.value is None else round(r.value, 3) for r in on_off
            }
        return doc

    def json_line(self) -> str:
        return json.dumps(self.to_json(), separators=(", ", ": "))

    def markdown(self) -> str:
        lines = [*markdown_table(self.results), "", *markdown_ratios(self.ratios())]
        if on_off := self.auto_batch_ratios():
            lines += ["", *markdown_auto_batch(on_off)]
        return "\n".join(lines)


def compute_ratios(results: Iterable[ScenarioResult]) -> list[Ratio]:
    """For each ratio: rocketq's figure against the best peer that ran the scenario at the
    asked durability class. Throughput: rocketq / best peer; p99: best peer / rocketq."""
    rows = list(results)
    out: list[Ratio] = []
    for name, (scenario, key, higher) in RATIOS.items():
        ours = _figure(rows, ROCKETQ, scenario, key)
        peers = {
            r.system: v
            for r in rows
            if r.system not in ROCKETQ_SYSTEMS and r.scenario == scenario and r.ok
            if r.matches_class
            if (v := _value(r, key)) is not None and v > 0
        }
        if not peers:
            out.append(Ratio(name, None, None, ours, None))
            continue
        best = max(peers, key=peers.__getitem__) if higher else min(peers, key=peers.__getitem__)
        peer = peers[best]
        if ours is None or ours <= 0:
            out.append(Ratio(name, None, best, ours, peer))
            continue
        out.append(Ratio(name, ours / peer if higher else peer / ours, best, ours, peer))
    return out


def compute_auto_batch_ratios(results: Iterable[ScenarioResult]) -> list[AutoBatchRatio]:
    """For each ratio whose scenario rocketq ran both ways: natural batching on against
    off (throughput: on / off; p99: off / on, so >= 1.0 always means on is no worse).
    Empty when rocketq did not run with it off."""
    rows = list(results)
    if not any(r.system == ROCKETQ_NO_AUTO_BATCH for r in rows):
        return []
    out: list[AutoBatchRatio] = []
    for name, (scenario, key, higher) in RATIOS.items():
        if not any(r.scenario == scenario for r in rows if r.system in ROCKETQ_SYSTEMS):
            continue
        on = _figure(rows, ROCKETQ, scenario, key)
        off = _figure(rows, ROCKETQ_NO_AUTO_BATCH, scenario, key)
        value = None
        if on is not None and off is not None and on > 0 and off > 0:
            value = on / off if higher else off / on
        out.append(AutoBatchRatio(name, value, on, off))
    return out


def _value(r: ScenarioResult, key: str) -> float | None:
    value = getattr(r, key)
    return None if value is None else float(value)


def _figure(rows: Sequence[ScenarioResult], system: str, scenario: str, key: str) -> float | None:
    for r in rows:
        if r.system == system and r.scenario == scenario and r.ok:
            return _value(r, key)
    return None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown_table(results: Sequence[ScenarioResult]) -> list[str]:
    lines = [
        "| system | scenario | msgs/s | MB/s | p50 ms | p99 ms | p999 ms | durability |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if not r.ok:
            lines.append(
                f"| {r.system} | {r.scenario} | {r.status} | - | - | - | - | "
                f"{r.durability or '-'}{': ' + r.note if r.note else ''} |"
            )
            continue
        lines.append(
            f"| {r.system} | {r.scenario} | {r.msgs_per_s:,.0f} | {r.mb_s:,.1f} | "
            f"{_ms(r.p50_ms)} | {_ms(r.p99_ms)} | {_ms(r.p999_ms)} | {r.durability} |"
        )
    return lines


def markdown_ratios(ratios: Sequence[Ratio]) -> list[str]:
    lines = ["| ratio | rocketq | best peer | value |", "|---|---:|---|---:|"]
    for r in ratios:
        unit = " ms" if r.name == "e2e_p99" else " msgs/s"
        ours = "missing" if r.rocketq is None else f"{r.rocketq:,.2f}{unit}"
        peer = "none ran" if r.best_peer is None else f"{r.best_peer} {r.peer or 0:,.2f}{unit}"
        value = "-" if r.value is None else f"{r.value:.2f}x"
        label = "best peer / rocketq p99" if r.name == "e2e_p99" else f"rocketq / best ({r.name})"
        lines.append(f"| {label} | {ours} | {peer} | {value} |")
    return lines


def markdown_auto_batch(ratios: Sequence[AutoBatchRatio]) -> list[str]:
    lines = [
        "| rocketq, natural batching | on | off | on against off |",
        "|---|---:|---:|---:|",
    ]
    for r in ratios:
        unit = " ms" if r.name == "e2e_p99" else " msgs/s"
        on = "-" if r.on is None else f"{r.on:,.2f}{unit}"
        off = "-" if r.off is None else f"{r.off:,.2f}{unit}"
        value = "-" if r.value is None else f"{r.value:.2f}x"
        label = "off / on p99" if r.name == "e2e_p99" else f"on / off ({r.name})"
        lines.append(f"| {label} | {on} | {off} | {value} |")
    return lines
