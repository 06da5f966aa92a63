"""The PromQL of the committed dashboards and alert rules, ready to run on a real Prometheus.

``dashboard_queries()`` reads every target of every panel of ``deploy/k8s/grafana/*.json``
and puts a match-all value in place of each template variable; ``alert_measures()`` reads
``deploy/k8s/prometheus/rules.yml`` and splits each alert's ``MEASURE OP NUMBER`` so the
measure can be evaluated on its own. ``KNOWN_METRICS`` mirrors the metric catalog of the
broker and nameserver (the metrics the dashboards and rules may read), and
``metric_names()`` finds the metric names an expression reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import yaml

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD_DIR = ROOT / "deploy" / "k8s" / "grafana"
RULES_FILE = ROOT / "deploy" / "k8s" / "prometheus" / "rules.yml"
RULES_TEST_FILE = ROOT / "deploy" / "k8s" / "prometheus" / "rules_test.yml"

# What the broker and the nameserver export (the metric catalog): name -> type. The SDK's
# client-side metrics live in the application's registry, not on a broker's /metrics, so
# dashboards and rules cannot read them and they are not listed.
CATALOG: Final[dict[str, str]] = {
    # Broker, RocketMQ 5 names.
    "rocketmq_messages_in_total": "counter",
    "rocketmq_throughput_in_total": "counter",
    "rocketmq_message_size": "histogram",
    "rocketmq_messages_out_total": "counter",
    "rocketmq_throughput_out_total": "counter",
    "rocketmq_rpc_latency": "histogram",
    "rocketmq_consumer_lag_messages": "gauge",
    "rocketmq_consumer_lag_latency": "gauge",
    "rocketmq_consumer_inflight_messages": "gauge",
    "rocketmq_consumer_queueing_latency": "gauge",
    "rocketmq_consumer_ready_messages": "gauge",
    "rocketmq_send_to_dlq_messages_total": "counter",
    "rocketmq_producer_connections": "gauge",
    "rocketmq_consumer_connections": "gauge",
    "rocketmq_topic_number": "gauge",
    "rocketmq_consumer_group_number": "gauge",
    "rocketmq_storage_size": "gauge",
    "rocketmq_storage_flush_behind_bytes": "gauge",
    "rocketmq_storage_dispatch_behind_bytes": "gauge",
    "rocketmq_storage_message_reserve_time": "gauge",
    "rocketmq_half_messages": "gauge",
    "rocketmq_commit_messages_total": "counter",
    "rocketmq_rollback_messages_total": "counter",
    "rocketmq_broker_permission": "gauge",
    "rocketmq_processor_watermark": "gauge",
    # Broker, rocketq names.
    "rocketq_broker_ready": "gauge",
    "rocketq_broker_info": "gauge",
    "rocketq_storage_disk_total_bytes": "gauge",
    "rocketq_storage_disk_free_bytes": "gauge",
    "rocketq_ha_slave_lag_bytes": "gauge",
    "rocketq_ha_sync_wait_seconds": "histogram",
    "rocketq_raft_role": "gauge",
    "rocketq_raft_leader": "gauge",
    "rocketq_raft_term": "gauge",
    "rocketq_raft_commit_index": "gauge",
    "rocketq_raft_elections_total": "counter",
    "rocketq_raft_leader_changes_total": "counter",
    "rocketq_delay_backlog_messages": "gauge",
    "rocketq_timer_backlog_messages": "gauge",
    # Nameserver.
    "rocketq_nameserver_ready": "gauge",
    "rocketq_nameserver_brokers": "gauge",
    "rocketq_nameserver_topics": "gauge",
    "rocketq_nameserver_broker_registrations_total": "counter",
    "rocketq_nameserver_broker_expiries_total": "counter",
}

# The series names a query may use: histograms as their _bucket, _sum and _count series,
# plus the `up` series Prometheus writes for every scrape.
KNOWN_METRICS: Final[frozenset[str]] = frozenset(
    {"up"}
    | {name for name, kind in CATALOG.items() if kind != "histogram"}
    | {
        f"{name}{suffix}"
        for name, kind in CATALOG.items()
        if kind == "histogram"
        for suffix in ("_bucket", "_sum", "_count")
    }
)

# What each Grafana variable becomes when a query runs outside Grafana: a regex that
# matches any value (the queries filter with =~), and one minute for the intervals.
TEMPLATE_VALUES: Final[dict[str, str]] = {
    "cluster": ".+",
    "topic": ".+",
    "consumer_group": ".+",
    "__rate_interval": "1m",
    "__interval": "1m",
}

_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_COMPARISON = re.compile(r"==|!=|>=|<=|>|<")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")

# For metric_names(): what is not a metric name in an expression.
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.:])[A-Za-z_:][\w:]*")
_KEYWORDS: Final = frozenset(
    {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "atan2",
        "inf",
        "nan",
        # Aggregations written `sum by (x) (...)` have their label list removed first.
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    }
)


def substitute(expr: str) -> str:
    """``expr`` with each Grafana variable replaced by :data:`TEMPLATE_VALUES`; a variable it
    does not know raises ``KeyError`` naming it."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in TEMPLATE_VALUES:
            raise KeyError(f"template variable ${name} in {expr!r} has no value to test with")
        return TEMPLATE_VALUES[name]

    return _VARIABLE.sub(value, expr)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (not its functions, labels or keywords)."""
    text = _STRINGS.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _LABEL_LISTS.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function call
        if match.group().lower() in _KEYWORDS:
            continue
        names.add(match.group())
    return names


def load_dashboards(directory: Path = DASHBOARD_DIR) -> list[dict[str, Any]]:
    """The committed dashboards, in file name order."""
    return [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))]


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that is not a row, including the panels inside collapsed rows."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_queries() -> list[tuple[str, str]]:
    """``("<dashboard> / <panel>", expr)`` for every target of every panel, variables
    substituted; a panel with several targets names each by its refId."""
    queries = []
    for dashboard in load_dashboards():
        for panel in panels(dashboard):
            targets = [t for t in panel.get("targets", []) if t.get("expr")]
            for target in targets:
                title = f"{dashboard['title']} / {panel['title']}"
                if len(targets) > 1:
                    title += f" [{target['refId']}]"
                queries.append((title, substitute(target["expr"])))
    return queries


def load_alerts(path: Path = RULES_FILE) -> list[dict[str, Any]]:
    """The alerting rules of a rule file, in file order."""
    document = yaml.safe_load(path.read_text())
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


def _outermost(expr: str) -> str:
    """``expr`` with strings and everything inside (), [] and {} blanked out, so that what
    is left (at the same positions) is its outermost level."""
    text = _STRINGS.sub(lambda match: " " * len(match.group()), expr)
    out, depth = [], 0
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        out.append(char if depth == 0 and char not in ")]}" else " ")
    return "".join(out)


def split_comparison(expr: str) -> tuple[str, str, float]:
    """``MEASURE OP NUMBER`` -> (measure, op, number). ``ValueError`` unless the outermost
    level of ``expr`` holds exactly one comparison and a plain number follows it (a
    comparison inside parentheses, such as ``(x > bool 0)``, belongs to the measure)."""
    expr = expr.strip()
    comparisons = list(_COMPARISON.finditer(_outermost(expr)))
    if len(comparisons) != 1:
        raise ValueError(
            f"{expr!r} has {len(comparisons)} comparisons outside parentheses; an alert "
            "must be MEASURE OP NUMBER with exactly one"
        )
    comparison = comparisons[0]
    measure, number = expr[: comparison.start()].strip(), expr[comparison.end() :].strip()
    if not measure or not _NUMBER.fullmatch(number):
        raise ValueError(f"{expr!r} is not MEASURE OP NUMBER (the comparison must be last)")
    return measure, comparison.group(), float(number)


def alert_measures() -> list[tuple[str, str, str]]:
    """``(alert, expr, measure)`` for each alert of ``rules.yml``: the measure is the expr
    without its trailing ``OP NUMBER``."""
    out = []
    for rule in load_alerts():
        expr = str(rule["expr"]).strip()
        measure, _, _ = split_comparison(expr)
        out.append((rule["alert"], expr, measure))
    return out
