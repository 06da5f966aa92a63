"""The route tables of one nameserver (RocketMQ's RouteInfoManager), as plain data.

Brokers register through a channel (a long-lived stream); a broken channel, a clean
unregister or 120 s of silence removes the broker and every route that only it served.
Nameservers never talk to each other: each one only knows what brokers told it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketq.cluster.message import MASTER_ID, TopicConfig

log = logging.getLogger(__name__)


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: float
    data_version: int
    channel: int | None
    ha_server_addr: str
    max_phy_offset: int = 0
    last_update_wall: float = 0.0


@dataclass(slots=True)
class TopicRoute:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str = ""


@dataclass(frozen=True, slots=True)
class RegisterResult:
    master_addr: str
    ha_server_addr: str
    first: bool


class RouteInfoManager:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        # broker address -> (cluster, broker name, broker id), for removals by address.
        self._identity: dict[str, tuple[str, str, int]] = {}

    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: list[TopicConfig],
        data_version: int,
        channel: int | None,
        max_phy_offset: int = 0,
    ) -> RegisterResult:
        known = self._identity.get(broker_addr)
        if known is not None and known[1] != broker_name:
            # The address now serves another broker name: the old one loses it first.
            self._remove(broker_addr, *known)
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        data = self.broker_addr_table.get(broker_name)
        first = data is None
        if data is None:
            data = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
        # One record per address: a master/slave switch drops the address's old id.
        for bid, addr in list(data.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del data.broker_addrs[bid]
        old = data.broker_addrs.get(broker_id)
        data.broker_addrs[broker_id] = broker_addr
        first = first or old is None
        if old is not None and old != broker_addr:
            self._forget_address(old)
        prev_live = self.broker_live_table.get(broker_addr)
        if broker_id == MASTER_ID and (
            first or prev_live is None or prev_live.data_version != data_version
        ):
            self._update_queue_datas(broker_name, topics)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.clock(), data_version, channel, ha_server_addr, max_phy_offset, time.time()
        )
        self._identity[broker_addr] = (cluster, broker_name, broker_id)
        if prev_live is None:
            log.info(
                "new broker registered: cluster %s, broker %s id %d at %s (HA %s)",
                cluster,
                broker_name,
                broker_id,
                broker_addr,
                ha_server_addr or "-",
            )
        master_addr = ha_addr = ""
        if broker_id != MASTER_ID:
            master = data.broker_addrs.get(MASTER_ID)
            live = self.broker_live_table.get(master) if master else None
            if master and live is not None:
                master_addr, ha_addr = master, live.ha_server_addr
        return RegisterResult(master_addr, ha_addr, first)

    def _update_queue_datas(self, broker_name: str, topics: list[TopicConfig]) -> None:
        names = {t.topic_name for t in topics}
        for t in topics:
            self.topic_queue_table.setdefault(t.topic_name, {})[broker_name] = QueueData(
                broker_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.topic_sys_flag
            )
        # Topics the master no longer has lose this broker's queues.
        for topic, queues in list(self.topic_queue_table.items()):
            if topic not in names and broker_name in queues:
                del queues[broker_name]
                if not queues:
                    del self.topic_queue_table[topic]

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> bool:
        if broker_addr not in self.broker_live_table and broker_addr not in self._identity:
            return False
        log.info("broker %s id %d at %s unregistered", broker_name, broker_id, broker_addr)
        self._remove(broker_addr, cluster, broker_name, broker_id)
        return True

    def on_channel_destroy(self, channel: int) -> list[str]:
        """The broker's stream broke (it died or lost us): remove it at once."""
        gone = [a for a, live in self.broker_live_table.items() if live.channel == channel]
        for addr in gone:
            log.warning("channel of broker %s closed: removing its routes", addr)
            self._forget_address(addr)
        return gone

    def scan_not_active_brokers(self, expired_ms: int) -> list[str]:
        now = self.clock()
        gone = [
            addr
            for addr, live in self.broker_live_table.items()
            if (now - live.last_update_timestamp) * 1000 > expired_ms
        ]
        for addr in gone:
            log.warning("broker %s not heard from for %d ms: removing it", addr, expired_ms)
            self._forget_address(addr)
        return gone

    def _forget_address(self, addr: str) -> None:
        ident = self._identity.get(addr)
        if ident is None:
            self.broker_live_table.pop(addr, None)
            return
        self._remove(addr, *ident)

    def _remove(self, addr: str, cluster: str, broker_name: str, broker_id: int) -> None:
        self.broker_live_table.pop(addr, None)
        self._identity.pop(addr, None)
        data = self.broker_addr_table.get(broker_name)
        if data is None:
            return
        for bid, a in list(data.broker_addrs.items()):
            if a == addr:
                del data.broker_addrs[bid]
        if data.broker_addrs:
            return
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(data.cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[data.cluster]
        for topic, queues in list(self.topic_queue_table.items()):
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def route(self, topic: str) -> TopicRoute | None:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        brokers = [
            BrokerData(d.cluster, d.broker_name, dict(d.broker_addrs))
            for name in sorted(queues)
            if (d := self.broker_addr_table.get(name)) is not None
        ]
        if not brokers:
            return None
        return TopicRoute([queues[n] for n in sorted(queues)], brokers)

    def topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def delete_topic(self, topic: str, cluster: str = "") -> bool:
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return False
        if cluster:
            names = self.cluster_addr_table.get(cluster)
            if names is None:
                return False
            for name in names:
                queues.pop(name, None)
            if queues:
                return True
        del self.topic_queue_table[topic]
        return True
