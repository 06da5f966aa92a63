"""What a producer or consumer shares with the cluster: route cache, broker connections,
heartbeats and the broker-to-client event streams (RocketMQ's MQClientInstance).

Routes are refreshed every 30 s and at once after a failed call; heartbeats go to every
broker of the routes every 30 s; a consumer opens an event stream to each broker so the
broker can tell it at once that its group changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

import grpc

from rocketq.cluster.errors import ConnectBrokerError, RocketqError, TopicNotExistError
from rocketq.cluster.message import MASTER_ID, PERM_READ, PERM_WRITE, MessageQueue
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.route_data import TopicRouteData
from rocketq.sdk.remoting import BrokerClient, BrokerConnections, NameServerClient, check

log = logging.getLogger(__name__)

_instances = itertools.count()


def local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def new_client_id() -> str:
    """ip@pid#n: unique per client object, stable for its life (RocketMQ's clientId)."""
    return f"{local_ip()}@{os.getpid()}#{next(_instances)}"


def publish_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Writable queues of brokers that currently have a master."""
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    return [
        MessageQueue(topic, q.broker_name, i)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if q.perm & PERM_WRITE and q.broker_name in masters
        for i in range(q.write_queue_nums)
    ]


def consumer_heartbeat(
    client_id: str,
    group: str,
    *,
    consume_type: str,
    message_model: str,
    consume_from_where: str,
    subscriptions: dict[str, tuple[str, str]],
) -> pb.HeartbeatRequest:
    """A consumer's heartbeat: its group and its subscriptions (topic -> (expression, type))."""
    return pb.HeartbeatRequest(
        client_id=client_id,
        consumers=[
            pb.ConsumerData(
                group=group,
                consume_type=consume_type,
                message_model=message_model,
                consume_from_where=consume_from_where,
                subscriptions=[
                    pb.SubscriptionData(topic=t, expression=e, expression_type=k)
                    for t, (e, k) in subscriptions.items()
                ],
            )
        ],
    )


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    return [
        MessageQueue(topic, q.broker_name, i)
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if q.perm & PERM_READ
        for i in range(q.read_queue_nums)
    ]


# Route lookups in flight while refreshing every topic's route: a client with thousands of
# topics refreshes them in a fraction of the period instead of one lookup after another.
ROUTE_REFRESH_IN_FLIGHT: Final = 16


class ClientInstance:
    def __init__(
        self,
        namesrv: str,
        *,
        client_id: str | None = None,
        poll_name_server_interval: float = 30.0,
        heartbeat_interval: float = 30.0,
        timeout: float = 3.0,
    ) -> None:
        self.client_id = client_id or new_client_id()
        self.nameserver = NameServerClient(namesrv, timeout=timeout)
        self.brokers = BrokerConnections()
        self.timeout = timeout
        self.poll_interval = poll_name_server_interval
        self.heartbeat_interval = heartbeat_interval
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.heartbeat: Callable[[], pb.HeartbeatRequest] | None = None
        # Events from brokers: (event, the broker's address).
        self.on_event: Callable[[pb.ServerEvent, str], Awaitable[None]] | None = None
        # Topics to keep fresh besides those looked up through ``route`` (a producer's
        # topics first sent through the auto-create template), and who hears of a topic
        # whose route changed.
        self.extra_topics: Callable[[], Iterable[str]] = tuple
        self.on_route: Callable[[str, TopicRouteData], None] | None = None
        self._channels: dict[str, asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.started = False

    async def start(self) -> None:
        self.started = True
        self._tasks = [
            asyncio.ensure_future(self._every(self.poll_interval, self.refresh_routes)),
            asyncio.ensure_future(self._every(self.heartbeat_interval, self.heartbeat_all)),
        ]

    async def _every(self, interval: float, fn: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()
            except RocketqError as exc:
                log.warning("%s failed: %s", getattr(fn, "__name__", fn), exc)

    # -- routes ------------------------------------------------------------------------

    async def update_route(self, topic: str) -> TopicRouteData:
        """Fetch a topic's route now (raises TopicNotExistError for an unknown topic)."""
        route = await self.nameserver.route(topic)
        self.routes[topic] = route
        for b in route.broker_datas:
            self.broker_addrs[b.broker_name] = dict(b.broker_addrs)
            if self.on_event is not None:
                for addr in b.broker_addrs.values():
                    self._open_channel(addr)
        return route

    async def route(self, topic: str) -> TopicRouteData:
        cached = self.routes.get(topic)
        return cached if cached is not None else await self.update_route(topic)

    async def watch_cluster(self) -> None:
        """Know every broker of the cluster, not only those of the routes used so far (a
        transactional producer must hear every broker's checks)."""
        info = await self.nameserver.cluster_info()
        for name, data in info.broker_addr_table.items():
            self.broker_addrs[name] = dict(data.broker_addrs)
            if self.on_event is not None:
                for addr in data.broker_addrs.values():
                    self._open_channel(addr)

    async def refresh_routes(self) -> None:
        """Fetch every used topic's route again (RocketMQ's updateTopicRouteInfoFromNameServer),
        ``ROUTE_REFRESH_IN_FLIGHT`` lookups at a time; a changed route goes to ``on_route``,
        a topic no nameserver knows any more is forgotten. The first failure to reach the
        nameservers ends the round and is raised."""
        topics = iter(sorted({*self.routes, *self.extra_topics()}))
        failures: list[RocketqError] = []

        async def worker() -> None:
            for topic in topics:
                if failures:
                    return
                old = self.routes.get(topic)
                try:
                    route = await self.update_route(topic)
                except TopicNotExistError:
                    self.routes.pop(topic, None)
                    continue
                except RocketqError as exc:
                    failures.append(exc)
                    return
                if self.on_route is not None and route != old:
                    self.on_route(topic, route)

        await asyncio.gather(*(worker() for _ in range(ROUTE_REFRESH_IN_FLIGHT)))
        if failures:
            raise failures[0]

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def read_addr(self, broker_name: str, preferred_id: int = MASTER_ID) -> str | None:
        """The broker to read from: the one asked for, else the master, else a slave."""
        addrs = self.broker_addrs.get(broker_name, {})
        for bid in (preferred_id, MASTER_ID, *sorted(addrs)):
            if bid in addrs:
                return addrs[bid]
        return None

    def broker(self, addr: str) -> BrokerClient:
        return self.brokers.get(addr)

    def all_broker_addrs(self) -> set[str]:
        return {a for addrs in self.broker_addrs.values() for a in addrs.values()}

    # -- heartbeats and events ---------------------------------------------------------

    async def heartbeat_all(self) -> None:
        if self.heartbeat is None:
            return
        req = self.heartbeat()
        for addr in self.all_broker_addrs():
            try:
                await self.broker(addr).unary("heartbeat", "Heartbeat", req, self.timeout)
            except ConnectBrokerError as exc:
                log.debug("heartbeat to %s failed: %s", addr, exc)

    async def check_client_in_broker(self) -> None:
        """Heartbeat every broker and raise the first refusal (a SQL92 subscription a broker
        cannot filter, or a bad expression): a consumer's start fails with the reason."""
        if self.heartbeat is None:
            return
        req = self.heartbeat()
        for addr in sorted(self.all_broker_addrs()):
            status = await self.broker(addr).unary("heartbeat", "Heartbeat", req, self.timeout)
            check(status)

    def _open_channel(self, addr: str) -> None:
        task = self._channels.get(addr)
        if task is None or task.done():
            self._channels[addr] = asyncio.ensure_future(self._listen(addr))

    async def _listen(self, addr: str) -> None:
        """Keep an event stream open to a broker while it is in some route."""
        while self.started and addr in self.all_broker_addrs():
            try:
                stream = self.broker(addr).stub.ClientChannel(
                    pb.ClientChannelRequest(client_id=self.client_id)
                )
                async for event in stream:
                    if event.WhichOneof("kind") and self.on_event is not None:
                        await self.on_event(event, addr)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError:
                pass
            except Exception:
                log.exception("event stream from %s failed", addr)
            await asyncio.sleep(1.0)

    async def consumer_ids(self, group: str, route: TopicRouteData) -> list[str]:
        """The group's client ids, from the first broker of the route that answers."""
        for b in route.broker_datas:
            for addr in b.broker_addrs.values():
                try:
                    resp = await self.broker(addr).unary(
                        "consumer list",
                        "GetConsumerListByGroup",
                        pb.GroupRequest(group=group),
                        self.timeout,
                    )
                except RocketqError:
                    continue
                if resp.client_ids:
                    return list(resp.client_ids)
        return []

    async def unregister(self, req: pb.HeartbeatRequest) -> None:
        for addr in self.all_broker_addrs():
            with contextlib.suppress(RocketqError):
                await self.broker(addr).unary("unregister", "UnregisterClient", req, self.timeout)

    async def shutdown(self) -> None:
        self.started = False
        tasks = self._tasks + list(self._channels.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        self._channels.clear()
        await self.brokers.close()
        await self.nameserver.close()
