"""The slave's side of classic HA (RocketMQ's HAClient).

The slave connects to its master's HA port (plain TCP, frames in
:mod:`rocketq.replication.ha.wire`), says who it is and where its CommitLog ends, and appends what
the master streams from there, byte for byte, reporting its new end after every range and
at least every ``report_interval``. When the master says the slave is ahead of it, the
slave cuts its CommitLog back (and logs it). A broken connection is opened again after a
second; the slave resumes from its own end. A master silent for ``read_timeout`` (it
heartbeats every second) counts as lost.

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
from rocketq.common.exceptions import RocketqError
from rocketq.replication.ha.wire import (
    REPORT,
    TRANSFER,
    TRUNCATE,
    Hello,
    decode_transfer_head,
    encode_hello,
    sign_hello,
)
from rocketq.storage.message_store import MessageStore

log = logging.getLogger(__name__)

RECONNECT_DELAY = 1.0
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 20.0  # s without a byte from the master (RocketMQ's haHousekeepingInterval)


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
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def lag_bytes(self) -> int:
        if self.master_max_offset < 0:
            return -1
        return max(0, self.master_max_offset - self.store.max_phy_offset)

    async def _run(self) -> None:
        while True:
            addr = self.master_ha_addr()
            if addr:
                try:
                    await self._replicate(addr)
                except asyncio.CancelledError:
                    raise
                except (OSError, TimeoutError, RuntimeError) as exc:  # uvloop: RuntimeError
                    if self.connected_to:
                        log.warning("lost master %s (%s); reconnecting", addr, exc)
                except RocketqError as exc:
                    log.error("replication from %s stopped: %s; reconnecting", addr, exc)
                except Exception:
                    log.exception("replication from %s failed; reconnecting", addr)
                finally:
                    self.connected_to = ""
                if self.on_lost is not None:
                    self.on_lost()
            await asyncio.sleep(RECONNECT_DELAY)

    async def _replicate(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        loop = asyncio.get_running_loop()
        receiver = _Receiver(self, addr)
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
                if loop.time() - receiver.last_rx > self.read_timeout:
                    raise TimeoutError(f"nothing from master {addr} for {self.read_timeout:g} s")
                transport.write(REPORT.pack(store.max_phy_offset))
        finally:
            transport.close()


class _Receiver(asyncio.Protocol):
    """Transfers from the master, handled as they arrive: every complete one is appended,
    then one report acknowledges them all (before dispatch takes the loop)."""

    def __init__(self, slave: HASlave, addr: str) -> None:
        self.slave = slave
        self.addr = addr
        self.buf = bytearray()
        self.transport: asyncio.WriteTransport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.last_rx = asyncio.get_running_loop().time()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            if exc is None:
                self.closed.set_result(None)
            else:
                self.closed.set_exception(exc)

    def data_received(self, data: bytes) -> None:
        self.last_rx = asyncio.get_running_loop().time()
        buf = self.buf
        buf += data
        try:
            appended = self._consume(buf)
        except Exception as exc:  # a bad frame or a store refusal ends the connection
            if not self.closed.done():
                self.closed.set_exception(exc)
            assert self.transport is not None
            self.transport.close()
            return
        if appended:
            store = self.slave.store
            assert self.transport is not None
            self.transport.write(REPORT.pack(store.max_phy_offset))
            store.wake_dispatch()

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
                        store.append_raw(offset, data, wake_dispatch=False)
                    slave.received_bytes += size
                    appended = True
                pos = end
        finally:
            if pos:
                del buf[:pos]
        return appended
