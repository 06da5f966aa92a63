"""The broker's config: RocketMQ's broker.conf names in snake_case with its defaults.

A broker.toml holds these keys and the store's (``rocketq.common.config.StoreConfig``) side by
side; :func:`load_broker_config` reads both from one file, the environment and flags.

The broker's other ports follow its listen port unless set, as RocketMQ's HA port does
(listenPort + 1): ha_listen_port is listen_port + 1 and metrics_port listen_port + 2 (10911,
10912, 10913 by default), so brokers on one host differ only in listen_port, name and store.
The Raft port has no default to follow: each member's comes from dledger_peers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from rocketq.common.config import (
    ServerSecurityConfig,
    StoreConfig,
    check_server_bounds,
    check_server_security,
    load_configs,
    validate_config,
)
from rocketq.common.exceptions import ConfigError

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_PEER = re.compile(r"^([A-Za-z0-9_]+)-([^:;\s]+):(\d{1,5})$")
MAX_PORT: Final = 65535
# The ports that follow listen_port when unset, and by how much.
PortKey = Literal["ha_listen_port", "metrics_port"]
DERIVED_PORTS: Final[dict[PortKey, int]] = {"ha_listen_port": 1, "metrics_port": 2}


def parse_delay_levels(text: str) -> list[int]:
    """``"1s 5s 10s ..."`` -> delays in ms; units ms, s, m, h, d (ValueError naming the bad one)."""
    levels = []
    for part in text.split():
        m = _LEVEL.match(part)
        if m is None or int(m.group(1)) == 0:
            raise ValueError(
                f"delay level {part!r} is not a positive number with a unit ms, s, m, h or d "
                '(e.g. "1s 5s 10s 30s 1m 2m")'
            )
        levels.append(int(m.group(1)) * _UNITS[m.group(2)])
    if not levels:
        raise ValueError('no delay levels given; e.g. "1s 5s 10s 30s 1m 2m"')
    return levels


def parse_dledger_peers(text: str) -> dict[str, str]:
    """``"n0-127.0.0.1:40911;n1-127.0.0.1:40912"`` -> {member id: "host:port"}, in order
    (ValueError naming the bad entry)."""
    peers: dict[str, str] = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        m = _PEER.match(part)
        if m is None or not 0 < int(m.group(3)) < 65536:
            raise ValueError(
                f"{part!r} is not a member as id-host:port (e.g. "
                '"n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913")'
            )
        if m.group(1) in peers:
            raise ValueError(f"member id {m.group(1)!r} is listed twice")
        peers[m.group(1)] = f"{m.group(2)}:{m.group(3)}"
    return peers


def check_dledger_peers(value: object) -> str | None:
    if not str(value).strip():
        return None  # checked with enable_dledger_commit_log
    try:
        parse_dledger_peers(str(value))
    except ValueError as exc:
        return str(exc)
    return None


def check_delay_levels(value: object) -> str | None:
    try:
        parse_delay_levels(str(value))
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class BrokerConfig(ServerSecurityConfig):
    """The broker's keys, after the server bounds and the security keys every server shares."""

    # Cluster this broker group belongs to.
    broker_cluster_name: str = "DefaultCluster"
    # Name of the broker group (master and slaves share it).
    broker_name: str = "broker-a"
    # 0 for the master, >= 1 for slaves.
    broker_id: int = field(default=0, metadata={"min": 0})
    # Nameservers, "host:port;host:port".
    namesrv_addr: str = "127.0.0.1:9876"
    # Port of RocketMQ's remoting protocol: clients, admins, other brokers.
    listen_port: int = field(default=10911, metadata={"min": 0, "max": 65535})
    # Address the server binds.
    bind_address: str = "127.0.0.1"
    # Address the broker advertises to nameservers and clients (brokerIP1).
    broker_ip1: str = "127.0.0.1"
    # Port of the HA service (master/slave replication); unset: listen_port + 1 (RocketMQ's
    # rule; with listen_port 0, any free port).
    ha_listen_port: int | None = field(
        default=None, metadata={"min": 0, "max": MAX_PORT, "unset": "listen_port + 1"}
    )
    # ASYNC_MASTER, SYNC_MASTER or SLAVE.
    broker_role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"] = "ASYNC_MASTER"
    # A slave (or Raft follower) asked for an offset its queue lacks moves the consumer
    # only with this set; by default it answers "nothing new" and keeps the offset.
    offset_check_in_slave: bool = False
    # Create unknown topics on first send, from TBW102.
    auto_create_topic_enable: bool = True
    # Queues of an auto-created topic.
    default_topic_queue_nums: int = field(default=4, metadata={"min": 1, "max": 1024})
    # Create an unknown consumer group's config on first use.
    auto_create_subscription_group: bool = True
    # Broker-wide permission bits (6 = read and write).
    broker_permission: int = field(default=6, metadata={"min": 0, "max": 7})
    # ms between registrations with every nameserver (clamped to 10-60 s as RocketMQ).
    register_name_server_period: int = field(default=30_000, metadata={"min": 1})
    # Hold pulls that find nothing until a message arrives.
    long_polling_enable: bool = True
    # ms a pull with nothing to read is held at most (rocketq's default; RocketMQ's push
    # consumer asks for 15 s).
    long_polling_max_suspend_millis: int = field(default=15_000, metadata={"min": 0})
    # ms a pull is held without long polling (short polling).
    short_polling_time_mills: int = field(default=1_000, metadata={"min": 0})
    # Pop consumption: queues of the revive topic (rmq_sys_REVIVE_LOG_<cluster>) that hold
    # the pops' check points and acknowledgements, how often (ms) the revive looks for
    # pops whose invisible time is over, and the percentage of pops that read the group's
    # pop retry topic before the topic's queues (RocketMQ's reviveQueueNum, reviveInterval,
    # popFromRetryProbability).
    # The apache.rocketmq.v2 gRPC endpoint for RocketMQ 5's clients (RocketMQ's proxy
    # port, 8081 there): -1 serves none, 0 any free port.
    grpc_listen_port: int = field(default=-1, metadata={"min": -1, "max": 65535})
    revive_queue_num: int = field(default=8, metadata={"min": 1, "max": 64})
    revive_interval: int = field(default=1_000, metadata={"min": 10})
    pop_from_retry_probability: int = field(default=20, metadata={"min": 0, "max": 100})
    # Where a group popping a queue for the first time starts when it asks for the end
    # (RocketMQ 5's proxy always does): at the queue's first message while that is still
    # there and within access_message_in_memory_max_ratio of memory from the CommitLog's
    # end, else at the queue's last message (RocketMQ's initPopOffsetByCheckMsgInMem).
    init_pop_offset_by_check_msg_in_mem: bool = True
    # ms a queued send may wait before the broker answers SYSTEM_BUSY.
    wait_time_mills_in_send_queue: int = field(default=200, metadata={"min": 1})
    # Sends the broker holds at once before it answers SYSTEM_BUSY.
    send_thread_pool_queue_capacity: int = field(default=10_000, metadata={"min": 1})
    # Answer SYSTEM_BUSY when the store is slow instead of queuing without bound.
    broker_fast_failure_enable: bool = True
    # ms a consumer or producer may stay silent before it is dropped.
    channel_expired_timeout: int = field(default=120_000, metadata={"min": 1})
    # ms between persisting consumer offsets.
    flush_consumer_offset_interval: int = field(default=5_000, metadata={"min": 1})
    # Let consumers read from slave 1 when they are far behind.
    slave_read_enable: bool = False
    # Percent of memory a read may lag behind before slaves are suggested.
    access_message_in_memory_max_ratio: int = field(default=40, metadata={"min": 0, "max": 100})
    # The master's HA address for a slave ("host:port"); empty: from the nameserver.
    ha_master_address: str = ""
    # Bytes a slave may be behind before a SYNC_MASTER answers SLAVE_NOT_AVAILABLE.
    ha_max_gap_not_in_sync: int = field(default=256 * 1024 * 1024, metadata={"min": 0})
    # ms between a slave's progress reports when nothing arrives.
    ha_send_heartbeat_interval: int = field(default=5_000, metadata={"min": 1})
    # ms between a slave's copies of the master's topics, offsets and groups.
    slave_sync_interval: int = field(default=10_000, metadata={"min": 1})
    # Consumers sort out which tags match (TAG filtering on the broker uses hash codes).
    filter_support_retry: bool = False
    # Allow SQL92 subscriptions.
    enable_property_filter: bool = False
    # Delay of each level, level 1 first: numbers with a unit ms, s, m, h or d.
    message_delay_level: str = field(
        default=DEFAULT_DELAY_LEVELS, metadata={"check": check_delay_levels}
    )
    # ms between saves of the delay levels' progress (delay_offset.json).
    flush_delay_offset_interval: int = field(default=10_000, metadata={"min": 1})
    # ms an orderly consumer's queue lock lives without renewal (RocketMQ's
    # rocketmq.broker.rebalance.lockMaxLiveTime).
    rebalance_lock_max_live_time: int = field(default=60_000, metadata={"min": 1})
    # Refuse transactional (prepared) messages.
    reject_transaction_message: bool = False
    # ms a half message waits before its producer is asked how the transaction ended.
    transaction_timeout: int = field(default=6_000, metadata={"min": 0})
    # ms between rounds of the transaction check service.
    transaction_check_interval: int = field(default=60_000, metadata={"min": 1})
    # Checks of one half message before it is discarded.
    transaction_check_max: int = field(default=15, metadata={"min": 1})
    # Deliver messages at a given time (Message.deliver_at) through the timer store.
    timer_wheel_enable: bool = True
    # The farthest a delivery time may be, in seconds (40 days).
    timer_max_delay_sec: int = field(default=40 * 24 * 3600, metadata={"min": 1})
    # HTTP port of /metrics (Prometheus), /healthz and /readyz (0: no metrics server, and
    # nothing is counted); unset: listen_port + 2 (with listen_port 0, any free port).
    metrics_port: int | None = field(
        default=None, metadata={"min": 0, "max": MAX_PORT, "unset": "listen_port + 2"}
    )
    # Address the metrics server binds ("": bind_address).
    metrics_bind_address: str = ""
    # Lag gauges per queue (a queue_id label) instead of per topic and group: many more
    # series with many topics.
    metrics_queue_level: bool = False
    # Raft replication (DLedger): the brokers of a group elect a leader, which is the master
    # (broker_role and broker_id then follow the election).
    enable_dledger_commit_log: bool = False
    # Name of the Raft group (RocketMQ's dLegerGroup); usually the broker name.
    dledger_group: str = ""
    # Every member of the group as id-host:port, ";" between them, this broker included
    # (RocketMQ's dLegerPeers, e.g. "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-...").
    dledger_peers: str = field(default="", metadata={"check": check_dledger_peers})
    # This broker's member id in dledger_peers (RocketMQ's dLegerSelfId).
    dledger_self_id: str = ""
    # A member the group hands leadership back to when it is alive and caught up ("": none).
    dledger_preferred_leader_id: str = ""
    # ms between the leader's heartbeats.
    dledger_heartbeat_interval: int = field(default=2_000, metadata={"min": 1})
    # Heartbeats a follower misses before it starts an election.
    dledger_max_heartbeat_leak: int = field(default=3, metadata={"min": 1})
    # ms, the random pause before an election (or its retry) lies between these two.
    dledger_min_vote_interval: int = field(default=300, metadata={"min": 1})
    dledger_max_vote_interval: int = field(default=1_000, metadata={"min": 1})
    # ms between a follower's copies of the leader's topics, offsets and groups (Raft mode).
    dledger_sync_interval: int = field(default=1_000, metadata={"min": 1})
    # ms: followers beyond what a quorum needs get new entries at most this often, in one
    # batch, instead of on every append (0: every follower gets every append at once).
    dledger_spare_append_interval: int = field(default=5, metadata={"min": 0, "max": 1_000})

    def __post_init__(self) -> None:
        validate_config(self)
        check_server_bounds(self)
        check_server_security(self)
        for key, offset in DERIVED_PORTS.items():
            port = self.listen_port + offset
            if getattr(self, key) is None and self.listen_port and port > MAX_PORT:
                raise ConfigError(
                    f"BrokerConfig: {key}: unset, so derived as listen_port + {offset} = {port}, "
                    f"which is not a port (at most {MAX_PORT}); set {key}, or a listen_port "
                    f"of at most {MAX_PORT - offset}"
                )
        if self.enable_dledger_commit_log:
            self._check_dledger()

    def _check_dledger(self) -> None:
        def bad(key: str, why: str) -> ConfigError:
            return ConfigError(f"BrokerConfig: {key}: {why}")

        if not self.dledger_peers.strip():
            raise bad(
                "dledger_peers",
                "required with enable_dledger_commit_log; list every member as "
                '"n0-host:port;n1-host:port;n2-host:port"',
            )
        peers = parse_dledger_peers(self.dledger_peers)
        if self.dledger_self_id not in peers:
            raise bad(
                "dledger_self_id",
                f"{self.dledger_self_id!r} is not one of the members in dledger_peers "
                f"({', '.join(peers)})",
            )
        if self.dledger_preferred_leader_id and self.dledger_preferred_leader_id not in peers:
            raise bad(
                "dledger_preferred_leader_id",
                f"{self.dledger_preferred_leader_id!r} is not one of the members in "
                f"dledger_peers ({', '.join(peers)})",
            )
        if self.dledger_min_vote_interval > self.dledger_max_vote_interval:
            raise bad(
                "dledger_min_vote_interval",
                f"{self.dledger_min_vote_interval} is above dledger_max_vote_interval "
                f"{self.dledger_max_vote_interval}",
            )

    def port_of(self, key: PortKey) -> int:
        """The port to bind for ``key``: its value, or when unset listen_port + its offset
        (0, any free port, with listen_port 0). An explicit metrics_port 0 is 0 as well:
        check :attr:`metrics_enabled` first."""
        value: int | None = getattr(self, key)
        if value is not None:
            return value
        return self.listen_port + DERIVED_PORTS[key] if self.listen_port else 0

    def port_origin(self, key: PortKey) -> str:
        """Where ``key``'s port came from, for the error when it cannot be bound:
        ``"ha_listen_port, derived as listen_port + 1; set ha_listen_port to choose
        another"``, or just the key when it was set."""
        if getattr(self, key) is not None:
            return key
        return (
            f"{key}, derived as listen_port + {DERIVED_PORTS[key]}; set {key} to choose another"
            + (", or 0 to turn the metrics server off" if key == "metrics_port" else "")
        )

    @property
    def metrics_enabled(self) -> bool:
        """A metrics server runs (and counters count) unless metrics_port is 0."""
        return self.metrics_port != 0

    @property
    def raft_peers(self) -> dict[str, str]:
        """The Raft members, id -> "host:port" (this broker included)."""
        return parse_dledger_peers(self.dledger_peers)

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip1}:{self.port_of('ha_listen_port')}"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]


_ORDINAL = re.compile(r"-(\d+)$")


def ordinal_of(hostname: str) -> int:
    """The ordinal a Kubernetes StatefulSet gives its pod, from the pod's host name
    (``rocketq-broker-a-2`` -> 2); ValueError naming the name when it has none."""
    m = _ORDINAL.search(hostname.strip())
    if m is None:
        raise ValueError(
            f"host name {hostname!r} does not end in -<ordinal> as a StatefulSet pod's does "
            "(e.g. rocketq-broker-a-0); give the ordinal with --ordinal N instead"
        )
    return int(m.group(1))


def ordinal_settings(ordinal: int) -> dict[str, object]:
    """Who a broker is from its place in its group (its StatefulSet ordinal): with master/
    slave replication ordinal 0 is the master and the others are slaves of that broker id;
    with Raft it is member ``n<ordinal>`` (the role then follows the elections)."""
    settings: dict[str, object] = {"broker_id": ordinal, "dledger_self_id": f"n{ordinal}"}
    if ordinal > 0:
        settings["broker_role"] = "SLAVE"
    return settings


def load_broker_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> tuple[BrokerConfig, StoreConfig]:
    """Broker and store config from one broker.toml, ``ROCKETQ_*`` and flags. The store's
    ``store_host`` follows the broker's advertised address unless set (with listen_port 0
    the broker sets it once it knows its port)."""
    broker, store = load_configs((BrokerConfig, StoreConfig), path, env=env, overrides=overrides)
    assert isinstance(broker, BrokerConfig) and isinstance(store, StoreConfig)
    if store.store_host == StoreConfig().store_host and broker.listen_port:
        store = replace(store, store_host=broker.broker_addr)
    return broker, store
