"""Where a topic lives, as the v2 endpoint answers it: every master broker of the topic's
route, each with the address of its own v2 endpoint.

RocketMQ 5's proxy in "local" mode answers QueryRoute with the route the nameserver holds,
each broker's address made its gRPC address. A rocketq broker's endpoint may listen on any
port (``grpc_listen_port`` 0 takes a free one), so the port is not assumed: each master says
its own in GET_BROKER_RUNTIME_INFO (``grpcListenPort``, -1 without an endpoint), asked once
and kept for :data:`PORT_TTL_S`. A master without an endpoint is left out of the answer.

The route comes from the nameservers (GET_ROUTEINFO_BY_TOPIC, over one connection kept per
nameserver, the next nameserver tried when one fails) and is kept for :data:`ROUTE_TTL_S`,
so a leader change shows within a second or two. A topic the nameservers do not know yet
(created a moment ago) or nameservers that cannot be reached leave the endpoint answering
for its own broker only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rocketq.broker.host import BrokerHost
from rocketq.common.exceptions import RocketqError
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import RouteBodyError, TopicRouteData, parse_route
from rocketq.remoting.transport import Connection, connect

log = logging.getLogger(__name__)

ROUTE_TTL_S: Final = 1.0
PORT_TTL_S: Final = 30.0
ASK_TIMEOUT_S: Final = 3.0
RUNTIME_KEY: Final = "grpcListenPort"  # the endpoint's port in GET_BROKER_RUNTIME_INFO
PERM_READ: Final = 4
PERM_WRITE: Final = 2


@dataclass(frozen=True, slots=True)
class RouteBroker:
    """One broker group's master in a topic's route, as a v2 client reaches it."""

    name: str
    host: str
    port: int  # its v2 endpoint
    read_queue_nums: int
    write_queue_nums: int
    perm: int

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ) and self.read_queue_nums > 0


class ClusterRoutes:
    """The masters of a topic's route with their v2 addresses (see the module's doc).
    ``own`` gives this broker's v2 address (host, port)."""

    def __init__(self, broker: BrokerHost, own: Callable[[], tuple[str, int]]) -> None:
        self.b = broker
        self.own = own
        self._conns: dict[str, Connection] = {}
        self._routes: dict[str, tuple[float, list[RouteBroker] | None]] = {}
        self._asking: dict[str, asyncio.Future[list[RouteBroker] | None]] = {}
        self._ports: dict[str, tuple[float, int]] = {}  # remoting address -> (when, v2 port)

    async def brokers(self, topic: str) -> list[RouteBroker] | None:
        """The masters holding ``topic`` with an endpoint, in the route's order; None
        when no nameserver knows the topic or none answers."""
        now = time.monotonic()
        kept = self._routes.get(topic)
        if kept is not None and now - kept[0] < ROUTE_TTL_S:
            return kept[1]
        asking = self._asking.get(topic)
        if asking is None:  # one question per topic at a time; the others wait for it
            asking = asyncio.ensure_future(self._ask(topic))
            self._asking[topic] = asking
            asking.add_done_callback(lambda _: self._asking.pop(topic, None))
        return await asyncio.shield(asking)

    async def _ask(self, topic: str) -> list[RouteBroker] | None:
        route = await self._route(topic)
        found = None if route is None else await self._masters(route)
        if len(self._routes) > 10_000:  # topics come and go: keep the table bounded
            self._routes.clear()
        self._routes[topic] = (time.monotonic(), found)
        return found

    async def _route(self, topic: str) -> TopicRouteData | None:
        for addr in self.b.config.namesrv_addrs:
            try:
                conn = await self._conn(addr)
                cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                answer = await conn.invoke(cmd, ASK_TIMEOUT_S)
            except (RocketqError, OSError) as exc:
                self._drop(addr)
                log.debug("nameserver %s did not give the route of %s: %s", addr, topic, exc)
                continue
            if answer.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            if answer.code != ResponseCode.SUCCESS:
                continue
            try:
                return parse_route(answer.body or b"{}")
            except RouteBodyError as exc:
                log.warning("nameserver %s answered a route that does not read: %s", addr, exc)
        return None

    async def _masters(self, route: TopicRouteData) -> list[RouteBroker]:
        queues = {q.broker_name: q for q in route.queue_datas}
        own_addr = self.b.config.broker_addr
        found = []
        for data in route.broker_datas:
            master = data.broker_addrs.get(0)
            queue = queues.get(data.broker_name)
            if not master or queue is None:
                continue
            if master == own_addr:
                host, port = self.own()
            else:
                host, port = master.rpartition(":")[0], await self._port(master)
            if port <= 0:
                continue  # a master without a v2 endpoint
            found.append(
                RouteBroker(
                    data.broker_name, host, port,
                    queue.read_queue_nums, queue.write_queue_nums, queue.perm,
                )
            )  # fmt: skip
        return found

    async def _port(self, addr: str) -> int:
        """A master's v2 port (-1: none), as its runtime info says."""
        now = time.monotonic()
        kept = self._ports.get(addr)
        if kept is not None and now - kept[0] < PORT_TTL_S:
            return kept[1]
        port = -1
        try:
            conn = await connect(addr, {}, timeout=ASK_TIMEOUT_S, security=self.b.client_security)
            try:
                cmd = RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO)
                answer = await conn.invoke(cmd, ASK_TIMEOUT_S)
            finally:
                conn.close()
            if answer.code == ResponseCode.SUCCESS:
                doc = fastjson.loads(bytes(answer.body or b"{}"))
                table = doc.get("table") if isinstance(doc, dict) else None
                value = table.get(RUNTIME_KEY, "-1") if isinstance(table, dict) else "-1"
                port = int(value) if str(value).lstrip("-").isdigit() else -1
            else:
                log.warning("broker %s did not say its v2 port: %s", addr, answer.remark)
        except (RocketqError, OSError, ValueError) as exc:
            log.warning("broker %s did not say its v2 port: %s", addr, exc)
            return -1  # asked again next time
        if len(self._ports) > 10_000:
            self._ports.clear()
        self._ports[addr] = (now, port)
        return port

    async def _conn(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed.done():
            return conn
        conn = await connect(
            addr,
            {},
            timeout=ASK_TIMEOUT_S,
            on_close=lambda closed: self._forget(addr, closed),
            security=self.b.client_security,
        )
        self._conns[addr] = conn
        return conn

    def _forget(self, addr: str, closed: Connection) -> None:
        if self._conns.get(addr) is closed:
            del self._conns[addr]

    def _drop(self, addr: str) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for addr in list(self._conns):
            self._drop(addr)
        for asking in list(self._asking.values()):
            asking.cancel()
