"""The Grafana dashboards of deploy/k8s/grafana/: what `tools/gen_dashboards.py` makes,
importable into any Grafana with a Prometheus data source, and reading only the metric
catalog."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.gen_dashboards import DASHBOARDS, OUT_DIR, main, render, stale
from tools.promql import (
    KNOWN_METRICS,
    TEMPLATE_VALUES,
    dashboard_queries,
    load_dashboards,
    metric_names,
    panels,
    substitute,
)

UIDS = {"rocketq-overview", "rocketq-topic", "rocketq-group"}
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")


def walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a JSON document, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict[str, Any]]:
    return {d["uid"]: d for d in load_dashboards()}


def test_committed_dashboards_are_what_the_generator_makes() -> None:
    for name, text in render().items():
        committed = (OUT_DIR / name).read_text()
        assert committed == text, (
            f"deploy/k8s/grafana/{name} is stale: run `python tools/gen_dashboards.py`"
        )
    assert main(["--check"]) == 0


def test_check_names_the_file_that_differs(tmp_path: Path) -> None:
    assert sorted(p.name for p in stale(tmp_path)) == sorted(DASHBOARDS)  # none written yet
    for name, text in render().items():
        (tmp_path / name).write_text(text)
    assert stale(tmp_path) == []
    (tmp_path / "rocketq-topic.json").write_text("{}\n")
    assert stale(tmp_path) == [tmp_path / "rocketq-topic.json"]


def test_the_dashboards_have_stable_uids(dashboards: dict[str, dict[str, Any]]) -> None:
    assert set(dashboards) == UIDS
    assert {path.name for path in OUT_DIR.glob("*.json")} == set(DASHBOARDS)


def test_the_data_source_is_a_variable_never_a_fixed_uid(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    for uid, dashboard in dashboards.items():
        datasource = variables(dashboard)["datasource"]
        assert (datasource["type"], datasource["query"]) == ("datasource", "prometheus"), uid
        refs = [value for key, value in walk(dashboard) if key == "datasource"]
        assert refs, uid
        for ref in refs:
            assert ref == {"type": "prometheus", "uid": "${datasource}"}, (uid, ref)


def test_the_template_variables(dashboards: dict[str, dict[str, Any]]) -> None:
    for uid, dashboard in dashboards.items():
        cluster = variables(dashboard)["cluster"]
        assert cluster["query"] == "label_values(rocketmq_topic_number, cluster)", uid
        assert cluster["allValue"] == ".+", uid
    topic = variables(dashboards["rocketq-topic"])["topic"]
    assert topic["query"] == 'label_values(rocketmq_messages_in_total{cluster=~"$cluster"}, topic)'
    group = variables(dashboards["rocketq-group"])["consumer_group"]
    assert group["query"] == (
        'label_values(rocketmq_consumer_lag_messages{cluster=~"$cluster"}, consumer_group)'
    )
    for dashboard in dashboards.values():
        for variable in variables(dashboard).values():
            if variable["type"] != "query":
                continue
            match = LABEL_VALUES.match(variable["query"])
            assert match, variable["query"]
            assert metric_names(match["selector"]) <= KNOWN_METRICS, variable["query"]
            assert variable["name"] in TEMPLATE_VALUES


def test_every_panel_has_a_query_and_a_unique_id(dashboards: dict[str, dict[str, Any]]) -> None:
    for uid, dashboard in dashboards.items():
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids)), uid
        for panel in panels(dashboard):
            exprs = [target.get("expr") for target in panel.get("targets", [])]
            assert exprs and all(exprs), f"{uid}: panel {panel['title']!r} has no query"


def test_every_query_reads_only_catalog_metrics(dashboards: dict[str, dict[str, Any]]) -> None:
    for dashboard in dashboards.values():
        for panel in panels(dashboard):
            for target in panel["targets"]:
                names = metric_names(target["expr"])
                assert names, target["expr"]
                unknown = names - KNOWN_METRICS
                assert not unknown, f"{panel['title']!r} reads {unknown}, not in the catalog"


def test_variables_filter_with_regex_matches(dashboards: dict[str, dict[str, Any]]) -> None:
    """A multi-value or "All" selection is a regex, so a variable's filter must be =~."""
    for dashboard in dashboards.values():
        for panel in panels(dashboard):
            for target in panel["targets"]:
                for use in re.finditer(
                    r'(\S{2})"\$(cluster|topic|consumer_group)"', target["expr"]
                ):
                    assert use.group(1).endswith("=~"), target["expr"]


def test_dashboard_queries_substitute_every_variable() -> None:
    queries = dashboard_queries()
    count = sum(
        len(panel["targets"]) for dashboard in load_dashboards() for panel in panels(dashboard)
    )
    assert len(queries) == count
    titles = [title for title, _ in queries]
    assert len(titles) == len(set(titles))
    assert "RocketQ / Overview / Brokers up" in titles
    for title, expr in queries:
        assert "$" not in expr, (title, expr)
    assert any('cluster=~".+"' in expr and "[1m]" in expr for _, expr in queries)


def test_substitute() -> None:
    assert substitute('rate(x{topic=~"$topic"}[$__rate_interval])') == 'rate(x{topic=~".+"}[1m])'
    assert substitute('x{cluster=~"${cluster}"}[$__interval]') == 'x{cluster=~".+"}[1m]'
    with pytest.raises(KeyError, match="broker"):
        substitute('x{node_id=~"$broker"}')


def test_metric_names() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, response_code) "
        '(rate(rocketmq_rpc_latency_bucket{request_code=~"send_message|pull"}[5m])))'
        " / on (cluster) group_left (node_id) up offset 5m > bool 1e3"
    )
    assert metric_names(expr) == {"rocketmq_rpc_latency_bucket", "up"}
    assert metric_names("sum(rate(a_total[1m])) by (topic) and b") == {"a_total", "b"}
    assert metric_names('count_values("v", rocketq_raft_role)') == {"rocketq_raft_role"}
