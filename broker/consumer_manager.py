"""Who is connected: consumer groups and their clients and subscriptions, producer groups,
and each client's event stream (RocketMQ's ConsumerManager / ProducerManager).

A client heartbeats every 30 s; one silent for ``channel_expired_timeout`` (120 s) is
dropped, and one whose event stream breaks is dropped at once. When a group's membership
changes every client of the group is told, so it rebalances without waiting 20 s.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.broker.client_bindings import ClientBindings

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Subscription:
    topic: str
    expression: str
    expression_type: str
    codes: frozenset[int]
    version: int


# The consume type of a group's pop consumers (RocketMQ 5's ConsumeType.CONSUME_POP): the
# v2 endpoint's simple and push consumers.
CONSUME_POP: Final = "CONSUME_POP"


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: str = ""
    message_model: str = "CLUSTERING"
    consume_from_where: str = ""
    clients: dict[str, float] = field(default_factory=dict)  # client id -> last heartbeat
    client_addrs: dict[str, str] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)


class ConsumerManager:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.producer_groups: dict[str, dict[str, float]] = {}
        # client id -> queue of events for its ClientChannel stream: ("ids", group),
        # ("reset", group, topic) or a ready-made event object (transaction checks).
        self.channels: dict[str, asyncio.Queue[Any]] = {}
        # client id -> (language, protocol) of the clients of the v2 endpoint, from their
        # x-mq-language header (a remoting client's language is its channel's).
        self.client_kinds: dict[str, tuple[str, str]] = {}
        # With authentication on: which user and connection each client id belongs to
        # (the remoting port's and the v2 endpoint's clients alike).
        self.bindings = ClientBindings(clock=clock)

    def register_consumer(
        self,
        group: str,
        client_id: str,
        *,
        client_addr: str,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: list[Subscription],
    ) -> bool:
        """Record a heartbeat; True if the group's membership changed (and was notified)."""
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type = consume_type
        info.message_model = message_model
        info.consume_from_where = consume_from_where
        is_new = client_id not in info.clients
        info.clients[client_id] = self.clock()
        info.client_addrs[client_id] = client_addr
        for sub in subscriptions:
            old = info.subscriptions.get(sub.topic)
            if old is None or old.version < sub.version or old.expression != sub.expression:
                info.subscriptions[sub.topic] = sub
        if is_new:
            log.info("consumer %s joined group %s", client_id, group)
            self.notify_ids_changed(group)
        return is_new

    def register_producer(self, group: str, client_id: str) -> None:
        self.producer_groups.setdefault(group, {})[client_id] = self.clock()

    def unregister_client(self, client_id: str, *, reason: str) -> None:
        for group, info in list(self.groups.items()):
            if client_id in info.clients:
                del info.clients[client_id]
                info.client_addrs.pop(client_id, None)
                log.info("consumer %s left group %s (%s)", client_id, group, reason)
                if not info.clients:
                    del self.groups[group]
                else:
                    self.notify_ids_changed(group)
        for clients in self.producer_groups.values():
            clients.pop(client_id, None)
        self.client_kinds.pop(client_id, None)

    def scan_not_active(self, expired_ms: int) -> None:
        now = self.clock()
        silent = {
            cid
            for info in self.groups.values()
            for cid, seen in info.clients.items()
            if (now - seen) * 1000 > expired_ms
        }
        silent |= {
            cid
            for clients in self.producer_groups.values()
            for cid, seen in clients.items()
            if (now - seen) * 1000 > expired_ms
        }
        for cid in silent:
            self.unregister_client(cid, reason=f"no heartbeat for {expired_ms} ms")

    def client_ids(self, group: str) -> list[str]:
        info = self.groups.get(group)
        return sorted(info.clients) if info else []

    def subscription(self, group: str, topic: str) -> Subscription | None:
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info else None

    # -- client event streams ----------------------------------------------------------

    def open_channel(self, client_id: str) -> asyncio.Queue[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.channels[client_id] = queue
        return queue

    def close_channel(self, client_id: str, queue: asyncio.Queue[Any]) -> None:
        if self.channels.get(client_id) is queue:
            del self.channels[client_id]
            self.unregister_client(client_id, reason="its connection closed")

    def tell_producer(self, group: str, event: object) -> bool:
        """Send an event to one live producer of the group (any); False if none is."""
        live = [cid for cid in self.producer_groups.get(group, {}) if cid in self.channels]
        if not live:
            return False
        self.channels[random.choice(live)].put_nowait(event)
        return True

    def notify_ids_changed(self, group: str) -> None:
        info = self.groups.get(group)
        if info is None:
            return
        self._tell(info, ("ids", group))

    def notify_reset_offset(self, group: str, topic: str) -> None:
        info = self.groups.get(group)
        if info is not None:
            self._tell(info, ("reset", group, topic))

    def _tell(self, info: ConsumerGroupInfo, event: tuple[str, ...]) -> None:
        for cid in info.clients:
            channel = self.channels.get(cid)
            if channel is not None:
                channel.put_nowait(event)
