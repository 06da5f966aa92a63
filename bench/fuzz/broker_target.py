"""The broker's request handlers under fuzzing: SEND, PULL, client and admin requests.

The input is a remoting frame (after its length word). It is decoded as the transport
decodes it, then handed to the handler of its request code (a code no handler has is
taken modulo the handled codes, so every decoded frame reaches one) of a broker running in
this process on a scratch store, from a connection whose peer answers every request it is
sent at once (so a handler that calls the client back is not left waiting). A handler may
answer or raise what the transport turns into an error response (RocketqError,
RemotingError); anything else is what the transport logs as "unexpected error" and a
finding. PULL's suspend flag is cleared so that no request is held by long polling.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any, Final

from rocketq.bench.fuzz.harness import HangError, Harness
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.broker.wire.admin import AdminRequests
from rocketq.broker.wire.client import ClientRequests
from rocketq.broker.wire.pull import PullRequests
from rocketq.broker.wire.send import SendRequests
from rocketq.cluster.config import StoreConfig
from rocketq.cluster.errors import RocketqError
from rocketq.cluster.message import TopicConfig
from rocketq.cluster.remoting.codes import PullSysFlag, RequestCode, ResponseCode
from rocketq.cluster.remoting.command import RemotingCommand, RemotingError, decode, encode
from rocketq.cluster.remoting.transport import Connection, Handler

TRANSPORT_LOG: Final = logging.getLogger("rocketq.cluster.remoting.transport")
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


class BrokerRequests:
    """The broker, its handlers and the connection, made once per process by ``setup``."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Broker | None = None
        self.handlers: dict[int, Handler] = {}
        self.codes: list[int] = []
        self.conn: Connection | None = None
        self.transport: _AnsweringTransport | None = None
        self.directory: Path | None = None
        self.unexpected = _Unexpected()

    def setup(self) -> None:
        if self.loop is not None:
            return
        self.directory = Path(tempfile.mkdtemp(prefix="rocketq-fuzz-broker-"))
        TRANSPORT_LOG.addHandler(self.unexpected)
        TRANSPORT_LOG.setLevel(logging.ERROR)
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._start(self.directory))

    async def _start(self, directory: Path) -> None:
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
        self.handlers = {
            **SendRequests(b).handlers(),
            **PullRequests(b).handlers(),
            **clients.handlers(),
            **AdminRequests(b).handlers(),
        }
        self.codes = sorted(self.handlers)
        b.topics.update(TopicConfig(TOPIC, 4, 4))
        self.broker = b
        self._connect()

    def _connect(self) -> None:
        assert self.loop is not None
        self.conn = Connection(self.handlers)
        self.transport = _AnsweringTransport(self.loop)
        self.transport.conn = self.conn
        self.conn.connection_made(self.transport)

    def teardown(self) -> None:
        if self.loop is None:
            return
        TRANSPORT_LOG.removeHandler(self.unexpected)
        if self.broker is not None:
            self.loop.run_until_complete(self.broker.stop())
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()
        self.loop = None
        self.broker = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

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
            self._connect()  # a handler closed the last one
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


BROKER_REQUESTS: Final = BrokerRequests()

HARNESS: Final = Harness(
    "broker_requests",
    BROKER_REQUESTS,
    (RocketqError, RemotingError),
    "broker/wire send, pull, client and admin handlers: request headers and bodies",
    setup=BROKER_REQUESTS.setup,
    teardown=BROKER_REQUESTS.teardown,
)
