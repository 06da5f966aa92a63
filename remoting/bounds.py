"""The bounds a remoting server keeps on what its peers can make it hold.

One :class:`ServerGuard` per :class:`~cluster.remoting.transport.RemotingServer`: it admits
connections (a cap per server and per remote address), keeps the server-wide count of
bytes buffered in partial frames and of bytes of requests handed to handlers that have not
answered yet (in flight), resumes the connections paused over the in-flight budget once the
total falls back, closes connections idle for too long or whose frame is too slow to
arrive (one timer for the server, not one per connection or frame), counts what it refused
by reason and logs each reason at most once a minute per remote address.

The connections do the per-frame part themselves with integer comparisons and flags
(:class:`~cluster.remoting.transport.Connection`); the guard is called only when a
connection opens or closes, when a frame spans reads, and from its timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Final, Protocol

from rocketq.common.config import ServerBoundsConfig

log = logging.getLogger(__name__)

# Reasons, the ``reason`` label of rocketq_remoting_rejected_total.
MAX_CONNECTIONS: Final = "max_connections"
MAX_CONNECTIONS_PER_ADDRESS: Final = "max_connections_per_address"
IDLE: Final = "idle"
FRAME_TOO_LARGE: Final = "frame_too_large"
HEADER_TOO_LARGE: Final = "header_too_large"
BAD_FRAME: Final = "bad_frame"
FRAME_READ_TIMEOUT: Final = "frame_read_timeout"
BUFFERED_BYTES: Final = "buffered_bytes"
REQUESTS_IN_FLIGHT: Final = "requests_in_flight"
IN_FLIGHT_BYTES: Final = "in_flight_bytes"
WRITE_BUFFER_HIGH: Final = "write_buffer_high"
WRITE_BUFFER_FULL: Final = "write_buffer_full"
# Requests refused by the access check (authentication on: no or bad credentials;
# authorization on: not allowed), answered NO_PERMISSION; the connection stays open.
UNAUTHENTICATED: Final = "unauthenticated"
FORBIDDEN: Final = "forbidden"
REASONS: Final = (
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
    IDLE,
    FRAME_TOO_LARGE,
    HEADER_TOO_LARGE,
    BAD_FRAME,
    FRAME_READ_TIMEOUT,
    BUFFERED_BYTES,
    REQUESTS_IN_FLIGHT,
    IN_FLIGHT_BYTES,
    WRITE_BUFFER_HIGH,
    WRITE_BUFFER_FULL,
    UNAUTHENTICATED,
    FORBIDDEN,
)

# A reason is logged at most once per remote address in this many seconds.
LOG_INTERVAL: Final = 60.0


class Connection(Protocol):
    """What the guard reads and sets of a connection (transport.Connection is one)."""

    address: str  # the peer's IP
    peer: str  # its IP and port
    buffered: bytearray  # the partial frame's bytes
    in_flight: int
    pending: dict[int, Any]  # requests sent on it that wait for their answers
    active: bool
    idle_since: float
    partial_since: float

    def reject(self, reason: str, why: str) -> None: ...


class Holder(Connection, Protocol):
    """A connection whose requests' bytes in flight the guard bounds (transport.Connection
    is one; the HA and Raft ports' connections are not)."""

    in_flight_bytes: int

    def unhold(self) -> None: ...


class ServerGuard:
    """A server's bounds and what it holds against them (touched on the event loop only)."""

    def __init__(self, bounds: ServerBoundsConfig) -> None:
        self.max_connections = bounds.server_max_connections
        self.max_per_address = bounds.server_max_connections_per_address
        self.idle_timeout = bounds.server_channel_max_idle_time_seconds
        self.max_frame = bounds.server_frame_max_length
        self.max_header = bounds.server_header_max_length
        self.frame_timeout = bounds.server_frame_read_timeout_seconds
        self.max_buffered = bounds.server_max_buffered_bytes
        self.max_in_flight = bounds.server_max_requests_in_flight_per_connection
        self.max_in_flight_bytes_per_connection = bounds.server_max_in_flight_bytes_per_connection
        self.max_in_flight_bytes = bounds.server_max_in_flight_bytes
        # Paused connections read again once below these (half of each budget).
        self.resume_in_flight_bytes_per_connection = self.max_in_flight_bytes_per_connection // 2
        self.resume_in_flight_bytes = self.max_in_flight_bytes // 2
        self.high_water = bounds.write_buffer_high_water_mark
        self.low_water = bounds.write_buffer_low_water_mark
        self.max_write_buffer = bounds.server_max_write_buffer_bytes
        # Admitted connections, and how many per remote address.
        self.open: set[Connection] = set()
        self.per_address: dict[str, int] = {}
        # Bytes of partial frames buffered, and the connections holding one, the frame
        # that began first first (a dict keeps insertion order).
        self.buffered = 0
        self.partial: dict[Connection, None] = {}
        # Bytes of requests in flight on all connections, and the connections paused over
        # the budgets whose own bytes are low again: they wait for the total, first paused
        # first resumed.
        self.in_flight_bytes = 0
        self.waiting: dict[Holder, None] = {}
        # Connections not read: paused over the in-flight budgets (holding), or for that
        # or because their answers are not read (unread). Their frames are not timed.
        self.holding: set[Connection] = set()
        self.unread: set[Connection] = set()
        # Reason -> times a bound was crossed (every reason present, 0 until it happens).
        self.rejected: dict[str, int] = dict.fromkeys(REASONS, 0)
        # (address, reason) -> [loop time of the last log line, crossings since]
        self._logged: dict[tuple[str, str], list[float]] = {}
        self._timer: asyncio.Task[None] | None = None

    # -- connections ----------------------------------------------------------------------

    def admit(self, conn: Connection) -> bool:
        """Count a new connection in, or refuse it (False: the caller closes it)."""
        address = conn.address
        if len(self.open) >= self.max_connections:
            self.reject(
                conn,
                MAX_CONNECTIONS,
                f"{len(self.open)} connections are open (server_max_connections "
                f"{self.max_connections})",
            )
            return False
        held = self.per_address.get(address, 0)
        if held >= self.max_per_address:
            self.reject(
                conn,
                MAX_CONNECTIONS_PER_ADDRESS,
                f"{held} connections from {address} are open "
                f"(server_max_connections_per_address {self.max_per_address})",
            )
            return False
        self.per_address[address] = held + 1
        self.open.add(conn)
        conn.idle_since = asyncio.get_running_loop().time()
        return True

    def closed(self, conn: Connection) -> None:
        self.release(conn)
        self.holding.discard(conn)
        self.unread.discard(conn)
        if conn in self.open:
            self.open.discard(conn)
            left = self.per_address.get(conn.address, 1) - 1
            if left > 0:
                self.per_address[conn.address] = left
            else:
                self.per_address.pop(conn.address, None)

    # -- partial frames -----------------------------------------------------------------

    def grew(self, conn: Connection, n: int) -> None:
        """``n`` more bytes of the connection's partial frame are buffered."""
        self.buffered += n
        if self.buffered > self.max_buffered:
            self._evict()

    def settled(self, conn: Connection, before: int, after: int) -> None:
        """The connection's buffer went from ``before`` to ``after`` bytes in a read that
        completed its frames; what is left (``after`` bytes) is a new frame."""
        self.buffered += after - before
        if after:
            self.partial.pop(conn, None)
            self.partial[conn] = None
            conn.partial_since = asyncio.get_running_loop().time()
            if self.buffered > self.max_buffered:
                self._evict()
        else:
            self.partial.pop(conn, None)

    def release(self, conn: Connection) -> None:
        """The connection's buffered bytes are dropped (closed, or its frame refused)."""
        self.buffered -= len(conn.buffered)
        conn.buffered.clear()
        self.partial.pop(conn, None)

    def _evict(self) -> None:
        """Close the connections whose partial frames began longest ago until the
        buffered bytes fit the budget again."""
        while self.buffered > self.max_buffered and self.partial:
            oldest = next(iter(self.partial))
            oldest.reject(
                BUFFERED_BYTES,
                f"partial frames hold {self.buffered} bytes (server_max_buffered_bytes "
                f"{self.max_buffered}) and this connection's began longest ago",
            )

    # -- requests in flight -----------------------------------------------------------

    def let_go(self, conn: Holder) -> None:
        """A connection closed: its requests' bytes leave the total (its handlers are
        cancelled; an answer given later is not counted again)."""
        self.in_flight_bytes -= conn.in_flight_bytes
        conn.in_flight_bytes = 0
        self.waiting.pop(conn, None)
        if self.waiting and self.in_flight_bytes < self.resume_in_flight_bytes:
            self.resume_waiting()

    def resume_waiting(self) -> None:
        """The total in-flight bytes fell below the resume mark: the connections that
        waited only for it read again (they unhold themselves off ``waiting``)."""
        for conn in list(self.waiting):
            conn.unhold()

    def read_again(self, conn: Connection) -> None:
        """A paused connection is read again: a partial frame it holds gets the whole read
        timeout from now (the time it was not read was not the peer's doing)."""
        self.unread.discard(conn)
        if conn in self.partial:
            del self.partial[conn]
            self.partial[conn] = None
            conn.partial_since = asyncio.get_running_loop().time()

    # -- counting and logging -----------------------------------------------------------

    def reject(self, conn: Connection, reason: str, detail: str) -> None:
        """Count a crossed bound and log it, at most once a minute per address."""
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        now = asyncio.get_running_loop().time()
        key = (conn.address, reason)
        seen = self._logged.get(key)
        if seen is not None and now - seen[0] < LOG_INTERVAL:
            seen[1] += 1
            return
        more = f"; {int(seen[1])} more from this address in the last minute" if seen else ""
        self._logged[key] = [now, 0]
        if reason == REQUESTS_IN_FLIGHT:
            what = "refused a request from"
        elif reason in (WRITE_BUFFER_HIGH, IN_FLIGHT_BYTES):
            what = "stopped reading from"
        else:
            what = "closing the connection with"
        log.warning(
            "%s %s: %s [%s]%s", what, conn.peer or conn.address or "a peer", detail, reason, more
        )

    # -- the timer ------------------------------------------------------------------------

    def start(self) -> None:
        periods = [t for t in (self.idle_timeout, self.frame_timeout) if t > 0]
        if periods and self._timer is None:
            tick = min(1.0, max(0.02, min(periods) / 8))
            self._timer = asyncio.get_running_loop().create_task(self._run(tick))

    async def stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def _run(self, tick: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(tick)
            self.sweep(loop.time())

    def sweep(self, now: float) -> None:
        """Close the connections past the idle timeout or the frame read timeout."""
        if self.frame_timeout > 0:
            for conn in list(self.partial):  # oldest frame first
                if conn in self.unread:
                    continue  # not read, by the server's choice: its frame cannot arrive
                if now - conn.partial_since < self.frame_timeout:
                    break
                conn.reject(
                    FRAME_READ_TIMEOUT,
                    f"a frame still incomplete after {now - conn.partial_since:.1f} s "
                    f"({len(conn.buffered)} bytes so far; server_frame_read_timeout_seconds "
                    f"{self.frame_timeout:g})",
                )
        if self.idle_timeout > 0:
            for conn in list(self.open):
                if conn.active:
                    conn.active = False
                    conn.idle_since = now
                elif (
                    conn.in_flight <= 0
                    and not conn.pending  # nor a request of ours waiting for its answer
                    and conn not in self.holding  # nor paused until requests are answered
                    and now - conn.idle_since >= self.idle_timeout
                ):
                    conn.reject(
                        IDLE,
                        f"no frame in or out for {now - conn.idle_since:.0f} s "
                        f"(server_channel_max_idle_time_seconds {self.idle_timeout:g})",
                    )
        if self._logged:
            # Forgotten once quiet (a count of lines left out is kept a while longer).
            stale = [
                k
                for k, (at, more) in self._logged.items()
                if now - at >= (10 * LOG_INTERVAL if more else LOG_INTERVAL)
            ]
            for key in stale:
                del self._logged[key]
