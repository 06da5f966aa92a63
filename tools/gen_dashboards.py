"""Generate the Grafana dashboards of ``deploy/k8s/grafana/`` with Grafana's own builder,
grafana-foundation-sdk (the ``dev`` extra pins the exact version).

Three dashboards, importable into Grafana 10+: ``rocketq-overview`` (the whole cluster),
``rocketq-topic`` (one topic) and ``rocketq-group`` (one consumer group). The data source
is the template variable ``${datasource}`` (any Prometheus), never a fixed uid. Every query
reads the metric catalog of the broker and nameserver (``tools/promql.py`` lists it) and
filters by template variables with ``=~``, so "All" (``.+``) and multi-value selections
work alike. Panels show only series that exist while a cluster runs normally.

    python tools/gen_dashboards.py            # write the JSON files
    python tools/gen_dashboards.py --check    # exit 1 naming each file that differs
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import heatmap, prometheus, stat, statetimeline, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.variants import Dataquery
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import prometheus as prometheus_model

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "deploy" / "k8s" / "grafana"

DATASOURCE: Final = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAGS: Final = ["rocketq"]

# Label filters of the template variables (regex matches, so "All" = ".+" works).
CLUSTER: Final = 'cluster=~"$cluster"'
TOPIC: Final = f'{CLUSTER}, topic=~"$topic"'
GROUP: Final = f'{CLUSTER}, consumer_group=~"$consumer_group"'
SENDS: Final = 'request_code=~"send_message|send_batch_message"'
USER: Final = 'is_system="false"'
RATE: Final = "[$__rate_interval]"

PanelBuilder = Builder[model.Panel]
VariableBuilder = Builder[model.VariableModel]
# A state's value -> (its text, its color).
States = dict[str, tuple[str, str]]


@dataclass(frozen=True)
class Query:
    """One target of a panel: a PromQL expression and its legend."""

    expr: str
    legend: str


def _targets(queries: Sequence[Query], *, heatmap_format: bool = False) -> list[Builder[Dataquery]]:
    targets: list[Builder[Dataquery]] = []
    for index, query in enumerate(queries):
        target = (
            prometheus.Dataquery()
            .datasource(DATASOURCE)
            .expr(query.expr)
            .legend_format(query.legend)
            .ref_id(chr(ord("A") + index))
            .range()
        )
        if heatmap_format:
            target = target.format(prometheus_model.PromQueryFormat.HEATMAP)
        targets.append(target)
    return targets


def _legend() -> common_builders.VizLegendOptions:
    return (
        common_builders.VizLegendOptions()
        .display_mode(common.LegendDisplayMode.LIST)
        .placement(common.LegendPlacement.BOTTOM)
        .show_legend(True)
    )


def _tooltip() -> common_builders.VizTooltipOptions:
    return (
        common_builders.VizTooltipOptions()
        .mode(common.TooltipDisplayMode.MULTI)
        .sort(common.SortOrder.DESCENDING)
    )


def graph(
    title: str,
    unit: str,
    description: str,
    *queries: Query,
    span: int = 12,
    height: int = 8,
) -> PanelBuilder:
    """A time series panel."""
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .unit(unit)
        .min(0)
        .legend(_legend())
        .tooltip(_tooltip())
        .fill_opacity(10)
        .span(span)
        .height(height)
    )


def _mappings(mapping: States) -> list[model.ValueMapping]:
    return [
        model.ValueMap(
            options={
                value: model.ValueMappingResult(text=text, color=color, index=index)
                for index, (value, (text, color)) in enumerate(sorted(mapping.items()))
            }
        )
    ]


def status(
    title: str,
    description: str,
    *queries: Query,
    mapping: States | None = None,
    unit: str = "short",
    span: int = 6,
    height: int = 5,
) -> PanelBuilder:
    """A stat panel showing the last value of each series, by name."""
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .unit(unit)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .color_mode(
            common.BigValueColorMode.BACKGROUND if mapping else common.BigValueColorMode.VALUE
        )
        .graph_mode(common.BigValueGraphMode.NONE)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
        .orientation(common.VizOrientation.AUTO)
        .span(span)
        .height(height)
    )
    if mapping:
        panel = panel.mappings(_mappings(mapping))
    return panel


def timeline(
    title: str,
    description: str,
    mapping: States,
    *queries: Query,
    span: int = 12,
    height: int = 8,
) -> PanelBuilder:
    """A state timeline panel: a value-mapped state per series over time."""
    return (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .mappings(_mappings(mapping))
        .legend(_legend())
        .tooltip(_tooltip())
        .span(span)
        .height(height)
    )


def distribution(
    title: str, unit: str, description: str, query: Query, *, span: int = 12, height: int = 8
) -> PanelBuilder:
    """A heatmap of a histogram's buckets (the buckets come from Prometheus, not Grafana)."""
    return (
        heatmap.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets([query], heatmap_format=True))
        .calculate(False)
        .y_axis(heatmap.YAxisConfig().unit(unit))
        .cell_values(heatmap.CellValues().unit("short"))
        .show_legend()
        .show_tooltip()
        .span(span)
        .height(height)
    )


# Variables -------------------------------------------------------------------------------


def datasource_variable() -> dashboard_builders.DatasourceVariable:
    return (
        dashboard_builders.DatasourceVariable("datasource").label("Data source").type("prometheus")
    )


def query_variable(name: str, label: str, query: str, *, all_values: bool) -> VariableBuilder:
    variable = (
        dashboard_builders.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(all_values)
        .include_all(all_values)
    )
    if all_values:
        variable = variable.all_value(".+")
    return variable


def cluster_variable() -> VariableBuilder:
    return query_variable(
        "cluster", "Cluster", "label_values(rocketmq_topic_number, cluster)", all_values=True
    )


# Dashboards ------------------------------------------------------------------------------

Rows = Sequence[tuple[str, Sequence[PanelBuilder]]]


def build(
    uid: str, title: str, description: str, variables: Sequence[VariableBuilder], rows: Rows
) -> model.Dashboard:
    """A dashboard of rows of panels, with panel ids numbered in layout order."""
    builder = (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .editable()
        .timezone("browser")
        .time("now-1h", "now")
        .refresh("30s")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .link(
            dashboard_builders.DashboardLink("RocketQ dashboards")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(TAGS)
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )
    for variable in variables:
        builder = builder.with_variable(variable)
    for row_title, panels in rows:
        builder = builder.with_row(dashboard_builders.Row(row_title))
        for panel in panels:
            builder = builder.with_panel(panel)
    built = builder.build()
    for number, placed in enumerate(built.panels or [], start=1):
        placed.id_val = number
    return built


# PromQL, spelled as it reads: sum_by("topic", rate("m_total", CLUSTER)) is
# sum by (topic) (rate(m_total{cluster=~"$cluster"}[$__rate_interval])).


def sel(metric: str, matchers: str) -> str:
    return f"{metric}{{{matchers}}}"


def rate(metric: str, matchers: str) -> str:
    return f"rate({sel(metric, matchers)}{RATE})"


def increase(metric: str, matchers: str) -> str:
    return f"increase({sel(metric, matchers)}{RATE})"


def sum_by(labels: str, inner: str) -> str:
    return f"sum by ({labels}) ({inner})"


def max_by(labels: str, inner: str) -> str:
    return f"max by ({labels}) ({inner})"


def quantile(q: float, labels: str, bucket: str, matchers: str, legend: str) -> Query:
    """The ``q`` quantile of a histogram by ``labels``, its legend ``p<q> <legend>``."""
    expr = f"histogram_quantile({q}, {sum_by(f'le, {labels}', rate(bucket, matchers))})"
    return Query(expr, f"p{round(q * 100)} {legend}")


UP_STATES: Final[States] = {"0": ("DOWN", "red"), "1": ("UP", "green")}
READY_STATES: Final[States] = {"0": ("NOT READY", "red"), "1": ("READY", "green")}
RAFT_STATES: Final[States] = {
    "0": ("follower", "blue"),
    "1": ("candidate", "orange"),
    "2": ("leader", "green"),
}
NODE: Final = "{{node_id}} {{instance}}"
MEMBER: Final = "{{node_id}} {{member}}"


def overview() -> model.Dashboard:
    users, sends = f"{CLUSTER}, {USER}", f"{CLUSTER}, {SENDS}"
    by_topic, by_group = "{{topic}}", "{{consumer_group}}"
    health = [
        status(
            "Brokers up",
            "Whether Prometheus can scrape each target of the rocketq-broker job "
            "(`up` carries no cluster label, so this panel shows every cluster).",
            Query('up{job="rocketq-broker"}', "{{instance}}"),
            mapping=UP_STATES,
        ),
        status(
            "Brokers ready",
            "rocketq_broker_ready: 1 while the broker's /readyz answers ready.",
            Query(sel("rocketq_broker_ready", CLUSTER), NODE),
            mapping=READY_STATES,
        ),
        status(
            "Live brokers (nameserver)",
            "Brokers registered with the nameservers, per cluster (the highest count of "
            "any nameserver).",
            Query(max_by("cluster", sel("rocketq_nameserver_brokers", CLUSTER)), "{{cluster}}"),
        ),
        status(
            "Nameservers up",
            "Whether Prometheus can scrape each target of the rocketq-nameserver job.",
            Query('up{job="rocketq-nameserver"}', "{{instance}}"),
            mapping=UP_STATES,
        ),
    ]
    traffic = [
        graph(
            "Messages in (TPS) by topic",
            "ops",
            "Messages stored by sends per second, user topics.",
            Query(sum_by("topic", rate("rocketmq_messages_in_total", users)), by_topic),
        ),
        graph(
            "Messages out (TPS) by topic",
            "ops",
            "Messages handed out by pulls per second, user topics.",
            Query(sum_by("topic", rate("rocketmq_messages_out_total", users)), by_topic),
        ),
        graph(
            "Bytes in by topic",
            "binBps",
            "Bytes stored by sends per second, user topics.",
            Query(sum_by("topic", rate("rocketmq_throughput_in_total", users)), by_topic),
        ),
        graph(
            "Bytes out by topic",
            "binBps",
            "Bytes handed out by pulls per second, user topics.",
            Query(sum_by("topic", rate("rocketmq_throughput_out_total", users)), by_topic),
        ),
        graph(
            "Send latency p50 / p99 by response code",
            "ms",
            "Time from a send (single or batch) to its answer, by the answer's response code.",
            *(
                quantile(
                    q, "response_code", "rocketmq_rpc_latency_bucket", sends, "{{response_code}}"
                )
                for q in (0.5, 0.99)
            ),
            span=24,
        ),
    ]
    consumers = [
        graph(
            "Consumer lag by group",
            "short",
            "Messages stored but not yet committed by each consumer group (all its topics, "
            "retry topics included).",
            Query(sum_by("consumer_group", sel("rocketmq_consumer_lag_messages", users)), by_group),
        ),
        graph(
            "Consumer lag latency by group",
            "ms",
            "Age of each group's oldest unconsumed message (0 when it has none).",
            Query(max_by("consumer_group", sel("rocketmq_consumer_lag_latency", users)), by_group),
        ),
        graph(
            "Dead letters (DLQ growth)",
            "short",
            "Messages moved to %DLQ%<group> after their last retry, by group and topic.",
            Query(
                sum_by(
                    "consumer_group, topic",
                    increase("rocketmq_send_to_dlq_messages_total", CLUSTER),
                ),
                "{{consumer_group}} {{topic}}",
            ),
            span=24,
        ),
    ]
    storage = [
        graph(
            "Store size",
            "bytes",
            "Bytes of each broker's store on disk.",
            Query(sum_by("node_id, instance", sel("rocketmq_storage_size", CLUSTER)), NODE),
            span=8,
        ),
        graph(
            "Free disk",
            "percentunit",
            "Free share of the file system holding each broker's store.",
            Query(
                f"{sel('rocketq_storage_disk_free_bytes', CLUSTER)} "
                f"/ {sel('rocketq_storage_disk_total_bytes', CLUSTER)}",
                NODE,
            ),
            span=8,
        ),
        graph(
            "Flush and dispatch behind",
            "bytes",
            "CommitLog bytes written but not yet flushed to disk, and not yet dispatched to "
            "the ConsumeQueue and IndexFile.",
            *(
                Query(
                    max_by(
                        "node_id, instance",
                        sel(f"rocketmq_storage_{what}_behind_bytes", CLUSTER),
                    ),
                    f"{what} {NODE}",
                )
                for what in ("flush", "dispatch")
            ),
            span=8,
        ),
    ]
    replication = [
        graph(
            "Replication lag by slave",
            "bytes",
            "Bytes of CommitLog each slave or Raft follower still lacks, as its master or "
            "Raft leader sees it.",
            Query(
                max_by("node_id, slave", sel("rocketq_ha_slave_lag_bytes", CLUSTER)),
                "{{node_id}} -> {{slave}}",
            ),
        ),
        timeline(
            "Raft role",
            "Role of each Raft member over time.",
            RAFT_STATES,
            Query(max_by("node_id, member", sel("rocketq_raft_role", CLUSTER)), MEMBER),
        ),
        graph(
            "Raft term",
            "short",
            "Current Raft term of each member; a rise is an election.",
            Query(max_by("node_id, member", sel("rocketq_raft_term", CLUSTER)), MEMBER),
        ),
        graph(
            "Raft elections started",
            "short",
            "Elections each member started in the interval.",
            Query(
                sum_by(
                    "node_id, member",
                    increase("rocketq_raft_elections_total", CLUSTER),
                ),
                MEMBER,
            ),
        ),
    ]
    return build(
        "rocketq-overview",
        "RocketQ / Overview",
        "Brokers, nameservers, traffic, consumers, storage and replication of rocketq clusters.",
        [datasource_variable(), cluster_variable()],
        [
            ("Health", health),
            ("Traffic", traffic),
            ("Consumers", consumers),
            ("Storage", storage),
            ("Replication and Raft", replication),
        ],
    )


def topic() -> model.Dashboard:
    per_group = "{{topic}} {{consumer_group}}"
    traffic = [
        graph(
            "Messages in (TPS)",
            "ops",
            "Messages stored by sends per second, by message type.",
            Query(
                sum_by("topic, message_type", rate("rocketmq_messages_in_total", TOPIC)),
                "{{topic}} {{message_type}}",
            ),
        ),
        graph(
            "Messages out (TPS) by group",
            "ops",
            "Messages handed out by pulls per second, by consumer group.",
            Query(
                sum_by(
                    "topic, consumer_group",
                    rate("rocketmq_messages_out_total", TOPIC),
                ),
                per_group,
            ),
        ),
        graph(
            "Bytes in / out",
            "binBps",
            "Bytes stored by sends and handed out by pulls per second.",
            *(
                Query(
                    sum_by("topic", rate(f"rocketmq_throughput_{way}_total", TOPIC)),
                    f"{way} {{{{topic}}}}",
                )
                for way in ("in", "out")
            ),
            span=24,
        ),
    ]
    sizes = [
        distribution(
            "Message size distribution",
            "bytes",
            "Sent messages per size bucket in each interval (a batch counts at its mean size).",
            Query(sum_by("le", increase("rocketmq_message_size_bucket", TOPIC)), "{{le}}"),
        ),
        graph(
            "Message size p50 / p99",
            "bytes",
            "Estimated from the size histogram's buckets.",
            *(
                quantile(q, "topic", "rocketmq_message_size_bucket", TOPIC, "{{topic}}")
                for q in (0.5, 0.99)
            ),
        ),
    ]
    consumers = [
        graph(
            "Lag by group",
            "short",
            "Messages of the topic stored but not yet committed, by consumer group.",
            Query(
                sum_by("topic, consumer_group", sel("rocketmq_consumer_lag_messages", TOPIC)),
                per_group,
            ),
        ),
        graph(
            "Lag latency by group",
            "ms",
            "Age of the oldest unconsumed message of the topic, by consumer group.",
            Query(
                max_by("topic, consumer_group", sel("rocketmq_consumer_lag_latency", TOPIC)),
                per_group,
            ),
        ),
        graph(
            "Dead letters by group",
            "short",
            "Messages of the topic moved to %DLQ%<group>, by consumer group.",
            Query(
                sum_by(
                    "topic, consumer_group",
                    increase("rocketmq_send_to_dlq_messages_total", TOPIC),
                ),
                per_group,
            ),
        ),
        graph(
            "Half messages",
            "short",
            "Transactional messages prepared and not yet committed or rolled back.",
            Query(sum_by("topic", sel("rocketmq_half_messages", TOPIC)), "{{topic}}"),
        ),
    ]
    return build(
        "rocketq-topic",
        "RocketQ / Topic",
        "Traffic, message sizes, consumers and transactions of one topic.",
        [
            datasource_variable(),
            cluster_variable(),
            query_variable(
                "topic",
                "Topic",
                f"label_values({sel('rocketmq_messages_in_total', CLUSTER)}, topic)",
                all_values=False,
            ),
        ],
        [("Traffic", traffic), ("Message size", sizes), ("Consumers and transactions", consumers)],
    )


def group() -> model.Dashboard:
    def per_topic(title: str, unit: str, description: str, expr: str) -> PanelBuilder:
        return graph(title, unit, description, Query(expr, "{{consumer_group}} {{topic}}"))

    labels = "consumer_group, topic"
    backlog = [
        per_topic(
            "Lag by topic",
            "short",
            "Messages stored but not yet committed by the group, by topic.",
            sum_by(labels, sel("rocketmq_consumer_lag_messages", GROUP)),
        ),
        per_topic(
            "Lag latency by topic",
            "ms",
            "Age of the group's oldest unconsumed message, by topic (0 when none).",
            max_by(labels, sel("rocketmq_consumer_lag_latency", GROUP)),
        ),
        per_topic(
            "Inflight messages",
            "short",
            "Messages pulled by the group but not yet committed.",
            sum_by(labels, sel("rocketmq_consumer_inflight_messages", GROUP)),
        ),
        per_topic(
            "Ready messages",
            "short",
            "Messages stored but not yet pulled by the group.",
            sum_by(labels, sel("rocketmq_consumer_ready_messages", GROUP)),
        ),
        per_topic(
            "Queueing latency",
            "ms",
            "Age of the oldest message the group has not pulled yet.",
            max_by(labels, sel("rocketmq_consumer_queueing_latency", GROUP)),
        ),
        per_topic(
            "Messages out (TPS) by topic",
            "ops",
            "Messages handed out to the group by pulls per second.",
            sum_by(labels, rate("rocketmq_messages_out_total", GROUP)),
        ),
    ]
    clients = [
        per_topic(
            "Dead letters by topic",
            "short",
            "Messages moved to %DLQ%<group> after their last retry, by original topic.",
            sum_by(labels, increase("rocketmq_send_to_dlq_messages_total", GROUP)),
        ),
        graph(
            "Consumer connections",
            "short",
            "Consumer clients of the group connected to the brokers.",
            Query(
                sum_by(
                    "consumer_group, consume_mode, language",
                    sel("rocketmq_consumer_connections", GROUP),
                ),
                "{{consumer_group}} {{consume_mode}} {{language}}",
            ),
        ),
    ]
    return build(
        "rocketq-group",
        "RocketQ / Consumer group",
        "Backlog, progress, dead letters and clients of one consumer group.",
        [
            datasource_variable(),
            cluster_variable(),
            query_variable(
                "consumer_group",
                "Consumer group",
                f"label_values({sel('rocketmq_consumer_lag_messages', CLUSTER)}, consumer_group)",
                all_values=False,
            ),
        ],
        [("Backlog", backlog), ("Dead letters and clients", clients)],
    )


DASHBOARDS: Final = {
    "rocketq-overview.json": overview,
    "rocketq-topic.json": topic,
    "rocketq-group.json": group,
}


def render() -> dict[str, str]:
    """File name -> the JSON text of each dashboard, as committed."""
    return {
        name: json.dumps(make(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
        for name, make in DASHBOARDS.items()
    }


def stale(out_dir: Path = OUT_DIR) -> list[Path]:
    """The dashboard files that are missing or differ from what :func:`render` makes."""
    return [
        out_dir / name
        for name, text in render().items()
        if not (out_dir / name).is_file() or (out_dir / name).read_text() != text
    ]


def write(out_dir: Path = OUT_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render().items():
        (out_dir / name).write_text(text)
        written.append(out_dir / name)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file differs"
    )
    args = parser.parse_args(argv)
    if args.check:
        differ = stale()
        for path in differ:
            print(
                f"{path.relative_to(ROOT)} differs from the generator: "
                "run `python tools/gen_dashboards.py` and commit the result",
                file=sys.stderr,
            )
        return 1 if differ else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
