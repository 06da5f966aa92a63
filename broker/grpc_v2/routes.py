"""Where a topic lives, as the v2 endpoint answers it: every master broker of the topic's
route, each with the address of its own v2 endpoint.

RocketMQ 5's proxy in "local" mode answers QueryRoute with the route the nameserver holds,
each broker's address made its gRPC address. A rocketq broker's endpoint may listen on any
port (``grpc_listen_port`` 0 takes a free one), so the port is not assumed: each master says
its own in GET_BROKER_RUNTIME_INFO (``grpcListenPort``, -1 without an endpoint), asked once
and kept for :data:`PORT_TTL_S`. A master without an endpoint is left out of the answer.

The route comes from the nameservers (GET_ROUTEINFO_BY_TOPIC, over one connection kept per
nameserver, the next nameserver tried when one fails) and is kept for :data:`ROUTE_TTL_S`,
so a leader change shows within a second or two. The queues of the answer do not change
while a group has no master (a Raft leader being elected, a master restarting): the group
stays, at its master's last known endpoint, as a 4.x client's route keeps the group's
queues; a client choosing a queue by hashing a message group over them (FIFO) keeps each
message group on its queue. Nameservers that cannot be reached leave the last answer in
use; a topic no nameserver knows yet (created a moment ago) is answered by the endpoint for
its own broker only.
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
        # Broker group -> the v2 address of its master, as last known; topic -> the last
        # answer a nameserver's route gave.
        self._known: dict[str, tuple[str, int]] = {}
        self._last: dict[str, list[RouteBroker]] = {}

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
        answered, route = await self._route(topic)
        if not answered:  # no nameserver answered: the last route known, if any
            return self._last.get(topic)
        found = None if route is None else await self._masters(route)
        if len(self._routes) > 10_000:  # topics come and go: keep the tables bounded
            self._routes.clear()
            self._last.clear()
        self._routes[topic] = (time.monotonic(), found)
        if found:
            self._last[topic] = found
        return found

    async def _route(self, topic: str) -> tuple[bool, TopicRouteData | None]:
        """(whether a nameserver answered, the topic's route; None when it has none)."""
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
                return True, None
            if answer.code != ResponseCode.SUCCESS:
                continue
            try:
                return True, parse_route(answer.body or b"{}")
            except RouteBodyError as exc:
                log.warning("nameserver %s answered a route that does not read: %s", addr, exc)
        return False, None

    async def _masters(self, route: TopicRouteData) -> list[RouteBroker]:
        queues = {q.broker_name: q for q in route.queue_datas}
        own_addr = self.b.config.broker_addr
        found = []
        for data in route.broker_datas:
            queue = queues.get(data.broker_name)
            if queue is None:
                continue
            master = data.broker_addrs.get(0)
            address = await self._address(master, own_addr) if master else None
            if address is not None:
                self._known[data.broker_name] = address
            else:
                # No master now (a leader being elected, a master restarting) or its port
                # not learnt: the group keeps its queues in the answer, at its master's
                # last known endpoint (or a member's), so that a client hashing message
                # groups over the queues keeps each group on its queue. Sends there fail
                # until a master is back, as a 4.x client's to a queue of that group.
                address = self._known.get(data.broker_name)
                for _, member in sorted(data.broker_addrs.items()):
                    if address is not None:
                        break
                    address = await self._address(member, own_addr)
            if address is None:
                continue  # no member of the group serves a v2 endpoint
            host, port = address
            found.append(
                RouteBroker(
                    data.broker_name, host, port,
                    queue.read_queue_nums, queue.write_queue_nums, queue.perm,
                )
            )  # fmt: skip
        return found

    async def _address(self, addr: str, own_addr: str) -> tuple[str, int] | None:
        """The v2 address of the broker at remoting address ``addr``; None without one."""
        if addr == own_addr:
            return self.own()
        port = await self._port(addr)
        return (addr.rpartition(":")[0], port) if port > 0 else None

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
