"""The outputs of a chaos check: a JSON document, a short Markdown summary and a PNG chart of
throughput over time with the faults shaded (matplotlib, the ``rocketq[chart]`` extra). The
summary and the chart name the run's clients (:func:`run_protocol`): rocketq's SDK over the
remoting protocol, or RocketMQ 5's official client over the v2 gRPC endpoints.
Runs with the ``hostile`` fault add a section (:func:`hostile_json`,
:func:`render_hostile`): the legitimate clients' send latency inside and outside the
hostile windows, the servers' peak memory, server exits and what the neighbour sent."""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from rocketq.chaos.checker import CheckResult, broken_promises, nearest_rank
from rocketq.chaos.history import ChaosError, History

# Faults during which a server exit is expected (the fault stops it).
STOPPING_FAULTS: Final = frozenset({"kill-master", "kill-random", "kill-nameserver", "restart"})
MIB_IN_KIB: Final = 1024
CHART_EXTRA: Final = "pip install 'rocketq[chart]'"
CHART_SIZE_IN: Final = (11.0, 4.0)
CHART_DPI: Final = 100
# Fault bands, one colour per kind (none of them the lines' black and green).
FAULT_COLOURS: Final = (
    "tab:red",
    "tab:blue",
    "tab:orange",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "tab:gray",
)


def result_json(result: CheckResult) -> dict[str, Any]:
    """The result as one JSON-serialisable dict (what ``rocketq chaos check --json`` prints)."""
    loss = result.loss_window
    return {
        "history": result.history,
        "sent": result.sent,
        "acked": result.acked,
        "received": result.received,
        "receipts": result.receipts,
        "lost": result.lost,
        "duplicated": result.duplicated,
        "duplicate_rate": round(result.duplicate_rate, 6),
        "redeliveries": result.redeliveries,
        "unexpected": result.unexpected,
        "indeterminate": result.indeterminate,
        "indeterminate_received": result.indeterminate_received,
        "order_violations": result.order_violations,
        "faults": dict(result.faults),
        "failover_ms": {
            kind: {"p50": s.p50, "p99": s.p99, "max": s.max, "count": s.count}
            for kind, s in result.failover_ms.items()
        },
        "failover_missing": dict(result.failover_missing),
        "availability": round(result.availability, 3),
        "window_s": round(result.window_s, 3),
        "ok_seconds": round(result.ok_seconds, 4),
        "loss_window": None
        if loss is None
        else {"count": loss.count, "first_t": loss.first_t, "last_t": loss.last_t, "ms": loss.ms},
        "partial": result.partial,
        "partial_reason": result.partial_reason,
        "bad_lines": result.bad_lines,
        "security": result.security,
        "caught_up": result.caught_up,
        "caught_up_ms": result.caught_up_ms,
        "lagging": list(result.lagging),
    }


def _cell(value: object) -> str:
    """A Markdown table cell: "-" for None, pipes escaped."""
    return "-" if value is None else str(value).replace("|", "\\|")


def _clock(t: float, start: float) -> str:
    at = datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds")
    return f"{at} (+{t - start:.3f} s)"


def _counts(result: CheckResult) -> list[str]:
    rows = [
        ("sent", str(result.sent)),
        ("acknowledged", str(result.acked)),
        ("received", f"{result.received} ({result.receipts} receipts)"),
        ("lost", str(result.lost)),
        (
            "duplicated",
            f"{result.duplicated} ({result.duplicate_rate:.2%}; "
            f"{result.redeliveries} redeliveries)",
        ),
        ("unexpected", str(result.unexpected)),
        (
            "indeterminate (received)",
            f"{result.indeterminate} ({result.indeterminate_received})",
        ),
        ("order violations", str(result.order_violations)),
    ]
    return ["| | messages |", "|---|---:|", *(f"| {name} | {value} |" for name, value in rows)]


def _faults(result: CheckResult) -> list[str]:
    if not result.faults:
        return ["No faults were injected."]
    lines = [
        "| fault | count | failover p50 (ms) | p99 (ms) | max (ms) | missing |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, count in result.faults.items():
        stats = result.failover_ms.get(kind)
        p50, p99, top = (stats.p50, stats.p99, stats.max) if stats else (None, None, None)
        missing = result.failover_missing.get(kind, 0)
        lines.append(
            f"| {_cell(kind)} | {count} | {_cell(p50)} | {_cell(p99)} | {_cell(top)} | {missing} |"
        )
    lines += [
        "",
        "Failover: from a fault's start to the first SEND_OK of its broker group (of any "
        "group for a nameserver or consumer fault) for a send invoked after the fault "
        "started; *missing* faults were never followed by one.",
    ]
    return lines


def run_protocol(history: History) -> str | None:
    """The clients of the run (``remoting`` or ``v5``) from its ``run`` record's options;
    ``remoting`` for a run recorded before the option existed, None for a history without
    its ``run`` record."""
    for record in history.of_type("run"):
        config = record.get("config")
        if isinstance(config, dict):
            return str(config.get("protocol") or "remoting")
        return "remoting"
    return None


def protocol_text(protocol: str) -> str:
    """What a run's clients were, in words."""
    if protocol == "v5":
        return (
            "RocketMQ 5's official Python client (rocketmq-python-client) over the brokers' "
            "apache.rocketmq.v2 gRPC endpoints (`--protocol v5`)"
        )
    if protocol == "remoting":
        return "rocketq's SDK over RocketMQ's remoting protocol (`--protocol remoting`)"
    return f"`--protocol {protocol}`"


def security_text(security: dict[str, bool]) -> str:
    """What a run's cluster required of its clients, in words."""
    auth = "auth on (every client signed as the super user)" if security.get("auth") else "auth off"
    tls = "TLS on (every port enforcing it)" if security.get("tls") else "TLS off"
    return f"{auth}, {tls}"


def render_markdown(
    result: CheckResult, *, broken: list[str] | None = None, protocol: str | None = None
) -> str:
    """A short Markdown summary: the clients (``protocol``, :func:`run_protocol`), the
    counts, availability, faults with failover times, the loss window, warnings (partial
    history, unreadable lines) and the verdict. ``broken`` is the run's
    :func:`broken_promises`; without it the strictest promises are applied (no
    acknowledged message lost, none unexpected, order kept)."""
    if broken is None:
        broken = broken_promises(result, replication="raft", role="SYNC_MASTER", orderly=True)
    lines = [f"# Chaos check{f': {result.history}' if result.history else ''}", ""]
    if protocol is not None:
        lines += [f"Clients: {protocol_text(protocol)}.", ""]
    if result.security is not None:
        lines += [f"Cluster: {security_text(result.security)}.", ""]
    if result.partial:
        lines += [f"> **PARTIAL**: {result.partial_reason}", ""]
    lines += _counts(result)
    lines += [
        "",
        f"Availability: {result.availability:.1f} acknowledged msgs/s over a "
        f"{result.window_s:.1f} s workload window; {result.ok_seconds:.1%} of its seconds "
        "had an acknowledged send (ok seconds).",
        "",
        *_members(result),
        "## Faults",
        "",
        *_faults(result),
    ]
    loss = result.loss_window
    if loss is not None:
        lines += [
            "",
            "## Loss window",
            "",
            f"{loss.count} lost messages were acknowledged within {loss.ms} ms: from "
            f"{_clock(loss.first_t, result.start_t)} to {_clock(loss.last_t, result.start_t)}.",
        ]
        if result.lost_keys:
            lines.append(f"First lost keys: {', '.join(result.lost_keys)}.")
    if result.bad_lines:
        where = "; ".join(f"line {n}: {reason}" for n, reason in result.bad_line_samples)
        more = ", ..." if result.bad_lines > len(result.bad_line_samples) else ""
        lines += ["", f"**Unreadable lines**: {result.bad_lines} ({where}{more})."]
    lines.append("")
    if broken:
        count = f"{len(broken)} broken promise{'s' if len(broken) > 1 else ''}"
        lines += [f"**Verdict**: {count}:", "", *(f"- {sentence}" for sentence in broken)]
    else:
        lines.append("**Verdict**: all promises kept.")
    return "\n".join(lines) + "\n"


def _members(result: CheckResult) -> list[str]:
    """The sentence on the members' final offsets (nothing for a history without the
    check)."""
    if result.caught_up is None:
        return []
    if result.caught_up:
        waited = f"{(result.caught_up_ms or 0) / 1000:.1f} s"
        return [
            "Members: every member held what its leader or master held "
            f"{waited} after the producers stopped.",
            "",
        ]
    return [f"Members: **not caught up**: {'; '.join(result.lagging)}.", ""]


def fault_spans(history: History, end: float) -> list[tuple[str, float, float]]:
    """(kind, start, end) of each fault: a ``fault_start`` ends at the first unmatched
    ``fault_end`` of the same (fault, target) after it, or at ``end`` if none."""
    open_faults: dict[tuple[str, str], list[int]] = {}
    spans: list[tuple[str, float, float]] = []
    for record in history.records:
        type_ = record["type"]
        if type_ not in ("fault_start", "fault_end"):
            continue
        key = (str(record.get("fault")), str(record.get("target")))
        t = float(record["t"])
        if type_ == "fault_start":
            open_faults.setdefault(key, []).append(len(spans))
            spans.append((key[0], t, end))
        elif open_faults.get(key):
            number = open_faults[key].pop(0)
            spans[number] = (spans[number][0], spans[number][1], t)
    return spans


def per_second(history: History, start: float) -> tuple[dict[int, int], dict[int, int]]:
    """Acknowledged messages (keys of ``send_ok`` records) and receipts (``receive``
    records) per whole second since ``start``."""
    acked: dict[int, int] = {}
    receipts: dict[int, int] = {}
    for record in history.records:
        type_ = record["type"]
        if type_ == "send_ok":
            second = math.floor(float(record["t"]) - start)
            keys = record.get("keys")
            acked[second] = acked.get(second, 0) + (len(keys) if isinstance(keys, list) else 0)
        elif type_ == "receive":
            second = math.floor(float(record["t"]) - start)
            receipts[second] = receipts.get(second, 0) + 1
    return acked, receipts


def write_chart(history: History, result: CheckResult, path: str | os.PathLike[str]) -> None:
    """A PNG of acknowledged messages and receipts per second since the run start, each
    fault shaded from its start to its end (one colour per kind) and each measured failover
    marked where the fault's group next acknowledged a send."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ChaosError(f"the chart needs matplotlib: {CHART_EXTRA}") from None
    start = result.start_t
    last_t = float(history.records[-1]["t"]) if history.records else start
    acked, receipts = per_second(history, start)
    first = min([0, *acked, *receipts])
    last = max([math.floor(last_t - start), *acked, *receipts])
    seconds = list(range(first, last + 2))  # each count drawn as a step over its second
    fig, ax = plt.subplots(figsize=CHART_SIZE_IN)
    try:
        for counts, label, colour in (
            (acked, "acknowledged msgs/s", "black"),
            (receipts, "receipts/s", "tab:green"),
        ):
            values = [counts.get(s, 0) for s in seconds]
            ax.plot(seconds, values, drawstyle="steps-post", color=colour, label=label)
        colours = {
            kind: FAULT_COLOURS[i % len(FAULT_COLOURS)] for i, kind in enumerate(result.faults)
        }
        labelled: set[str] = set()
        for kind, begin, end in fault_spans(history, last_t):
            colour = colours.setdefault(kind, FAULT_COLOURS[len(colours) % len(FAULT_COLOURS)])
            ax.axvspan(
                begin - start,
                max(end, begin) - start,
                color=colour,
                alpha=0.2,
                label=None if kind in labelled else kind,
            )
            labelled.add(kind)
        measured = [(f, f.ms) for f in result.failovers if f.ms is not None]
        for number, (failover, ms) in enumerate(measured):
            ax.plot(
                [failover.t - start + ms / 1000],
                [0.97],
                marker="v",
                linestyle="none",
                color=colours.get(failover.kind, "black"),
                markeredgecolor="black",
                transform=ax.get_xaxis_transform(),
                label="failover (next acknowledged send)" if number == 0 else None,
            )
        partial = " (PARTIAL)" if result.partial else ""
        clients = " with v5 clients" if run_protocol(history) == "v5" else ""
        ax.set_title(
            f"chaos run{clients}{partial}: {result.acked} acknowledged, {result.lost} lost, "
            f"{result.duplicated} duplicated",
            fontsize=10,
        )
        ax.set_xlabel("seconds since the run start")
        ax.set_ylabel("messages per second")
        ax.set_ylim(bottom=0)
        ax.set_xlim(first, last + 1)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
        fig.tight_layout()
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=CHART_DPI, format="png")
    finally:
        plt.close(fig)


# ---------------------------------------------------------------- the hostile section


def send_latencies(history: History) -> list[tuple[float, float, bool]]:
    """(invoked at, ms to its answer, SEND_OK or not) of every send that was answered or
    timed out."""
    invoked: dict[tuple[str, int], float] = {}
    out: list[tuple[float, float, bool]] = []
    for record in history.records:
        type_ = record["type"]
        if type_ not in ("send", "send_ok", "send_failed", "send_timeout"):
            continue
        key = (str(record.get("process")), int(record.get("op") or 0))
        t = float(record["t"])
        if type_ == "send":
            invoked[key] = t
        elif key in invoked:
            begin = invoked.pop(key)
            out.append((begin, (t - begin) * 1000, type_ == "send_ok"))
    return out


def _latency(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    return {
        "count": len(ordered),
        "p50": round(nearest_rank(ordered, 50), 1),
        "p99": round(nearest_rank(ordered, 99), 1),
        "max": round(ordered[-1], 1),
    }


def _inside(t: float, spans: list[tuple[str, float, float]]) -> bool:
    return any(begin <= t <= end for _kind, begin, end in spans)


def hostile_json(history: History) -> dict[str, Any] | None:
    """For a run with the ``hostile`` fault (None otherwise): ``windows`` and
    ``window_s`` (its count and seconds), ``send_ms`` - p50/p99/max of the legitimate
    sends answered SEND_OK, invoked ``inside`` a hostile window or ``outside`` every fault
    window - ``send_failed`` (failed or timed-out sends, inside and outside), the servers'
    ``peak_rss_mib`` (node -> its largest VmHWM), ``server_exits`` (each with the fault
    in progress, and ``unexpected_exits``: those outside a fault that stops nodes) and
    ``traffic`` (what the neighbour sent, summed over its windows), ``peak_sockets`` and
    ``ports`` (``node:kind:port`` of each port it sent to)."""
    records = history.records
    last_t = float(records[-1]["t"]) if records else 0.0
    spans = fault_spans(history, last_t)
    hostile = [s for s in spans if s[0] == "hostile"]
    if not hostile:
        return None
    inside: list[float] = []
    outside: list[float] = []
    failed = {"inside": 0, "outside": 0}
    for begin, ms, ok in send_latencies(history):
        where = "inside" if _inside(begin, hostile) else None
        if where is None and not _inside(begin, spans):
            where = "outside"
        if where is None:
            continue
        if not ok:
            failed[where] += 1
        else:
            (inside if where == "inside" else outside).append(ms)
    peaks: dict[str, float] = {}
    for record in history.of_type("server_memory"):
        node = str(record.get("node"))
        hwm = float(record.get("hwm_kib") or 0) / MIB_IN_KIB
        peaks[node] = round(max(peaks.get(node, 0.0), hwm), 1)
    exits = []
    for record in history.of_type("server_exit"):
        t = float(record["t"])
        during = [kind for kind, begin, end in spans if begin <= t <= end + 1.0]
        exits.append(
            {
                "node": record.get("node"),
                "pid": record.get("pid"),
                "returncode": record.get("returncode"),
                "t": t,
                "during": during,
                "expected": any(kind in STOPPING_FAULTS for kind in during),
            }
        )
    traffic: dict[str, dict[str, int]] = {}
    ports: set[str] = set()
    peak_sockets = 0
    errors: list[str] = []
    for record in history.of_type("fault_end"):
        detail = record.get("detail")
        if record.get("fault") != "hostile" or not isinstance(detail, dict):
            continue
        peak_sockets = max(peak_sockets, int(detail.get("peak_sockets") or 0))
        ports.update(str(p) for p in detail.get("ports") or ())
        errors += [str(e) for e in detail.get("errors") or ()]
        for kind, counts in (detail.get("traffic") or {}).items():
            into = traffic.setdefault(kind, {})
            for name, value in counts.items():
                into[name] = into.get(name, 0) + int(value)
    return {
        "windows": len(hostile),
        "window_s": round(sum(end - begin for _k, begin, end in hostile), 3),
        "send_ms": {"inside": _latency(inside), "outside": _latency(outside)},
        "send_failed": failed,
        "peak_rss_mib": dict(sorted(peaks.items())),
        "server_exits": exits,
        "unexpected_exits": sum(1 for e in exits if not e["expected"]),
        "traffic": traffic,
        "peak_sockets": peak_sockets,
        "ports": sorted(ports),
        "errors": errors[:10],
    }


def render_hostile(summary: dict[str, Any]) -> str:
    """The Markdown section of :func:`hostile_json`'s summary."""
    ms = summary["send_ms"]
    failed = summary["send_failed"]
    lines = [
        "## Hostile traffic",
        "",
        f"{summary['windows']} hostile window(s), {summary['window_s']:.1f} s in all; at most "
        f"{summary['peak_sockets']} hostile sockets open at once.",
        "",
        "| legitimate sends | count | p50 (ms) | p99 (ms) | max (ms) | failed or timed out |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for where, label in (("inside", "inside hostile windows"), ("outside", "outside faults")):
        s = ms[where]
        lines.append(
            f"| {label} | {s['count']} | {_cell(s['p50'])} | {_cell(s['p99'])} | "
            f"{_cell(s['max'])} | {failed[where]} |"
        )
    lines += ["", "| server | peak RSS (VmHWM, MiB) |", "|---|---:|"]
    lines += [f"| {_cell(node)} | {mib:.1f} |" for node, mib in summary["peak_rss_mib"].items()]
    if summary["traffic"]:
        lines += [
            "",
            "| hostile traffic | connects | refused | sends | bytes | answers | closed by server |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for kind, c in summary["traffic"].items():
            lines.append(
                f"| {kind} | {c.get('connects', 0)} | {c.get('connect_errors', 0)} | "
                f"{c.get('sends', 0)} | {c.get('bytes_sent', 0)} | {c.get('answers', 0)} | "
                f"{c.get('closed_by_peer', 0)} |"
            )
        handshakes = sum(c.get("tls_handshakes", 0) for c in summary["traffic"].values())
        failures = sum(c.get("tls_failures", 0) for c in summary["traffic"].values())
        if handshakes or failures:
            lines += [
                "",
                f"Over TLS: {handshakes} hostile connections completed a handshake before "
                f"sending ({failures} handshakes failed); the rest met the ports' TLS "
                "refusal in plaintext.",
            ]
    lines.append("")
    unexpected = [e for e in summary["server_exits"] if not e["expected"]]
    if unexpected:
        lines.append(
            "**Servers exited outside a fault that stops them**: "
            + ", ".join(
                f"{e['node']} (pid {e['pid']}, exit code {_cell(e['returncode'])}, during "
                f"{', '.join(e['during']) or 'no fault'})"
                for e in unexpected
            )
            + "."
        )
    else:
        lines.append("No server exited outside a fault that stops it.")
    return "\n".join(lines) + "\n"


def hostile_broken(summary: dict[str, Any] | None) -> list[str]:
    """The promise a hostile run adds: no server exits unless a fault stops it."""
    if not summary or not summary["unexpected_exits"]:
        return []
    names = sorted({str(e["node"]) for e in summary["server_exits"] if not e["expected"]})
    n = summary["unexpected_exits"]
    return [
        f"{n} server process{'es' if n > 1 else ''} exited with no fault stopping it: "
        + ", ".join(names)
    ]
