"""The slave's side of classic HA (RocketMQ's HAClient).

The slave connects to its master's HA port (plain TCP, frames in
:mod:`rocketq.replication.ha.wire`), says who it is and where its CommitLog ends, and appends what
the master streams from there, byte for byte, reporting its new end after every range and
at least every ``report_interval``. When the master says the slave is ahead of it, the
slave cuts its CommitLog back (and logs it). A broken connection is opened again after a
second; the slave resumes from its own end. A master silent for ``read_timeout`` (it
heartbeats every second) counts as lost.

A slave with an empty store (new, or its disk wiped) starts where the master's oldest
segment starts: its CommitLog, min offset and dispatch begin there, and its ConsumeQueues
are built from what it copies (RocketMQ 4.9's master sends such a slave only its newest
segment; this one sends all it still holds, so the slave can serve every message the
master can). A slave whose end the master no longer holds (retention deleted those
segments first) cannot go on: it says so once and how to rebuild it.

When the store refuses the master's bytes (its disk is full), the slave holds them,
acknowledges nothing past its end (SYNC_MASTER sends answer FLUSH_SLAVE_TIMEOUT, or
SLAVE_NOT_AVAILABLE once it is ha_max_gap_not_in_sync behind), says so once, and tries
again every RETRY_INTERVAL on the same connection; once the store takes them it
acknowledges again by itself.

Given ``inner`` credentials, the slave signs its hello with them (a master that holds them
takes no other); given ``ssl``, it speaks TLS to the master (the master's certificate
checked against the host it connects to when the context checks host names).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from ssl import SSLContext
from typing import cast

from rocketq.auth.credentials import Credentials
from rocketq.common.exceptions import RocketqError, ServiceNotAvailableError
from rocketq.replication.ha.wire import (
    REPORT,
    TRANSFER,
    TRUNCATE,
    Hello,
    decode_transfer_head,
    encode_hello,
    sign_hello,
)
from rocketq.storage.allocation import NO_SPACE
from rocketq.storage.message_store import MessageStore

log = logging.getLogger(__name__)

RECONNECT_DELAY = 1.0
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 20.0  # s without a byte from the master (RocketMQ's haHousekeepingInterval)
RETRY_INTERVAL = 1.0  # s between tries of an append the store refused
# s between connections while the master no longer holds what follows this slave's end
# (only rebuilding the slave ends that; each try costs the master a window of transfers).
GAP_RETRY_DELAY = 30.0
UNKNOWN_MASTER_ASK_MAX = 30.0  # s: the longest wait between asks for an unknown master
# Bytes a refused append may hold in memory before the slave stops reading: more than the
# master sends past the last report (its window, 32 MiB, and one transfer).
STALLED_BUFFER = 48 * 1024 * 1024


class CommitLogGapError(RocketqError):
    """The master's CommitLog no longer holds what follows this slave's: its retention
    deleted those segments before the slave copied them. ``gap``: [the slave's end, the
    offset the master sent)."""

    def __init__(self, message: str, gap: tuple[int, int]) -> None:
        super().__init__(message)
        self.gap = gap


class HASlave:
    def __init__(
        self,
        store: MessageStore,
        master_ha_addr: Callable[[], str],
        *,
        broker_addr: str,
        broker_id: int,
        report_interval: float = 5.0,
        read_timeout: float = READ_TIMEOUT,
        on_lost: Callable[[], None] | None = None,
        inner: Credentials | None = None,
        ssl: SSLContext | None = None,
    ) -> None:
        """``inner``: the credentials the hello is signed with (None: unsigned, as before);
        ``ssl``: connect to the master over TLS (None: plaintext)."""
        self.store = store
        self.inner = inner
        self.ssl = ssl
        self.master_ha_addr = master_ha_addr
        self.broker_addr = broker_addr
        self.broker_id = broker_id
        self.report_interval = report_interval
        self.read_timeout = read_timeout
        # Called when the master cannot be reached (its address may have changed: the
        # broker asks the nameserver again).
        self.on_lost = on_lost
        self.connected_to = ""
        self.master_max_offset = -1
        self.received_bytes = 0
        # Why the store refuses what the master sends (its disk is full), or None: the
        # slave holds those bytes, acknowledges nothing past them, and tries again.
        self.refused: str | None = None
        self._gap_said: tuple[int, int] | None = None  # the gap last logged (once each)
        self._receiver: _Receiver | None = None  # the current connection's
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def reading_paused(self) -> bool:
        """Whether a refused append holds STALLED_BUFFER bytes and reading stopped."""
        return self._receiver is not None and self._receiver.reading_paused

    def lag_bytes(self) -> int:
        if self.master_max_offset < 0:
            return -1
        return max(0, self.master_max_offset - self.store.max_phy_offset)

    def append(self, offset: int, data: memoryview) -> bool:
        """Append the master's bytes at ``offset``; False when the store refuses them
        (its disk is full), said once in the log until it takes them again.

        An empty store starts at ``offset``: the master sends a new slave its oldest
        segment, so the slave's CommitLog, its min offset and its dispatch start there.
        Bytes that would leave a hole after a store's end raise CommitLogGapError."""
        store = self.store
        empty = store.min_phy_offset < 0
        end = store.max_phy_offset
        if not empty and offset > end:
            raise CommitLogGapError(
                f"the master sent CommitLog offset {offset} but this slave's ends at {end}: "
                f"the master no longer holds [{end}, {offset}) (its retention deleted "
                "those segments before this slave copied them). Stop this slave, remove its "
                "store directory (store_path_root_dir) and start it again: it copies the "
                "master from its oldest segment",
                (end, offset),
            )
        if self.refused is not None and not empty and offset < end <= offset + len(data):
            # A try that was refused after part of the transfer went in: the rest.
            if end == offset + len(data):
                return self._taken(end)
            data = data[end - offset :]
            offset = end
        try:
            store.append_raw(offset, data, wake_dispatch=False)
        except ServiceNotAvailableError as exc:
            return self._refused(offset, str(exc))
        except OSError as exc:
            if exc.errno not in NO_SPACE:
                raise
            return self._refused(offset, f"writing the CommitLog failed: {exc}")
        if empty and offset:
            log.info(
                "this slave's store was empty: its CommitLog starts at the master's offset "
                "%d, where the master's oldest segment starts; ConsumeQueues are built from "
                "there",
                offset,
            )
            if store.dispatcher.reput_offset < offset:
                store.dispatcher.reset(offset)
        return self._taken(offset)

    def _taken(self, offset: int) -> bool:
        if self.refused is not None:
            log.warning(
                "the store takes the master's bytes again at CommitLog offset %d: "
                "acknowledging them",
                offset,
            )
            self.refused = None
        return True

    def _refused(self, offset: int, why: str) -> bool:
        if self.refused is None:
            log.error(
                "the store refuses the master's bytes at CommitLog offset %d (%s): this slave "
                "acknowledges nothing past it (SYNC_MASTER sends wait for it and time out) "
                "and tries again every %g s",
                offset,
                why,
                RETRY_INTERVAL,
            )
        self.refused = why
        return False

    async def _run(self) -> None:
        # No master known (this slave registered before it did): the nameserver is asked
        # again after 1, 2, 4... s (at most UNKNOWN_MASTER_ASK_MAX), not only at the next
        # periodic registration.
        ask_every = ask_in = RECONNECT_DELAY
        while True:
            delay = RECONNECT_DELAY
            addr = self.master_ha_addr()
            if not addr:
                ask_in -= delay
                if ask_in <= 0 and self.on_lost is not None:
                    self.on_lost()
                    ask_every = ask_in = min(2 * ask_every, UNKNOWN_MASTER_ASK_MAX)
            else:
                ask_every = ask_in = RECONNECT_DELAY
                try:
                    await self._replicate(addr)
                except asyncio.CancelledError:
                    raise
                except (OSError, TimeoutError, RuntimeError) as exc:  # uvloop: RuntimeError
                    if self.connected_to:
                        log.warning("lost master %s (%s); reconnecting", addr, exc)
                except CommitLogGapError as exc:
                    delay = GAP_RETRY_DELAY
                    if self._gap_said != exc.gap:  # (once, not at every reconnect)
                        self._gap_said = exc.gap
                        log.error("replication from %s cannot go on: %s", addr, exc)
                except RocketqError as exc:
                    log.error("replication from %s stopped: %s; reconnecting", addr, exc)
                except Exception:
                    log.exception("replication from %s failed; reconnecting", addr)
                finally:
                    self.connected_to = ""
                if self.on_lost is not None:
                    self.on_lost()
            await asyncio.sleep(delay)

    async def _replicate(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        loop = asyncio.get_running_loop()
        receiver = self._receiver = _Receiver(self, addr)
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
        # that lands as the connection completes, and the reconnect loop would outlive stop().
        async with asyncio.timeout(CONNECT_TIMEOUT):
            transport, _ = await loop.create_connection(
                lambda: receiver,
                host,
                int(port),
                ssl=self.ssl,
                server_hostname=host if self.ssl is not None else None,
            )
        store = self.store
        try:
            hello = Hello(self.broker_id, store.max_phy_offset, self.broker_addr)
            if self.inner is not None:
                hello = sign_hello(hello, self.inner)
            transport.write(encode_hello(hello))
            while True:
                done, _ = await asyncio.wait([receiver.closed], timeout=self.report_interval)
                if done:
                    receiver.closed.result()  # raises what ended the connection
                    raise ConnectionResetError(f"master {addr} closed the HA connection")
                if receiver.reading_paused:
                    receiver.last_rx = loop.time()  # (not reading: no sign of life due)
                elif loop.time() - receiver.last_rx > self.read_timeout:
                    raise TimeoutError(f"nothing from master {addr} for {self.read_timeout:g} s")
                transport.write(REPORT.pack(store.max_phy_offset))
        finally:
            self._receiver = None
            transport.close()


class _Receiver(asyncio.Protocol):
    """Transfers from the master, handled as they arrive: every complete one is appended,
    then one report acknowledges them all (before dispatch takes the loop).

    A transfer the store refuses (its disk is full: ServiceNotAvailableError, or ENOSPC
    from a write) stays at the head of the buffer, unacknowledged; what follows waits
    behind it (the master sends at most its window past the last report), and reading
    pauses should the buffer pass STALLED_BUFFER. The append is tried again every
    RETRY_INTERVAL and on every frame that arrives; once it is taken, the buffer is worked
    off and acknowledged as usual."""

    def __init__(self, slave: HASlave, addr: str) -> None:
        self.slave = slave
        self.addr = addr
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.last_rx = asyncio.get_running_loop().time()
        self.reading_paused = False  # a refused append holds STALLED_BUFFER bytes
        self._retry: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if not self.closed.done():
            if exc is None:
                self.closed.set_result(None)
            else:
                self.closed.set_exception(exc)

    def data_received(self, data: bytes) -> None:
        self.last_rx = asyncio.get_running_loop().time()
        self.buf += data
        self._drain()

    def _drain(self) -> None:
        """Append what the buffer holds, acknowledge it, and while the store refuses, hold
        it and try again later."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        buf = self.buf
        try:
            appended = self._consume(buf)
        except Exception as exc:  # a bad frame, or bytes that cannot continue our log
            if not self.closed.done():
                self.closed.set_exception(exc)
            transport.close()
            return
        slave = self.slave
        if slave.refused is not None:
            if self._retry is None:
                self._retry = asyncio.get_running_loop().call_later(RETRY_INTERVAL, self._again)
            if len(buf) >= STALLED_BUFFER and not self.reading_paused:
                self.reading_paused = True
                transport.pause_reading()
        elif self.reading_paused:
            self.reading_paused = False
            transport.resume_reading()
        if appended:
            store = slave.store
            transport.write(REPORT.pack(store.max_phy_offset))
            store.wake_dispatch()

    def _again(self) -> None:
        self._retry = None
        self._drain()

    def _consume(self, buf: bytearray) -> bool:
        slave = self.slave
        store = slave.store
        head_size = TRANSFER.size
        pos = 0
        appended = False
        try:
            while len(buf) - pos >= head_size:
                offset, master_max, size, flags = decode_transfer_head(
                    bytes(buf[pos : pos + head_size])
                )
                end = pos + head_size + size
                if len(buf) < end:
                    break
                if not slave.connected_to:
                    slave.connected_to = self.addr
                    log.info(
                        "replicating from master %s at CommitLog offset %d",
                        self.addr,
                        store.max_phy_offset,
                    )
                slave.master_max_offset = master_max
                if flags & TRUNCATE:
                    store.truncate_to(offset)
                    appended = True
                elif size:
                    with memoryview(buf)[pos + head_size : end] as data:
                        if not slave.append(offset, data):
                            break  # refused: this transfer waits at the head of buf
                    slave.received_bytes += size
                    appended = True
                pos = end
        finally:
            if pos:
                del buf[:pos]
        return appended
