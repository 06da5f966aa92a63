"""The broker's metrics as Prometheus sees them: RocketMQ 5's names and labels
(BrokerMetricsConstant, DefaultStoreMetricsConstant, RemotingMetricsConstant) and ours under
``rocketq_``; and whether the broker is ready.

Everything is read when scraped: the counters the broker keeps (``metrics.py``) and its
state (store, offsets, clients, replication). Lag gauges come from the broker that takes
writes (a master, a Raft leader) only, so sums over a group do not count twice.
"""

from __future__ import annotations

import importlib.metadata
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import Metric

from rocketq.broker.client_channels import client_channels
from rocketq.broker.consumer_manager import CONSUME_POP
from rocketq.broker.host import BrokerHost
from rocketq.broker.metrics import REMOTING, BrokerCounters
from rocketq.common.message import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    is_system_topic,
)
from rocketq.common.metrics import MESSAGE_SIZE_BUCKETS, Base, Collector, flag

if TYPE_CHECKING:
    from rocketq.broker.flow_control import FlowControl
    from rocketq.broker.raft_member import RaftMember
    from rocketq.replication.ha.master import HAMaster

SEPARATOR = "@"  # of the consumer offset table's keys, topic@group
_SYSTEM_GROUP_PREFIXES = ("cid_rmq_sys_", "rmq_sys_")
# rocketq_raft_role's values.
_RAFT_ROLES = {"FOLLOWER": 0, "PRE_CANDIDATE": 1, "CANDIDATE": 1, "LEADER": 2}


def _version() -> str:
    try:
        return importlib.metadata.version("rocketq")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


class MetricsHost(BrokerHost, Protocol):
    """The broker as its metrics see it."""

    flow: FlowControl
    raft: RaftMember | None
    ha_master: HAMaster | None
    stopping: bool


def is_system_group(group: str) -> bool:
    return group.lower().startswith(_SYSTEM_GROUP_PREFIXES)


def is_retry_topic(topic: str) -> bool:
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


def readiness(b: MetricsHost) -> tuple[bool, str]:
    """Ready: the store recovered, a nameserver has this broker, and with Raft a leader is
    known. -> (ready, why not; or, when ready, a note on what it refuses).

    A store that refuses writes (a full disk, a failed write or fsync) leaves the broker
    ready, with the refusal as the note in the answer: readiness says whether the broker
    serves its clients, and it still serves reads, pulls, pops, acks and registrations;
    its sends go to other brokers through the producers' retries, which read the send's
    answer, not this probe. An orchestrator that took a full broker out (or held a rollout
    on it) would cut its consumers off the messages it holds, which is what they need to
    drain it. The refusal shows in ``rocketq_store_write_state`` and cluster-list."""
    if b.stopping:
        return False, "the broker is stopping"
    if not b.store.running:
        return False, "the store is loading or recovering"
    if b.raft is not None and b.raft.node.leader is None:
        return False, f"Raft group {b.raft.group} has no leader this member knows of"
    if not any(b.registration.registered.values()):
        return False, "not registered with any nameserver yet (" + b.config.namesrv_addr + ")"
    refusal = b.store.write_refusal()
    if refusal is not None:
        return True, f"store {b.store.disk.state_name}, sends refused: {refusal}"
    return True, ""


def registry_for(b: MetricsHost, counters: BrokerCounters) -> CollectorRegistry:
    """A registry of this broker's metrics and the process's (cpu, memory, files)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(lambda: BrokerMetrics(b, counters).families()))
    ProcessCollector(registry=registry)
    return registry


class BrokerMetrics:
    """One scrape's worth of families."""

    def __init__(self, b: MetricsHost, counters: BrokerCounters) -> None:
        self.b = b
        self.c = counters
        cfg = b.config
        self.base = Base(
            ("cluster", "node_type", "node_id"),
            (cfg.broker_cluster_name, "broker", cfg.broker_name),
        )
        self.now_ms = int(time.time() * 1000)

    def families(self) -> Iterator[Metric]:
        yield from self._traffic()
        yield from self._lag()
        yield from self._clients()
        yield from self._store()
        yield from self._transactions()
        yield from self._broker()
        yield from self._replication()
        yield from self._backlogs()

    # -- what sends and pulls moved ------------------------------------------------------

    def _traffic(self) -> Iterator[Metric]:
        base, c = self.base, self.c
        labels = ("topic", "message_type", "is_system")
        msgs = base.counter("rocketmq_messages_in", "Messages stored by sends.", labels)
        size = base.counter("rocketmq_throughput_in", "Bytes stored by sends.", labels)
        hist = base.histogram("rocketmq_message_size", "Size of sent messages (bytes).", labels)
        for (topic, kind), row in c.messages_in.items():
            values = (topic, kind, flag(is_system_topic(topic)))
            base.add(msgs, values, row[0])
            base.add(size, values, row[1])
            buckets, running = [], 0
            for bound, n in zip((*MESSAGE_SIZE_BUCKETS, None), row[2:], strict=True):
                running += n
                buckets.append(("+Inf" if bound is None else str(bound), float(running)))
            hist.add_metric([*base.values, *values], buckets, float(row[1]))
        yield from (msgs, size, hist)

        out_labels = ("topic", "consumer_group", "is_retry", "is_system")
        msgs = base.counter("rocketmq_messages_out", "Messages handed out by pulls.", out_labels)
        size = base.counter("rocketmq_throughput_out", "Bytes handed out by pulls.", out_labels)
        for (topic, group), out in c.messages_out.items():
            group_values = self._group_labels(topic, group)
            base.add(msgs, group_values, out[0])
            base.add(size, group_values, out[1])
        yield from (msgs, size)

        dlq = base.counter(
            "rocketmq_send_to_dlq_messages",
            "Messages moved to their group's dead-letter queue.",
            ("topic", "consumer_group", "is_system"),
        )
        for (topic, group), n in c.to_dlq.items():
            system = is_system_topic(topic) or is_system_group(group)
            base.add(dlq, (topic, group, flag(system)), n)
        yield dlq

        yield c.rpc.export(
            base,
            "rocketmq_rpc_latency",
            "Time from a request to its answer (ms).",
            ("protocol_type", "request_code", "response_code", "is_long_polling"),
        )

    def _group_labels(self, topic: str, group: str) -> tuple[str, str, str, str]:
        system = is_system_topic(topic) or is_system_group(group)
        return topic, group, flag(is_retry_topic(topic)), flag(system)

    # -- lag, computed now ---------------------------------------------------------------

    def _lag(self) -> Iterator[Metric]:
        b, base = self.b, self.base
        per_queue = b.config.metrics_queue_level
        labels: tuple[str, ...] = ("topic", "consumer_group", "is_retry", "is_system")
        if per_queue:
            labels += ("queue_id",)
        lag = base.gauge(
            "rocketmq_consumer_lag_messages",
            "Messages stored and not yet consumed (committed) by the group.",
            labels,
        )
        lag_ms = base.gauge(
            "rocketmq_consumer_lag_latency",
            "Age of the oldest message the group has not consumed (ms).",
            labels,
        )
        inflight = base.gauge(
            "rocketmq_consumer_inflight_messages",
            "Messages pulled by the group and not yet consumed.",
            labels,
        )
        queueing = base.gauge(
            "rocketmq_consumer_queueing_latency",
            "Age of the oldest message the group has not pulled yet (ms).",
            labels,
        )
        ready = base.gauge(
            "rocketmq_consumer_ready_messages",
            "Messages stored and not yet pulled by the group.",
            labels,
        )
        if b.config.broker_role != "SLAVE":
            pulled = self.c.pulled
            for key, queues in list(b.offsets.table.items()):
                topic, _, group = key.partition(SEPARATOR)
                group_labels = self._group_labels(topic, group)
                sums = [0, 0, 0]  # lag, inflight, ready
                ages = [0, 0]  # lag latency, queueing latency
                for queue_id, committed in list(queues.items()):
                    row = self._queue(topic, group, queue_id, committed, pulled)
                    if per_queue:
                        values = (*group_labels, str(queue_id))
                        for family, v in zip(
                            (lag, inflight, ready, lag_ms, queueing), row, strict=True
                        ):
                            base.add(family, values, v)
                    else:
                        sums = [s + v for s, v in zip(sums, row[:3], strict=True)]
                        ages = [max(a, v) for a, v in zip(ages, row[3:], strict=True)]
                if not per_queue:
                    for family, v in zip(
                        (lag, inflight, ready, lag_ms, queueing), (*sums, *ages), strict=True
                    ):
                        base.add(family, group_labels, v)
        yield from (lag, lag_ms, inflight, queueing, ready)

    def _queue(
        self,
        topic: str,
        group: str,
        queue_id: int,
        committed: int,
        pulled: dict[tuple[str, str, int], int],
    ) -> tuple[int, int, int, int, int]:
        """(lag, inflight, ready, lag latency ms, queueing latency ms) of one queue."""
        s = self.b.store
        hi = s.max_offset_in_queue(topic, queue_id)
        committed = max(committed, s.min_offset_in_queue(topic, queue_id))
        at = min(max(pulled.get((group, topic, queue_id), committed), committed), hi)
        lag, inflight, ready = max(0, hi - committed), at - committed, hi - at
        return (
            lag,
            inflight,
            ready,
            self._age(topic, queue_id, committed, lag),
            self._age(topic, queue_id, at, ready),
        )

    def _age(self, topic: str, queue_id: int, offset: int, behind: int) -> int:
        if behind <= 0:
            return 0
        stored = self.b.store.store_time_in_queue(topic, queue_id, offset)
        return max(0, self.now_ms - stored) if stored > 0 else 0

    # -- clients -------------------------------------------------------------------------

    def _clients(self) -> Iterator[Metric]:
        b, base = self.b, self.base
        producers = base.gauge(
            "rocketmq_producer_connections",
            "Producer clients connected.",
            ("language", "protocol_type"),
        )
        kinds = b.consumers.client_kinds
        channels = client_channels(b.consumers)

        def kind(cid: str) -> tuple[str, str]:
            """(language, protocol) of a client: a v2 client's own header, a remoting
            client's channel (the language its heartbeat named)."""
            known = kinds.get(cid)
            if known is not None:
                return known
            channel = channels.get(cid)
            return (channel.language_name.lower() if channel else "unknown"), REMOTING

        clients = {cid for ids in b.consumers.producer_groups.values() for cid in ids}
        for (language, protocol), count in sorted(Counter(map(kind, clients)).items()):
            base.add(producers, (language, protocol), count)
        consumers = base.gauge(
            "rocketmq_consumer_connections",
            "Consumer clients connected, per group.",
            ("consumer_group", "language", "consume_mode", "protocol_type", "is_system"),
        )
        for group, info in list(b.consumers.groups.items()):
            if info.consume_type == CONSUME_POP:
                mode = "pop"
            else:
                mode = "pull" if "ACTIVELY" in info.consume_type else "push"
            system = flag(is_system_group(group))
            counts = Counter(map(kind, list(info.clients)))
            for (language, protocol), count in sorted(counts.items()):
                base.add(consumers, (group, language, mode, protocol, system), count)
        topics = base.gauge("rocketmq_topic_number", "Topics on this broker.")
        base.add(topics, (), len(b.topics.topics))
        groups = base.gauge("rocketmq_consumer_group_number", "Subscription groups on this broker.")
        base.add(groups, (), len(b.groups.groups))
        yield from (producers, consumers, topics, groups)

    # -- the store -----------------------------------------------------------------------

    def _store(self) -> Iterator[Metric]:
        b, base = self.b, self.base
        store = b.store
        local = ("local",)
        families = []
        commitlog = store.commitlog
        values = {
            "rocketmq_storage_size": (
                "Bytes of the CommitLog's files on disk.",
                len(commitlog.files.files) * commitlog.files.file_size,
            ),
            "rocketmq_storage_flush_behind_bytes": (
                "CommitLog bytes written and not yet flushed.",
                max(0, store.max_phy_offset - store.flusher.flushed[0]),
            ),
            "rocketmq_storage_dispatch_behind_bytes": (
                "CommitLog bytes not yet dispatched to the consume queues and index.",
                store.dispatch_behind_bytes if store.running else 0,
            ),
            "rocketmq_storage_message_reserve_time": (
                "Age of the oldest message kept (ms).",
                self._oldest_age(),
            ),
        }
        for name, (doc, value) in values.items():
            family = base.gauge(name, doc, ("storage_type",))
            base.add(family, local, value)
            families.append(family)
        try:
            fs = os.statvfs(b.store_config.store_path_root_dir)
        except OSError:
            pass
        else:
            total = base.gauge(
                "rocketq_storage_disk_total_bytes", "Size of the file system holding the store."
            )
            base.add(total, (), fs.f_blocks * fs.f_frsize)
            free = base.gauge("rocketq_storage_disk_free_bytes", "Free bytes on that file system.")
            base.add(free, (), fs.f_bavail * fs.f_frsize)
            families += [total, free]
        yield from families

    def _oldest_age(self) -> int:
        store = self.b.store
        if not store.running or store.max_phy_offset <= store.min_phy_offset:
            return 0
        try:
            stored = store.commitlog.store_timestamp_at(store.min_phy_offset)
        except (OSError, ValueError, IndexError):
            return 0
        return max(0, self.now_ms - stored) if stored > 0 else 0

    # -- transactions --------------------------------------------------------------------

    def _transactions(self) -> Iterator[Metric]:
        base, c = self.base, self.c
        for name, doc, table in (
            ("rocketmq_commit_messages", "Transactions committed.", c.commits),
            ("rocketmq_rollback_messages", "Transactions rolled back.", c.rollbacks),
        ):
            family = base.counter(name, doc, ("topic",))
            for topic, n in table.items():
                base.add(family, (topic,), n)
            yield family
        half = base.gauge(
            "rocketmq_half_messages",
            "Prepared transactional messages not yet committed or rolled back "
            "(since the broker started).",
            ("topic",),
        )
        for topic, n in c.half.items():
            base.add(half, (topic,), n)
        yield half

    # -- the broker itself ---------------------------------------------------------------

    def _broker(self) -> Iterator[Metric]:
        b, base = self.b, self.base
        cfg = b.config
        permission = base.gauge("rocketmq_broker_permission", "Broker permission (6: read, write).")
        base.add(permission, (), cfg.broker_permission)
        watermark = base.gauge(
            "rocketmq_processor_watermark",
            "Sends waiting for their flush or replicas.",
            ("processor",),
        )
        base.add(watermark, ("send",), b.flow.in_flight)
        ready = base.gauge("rocketq_broker_ready", "1 when /readyz answers ready.")
        base.add(ready, (), int(readiness(b)[0]))
        info = base.gauge(
            "rocketq_broker_info", "This broker now (always 1).", ("broker_id", "role", "version")
        )
        base.add(info, (str(cfg.broker_id), cfg.broker_role, _version()), 1)
        disk = b.store.disk
        writes = base.gauge(
            "rocketq_store_write_state",
            "Whether the store takes writes: 0 yes, 1 refused for a full disk (taken again "
            "once space is freed), 2 refused after a failed write or fsync (until restart).",
        )
        base.add(writes, (), disk.state)
        used = base.gauge(
            "rocketq_storage_disk_used_ratio",
            "Used ratio of the CommitLog's disk at the last check (the one compared with "
            "disk_space_warning_level_ratio).",
        )
        base.add(used, (), disk.ratio)
        yield from (permission, watermark, ready, info, writes, used)

    # -- replication ---------------------------------------------------------------------

    def _replication(self) -> Iterator[Metric]:
        b, base = self.b, self.base
        lag = base.gauge(
            "rocketq_ha_slave_lag_bytes",
            "On a master or Raft leader: CommitLog bytes a slave or follower lacks.",
            ("slave",),
        )
        end = b.store.max_phy_offset
        if b.ha_master is not None:
            for conn in list(b.ha_master.slaves.values()):
                base.add(
                    lag, (conn.broker_addr or str(conn.conn_id),), max(0, end - max(conn.ack, 0))
                )
        raft = b.raft
        if raft is not None:
            for member, behind in raft.follower_lag_bytes().items():
                base.add(lag, (member,), behind)
        yield lag
        yield self.c.sync_wait.export(
            base,
            "rocketq_ha_sync_wait_seconds",
            "How long sends waited for their replicas: a SYNC_MASTER's slave or a Raft quorum.",
            (),
            rows=[()] if (b.config.broker_role == "SYNC_MASTER" or raft is not None) else [],
        )
        if raft is None:
            return
        node = raft.node
        who = (raft.self_id,)
        gauges = (
            (
                "rocketq_raft_role",
                "0 follower, 1 candidate, 2 leader.",
                _RAFT_ROLES.get(node.role.value, 0),
            ),
            ("rocketq_raft_leader", "1 while this member leads.", int(node.role.value == "LEADER")),
            ("rocketq_raft_term", "Current term.", node.term),
            ("rocketq_raft_commit_index", "Raft index committed by a quorum.", node.commit_index),
            (
                "rocketq_raft_rebuilding",
                "1 while this member receives a snapshot (it neither votes nor takes entries).",
                int(raft.snapshots.receiving()),
            ),
        )
        for name, doc, value in gauges:
            gauge = base.gauge(name, doc, ("member",))
            base.add(gauge, who, value)
            yield gauge
        for name, doc, value in (
            ("rocketq_raft_elections", "Elections this member started.", raft.elections),
            ("rocketq_raft_leader_changes", "Leader changes this member saw.", raft.leader_changes),
            (
                "rocketq_raft_snapshot_received_bytes",
                "Snapshot bytes this member received while being rebuilt.",
                raft.snapshots.bytes_received,
            ),
            (
                "rocketq_raft_snapshots_installed",
                "Snapshots this member installed.",
                raft.snapshots.installed,
            ),
        ):
            counter = base.counter(name, doc, ("member",))
            base.add(counter, who, value)
            yield counter

    # -- what waits for its time ---------------------------------------------------------

    def _backlogs(self) -> Iterator[Metric]:
        b, base = self.b, self.base
        store = b.store
        delay = base.gauge(
            "rocketq_delay_backlog_messages",
            "Delayed messages not yet due, per delay level.",
            ("delay_level",),
        )
        timer = base.gauge("rocketq_timer_backlog_messages", "Timer messages not yet due.")
        if b.config.broker_role != "SLAVE":
            schedule = b.schedule
            for level in schedule.levels():
                queue_id = level - 1
                done = schedule.offsets.get(
                    level, store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id)
                )
                backlog = store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id) - done
                base.add(delay, (str(level),), max(0, backlog))
            t = b.timer
            unfiled = store.max_offset_in_queue(TIMER_TOPIC, 0) - t.enqueue_offset
            base.add(timer, (), max(0, t.pending + max(0, unfiled)))
        yield from (delay, timer)
