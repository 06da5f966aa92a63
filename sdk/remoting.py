"""The SDK's transport: nameserver lookups with failover across addresses (RocketMQ's
remoting protocol), and one connection per broker with a pipelined send stream.

Sends to a broker share one bidirectional stream: each request carries an id, and the
requests waiting when the stream is free go out together in one message, so many sends in
flight cost few gRPC messages. Every non-zero status becomes the error class of its code
(``rocketq.cluster.errors``); a broken connection is ``ConnectBrokerError`` and a missed deadline
``RequestTimeoutError``, both retriable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any, TypeVar, cast

import grpc

from rocketq.cluster.errors import (
    ConnectBrokerError,
    NoNameServerError,
    RequestTimeoutError,
    RocketqError,
    for_code,
)
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from rocketq.cluster.remoting import fastjson
from rocketq.cluster.remoting.answer import check as check_answer
from rocketq.cluster.remoting.codes import RequestCode
from rocketq.cluster.remoting.command import RemotingCommand
from rocketq.cluster.remoting.transport import RemotingClient
from rocketq.cluster.route_data import (
    BrokerData,
    ClusterInfo,
    TopicRouteData,
    parse_cluster_info,
    parse_route,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    # Each client object its own connections (a restarted broker is reached by a new
    # channel at once, not through another channel's backoff), and reconnect within a
    # second: a broker that comes back is used again quickly.
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
MAX_COALESCED = 16
MAX_COALESCED_BYTES = 64 * 1024
SWEEP_INTERVAL = 0.05


def check(status: pb.Status) -> None:
    """Raise the error class of a non-zero status."""
    if status.code:
        raise for_code(status.code)(status.message)


async def call(what: str, addr: str, coro: Awaitable[T]) -> T:
    """Await a gRPC call, turning transport failures into rocketq errors."""
    try:
        return await coro
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            raise RequestTimeoutError(f"{what} to {addr} timed out") from None
        raise ConnectBrokerError(f"{what} to {addr} failed: {code.name} {exc.details()}") from None


def parse_addrs(namesrv: str) -> list[str]:
    addrs = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise NoNameServerError(
            "no nameserver address given; pass namesrv='host:9876' (several: 'a:9876;b:9876')"
        )
    return addrs


class NameServerClient:
    """Asks any live nameserver over RocketMQ's remoting protocol; a failure moves on to
    the next address."""

    def __init__(self, namesrv: str, *, timeout: float = 3.0) -> None:
        self.addrs = parse_addrs(namesrv)
        self.timeout = timeout
        self._index = random.randrange(len(self.addrs))
        self.remoting = RemotingClient()

    async def _ask(
        self, what: str, code: int, ext: dict[str, str] | None = None
    ) -> RemotingCommand:
        errors = []
        for i in range(len(self.addrs)):
            addr = self.addrs[(self._index + i) % len(self.addrs)]
            try:
                answer = await self.remoting.invoke(addr, RemotingCommand(code, ext), self.timeout)
            except (ConnectBrokerError, RequestTimeoutError) as exc:
                errors.append(str(exc))
                continue
            self._index = (self._index + i) % len(self.addrs)
            return answer
        raise NoNameServerError(f"no nameserver answered {what}: " + "; ".join(errors))

    async def route(self, topic: str) -> TopicRouteData:
        answer = await self._ask(
            f"route of {topic}", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
        )
        check_answer(answer)
        route = parse_route(answer.body or b"{}")
        learn_grpc_addrs(route.broker_datas)
        return route

    async def cluster_info(self) -> ClusterInfo:
        answer = await self._ask("cluster info", RequestCode.GET_BROKER_CLUSTER_INFO)
        check_answer(answer)
        info = parse_cluster_info(answer.body or b"{}")
        learn_grpc_addrs(info.broker_addr_table.values())
        return info

    async def topic_list(self) -> list[str]:
        answer = await self._ask("topic list", RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        check_answer(answer)
        doc = fastjson.loads(bytes(answer.body or b"{}"))
        return sorted(str(t) for t in doc.get("topicList") or [])

    async def delete_topic(self, topic: str, cluster: str = "") -> None:
        """Every nameserver forgets the topic (they do not talk to each other)."""
        ext = {"topic": topic}
        if cluster:
            ext["clusterName"] = cluster
        for addr in self.addrs:
            with contextlib.suppress(ConnectBrokerError, RequestTimeoutError):
                await self.remoting.invoke(
                    addr, RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext), self.timeout
                )

    async def close(self) -> None:
        await self.remoting.close()


class _Pipeline:
    """Requests to one broker on one bidirectional stream: each carries an id, answers
    come back in any order and find their caller by it; the stream is reopened after a
    break, and deadlines are checked by one sweeper task rather than a timer per call."""

    what = "call"

    def __init__(self, stub: Any, addr: str) -> None:
        self.stub = stub
        self.addr = addr
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[asyncio.Future[Any], float]] = {}
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def call(self, req: Any, timeout: float) -> Any:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
            self._sweeper = self._sweeper or asyncio.ensure_future(self._sweep())
        loop = asyncio.get_running_loop()
        rid = req.request_id = next(self._ids)
        fut: asyncio.Future[Any] = loop.create_future()
        self._waiting[rid] = (fut, loop.time() + timeout)
        self._queue.put_nowait(req)
        try:
            return await fut
        finally:
            self._waiting.pop(rid, None)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            now = loop.time()
            for fut, deadline in list(self._waiting.values()):
                if deadline <= now and not fut.done():
                    fut.set_exception(RequestTimeoutError(f"{self.what} to {self.addr} timed out"))

    def _open(self) -> AsyncIterator[Any]:
        """Open the stream; -> its messages from the broker."""
        raise NotImplementedError

    def _answers(self, message: Any) -> Iterable[Any]:
        raise NotImplementedError

    async def _run(self) -> None:
        reason = "closed by the broker"
        try:
            async for message in self._open():
                for r in self._answers(message):
                    waiting = self._waiting.get(r.request_id)
                    if waiting is not None and not waiting[0].done():
                        waiting[0].set_result(r)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as exc:
            reason = f"broke: {exc.code().name}"
        except Exception:
            log.exception("%s stream to %s failed", self.what, self.addr)
            reason = "failed"
        err = ConnectBrokerError(f"{self.what} stream to {self.addr} {reason}")
        for fut, _ in list(self._waiting.values()):
            if not fut.done():
                fut.set_exception(err)
        # The next stream reads a queue of its own. gRPC leaves a broken stream's request
        # generator waiting on this one; were it shared, that generator would take the
        # next stream's first request and lose it (its callers would wait out their
        # whole timeout). None ends it.
        old, self._queue = self._queue, asyncio.Queue()
        while not old.empty():  # never sent; their callers already have the error
            old.get_nowait()
        old.put_nowait(None)

    async def close(self) -> None:
        for task in (self._task, self._sweeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


class _SendStream(_Pipeline):
    """Sends on the broker's SendStream: the sends waiting when the stream is free go out
    together in one message, so many sends in flight cost few gRPC messages."""

    what = "send"

    def _open(self) -> AsyncIterator[Any]:
        return cast(AsyncIterator[Any], self.stub.SendStream(self._batches()))

    def _answers(self, message: Any) -> Iterable[Any]:
        return cast(Iterable[Any], message.responses)

    async def _batches(self) -> AsyncIterator[pb.SendBatchRequest]:
        queue = self._queue  # this stream's; None in it: the stream is gone
        while True:
            first = await queue.get()
            if first is None:
                return
            if queue.empty():
                # Let the other ready tasks queue their sends: they go out together.
                await asyncio.sleep(0)
            batch = [first]
            size = len(first.records)
            while len(batch) < MAX_COALESCED and size < MAX_COALESCED_BYTES and not queue.empty():
                req = queue.get_nowait()
                if req is None:
                    return  # the stream is gone: what was taken was failed with it
                batch.append(req)
                size += len(req.records)
            yield pb.SendBatchRequest(requests=batch)


class _PullStream(_Pipeline):
    """Pulls on the broker's PullStream, answered as each is ready (long polling holds
    one without holding the others)."""

    what = "pull"

    def _open(self) -> AsyncIterator[Any]:
        return cast(AsyncIterator[Any], self.stub.PullStream(self._requests()))

    def _answers(self, message: Any) -> Iterable[Any]:
        return (message,)

    async def _requests(self) -> AsyncIterator[pb.PullRequest]:
        queue = self._queue  # this stream's; None in it: the stream is gone
        while (req := await queue.get()) is not None:
            yield req


# A broker's address (its remoting port, what routes and message ids name) -> where its gRPC
# services listen, as the nameservers say; the SDK still sends and pulls over gRPC while it
# moves to the remoting protocol.
GRPC_ADDRS: dict[str, str] = {}


def learn_grpc_addrs(brokers: Iterable[BrokerData]) -> None:
    for b in brokers:
        for bid, addr in b.broker_addrs.items():
            grpc_addr = b.grpc_addrs.get(bid)
            if grpc_addr:
                GRPC_ADDRS[addr] = grpc_addr


class BrokerClient:
    """One broker: its channel, stubs and send stream."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.target = GRPC_ADDRS.get(addr, addr)
        self.channel = grpc.aio.insecure_channel(self.target, options=GRPC_OPTIONS)
        self.stub: Any = pb_grpc.BrokerStub(self.channel)  # type: ignore[no-untyped-call]
        self.admin: Any = pb_grpc.BrokerAdminStub(self.channel)  # type: ignore[no-untyped-call]
        self.sender = _SendStream(self.stub, addr)
        self.puller = _PullStream(self.stub, addr)

    async def send(self, req: pb.SendRequest, timeout: float) -> pb.SendResponse:
        resp: pb.SendResponse = await self.sender.call(req, timeout)
        return resp

    async def pull(self, req: pb.PullRequest, timeout: float) -> pb.PullResponse:
        resp: pb.PullResponse = await self.puller.call(req, timeout)
        return resp

    async def unary(
        self, what: str, method: str, req: Any, timeout: float, *, admin: bool = False
    ) -> Any:
        stub = self.admin if admin else self.stub
        return await call(what, self.addr, getattr(stub, method)(req, timeout=timeout))

    async def close(self) -> None:
        await self.sender.close()
        await self.puller.close()
        await self.channel.close()


class BrokerConnections:
    def __init__(self) -> None:
        self._clients: dict[str, BrokerClient] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, addr: str) -> BrokerClient:
        client = self._clients.get(addr)
        if client is not None and client.target != GRPC_ADDRS.get(addr, addr):
            # The broker's gRPC services moved (it restarted): a channel to the new place.
            task = asyncio.ensure_future(client.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            client = None
        if client is None:
            client = self._clients[addr] = BrokerClient(addr)
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


def rocketq_error(exc: BaseException) -> RocketqError | None:
    return exc if isinstance(exc, RocketqError) else None
