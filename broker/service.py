"""The broker's gRPC ``Broker`` service: thin adapters from protobuf requests to the
processors, and every error turned into a status with its code and a message."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from rocketq.broker.consumer_manager import Subscription
from rocketq.broker.filter import SQL92, TAG, parse_tags, sql_filter
from rocketq.broker.host import BrokerHost
from rocketq.broker.metrics import (
    CONSUMER_SEND_MSG_BACK,
    END_TRANSACTION,
    HEARTBEAT,
    PULL_MESSAGE,
    SEND_BATCH_MESSAGE,
    SEND_MESSAGE,
    BrokerCounters,
)
from rocketq.broker.stats import BrokerStats
from rocketq.broker.subscription_group import check_group
from rocketq.cluster.errors import QueryNotFoundError, RocketqError, ServiceNotAvailableError
from rocketq.cluster.message import PERM_READ, PERM_WRITE, retry_topic
from rocketq.cluster.metrics import response_code_name
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from rocketq.replication.waiters import resolver
from rocketq.storage.commitlog import AppendResult
from rocketq.storage.results import PutStatus

if TYPE_CHECKING:
    from rocketq.broker.flow_control import FlowControl
    from rocketq.broker.pull_processor import PullProcessor
    from rocketq.broker.raft_member import RaftMember
    from rocketq.broker.send_processor import SendProcessor
    from rocketq.broker.transaction import TransactionalMessageService
    from rocketq.replication.ha.master import HAMaster
    from rocketq.replication.ha.slave import HASlave

log = logging.getLogger(__name__)


class ServiceHost(BrokerHost, Protocol):
    """The broker as its gRPC services see it: its processors and its replication."""

    send: SendProcessor
    pull: PullProcessor
    transactions: TransactionalMessageService
    flow: FlowControl
    raft: RaftMember | None
    ha_master: HAMaster | None
    ha_slave: HASlave | None
    metrics: BrokerCounters | None
    stats: BrokerStats


Req = TypeVar("Req")
Resp = TypeVar("Resp")

OK = pb.Status(code=0)
_PUT_CODES = {
    PutStatus.PUT_OK: 0,
    PutStatus.FLUSH_DISK_TIMEOUT: 10,
    PutStatus.SLAVE_NOT_AVAILABLE: 11,
    PutStatus.FLUSH_SLAVE_TIMEOUT: 12,
}


def status_of(exc: BaseException) -> pb.Status:
    if isinstance(exc, RocketqError):
        return pb.Status(code=exc.code, message=str(exc))
    log.exception("unexpected error handling a request")
    return pb.Status(code=1, message=f"broker error: {type(exc).__name__}: {exc}")


def peer_of(context: object) -> str:
    peer = getattr(context, "peer", None)
    return str(peer()) if callable(peer) else ""


Reply = Callable[[Resp], None]


async def answer_stream(
    requests: AsyncIterator[Req],
    answer: Callable[[Req, Reply[Resp]], Resp | Awaitable[Resp] | None],
) -> AsyncIterator[Resp]:
    """The answers to a stream of requests, on the same stream. ``answer`` does its
    synchronous part as the request is read and returns the answer, which goes out in
    order; or an awaitable of it, awaited in a task of its own; or None, when it calls the
    reply callback it was given itself (once, at once or later: from the callback that
    learns the answer, with no task in between). The later ones go out as soon as they
    are ready, so a slow one does not hold up the rest."""
    out: asyncio.Queue[Resp | None] = asyncio.Queue()
    pending: set[asyncio.Task[None]] = set()
    promised = 0  # answers ``answer`` will reply itself
    all_replied: asyncio.Future[None] | None = None

    def reply(resp: Resp) -> None:
        nonlocal promised
        promised -= 1
        out.put_nowait(resp)
        if not promised and all_replied is not None and not all_replied.done():
            all_replied.set_result(None)

    async def answer_later(waiting: Awaitable[Resp]) -> None:
        out.put_nowait(await waiting)

    async def reader() -> None:
        nonlocal promised, all_replied
        try:
            async for req in requests:
                promised += 1
                result = answer(req, reply)
                if result is None:
                    continue
                promised -= 1
                if not inspect.isawaitable(result):
                    out.put_nowait(result)
                    continue
                task = asyncio.ensure_future(answer_later(result))
                pending.add(task)
                task.add_done_callback(pending.discard)
            if pending:
                await asyncio.gather(*list(pending))
            if promised:
                all_replied = asyncio.get_running_loop().create_future()
                await all_replied
        finally:
            out.put_nowait(None)

    read_task = asyncio.ensure_future(reader())
    try:
        while (item := await out.get()) is not None:
            yield item
    finally:
        read_task.cancel()
        for task in list(pending):
            task.cancel()


class BrokerService(pb_grpc.BrokerServicer):
    def __init__(self, broker: ServiceHost) -> None:
        self.b = broker

    def _append(self, req: pb.SendRequest) -> AppendResult | BaseException:
        try:
            return self.b.send.append(
                req.records,
                req.topic,
                req.queue_id,
                default_topic=req.default_topic,
                default_queue_nums=req.default_topic_queue_nums,
                producer_group=req.producer_group,
            )
        except Exception as exc:  # every failure becomes an answer, never a broken call
            return exc

    def _answer(
        self, req: pb.SendRequest, r: AppendResult | BaseException, status: PutStatus
    ) -> pb.SendResponse:
        if isinstance(r, BaseException):
            return pb.SendResponse(request_id=req.request_id, status=status_of(r))
        return pb.SendResponse(
            request_id=req.request_id,
            status=OK if status is PutStatus.PUT_OK else pb.Status(code=_PUT_CODES[status]),
            queue_id=req.queue_id,
            queue_offset=r.queue_offset,
            wrote_offset=r.wrote_offset,
            store_host=self.b.store.commitlog.store_host,
            msg_count=r.msg_count,
        )

    def _start_all(
        self, reqs: list[pb.SendRequest], reply: Reply[pb.SendBatchResponse]
    ) -> pb.SendBatchResponse | None:
        """Append every send of a stream message now; -> the answer, or None when stored
        sends wait (a flush, a slave, a Raft quorum): one wait for the newest end offset
        then answers them all through ``reply``."""
        started = time.perf_counter()
        results = [self._append(req) for req in reqs]
        self.b.store.settle()  # they leave for the slave or the followers now
        ends = [r.end_offset for r in results if not isinstance(r, BaseException)]
        if not ends or not self.b.send.waits:
            return self._answer_all(reqs, results, PutStatus.PUT_OK, started)

        def stored(status: PutStatus | BaseException) -> None:
            if isinstance(status, BaseException):  # Raft: the leader stepped down meanwhile
                reply(self._answer_all(reqs, [status] * len(reqs), PutStatus.PUT_OK, started))
            else:
                reply(self._answer_all(reqs, results, status, started))

        self.b.send.wait_stored_then(max(ends), stored)
        return None

    def _answer_all(
        self,
        reqs: list[pb.SendRequest],
        results: list[AppendResult | BaseException],
        status: PutStatus,
        started: float,
    ) -> pb.SendBatchResponse:
        responses = [self._answer(q, r, status) for q, r in zip(reqs, results, strict=True)]
        if self.b.metrics is not None:
            _count_sends(self.b.metrics, results, responses, started)
        return pb.SendBatchResponse(responses=responses)

    async def SendMessage(self, request: pb.SendRequest, context: object) -> pb.SendResponse:
        later: asyncio.Future[pb.SendBatchResponse] = asyncio.get_running_loop().create_future()
        answer = self._start_all([request], resolver(later))
        if answer is None:
            answer = await later
        response: pb.SendResponse = answer.responses[0]
        return response

    async def SendStream(
        self, request_iterator: AsyncIterator[pb.SendBatchRequest], context: object
    ) -> AsyncIterator[pb.SendBatchResponse]:
        """Many sends on one stream, each message holding several independent sends,
        appended as the message is read. Without a wait it is answered at once; a slave or
        quorum wait answers it from the callback that learns the outcome, a flush wait from a
        task, and the stream keeps reading meanwhile."""
        async for answer in answer_stream(
            request_iterator, lambda batch, reply: self._start_all(list(batch.requests), reply)
        ):
            yield answer

    async def PullMessage(self, request: pb.PullRequest, context: object) -> pb.PullResponse:
        started = time.perf_counter()
        try:
            a = await self.b.pull.pull(
                request.consumer_group,
                request.topic,
                request.queue_id,
                request.queue_offset,
                max_msg_nums=request.max_msg_nums or 32,
                subscription=request.subscription or "*",
                expression_type=request.expression_type or "TAG",
                suspend_timeout_ms=request.suspend_timeout_millis,
                commit_offset=request.commit_offset if request.has_commit_offset else None,
            )
        except Exception as exc:
            status = status_of(exc)
            if self.b.metrics is not None:
                self.b.metrics.answered(PULL_MESSAGE, response_code_name(status.code), started)
            return pb.PullResponse(request_id=request.request_id, status=status)
        if self.b.metrics is not None:
            self.b.metrics.answered(PULL_MESSAGE, "success", started, held=a.held)
        return pb.PullResponse(
            request_id=request.request_id,
            status=OK,
            pull_status=pb.PullStatus.Name(int(a.status)),
            next_begin_offset=a.next_begin_offset,
            min_offset=a.min_offset,
            max_offset=a.max_offset,
            suggest_which_broker_id=a.suggest_which_broker_id,
            records=a.records,
        )

    async def PullStream(
        self, request_iterator: AsyncIterator[pb.PullRequest], context: object
    ) -> AsyncIterator[pb.PullResponse]:
        """Many pulls on one stream, each answered when it is ready: a pull held by long
        polling does not hold up the others."""
        answers: AsyncIterator[pb.PullResponse] = answer_stream(
            request_iterator, lambda req, reply: self.PullMessage(req, context)
        )
        async for answer in answers:
            yield answer

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: object) -> pb.Status:
        return self._timed(HEARTBEAT, time.perf_counter(), self._heartbeat(request, context))

    def _timed(self, request_code: str, started: float, status: pb.Status) -> pb.Status:
        if self.b.metrics is not None:
            self.b.metrics.answered(request_code, response_code_name(status.code), started)
        return status

    def _heartbeat(self, request: pb.HeartbeatRequest, context: object) -> pb.Status:
        try:
            cm = self.b.consumers
            for group in request.producer_groups:
                cm.register_producer(group, request.client_id)
            for c in request.consumers:
                group = self.b.groups.find_or_create(c.group)
                if c.message_model != "BROADCASTING":
                    # The group's retry topic exists from its first heartbeat (as RocketMQ),
                    # so consumers find it in the route before anything is retried.
                    self.b.topics.create_system(
                        retry_topic(c.group), group.retry_queue_nums, PERM_READ | PERM_WRITE
                    )
                subs = []
                for s in c.subscriptions:
                    kind = (s.expression_type or TAG).upper()
                    if kind == SQL92:
                        # Refused here if the broker does not filter by SQL92 or the
                        # expression is bad: the consumer's start fails with the reason.
                        sql_filter(
                            s.expression,
                            kind,
                            enabled=self.b.config.enable_property_filter,
                        )
                        codes: frozenset[int] = frozenset()
                    else:
                        codes = parse_tags(s.expression or "*") or frozenset()
                    subs.append(Subscription(s.topic, s.expression or "*", kind, codes, s.version))
                cm.register_consumer(
                    c.group,
                    request.client_id,
                    client_addr=peer_of(context),
                    consume_type=c.consume_type,
                    message_model=c.message_model,
                    consume_from_where=c.consume_from_where,
                    subscriptions=subs,
                )
        except Exception as exc:
            return status_of(exc)
        return OK

    async def UnregisterClient(self, request: pb.HeartbeatRequest, context: object) -> pb.Status:
        self.b.consumers.unregister_client(request.client_id, reason="it unregistered")
        return OK

    async def ClientChannel(
        self, request: pb.ClientChannelRequest, context: object
    ) -> AsyncIterator[pb.ServerEvent]:
        queue = self.b.consumers.open_channel(request.client_id)
        try:
            yield pb.ServerEvent()  # opened: lets the client know the channel is live
            while True:
                event = await queue.get()
                if isinstance(event, pb.ServerEvent):
                    yield event
                elif event[0] == "reset":
                    yield pb.ServerEvent(
                        reset_offset=pb.ResetOffsetEvent(group=event[1], topic=event[2])
                    )
                else:
                    yield pb.ServerEvent(consumer_ids_changed=event[1])
        finally:
            self.b.consumers.close_channel(request.client_id, queue)

    async def GetConsumerListByGroup(
        self, request: pb.GroupRequest, context: object
    ) -> pb.ConsumerListResponse:
        return pb.ConsumerListResponse(
            status=OK, client_ids=self.b.consumers.client_ids(request.group)
        )

    async def QueryConsumerOffset(
        self, request: pb.GroupRequest, context: object
    ) -> pb.OffsetResponse:
        offset = self.b.offsets.query(request.group, request.topic, request.queue_id)
        if offset < 0:
            err = QueryNotFoundError(
                f"group {request.group} has no offset for {request.topic} queue {request.queue_id}"
            )
            return pb.OffsetResponse(status=status_of(err), offset=-1)
        return pb.OffsetResponse(status=OK, offset=offset)

    async def UpdateConsumerOffset(self, request: pb.GroupRequest, context: object) -> pb.Status:
        # A slave keeps what consumers commit while its master is away; the master takes
        # those offsets back when the slave reconnects (SlaveSynchronizer).
        self.b.offsets.commit(request.group, request.topic, request.queue_id, request.offset)
        return OK

    async def ConsumerSendMsgBack(self, request: pb.SendBackRequest, context: object) -> pb.Status:
        started = time.perf_counter()
        return self._timed(CONSUMER_SEND_MSG_BACK, started, await self._send_back(request))

    async def _send_back(self, request: pb.SendBackRequest) -> pb.Status:
        try:
            await self.b.send.send_back(
                request.group,
                request.commit_log_offset,
                request.delay_level,
                request.max_reconsume_times,
            )
        except Exception as exc:
            return status_of(exc)
        return OK

    async def GetMaxOffset(self, request: pb.GroupRequest, context: object) -> pb.OffsetResponse:
        return pb.OffsetResponse(
            status=OK, offset=self.b.store.max_offset_in_queue(request.topic, request.queue_id)
        )

    async def GetMinOffset(self, request: pb.GroupRequest, context: object) -> pb.OffsetResponse:
        return pb.OffsetResponse(
            status=OK, offset=self.b.store.min_offset_in_queue(request.topic, request.queue_id)
        )

    async def SearchOffsetByTimestamp(
        self, request: pb.GroupRequest, context: object
    ) -> pb.OffsetResponse:
        return pb.OffsetResponse(
            status=OK,
            offset=self.b.store.offset_by_time(request.topic, request.queue_id, request.timestamp),
        )

    def _check_lockable(self) -> None:
        if self.b.config.broker_role == "SLAVE":
            raise ServiceNotAvailableError(
                f"broker {self.b.config.broker_name} id {self.b.config.broker_id} is a slave; "
                "queue locks are answered by the master"
            )

    async def LockBatchMQ(
        self, request: pb.LockBatchRequest, context: object
    ) -> pb.LockBatchResponse:
        try:
            self._check_lockable()
            check_group(request.group)
            held = self.b.locks.try_lock_batch(
                request.group, [(q.topic, q.queue_id) for q in request.queues], request.client_id
            )
        except Exception as exc:
            return pb.LockBatchResponse(status=status_of(exc))
        return pb.LockBatchResponse(
            status=OK, locked=[pb.LockQueue(topic=t, queue_id=q) for t, q in held]
        )

    async def EndTransaction(self, request: pb.EndTransactionRequest, context: object) -> pb.Status:
        started = time.perf_counter()
        try:
            await self.b.transactions.end(request)
        except Exception as exc:
            return self._timed(END_TRANSACTION, started, status_of(exc))
        return self._timed(END_TRANSACTION, started, OK)

    async def UnlockBatchMQ(self, request: pb.LockBatchRequest, context: object) -> pb.Status:
        try:
            self._check_lockable()
            self.b.locks.unlock_batch(
                request.group, [(q.topic, q.queue_id) for q in request.queues], request.client_id
            )
        except Exception as exc:
            return status_of(exc)
        return OK


def _count_sends(
    metrics: BrokerCounters,
    results: list[AppendResult | BaseException],
    responses: list[pb.SendResponse],
    started: float,
) -> None:
    """One latency observation per request and response code: a request of one message is
    a SEND_MESSAGE, of several a SEND_BATCH_MESSAGE."""
    counts: dict[tuple[str, int], int] = {}
    for r, resp in zip(results, responses, strict=True):
        batch = not isinstance(r, BaseException) and r.msg_count > 1
        key = (SEND_BATCH_MESSAGE if batch else SEND_MESSAGE, resp.status.code)
        counts[key] = counts.get(key, 0) + 1
    for (request_code, code), n in counts.items():
        metrics.answered(request_code, response_code_name(code), started, n)
