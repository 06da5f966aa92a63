"""The route tables of one nameserver (RocketMQ's RouteInfoManager), as plain data.

Brokers register through a channel (a long-lived connection); a closed channel, a clean
unregister or 120 s of silence removes the broker and every route that only it served.
Nameservers never talk to each other: each one only knows what brokers told it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.common.message import MASTER_ID, TopicConfig
from rocketq.remoting.route_data import BrokerData, QueueData, TopicRouteData

log = logging.getLogger(__name__)


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: float
    data_version: int
    channel: int | None
    ha_server_addr: str
    max_phy_offset: int = 0
    last_update_wall: float = 0.0


@dataclass(frozen=True, slots=True)
class RegisterResult:
    master_addr: str
    ha_server_addr: str
    first: bool
    # A delta or heartbeat that did not apply: nothing of it was; the broker sends the table.
    need_full: bool = False
    data_version: int = -1  # the version of the broker's table held now (-1: none)


class RouteInfoManager:
    """Every operation costs what the broker concerned registers, never a scan of every
    topic: a full registration O(that broker's topics), a delta O(changed topics), a
    heartbeat O(1), a broker name's removal O(its topics)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        # broker address -> (cluster, broker name, broker id), for removals by address.
        self._identity: dict[str, tuple[str, str, int]] = {}
        # broker address -> the topic table it registered (at its live data_version):
        # deltas apply to it, and a slave that becomes master makes queue data from it.
        self._tables: dict[str, dict[str, TopicConfig]] = {}
        # broker name -> the topics holding queue data of that name (topic_queue_table's
        # index by broker name).
        self._queue_topics: dict[str, set[str]] = {}

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
        """A full registration: the broker's whole topic table (always applies). As in
        RocketMQ, a table at the version already held is not applied again."""
        prev_live, took_slot, first = self._admit(cluster, broker_addr, broker_name, broker_id)
        table = self._tables.get(broker_addr)
        if table is None or prev_live is None or prev_live.data_version != data_version:
            table = self._tables[broker_addr] = {t.topic_name: t for t in topics}
            took_slot = True
        if broker_id == MASTER_ID and took_slot:
            self._set_queue_datas(broker_name, table)
        live = BrokerLiveInfo(
            self.clock(), data_version, channel, ha_server_addr, max_phy_offset, time.time()
        )
        return self._alive(broker_addr, live, prev_live, first)

    def apply_delta(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        base_version: int,
        data_version: int,
        put: list[TopicConfig],
        deleted: list[str],
        channel: int | None,
        max_phy_offset: int = 0,
    ) -> RegisterResult:
        """The topics changed since ``base_version``; applies only while this broker's
        table is held at ``base_version``, else nothing happens and the answer asks for
        the full table."""
        held = self._held_version(cluster, broker_addr, broker_name)
        if held != base_version:
            if held is None:
                log.info(
                    "broker %s at %s is not registered here: asking for its full table",
                    broker_name,
                    broker_addr,
                )
            else:
                log.info(
                    "broker %s at %s sent changes from version %d, this nameserver holds "
                    "%d: asking for its full table",
                    broker_name,
                    broker_addr,
                    base_version,
                    held,
                )
            return RegisterResult(
                "", "", False, need_full=True, data_version=-1 if held is None else held
            )
        prev_live, took_slot, first = self._admit(cluster, broker_addr, broker_name, broker_id)
        table = self._tables[broker_addr]
        for t in put:
            table[t.topic_name] = t
        for name in deleted:
            table.pop(name, None)
        if broker_id == MASTER_ID:
            if took_slot:
                self._set_queue_datas(broker_name, table)
            else:
                for t in put:
                    self._put_queue(broker_name, t)
                for name in deleted:
                    self._drop_queue(broker_name, name)
        live = BrokerLiveInfo(
            self.clock(), data_version, channel, ha_server_addr, max_phy_offset, time.time()
        )
        return self._alive(broker_addr, live, prev_live, first)

    def heartbeat(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        data_version: int,
        channel: int | None,
        max_phy_offset: int = 0,
    ) -> RegisterResult:
        """Identity and data version only; applies while that version is held."""
        return self.apply_delta(
            cluster=cluster,
            broker_addr=broker_addr,
            broker_name=broker_name,
            broker_id=broker_id,
            ha_server_addr=ha_server_addr,
            base_version=data_version,
            data_version=data_version,
            put=[],
            deleted=[],
            channel=channel,
            max_phy_offset=max_phy_offset,
        )

    def held_table(self, broker_addr: str) -> dict[str, TopicConfig] | None:
        """The topic table registered from this address (a copy), None if none."""
        table = self._tables.get(broker_addr)
        return None if table is None else dict(table)

    def _held_version(self, cluster: str, broker_addr: str, broker_name: str) -> int | None:
        """The version of this broker's table held here; None if the broker (under this
        cluster and name) is not registered from this address."""
        ident = self._identity.get(broker_addr)
        live = self.broker_live_table.get(broker_addr)
        if (
            ident is None
            or live is None
            or ident[:2] != (cluster, broker_name)
            or broker_addr not in self._tables
        ):
            return None
        return live.data_version

    def _admit(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> tuple[BrokerLiveInfo | None, bool, bool]:
        """Put the address into the broker tables under this name and id; -> its previous
        live entry, whether it newly took that broker id's slot, and whether the broker
        (name, id) is new here."""
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
        self._identity[broker_addr] = (cluster, broker_name, broker_id)
        return self.broker_live_table.get(broker_addr), old != broker_addr, first

    def _alive(
        self, addr: str, live: BrokerLiveInfo, prev_live: BrokerLiveInfo | None, first: bool
    ) -> RegisterResult:
        """Record the registration as the broker's latest sign of life; -> the answer."""
        self.broker_live_table[addr] = live
        cluster, broker_name, broker_id = self._identity[addr]
        if prev_live is None:
            log.info(
                "new broker registered: cluster %s, broker %s id %d at %s (HA %s), %d topics",
                cluster,
                broker_name,
                broker_id,
                addr,
                live.ha_server_addr or "-",
                len(self._tables.get(addr, ())),
            )
        master_addr = ha_addr = ""
        if broker_id != MASTER_ID:
            master = self.broker_addr_table[broker_name].broker_addrs.get(MASTER_ID)
            master_live = self.broker_live_table.get(master) if master else None
            if master and master_live is not None:
                master_addr, ha_addr = master, master_live.ha_server_addr
        return RegisterResult(master_addr, ha_addr, first, data_version=live.data_version)

    # -- queue data (topic_queue_table and its index by broker name) ---------------------

    def _set_queue_datas(self, broker_name: str, table: dict[str, TopicConfig]) -> None:
        """The queue data of ``broker_name`` become its master's table: O(old + new)."""
        for topic in list(self._queue_topics.get(broker_name, ())):
            if topic not in table:
                self._drop_queue(broker_name, topic)
        for t in table.values():
            self._put_queue(broker_name, t)

    def _put_queue(self, broker_name: str, t: TopicConfig) -> None:
        self.topic_queue_table.setdefault(t.topic_name, {})[broker_name] = QueueData(
            broker_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.topic_sys_flag
        )
        self._queue_topics.setdefault(broker_name, set()).add(t.topic_name)

    def _drop_queue(self, broker_name: str, topic: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]
        names = self._queue_topics.get(broker_name)
        if names is not None:
            names.discard(topic)
            if not names:
                del self._queue_topics[broker_name]

    def touch(self, broker_addr: str) -> None:
        """The broker is alive (it asked whether its table changed, and it did not)."""
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_timestamp = self.clock()
            live.last_update_wall = time.time()

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> bool:
        if broker_addr not in self.broker_live_table and broker_addr not in self._identity:
            return False
        log.info("broker %s id %d at %s unregistered", broker_name, broker_id, broker_addr)
        self._remove(broker_addr, cluster, broker_name, broker_id)
        return True

    def on_channel_destroy(self, channel: int) -> list[str]:
        """The broker's connection closed (it died or lost us): remove it at once."""
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
            self._tables.pop(addr, None)
            return
        self._remove(addr, *ident)

    def _remove(self, addr: str, cluster: str, broker_name: str, broker_id: int) -> None:
        self.broker_live_table.pop(addr, None)
        self._identity.pop(addr, None)
        self._tables.pop(addr, None)
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
        for topic in list(self._queue_topics.get(broker_name, ())):
            self._drop_queue(broker_name, topic)

    def route(self, topic: str) -> TopicRouteData | None:
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
        return TopicRouteData([queues[n] for n in sorted(queues)], brokers)

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
            for name in names & queues.keys():
                self._drop_queue(name, topic)
            return True
        for name in list(queues):
            self._drop_queue(name, topic)
        return True
