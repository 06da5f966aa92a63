"""The outputs of a chaos check: the JSON document's keys, the Markdown summary's figures
and verdict, the fault bands of the chart and the PNG itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rocketq.chaos.checker import broken_promises, check
from rocketq.chaos.history import ChaosError, read_history
from rocketq.chaos.report import (
    fault_spans,
    per_second,
    render_markdown,
    result_json,
    write_chart,
)
from tests.chaos.test_checker import T0, Run, clean_run

JSON_KEYS = {
    "acked",
    "lost",
    "duplicated",
    "unexpected",
    "indeterminate",
    "order_violations",
    "faults",
    "failover_ms",
    "availability",
    "history",
    "sent",
    "received",
    "receipts",
    "duplicate_rate",
    "redeliveries",
    "indeterminate_received",
    "failover_missing",
    "window_s",
    "ok_seconds",
    "loss_window",
    "partial",
    "partial_reason",
    "bad_lines",
    "security",
    "caught_up",
    "caught_up_ms",
    "lagging",
}


def eventful_run() -> Run:
    """Faults with failovers (one missing), a loss, a duplicate, an unexpected receipt and
    an indeterminate send."""
    run = Run()
    run.sent_ok(0.5, "p1-0").sent_ok(1.5, "p1-1", group="g2")
    run.fault(2.0, "kill_master", "broker-g1-0", "g1")
    run.sent_ok(2.1, "p1-2", group="g2")
    run.sent_ok(2.4, "p1-3", group="g1")  # 400 ms after the kill
    run.heal(3.0, "kill_master", "broker-g1-0", "g1")
    run.fault(3.5, "pause_broker", "broker-g2-0", "g2")
    run.send(3.6, "p1-4").add("send_timeout", 6.6, process="p1", op=4, keys=["p1-4"], error="t")
    run.heal(4.0, "pause_broker", "broker-g2-0", "g2")
    run.sent_ok(4.5, "p1-5", group="g1")
    for key in ("p1-0", "p1-1", "p1-2", "p1-2", "p1-5", "p1-4", "ghost-1"):
        run.receive(5.0, key)
    return run.finish(7.0)


def test_result_json_has_the_documented_keys_and_serialises() -> None:
    result = eventful_run().check()
    doc = result_json(result)
    assert set(doc) == JSON_KEYS
    assert json.loads(json.dumps(doc)) == doc
    assert (doc["acked"], doc["lost"], doc["duplicated"], doc["unexpected"]) == (5, 1, 1, 1)
    assert (doc["indeterminate"], doc["indeterminate_received"]) == (1, 1)
    assert doc["faults"] == {"kill_master": 1, "pause_broker": 1}
    assert doc["failover_ms"]["kill_master"] == {"p50": 400, "p99": 400, "max": 400, "count": 1}
    assert doc["failover_ms"]["pause_broker"] == {
        "p50": None,
        "p99": None,
        "max": None,
        "count": 0,
    }
    assert doc["failover_missing"] == {"kill_master": 0, "pause_broker": 1}
    assert doc["loss_window"] == {"count": 1, "first_t": T0 + 2.4, "last_t": T0 + 2.4, "ms": 0}
    assert doc["history"] == "history.jsonl"
    assert doc["partial"] is False and doc["partial_reason"] is None


def test_result_json_of_a_clean_run() -> None:
    doc = result_json(clean_run().check())
    assert set(doc) == JSON_KEYS
    assert doc["lost"] == doc["duplicated"] == doc["order_violations"] == 0
    assert doc["loss_window"] is None and doc["failover_ms"] == {} and doc["faults"] == {}
    assert doc["availability"] == pytest.approx(4 / 5)


def test_markdown_of_a_clean_run() -> None:
    text = render_markdown(clean_run().check())
    assert "**Verdict**: all promises kept." in text
    assert "| acknowledged | 4 |" in text
    assert "| lost | 0 |" in text
    assert "No faults were injected." in text
    assert "PARTIAL" not in text and "Loss window" not in text and "Unreadable" not in text


@pytest.mark.parametrize(
    ("config", "security", "said"),
    [
        ({"auth": True, "tls": True}, {"auth": True, "tls": True}, "auth on (every client"),
        ({"auth": False, "tls": True}, {"auth": False, "tls": True}, "auth off, TLS on"),
        ({"replication": "raft"}, {"auth": False, "tls": False}, "auth off, TLS off"),
    ],
)
def test_the_report_says_whether_auth_and_tls_were_on(
    config: dict[str, object], security: dict[str, bool], said: str
) -> None:
    run = Run()
    run.records[0]["config"] = {"replication": "raft", **config}
    result = run.sent_ok(1.0, "a").receive(1.5, "a").finish(2.0).check()
    assert result.security == security
    assert result_json(result)["security"] == security
    text = render_markdown(result, broken=[])
    assert f"Cluster: {said}" in text


def test_a_history_without_its_run_record_says_nothing_of_security() -> None:
    run = Run()
    run.records.pop(0)
    result = run.sent_ok(1.0, "a").receive(1.5, "a").finish(2.0).check()
    assert result.security is None and "Cluster:" not in render_markdown(result, broken=[])


def test_markdown_has_the_figures() -> None:
    result = eventful_run().check()
    broken = broken_promises(result, replication="raft", role="", orderly=False)
    text = render_markdown(result, broken=broken)
    assert text.startswith("# Chaos check: history.jsonl\n")
    assert "| acknowledged | 5 |" in text
    assert "| received | 6 (7 receipts) |" in text
    assert "| lost | 1 |" in text
    assert "| duplicated | 1 (16.67%; 1 redeliveries) |" in text
    assert "| unexpected | 1 |" in text
    assert "| indeterminate (received) | 1 (1) |" in text
    assert "| order violations | 0 |" in text
    assert "| kill_master | 1 | 400 | 400 | 400 | 0 |" in text
    assert "| pause_broker | 1 | - | - | - | 1 |" in text
    assert "0.7 acknowledged msgs/s over a 7.0 s workload window" in text  # 5 acks
    assert "57.1% of its seconds" in text  # acks in seconds 0, 1, 2 and 4 of 7
    assert "## Loss window" in text and "p1-3" in text
    assert "**Verdict**: 2 broken promises:" in text
    assert "- 1 acknowledged message was lost (e.g. p1-3)" in text
    assert "- 1 received message was never sent (e.g. ghost-1)" in text


def test_markdown_of_an_async_master_run_keeps_its_promises_but_shows_the_loss() -> None:
    run = Run().sent_ok(1.0, "a").sent_ok(1.2, "b").receive(2.0, "a")
    result = run.finish(3.0).check()
    broken = broken_promises(result, replication="ha", role="ASYNC_MASTER", orderly=False)
    text = render_markdown(result, broken=broken)
    assert "**Verdict**: all promises kept." in text
    assert "1 lost messages were acknowledged within 0 ms" in text
    # without the run's mode the strictest promises apply
    assert "1 acknowledged message was lost" in render_markdown(result)


def test_markdown_warns_of_a_partial_history_and_bad_lines(tmp_path: Path) -> None:
    run = Run().sent_ok(1.0, "a").phase(2.0, "faults_stopped", "recovered")
    path = run.write(tmp_path / "history.jsonl")
    with path.open("a", encoding="utf-8") as f:
        f.write('{"t": 1, "type": "nonsense"}\n{"t": 17000')
    result = check(read_history(path), str(path))
    assert result.bad_lines == 2
    text = render_markdown(result, broken=[])
    assert "> **PARTIAL**: " in text and "'recovered'" in text and "not received yet" in text
    assert "**Unreadable lines**: 2 (line 6: unknown record type 'nonsense'; line 7: not JSON" in (
        text
    )


def test_fault_spans_match_ends_by_fault_and_target() -> None:
    run = Run()
    run.fault(1.0, "kill_master", "b0", "g1").fault(1.5, "kill_master", "b1", "g2")
    run.heal(2.0, "kill_master", "b1", "g2")  # ends the fault of b1, not the first one
    run.fault(2.5, "kill_master", "b1", "g2")
    run.heal(3.0, "kill_master", "b0", "g1")
    run.heal(3.5, "pause_broker", "b0", "g1")  # no such fault: ignored
    run.fault(4.0, "partition", "b0", "g1").add("phase", 9.0, phase="done")
    spans = [(kind, a - T0, b - T0) for kind, a, b in fault_spans(run.history(), T0 + 9.0)]
    assert spans == [
        ("kill_master", 1.0, 3.0),
        ("kill_master", 1.5, 2.0),
        ("kill_master", 2.5, 9.0),
        ("partition", 4.0, 9.0),
    ]


def test_per_second_counts_acked_keys_and_receipts() -> None:
    run = Run().sent_ok(0.2, "a", "b", "c").sent_ok(0.9, "d").sent_ok(2.5, "e")
    run.receive(0.5, "a").receive(1.5, "b").receive(1.6, "b")
    acked, receipts = per_second(run.history(), T0)
    assert acked == {0: 4, 2: 1}
    assert receipts == {0: 1, 1: 2}


def test_write_chart_writes_a_png(tmp_path: Path) -> None:
    run = eventful_run()
    run.fault(6.8, "kill_nameserver", "namesrv-0", None)  # never healed: shaded to the end
    history = run.history()
    result = check(history)
    path = tmp_path / "charts" / "chaos.png"
    write_chart(history, result, path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_write_chart_of_an_empty_history(tmp_path: Path) -> None:
    run = Run()
    path = tmp_path / "empty.png"
    write_chart(run.history(), run.check(), path)
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_write_chart_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    run = clean_run()
    with pytest.raises(ChaosError, match=r"pip install 'rocketq\[chart\]'"):
        write_chart(run.history(), run.check(), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
