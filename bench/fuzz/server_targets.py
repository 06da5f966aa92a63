"""The servers' request handlers under fuzzing: the broker's SEND, PULL, client and admin
requests, and the nameserver's (REGISTER_BROKER's header and body, routes, KV config).

The input is a remoting frame (after its length word). It is decoded as the transport
decodes it, then handed to the handler of its request code (a code no handler has is
taken modulo the handled codes, so every decoded frame reaches one) of a server running
in this process on scratch files, from a connection whose peer answers every request it is
sent at once (so a handler that calls the client back is not left waiting). A handler may
answer or raise what the transport turns into an error response (RocketqError,
RemotingError); anything else is what the transport logs as "unexpected error" and a
finding. PULL's suspend flag is cleared so that no request is held by long polling.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
import tempfile
from pathlib import Path
from typing import Any, Final

from rocketq.bench.fuzz.harness import HangError, Harness, close_loop
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.broker.wire.admin import AdminRequests
from rocketq.broker.wire.client import ClientRequests
from rocketq.broker.wire.pull import PullRequests
from rocketq.broker.wire.send import SendRequests
from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import RocketqError
from rocketq.common.message import TopicConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.codes import PullSysFlag, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, RemotingError, decode, encode
from rocketq.remoting.transport import Connection, Handler

TRANSPORT_LOG: Final = logging.getLogger("rocketq.remoting.transport")
WALL_LIMIT: Final = 5.0  # seconds an awaited handler may take before it is a hang
TOPIC: Final = "FuzzTopic"  # made with 4 queues at start; the seeds use it


class _AnsweringTransport(asyncio.Transport):
    """A client connection that takes every frame and answers each request with SUCCESS."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self.conn: Connection | None = None
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        pos = 0
        while len(view) - pos >= 4:
            size = int.from_bytes(view[pos : pos + 4], "big")
            cmd = decode(view[pos + 4 : pos + 4 + size])
            pos += 4 + size
            if not cmd.is_response and not cmd.is_oneway and self.conn is not None:
                answer = encode(cmd.response(ResponseCode.SUCCESS))
                self._loop.call_soon(self.conn.data_received, answer)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def abort(self) -> None:
        self._closing = True


class _Unexpected(logging.Handler):
    """Collects what the transport logs as an unexpected error (a handler that turns every
    exception into an error response, as SEND does, still logs the ones it did not expect)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.caught: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.caught.append(record.exc_info[1])


class ServerRequests(abc.ABC):
    """A server's handlers and a connection to them, made once per process by ``setup``."""

    what = "server"

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.handlers: dict[int, Handler] = {}
        self.codes: list[int] = []
        self.conn: Connection | None = None
        self.transport: _AnsweringTransport | None = None
        self.directory: Path | None = None
        self.unexpected = _Unexpected()

    def setup(self) -> None:
        if self.loop is not None:
            return
        self.directory = Path(tempfile.mkdtemp(prefix=f"rocketq-fuzz-{self.what}-"))
        TRANSPORT_LOG.addHandler(self.unexpected)
        TRANSPORT_LOG.setLevel(logging.ERROR)
        self.loop = asyncio.new_event_loop()
        self.handlers = self.loop.run_until_complete(self._start(self.directory))
        self.codes = sorted(self.handlers)
        self.loop.run_until_complete(self._connect())

    @abc.abstractmethod
    async def _start(self, directory: Path) -> dict[int, Handler]:
        """Start the server in the loop; its request handlers by code."""

    async def _stop(self) -> None:  # noqa: B027 - a hook: nothing to stop by default
        pass

    async def _connect(self) -> None:
        """A connection as the transport makes one (inside the loop)."""
        assert self.loop is not None
        self.conn = Connection(self.handlers)
        self.transport = _AnsweringTransport(self.loop)
        self.transport.conn = self.conn
        self.conn.connection_made(self.transport)

    def teardown(self) -> None:
        if self.loop is None:
            return
        TRANSPORT_LOG.removeHandler(self.unexpected)
        self.loop.run_until_complete(self._stop())
        close_loop(self.loop, self.directory)
        self.loop = None

    def __call__(self, data: bytes) -> None:
        self.setup()
        assert self.loop is not None
        cmd = decode(data)
        if cmd.code not in self.handlers:
            cmd.code = self.codes[cmd.code % len(self.codes)]
        cmd.flag = 0  # a request expecting its answer
        if cmd.code == RequestCode.PULL_MESSAGE and cmd.ext:
            flag = cmd.ext.get("sysFlag", "")
            if flag.lstrip("-").isdigit():
                cmd.ext["sysFlag"] = str(int(flag) & ~PullSysFlag.FLAG_SUSPEND)
        if self.transport is None or self.transport.is_closing():
            self.loop.run_until_complete(self._connect())  # a handler closed the last one
        assert self.conn is not None
        self.unexpected.caught.clear()
        self.loop.run_until_complete(self._handle(self.conn, cmd))
        if self.unexpected.caught:
            raise self.unexpected.caught[0]

    async def _handle(self, conn: Connection, cmd: RemotingCommand) -> None:
        """As the transport calls a handler: inside the loop, awaiting what it returns."""
        result = self.handlers[cmd.code](conn, cmd)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            done, _ = await asyncio.wait({task}, timeout=WALL_LIMIT)
            if not done:
                task.cancel()
                raise HangError(f"request code {cmd.code} unanswered after {WALL_LIMIT} s")
            task.result()
        await asyncio.sleep(0)  # what the handler scheduled (callbacks, answers) runs once


class BrokerRequests(ServerRequests):
    """A broker on a scratch store (a topic of 4 queues made), SQL92 filtering on."""

    what = "broker"

    def __init__(self) -> None:
        super().__init__()
        self.broker: Broker | None = None

    async def _start(self, directory: Path) -> dict[int, Handler]:
        b = Broker(
            BrokerConfig(
                listen_port=0,
                ha_listen_port=0,
                metrics_port=0,
                namesrv_addr="",
                enable_property_filter=True,
            ),
            StoreConfig(
                store_path_root_dir=str(directory / "store"),
                mapped_file_size_commit_log=4 << 20,
                mapped_file_size_consume_queue=20 * 1000,
                max_message_size=256 * 1024,
            ),
        )
        await b.start()
        clients = ClientRequests(b)
        b.topics.update(TopicConfig(TOPIC, 4, 4))
        self.broker = b
        return {
            **SendRequests(b).handlers(),
            **PullRequests(b).handlers(),
            **clients.handlers(),
            **AdminRequests(b).handlers(),
        }

    async def _stop(self) -> None:
        if self.broker is not None:
            await self.broker.stop()
            self.broker = None


class NameServerRequests(ServerRequests):
    """A nameserver's request handlers, its KV config in a scratch file."""

    what = "nameserver"

    async def _start(self, directory: Path) -> dict[int, Handler]:
        ns = NameServer(
            NameServerConfig(
                listen_port=0, metrics_port=0, kv_config_path=str(directory / "kv.json")
            )
        )
        ns.kv.load()
        return ns.service.handlers()


BROKER_REQUESTS: Final = BrokerRequests()

NAMESERVER_REQUESTS: Final = NameServerRequests()

BROKER_HARNESS: Final = Harness(
    "broker_requests",
    BROKER_REQUESTS,
    (RocketqError, RemotingError),
    "broker/wire send, pull, client and admin handlers: request headers and bodies",
    setup=BROKER_REQUESTS.setup,
    teardown=BROKER_REQUESTS.teardown,
)
NAMESERVER_HARNESS: Final = Harness(
    "nameserver_requests",
    NAMESERVER_REQUESTS,
    (RocketqError, RemotingError),
    "nameserver/processor.py handlers: REGISTER_BROKER header and body, routes, KV config",
    setup=NAMESERVER_REQUESTS.setup,
    teardown=NAMESERVER_REQUESTS.teardown,
)
