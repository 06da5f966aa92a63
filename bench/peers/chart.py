"""The PNG bar chart of a peer benchmark (matplotlib, the ``rocketq[chart]`` extra):
one panel per scenario, one bar per system, rocketq first."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

from rocketq.bench.peers.results import ROCKETQ, ROCKETQ_NO_AUTO_BATCH, Report

CHART_EXTRA: Final = "pip install 'rocketq[chart]'"
# (scenario, field, axis label)
PANELS: Final = (
    ("produce", "msgs_per_s", "produce: msgs/s (higher is better)"),
    ("consume", "msgs_per_s", "consume a backlog: msgs/s (higher is better)"),
    ("sync_send", "msgs_per_s", "one sender, one in flight: msgs/s (higher is better)"),
    ("concurrent", "msgs_per_s", "one producer, single sends in flight: msgs/s (higher is better)"),
    ("e2e", "p99_ms", "end to end p99 ms at a fixed rate (lower is better)"),
)

# rocketq red (natural batching off a lighter red), the peers grey.
_COLORS: Final = {ROCKETQ: "#d62728", ROCKETQ_NO_AUTO_BATCH: "#ff9896"}


class ChartUnavailableError(RuntimeError):
    """matplotlib is not installed."""


def panel_values(report: Report, scenario: str, field: str) -> list[tuple[str, float]]:
    """(system, value) of the systems that ran ``scenario``, in run order."""
    out: list[tuple[str, float]] = []
    for r in report.results:
        value = getattr(r, field)
        if r.scenario == scenario and r.ok and value is not None:
            out.append((r.system, float(value)))
    return out


def write_chart(report: Report, path: Path) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ChartUnavailableError(f"the chart needs matplotlib: {CHART_EXTRA}") from None
    columns = math.ceil(len(PANELS) / 2)
    fig, axes = plt.subplots(2, columns, figsize=(6 * columns, 8))
    for ax in axes.flat[len(PANELS) :]:
        ax.set_visible(False)
    for ax, (scenario, field, label) in zip(axes.flat, PANELS, strict=False):
        values = panel_values(report, scenario, field)
        names = [name for name, _ in values]
        colors = [_COLORS.get(name, "#7f7f7f") for name in names]
        bars = ax.bar(names, [v for _, v in values], color=colors)
        ax.bar_label(bars, fmt="{:,.0f}" if field == "msgs_per_s" else "{:.2f}")
        ax.set_title(label, fontsize=10)
    fig.suptitle(
        f"rocketq and peers, durability {report.durability}\n{report.workload}", fontsize=9
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
