"""Registration with every nameserver (RocketMQ's registerBrokerAll), each over a
long-lived stream: the channel whose breaking tells the nameserver the broker is gone.

What goes on a channel depends on what that nameserver holds of the topic table:

- a new channel starts with a FULL registration: the whole table, zlib-compressed
  (:func:`full_body`, RocketMQ's compressed registerBrokerAll body);
- a topic change sends a DELTA: the topics put and deleted since the version the
  nameserver holds, and the version it brings it to;
- the periodic registration (every ``register_name_server_period``, clamped to 10-60 s as
  RocketMQ does) is a HEARTBEAT (identity and data version) while the nameserver holds the
  current version;
- a nameserver that cannot apply a delta or a heartbeat (it restarted, expired us, or holds
  another version) answers ``need_full``, and the full table follows at once.

Answers come back in the order of the requests, so each channel knows which request an
answer is for. A broken stream is reopened after a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

import grpc

from rocketq.broker.topic_config import TopicDelta
from rocketq.cluster.aio import wait_event
from rocketq.cluster.message import TopicConfig
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

RECONNECT_DELAY = 1.0
FULL: Final = pb.REGISTER_FULL
DELTA: Final = pb.REGISTER_DELTA
HEARTBEAT: Final = pb.REGISTER_HEARTBEAT
# A delta that changes more than half of the table (and more than this many topics) goes
# as the full table instead.
DELTA_MIN: Final = 1000
KIND_NAMES: Final[dict[int, str]] = {FULL: "full", DELTA: "delta", HEARTBEAT: "heartbeat"}


class TopicTable(Protocol):
    """What registration reads of the broker's topics (``TopicConfigManager``)."""

    @property
    def data_version(self) -> int: ...

    def registrable(self) -> list[TopicConfig]: ...

    def topic_count(self) -> int: ...

    def changes_since(self, version: int) -> TopicDelta | None: ...


def topic_datas(topics: list[TopicConfig]) -> list[pb.TopicConfigData]:
    return [
        pb.TopicConfigData(
            topic_name=t.topic_name,
            read_queue_nums=t.read_queue_nums,
            write_queue_nums=t.write_queue_nums,
            perm=t.perm,
            topic_sys_flag=t.topic_sys_flag,
            order=t.order,
        )
        for t in topics
    ]


def full_body(topics: list[TopicConfig]) -> tuple[bytes, int]:
    """A full registration's ``topic_body`` and its ``body_crc32``: zlib of the serialized
    :class:`TopicConfigList` (topics in name order, so one table gives one body)."""
    ordered = sorted(topics, key=lambda t: t.topic_name)
    raw = pb.TopicConfigList(topics=topic_datas(ordered)).SerializeToString()
    body = zlib.compress(raw)
    return body, zlib.crc32(body)


@dataclass
class RegistrationStats:
    """The registrations nameservers answered, over every nameserver (GetBrokerRuntimeInfo's
    table)."""

    full_count: int = 0
    delta_count: int = 0
    heartbeat_count: int = 0
    need_full_count: int = 0  # answers asking for the full table
    full_bytes: int = 0  # the last full registration request, serialized
    last_bytes: int = 0  # the last request of any kind, serialized
    total_bytes: int = 0

    def sent(self, kind: int, size: int) -> None:
        if kind == FULL:
            self.full_count += 1
            self.full_bytes = size
        elif kind == DELTA:
            self.delta_count += 1
        else:
            self.heartbeat_count += 1
        self.last_bytes = size
        self.total_bytes += size


@dataclass
class _Link:
    """One nameserver's channel: what that nameserver holds of the table."""

    addr: str
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # The version the nameserver holds once the requests sent so far apply; None: it needs
    # the full table (a new channel, or it said so).
    target: int | None = None
    held: int | None = None  # the version its last answer said it holds
    # (kind, serialized size) of the requests sent and not yet answered
    in_flight: deque[tuple[int, int]] = field(default_factory=deque)


class NameServerRegistration:
    def __init__(
        self,
        addrs: list[str],
        *,
        identity: Callable[[], pb.RegisterBrokerRequest],
        topics: TopicTable,
        period_ms: int,
    ) -> None:
        self.addrs = addrs
        self.identity = identity
        self.topics = topics
        self.period = max(10.0, min(period_ms / 1000, 60.0))
        self._links = [_Link(a) for a in addrs]
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.registered: dict[str, bool] = {a: False for a in addrs}
        self.master_addr = ""
        self.master_ha_addr = ""
        self.stats = RegistrationStats()
        self._body: tuple[int, bytes, int] | None = None  # (version, body, crc) last built

    def start(self) -> None:
        for link in self._links:
            self._tasks.append(asyncio.ensure_future(self._run(link)))

    def register_now(self) -> None:
        """Something registered changed (topics, role): tell every nameserver now."""
        self._body = None  # a table replaced by an older version may reuse a version number
        for link in self._links:
            link.wake.set()

    def held_versions(self) -> dict[str, int | None]:
        """The table version each nameserver last said it holds (None: nothing yet)."""
        return {link.addr: link.held for link in self._links}

    def runtime_info(self) -> dict[str, str]:
        s = self.stats
        return {
            "registerFullCount": str(s.full_count),
            "registerDeltaCount": str(s.delta_count),
            "registerHeartbeatCount": str(s.heartbeat_count),
            "registerNeedFullCount": str(s.need_full_count),
            "registerFullBytes": str(s.full_bytes),
            "registerLastBytes": str(s.last_bytes),
            "registerTotalBytes": str(s.total_bytes),
            # What a full registration of today's table carries (built once per version).
            "registerFullBodyBytes": str(len(self._full_body(self.topics.data_version)[0])),
            "registerDataVersion": str(self.topics.data_version),
            "registerNameServersHolding": str(
                sum(link.held == self.topics.data_version for link in self._links)
            ),
        }

    # -- one channel -------------------------------------------------------------------

    async def _run(self, link: _Link) -> None:
        addr = link.addr
        while not self._stopping:
            channel = grpc.aio.insecure_channel(addr)
            link.target = link.held = None
            link.in_flight.clear()
            try:
                stub = pb_grpc.NameServerStub(channel)  # type: ignore[no-untyped-call]
                call = stub.BrokerChannel(self._requests(link))
                async for result in call:
                    self._answered(link, result)
                if not self._stopping:
                    log.warning("nameserver %s closed our channel; registering again", addr)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                if self.registered[addr]:
                    log.warning("lost nameserver %s (%s); reconnecting", addr, exc.code().name)
            finally:
                self.registered[addr] = False
                await channel.close()
            if not self._stopping:
                await asyncio.sleep(RECONNECT_DELAY)

    def _answered(self, link: _Link, result: pb.RegisterBrokerResult) -> None:
        kind, size = link.in_flight.popleft() if link.in_flight else (FULL, 0)
        # Counted once a nameserver answered: a request on a channel that broke before it
        # got there (a nameserver restarting) is sent again and counts then.
        self.stats.sent(kind, size)
        addr = link.addr
        if result.status.code != 0:
            log.warning(
                "nameserver %s refused our %s registration: %s",
                addr,
                KIND_NAMES.get(kind, str(kind)),
                result.status.message,
            )
            # The full table again, at the next period (not at once: it may be refused again).
            link.held = None
            self.registered[addr] = False
            if all(k != FULL for k, _ in link.in_flight):
                link.target = None
            return
        if result.need_full:
            self.stats.need_full_count += 1
            log.info(
                "nameserver %s does not hold our topic table version (it has %s); sending "
                "the full table",
                addr,
                result.data_version if result.data_version >= 0 else "none",
            )
            self._need_full(link)
            return
        link.held = result.data_version
        if not self.registered[addr]:
            log.info("registered with nameserver %s", addr)
        self.registered[addr] = True
        if result.master_addr:
            self.master_addr = result.master_addr
            self.master_ha_addr = result.ha_server_addr

    def _need_full(self, link: _Link) -> None:
        """Send the full table next, unless one is already on its way (the requests after
        the refused one were refused too; the full one mends them all)."""
        link.held = None
        self.registered[link.addr] = False
        if all(k != FULL for k, _ in link.in_flight):
            link.target = None
            link.wake.set()

    async def _requests(self, link: _Link) -> AsyncIterator[pb.BrokerChannelRequest]:
        while not self._stopping:
            req = pb.BrokerChannelRequest(register=self._next(link))
            link.in_flight.append((req.register.kind, req.ByteSize()))
            yield req
            await wait_event(link.wake, self.period)
            link.wake.clear()

    def _next(self, link: _Link) -> pb.RegisterBrokerRequest:
        """The registration that brings this nameserver to the current table."""
        req = self.identity()
        version = self.topics.data_version
        req.data_version = version
        delta = None
        if link.target is not None and link.target != version:
            delta = self.topics.changes_since(link.target)
            if delta is not None and 2 * delta.size > max(DELTA_MIN, self.topics.topic_count()):
                delta = None  # most of the table changed: the compressed table is smaller
        if link.target == version:
            req.kind = HEARTBEAT
        elif delta is not None and link.target is not None:
            req.kind = DELTA
            req.base_version = link.target
            req.topics.extend(topic_datas(delta.put))
            req.deleted_topics.extend(delta.deleted)
        else:
            req.kind = FULL
            req.topic_body, req.body_crc32 = self._full_body(version)
        link.target = version
        return req

    def _full_body(self, version: int) -> tuple[bytes, int]:
        if self._body is None or self._body[0] != version:
            topics = self.topics.registrable()
            body, crc = full_body(topics)
            self._body = (version, body, crc)
            log.info(
                "full registration of topic table version %d: %d topics, %d bytes compressed",
                version,
                len(topics),
                len(body),
            )
        return self._body[1], self._body[2]

    # -- stopping ----------------------------------------------------------------------

    async def stop(self, unregister: pb.UnregisterBrokerRequest | None) -> None:
        """Unregister cleanly from every nameserver, then close the streams."""
        self._stopping = True
        if unregister is not None:
            await asyncio.gather(
                *(self._unregister(a, unregister) for a in self.addrs), return_exceptions=True
            )
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _unregister(self, addr: str, req: pb.UnregisterBrokerRequest) -> None:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = pb_grpc.NameServerStub(channel)  # type: ignore[no-untyped-call]
            await stub.UnregisterBroker(req, timeout=3)
