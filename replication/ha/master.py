"""The master's side of classic HA (RocketMQ's HAService, HAConnection, GroupTransferService).

The master listens on its HA port (plain TCP, frames in :mod:`replication.ha.wire`). Each
slave that connects says where its CommitLog ends; the master streams the CommitLog from
there as byte ranges (at most ``transfer_batch`` bytes each, at most ``window`` bytes sent
and not yet acknowledged), and the slave reports its new end after each range it stored.
What was appended while a range was on its way goes out as the next range, so under load
ranges grow instead of multiplying. A slave ahead of the master (the master lost an
unflushed tail) is told to cut its log back first.

For SYNC_MASTER, :meth:`HAMaster.wait_slave` holds a send until some slave acknowledged
past the send's end (:class:`~replication.waiters.OffsetWaiters`: one report completes
every send it covers).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cluster.aio import wait_event
from replication.ha.wire import (
    HELLO,
    REPORT,
    TRUNCATE,
    HAProtocolError,
    decode_hello_head,
    encode_transfer_head,
)
from replication.waiters import OffsetWaiters
from storage.message_store import MessageStore
from storage.results import PutStatus

log = logging.getLogger(__name__)

TRANSFER_BATCH = 4 * 1024 * 1024
WINDOW = 32 * 1024 * 1024
HEARTBEAT_INTERVAL = 1.0  # s: an idle connection sends an empty transfer this often
HELLO_TIMEOUT = 10.0  # s a new connection has to say who it is


@dataclass(slots=True)
class SlaveConnection:
    conn_id: int
    ack: int = -1  # the slave's CommitLog end, as last reported
    broker_addr: str = ""
    broker_id: int = 0
    last_report: float = field(default_factory=time.monotonic)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # new bytes or a new ack


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for the HA port (bound now, so port 0 has its number at once).
    OSError naming the address when it is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise OSError(
            f"cannot listen on {host}:{port} for HA; is another broker running there? set "
            "ha_listen_port"
        ) from None
    sock.setblocking(False)
    return sock


class HAMaster:
    def __init__(
        self,
        store: MessageStore,
        *,
        max_gap: int,
        transfer_batch: int = TRANSFER_BATCH,
        window: int = WINDOW,
        on_slave: Callable[[SlaveConnection], None] | None = None,
    ) -> None:
        self.store = store
        self.max_gap = max_gap
        self.transfer_batch = transfer_batch
        self.window = window
        self.on_slave = on_slave
        self.slaves: dict[int, SlaveConnection] = {}
        self._ids = itertools.count(1)
        self._waiting = OffsetWaiters()  # SYNC sends until a slave acknowledged them
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        store.append_listeners.append(self._on_append)

    # -- life --------------------------------------------------------------------------

    async def start(self, sock: socket.socket) -> None:
        """Serve slaves on a listening socket (see :func:`listen_socket`)."""
        self._server = await asyncio.start_server(self._serve, sock=sock)

    async def stop(self) -> None:
        await self._waiting.close()
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        for task in list(self._handlers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    # -- state -------------------------------------------------------------------------

    @property
    def best_ack(self) -> int:
        return max((s.ack for s in self.slaves.values()), default=-1)

    def lag_bytes(self) -> int:
        """How far the best slave is behind (the master's end when none is connected)."""
        best = self.best_ack
        return self.store.max_phy_offset - max(best, 0)

    def _on_append(self, end_offset: int) -> None:
        for conn in self.slaves.values():
            conn.wake.set()

    def _on_report(self, conn: SlaveConnection, max_offset: int) -> None:
        conn.ack = max_offset
        conn.last_report = time.monotonic()
        conn.wake.set()
        self._waiting.advance(self.best_ack)

    # -- SYNC_MASTER -------------------------------------------------------------------

    async def wait_slave(self, end_offset: int, timeout: float) -> PutStatus:
        """PUT_OK once a slave has everything below ``end_offset``; SLAVE_NOT_AVAILABLE
        with no slave (or one too far behind); FLUSH_SLAVE_TIMEOUT after ``timeout``."""
        best = self.best_ack
        if best < 0 or self.store.max_phy_offset - best > self.max_gap:
            return PutStatus.SLAVE_NOT_AVAILABLE
        if best >= end_offset:
            return PutStatus.PUT_OK
        reached = await self._waiting.wait(end_offset, timeout)
        return PutStatus.PUT_OK if reached else PutStatus.FLUSH_SLAVE_TIMEOUT

    # -- one slave's connection ------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        conn = SlaveConnection(next(self._ids))
        peer = writer.get_extra_info("peername")
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reports: asyncio.Task[None] | None = None
        try:
            try:
                head = await asyncio.wait_for(reader.readexactly(HELLO.size), HELLO_TIMEOUT)
                conn.broker_id, conn.ack, addr_len = decode_hello_head(head)
                conn.broker_addr = (await reader.readexactly(addr_len)).decode(errors="replace")
            except (TimeoutError, asyncio.IncompleteReadError, HAProtocolError) as exc:
                log.warning("HA connection from %s dropped before its hello: %s", peer, exc)
                return
            self.slaves[conn.conn_id] = conn
            log.info(
                "slave %s (id %d) connected at CommitLog offset %d",
                conn.broker_addr,
                conn.broker_id,
                conn.ack,
            )
            if self.on_slave is not None:
                self.on_slave(conn)
            reports = asyncio.ensure_future(self._read_reports(conn, reader))
            await self._transfer(conn, writer, reports)
        except (ConnectionError, OSError, RuntimeError) as exc:  # uvloop: RuntimeError
            log.debug("HA connection of slave %s broke: %s", conn.broker_addr, exc)
        finally:
            if reports is not None:
                reports.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reports
            writer.close()
            if self.slaves.pop(conn.conn_id, None) is not None:
                log.warning("slave %s (id %d) disconnected", conn.broker_addr, conn.broker_id)
            self._handlers.discard(task)

    async def _read_reports(self, conn: SlaveConnection, reader: asyncio.StreamReader) -> None:
        size = REPORT.size
        pending = b""
        try:
            while True:
                data = await reader.read(64 * 1024)
                if not data:
                    return
                pending += data
                usable = len(pending) - len(pending) % size
                if usable:
                    # Reports that arrived back to back: only the newest end counts.
                    (max_offset,) = REPORT.unpack_from(pending, usable - size)
                    pending = pending[usable:]
                    self._on_report(conn, max_offset)
        except ConnectionError:
            return
        finally:
            conn.wake.set()  # the transfer loop sees the connection is gone

    async def _transfer(
        self, conn: SlaveConnection, writer: asyncio.StreamWriter, reports: asyncio.Task[None]
    ) -> None:
        commitlog = self.store.commitlog
        master_max = commitlog.max_offset
        next_offset = conn.ack
        if next_offset > master_max:
            log.warning(
                "slave %s is ahead of this master (%d > %d): it cuts its CommitLog back",
                conn.broker_addr,
                next_offset,
                master_max,
            )
            writer.write(encode_transfer_head(master_max, master_max, 0, TRUNCATE))
            next_offset = master_max
        if next_offset < commitlog.min_offset:
            # A new slave (or one behind what is kept) starts at the oldest segment kept.
            next_offset = commitlog.min_offset
        last_sent = time.monotonic()
        while not reports.done():
            master_max = commitlog.max_offset
            sent = False
            while next_offset < master_max and next_offset - max(conn.ack, 0) < self.window:
                segment_end = commitlog.next_segment_offset(next_offset)
                end = min(master_max, next_offset + self.transfer_batch, segment_end)
                view = commitlog.read(next_offset, end - next_offset)
                if view is None:
                    break
                try:
                    data = bytes(view)
                finally:
                    view.release()
                writer.write(encode_transfer_head(next_offset, master_max, len(data)) + data)
                next_offset = end
                sent = True
            now = time.monotonic()
            if not sent and now - last_sent >= HEARTBEAT_INTERVAL:
                writer.write(encode_transfer_head(next_offset, master_max, 0))
                sent = True
            if sent:
                last_sent = now
                await writer.drain()
                continue
            conn.wake.clear()
            if commitlog.max_offset > next_offset and next_offset - conn.ack < self.window:
                continue  # appended meanwhile
            await wait_event(conn.wake, HEARTBEAT_INTERVAL)
