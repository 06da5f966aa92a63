"""The broker: a message store, the managers around it, its remoting request handlers and
its registration with the nameservers. ``await Broker(...).start()``; ``await stop()``."""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.request_map import broker_requirement
from rocketq.auth.server_security import ServerSecurity, server_security
from rocketq.broker.config import BrokerConfig, parse_delay_levels
from rocketq.broker.consumer_manager import ConsumerManager
from rocketq.broker.consumer_offset import ConsumerOffsetManager
from rocketq.broker.flow_control import FlowControl
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.metrics import BrokerCounters
from rocketq.broker.metrics_export import readiness, registry_for
from rocketq.broker.pop import PopService
from rocketq.broker.pull_processor import PullProcessor
from rocketq.broker.raft_member import RaftMember, slave_id_of
from rocketq.broker.rebalance_lock import RebalanceLockManager
from rocketq.broker.registration import NameServerRegistration
from rocketq.broker.schedule import SCHEDULE_TOPIC_BYTES, ScheduleMessageService
from rocketq.broker.send_processor import SendProcessor
from rocketq.broker.slave_sync import SlaveSynchronizer
from rocketq.broker.stats import BrokerStats
from rocketq.broker.subscription_group import SubscriptionGroupManager
from rocketq.broker.timer import TIMER_TOPIC_BYTES, TimerMessageStore
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.broker.transaction import TransactionalMessageService
from rocketq.broker.wire.admin import AdminRequests
from rocketq.broker.wire.auth import AuthRequests
from rocketq.broker.wire.client import ClientRequests
from rocketq.broker.wire.pop import PopRequests
from rocketq.broker.wire.pull import PullRequests
from rocketq.broker.wire.send import SendRequests
from rocketq.common.aio import cancel_all
from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import ConfigError
from rocketq.common.message import SCHEDULE_TOPIC, TIMER_TOPIC, TopicConfig
from rocketq.common.metrics import Base, bounds_collector
from rocketq.common.metrics_server import MetricsAuth, MetricsServer
from rocketq.common.ports import PortBindError
from rocketq.remoting.codes import RocketqRequestCode
from rocketq.remoting.transport import RemotingServer
from rocketq.remoting.transport import listen_socket as remoting_listen_socket
from rocketq.replication.ha.master import HAMaster, SlaveConnection, listen_socket
from rocketq.replication.ha.slave import HASlave
from rocketq.storage.message_store import MessageStore

if TYPE_CHECKING:
    from rocketq.broker.grpc_v2.endpoint import Endpoint

log = logging.getLogger(__name__)


def check_nodes_prove_identity(config: BrokerConfig, security: ServerSecurity) -> None:
    """With authentication on, the HA and Raft ports must know who connects: the inner
    credentials sign the hellos and handshakes, or TLS requires a client certificate and
    says which certificates are nodes' (tls_node_name_pattern: one merely from the trusted
    CA may be a user's); without either they would stream the CommitLog to anyone."""
    if not config.authentication_enabled or security.inner is not None:
        return
    if (
        security.tls is not None
        and config.tls_server_need_client_auth == "require"
        and config.tls_node_name_pattern
    ):
        return
    raise ConfigError(
        "authentication_enabled is on but neither inner_client_authentication_credentials "
        'nor tls_server_need_client_auth = "require" with a tls_node_name_pattern is set: '
        "the HA and Raft ports could not tell this group's members from anyone; set "
        'inner_client_authentication_credentials = {"accessKey": "...", "secretKey": "..."} '
        "(the same on every node), or require client certificates and name the nodes' "
        'certificates (tls_node_name_pattern = "spiffe://example.org/rocketq/node/*")'
    )


class Broker:
    # Read by the store's tag-code hooks, which are made before these are.
    schedule: ScheduleMessageService
    timer: TimerMessageStore
    remoting: RemotingServer  # read by the metrics' bounds collector, made before it is

    def __init__(
        self,
        config: BrokerConfig,
        store_config: StoreConfig,
        *,
        sockets: Mapping[str, socket.socket] | None = None,
    ) -> None:
        """``sockets``: listening sockets handed down by the process that started this
        one (``client``, ``ha``, ``raft``, ``metrics``), served instead of binding those
        ports; the config's ports become theirs."""
        inherited: dict[str, socket.socket | None] = dict(sockets or {})
        # Bind first: with listen_port 0 the real port is what the broker advertises and
        # what its records and message ids carry.
        try:
            self.remoting_socket = inherited.pop("client", None) or remoting_listen_socket(
                config.bind_address, config.listen_port
            )
        except OSError as exc:
            raise PortBindError(
                f"cannot listen on {config.bind_address}:{config.listen_port} "
                f"({exc.strerror or exc}); is another broker running there? set listen_port",
                name="client",
                port=config.listen_port,
                code=exc.errno,
            ) from None
        self.port = self.remoting_socket.getsockname()[1]
        # The ports left unset follow the listen port as given (listen_port 0: any free
        # port); from here on the config holds every port as a number.
        given = config
        config = replace(
            config,
            listen_port=self.port,
            ha_listen_port=given.port_of("ha_listen_port"),
            metrics_port=given.port_of("metrics_port"),
        )
        if config.enable_dledger_commit_log:
            # Raft decides the role: every member is a slave until it leads.
            config = replace(config, broker_role="SLAVE", broker_id=slave_id_of(config))
        self.ha_socket: socket.socket | None = None
        if config.broker_role != "SLAVE":
            # The HA port: slaves connect here (plain TCP, as RocketMQ's 10912).
            try:
                self.ha_socket = inherited.pop("ha", None) or listen_socket(
                    config.bind_address, config.port_of("ha_listen_port")
                )
            except OSError as exc:
                self.remoting_socket.close()
                if given.ha_listen_port is not None:
                    raise
                raise PortBindError(
                    f"cannot listen on {config.bind_address}:{config.port_of('ha_listen_port')} "
                    f"for HA ({given.port_origin('ha_listen_port')})",
                    name="ha",
                    port=config.port_of("ha_listen_port"),
                    code=exc.errno,
                ) from None
            config = replace(config, ha_listen_port=self.ha_socket.getsockname()[1])
        if store_config.store_host == StoreConfig().store_host:
            store_config = replace(store_config, store_host=config.broker_addr)
        # Users and ACL policies live beside the topics; the security keys become the
        # access check, the ports' TLS and how this broker's own calls are signed.
        self.auth_metadata = AuthMetadata(Path(store_config.config_dir))
        try:
            self.security = server_security(
                config,
                self.auth_metadata,
                functools.partial(broker_requirement, cluster=config.broker_cluster_name),
            )
            check_nodes_prove_identity(config, self.security)
        except BaseException:
            if self.ha_socket is not None:
                self.ha_socket.close()
            self.remoting_socket.close()
            raise
        self.client_security = self.security.client
        self.inner_credentials = self.security.inner
        # Counted only with a metrics server to show it.
        self.metrics = BrokerCounters() if given.metrics_enabled else None
        self.metrics_server: MetricsServer | None = None
        if self.metrics is not None:
            address = config.metrics_bind_address or config.bind_address
            try:
                self.metrics_server = MetricsServer(
                    address,
                    config.port_of("metrics_port"),
                    registry_for(self, self.metrics),
                    lambda: readiness(self),
                    what="broker",
                    workers=config.metrics_http_workers,
                    timeout=config.metrics_http_timeout_seconds,
                    tls=self.security.metrics_tls,
                    auth=MetricsAuth.from_config(config),
                    sock=inherited.pop("metrics", None),
                )
                # What the bounds of the remoting and metrics ports refused.
                self.metrics_server.registry.register(
                    bounds_collector(
                        lambda: Base(
                            ("cluster", "node_type", "node_id"),
                            (config.broker_cluster_name, "broker", config.broker_name),
                        ),
                        lambda: self.remoting.guard,
                        lambda: self.metrics_server.rejected if self.metrics_server else {},
                    )
                )
            except OSError as exc:
                if self.ha_socket is not None:
                    self.ha_socket.close()
                self.remoting_socket.close()
                if given.metrics_port is not None:
                    raise
                raise PortBindError(
                    f"cannot listen on {address}:{config.port_of('metrics_port')} for metrics "
                    f"({given.port_origin('metrics_port')})",
                    name="metrics",
                    port=config.port_of("metrics_port"),
                    code=exc.errno,
                ) from None
            config = replace(config, metrics_port=self.metrics_server.port)
        self.config = config
        self.store_config = store_config
        # The Raft port is bound when the member starts (RaftMember.start).
        self.raft_socket = inherited.pop("raft", None) if config.enable_dledger_commit_log else None
        for name, unused in inherited.items():
            if unused is not None:
                log.warning("no %s port on this broker: its inherited socket is closed", name)
                unused.close()
        # A SCHEDULE_TOPIC_XXXX entry's tag-hash field holds its delivery time.
        self.store = MessageStore(
            store_config,
            auto_commit=not config.enable_dledger_commit_log,  # Raft: up to the commit point
            tags_code_overrides={
                SCHEDULE_TOPIC_BYTES: lambda t, p, ts: self.schedule.tags_code(t, p, ts),
                TIMER_TOPIC_BYTES: lambda t, p, ts: self.timer.tags_code(t, p, ts),
            },
        )
        config_dir = Path(store_config.config_dir)
        self.topics = TopicConfigManager(
            config_dir / "topics.json",
            auto_create=config.auto_create_topic_enable,
            default_queue_nums=config.default_topic_queue_nums,
        )
        self.groups = SubscriptionGroupManager(
            config_dir / "subscriptionGroup.json",
            auto_create=config.auto_create_subscription_group,
        )
        self.offsets = ConsumerOffsetManager(config_dir / "consumerOffset.json")
        self.consumers = ConsumerManager()
        self.holds = PullRequestHoldService()
        self.locks = RebalanceLockManager(config.rebalance_lock_max_live_time)
        self.flow = FlowControl(
            capacity=config.send_thread_pool_queue_capacity,
            max_wait_ms=config.wait_time_mills_in_send_queue,
            enabled=config.broker_fast_failure_enable,
        )
        self.schedule = ScheduleMessageService(
            self.store,
            parse_delay_levels(config.message_delay_level),
            config_dir / "delay_offset.json",
            flush_interval_ms=config.flush_delay_offset_interval,
        )
        self.transactions = TransactionalMessageService(self)
        self.timer = TimerMessageStore(
            self.store,
            Path(store_config.store_path_root_dir),
            max_delay_ms=config.timer_max_delay_sec * 1000,
        )
        self.send = SendProcessor(
            config,
            self.store,
            self.topics,
            self.groups,
            self.flow,
            self.schedule,
            self.transactions,
            self.timer if config.timer_wheel_enable else None,
        )
        self.pull = PullProcessor(
            config, self.store, self.topics, self.groups, self.offsets, self.holds
        )
        self.pop = PopService(self)
        self.grpc: Endpoint | None = None  # the v2 endpoint (grpc_listen_port)
        self.registration = NameServerRegistration(
            config.namesrv_addrs,
            identity=self._identity,
            topics=self.topics,
            period_ms=config.register_name_server_period,
            security=self.client_security,
        )
        self.topics.on_change = self.registration.register_now
        self.topics.on_put = self._prepare_queues
        self.ha_master: HAMaster | None = None
        self.ha_slave: HASlave | None = None
        if config.enable_dledger_commit_log:
            pass  # Raft replicates (broker/raft_member.py)
        elif config.broker_role == "SLAVE":
            self.ha_slave = HASlave(
                self.store,
                lambda: config.ha_master_address or self.registration.master_ha_addr,
                broker_addr=config.broker_addr,
                broker_id=config.broker_id,
                report_interval=config.ha_send_heartbeat_interval / 1000,
                on_lost=self.registration.register_now,
                inner=self.inner_credentials,
                ssl=self.client_security.ssl if self.client_security is not None else None,
            )
        else:
            self.ha_master = HAMaster(
                self.store,
                max_gap=config.ha_max_gap_not_in_sync,
                on_slave=self._slave_connected,
                bounds=config,  # the HA port keeps the broker's server bounds too
                heartbeat_interval=config.ha_send_heartbeat_interval / 1000,
                inner=self.inner_credentials,
                tls=self.security.tls,
            )
        self.send.ha = self.ha_master if config.broker_role == "SYNC_MASTER" else None
        self.sync = SlaveSynchronizer(self)
        self.raft = RaftMember(self) if config.enable_dledger_commit_log else None
        self.send.raft = self.raft
        self.send.metrics = self.pull.metrics = self.transactions.metrics = self.metrics
        self.stats = BrokerStats()
        self.send.stats = self.pull.stats = self.stats
        self.stopping = False
        self.clients = ClientRequests(self)
        self.remoting = RemotingServer(
            {
                **SendRequests(self).handlers(),
                **PullRequests(self).handlers(),
                **PopRequests(self).handlers(),
                **self.clients.handlers(),
                **AdminRequests(self).handlers(),
                **AuthRequests(self, self.auth_metadata).handlers(),
                RocketqRequestCode.AUTH_SESSION: self.security.session,
            },
            on_close=self.clients.connection_closed,
            # The sends of one read are written to the CommitLog in one pwrite, before
            # their answers, and leave for the slave or the Raft followers at once, in one
            # write (MessageStore.hold_writes, MessageStore.settle), not once per send.
            before_read=self.store.hold_writes,
            after_read=self.store.settle,
            bounds=config,
            access=self.security.hook,
            tls=self.security.tls,
        )
        # What the HA and Raft ports refuse counts in rocketq_remoting_rejected_total
        # with the remoting port's, its reasons prefixed ha_ and raft_.
        for port in (self.ha_master, self.raft.server if self.raft is not None else None):
            if port is not None:
                port.guard.count_into(self.remoting.guard.rejected)
        self.boot_time = time.time()
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[Any]] = set()

    def _prepare_queues(self, put: list[TopicConfig]) -> None:
        """New or grown topics: the store makes their queues' files ahead of their first
        messages, on a thread of its own. On a writer only: its queue offsets are its own,
        a replica's follow what it copies."""
        if not self.store.running or self.config.broker_role == "SLAVE":
            return
        for t in put:
            self.store.prepare_queues(t.topic_name, max(t.read_queue_nums, t.write_queue_nums))

    def _slave_connected(self, conn: SlaveConnection) -> None:
        """A slave (re)connected: take back the consumer offsets it kept while this master
        was away (consumers commit to the slave they read from)."""
        # With inner credentials, only a slave that proved who it is (a signed hello, a
        # verified certificate) is called back: a forged hello names any address.
        trusted = conn.authenticated or self.inner_credentials is None
        if conn.broker_addr and trusted:
            task = asyncio.ensure_future(self.sync.take_back_offsets(conn.broker_addr))
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)

    @property
    def grpc_port(self) -> int:
        """The port of the apache.rocketmq.v2 endpoint; -1 without one."""
        return self.grpc.port if self.grpc is not None else -1

    def _identity(self) -> dict[str, str]:
        """Who this broker is now (REGISTER_BROKER's header fields); registration adds the
        topics (full, delta or none)."""
        c = self.config
        return {
            "clusterName": c.broker_cluster_name,
            "brokerName": c.broker_name,
            "brokerId": str(c.broker_id),
            "brokerAddr": c.broker_addr,
            "haServerAddr": c.ha_server_addr,
            "maxPhyOffset": str(self.store.max_phy_offset),
        }

    async def start(self) -> None:
        if self.metrics_server is not None:
            # First: /healthz answers and /readyz says why not while the store recovers.
            await self.metrics_server.start()
        await asyncio.to_thread(self._load_configs)
        await self.store.start()
        self.store.add_arrival_listener(self.holds.notify, idle=self.holds.idle)
        if self.raft is not None:
            await self.raft.start()
        if self.config.broker_role != "SLAVE":
            self.schedule.start()
            self.transactions.start()
            if self.config.timer_wheel_enable:
                self.timer.start()
        if self.ha_master is not None and self.ha_socket is not None:
            await self.ha_master.start(self.ha_socket)
        await self.remoting.start(self.config.bind_address, 0, sock=self.remoting_socket)
        if self.ha_slave is not None:
            self.ha_slave.start()
            self.sync.start()
        self.pop.start()  # the revive: it works while this broker writes
        if self.config.grpc_listen_port >= 0:
            from rocketq.broker.grpc_v2.endpoint import Endpoint

            self.grpc = Endpoint(self, self.config.bind_address, self.config.grpc_listen_port)
            await self.grpc.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.flow.probe()),
            loop.create_task(self._housekeeping()),
            loop.create_task(self.stats.run()),
        ]
        self.registration.start()
        log.info(
            "The broker[%s, %s] boot success. role %s, name server is %s",
            self.config.broker_name,
            self.config.broker_addr,
            self.config.broker_role,
            self.config.namesrv_addr,
        )

    def _load_configs(self) -> None:
        self.auth_metadata.load()
        self.security.seed()
        self.topics.load()
        self.groups.load()
        self.offsets.load()
        self.schedule.load()
        self.timer.load()
        if TIMER_TOPIC not in self.topics.topics:
            self.topics.topics[TIMER_TOPIC] = TopicConfig(TIMER_TOPIC, 1, 1)
        levels = self.schedule.max_level
        if self.topics.topics[SCHEDULE_TOPIC].write_queue_nums < levels:
            self.topics.topics[SCHEDULE_TOPIC] = TopicConfig(SCHEDULE_TOPIC, levels, levels)

    async def _housekeeping(self) -> None:
        """Persist offsets every few seconds; drop silent clients."""
        interval = self.config.flush_consumer_offset_interval / 1000
        while True:
            await asyncio.sleep(interval)
            if self.offsets.dirty:
                await asyncio.to_thread(self.offsets.persist)
            self.consumers.scan_not_active(self.config.channel_expired_timeout)

    async def stop(self) -> None:
        """Graceful stop: unregister, stop serving, persist, flush and close the store."""
        c = self.config
        self.stopping = True  # /readyz: no longer ready
        await self.registration.stop(
            {
                "clusterName": c.broker_cluster_name,
                "brokerName": c.broker_name,
                "brokerId": str(c.broker_id),
                "brokerAddr": c.broker_addr,
            }
        )
        await self.remoting.stop()
        if self.ha_slave is not None:
            await self.ha_slave.stop()
        await self.sync.stop()
        if self.ha_master is not None:
            await self.ha_master.stop()
        await cancel_all(self._tasks)
        if self.grpc is not None:
            await self.grpc.stop()
        await self.pop.stop()
        if self.raft is not None:
            await self.raft.stop()
        await self.schedule.stop()
        await self.transactions.stop()
        await self.timer.stop()
        await asyncio.to_thread(self.offsets.persist)
        await self.topics.close()
        await self.store.shutdown()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        log.info("broker %s stopped", c.broker_name)
