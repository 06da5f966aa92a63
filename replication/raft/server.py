"""A Raft member on the network: the :class:`RaftNode` state machine, a ticker, and one
outgoing TCP connection per peer. Messages are one-way frames
(:mod:`rocketq.replication.raft.wire`); everything queued for a peer in one event-loop turn
leaves in one write. A lost connection loses the messages in it, which Raft tolerates (they
are sent again on the next heartbeat or retry); a leader whose connection to us breaks is
reported to the node (it is likely gone, so an election need not wait for missed
heartbeats). A gRPC stream per peer cost the leader a quarter and each follower a third of
its CPU in stream writes, hence plain TCP, as for classic HA.
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
from typing import cast

from rocketq.cluster.aio import cancel_all
from rocketq.replication.raft.node import (
    HardStateStore,
    Message,
    RaftConfig,
    RaftLog,
    RaftNode,
    Role,
)
from rocketq.replication.raft.wire import FRAME, MAX_FRAME, Encoder, decode

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


class _Inbound(asyncio.Protocol):
    """Frames from one peer, each handed to the node as it is complete."""

    def __init__(self, server: RaftServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.sender = ""
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.server._inbound.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        node = self.server.node
        try:
            while len(buf) - pos >= FRAME.size:
                size, kind = FRAME.unpack_from(buf, pos)
                if not 1 <= size <= MAX_FRAME:
                    raise ValueError(f"a raft frame of {size} bytes (1 to {MAX_FRAME})")
                end = pos + 4 + size
                if len(buf) < end:
                    break
                with memoryview(buf) as view, view[pos + FRAME.size : end] as body:
                    self.sender, msg = decode(kind, body)
                pos = end
                if msg is not None:
                    node.receive(msg)
        except Exception as exc:  # not our protocol: drop the connection, keep serving
            log.warning("raft connection from %s dropped: %s", self.sender or "a peer", exc)
            assert self.transport is not None
            self.transport.close()
            return
        finally:
            if pos:
                del buf[:pos]
        # Answers (and the appends they free) leave now, ahead of whatever this input
        # woke (a follower's dispatch step must not delay its acknowledgement).
        self.server.flush()

    def connection_lost(self, exc: Exception | None) -> None:
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
    ) -> None:
        self.node_id = node_id
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
        )
        # One and a half heartbeats without an acknowledgement (the kernel acknowledges
        # even for a paused process, so only a lost network trips it).
        beat = (config or RaftConfig()).heartbeat_interval
        self._user_timeout_ms = int(max(MIN_USER_TIMEOUT, 1.5 * beat) * 1000)
        self._encoder = Encoder(node_id)
        self._queues: dict[str, collections.deque[bytes]] = {p: collections.deque() for p in peers}
        self._links: dict[str, asyncio.WriteTransport] = {}  # connected peers
        self._flush_scheduled = False
        self._tasks: list[asyncio.Task[None]] = []
        self._inbound: set[_Inbound] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

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
            try:
                link.write(frames)
            except (OSError, RuntimeError):  # uvloop: RuntimeError on a closed handle
                link.close()  # the sender sees it and connects again

    # -- life --------------------------------------------------------------------------

    async def start(self) -> None:
        host, _, port = self.bind.rpartition(":")
        loop = asyncio.get_running_loop()
        try:
            self.server = await loop.create_server(
                lambda: _Inbound(self), host, int(port), reuse_address=True
            )
        except OSError:
            raise OSError(
                f"cannot listen on {self.bind} for Raft; is another member running there? "
                "set the member's port in dledger_peers"
            ) from None
        self.port = self.server.sockets[0].getsockname()[1]
        self._tasks = [loop.create_task(self._ticker())]
        self._tasks += [loop.create_task(self._sender(p)) for p in self.peers]

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []
        if self.server is not None:
            self.server.close()
            for inbound in list(self._inbound):
                if inbound.transport is not None:
                    inbound.transport.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
            self.server = None

    async def _ticker(self) -> None:
        while True:
            self.node.tick()
            await asyncio.sleep(TICK)

    async def _sender(self, peer: str) -> None:
        """Keep a connection to ``peer`` open; writes go through it from :meth:`_flush`."""
        host, _, port = self.peers[peer].rpartition(":")
        loop = asyncio.get_running_loop()
        while True:
            transport: asyncio.BaseTransport | None = None
            link = _Outbound(loop)
            try:
                t, _ = await asyncio.wait_for(
                    loop.create_connection(lambda link=link: link, host, int(port)),  # type: ignore[misc]
                    CONNECT_TIMEOUT,
                )
                transport = t
                sock = t.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.setsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT, self._user_timeout_ms)
                self._links[peer] = cast(asyncio.WriteTransport, t)
                await link.closed  # set at once if the peer hung up already
            except asyncio.CancelledError:
                raise
            except (OSError, TimeoutError, RuntimeError) as exc:  # uvloop: RuntimeError
                log.debug("raft connection to %s broke: %s", peer, exc)
            finally:
                self._links.pop(peer, None)
                if transport is not None:
                    transport.close()
            self._queues[peer].clear()  # what was queued for a broken link Raft resends
            await asyncio.sleep(RECONNECT_DELAY)


class _Outbound(asyncio.Protocol):
    """Our side of a connection to a peer: nothing comes back on it; its end is noted."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
