"""Registration with every nameserver (RocketMQ's registerBrokerAll): REGISTER_BROKER
requests over one long-lived connection per nameserver, the channel whose closing tells the
nameserver the broker is gone.

What goes on a channel depends on what that nameserver holds of the topic table:

- a new channel starts with a FULL registration: the whole table, zlib-compressed
  (:func:`full_body`, RocketMQ's compressed registerBrokerAll body);
- a topic change sends a DELTA: the topics put and deleted since the version the
  nameserver holds, and the version it brings it to;
- the periodic registration (every ``register_name_server_period``, clamped to 10-60 s as
  RocketMQ does) is a HEARTBEAT (identity and data version) while the nameserver holds the
  current version;
- a nameserver that cannot apply a delta or a heartbeat (it restarted, expired us, or holds
  another version) answers ``needFull``, and the full table follows at once.

The kind goes in the header field ``registerKind`` (rocketq's; a stock nameserver reads
every request as a full one), the table in RocketMQ's compressed body
(``remoting/register_body.py``). One request is in flight per nameserver. A closed connection
is opened again after a second, and starts with the full table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from rocketq.broker.topic_config import TopicDelta
from rocketq.common.aio import wait_event
from rocketq.common.exceptions import ConnectBrokerError, RequestTimeoutError
from rocketq.common.message import TopicConfig
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, encode
from rocketq.remoting.register_body import crc32, encode_body
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import Connection, connect

log = logging.getLogger(__name__)

RECONNECT_DELAY = 1.0
REGISTER_TIMEOUT: Final = 6.0  # RocketMQ's registerBroker timeout
FULL: Final = 0
DELTA: Final = 1
HEARTBEAT: Final = 2
# A delta that changes more than half of the table (and more than this many topics) goes
# as the full table instead.
DELTA_MIN: Final = 1000
KIND_NAMES: Final[dict[int, str]] = {FULL: "full", DELTA: "delta", HEARTBEAT: "heartbeat"}
KIND_FIELDS: Final[dict[int, str]] = {FULL: "FULL", DELTA: "DELTA", HEARTBEAT: "HEARTBEAT"}


class TopicTable(Protocol):
    """What registration reads of the broker's topics (``TopicConfigManager``)."""

    @property
    def data_version(self) -> int: ...

    def registrable(self) -> list[TopicConfig]: ...

    def topic_count(self) -> int: ...

    def changes_since(self, version: int) -> TopicDelta | None: ...


def full_body(topics: list[TopicConfig], data_version: int) -> tuple[bytes, int]:
    """A full registration's body (topics in name order, so one table gives one body) and
    its ``bodyCrc32``."""
    body = encode_body(sorted(topics, key=lambda t: t.topic_name), data_version)
    return body, crc32(body)


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
    # The version the nameserver holds once the request sent applies; None: it needs the
    # full table (a new channel, or it said so).
    target: int | None = None
    held: int | None = None  # the version its last answer said it holds
    conn: Connection | None = None


class NameServerRegistration:
    def __init__(
        self,
        addrs: list[str],
        *,
        identity: Callable[[], dict[str, str]],
        topics: TopicTable,
        period_ms: int,
        security: ClientSecurity | None = None,
    ) -> None:
        self.addrs = addrs
        # Signs the registrations with the broker's inner credentials, over TLS if set.
        self.security = security
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
        self._answers = asyncio.Event()  # set (and cleared) whenever a nameserver answers

    def start(self) -> None:
        for link in self._links:
            self._tasks.append(asyncio.ensure_future(self._run(link)))

    def register_now(self) -> None:
        """Something registered changed (topics, role): tell every nameserver now."""
        self._body = None  # a table replaced by an older version may reuse a version number
        for link in self._links:
            link.wake.set()

    async def wait_held(self, version: int, timeout: float) -> bool:
        """Wait until every nameserver we are registered with holds table ``version`` or a
        later one (RocketMQ's broker registers a new topic before answering its creation, so
        a route asked for next has it). -> False when some did not within ``timeout``
        seconds; a nameserver we are not connected to gets the table when it comes back."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            behind = [
                link
                for link in self._links
                if self.registered[link.addr] and (link.held is None or link.held < version)
            ]
            left = deadline - loop.time()
            if not behind:
                return True
            if left <= 0:
                return False
            await wait_event(self._answers, left)

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
            link.target = link.held = None
            try:
                # A closed connection wakes the loop: it reconnects now, not after a period.
                link.conn = await connect(
                    addr,
                    {},
                    timeout=REGISTER_TIMEOUT,
                    on_close=lambda _: link.wake.set(),
                    security=self.security,
                )
                link.wake.clear()  # a new connection starts with the full table anyway
                while not self._stopping:
                    cmd, kind = self._next(link)
                    size = request_size(cmd)
                    answer = await link.conn.invoke(cmd, REGISTER_TIMEOUT)
                    self._answered(link, answer, kind, size)
                    await wait_event(link.wake, self.period)
                    link.wake.clear()
            except asyncio.CancelledError:
                raise
            except (ConnectBrokerError, RequestTimeoutError) as exc:
                if self.registered[addr]:
                    log.warning("lost nameserver %s (%s); reconnecting", addr, exc)
            finally:
                self.registered[addr] = False
                if link.conn is not None:
                    link.conn.close()
                    link.conn = None
            if not self._stopping:
                await asyncio.sleep(RECONNECT_DELAY)

    def _answered(self, link: _Link, answer: RemotingCommand, kind: int, size: int) -> None:
        # Counted once a nameserver answered: a request on a connection that closed before
        # it got there (a nameserver restarting) is sent again and counts then.
        self.stats.sent(kind, size)
        self._answers.set()
        self._answers.clear()  # the waiters were woken; the next answer wakes them again
        addr = link.addr
        ext = answer.ext or {}
        if answer.code != ResponseCode.SUCCESS:
            log.warning(
                "nameserver %s refused our %s registration: %s",
                addr,
                KIND_NAMES.get(kind, str(kind)),
                answer.remark,
            )
            # The full table again, at the next period (not at once: it may be refused again).
            link.held = link.target = None
            self.registered[addr] = False
            return
        if ext.get("needFull") == "true":
            self.stats.need_full_count += 1
            held = ext.get("dataVersion", "-1")
            log.info(
                "nameserver %s does not hold our topic table version (it has %s); sending "
                "the full table",
                addr,
                held if held != "-1" else "none",
            )
            link.held = link.target = None
            self.registered[addr] = False
            link.wake.set()
            return
        try:
            link.held = int(ext.get("dataVersion", "-1"))
        except ValueError:
            link.held = None
        if not self.registered[addr]:
            log.info("registered with nameserver %s", addr)
        self.registered[addr] = True
        if ext.get("masterAddr"):
            self.master_addr = ext["masterAddr"]
            self.master_ha_addr = ext.get("haServerAddr", "")

    def _next(self, link: _Link) -> tuple[RemotingCommand, int]:
        """The registration that brings this nameserver to the current table."""
        ext = self.identity()
        version = self.topics.data_version
        ext["dataVersion"] = str(version)
        body: bytes | None = None
        delta = None
        if link.target is not None and link.target != version:
            delta = self.topics.changes_since(link.target)
            if delta is not None and 2 * delta.size > max(DELTA_MIN, self.topics.topic_count()):
                delta = None  # most of the table changed: the compressed table is smaller
        if link.target == version:
            kind = HEARTBEAT
        elif delta is not None and link.target is not None:
            kind = DELTA
            ext["baseVersion"] = str(link.target)
            body = encode_body(delta.put, version, delta.deleted)
            ext["bodyCrc32"] = str(crc32(body))
            ext["compressed"] = "true"
        else:
            kind = FULL
            body, crc = self._full_body(version)
            ext["bodyCrc32"] = str(crc)
            ext["compressed"] = "true"
        ext["registerKind"] = KIND_FIELDS[kind]
        link.target = version
        # RocketMQ's binary header, which its nameserver reads as well as JSON: the delta a
        # new topic sends is mostly header (the broker's identity, versions, checksum),
        # and this one is about a fifth smaller.
        cmd = RemotingCommand(
            RequestCode.REGISTER_BROKER, ext, body, serialize_type=SerializeType.ROCKETMQ
        )
        return cmd, kind

    def _full_body(self, version: int) -> tuple[bytes, int]:
        if self._body is None or self._body[0] != version:
            topics = self.topics.registrable()
            body, crc = full_body(topics, version)
            self._body = (version, body, crc)
            log.info(
                "full registration of topic table version %d: %d topics, %d bytes compressed",
                version,
                len(topics),
                len(body),
            )
        return self._body[1], self._body[2]

    # -- stopping ----------------------------------------------------------------------

    async def stop(self, unregister: dict[str, str] | None) -> None:
        """Unregister cleanly from every nameserver, then close the connections."""
        self._stopping = True
        if unregister is not None:
            await asyncio.gather(
                *(self._unregister(link, unregister) for link in self._links),
                return_exceptions=True,
            )
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _unregister(self, link: _Link, ext: dict[str, str]) -> None:
        cmd = RemotingCommand(RequestCode.UNREGISTER_BROKER, dict(ext))
        conn = link.conn if link.conn is not None and link.conn.is_open else None
        if conn is None:
            conn = await connect(link.addr, {}, timeout=3.0, security=self.security)
        try:
            await conn.invoke(cmd, 3.0)
        finally:
            conn.close()


def request_size(cmd: RemotingCommand) -> int:
    """The bytes a request takes on the wire."""
    return len(encode(cmd))
