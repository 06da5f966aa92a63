"""The nameserver's metrics (``rocketq_nameserver_*``): live brokers, topics, the
registrations it takes and the brokers it drops; all but the counters read when scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import Metric

from rocketq.common.metrics import Base, Collector, bounds_collector
from rocketq.nameserver.route_info import RouteInfoManager
from rocketq.remoting.bounds import ServerGuard

FULL, DELTA, HEARTBEAT = "full", "delta", "heartbeat"


class NameServerCounters:
    def __init__(self) -> None:
        self.registrations = {FULL: 0, DELTA: 0, HEARTBEAT: 0}
        self.expiries = 0
        # Registrations refused for their body, by RegisterBodyError.reason, or because
        # another identity holds the broker name (identity; authentication on).
        self.registrations_refused = {"bad_body": 0, "crc": 0, "inflate_cap": 0, "identity": 0}


def registry_for(
    routes: RouteInfoManager,
    counters: NameServerCounters,
    node_id: Callable[[], str],
    ready: Callable[[], bool],
    guard: Callable[[], ServerGuard | None] = lambda: None,
    http_rejected: Callable[[], Mapping[str, int]] = dict,
) -> CollectorRegistry:
    """A registry of the nameserver's metrics and the process's; ``node_id`` is its
    address, known once it listens. ``guard`` and ``http_rejected`` give what the bounds of
    its remoting and metrics ports refused (rocketq_remoting_rejected_total...)."""

    def node() -> Base:
        return Base(("node_type", "node_id"), ("nameserver", node_id()))

    def families() -> Iterator[Metric]:
        base = node()
        up = base.gauge("rocketq_nameserver_ready", "1 while the nameserver serves.")
        base.add(up, (), int(ready()))
        brokers = base.gauge(
            "rocketq_nameserver_brokers", "Live brokers registered, per cluster.", ("cluster",)
        )
        live: dict[str, int] = {name: 0 for name in routes.cluster_addr_table}
        for data in list(routes.broker_addr_table.values()):
            n = sum(1 for a in data.broker_addrs.values() if a in routes.broker_live_table)
            live[data.cluster] = live.get(data.cluster, 0) + n
        for cluster, n in live.items():
            base.add(brokers, (cluster,), n)
        topics = base.gauge("rocketq_nameserver_topics", "Topics in the route table.")
        base.add(topics, (), len(routes.topic_queue_table))
        regs = base.counter(
            "rocketq_nameserver_broker_registrations",
            "Broker registrations received, by kind (full table, delta, heartbeat).",
            ("kind",),
        )
        for kind, n in counters.registrations.items():
            base.add(regs, (kind,), n)
        expiries = base.counter(
            "rocketq_nameserver_broker_expiries",
            "Brokers dropped after broker_channel_expired_time of silence.",
            (),
        )
        base.add(expiries, (), counters.expiries)
        refused = base.counter(
            "rocketq_nameserver_broker_registrations_refused",
            "Registrations refused for their body: not readable (bad_body), damaged (crc), "
            "inflating past the cap of its topic count (inflate_cap); or because another "
            "identity holds the broker name (identity).",
            ("reason",),
        )
        for reason, n in list(counters.registrations_refused.items()):
            base.add(refused, (reason,), n)
        yield from (up, brokers, topics, regs, expiries, refused)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(families))
    registry.register(bounds_collector(node, guard, http_rejected))
    ProcessCollector(registry=registry)
    return registry
