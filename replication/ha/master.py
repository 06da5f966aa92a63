"""The master's side of classic HA (RocketMQ's HAService, HAConnection, GroupTransferService).

The master listens on its HA port (plain TCP, frames in :mod:`rocketq.replication.ha.wire`). Each
slave that connects says where its CommitLog ends; the master streams the CommitLog from
there as byte ranges (at most ``transfer_batch`` bytes each, at most ``window`` bytes sent
and not yet acknowledged), and the slave reports its new end after each range it stored.
The appends of one stream message leave as one range as soon as the last is written (the
store settles them; appends nobody settles leave at the loop's next turn), and a report
that opens the window pumps at once, in the callback that read it: no task sits between
an append, its transfer and the acknowledgement that answers it. A slave ahead of the
master (the master lost an unflushed tail) is told to cut its log back first.

For SYNC_MASTER, :meth:`HAMaster.wait_slave` holds a send until some slave acknowledged
past the send's end (:class:`~replication.waiters.OffsetWaiters`: one report completes
every send it covers). A report past what the master sent on that connection is a
protocol violation: the connection is closed (``ha_ack_past_sent``) and the report counts
for nothing.

Who may connect: given ``inner`` credentials, the master takes a slave only when its hello
is signed with them (timestamp within five minutes, each signature once; see
:mod:`~replication.ha.wire`) or when the slave showed a node's certificate: one the port
verified and that names a node (``tls_node_name_pattern``,
:mod:`~remoting.node_identity`; any other certificate from the same CA, a user's, proves
nothing); anything else is closed at once (``ha_unauthenticated``, logged at most once a
minute per address). Required client certificates without credentials take only a node's
certificate. Without either any hello is taken, as before.
:attr:`SlaveConnection.authenticated` says whether the slave proved who it is, so that what
it claims (its broker address) can be trusted. Given ``tls`` (a
:class:`~remoting.tls.ServerTls`), the port serves TLS in its mode (permissive: TLS and
plaintext told apart by the first byte; enforcing: TLS only), see
:mod:`~replication.ha.secure`.

The port keeps the broker's server bounds (:class:`PortGuard`, reasons prefixed ``ha_``):
at most HA_MAX_CONNECTIONS connections, HA_MAX_CONNECTIONS_PER_ADDRESS from one address
(silent ones give way to new ones there), a hello within HELLO_TIMEOUT, a partial hello
within server_frame_read_timeout_seconds, and a slave silent for IDLE_HEARTBEATS of its
report interval (at least IDLE_FLOOR s) is dropped; what is not a hello closes only that
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import time
from collections.abc import Callable
from typing import Final, cast

from rocketq.auth.credentials import Credentials
from rocketq.common.config import ServerBoundsConfig
from rocketq.common.ports import PortBindError
from rocketq.remoting.bounds import (
    BAD_FRAME,
    BUFFERED_BYTES,
    FRAME_READ_TIMEOUT,
    FRAME_TOO_LARGE,
    IDLE,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
    Connection,
    ServerGuard,
)
from rocketq.remoting.tls import ServerTls
from rocketq.replication.ha.secure import (
    ACK_PAST_SENT,
    SECURITY_REASONS,
    UNAUTHENTICATED,
    SeenSignatures,
    node_certificate,
    requires_client_cert,
    serve,
    tls_identity,
)
from rocketq.replication.ha.wire import (
    MAX_HELLO,
    REPORT,
    TRUNCATE,
    HAProtocolError,
    Hello,
    check_hello,
    decode_hello,
    encode_transfer_head,
)
from rocketq.replication.waiters import OffsetWaiters, resolver
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus

log = logging.getLogger(__name__)

TRANSFER_BATCH = 4 * 1024 * 1024
WINDOW = 32 * 1024 * 1024
HEARTBEAT_INTERVAL = 1.0  # s: an idle connection sends an empty transfer this often
HELLO_TIMEOUT = 10.0  # s a new connection has to say who it is
# The bounds a replication port keeps (a PortGuard's reasons, with the port's prefix).
PORT_REASONS: Final = (
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
    IDLE,
    FRAME_TOO_LARGE,
    BAD_FRAME,
    FRAME_READ_TIMEOUT,
    BUFFERED_BYTES,
    *SECURITY_REASONS,
)


# -- the port's bounds ---------------------------------------------------------------------

# Connections the HA port holds at once, and from one remote address: a master has one or
# two slaves; the rest is room for reconnects (server_max_connections and
# server_max_connections_per_address lower them further, never raise them).
HA_MAX_CONNECTIONS: Final = 64
HA_MAX_CONNECTIONS_PER_ADDRESS: Final = 16
# A slave reports every ha_send_heartbeat_interval; one silent for this many of them (and
# at least IDLE_FLOOR seconds) is gone.
IDLE_HEARTBEATS: Final = 12
IDLE_FLOOR: Final = 60.0


class PortGuard(ServerGuard):
    """A :class:`~cluster.remoting.bounds.ServerGuard` for a replication port (HA, Raft).

    Its reasons carry the port's prefix (``ha_idle``, ``raft_bad_frame``...), so that
    they can be counted in the remoting family (:meth:`count_into`). A connection that has
    not yet said who it is (the HA hello, a first Raft frame) is *fresh*: it is closed after
    ``hello_timeout``, and when a cap is reached the oldest fresh connection (from the
    same address, for the per-address cap) gives way to the new one, so a flood of silent
    connections cannot keep a real slave or member from connecting again; partial frames
    of fresh connections are evicted first when over the buffered-bytes budget."""

    def __init__(
        self,
        bounds: ServerBoundsConfig,
        prefix: str,
        *,
        max_connections: int,
        max_per_address: int,
        idle_timeout: float,
        max_frame: int,
        hello_timeout: float,
    ) -> None:
        super().__init__(bounds)
        self.prefix = prefix
        self.max_connections = min(bounds.server_max_connections, max_connections)
        self.max_per_address = min(bounds.server_max_connections_per_address, max_per_address)
        # The key's 0 (never) holds here too.
        self.idle_timeout = idle_timeout if bounds.server_channel_max_idle_time_seconds else 0.0
        self.max_frame = max_frame
        self.max_buffered = max(bounds.server_max_buffered_bytes, max_frame)
        self.hello_timeout = hello_timeout
        self.rejected = {prefix + r: 0 for r in PORT_REASONS}
        self.fresh: dict[Connection, float] = {}  # not yet said who it is -> when opened

    def count_into(self, counts: dict[str, int]) -> None:
        """Count refusals in ``counts`` from now on (a remoting guard's, whose reasons these
        prefixed ones join in rocketq_remoting_rejected_total)."""
        for reason, n in self.rejected.items():
            counts[reason] = counts.get(reason, 0) + n
        self.rejected = counts

    def reject(self, conn: Connection, reason: str, detail: str) -> None:
        super().reject(conn, self.prefix + reason, detail)

    def admit(self, conn: Connection) -> bool:
        address = conn.address
        if len(self.open) >= self.max_connections:
            self._give_way(None, f"server_max_connections {self.max_connections}")
        elif self.per_address.get(address, 0) >= self.max_per_address:
            self._give_way(address, f"server_max_connections_per_address {self.max_per_address}")
        if not super().admit(conn):
            return False
        self.fresh[conn] = asyncio.get_running_loop().time()
        return True

    def _give_way(self, address: str | None, bound: str) -> None:
        """Close the oldest fresh connection (from ``address`` if given) for a new one."""
        for old in self.fresh:
            if address is None or old.address == address:
                old.reject(
                    MAX_CONNECTIONS if address is None else MAX_CONNECTIONS_PER_ADDRESS,
                    f"at {bound}, it has not said who it is and gives way to a new connection",
                )
                self.closed(old)
                return

    def identified(self, conn: Connection) -> None:
        """The connection said who it is (its hello, its first frame)."""
        self.fresh.pop(conn, None)

    def closed(self, conn: Connection) -> None:
        self.fresh.pop(conn, None)
        super().closed(conn)

    def _evict(self) -> None:
        for conn in [c for c in self.partial if c in self.fresh]:
            if self.buffered <= self.max_buffered:
                return
            conn.reject(
                BUFFERED_BYTES,
                f"partial frames hold {self.buffered} bytes (server_max_buffered_bytes "
                f"{self.max_buffered}) and this connection has not said who it is",
            )
        super()._evict()

    def start(self) -> None:
        periods = [t for t in (self.idle_timeout, self.frame_timeout, self.hello_timeout) if t]
        if periods and self._timer is None:
            tick = min(1.0, max(0.02, min(periods) / 8))
            self._timer = asyncio.get_running_loop().create_task(self._run(tick))

    def sweep(self, now: float) -> None:
        for conn, since in list(self.fresh.items()):  # the oldest first
            if now - since < self.hello_timeout:
                break
            conn.reject(IDLE, f"it did not say who it is in {self.hello_timeout:g} s")
            self.closed(conn)
        super().sweep(now)


class _RefusedError(Exception):
    """A whole hello this master does not take (why, for the log)."""


class SlaveConnection(asyncio.Protocol):
    """One slave's connection: its hello, then its reports; transfers go out from
    :meth:`pump`."""

    def __init__(self, master: HAMaster, conn_id: int, guard: PortGuard | None = None) -> None:
        self.master = master
        self.guard = guard  # the port's bounds (None: none, as for a parser under test)
        self.conn_id = conn_id
        self.ack = -1  # the slave's CommitLog end, as last reported
        self.broker_addr = ""  # the slave's broker address, as its hello claims
        self.broker_id = 0
        # The slave proved who it is: its hello is signed with the master's inner
        # credentials, or it showed a node's certificate.
        self.authenticated = False
        self.tls_identity: str | None = None  # its verified certificate's common name
        self.node_name: str | None = None  # the node its certificate proves, if it does
        self.stale_end = -1  # a slave told to cut back may report its old end once more
        self.last_report = time.monotonic()
        self.last_sent = time.monotonic()
        self.next_offset = -1  # where the next transfer starts; -1 before the hello
        # Where this connection's transfers began: the window counts from here until the
        # slave acknowledges past it (a new slave reports 0, and this master may hold
        # nothing below gigabytes).
        self.floor = 0
        self.transport: asyncio.WriteTransport | None = None
        self.paused = False  # the socket's buffer is full: wait for resume_writing
        # What the port's guard reads (cluster.remoting.bounds.Connection): the peer, the
        # bytes of a partial hello or report, a frame since its last look, and when.
        self.address = ""
        self.peer = ""
        self.buffered = bytearray()
        self.in_flight = 0
        self.pending: dict[int, object] = {}
        self.active = False
        self.idle_since = 0.0
        self.partial_since = 0.0

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.address, self.peer = str(peer[0]), f"{peer[0]}:{peer[1]}"
        if self.guard is not None and not self.guard.admit(self):
            self.transport.abort()
            return
        self.tls_identity = tls_identity(transport)
        self.node_name = node_certificate(self.master.tls, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.master._pending[self.conn_id] = self

    def connection_lost(self, exc: Exception | None) -> None:
        if self.guard is not None:
            self.guard.closed(self)
        self.master._forget(self)

    def reject(self, reason: str, why: str) -> None:
        """Close the connection at once over a bound of the port (counted, logged)."""
        if self.transport is None or self.transport.is_closing():
            if self.guard is not None:
                self.guard.release(self)  # closed already (and counted once)
            return
        if self.guard is not None:
            self.guard.reject(self, reason, why)
            self.guard.release(self)
            if self.transport is not None:
                self.transport.abort()
        else:
            log.warning("HA connection dropped: %s [%s]", why, reason)
            self.buffered.clear()
            self.close()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.pump()

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        buf = self.buffered
        before = len(buf)
        buf += data
        try:
            if self.next_offset < 0 and not self._hello(buf):
                self._settled(before)
                return
        except HAProtocolError as exc:
            del buf[before:]  # (the guard counts what earlier reads left, no more)
            self.reject(BAD_FRAME, f"{exc} (before its hello)")
            return
        except _RefusedError as exc:
            self._settled(before)  # (the guard holds this read's bytes, all let go now)
            self.reject(UNAUTHENTICATED, str(exc))
            return
        if self.transport is None or self.transport.is_closing():
            return  # refused by its hello
        size = REPORT.size
        usable = len(buf) - len(buf) % size
        if usable:
            # Reports that arrived back to back: only the newest end counts, and none may
            # be past what was sent.
            sent = self.next_offset
            reported = sent
            for (reported,) in REPORT.iter_unpack(bytes(buf[:usable])):
                if reported > sent and reported != self.stale_end:
                    self._settled(before)
                    self.reject(
                        ACK_PAST_SENT,
                        f"slave {self.broker_addr or self.peer} acknowledged CommitLog offset "
                        f"{reported}, past the {sent} sent to it",
                    )
                    return
            del buf[:usable]
            self.last_report = time.monotonic()
            self.active = True
            if reported <= sent:
                # (A slave that was ahead of this master may report its old end until it
                # has cut its CommitLog back: its bytes there are not ours, they
                # acknowledge nothing.)
                self.ack = reported
                self.master._on_report(self)
        self._settled(before)

    def _hello(self, buf: bytearray) -> bool:
        """Take the hello off ``buf`` once it is whole (False until then, and when it is
        refused: the connection is closed)."""
        decoded = decode_hello(buf)
        if decoded is None:
            return False
        hello, size = decoded
        why = self.master._refusal(self, hello)
        if why is not None:
            raise _RefusedError(f"HA hello from {hello.broker_addr!r} refused: {why}")
        self.broker_id, self.ack, self.broker_addr = (
            hello.broker_id,
            hello.max_offset,
            hello.broker_addr,
        )
        del buf[:size]
        self.active = True
        if self.guard is not None:
            self.guard.identified(self)
        self.master._hello(self)
        return True

    def _settled(self, before: int) -> None:
        """The guard counts what is left of a frame (a hello, a report) after this read."""
        after = len(self.buffered)
        guard, transport = self.guard, self.transport
        if not (before or after) or guard is None or transport is None or transport.is_closing():
            return
        if before and self.next_offset < 0:  # more of the same hello
            guard.grew(self, after - before)
        else:
            guard.settled(self, before, after)

    # -- transfers -----------------------------------------------------------------------

    def pump(self) -> None:
        """Send what the CommitLog holds past ``next_offset``, as the window allows."""
        transport = self.transport
        if self.next_offset < 0 or self.paused or transport is None or transport.is_closing():
            return
        master = self.master
        commitlog = master.store.commitlog
        master_max = commitlog.max_offset
        next_offset = self.next_offset
        while next_offset < master_max and next_offset - max(self.ack, self.floor) < master.window:
            segment_end = commitlog.next_segment_offset(next_offset)
            end = min(master_max, next_offset + master.transfer_batch, segment_end)
            view = commitlog.read(next_offset, end - next_offset)
            if view is None:
                if 0 <= next_offset < commitlog.min_offset:
                    # Retention deleted the segment this slave was to get next: it cannot
                    # continue its CommitLog, which it says once it sees where this goes on.
                    log.warning(
                        "slave %s needs CommitLog offset %d, below this master's oldest "
                        "segment (%d): it has to be rebuilt from an empty store",
                        self.broker_addr or self.peer,
                        next_offset,
                        commitlog.min_offset,
                    )
                    next_offset = self.floor = commitlog.min_offset
                    continue
                break
            try:
                data = bytes(view)
            finally:
                view.release()
            transport.write(encode_transfer_head(next_offset, master_max, len(data)) + data)
            next_offset = end
            self.last_sent = time.monotonic()
            if self.paused:
                break
        self.next_offset = next_offset

    def heartbeat(self) -> None:
        transport = self.transport
        if self.next_offset < 0 or self.paused or transport is None or transport.is_closing():
            return  # (paused: what waits to be written says the master is alive)
        master_max = self.master.store.commitlog.max_offset
        transport.write(encode_transfer_head(self.next_offset, master_max, 0))
        self.last_sent = time.monotonic()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for the HA port (bound now, so port 0 has its number at once).
    OSError naming the address when it is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        raise PortBindError(
            f"cannot listen on {host}:{port} for HA; is another broker running there? set "
            "ha_listen_port",
            name="ha",
            port=port,
            code=exc.errno,
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
        bounds: ServerBoundsConfig | None = None,
        heartbeat_interval: float = 5.0,
        hello_timeout: float = HELLO_TIMEOUT,
        inner: Credentials | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        """``bounds``: the broker's server bounds, which the HA port keeps too (its caps
        at most HA_MAX_CONNECTIONS and HA_MAX_CONNECTIONS_PER_ADDRESS); a slave silent for
        IDLE_HEARTBEATS of its ``heartbeat_interval`` (s, ha_send_heartbeat_interval), and
        at least IDLE_FLOOR seconds, is dropped. ``inner``: the credentials a slave's hello
        must be signed with (None: hellos are not checked); ``tls``: the port serves TLS
        in its mode (None: plaintext)."""
        self.store = store
        self.inner = inner
        self.tls = tls if tls is not None and tls.enabled else None
        self._seen = SeenSignatures()
        self._accept: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        self.guard = PortGuard(
            bounds or ServerBoundsConfig(),
            "ha_",
            max_connections=HA_MAX_CONNECTIONS,
            max_per_address=HA_MAX_CONNECTIONS_PER_ADDRESS,
            idle_timeout=max(IDLE_FLOOR, IDLE_HEARTBEATS * heartbeat_interval),
            max_frame=MAX_HELLO,
            hello_timeout=hello_timeout,
        )
        self.max_gap = max_gap
        self.transfer_batch = transfer_batch
        self.window = window
        self.on_slave = on_slave
        self.slaves: dict[int, SlaveConnection] = {}  # said hello
        self._pending: dict[int, SlaveConnection] = {}  # connected, no hello yet
        self._ids = itertools.count(1)
        self._waiting = OffsetWaiters()  # SYNC sends until a slave acknowledged them
        self._server: asyncio.Server | None = None
        self._beat: asyncio.Task[None] | None = None
        store.settle_listeners.append(self._pump_all)

    # -- life --------------------------------------------------------------------------

    async def start(self, sock: socket.socket) -> None:
        """Serve slaves on a listening socket (see :func:`listen_socket`)."""
        loop = asyncio.get_running_loop()

        def connection() -> SlaveConnection:
            return SlaveConnection(self, next(self._ids), self.guard)

        if self.tls is None:
            self._server = await loop.create_server(connection, sock=sock)
        else:
            self._sock = sock
            self._accept = loop.create_task(
                serve(
                    sock,
                    connection,
                    self.tls,
                    self.guard,
                    handshake_timeout=self.guard.hello_timeout,
                )
            )
        self._beat = loop.create_task(self._heartbeats())
        self.guard.start()

    async def stop(self) -> None:
        await self._waiting.close()
        await self.guard.stop()
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
        if self._server is not None:
            self._server.close()
        if self._accept is not None:
            self._accept.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accept
            self._accept = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        for conn in [*self.slaves.values(), *self._pending.values()]:
            conn.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None

    async def _heartbeats(self) -> None:
        """An idle connection gets an empty transfer every second (the slave's sign of
        life). (The port's guard drops a connection silent past its hello timeout.)"""
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL / 2)
            now = time.monotonic()
            for conn in list(self.slaves.values()):
                if now - conn.last_sent >= HEARTBEAT_INTERVAL:
                    conn.heartbeat()

    # -- state -------------------------------------------------------------------------

    @property
    def best_ack(self) -> int:
        return max((s.ack for s in self.slaves.values()), default=-1)

    def lag_bytes(self) -> int:
        """How far the best slave is behind (the master's end when none is connected)."""
        best = self.best_ack
        return self.store.max_phy_offset - max(best, 0)

    def _pump_all(self) -> None:
        """After a run of appends (the store settles them): ship them to every slave."""
        for conn in list(self.slaves.values()):
            conn.pump()

    def _refusal(self, conn: SlaveConnection, hello: Hello) -> str | None:
        """Why this master does not take ``conn``'s hello, or None (marking the connection
        authenticated when the slave proved who it is). Only a node's certificate stands
        in for the hello's signature: a certificate that merely chains to the trusted CA
        (a user's) counts as none."""
        inner = self.inner
        if inner is not None and (hello.signed or conn.node_name is None):
            why = check_hello(hello, inner)
            if why is None and not self._seen.first_use(hello.signature):
                why = "its signature was used before (a hello played again)"
            if why is not None:
                if conn.tls_identity is not None and conn.node_name is None:
                    why += (
                        f" (its certificate {conn.tls_identity!r} names no node: "
                        "tls_node_name_pattern)"
                    )
                return why
            conn.authenticated = True
            return None
        if conn.node_name is not None:
            conn.authenticated = True
        elif requires_client_cert(self.tls):
            shown = (
                "no client certificate"
                if conn.tls_identity is None
                else f"the certificate {conn.tls_identity!r}, which names no node "
                "(tls_node_name_pattern)"
            )
            return f"the slave showed {shown} and its hello is not signed"
        return None

    def _hello(self, conn: SlaveConnection) -> None:
        self._pending.pop(conn.conn_id, None)
        self.slaves[conn.conn_id] = conn
        log.info(
            "slave %s (id %d) connected at CommitLog offset %d",
            conn.broker_addr,
            conn.broker_id,
            conn.ack,
        )
        commitlog = self.store.commitlog
        master_max = commitlog.max_offset
        start = conn.ack
        if start > master_max:
            log.warning(
                "slave %s is ahead of this master (%d > %d): it cuts its CommitLog back",
                conn.broker_addr,
                start,
                master_max,
            )
            assert conn.transport is not None
            conn.transport.write(encode_transfer_head(master_max, master_max, 0, TRUNCATE))
            conn.stale_end = start
            start = conn.ack = master_max  # what it holds past here is not this master's
        # A new slave (an empty store reports 0) starts at the oldest segment kept, so it
        # can serve every message this master can; its store begins there. (RocketMQ
        # 4.9's master starts such a slave at its newest segment: quicker to catch up,
        # but what the slave lacks stays on the master alone until retention.) A slave
        # whose end lies below that cannot continue its CommitLog: it is sent what is kept
        # and says so.
        if 0 < start < commitlog.min_offset:
            log.warning(
                "slave %s ends at CommitLog offset %d, below this master's oldest segment "
                "(%d): it has to be rebuilt from an empty store",
                conn.broker_addr,
                start,
                commitlog.min_offset,
            )
        conn.next_offset = conn.floor = max(start, commitlog.min_offset)
        if self.on_slave is not None:
            self.on_slave(conn)
        conn.pump()

    def _forget(self, conn: SlaveConnection) -> None:
        self._pending.pop(conn.conn_id, None)
        if self.slaves.pop(conn.conn_id, None) is not None:
            log.warning("slave %s (id %d) disconnected", conn.broker_addr, conn.broker_id)

    def _on_report(self, conn: SlaveConnection) -> None:
        self._waiting.advance(self.best_ack)
        conn.pump()  # the window may have opened

    # -- SYNC_MASTER -------------------------------------------------------------------

    def wait_slave_then(
        self, end_offset: int, timeout: float, done: Callable[[PutStatus], None]
    ) -> None:
        """Call ``done`` with PUT_OK once a slave has everything below ``end_offset``;
        SLAVE_NOT_AVAILABLE with no slave (or one too far behind); FLUSH_SLAVE_TIMEOUT after
        ``timeout``. At once when the answer is known now, else from the report that
        reaches the offset (or the sweep that gives up on it)."""
        best = self.best_ack
        if best < 0 or self.store.max_phy_offset - best > self.max_gap:
            done(PutStatus.SLAVE_NOT_AVAILABLE)
        elif best >= end_offset:
            done(PutStatus.PUT_OK)
        else:
            self._waiting.add(
                end_offset,
                timeout,
                lambda reached: done(
                    PutStatus.PUT_OK if reached else PutStatus.FLUSH_SLAVE_TIMEOUT
                ),
            )

    async def wait_slave(self, end_offset: int, timeout: float) -> PutStatus:
        """:meth:`wait_slave_then` as a coroutine."""
        fut: asyncio.Future[PutStatus] = asyncio.get_running_loop().create_future()
        self.wait_slave_then(end_offset, timeout, resolver(fut))
        return await fut
