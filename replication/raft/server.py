"""A Raft member on the network: the :class:`RaftNode` state machine, a ticker, and one
outgoing TCP connection per peer. Messages are one-way frames
(:mod:`rocketq.replication.raft.wire`); everything queued for a peer in one event-loop turn
leaves in one write. A lost connection loses the messages in it, which Raft tolerates (they
are sent again on the next heartbeat or retry); a leader whose connection to us breaks is
reported to the node (it is likely gone, so an election need not wait for missed
heartbeats). A gRPC stream per peer cost the leader a quarter and each follower a third of
its CPU in stream writes, hence plain TCP, as for classic HA.

The port keeps the broker's server bounds (:class:`~replication.ha.master.PortGuard`,
reasons prefixed ``raft_``): RAFT_MAX_CONNECTIONS connections, RAFT_MAX_CONNECTIONS_PER_ADDRESS
from one address, partial frames up to MAX_FRAME each and server_max_buffered_bytes (at
least one frame) in all, server_frame_read_timeout_seconds per frame, and a link with no
frame for IDLE_HEARTBEATS heartbeat intervals (at least IDLE_FLOOR s) is dropped; every
link carries a keepalive when it has nothing else to carry, so none that is healthy goes
quiet. A frame that does not decode, or names a sender that is not a member, closes that
connection only.

Who may speak: given ``inner`` credentials (or a port whose TLS requires client
certificates), a link proves once, at its start, which member it comes from: with a signed
handshake frame (:class:`~replication.raft.wire.Handshake`, checked against the
credentials, the timestamp window and the signatures seen before), or with a node's
certificate: a client certificate the port verified and one of whose names matches
``tls_node_name_pattern`` (:mod:`~remoting.node_identity`). A node's certificate is as
trusted as the credentials are (either can speak for any member): when one of its names is
a member's id it binds the link to that member, else the link's first frame (or its signed
handshake) does. Any other certificate, a user's from the same CA, proves nothing: that
link needs the signed handshake like a plaintext one. From then on every frame's sender
(the vote's candidate or voter, the append's leader or follower) must be that member: a
frame naming another (``raft_forged_sender``), or any frame before the link proved itself
(``raft_unauthenticated``), is dropped with the connection. Without credentials or
required certificates, frames are taken as before. Given ``tls`` (a
:class:`~remoting.tls.ServerTls`) the port serves TLS in its mode and, given ``ssl``, the
links to peers are made in TLS (:mod:`~replication.ha.secure`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import socket
import time
from collections.abc import Callable
from ssl import SSLContext
from typing import cast

from rocketq.auth.credentials import Credentials
from rocketq.common.aio import cancel_all
from rocketq.common.config import ServerBoundsConfig
from rocketq.common.ports import PortBindError
from rocketq.common.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.remoting.bounds import BAD_FRAME, FRAME_TOO_LARGE
from rocketq.remoting.node_identity import peer_names
from rocketq.remoting.tls import ServerTls
from rocketq.replication.ha.master import HELLO_TIMEOUT, PortGuard, listen_socket
from rocketq.replication.ha.secure import (
    FORGED_SENDER,
    UNAUTHENTICATED,
    SeenSignatures,
    node_certificate,
    requires_client_cert,
    serve,
    tls_identity,
)
from rocketq.replication.raft.membership import MemberHistory, Members
from rocketq.replication.raft.node import (
    HardStateStore,
    Message,
    RaftConfig,
    RaftLog,
    RaftNode,
    Role,
    Snapshots,
)
from rocketq.replication.raft.wire import (
    FRAME,
    HELLO,
    MAX_FRAME,
    PB,
    Encoder,
    Handshake,
    check_handshake,
    decode,
    decode_handshake,
    encode_handshake,
    sign_handshake,
)

log = logging.getLogger(__name__)

TICK = 0.05  # s
RECONNECT_DELAY = 0.2  # s
MAX_QUEUED = 10_000  # messages waiting for one peer's stream; older ones are dropped
CONNECT_TIMEOUT = 2.0  # s
# Linux's TCP_USER_TIMEOUT (18): how long written data may stay unacknowledged before the
# kernel drops the connection. Without it a link whose packets were dropped for a while (a
# partition) keeps retransmitting with a doubling back-off after the network is back, and
# a healed member may be unheard for 10-20 s; with it the link breaks and is made again.
TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", 18)
MIN_USER_TIMEOUT = 1.0  # s
# Connections the Raft port holds at once, and from one remote address: one per other
# member, the rest room for reconnects (server_max_connections and
# server_max_connections_per_address lower them further, never raise them).
RAFT_MAX_CONNECTIONS = 64
RAFT_MAX_CONNECTIONS_PER_ADDRESS = 16
# Each link carries a frame at least every heartbeat interval (a keepalive where Raft has
# nothing to say, as between two followers); one silent for this many intervals, and at
# least IDLE_FLOOR seconds, is gone.
IDLE_HEARTBEATS = 15
IDLE_FLOOR = 30.0


class _Inbound(asyncio.Protocol):
    """Frames from one peer, each handed to the node as it is complete. The port's guard
    (:class:`~replication.ha.master.PortGuard`) admits it, counts the bytes of its partial
    frame and closes it over a bound; its attributes are what the guard reads."""

    def __init__(self, server: RaftServer) -> None:
        self.server = server
        self.guard = server.guard
        self.sender = ""
        # The member this link proved to come from ("" until then, or when nothing is
        # proved: no credentials), and whether it proved it (a handshake, a certificate).
        self.bound = ""
        self.authenticated = False
        self.tls_identity: str | None = None
        self.node_name: str | None = None  # the node its certificate proves, if it does
        self.transport: asyncio.Transport | None = None
        self.address = ""
        self.peer = ""
        self.buffered = bytearray()  # a frame that spans reads
        self._need = 0  # the bytes it needs in all (0 until its length is in)
        self.in_flight = 0
        self.pending: dict[int, object] = {}
        self.active = False
        self.idle_since = 0.0
        self.partial_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.address, self.peer = str(peer[0]), f"{peer[0]}:{peer[1]}"
        if not self.guard.admit(self):
            self.transport.abort()
            self.transport = None
            return
        self.server._inbound.add(self)
        self.tls_identity = tls_identity(transport)
        self.node_name = node_certificate(self.server.tls, transport)
        if self.node_name is not None:  # a node's certificate, not merely the CA's
            self.authenticated = True
            members = self.server.member_names(transport)
            if len(members) == 1:
                self.bound = members[0]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def reject(self, reason: str, why: str) -> None:
        """Close the connection at once over a bound of the port (counted, logged)."""
        if self.transport is None or self.transport.is_closing():
            self.guard.release(self)  # closed already (and counted once)
            return
        self.guard.reject(self, reason, why)
        self.guard.release(self)
        self._need = 0
        transport, self.transport = self.transport, None
        if transport is not None:
            transport.abort()

    def _refuse(self, before: int, reason: str, why: str) -> None:
        """:meth:`reject` from a read: the guard counts only what earlier reads left."""
        if self.transport is not None:
            del self.buffered[before:]
        self.reject(reason, why)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return  # refused or rejected: what was in flight is dropped
        buf = self.buffered
        before = len(buf)
        buf += data
        if before and len(buf) < self._need:  # the frame is still partial
            self.guard.grew(self, len(data))
            return
        pos = 0
        server = self.server
        node = server.node
        members = server.peers
        secured = server.secured
        try:
            while len(buf) - pos >= FRAME.size:
                size, kind = FRAME.unpack_from(buf, pos)
                if not 1 <= size <= MAX_FRAME:
                    reason = FRAME_TOO_LARGE if size > MAX_FRAME else BAD_FRAME
                    self._refuse(before, reason, f"a raft frame of {size} bytes (1 to {MAX_FRAME})")
                    return
                end = pos + 4 + size
                if len(buf) < end:
                    self._need = end - pos
                    break
                if kind == HELLO:
                    with memoryview(buf) as view, view[pos + FRAME.size : end] as body:
                        handshake = decode_handshake(body)
                    pos = end
                    why = server.handshake_refusal(handshake)
                    if why is None and handshake.member not in members:
                        why = "it is not a member of this group"
                    if why is None and self.bound and handshake.member != self.bound:
                        why = f"this link proved it comes from {self.bound}"
                    if why is not None:
                        what = f"a raft handshake from {handshake.member!r} refused: {why}"
                        self._refuse(before, UNAUTHENTICATED, what)
                        return
                    self.bound = handshake.member
                    self.authenticated = self.authenticated or server.inner is not None
                    self.guard.identified(self)
                    self.active = True
                    continue
                with memoryview(buf) as view, view[pos + FRAME.size : end] as body:
                    sender, msg = decode(kind, body)
                pos = end
                if sender not in members:
                    self._refuse(before, BAD_FRAME, f"a raft frame from {sender!r}, not a member")
                    return
                if secured:
                    if not self.authenticated:
                        self._refuse(
                            before,
                            UNAUTHENTICATED,
                            f"a raft frame from {sender!r} on a link that has not proved "
                            "which member it comes from (no handshake, no node certificate"
                            + (
                                f": {self.tls_identity!r} names no node, tls_node_name_pattern)"
                                if self.tls_identity is not None
                                else ")"
                            ),
                        )
                        return
                    if not self.bound:
                        self.bound = sender  # (a certificate that names no member)
                    elif sender != self.bound:
                        self._refuse(
                            before,
                            FORGED_SENDER,
                            f"a raft frame naming {sender!r} on the link of {self.bound}",
                        )
                        return
                if not self.sender:
                    self.guard.identified(self)
                self.sender = sender
                self.active = True
                if msg is not None:
                    node.receive(msg)
        except Exception as exc:  # not our protocol: drop the connection, keep serving
            self._refuse(before, BAD_FRAME, f"{exc} (from {self.sender or 'a peer'})")
            return
        finally:
            if pos and self.transport is not None:
                del buf[:pos]
        if len(buf) < FRAME.size:
            self._need = FRAME.size
        if before or buf:
            self.guard.settled(self, before, len(buf))
        # Answers (and the appends they free) leave now, ahead of whatever this input
        # woke (a follower's dispatch step must not delay its acknowledgement).
        self.server.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed(self)
        self.server._inbound.discard(self)
        if self.sender:
            self.server.node.peer_lost(self.sender)  # a leader whose link breaks is likely gone


class RaftServer:
    def __init__(
        self,
        node_id: str,
        bind: str,
        peers: dict[str, str],  # peer id -> "host:port"
        raft_log: RaftLog,
        hard_state: HardStateStore,
        *,
        config: RaftConfig | None = None,
        on_commit: Callable[[int], None] | None = None,
        on_role: Callable[[Role, int, str | None], None] | None = None,
        bounds: ServerBoundsConfig | None = None,
        hello_timeout: float = HELLO_TIMEOUT,
        inner: Credentials | None = None,
        tls: ServerTls | None = None,
        ssl: SSLContext | None = None,
        history: MemberHistory | None = None,
        snapshots: Snapshots | None = None,
    ) -> None:
        """``bounds``: the broker's server bounds, which the Raft port keeps too (its caps
        at most RAFT_MAX_CONNECTIONS and RAFT_MAX_CONNECTIONS_PER_ADDRESS, a frame up to
        the wire's MAX_FRAME); a connection with no frame for IDLE_HEARTBEATS heartbeat
        intervals (at least IDLE_FLOOR s), or none at all in ``hello_timeout`` s, is
        dropped. ``inner``: the credentials links between members are signed with (None:
        not signed, frames taken as before); ``tls``: the port serves TLS in its mode;
        ``ssl``: the links to peers are made in TLS (None: plaintext). ``history``: the
        group's configurations (the membership module); its newest one replaces
        ``peers``, and the links follow its changes (None: ``peers``, fixed).
        ``snapshots``: where snapshots for members behind the compaction point come from
        and go (the snapshot module; None: a log that is never compacted)."""
        self.node_id = node_id
        self.inner = inner
        self.tls = tls if tls is not None and tls.enabled else None
        self.ssl = ssl
        # Links must prove which member they come from.
        self.secured = inner is not None or requires_client_cert(self.tls)
        self._seen = SeenSignatures()
        self._accept: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        self.bind = bind
        self.peers = dict(peers)
        self.node = RaftNode(
            node_id,
            sorted(peers),
            raft_log,
            hard_state,
            self,
            clock=time.monotonic,
            rng=random.Random(),
            config=config or RaftConfig(),
            on_commit=on_commit,
            on_role=on_role,
            history=history or MemberHistory(Members.bootstrap({node_id: bind, **peers})),
            snapshots=snapshots,
        )
        # One and a half heartbeats without an acknowledgement (the kernel acknowledges
        # even for a paused process, so only a lost network trips it).
        beat = (config or RaftConfig()).heartbeat_interval
        self._user_timeout_ms = int(max(MIN_USER_TIMEOUT, 1.5 * beat) * 1000)
        self.guard = PortGuard(
            bounds or ServerBoundsConfig(),
            "raft_",
            max_connections=RAFT_MAX_CONNECTIONS,
            max_per_address=RAFT_MAX_CONNECTIONS_PER_ADDRESS,
            idle_timeout=max(IDLE_FLOOR, IDLE_HEARTBEATS * beat),
            max_frame=MAX_FRAME + 4,
            hello_timeout=hello_timeout,
        )
        # A frame that says only who sends it (a RaftMessage of no kind, which members
        # ignore): on every new link at once, and every heartbeat interval on a link that
        # carried nothing else, so that the other side's idle bound spares a healthy link.
        body = pb.RaftMessage(sender=node_id).SerializeToString()
        self._keepalive = FRAME.pack(1 + len(body), PB) + body
        self._beat = beat
        self._written: set[str] = set()  # peers written to since the last keepalive round
        self._encoder = Encoder(node_id)
        self._queues: dict[str, collections.deque[bytes]] = {p: collections.deque() for p in peers}
        self._links: dict[str, asyncio.WriteTransport] = {}  # connected peers
        self._flush_scheduled = False
        self._tasks: list[asyncio.Task[None]] = []
        self._inbound: set[_Inbound] = set()
        self.server: asyncio.Server | None = None
        self.port = 0
        self._senders: dict[str, asyncio.Task[None]] = {}  # one per peer once started
        self._started = False
        self.set_members(self.node.member_addresses())
        self.node.on_members = self.set_members

    def set_members(self, peers: dict[str, str]) -> None:
        """The members this one keeps links to and takes frames from (the group's
        configuration changed): links to new members are made, those to members that left
        are closed, with whatever they had queued."""
        peers = {m: a for m, a in peers.items() if m != self.node_id}
        old, self.peers = self.peers, peers
        if old != peers:
            log.info("raft %s: links to %s", self.node_id, ", ".join(sorted(peers)) or "nobody")
        for m in peers:
            self._queues.setdefault(m, collections.deque())
        for m in [m for m in self._queues if m not in peers]:
            del self._queues[m]
        if not self._started:
            return
        for m, address in peers.items():
            if m in self._senders and old.get(m) != address:
                self._senders.pop(m).cancel()  # (a member's address never changes today)
            if m not in self._senders:
                self._start_sender(m)
        for m in [m for m in self._senders if m not in peers]:
            self._senders.pop(m).cancel()
        for inbound in list(self._inbound):
            gone = inbound.sender or inbound.bound
            if gone and gone not in peers and inbound.transport is not None:
                inbound.transport.close()

    def _start_sender(self, peer: str) -> None:
        task = asyncio.get_running_loop().create_task(self._sender(peer))
        self._senders[peer] = task
        self._tasks.append(task)  # stop() waits for it, cancelled or not

    def member_names(self, transport: asyncio.BaseTransport) -> list[str]:
        """The members of this group a link's verified certificate names (any of its
        names that is a member's id), asked only of a node's certificate."""
        names = peer_names(transport)
        if names is None:
            return []
        return sorted({name for name in names.all if name in self.peers})

    def handshake_refusal(self, handshake: Handshake) -> str | None:
        """Why a link's handshake is refused (None: taken; unchecked without credentials)."""
        inner = self.inner
        if inner is None:
            return None
        why = check_handshake(handshake, self.node_id, inner)
        if why is None and not self._seen.first_use(handshake.signature):
            why = "its signature was used before (a handshake played again)"
        return why

    # -- Transport ---------------------------------------------------------------------

    def send(self, to: str, msg: Message) -> None:
        queue = self._queues.get(to)
        if queue is None:
            return
        if len(queue) >= MAX_QUEUED:
            queue.popleft()  # the oldest goes: Raft sends again what matters
        queue.append(self._encoder.encode(msg))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def flush(self) -> None:
        """Write what is queued now instead of at the end of the loop's next turn (a
        caller that has queued everything of this turn saves the leader a turn)."""
        if self._flush_scheduled:
            self._flush()

    def _flush(self) -> None:
        """Everything queued this turn, one write per connected peer."""
        self._flush_scheduled = False
        for peer, queue in self._queues.items():
            if not queue:
                continue
            link = self._links.get(peer)
            if link is None or link.is_closing():
                queue.clear()  # not connected: Raft sends again what matters
                continue
            frames = b"".join(queue)
            queue.clear()
            self._written.add(peer)
            try:
                link.write(frames)
            except (OSError, RuntimeError):  # uvloop: RuntimeError on a closed handle
                link.close()  # the sender sees it and connects again

    # -- life --------------------------------------------------------------------------

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen on ``bind``, or serve ``sock``, a listening socket handed down by the
        process that started this one (which holds the port from its choice on)."""
        host, _, port = self.bind.rpartition(":")
        loop = asyncio.get_running_loop()
        try:
            if self.tls is None:
                self.server = await (
                    loop.create_server(lambda: _Inbound(self), sock=sock)
                    if sock is not None
                    else loop.create_server(
                        lambda: _Inbound(self), host, int(port), reuse_address=True
                    )
                )
                self.port = self.server.sockets[0].getsockname()[1]
            else:
                self._sock = sock if sock is not None else listen_socket(host, int(port))
                self._sock.setblocking(False)
                self.port = self._sock.getsockname()[1]
                self._accept = loop.create_task(
                    serve(
                        self._sock,
                        lambda: _Inbound(self),
                        self.tls,
                        self.guard,
                        handshake_timeout=self.guard.hello_timeout,
                    )
                )
        except OSError as exc:
            raise PortBindError(
                f"cannot listen on {self.bind} for Raft; is another member running there? "
                "set the member's port in dledger_peers",
                name="raft",
                port=int(port),
                code=exc.errno,
            ) from None
        self.guard.start()
        self._tasks = [loop.create_task(self._ticker()), loop.create_task(self._keepalives())]
        self._started = True
        for p in self.peers:
            self._start_sender(p)

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []
        self._senders = {}
        self._started = False
        await self.guard.stop()
        if self._accept is not None:
            await cancel_all([self._accept])
            self._accept = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.server is not None:
            self.server.close()
        for inbound in list(self._inbound):
            if inbound.transport is not None:
                inbound.transport.close()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
            self.server = None

    async def _ticker(self) -> None:
        while True:
            self.node.tick()
            await asyncio.sleep(TICK)

    async def _keepalives(self) -> None:
        while True:
            await asyncio.sleep(self._beat)
            for peer, link in list(self._links.items()):
                if peer not in self._written and not link.is_closing():
                    with contextlib.suppress(OSError, RuntimeError):
                        link.write(self._keepalive)
            self._written.clear()

    async def _sender(self, peer: str) -> None:
        """Keep a connection to ``peer`` open; writes go through it from :meth:`_flush`."""
        host, _, port = self.peers[peer].rpartition(":")
        loop = asyncio.get_running_loop()
        while True:
            transport: asyncio.BaseTransport | None = None
            link = _Outbound(loop)
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
                # cancellation that lands as the connection completes, and this loop would
                # outlive stop() (cancel_all waits for it).
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    t, _ = await loop.create_connection(
                        lambda link=link: link,
                        host,
                        int(port),
                        ssl=self.ssl,
                        server_hostname=host if self.ssl is not None else None,
                    )
                transport = t
                sock = t.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.setsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT, self._user_timeout_ms)
                out = cast(asyncio.WriteTransport, t)
                if self.inner is not None:  # proves who is connecting
                    out.write(encode_handshake(sign_handshake(self.node_id, peer, self.inner)))
                out.write(self._keepalive)  # says who is connecting
                self._links[peer] = out
                await link.closed  # set at once if the peer hung up already
            except asyncio.CancelledError:
                raise
            except (OSError, TimeoutError, RuntimeError) as exc:  # uvloop: RuntimeError
                log.debug("raft connection to %s broke: %s", peer, exc)
            finally:
                self._links.pop(peer, None)
                if transport is not None:
                    transport.close()
            queue = self._queues.get(peer)
            if queue is not None:
                queue.clear()  # what was queued for a broken link Raft resends
            await asyncio.sleep(RECONNECT_DELAY)


class _Outbound(asyncio.Protocol):
    """Our side of a connection to a peer: nothing comes back on it; its end is noted."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
