"""A Raft member over gRPC: the :class:`RaftNode` state machine, a ticker, and one outgoing
message stream per peer (``Raft.Stream``). Messages are one-way; a lost stream loses the
messages in it, which Raft tolerates (they are sent again on the next heartbeat or retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable

import grpc

from cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from replication.raft.node import (
    AppendRequest,
    AppendResponse,
    Entry,
    HardStateStore,
    Message,
    RaftConfig,
    RaftLog,
    RaftNode,
    Role,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)

log = logging.getLogger(__name__)

TICK = 0.05  # s
RECONNECT_DELAY = 0.2  # s
MAX_QUEUED = 10_000  # messages waiting for one peer's stream; older ones are dropped
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def to_pb(sender: str, msg: Message) -> pb.RaftMessage:
    if isinstance(msg, VoteRequest):
        return pb.RaftMessage(
            sender=sender,
            term=msg.term,
            vote_request=pb.RaftVoteRequest(
                last_index=msg.last_index,
                last_term=msg.last_term,
                pre=msg.pre,
                transfer=msg.transfer,
            ),
        )
    if isinstance(msg, VoteResponse):
        return pb.RaftMessage(
            sender=sender,
            term=msg.term,
            vote_response=pb.RaftVoteResponse(granted=msg.granted, pre=msg.pre, reason=msg.reason),
        )
    if isinstance(msg, AppendRequest):
        return pb.RaftMessage(
            sender=sender,
            term=msg.term,
            append_request=pb.RaftAppendRequest(
                prev_index=msg.prev_index,
                prev_term=msg.prev_term,
                entries=[pb.RaftEntry(term=e.term, data=e.data) for e in msg.entries],
                commit=msg.commit,
            ),
        )
    if isinstance(msg, TimeoutNow):
        return pb.RaftMessage(sender=sender, term=msg.term, timeout_now=pb.RaftTimeoutNow())
    return pb.RaftMessage(
        sender=sender,
        term=msg.term,
        append_response=pb.RaftAppendResponse(
            success=msg.success,
            match_index=msg.match_index,
            conflict_index=msg.conflict_index,
            reason=msg.reason,
        ),
    )


def from_pb(m: pb.RaftMessage) -> Message | None:
    sender = m.sender
    kind = m.WhichOneof("kind")
    if kind == "vote_request":
        v = m.vote_request
        return VoteRequest(m.term, sender, v.last_index, v.last_term, v.pre, v.transfer)
    if kind == "vote_response":
        r = m.vote_response
        return VoteResponse(m.term, sender, r.granted, r.pre, r.reason)
    if kind == "append_request":
        a = m.append_request
        entries = tuple(Entry(e.term, e.data) for e in a.entries)
        return AppendRequest(m.term, sender, a.prev_index, a.prev_term, entries, a.commit)
    if kind == "timeout_now":
        return TimeoutNow(m.term, sender)
    if kind == "append_response":
        r2 = m.append_response
        return AppendResponse(
            m.term, sender, r2.success, r2.match_index, r2.conflict_index, r2.reason
        )
    return None


class RaftServer(pb_grpc.RaftServicer):
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
        self._queues: dict[str, asyncio.Queue[pb.RaftMessage]] = {
            p: asyncio.Queue(MAX_QUEUED) for p in peers
        }
        self._tasks: list[asyncio.Task[None]] = []
        self.server: grpc.aio.Server | None = None
        self.port = 0

    # -- Transport ---------------------------------------------------------------------

    def send(self, to: str, msg: Message) -> None:
        queue = self._queues.get(to)
        if queue is None:
            return
        if queue.full():
            queue.get_nowait()  # the oldest goes: Raft sends again what matters
        queue.put_nowait(to_pb(self.node_id, msg))

    # -- life --------------------------------------------------------------------------

    async def start(self) -> None:
        self.server = grpc.aio.server(options=GRPC_OPTIONS)
        self.port = self.server.add_insecure_port(self.bind)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.bind} for Raft; set the member's port")
        pb_grpc.add_RaftServicer_to_server(self, self.server)  # type: ignore[no-untyped-call]
        await self.server.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._ticker())]
        self._tasks += [loop.create_task(self._sender(p)) for p in self.peers]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self.server is not None:
            await self.server.stop(grace=0.2)

    async def _ticker(self) -> None:
        while True:
            self.node.tick()
            await asyncio.sleep(TICK)

    async def _sender(self, peer: str) -> None:
        queue = self._queues[peer]

        async def outgoing() -> AsyncIterator[pb.RaftMessage]:
            while True:
                yield await queue.get()

        while True:
            try:
                async with grpc.aio.insecure_channel(self.peers[peer], options=GRPC_OPTIONS) as ch:
                    stub = pb_grpc.RaftStub(ch)  # type: ignore[no-untyped-call]
                    await stub.Stream(outgoing())
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                log.debug("raft stream to %s broke: %s", peer, exc.code().name)
            await asyncio.sleep(RECONNECT_DELAY)

    # -- Raft service ------------------------------------------------------------------

    async def Stream(
        self, request_iterator: AsyncIterator[pb.RaftMessage], context: object
    ) -> pb.Empty:
        sender = ""
        try:
            async for m in request_iterator:
                sender = m.sender
                msg = from_pb(m)
                if msg is not None:
                    self.node.receive(msg)
        finally:
            if sender:
                self.node.peer_lost(sender)  # a leader whose stream breaks is likely gone
        return pb.Empty()
