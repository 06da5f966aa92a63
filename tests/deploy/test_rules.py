"""The Prometheus alerting rules of deploy/k8s/prometheus/: valid for promtool, unit-tested
by rules_test.yml (each alert firing and silent), and every expr MEASURE OP NUMBER."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.system_deps import require_command
from tools.promql import (
    KNOWN_METRICS,
    RULES_FILE,
    RULES_TEST_FILE,
    alert_measures,
    load_alerts,
    metric_names,
    split_comparison,
)

ALERTS = [
    "RocketqBrokerDown",
    "RocketqNameserverDown",
    "RocketqBrokerNotReady",
    "RocketqRaftGroupWithoutLeader",
    "RocketqConsumerLagGrowing",
    "RocketqSlaveLagHigh",
    "RocketqDiskAlmostFull",
    "RocketqSendErrors",
    "RocketqDeadLetters",
]


@pytest.fixture(scope="module")
def promtool() -> str:
    # `promtool test rules` and the rule syntax of Prometheus 2.
    return require_command("promtool", minimum=2, package="prometheus")


def run(promtool: str, *args: str) -> None:
    done = subprocess.run(
        [promtool, *args], cwd=RULES_FILE.parent, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"


def test_promtool_checks_the_rules(promtool: str) -> None:
    run(promtool, "check", "rules", str(RULES_FILE))


def test_promtool_unit_tests_pass(promtool: str) -> None:
    run(promtool, "test", "rules", str(RULES_TEST_FILE))


def test_the_alerts() -> None:
    alerts = load_alerts()
    assert [rule["alert"] for rule in alerts] == ALERTS
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    assert [group["name"] for group in groups] == ["rocketq"]
    for rule in alerts:
        name = rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        assert set(rule["annotations"]) >= {"summary", "description"}, name
        for text in (rule["annotations"]["summary"], rule["annotations"]["description"]):
            assert "$labels." in text, f"{name}: {text!r} names nothing from its labels"
        unknown = metric_names(rule["expr"]) - KNOWN_METRICS
        assert not unknown, f"{name} reads {unknown}, not in the catalog"


def test_each_alert_fires_and_stays_silent_in_the_unit_tests() -> None:
    cases: dict[str, list[Any]] = {name: [] for name in ALERTS}
    for test in yaml.safe_load(RULES_TEST_FILE.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            assert case["alertname"] in cases, case["alertname"]
            cases[case["alertname"]].append(case.get("exp_alerts") or [])
    for name, expected in cases.items():
        assert any(alerts for alerts in expected), f"no case where {name} fires"
        assert any(not alerts for alerts in expected), f"no case where {name} stays silent"
        for alerts in expected:
            for alert in alerts:
                assert set(alert["exp_annotations"]) >= {"summary", "description"}, name
                assert "severity" in alert["exp_labels"], name


def test_alert_measures_split_every_alert() -> None:
    measures = alert_measures()
    assert [name for name, _, _ in measures] == ALERTS
    for name, expr, measure in measures:
        assert expr.startswith(measure) and len(measure) < len(expr), name
        assert metric_names(measure) == metric_names(expr), name
        with pytest.raises(ValueError):
            split_comparison(measure)  # no comparison is left outside parentheses
    by_name = {name: (expr, measure) for name, expr, measure in measures}
    assert by_name["RocketqBrokerDown"] == (
        'up{job="rocketq-broker"} == 0',
        'up{job="rocketq-broker"}',
    )
    assert by_name["RocketqDiskAlmostFull"][1] == (
        "1 - rocketq_storage_disk_free_bytes / rocketq_storage_disk_total_bytes"
    )


def test_split_comparison() -> None:
    assert split_comparison("x > 67108864") == ("x", ">", 67108864.0)
    assert split_comparison("sum by (a) (y) < 1") == ("sum by (a) (y)", "<", 1.0)
    assert split_comparison('(x{a!="b"} or (y > bool 0)) >= 0.5') == (
        '(x{a!="b"} or (y > bool 0))',
        ">=",
        0.5,
    )
    for bad in ("x", "x > y", "x > y > 0", "x > bool 0", "0 < x"):
        with pytest.raises(ValueError):
            split_comparison(bad)


def test_rule_files_are_found_from_the_test_file() -> None:
    tests = yaml.safe_load(RULES_TEST_FILE.read_text())
    assert [RULES_TEST_FILE.parent / f for f in tests["rule_files"]] == [Path(RULES_FILE)]
