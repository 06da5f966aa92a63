"""RemotingCommand over asyncio TCP: one :class:`Connection` per socket, on either side.

Both ends are alike, as in RocketMQ: each may send requests (many in flight, matched to
their responses by opaque) and each answers the requests the other sends with the handler
registered for the request's code. A broker calls its clients over the connection they
opened (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED...).

A handler takes the connection and the request and returns the response, ``None`` (it
answers later through :meth:`Connection.send`, or the request was oneway), or an awaitable
of either. A project error a handler raises (``rocketq.common.exceptions``) becomes a response
with its code and message; anything else is SYSTEM_ERROR with a generic remark naming a
reference, and the detail goes to the log under that reference.

Frames are read with :class:`asyncio.Protocol` (no stream objects, no task per frame); a
handler that answers at once costs no task either.

A server's connections keep its bounds (``remoting/bounds.py``): per frame that
costs a flag, a counter of requests in flight and integer comparisons; bytes are buffered
only for a frame that spans reads, appended without copying until it is whole.

The bytes of the requests a handler holds (an awaitable still running, or no answer yet:
it answers later through :meth:`Connection.send`) count as in flight, per connection and
for the server; a request answered at once costs nothing. Over
server_max_in_flight_bytes_per_connection, or server_max_in_flight_bytes for the server,
the connection is not read (``pause_reading``; the frames of the read past that point wait
in its buffer) until its own bytes and the total fall below half of each budget: a
connection holds at most its budget and one frame, the server its budget, one frame and
64 KiB per connection (a small request is read even over the total budget, so a client
asking for a route is still answered). The time a paused connection is not read counts
neither towards its idle time nor its frame's read timeout.

Security (``remoting/tls.py``): a server's ``access`` check sees every request it has a
handler for before the handler does (one attribute test per request when there is none);
a client's :class:`~rocketq.remoting.tls.ClientSecurity` wraps its connections in TLS and
signs every request they send. A TLS server accepts sockets itself and tells TLS from
plaintext by the first byte, so that each connection gets the certificate current when it
arrives; :attr:`Connection.tls_identity` names the client certificate it verified.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import math
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeAlias, cast

from rocketq.common.config import ServerBoundsConfig
from rocketq.common.exceptions import (
    ConnectBrokerError,
    MessageIllegalError,
    RequestTimeoutError,
    RocketqError,
)
from rocketq.remoting import bounds
from rocketq.remoting.bounds import ServerGuard
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import (
    MAX_FRAME,
    ONEWAY_FLAG,
    RemotingCommand,
    RemotingError,
    decode,
    encode,
)
from rocketq.remoting.tls import HANDSHAKE, ClientSecurity, ServerTls, peer_identity

log = logging.getLogger(__name__)

Result: TypeAlias = RemotingCommand | None
Handler: TypeAlias = Callable[["Connection", RemotingCommand], Result | Awaitable[Result]]
# A server's check of a request before its handler: None lets it through, else the answer
# that refuses it.
Access: TypeAlias = Callable[["Connection", RemotingCommand], RemotingCommand | None]

# The largest frame header a connection without a server's bounds (a client's) decodes:
# server_header_max_length's default.
MAX_HEADER: Final = 256 * 1024

# Opaques are unique per process, as RocketMQ's requestId counter.
_opaques = itertools.count(1)
_MASK: Final = 0x7FFFFFFF
# References of unexpected errors: the answer names one, the log line holding it too.
_error_refs = itertools.count(1)
# No bound on a connection that is not a server's.
_UNBOUNDED: Final = 1 << 62
# A request frame up to this size is read even while the server's in-flight bytes are
# over their budget (its connection is paused after it if its handler holds it).
SMALL_FRAME: Final = 64 * 1024


# A session a server advertises is used for at most this long at a time, and ended a little
# before the server forgets it (a request sent too late is only signed and sent again).
MAX_SESSION_SECONDS: Final = 3600.0
_ACCESS_KEY: Final = "AccessKey"
_SIGNATURE: Final = "Signature"
# What a signature adds besides the AccessKey (RocketMQ's, then rocketq's strong one:
# rocketq.auth.strong_signature); a request sent unsigned in a session carries none.
_SIGNED_FIELDS: Final = (_SIGNATURE, "SignatureV2", "SignatureMethod", "Timestamp", "Nonce")
# AUTH_SESSION's announcement of the strong signature ("accepted" or "required").
_STRONG_ANNOUNCED: Final = frozenset({"accepted", "required"})
# The longest audience a server may announce (rocketq's are 16 characters).
_MAX_AUDIENCE: Final = 64


def _session_margin(ttl: float) -> float:
    return min(5.0, ttl / 4)


def next_opaque() -> int:
    return next(_opaques) & _MASK


def wire_code(exc: RocketqError) -> int:
    """The response code an error goes out with: RocketMQ's own, so stock clients know it
    (rocketq's codes from 1000 up are for its own use: each goes as RocketMQ's nearest)."""
    if exc.code < 1000:
        return exc.code
    if isinstance(exc, MessageIllegalError):
        return ResponseCode.MESSAGE_ILLEGAL
    if exc.retriable:
        return ResponseCode.SERVICE_NOT_AVAILABLE
    return ResponseCode.SYSTEM_ERROR


def error_response(request: RemotingCommand, exc: BaseException) -> RemotingCommand:
    """The response that tells the peer what went wrong."""
    if isinstance(exc, RocketqError):
        return request.response(wire_code(exc), remark=str(exc))
    if isinstance(exc, RemotingError):
        return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad request: {exc}")
    ref = next(_error_refs)
    log.error("unexpected error handling %s (ref %d)", request, ref, exc_info=exc)
    return request.response(
        ResponseCode.SYSTEM_ERROR, remark=f"server error; see the server's log (ref {ref})"
    )


class Connection(asyncio.Protocol):
    """One connection: frames in and out, requests out by opaque, requests in by code."""

    def __init__(
        self,
        handlers: dict[int, Handler],
        *,
        on_close: Callable[[Connection], None] | None = None,
        max_frame: int = MAX_FRAME,
        before_read: Callable[[], None] | None = None,
        after_read: Callable[[], None] | None = None,
        guard: ServerGuard | None = None,
        access: Access | None = None,
        sign: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        self.handlers = handlers
        # A server's check of each request it has a handler for, before the handler.
        self.access = access
        # Called on every request sent (a client's signature).
        self.sign = sign
        # A server that remembers a verified sender (AUTH_SESSION): how long it does, the
        # key sent alone meanwhile, and until when (loop time) requests go unsigned.
        self.session_ttl = 0.0
        self.access_key = ""
        # The server takes a request without any AccessKey as the session's sender.
        self.keyless = False
        self.unsigned_until = 0.0
        # The verified client certificate's subject common name (TLS with client auth).
        self.tls_identity: str | None = None
        # Whether the peer ever answered, and whether this end speaks TLS: a plaintext
        # client closed before any answer was likely refused by a server enforcing TLS.
        self.answered = False
        self.encrypted = False
        self.on_close = on_close
        self.guard = guard
        self.max_frame = guard.max_frame if guard is not None else max_frame
        self.max_header = guard.max_header if guard is not None else MAX_HEADER
        self.max_in_flight = guard.max_in_flight if guard is not None else _UNBOUNDED
        self.max_in_flight_bytes = (
            guard.max_in_flight_bytes_per_connection if guard is not None else _UNBOUNDED
        )
        # Called before the frames of one read are handled, and once they are, before
        # their answers are written: a broker holds the sends of one read and writes them
        # to its CommitLog at once, then ships them to its slave or followers once. When
        # ``after_read`` raises, the read's answers are dropped and the connection closed.
        self.before_read = before_read
        self.after_read = after_read
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.address = ""  # the peer's IP (a server's per-address bound)
        self.attrs: dict[str, Any] = {}  # what a server remembers of the peer (client id...)
        # A frame that spans reads: its bytes so far, and how many it needs in all (0 until
        # its length prefix is in).
        self.buffered = bytearray()
        self._need = 0
        # The buffered frame's start was let through the in-flight budgets: once whole it
        # is handed on without asking again.
        self._admitted = False
        # Requests received and not yet answered (oneway ones until their handler ends),
        # and the bytes of the frames of those a handler holds: an awaitable's until it is
        # done, and those answered later through send() (by opaque -> their sizes).
        self.in_flight = 0
        self.in_flight_bytes = 0
        self._deferred: dict[int, list[int]] = {}
        # Not read over the in-flight bytes budget (until the guard or an answer unholds).
        self.holding = False
        # A whole frame went in or out since the guard last looked (its idle check), when
        # it last saw none, and when the buffered frame began.
        self.active = False
        self.idle_since = 0.0
        self.partial_since = 0.0
        self._reading_paused = False
        self._tasks: set[asyncio.Task[None]] = set()
        # Frames sent while the frames of one read are handled (the answers a handler
        # gives at once), written together when the read is done: one system call.
        self._held: list[bytes] | None = None
        self.closed = asyncio.get_running_loop().create_future()

    # -- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.address = str(peer[0])
            self.peer = f"{peer[0]}:{peer[1]}"
        self.tls_identity = peer_identity(transport)
        self.encrypted = transport.get_extra_info("ssl_object") is not None
        guard = self.guard
        if guard is not None:
            if not guard.admit(self):
                self.transport.abort()
                return
            self.transport.set_write_buffer_limits(guard.high_water, guard.low_water)

    def data_received(self, data: bytes) -> None:
        buf = self.buffered
        before = len(buf)
        if before:
            if before + len(data) < self._need:  # the frame is still partial: keep it
                buf += data
                if self.guard is not None:
                    self.guard.grew(self, len(data))
                return
            buf += data
            whole = bytes(buf)  # one copy once the frame is whole; frames are views of it
            buf.clear()
            admitted, self._admitted = self._admitted, False
        else:
            whole = data  # the usual case: frames are views of what the socket gave
            admitted = False
        view = memoryview(whole)
        pos, end = 0, len(whole)
        self._held = []
        if self.before_read is not None:
            self.before_read()
        try:
            self._frames(view, pos, end, admitted)
        finally:
            held, self._held = self._held, None
            if self.after_read is not None and not self._after_read():
                held = []
            if held and self.transport is not None and not self.transport.is_closing():
                self.transport.write(held[0] if len(held) == 1 else b"".join(held))
                if self._reading_paused:
                    self._check_write_buffer()
        if self.guard is not None and (before or buf):
            self.guard.settled(self, before, len(buf))

    def _after_read(self) -> bool:
        """Run ``after_read``; when it fails (a broker could not write the read's sends),
        log it and close the connection without the read's answers: its requests went
        unanswered and the client sends them again."""
        assert self.after_read is not None
        try:
            self.after_read()
        except Exception:
            log.exception(
                "finishing a read from %s failed; closing the connection unanswered", self.peer
            )
            if self.transport is not None:
                self.transport.abort()
            return False
        return True

    def _frames(self, view: memoryview, pos: int, end: int, admitted: bool = False) -> None:
        """Hand on the frames in ``view[pos:end]`` and buffer what is left; ``admitted``:
        the first one's start was let through the in-flight budgets already."""
        guard = self.guard
        while end - pos >= 4:
            size = int.from_bytes(view[pos : pos + 4], "big")
            if size > self.max_frame or size < 4:
                self.reject(
                    bounds.FRAME_TOO_LARGE if size > self.max_frame else bounds.BAD_FRAME,
                    f"a frame of {size} bytes (limit {self.max_frame})",
                )
                return
            if admitted:
                admitted = False
            elif self.holding or (
                size > SMALL_FRAME
                and guard is not None
                and guard.in_flight_bytes > guard.max_in_flight_bytes
            ):
                # Over the in-flight bytes budget, known at the frame's start: the frame
                # and the rest of the read wait in the buffer, and the connection is not
                # read, until it is read again.
                if not self.holding:
                    self._hold()
                self._need = 4 + size
                break
            if end - pos - 4 < size:
                self._need = 4 + size
                self._admitted = True
                break
            # The header length (the low 24 bits after the serialize type), before the
            # header costs any decoding.
            header = int.from_bytes(view[pos + 5 : pos + 8], "big") if size >= 4 else 0
            if header > self.max_header:
                self.reject(
                    bounds.HEADER_TOO_LARGE,
                    f"a header of {header} bytes (limit {self.max_header})",
                )
                return
            frame = view[pos + 4 : pos + 4 + size]
            pos += 4 + size
            try:
                cmd = decode(frame)
            except RemotingError as exc:
                self.reject(bounds.BAD_FRAME, str(exc))
                return
            except Exception as exc:  # a decoder bug: that peer alone is cut off
                log.error("frame from %s does not decode", self.peer or "a peer", exc_info=exc)
                self.reject(
                    bounds.BAD_FRAME, f"a frame that does not decode ({type(exc).__name__})"
                )
                return
            self._received(cmd, 4 + size)
            if self.transport is None:  # a handler closed the connection
                return
        if pos < end:
            if end - pos < 4:
                self._need = 4
            self.buffered += view[pos:]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._deferred.clear()
        if self.guard is not None:
            self.guard.closed(self)
            self.guard.let_go(self)  # the bytes of its requests in flight
        pending, self.pending = self.pending, {}
        why = f"connection to {self.peer or 'peer'} closed" + self._tls_hint()
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ConnectBrokerError(why))
        for task in list(self._tasks):
            task.cancel()
        if not self.closed.done():
            self.closed.set_result(None)
        if self.on_close is not None:
            self.on_close(self)

    # -- frames in --------------------------------------------------------------------

    def reject(self, reason: str, why: str) -> None:
        """Close the connection at once over a bound (``reason``, one of bounds.REASONS):
        counted and logged by the server's guard."""
        if self.guard is not None:
            self.guard.reject(self, reason, why)
            self.guard.release(self)
        else:
            log.warning("closing the connection with %s: %s", self.peer or "a peer", why)
            self.buffered.clear()
        if self.transport is not None:
            self.transport.abort()

    def _received(self, cmd: RemotingCommand, size: int) -> None:
        """Hand a frame of ``size`` bytes to its handler (or to the request waiting for
        this response)."""
        self.active = True
        if cmd.is_response:
            self.answered = True
            fut = self.pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            return
        handler = self.handlers.get(cmd.code)
        if handler is None:
            if not cmd.is_oneway:
                name = RequestCode.NAMES.get(cmd.code, str(cmd.code))
                self._write(
                    cmd.response(
                        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        remark=f"request code {cmd.code} ({name}) is not supported",
                    )
                )
            return
        access = self.access
        if access is not None and self._refused(access, cmd):
            return
        if self.in_flight >= self.max_in_flight:
            self._busy(cmd)
            return
        # In flight until its answer goes out through send() (at once, from the task or
        # later from the handler's own callback), or, if oneway, its handler is done.
        self.in_flight += 1
        waiting = self.in_flight
        try:
            result = handler(self, cmd)
        except Exception as exc:
            result = error_response(cmd, exc)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(self._finish(cmd, result, size))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self._take(size)
        elif cmd.is_oneway:
            self.in_flight -= 1
        elif result is not None:
            self._answer(result)
        elif self.guard is not None and self.in_flight >= waiting:
            # To be answered later through send() (not already from within the handler).
            sizes = self._deferred.get(cmd.opaque)
            if sizes is None:
                self._deferred[cmd.opaque] = [size]
            else:  # the peer reuses an opaque: each answer ends one of them
                sizes.append(size)
            self._take(size)

    def _refused(self, access: Access, cmd: RemotingCommand) -> bool:
        """Ask the server's access check about a request: True if it was refused (the
        refusal is written unless the request is oneway)."""
        try:
            refusal = access(self, cmd)
        except Exception as exc:
            refusal = error_response(cmd, exc)
        if refusal is None:
            return False
        if not cmd.is_oneway:
            with contextlib.suppress(ConnectBrokerError):  # closed meanwhile: nobody to tell
                self._write(refusal)
        return True

    async def _finish(self, cmd: RemotingCommand, pending: Awaitable[Result], size: int) -> None:
        try:
            result = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result = error_response(cmd, exc)
        finally:
            self._release(size)
        if cmd.is_oneway:
            self.in_flight -= 1
        elif result is not None and self.is_open:
            self._answer(result)

    # -- bytes in flight ----------------------------------------------------------------

    def _take(self, size: int) -> None:
        """A handler holds a request of ``size`` bytes: count them, and stop reading the
        connection past its budget or the server's."""
        self.in_flight_bytes += size
        guard = self.guard
        if guard is None:
            return
        guard.in_flight_bytes += size
        if not self.holding and (
            self.in_flight_bytes > self.max_in_flight_bytes
            or guard.in_flight_bytes > guard.max_in_flight_bytes
        ):
            self._hold()

    def _release(self, size: int) -> None:
        """A held request of ``size`` bytes is answered (or its handler done): read the
        connections paused over the budgets again once below half of each."""
        if self.transport is None:
            return  # closed: the guard let go of all its bytes
        self.in_flight_bytes -= size
        guard = self.guard
        if guard is None:
            return
        guard.in_flight_bytes -= size
        if (
            self.holding
            and self.in_flight_bytes < guard.resume_in_flight_bytes_per_connection
            and self not in guard.waiting
        ):
            guard.waiting[self] = None  # its own are low: it waits for the total only
        if guard.waiting and guard.in_flight_bytes < guard.resume_in_flight_bytes:
            guard.resume_waiting()

    def _hold(self) -> None:
        """Stop reading over the in-flight bytes budget (counted once per pause)."""
        guard, transport = self.guard, self.transport
        if guard is None:
            return
        self.holding = True
        own = self.in_flight_bytes
        if own > self.max_in_flight_bytes:
            why = (
                f"requests in flight on this connection hold {own} bytes "
                f"(server_max_in_flight_bytes_per_connection {self.max_in_flight_bytes})"
            )
        else:
            why = (
                f"requests in flight on all connections hold {guard.in_flight_bytes} bytes "
                f"(server_max_in_flight_bytes {guard.max_in_flight_bytes})"
            )
        guard.reject(self, bounds.IN_FLIGHT_BYTES, f"{why}; reading resumes as they are answered")
        guard.holding.add(self)
        guard.unread.add(self)
        if own < guard.resume_in_flight_bytes_per_connection:
            guard.waiting[self] = None
        if not self._reading_paused and transport is not None and not transport.is_closing():
            transport.pause_reading()

    def unhold(self) -> None:
        """Read again after a pause over the in-flight bytes budget."""
        self.holding = False
        if self.guard is not None:
            self.guard.waiting.pop(self, None)
            self.guard.holding.discard(self)
        if not self._reading_paused:
            self._read_again()

    @property
    def paused(self) -> bool:
        """Not read: over the in-flight bytes budget, or its answers are not read."""
        return self.holding or self._reading_paused

    def _read_again(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.resume_reading()
        if self.guard is not None:
            self.guard.read_again(self)
        if self.buffered and len(self.buffered) >= self._need:
            # Frames left in the buffer by the pause: handled next, before newer bytes.
            asyncio.get_running_loop().call_soon(self._read_buffered)

    def _read_buffered(self) -> None:
        if (
            self.transport is not None
            and not self.paused
            and self.buffered
            and len(self.buffered) >= self._need
        ):
            self.data_received(b"")

    def _busy(self, cmd: RemotingCommand) -> None:
        """Refuse a request over the connection's bound of requests in flight, as a
        RocketMQ broker refuses what its queues cannot take."""
        why = (
            f"{self.in_flight} requests are in flight on this connection "
            f"(server_max_requests_in_flight_per_connection {self.max_in_flight})"
        )
        if self.guard is not None:
            self.guard.reject(self, bounds.REQUESTS_IN_FLIGHT, why)
        if not cmd.is_oneway:
            self._write(
                cmd.response(
                    ResponseCode.SYSTEM_BUSY,
                    remark=f"[REQUESTS_IN_FLIGHT]server busy: {why}; wait for answers "
                    "before sending more",
                )
            )

    # -- back-pressure (asyncio.Protocol) -------------------------------------------------

    def pause_writing(self) -> None:
        """The peer is not reading its answers as fast as they come: stop reading its
        requests until they drain below the low-water mark."""
        transport = self.transport
        if self.guard is None or transport is None or transport.is_closing():
            return
        self._reading_paused = True
        self.guard.unread.add(self)
        if not self.holding:
            transport.pause_reading()
        self.guard.reject(
            self,
            bounds.WRITE_BUFFER_HIGH,
            f"{transport.get_write_buffer_size()} bytes of answers wait for it "
            f"(write_buffer_high_water_mark {self.guard.high_water})",
        )
        self._check_write_buffer()

    def resume_writing(self) -> None:
        if not self._reading_paused:
            return
        self._reading_paused = False
        if not self.holding:
            self._read_again()

    def _check_write_buffer(self) -> None:
        """While reading is paused, answers still in flight may queue more: close the
        connection once they pass server_max_write_buffer_bytes."""
        guard, transport = self.guard, self.transport
        if guard is None or transport is None:
            return
        size = transport.get_write_buffer_size()
        if size > guard.max_write_buffer:
            self.reject(
                bounds.WRITE_BUFFER_FULL,
                f"{size} bytes of answers wait for a peer that does not read them "
                f"(server_max_write_buffer_bytes {guard.max_write_buffer})",
            )

    # -- frames out -------------------------------------------------------------------

    @property
    def peer_ip(self) -> str:
        """The peer's IP address ("" before the connection is made)."""
        return self.address

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def send(self, cmd: RemotingCommand) -> None:
        """Write a frame (a response, or a request whose answer is not awaited); a
        response ends its request's time in flight."""
        if cmd.is_response:
            if self.in_flight > 0:
                self.in_flight -= 1
            if self._deferred:
                sizes = self._deferred.get(cmd.opaque)
                if sizes is not None:
                    size = sizes.pop()
                    if not sizes:
                        del self._deferred[cmd.opaque]
                    self._release(size)
        self._write(cmd)

    def _answer(self, cmd: RemotingCommand) -> None:
        """Write the answer a handler returned (its request's bytes are not held). An
        answer that does not encode (a bug) goes out as SYSTEM_ERROR with a log ref."""
        if self.in_flight > 0:
            self.in_flight -= 1
        try:
            self._write(cmd)
        except ConnectBrokerError:
            pass  # the peer is gone: nobody to answer
        except Exception as exc:
            self._write(error_response(cmd, exc))

    def _write(self, cmd: RemotingCommand) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise ConnectBrokerError(
                f"connection to {self.peer or 'peer'} is closed" + self._tls_hint()
            )
        self.active = True
        if self._held is not None:
            self._held.append(encode(cmd))
        else:
            transport.write(encode(cmd))
            if self._reading_paused:
                self._check_write_buffer()

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait up to ``timeout`` seconds for its response. In an
        authentication session the request carries the access key alone; one the server
        refuses for that (it forgot: time, changed users) is signed and sent again."""
        sign = self.sign
        session = self.session_ttl
        unsigned = False
        sent = 0.0
        if sign is not None:
            loop = asyncio.get_running_loop()
            if session and loop.time() < self.unsigned_until:
                unsigned = True
                ext = cmd.ext
                if ext:  # a request signed for an earlier send carries no old signature
                    for name in _SIGNED_FIELDS:
                        ext.pop(name, None)
                if not self.keyless:
                    if ext is None:
                        ext = cmd.ext = {}
                    ext[_ACCESS_KEY] = self.access_key
            else:
                sent = loop.time()
                sign(cmd)
        opaque = cmd.opaque = next_opaque()
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self.pending[opaque] = fut
        try:
            self._write(cmd)
        except BaseException:
            self.pending.pop(opaque, None)
            raise
        timer = asyncio.get_running_loop().call_later(timeout, self._expire, opaque, timeout)
        try:
            answer = await fut
        finally:
            timer.cancel()
            self.pending.pop(opaque, None)
        if session and sign is not None:
            if answer.code == ResponseCode.NO_PERMISSION:
                if unsigned:
                    self.unsigned_until = 0.0
                    return await self.invoke(cmd, timeout)
            elif not unsigned:
                self.unsigned_until = sent + session - _session_margin(session)
        return answer

    async def greet(self, security: ClientSecurity, timeout: float) -> None:
        """What a connection that signs asks first. With ``security.sign_strong``: whether
        the server accepts rocketq's strong signature (AUTH_SESSION, unsigned); where it
        announces it, requests are signed with ``sign_strong``, and, with sessions, after
        the first signed request that verifies they go without any AccessKey for the
        ``statefulSeconds`` it says. Otherwise (a stock RocketMQ, a server that does not
        know the strong signature), requests are signed with ``security.sign`` and, with
        sessions, the server is asked whether it remembers the sender (:meth:`ask_session`)."""
        if security.sign_strong is not None:
            held, self.sign = self.sign, None  # the question goes unsigned
            try:
                answer: RemotingCommand | None = await self.invoke(
                    RemotingCommand(RocketqRequestCode.AUTH_SESSION), timeout
                )
            except RocketqError:
                answer = None
            finally:
                self.sign = held
            ext = (answer.ext or {}) if answer is not None else {}
            if (
                answer is not None
                and answer.code == ResponseCode.SUCCESS
                and ext.get("strongSignature") in _STRONG_ANNOUNCED
            ):
                self.sign = _strong_signer(security.sign_strong, ext)
                ttl = _seconds(ext.get("statefulSeconds", "0"))
                if security.sessions and security.access_key and ttl >= 1.0:
                    # Remembered once a signed request verifies (invoke starts the session).
                    self.access_key = security.access_key
                    self.keyless = True
                    self.session_ttl = min(ttl, MAX_SESSION_SECONDS)
                    self.unsigned_until = 0.0
                return
        if security.sessions and security.sign and security.access_key:
            await self.ask_session(security.access_key, timeout)

    async def ask_session(self, access_key: str, timeout: float) -> None:
        """Ask the server whether it remembers this connection's verified sender
        (AUTH_SESSION, signed); while it does, requests carry only ``access_key``, or no
        AccessKey at all when the server says ``keyless`` (rocketq's servers do). A server
        that does not know the request (a stock RocketMQ) or signs nothing answers no."""
        sent = asyncio.get_running_loop().time()
        try:
            answer = await self.invoke(RemotingCommand(RocketqRequestCode.AUTH_SESSION), timeout)
        except RocketqError:
            return
        if answer.code != ResponseCode.SUCCESS:
            return
        try:
            ttl = float((answer.ext or {}).get("ttlSeconds", "0"))
        except ValueError:
            return
        if ttl >= 1.0:
            ttl = min(ttl, MAX_SESSION_SECONDS)
            self.access_key = access_key
            self.keyless = (answer.ext or {}).get("keyless") == "true"
            self.session_ttl = ttl
            self.unsigned_until = sent + ttl - _session_margin(ttl)

    def _expire(self, opaque: int, timeout: float) -> None:
        fut = self.pending.pop(opaque, None)
        if fut is not None and not fut.done():
            fut.set_exception(
                RequestTimeoutError(
                    f"no response from {self.peer or 'peer'} within {timeout * 1000:.0f} ms"
                )
            )

    def _tls_hint(self) -> str:
        """What to add when a plaintext client's connection closed before any answer: a
        server that enforces TLS closes such connections."""
        if self.guard is None and not self.answered and not self.encrypted:
            return (
                " before any answer (a server that enforces TLS closes plaintext "
                "connections: connect with tls on if it does)"
            )
        return ""

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.opaque = next_opaque()
        cmd.flag |= ONEWAY_FLAG
        if self.sign is not None:
            self.sign(cmd)
        self._write(cmd)

    def close(self) -> None:
        """Close once the frames already sent are written."""
        if self.transport is not None:
            held, self._held = self._held, None
            if held and not self.transport.is_closing():
                self.transport.write(b"".join(held))
            self.transport.close()


async def connect(
    addr: str,
    handlers: dict[int, Handler],
    *,
    timeout: float = 3.0,
    on_close: Callable[[Connection], None] | None = None,
    security: ClientSecurity | None = None,
) -> Connection:
    """Open a connection to ``host:port`` (over TLS and signing its requests as
    ``security`` says); ConnectBrokerError when it cannot be opened."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ConnectBrokerError(f"bad address {addr!r}: expected host:port")
    hostname = host.strip("[]")
    ctx = security.ssl if security is not None else None
    sign = security.sign if security is not None else None
    loop = asyncio.get_running_loop()
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                lambda: Connection(handlers, on_close=on_close, sign=sign),
                hostname,
                int(port),
                ssl=ctx,
                server_hostname=hostname if ctx is not None else None,
                ssl_handshake_timeout=timeout if ctx is not None else None,
            ),
            timeout,
        )
    except (OSError, TimeoutError) as exc:
        raise ConnectBrokerError(f"cannot connect to {addr}: {_why(exc)}") from None
    conn.peer = addr
    if security is not None and (security.sign is not None or security.sign_strong is not None):
        try:
            await conn.greet(security, timeout)
        except BaseException:
            conn.close()
            raise
    return conn


def _strong_signer(
    sign_strong: Callable[[RemotingCommand, str], None], announced: dict[str, str]
) -> Callable[[RemotingCommand], None]:
    """What signs a connection's requests for the server whose AUTH_SESSION answer
    announced the strong signature (for its ``signatureAudience``)."""
    audience = announced.get("signatureAudience", "")
    if len(audience) > _MAX_AUDIENCE:
        audience = ""  # not one a server makes: the server says what is wrong, if anything

    def sign(cmd: RemotingCommand) -> None:
        sign_strong(cmd, audience)

    return sign


def _seconds(text: str) -> float:
    """A number of seconds a server sent, or 0 when it is not a finite number."""
    try:
        value = float(text)
    except ValueError:
        return 0.0
    return value if math.isfinite(value) else 0.0


def _why(exc: BaseException) -> str:
    """Why a connection could not be opened, in words (a TLS failure says it is one)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"its TLS certificate is not accepted: {exc.verify_message or exc}"
    if isinstance(exc, ssl.SSLError):
        return f"the TLS handshake failed: {exc.reason or exc}"
    return str(exc) or "timed out"


class RemotingClient:
    """Connections by address, opened on first use and again after one closes."""

    def __init__(
        self,
        handlers: dict[int, Handler] | None = None,
        *,
        connect_timeout: float = 3.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.handlers: dict[int, Handler] = handlers if handlers is not None else {}
        self.connect_timeout = connect_timeout
        self.security = security
        self.connections: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Future[Connection]] = {}
        self.on_connect: Callable[[str, Connection], None] | None = None

    async def connection(self, addr: str) -> Connection:
        conn = self.connections.get(addr)
        if conn is not None and conn.is_open:
            return conn
        opening = self._opening.get(addr)
        if opening is None:
            opening = asyncio.ensure_future(self._open(addr))
            self._opening[addr] = opening
            opening.add_done_callback(lambda _: self._opening.pop(addr, None))
        return await asyncio.shield(opening)

    async def _open(self, addr: str) -> Connection:
        conn = await connect(
            addr,
            self.handlers,
            timeout=self.connect_timeout,
            on_close=self._closed,
            security=self.security,
        )
        self.connections[addr] = conn
        if self.on_connect is not None:
            self.on_connect(addr, conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        for addr, c in list(self.connections.items()):
            if c is conn:
                del self.connections[addr]

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        conn = self.connections.get(addr)
        if conn is None or not conn.is_open:
            conn = await self.connection(addr)
        return await conn.invoke(cmd, timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        (await self.connection(addr)).invoke_oneway(cmd)

    def close_connection(self, addr: str) -> None:
        conn = self.connections.pop(addr, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        conns = list(self.connections.values())
        self.connections.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(conn.closed), 1.0)


class _Peer:
    """A socket accepted and not yet a connection, as the guard's log lines name it."""

    def __init__(self, addr: Any) -> None:
        self.address = str(addr[0]) if isinstance(addr, tuple) else ""
        self.peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else ""


class RemotingServer:
    """Listens on ``host:port`` (0: a free port) and answers with ``handlers``, within
    ``bounds`` (a server config's bounds; their defaults without one).

    ``access`` is asked about every request whose code has a handler, before the handler:
    None lets it through, else its answer refuses it (not written for a oneway request).
    ``tls`` (permissive or enforcing) serves TLS: each accepted socket's first byte tells a
    TLS handshake (0x16) from plaintext, which permissive serves and enforcing closes; a
    socket that sends nothing within server_frame_read_timeout_seconds is closed, and the
    handshake is bounded by the same time."""

    def __init__(
        self,
        handlers: dict[int, Handler],
        *,
        on_close: Callable[[Connection], None] | None = None,
        before_read: Callable[[], None] | None = None,
        after_read: Callable[[], None] | None = None,
        bounds: ServerBoundsConfig | None = None,
        access: Access | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        self.handlers = handlers
        self.on_close = on_close
        self.before_read = before_read
        self.after_read = after_read
        self.access = access
        self.tls = tls if tls is not None and tls.enabled else None
        self.guard = ServerGuard(bounds if bounds is not None else ServerBoundsConfig())
        self.connections: set[Connection] = set()
        self.server: asyncio.Server | None = None
        self.port = 0
        # With TLS: the listening socket, its accept loop, the certificate files' watcher,
        # and the accepted sockets whose first byte (or handshake) is awaited, by address.
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._watching: asyncio.Task[None] | None = None
        self._sniffing: set[asyncio.Task[None]] = set()
        self._sniffing_from: dict[str, int] = {}

    async def start(self, host: str, port: int, *, sock: socket.socket | None = None) -> int:
        loop = asyncio.get_running_loop()
        if self.tls is not None:
            listener = sock if sock is not None else listen_socket(host, port)
            listener.setblocking(False)
            self._listener = listener
            self.port = listener.getsockname()[1]
            self._accepting = loop.create_task(self._accept(listener, self.tls))
            self._watching = loop.create_task(self.tls.watch())
        elif sock is not None:
            self.server = await loop.create_server(self._protocol, sock=sock)
            self.port = _bound_port(self.server)
        else:
            self.server = await loop.create_server(self._protocol, host, port, reuse_address=True)
            self.port = _bound_port(self.server)
        self.guard.start()
        return self.port

    def _protocol(self) -> Connection:
        conn = Connection(
            self.handlers,
            on_close=self._closed,
            before_read=self.before_read,
            after_read=self.after_read,
            guard=self.guard,
            access=self.access,
        )
        self.connections.add(conn)
        return conn

    # -- TLS: accepting sockets and telling TLS from plaintext -------------------------

    @property
    def first_byte_timeout(self) -> float:
        """Seconds an accepted socket may take to send its first byte, and a TLS
        handshake to finish."""
        guard = self.guard
        if guard.frame_timeout > 0:
            return guard.frame_timeout
        return guard.idle_timeout if guard.idle_timeout > 0 else 60.0

    def _refuse(self, who: _Peer, reason: str, why: str) -> None:
        """Count and log (at most once a minute per address) a socket closed before it
        became a connection (the guard reads only its address and peer)."""
        self.guard.reject(cast(bounds.Connection, who), reason, why)

    async def _accept(self, listener: socket.socket, tls: ServerTls) -> None:
        loop = asyncio.get_running_loop()
        guard = self.guard
        while True:
            try:
                sock, addr = await loop.sock_accept(listener)
            except OSError as exc:  # out of descriptors, mostly: let some close first
                log.error("remoting port %d: cannot accept a connection: %s", self.port, exc)
                await asyncio.sleep(0.1)
                continue
            who = _Peer(addr)
            held = self._sniffing_from.get(who.address, 0)
            if len(self._sniffing) >= guard.max_connections:
                self._refuse(
                    who,
                    bounds.MAX_CONNECTIONS,
                    f"{len(self._sniffing)} accepted connections have not begun yet "
                    f"(server_max_connections {guard.max_connections})",
                )
                sock.close()
                continue
            if held >= guard.max_per_address:
                self._refuse(
                    who,
                    bounds.MAX_CONNECTIONS_PER_ADDRESS,
                    f"{held} accepted connections from {who.address} have not begun yet "
                    f"(server_max_connections_per_address {guard.max_per_address})",
                )
                sock.close()
                continue
            self._sniffing_from[who.address] = held + 1
            task = loop.create_task(self._begin(sock, who, tls))
            self._sniffing.add(task)
            task.add_done_callback(self._sniffing.discard)

    async def _begin(self, sock: socket.socket, who: _Peer, tls: ServerTls) -> None:
        """Serve an accepted socket as TLS or plaintext by its first byte."""
        loop = asyncio.get_running_loop()
        timeout = self.first_byte_timeout
        try:
            sock.setblocking(False)
            try:
                first = await asyncio.wait_for(_first_byte(loop, sock), timeout)
            except TimeoutError:
                self._refuse(
                    who,
                    bounds.FRAME_READ_TIMEOUT,
                    f"nothing sent within {timeout:g} s of connecting "
                    "(server_frame_read_timeout_seconds)",
                )
                sock.close()
                return
            if first is None:  # closed before sending anything
                sock.close()
                return
            if first == HANDSHAKE:
                await self._handshake(loop, sock, who, tls, timeout)
            elif tls.mode == "enforcing":
                self._refuse(
                    who,
                    bounds.BAD_FRAME,
                    "a plaintext connection to a port that takes TLS only "
                    "(tls_server_mode enforcing)",
                )
                sock.close()
            else:
                await loop.connect_accepted_socket(self._protocol, sock)
        except asyncio.CancelledError:
            sock.close()
            raise
        except OSError:
            sock.close()  # the peer went away
        finally:
            left = self._sniffing_from.get(who.address, 1) - 1
            if left > 0:
                self._sniffing_from[who.address] = left
            else:
                self._sniffing_from.pop(who.address, None)

    async def _handshake(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        who: _Peer,
        tls: ServerTls,
        timeout: float,
    ) -> None:
        made: list[Connection] = []

        def protocol() -> Connection:
            conn = self._protocol()
            made.append(conn)
            return conn

        try:
            await loop.connect_accepted_socket(
                protocol, sock, ssl=tls.context, ssl_handshake_timeout=timeout
            )
        except (OSError, TimeoutError, ValueError) as exc:
            # The connection never began: its protocol heard of nothing to tell it of.
            for conn in made:
                self.connections.discard(conn)
            sock.close()
            self._refuse(who, bounds.BAD_FRAME, f"TLS handshake failed: {_why(exc)}")

    def _closed(self, conn: Connection) -> None:

        self.connections.discard(conn)
        if self.on_close is not None:
            self.on_close(conn)

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        await self.guard.stop()
        if self.server is not None:
            self.server.close()
        tasks = [t for t in (self._accepting, self._watching) if t is not None]
        tasks += self._sniffing
        self._accepting = self._watching = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(conn.closed), 1.0)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
            self.server = None


async def _first_byte(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> int | None:
    """The first byte a socket received, left unread (None: it closed before sending)."""
    while True:
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            readable = loop.create_future()
            fd = sock.fileno()
            loop.add_reader(fd, _set_once, readable)
            try:
                await readable
            finally:
                loop.remove_reader(fd)
            continue
        return data[0] if data else None


def _set_once(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound, listening socket (bind before the server starts, to know the port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


async def request_once(
    addr: str, cmd: RemotingCommand, timeout: float, *, security: ClientSecurity | None = None
) -> RemotingCommand:
    """One request on a connection of its own, closed after the answer."""
    conn = await connect(addr, {}, timeout=timeout, security=security)
    try:
        return await conn.invoke(cmd, timeout)
    finally:
        conn.close()


def request_blocking(
    addr: str, cmd: RemotingCommand, timeout: float, *, security: ClientSecurity | None = None
) -> RemotingCommand:
    """One request from code without an event loop (the launcher, scripts): a plain socket
    (TLS and a signature as ``security`` says), closed after the answer. ConnectBrokerError
    or RequestTimeoutError when it fails."""
    host, _, port = addr.rpartition(":")
    hostname = host.strip("[]")
    try:
        with socket.create_connection((hostname, int(port)), timeout=timeout) as raw:
            sock: socket.socket = raw
            if security is not None and security.ssl is not None:
                sock = security.ssl.wrap_socket(raw, server_hostname=hostname)
            with sock:
                sign = security.sign if security is not None else None
                if security is not None and security.sign_strong is not None:
                    # As a connection greets: the strong signature where it is announced.
                    probe = RemotingCommand(RocketqRequestCode.AUTH_SESSION)
                    answer = _exchange(sock, probe, addr)
                    announced = answer.ext or {}
                    if (
                        answer.code == ResponseCode.SUCCESS
                        and announced.get("strongSignature") in _STRONG_ANNOUNCED
                    ):
                        sign = _strong_signer(security.sign_strong, announced)
                if sign is not None:
                    sign(cmd)
                return _exchange(sock, cmd, addr)
    except TimeoutError:
        raise RequestTimeoutError(
            f"no response from {addr} within {timeout * 1000:.0f} ms"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConnectBrokerError(f"cannot reach {addr}: {_why(exc)}") from None


def _exchange(sock: socket.socket, cmd: RemotingCommand, addr: str) -> RemotingCommand:
    """Send a request on a blocking socket and read frames until its answer."""
    cmd.opaque = next_opaque()
    sock.sendall(encode(cmd))
    while True:
        size = int.from_bytes(_read_exactly(sock, 4), "big")
        if size > MAX_FRAME or size < 4:
            raise ConnectBrokerError(f"{addr} sent a frame of {size} bytes")
        answer = decode(_read_exactly(sock, size))
        if answer.is_response and answer.opaque == cmd.opaque:
            return answer


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectBrokerError("the connection closed before the answer")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _bound_port(server: Any) -> int:
    """The port a listening server got. ``Server.sockets`` is a tuple in asyncio and a list
    in uvloop, so it is read untyped (a compiled build checks declared types)."""
    return int(server.sockets[0].getsockname()[1])
