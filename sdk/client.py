"""What a producer or consumer shares with the cluster: route cache, broker connections,
heartbeats and the brokers' notices (RocketMQ's MQClientInstance).

Routes are refreshed every 30 s and at once after a failed call; heartbeats go to every
broker of the routes every 30 s, and at once over every new connection: the connection a
heartbeat came over is the one a broker tells the client things on (its group changed, its
offsets were reset, how did a transaction end), and its closing makes the broker forget the
client, so a reconnected client registers again straight away.
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

from rocketq.common.exceptions import RocketqError, TopicNotExistError
from rocketq.common.message import MASTER_ID, PERM_READ, PERM_WRITE, MessageQueue
from rocketq.common.topics_batch import TOPICS_BATCH_FIELD, TOPICS_BATCH_VERSION
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import TopicRouteData
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import Connection, Handler
from rocketq.sdk.client_wire import (
    CONSUMER_REQUEST_CODES,
    NOTICE_CODES,
    Notice,
    consumer_list_request,
    no_consumer_answer,
    parse_consumer_list,
    parse_notice,
    unregister_request,
)
from rocketq.sdk.connections import BrokerClient, BrokerConnections, NameServerClient
from rocketq.sdk.wire import ConsumerData, SubscriptionData, heartbeat_request

log = logging.getLogger(__name__)

_instances = itertools.count()


def local_ip() -> str:
    """This host's address as its name resolves (127.0.0.1 when it does not)."""
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
) -> RemotingCommand:
    """A consumer's heartbeat: its group and its subscriptions (topic -> (expression, type))."""
    return heartbeat_request(
        client_id,
        (),
        [
            ConsumerData(
                group,
                consume_type,
                message_model,
                consume_from_where,
                tuple(SubscriptionData(t, e, k) for t, (e, k) in subscriptions.items()),
            )
        ],
    )


def producer_heartbeat(client_id: str, group: str) -> RemotingCommand:
    """A producer's heartbeat: its group."""
    return heartbeat_request(client_id, (group,), ())


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Readable queues of the topic's route, by broker name and queue id."""
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
    """One client's link to the cluster (see the module docstring).

    Args:
        namesrv: Nameserver address(es), ``host:port`` separated by ``;``.
        client_id: The client's id (default: ``ip@pid#n``, unique per client object).
        poll_name_server_interval: Seconds between route refreshes.
        heartbeat_interval: Seconds between heartbeats to every broker.
        timeout: Seconds each request may take.
        security: TLS and request signing for every connection, to nameservers and
            brokers (see :func:`rocketq.sdk.security.client_security`); None: neither.

    Attributes:
        client_id: The client's id.
        nameserver: The nameservers' client.
        brokers: The connections to the brokers.
        timeout: Seconds each request may take.
        poll_interval: Seconds between route refreshes.
        heartbeat_interval: Seconds between heartbeats.
        routes: The routes looked up, by topic.
        broker_addrs: Per broker group, broker id -> address.
        heartbeat: Makes this client's HEART_BEAT request (None: no heartbeats).
        on_event: Hears the brokers' notices: (the notice, the broker's address).
        on_request: Answers what a broker asks for an admin (running info, a direct
            consume); without it such requests are answered REQUEST_CODE_NOT_SUPPORTED.
        extra_topics: Topics to keep fresh besides those looked up through ``route``.
        on_route: Hears of a topic whose route changed.
        started: Whether it is started.
    """

    def __init__(
        self,
        namesrv: str,
        *,
        client_id: str | None = None,
        poll_name_server_interval: float = 30.0,
        heartbeat_interval: float = 30.0,
        timeout: float = 3.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.client_id = client_id or new_client_id()
        self.nameserver = NameServerClient(namesrv, timeout=timeout, security=security)
        handlers: dict[int, Handler] = {code: self._notice for code in NOTICE_CODES}
        handlers.update({code: self._consumer_request for code in CONSUMER_REQUEST_CODES})
        self.brokers = BrokerConnections(handlers, security=security)
        self.brokers.remoting.on_connect = self._connected
        self.timeout = timeout
        self.poll_interval = poll_name_server_interval
        self.heartbeat_interval = heartbeat_interval
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        # Brokers whose latest HEART_BEAT answer says they take SEND_TOPICS_BATCH.
        self.topics_batch: set[str] = set()
        # This client's HEART_BEAT request (a new one each time: a request is sent once).
        self.heartbeat: Callable[[], RemotingCommand] | None = None
        # What brokers tell the client: (the notice, the broker's address).
        self.on_event: Callable[[Notice, str], Awaitable[None]] | None = None
        # What a broker asks this client's consumer for an admin (its running info, a
        # message consumed directly) goes to the consumer; without one it is answered
        # REQUEST_CODE_NOT_SUPPORTED.
        self.on_request: Callable[[RemotingCommand], Awaitable[RemotingCommand]] | None = None
        # Topics to keep fresh besides those looked up through ``route`` (a producer's
        # topics first sent through the auto-create template), and who hears of a topic
        # whose route changed.
        self.extra_topics: Callable[[], Iterable[str]] = tuple
        self.on_route: Callable[[str, TopicRouteData], None] | None = None
        self._greeting: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.started = False

    async def start(self) -> None:
        """Start refreshing routes and sending heartbeats periodically."""
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
                    self._greet(addr)
        return route

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route, from the cache when it is there."""
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
                    self._greet(addr)

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
        """The address of the broker group's master (None: it has none now)."""
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def read_addr(self, broker_name: str, preferred_id: int = MASTER_ID) -> str | None:
        """The broker to read from: the one asked for, else the master, else a slave."""
        addrs = self.broker_addrs.get(broker_name, {})
        for bid in (preferred_id, MASTER_ID, *sorted(addrs)):
            if bid in addrs:
                return addrs[bid]
        return None

    def broker(self, addr: str) -> BrokerClient:
        """The client of the broker at ``addr`` (connecting on first use)."""
        return self.brokers.get(addr)

    def all_broker_addrs(self) -> set[str]:
        """Every broker address known."""
        return {a for addrs in self.broker_addrs.values() for a in addrs.values()}

    # -- heartbeats and notices ---------------------------------------------------------

    async def _heartbeat_one(self, addr: str) -> None:
        if self.heartbeat is not None:
            answer = await self.broker(addr).request(self.heartbeat(), self.timeout)
            if (answer.ext or {}).get(TOPICS_BATCH_FIELD) == TOPICS_BATCH_VERSION:
                self.topics_batch.add(addr)
            else:
                self.topics_batch.discard(addr)

    async def heartbeat_all(self) -> None:
        """Send the heartbeat to every broker known (failures are logged at debug)."""
        if self.heartbeat is None:
            return
        for addr in self.all_broker_addrs():
            try:
                await self._heartbeat_one(addr)
            except RocketqError as exc:
                log.debug("heartbeat to %s failed: %s", addr, exc)

    async def check_client_in_broker(self) -> None:
        """Heartbeat every broker and raise the first refusal (a SQL92 subscription a broker
        cannot filter, or a bad expression): a consumer's start fails with the reason."""
        for addr in sorted(self.all_broker_addrs()):
            await self._heartbeat_one(addr)

    def _greet(self, addr: str) -> None:
        """Make sure a connection to the broker is open: opening it sends our heartbeat,
        and the broker's notices come over it from then on."""
        conn = self.brokers.remoting.connections.get(addr)
        if conn is None or not conn.is_open:
            self._spawn(self._open(addr))

    async def _open(self, addr: str) -> None:
        with contextlib.suppress(RocketqError):
            await self.brokers.remoting.connection(addr)

    def _connected(self, addr: str, conn: Connection) -> None:
        if self.heartbeat is not None and self.started:
            self._spawn(self._hello(addr))

    async def _hello(self, addr: str) -> None:
        try:
            await self._heartbeat_one(addr)
        except RocketqError as exc:
            log.debug("heartbeat to %s failed: %s", addr, exc)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._greeting.add(task)
        task.add_done_callback(self._greeting.discard)

    def _notice(self, conn: Connection, cmd: RemotingCommand) -> None:
        """A broker's notice (oneway): handed to ``on_event`` on a task of its own."""
        if self.on_event is None or not self.started:
            return
        try:
            notice = parse_notice(cmd)
        except RocketqError as exc:
            log.warning("ignoring a notice from %s: %s", conn.peer, exc)
            return
        self._spawn(self._deliver(notice, conn.peer))

    def _consumer_request(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        if self.on_request is None:
            return no_consumer_answer(cmd, self.client_id)
        return self.on_request(cmd)

    async def _deliver(self, notice: Notice, addr: str) -> None:
        assert self.on_event is not None
        try:
            await self.on_event(notice, addr)
        except Exception:
            log.exception("handling %s from %s failed", notice, addr)

    async def consumer_ids(self, group: str, route: TopicRouteData) -> list[str]:
        """The group's client ids, from the first broker of the route that answers."""
        for b in route.broker_datas:
            for addr in b.broker_addrs.values():
                try:
                    answer = await self.broker(addr).invoke(
                        consumer_list_request(group), self.timeout
                    )
                    ids = parse_consumer_list(answer)
                except RocketqError:
                    continue
                if ids:
                    return ids
        return []

    async def unregister(self, producer_group: str = "", consumer_group: str = "") -> None:
        """Tell every broker this client left its group (failures are ignored)."""
        for addr in self.all_broker_addrs():
            with contextlib.suppress(RocketqError):
                await self.broker(addr).request(
                    unregister_request(self.client_id, producer_group, consumer_group),
                    self.timeout,
                )

    async def shutdown(self) -> None:
        """Stop the periodic tasks and close every connection."""
        self.started = False
        tasks = self._tasks + list(self._greeting)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self.brokers.close()
        await self.nameserver.close()
