"""What the replication ports (HA, Raft) share to know who is at the other end: TLS on an
accepted socket in RocketMQ's server modes, the certificate a peer showed, signed
timestamps within a window and a memory of signatures already used.

TLS: :func:`serve` accepts connections on a listening socket itself, so that each gets the
server's current context (:attr:`~remoting.tls.ServerTls.context`, rebuilt when the
certificate files change: open connections keep theirs) and, in ``permissive`` mode, TLS or
plaintext by its first byte (0x16 begins a TLS handshake). In ``enforcing`` mode a plaintext
connection is closed at once. A socket waits at most ``handshake_timeout`` for its first
byte and its handshake, and at most the guard's connection cap of them wait at once; what
fails is counted in the port's guard (``tls_required``, ``tls_handshake``).

Signed hellos (the HA hello, the Raft handshake) carry a timestamp in milliseconds; one
more than :data:`MAX_SKEW_MS` away from the receiver's clock is refused, and a signature
is accepted once (:class:`SeenSignatures`), so a hello copied off the network cannot be
played again to open another connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import Final

from rocketq.remoting.bounds import ServerGuard
from rocketq.remoting.tls import HANDSHAKE, ServerTls, peer_identity

log = logging.getLogger(__name__)

ACCEPT_RETRY_DELAY: Final = 0.5  # s, when accept fails for want of descriptors or memory
_ACCEPT_PAUSE: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
MAX_SKEW_MS: Final = 5 * 60 * 1000  # a signed hello's timestamp is within this of ours
NONCE_SIZE: Final = 16
# Reasons the replication ports count (with their ha_/raft_ prefix).
UNAUTHENTICATED: Final = "unauthenticated"  # no, a wrong or a stale signature
FORGED_SENDER: Final = "forged_sender"  # a frame naming another member than its link's
ACK_PAST_SENT: Final = "ack_past_sent"  # a slave acknowledged bytes it was never sent
TLS_REQUIRED: Final = "tls_required"  # plaintext on an enforcing port
TLS_HANDSHAKE: Final = "tls_handshake"  # a handshake that failed or took too long
SECURITY_REASONS: Final = (
    UNAUTHENTICATED,
    FORGED_SENDER,
    ACK_PAST_SENT,
    TLS_REQUIRED,
    TLS_HANDSHAKE,
)


def now_ms() -> int:
    """The wall clock in milliseconds (what signed hellos carry)."""
    return time.time_ns() // 1_000_000


def stale(timestamp_ms: int, now: int) -> str | None:
    """Why a signed timestamp is refused (too far from ``now``), or None."""
    skew = timestamp_ms - now
    if abs(skew) > MAX_SKEW_MS:
        return (
            f"its timestamp is {abs(skew) / 1000:.0f} s "
            f"{'ahead of' if skew > 0 else 'behind'} this node's clock "
            f"(at most {MAX_SKEW_MS // 1000} s; are the clocks synchronised?)"
        )
    return None


class SeenSignatures:
    """Signatures accepted within the timestamp window: a second use is a replay."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}  # signature -> monotonic time it may be forgotten

    def first_use(self, signature: str) -> bool:
        """Remember ``signature``; False if it was used already."""
        now = time.monotonic()
        if len(self._seen) > 64:
            for sig in [s for s, until in self._seen.items() if until <= now]:
                del self._seen[sig]
        if signature in self._seen:
            return False
        # The timestamp is within MAX_SKEW_MS either way: past twice that it is refused.
        self._seen[signature] = now + 2 * MAX_SKEW_MS / 1000
        return True


def tls_identity(transport: asyncio.BaseTransport) -> str | None:
    """The subject common name of the client certificate the peer showed and the server
    verified, else None (plaintext, or no certificate)."""
    return peer_identity(transport)


def node_certificate(tls: ServerTls | None, transport: asyncio.BaseTransport) -> str | None:
    """The cluster node the peer's verified client certificate proves (its name matching
    ``tls_node_name_pattern``), else None: no TLS, no certificate, or a certificate that
    names no node (a user's, from the same CA), which proves nothing here."""
    return tls.node_name(transport) if tls is not None else None


def requires_client_cert(tls: ServerTls | None) -> bool:
    """The port asks for client certificates as proof of who connects (client auth
    ``require``): a connection without a node's certificate (plaintext in permissive mode,
    or a certificate that names no node) must prove it otherwise."""
    return tls is not None and tls.enabled and tls.client_auth == "require"


class _Peer:
    """A socket refused before it became a connection, as the guard counts and logs it."""

    def __init__(self, address: str, peer: str) -> None:
        self.address, self.peer = address, peer
        self.buffered = bytearray()
        self.in_flight = 0
        self.pending: dict[int, object] = {}
        self.active = False
        self.idle_since = 0.0
        self.partial_since = 0.0

    def reject(self, reason: str, why: str) -> None:
        """(Nothing to close: the caller closes the socket.)"""


async def _first_byte(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """The socket's first byte, left in the socket (b"" when the peer closed)."""
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    fd = sock.fileno()
    loop.add_reader(fd, readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return sock.recv(1, socket.MSG_PEEK)


async def serve(
    sock: socket.socket,
    factory: Callable[[], asyncio.Protocol],
    tls: ServerTls,
    guard: ServerGuard,
    *,
    handshake_timeout: float,
) -> None:
    """Accept connections on ``sock`` until cancelled, each made a connection of a
    ``factory`` protocol, in TLS as ``tls``'s mode says (see the module's docstring)."""
    loop = asyncio.get_running_loop()
    waiting: dict[asyncio.Task[None], socket.socket] = {}
    try:
        while True:
            try:
                client, addr = await loop.sock_accept(sock)
            except OSError as exc:  # out of descriptors or memory, a peer gone already
                if exc.errno in _ACCEPT_PAUSE:
                    log.error("cannot accept connections (%s); trying again in a moment", exc)
                    await asyncio.sleep(ACCEPT_RETRY_DELAY)
                continue
            client.setblocking(False)
            peer = (
                _Peer(str(addr[0]), f"{addr[0]}:{addr[1]}")
                if isinstance(addr, tuple)
                else _Peer("", "")
            )
            if len(waiting) >= guard.max_connections:
                guard.reject(
                    peer,
                    TLS_HANDSHAKE,
                    f"{len(waiting)} connections are in their TLS handshake already",
                )
                client.close()
                continue
            task = loop.create_task(
                _open(loop, client, peer, factory, tls, guard, handshake_timeout)
            )
            waiting[task] = client
            task.add_done_callback(lambda t: waiting.pop(t, None))
    finally:
        for task, client in list(waiting.items()):
            task.cancel()
            client.close()
        waiting.clear()


async def _open(
    loop: asyncio.AbstractEventLoop,
    client: socket.socket,
    peer: _Peer,
    factory: Callable[[], asyncio.Protocol],
    tls: ServerTls,
    guard: ServerGuard,
    timeout: float,
) -> None:
    try:
        try:
            first = await asyncio.wait_for(_first_byte(loop, client), timeout)
        except TimeoutError:
            guard.reject(peer, TLS_HANDSHAKE, f"nothing sent in {timeout:g} s")
            client.close()
            return
        if not first:
            client.close()
            return
        if first[0] != HANDSHAKE:
            if tls.mode == "enforcing":
                guard.reject(
                    peer,
                    TLS_REQUIRED,
                    "plaintext on a port that takes TLS only (tls_server_mode enforcing)",
                )
                client.close()
                return
            await loop.connect_accepted_socket(factory, client)
            return
        await loop.connect_accepted_socket(
            factory, client, ssl=tls.context, ssl_handshake_timeout=timeout
        )
    except asyncio.CancelledError:
        client.close()
        raise
    except (OSError, ssl.SSLError, TimeoutError, ValueError, RuntimeError) as exc:
        guard.reject(peer, TLS_HANDSHAKE, f"TLS handshake failed: {exc}")
        with contextlib.suppress(OSError):
            client.close()
