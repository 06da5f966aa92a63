"""The push consumer: rebalance, one pull loop per owned queue, a bounded pool of consume
tasks, retries through the broker's retry topic, offsets committed every 5 s.

Clustering: the group's consumers split the queues (averaging by default) and commit
offsets to the brokers; a message the handler does not finish (RECONSUME_LATER or an
exception) goes back to ``%RETRY%<group>`` and returns later with ``reconsume_times`` + 1.
Broadcasting: every consumer reads every queue, with offsets in a local file, no retries.

For admins, through the broker (``sdk/consumer_diagnostics.py``): its running info
(settings, subscriptions, owned queues, measured figures) and its listener run once on a
stored message.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from rocketq.common.aio import wait_event
from rocketq.common.exceptions import ClientStateError, RocketqError, TopicNotExistError
from rocketq.common.message import (
    MASTER_ID,
    PROPERTY_RETRY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    TRACE_PRODUCER_GROUP,
    MessageExt,
    MessageQueue,
    dlq_topic,
    retry_topic,
)
from rocketq.common.record import decode_records
from rocketq.common.sql92 import validate
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk import consumer_diagnostics as diagnostics
from rocketq.sdk.client import ClientInstance, consumer_heartbeat, subscribe_queues
from rocketq.sdk.client_wire import (
    DirectConsumeRequest,
    GroupChanged,
    Notice,
    OffsetReset,
    max_offset_request,
    min_offset_request,
    search_offset_request,
    send_back_request,
)
from rocketq.sdk.consumer_stats import ConsumerStats
from rocketq.sdk.consumer_types import ConsumeFrom, ConsumeResult, MessageModel, MessageSelector
from rocketq.sdk.message_body import (
    MAX_BODY_INFLATE_RATIO,
    MAX_MESSAGE_SIZE,
    BadMessageError,
    check_limits,
    check_messages,
    decode_pulled,
)
from rocketq.sdk.metrics import MetricsOption, client_metrics
from rocketq.sdk.offset_store import LocalFileOffsetStore, RemoteOffsetStore
from rocketq.sdk.orderly_locks import QueueLocks, move_to_dlq
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.producer import Producer
from rocketq.sdk.rebalance import STRATEGIES
from rocketq.sdk.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketq.sdk.trace import TraceDispatcher, consume_event
from rocketq.sdk.wire import PullOutcome, PullReply, pull_request

log = logging.getLogger(__name__)

Handler = Callable[[list[MessageExt]], Awaitable[ConsumeResult] | ConsumeResult]
# A consume request: the queue, its process queue, the batch, and when the batch's pull
# arrived (time.monotonic(); 0.0 when metrics are off).
Request = tuple[MessageQueue, "ProcessQueue", list[MessageExt], float]

PULL_DELAY_WHEN_EXCEPTION = 3.0
PULL_DELAY_WHEN_FLOW_CONTROL = 0.05
PULL_DELAY_WHEN_NOT_LOCKED = 3.0
SEND_BACK_RETRY_DELAY = 5.0
# A bad message (sdk.message_body) is offered to the DLQ this many times, PULL_DELAY_WHEN_
# EXCEPTION apart, before it is skipped (its record stays in the CommitLog).
BAD_MESSAGE_DLQ_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """RocketMQ's DefaultMQPushConsumer settings, snake_case, with its defaults."""

    allocate_strategy: str = "AVG"
    consume_thread_min: int = 10
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int = -1  # -1: the group's setting on the broker (16)
    pull_interval: int = 0
    persist_consumer_offset_interval: int = 5000
    rebalance_interval: int = 20_000
    heartbeat_broker_interval: int = 30_000
    poll_name_server_interval: int = 30_000
    broker_suspend_max_time_millis: int = 15_000
    consume_timestamp: int = 0  # ms; 0 means 30 minutes before start
    suspend_current_queue_time_millis: int = 1000  # orderly: wait before consuming again
    # Orderly: renew queue locks this often (ms), and stop trusting a lock not renewed for
    # this long (RocketMQ's rocketmq.client.rebalance.lockInterval / lockMaxLiveTime).
    rebalance_lock_interval: int = 20_000
    rebalance_lock_max_live_time: int = 30_000
    # Write SubBefore/SubAfter trace events per message to trace_topic (see sdk.trace).
    enable_trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    offset_store_dir: str = str(Path.home() / ".rocketq_offsets")
    # A compressed body inflates to at most max_message_size * max_body_inflate_ratio
    # bytes (RocketMQ's client inflates without a limit; its producers compress only
    # bodies of at most maxMessageSize, 4 MiB); check_crc checks each body's CRC. A
    # message failing either goes to %DLQ%<group> as stored (see sdk.message_body).
    max_message_size: int = MAX_MESSAGE_SIZE
    max_body_inflate_ratio: int = MAX_BODY_INFLATE_RATIO
    check_crc: bool = True

    def __post_init__(self) -> None:
        check_limits(self.max_message_size, self.max_body_inflate_ratio)

    @property
    def max_body_bytes(self) -> int:
        """The most a compressed body may inflate to."""
        return self.max_message_size * self.max_body_inflate_ratio


def finish_pulled(
    msgs: list[MessageExt],
    group: str,
    *,
    max_body_bytes: int = MAX_MESSAGE_SIZE * MAX_BODY_INFLATE_RATIO,
    check_crc: bool = True,
) -> tuple[list[MessageExt], list[BadMessageError]]:
    """Undo what the store saw: check each body's CRC and inflate compressed bodies (to
    at most ``max_body_bytes``), and give retried messages their topic back; -> the good
    messages, and the errors of the bad ones (their messages left as stored)."""
    good, bad = check_messages(msgs, max_body_bytes=max_body_bytes, check_crc=check_crc)
    retry = retry_topic(group)
    for msg in good:
        if msg.topic == retry:
            real = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if real:
                msg.topic = real
    return good, bad


def after_broken(
    mq: MessageQueue, records: list[MessageExt], requested: int, broken: Exception
) -> tuple[int, BadMessageError | None]:
    """Where to pull next when a pull's answer holds a record that does not decode after
    ``records``: from that record (it comes first next time), or, when it came first,
    one past the offset pulled, with the error that reports the skip."""
    if records:
        return records[-1].queue_offset + 1, None
    return requested + 1, BadMessageError.undecodable(mq.topic, mq.queue_id, requested, str(broken))


def finish_messages(
    msgs: list[MessageExt],
    group: str,
    *,
    max_body_bytes: int = MAX_MESSAGE_SIZE * MAX_BODY_INFLATE_RATIO,
    check_crc: bool = True,
) -> list[MessageExt]:
    """:func:`finish_pulled`'s good messages; raises the first bad message's
    BadMessageError."""
    good, bad = finish_pulled(msgs, group, max_body_bytes=max_body_bytes, check_crc=check_crc)
    if bad:
        raise bad[0]
    return good


class PushConsumer:
    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        model: MessageModel = MessageModel.CLUSTERING,
        consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET,
        orderly: bool = False,
        config: ConsumerConfig | None = None,
        metrics: MetricsOption = False,
        **settings: Any,
    ) -> None:
        """``metrics``: True or a prometheus_client CollectorRegistry records
        ``rocketmq_delivery_latency``, ``rocketmq_await_time`` and ``rocketmq_process_time``
        (see sdk.metrics) into a registry of the consumer's own or into that one;
        ``metrics_registry`` is the registry (None when off)."""
        self.group = group
        self.namesrv = namesrv
        self.model = model
        self.orderly = orderly
        self.tracer: TraceDispatcher | None = None
        self._metrics = client_metrics(metrics)
        if orderly and model is MessageModel.BROADCASTING:
            raise ClientStateError(
                "orderly consumption needs CLUSTERING (queue locks are per group); "
                "broadcasting consumers cannot be orderly"
            )
        self.consume_from = consume_from
        self.config = config or ConsumerConfig(**settings)
        if self.config.allocate_strategy not in STRATEGIES:
            raise ClientStateError(
                f"allocate_strategy {self.config.allocate_strategy!r} is unknown; use one of "
                + ", ".join(sorted(STRATEGIES))
            )
        self.client = ClientInstance(
            namesrv,
            poll_name_server_interval=self.config.poll_name_server_interval / 1000,
            heartbeat_interval=self.config.heartbeat_broker_interval / 1000,
        )
        self.client.heartbeat = self._heartbeat_data
        self.client.on_event = self._on_event
        self.client.on_request = self._broker_request
        self.subscriptions: dict[str, MessageSelector] = {}
        self.handler: Handler | None = None
        # Measured for the running info: pull and consume times and rates per topic.
        self.stats = ConsumerStats()
        # Bad messages met (sdk.message_body), by reason.
        self.bad_messages: collections.Counter[str] = collections.Counter()
        self.started_ms = 0
        self._async_handler = False
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._pulls: dict[MessageQueue, asyncio.Task[None]] = {}
        self._pull_from: dict[MessageQueue, int] = {}  # broker id suggested per queue
        # Consume requests, taken by consume_thread_max worker tasks (the consume pool).
        # Consume requests, taken by consume_thread_max worker tasks (the consume pool);
        # a worker with nothing to do parks on a future in _idle.
        self._requests: collections.deque[Request] = collections.deque()
        self._idle: collections.deque[asyncio.Future[None]] = collections.deque()
        self._workers: list[asyncio.Task[None]] = []
        self._busy = 0
        self._pool: ThreadPoolExecutor | None = None
        self._rebalance_now = asyncio.Event()
        self._missing_topics = False
        self._rebalance_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        # Orderly: one consume task per owned queue, woken when messages arrive.
        self._orderly_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._wakes: dict[MessageQueue, asyncio.Event] = {}
        self.locks = QueueLocks(self.client, self.group, self.process_queues, self._wakes)
        # Orderly with metrics: per owned queue, (last offset, arrival time) of each pull
        # not yet consumed, for the await time of what the listener gets.
        self._arrivals: dict[MessageQueue, collections.deque[tuple[int, float]]] = {}
        self.offsets: RemoteOffsetStore
        self.running = False

    # -- set-up ------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        selector = (
            expression
            if isinstance(expression, MessageSelector)
            else (MessageSelector.tags(expression))
        )
        if selector.is_sql:
            validate(selector.expression)
        self.subscriptions[topic] = selector

    def on_message(self, handler: Handler) -> Handler:
        self.handler = handler
        self._async_handler = inspect.iscoroutinefunction(handler)
        return handler

    @property
    def broadcasting(self) -> bool:
        return self.model is MessageModel.BROADCASTING

    async def start(self) -> None:
        if self.handler is None:
            raise ClientStateError("set a handler with consumer.on_message(handler) first")
        if not self.subscriptions:
            raise ClientStateError("subscribe to at least one topic before start()")
        if not self.broadcasting:
            self.subscriptions.setdefault(retry_topic(self.group), MessageSelector.tags("*"))
            self.offsets = RemoteOffsetStore(self.client, self.group)
        else:
            self.offsets = LocalFileOffsetStore(
                self.client, self.group, Path(self.config.offset_store_dir)
            )
        self._pool = ThreadPoolExecutor(
            max_workers=self.config.consume_thread_max, thread_name_prefix=f"consume-{self.group}"
        )
        self.stats = ConsumerStats()
        self.started_ms = int(time.time() * 1000)
        await self.client.start()
        if self.config.enable_trace and self.tracer is None:
            writer = Producer(TRACE_PRODUCER_GROUP, self.namesrv)
            self.tracer = TraceDispatcher(writer, topic=self.config.trace_topic)
            await self.tracer.start()
        self.running = True
        self._workers = [
            asyncio.ensure_future(self._worker()) for _ in range(self.config.consume_thread_max)
        ]
        for topic in self.subscriptions:
            with contextlib.suppress(TopicNotExistError):
                await self.client.update_route(topic)
        if any(s.is_sql for s in self.subscriptions.values()):
            try:
                await self.client.check_client_in_broker()
            except RocketqError:
                await self.shutdown()
                raise
        else:
            await self.client.heartbeat_all()
        await self.rebalance()
        self._tasks = [
            asyncio.ensure_future(self._rebalance_loop()),
            asyncio.ensure_future(self._persist_loop()),
        ]
        if self.orderly:
            self._tasks.append(
                asyncio.ensure_future(self.locks.run(self.config.rebalance_lock_interval / 1000))
            )

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        for task in self._tasks:
            task.cancel()
        pulls = list(self._pulls.values())
        for task in pulls:
            task.cancel()
        await asyncio.gather(*self._tasks, *pulls, return_exceptions=True)
        await self._drain_workers(timeout=10)
        if self._orderly_tasks:
            # Let batches being consumed finish (bounded), then stop.
            orderly = list(self._orderly_tasks.values())
            for wake in self._wakes.values():
                wake.set()
            await asyncio.wait(orderly, timeout=10)
            for task in orderly:
                task.cancel()
            await asyncio.gather(*orderly, return_exceptions=True)
        await self.offsets.persist_all(list(self.process_queues))
        if self.orderly:
            await self.locks.unlock(list(self.process_queues))
        for pq in self.process_queues.values():
            pq.dropped = True
        await self.client.unregister(consumer_group=self.group)
        if self.tracer is not None:
            await self.tracer.shutdown()
            self.tracer = None
        await self.client.shutdown()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def metrics_registry(self) -> CollectorRegistry | None:
        """Where the client metrics are recorded; None when ``metrics`` is off."""
        return None if self._metrics is None else self._metrics.registry

    def _heartbeat_data(self) -> RemotingCommand:
        return consumer_heartbeat(
            self.client.client_id,
            self.group,
            consume_type="CONSUME_PASSIVELY",
            message_model=self.model.value,
            consume_from_where=self.consume_from.value,
            subscriptions={t: (s.expression, s.type) for t, s in self.subscriptions.items()},
        )

    async def _on_event(self, event: Notice, addr: str = "") -> None:
        if isinstance(event, GroupChanged) and event.group == self.group:
            self._rebalance_now.set()
        elif isinstance(event, OffsetReset) and event.group == self.group:
            await self._reset(event.topic)

    # -- for admins --------------------------------------------------------------------

    async def _broker_request(self, cmd: RemotingCommand) -> RemotingCommand:
        return await diagnostics.answer(
            cmd,
            group=self.group,
            client_id=self.client.client_id,
            running_info=self.running_info,
            consume_directly=self._consume_directly,
        )

    def running_info(self, jstack: bool = False) -> ConsumerRunningInfo:
        """Settings, subscriptions, every owned queue and, per subscribed topic, the pull
        and consume figures of the last minute, all measured here (``self.stats``)."""
        props = diagnostics.consumer_properties(
            self.config,
            group=self.group,
            message_model=self.model.value,
            consume_from_where=self.consume_from.value,
            consume_type="CONSUME_PASSIVELY",
            namesrv_addrs=self.client.nameserver.addrs,
            client_id=self.client.client_id,
            started_ms=self.started_ms,
        )
        props[PROP_CONSUME_ORDERLY] = "true" if self.orderly else "false"
        props[PROP_THREADPOOL_CORE_SIZE] = str(len(self._workers))
        queues = {
            mq: diagnostics.process_queue_info(mq, pq, self.offsets.read_memory(mq), self.stats)
            for mq, pq in sorted(self.process_queues.items())
        }
        return ConsumerRunningInfo(
            props,
            diagnostics.subscription_set(self.subscriptions),
            queues,
            {topic: self.stats.status(topic) for topic in sorted(self.subscriptions)},
            diagnostics.thread_dump() if jstack else None,
        )

    async def _consume_directly(
        self, request: DirectConsumeRequest
    ) -> ConsumeMessageDirectlyResult:
        """The listener once on a stored message an admin named: no offset moves, nothing
        is sent back, no trace or metrics are written."""
        msgs = finish_messages(
            decode_records(request.record)[:1],
            self.group,
            max_body_bytes=self.config.max_body_bytes,
            check_crc=self.config.check_crc,
        )
        return await diagnostics.consume_directly(self._invoke_listener, msgs, orderly=self.orderly)

    # -- rebalance ---------------------------------------------------------------------

    async def _rebalance_loop(self) -> None:
        while self.running:
            # A subscribed topic missing from the routes (a retry topic the broker has
            # just created) is looked for again within a second.
            interval = self.config.rebalance_interval / 1000
            if self._missing_topics:
                interval = min(interval, 1.0)
            await wait_event(self._rebalance_now, interval)
            self._rebalance_now.clear()
            try:
                await self.rebalance()
            except RocketqError as exc:
                log.warning("rebalance of %s failed: %s", self.group, exc)

    async def rebalance(self) -> None:
        async with self._rebalance_lock:
            self._missing_topics = False
            for topic, selector in list(self.subscriptions.items()):
                try:
                    await self._rebalance_topic(topic, selector)
                except TopicNotExistError:
                    self._missing_topics = True
                    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                        log.warning("topic %s of group %s does not exist yet", topic, self.group)

    async def _rebalance_topic(self, topic: str, selector: MessageSelector) -> None:
        route = await self.client.update_route(topic)
        mqs = subscribe_queues(topic, route)
        if self.broadcasting:
            mine = set(mqs)
        else:
            cids = await self.client.consumer_ids(self.group, route)
            if self.client.client_id not in cids:
                # The broker does not know us (yet): say hello now and look again soon.
                await self.client.heartbeat_all()
                self._missing_topics = True
                if not cids:
                    return
            allocate = STRATEGIES[self.config.allocate_strategy]
            mine = set(allocate(self.group, self.client.client_id, mqs, cids))
        for mq in [m for m in self.process_queues if m.topic == topic and m not in mine]:
            await self._drop(mq)
        for mq in sorted(mine - set(self.process_queues)):
            await self._take(mq, selector)

    async def _take(self, mq: MessageQueue, selector: MessageSelector) -> None:
        pq = ProcessQueue()
        if self.orderly:
            if mq not in await self.locks.lock(mq.broker_name, [mq]):
                # Another client still holds it (until it lets go or its lock expires).
                self._missing_topics = True
                log.info("group %s: %s is locked by another consumer; trying again", self.group, mq)
                return
            pq.locked, pq.last_lock_time = True, time.monotonic()
        try:
            offset = await self._start_offset(mq)
        except RocketqError as exc:
            log.warning("cannot start %s: %s", mq, exc)
            if self.orderly:
                await self.locks.unlock([mq])
            return
        self.offsets.update(mq, offset, increase_only=False)
        self.process_queues[mq] = pq
        self._pulls[mq] = asyncio.ensure_future(self._pull_loop(mq, pq, selector, offset))
        if self.orderly:
            if self._metrics is not None:
                self._arrivals[mq] = collections.deque()
            wake = self._wakes[mq] = asyncio.Event()
            self._orderly_tasks[mq] = asyncio.ensure_future(self._orderly_loop(mq, pq, wake))
        log.info("group %s now consumes %s from offset %d", self.group, mq, offset)

    async def _drop(self, mq: MessageQueue) -> None:
        pq = self.process_queues.pop(mq, None)
        if pq is not None:
            pq.dropped = True
        task = self._pulls.pop(mq, None)
        if task is not None:
            task.cancel()
        consuming = self._orderly_tasks.pop(mq, None)
        wake = self._wakes.pop(mq, None)
        self._arrivals.pop(mq, None)
        if consuming is not None:
            # The batch being consumed finishes (up to 1 s) before the lock goes.
            if wake is not None:
                wake.set()
            await asyncio.wait((consuming,), timeout=1.0)
            consuming.cancel()
        with contextlib.suppress(RocketqError):
            await self.offsets.persist(mq)
        self.offsets.remove(mq)
        self.stats.forget(mq)
        if self.orderly:
            await self.locks.unlock([mq])
        log.info("group %s gave up %s", self.group, mq)

    async def _reset(self, topic: str) -> None:
        async with self._rebalance_lock:
            for mq in [m for m in self.process_queues if m.topic == topic]:
                pq = self.process_queues.pop(mq)
                pq.dropped = True
                for task in (self._pulls.pop(mq, None), self._orderly_tasks.pop(mq, None)):
                    if task is not None:
                        task.cancel()
                self._wakes.pop(mq, None)
                self._arrivals.pop(mq, None)
                self.offsets.remove(mq)
                await self._take(mq, self.subscriptions[topic])

    async def _start_offset(self, mq: MessageQueue) -> int:
        offset = await self.offsets.read_store(mq)
        if offset >= 0:
            return offset
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 0
        addr = self.client.read_addr(mq.broker_name)
        if addr is None:
            raise TopicNotExistError(f"broker {mq.broker_name} is not in the route")
        if self.consume_from is ConsumeFrom.FIRST_OFFSET:
            req = min_offset_request(mq.topic, mq.queue_id)
        elif self.consume_from is ConsumeFrom.TIMESTAMP:
            stamp = self.config.consume_timestamp or int((time.time() - 1800) * 1000)
            req = search_offset_request(mq.topic, mq.queue_id, stamp)
        else:
            req = max_offset_request(mq.topic, mq.queue_id)
        return await self.client.broker(addr).offset(req, self.client.timeout)

    # -- pulling -----------------------------------------------------------------------

    async def _pull_loop(
        self, mq: MessageQueue, pq: ProcessQueue, selector: MessageSelector, offset: int
    ) -> None:
        cfg = self.config
        size_limit = cfg.pull_threshold_size_for_queue * 1024 * 1024
        tags = (
            None
            if selector.is_sql or selector.expression.strip() in ("", "*")
            else {t.strip() for t in selector.expression.split("||")}
        )
        while self.running and not pq.dropped:
            if (
                pq.msg_count > cfg.pull_threshold_for_queue
                or pq.msg_size > size_limit
                or (not self.orderly and pq.max_span > cfg.consume_concurrently_max_span)
            ):
                await asyncio.sleep(PULL_DELAY_WHEN_FLOW_CONTROL)
                continue
            if self.orderly and not pq.locked:
                await asyncio.sleep(PULL_DELAY_WHEN_NOT_LOCKED)
                continue
            pull_started = time.monotonic()
            self.stats.pulling(mq)
            try:
                resp = await self._pull_once(mq, selector, offset)
            except RocketqError as exc:
                log.info(
                    "pull of %s failed: %s; retrying in %.0f s", mq, exc, PULL_DELAY_WHEN_EXCEPTION
                )
                with contextlib.suppress(RocketqError):
                    await self.client.update_route(mq.topic)
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            if pq.dropped:
                return
            status = resp.outcome
            if status is PullOutcome.FOUND:
                records, broken = decode_pulled(resp.records)
                msgs, bad = finish_pulled(
                    records,
                    self.group,
                    max_body_bytes=cfg.max_body_bytes,
                    check_crc=cfg.check_crc,
                )
                requested, offset = offset, resp.next_begin_offset
                if broken is not None:
                    offset, skipped = after_broken(mq, records, requested, broken)
                    if skipped is not None:
                        bad.append(skipped)
                if (
                    tags is not None
                    and mq.topic in self.subscriptions
                    and not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                ):
                    msgs = [m for m in msgs if m.tags in tags]
                    bad = [e for e in bad if e.message is None or e.message.tags in tags]
                if bad:
                    await self._reject(mq, pq, bad)
                    if pq.dropped:
                        return
                self.stats.pulled(mq, (time.monotonic() - pull_started) * 1000, len(msgs))
                if msgs:
                    arrived = 0.0
                    if self._metrics is not None:
                        arrived = self._arrived(mq, msgs)
                    pq.put(msgs)
                    if self.orderly:
                        self._wakes[mq].set()
                    else:
                        self._dispatch(mq, pq, msgs, arrived)
                elif pq.msg_count == 0:
                    self.offsets.update(mq, offset)
            elif status in (PullOutcome.NO_NEW_MSG, PullOutcome.NO_MATCHED_MSG):
                offset = resp.next_begin_offset
                if pq.msg_count == 0:
                    self.offsets.update(mq, offset)
            else:
                log.warning(
                    "offset %d of %s is illegal; moving to %d", offset, mq, resp.next_begin_offset
                )
                offset = resp.next_begin_offset
                self.offsets.update(mq, offset, increase_only=False)
                with contextlib.suppress(RocketqError):
                    await self.offsets.persist(mq)
            if cfg.pull_interval:
                await asyncio.sleep(cfg.pull_interval / 1000)

    async def _reject(self, mq: MessageQueue, pq: ProcessQueue, bad: list[BadMessageError]) -> None:
        """Report bad messages and move each, as stored, to %DLQ%<group> (broadcasting:
        drop it; a record that does not decode has nothing to move); the queue's committed
        offset passes them either way."""
        for exc in bad:
            self.bad_messages[exc.reason] += 1
            if self._metrics is not None:
                self._metrics.observe_bad_message(
                    exc.topic, self.group, self.client.client_id, exc.reason
                )
            log.error("group %s: %s", self.group, exc)
            if exc.message is not None and not self.broadcasting:
                await self._bad_to_dlq(mq, pq, exc.message, exc)
            pq.pass_over(exc.queue_offset)

    async def _bad_to_dlq(
        self, mq: MessageQueue, pq: ProcessQueue, m: MessageExt, exc: BadMessageError
    ) -> None:
        req = send_back_request(
            self.group,
            m.commit_log_offset,
            delay_level=-1,  # straight to %DLQ%<group>, as stored
            origin_msg_id=m.msg_id,
            origin_topic=m.properties.get(PROPERTY_RETRY_TOPIC, m.topic),
            max_reconsume_times=self._max_reconsume_times(),
        )
        for attempt in range(1, BAD_MESSAGE_DLQ_ATTEMPTS + 1):
            addr = self.client.master_addr(mq.broker_name)
            try:
                if addr is None:
                    await self.client.update_route(mq.topic)
                    raise TopicNotExistError(f"broker {mq.broker_name} has no master now")
                await self.client.broker(addr).request(req, self.client.timeout)
            except RocketqError as err:
                log.warning(
                    "moving bad message %s to %s failed (attempt %d of %d): %s",
                    exc.msg_id,
                    dlq_topic(self.group),
                    attempt,
                    BAD_MESSAGE_DLQ_ATTEMPTS,
                    err,
                )
                if attempt < BAD_MESSAGE_DLQ_ATTEMPTS and self.running and not pq.dropped:
                    await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                    continue
                log.error(
                    "skipped bad message %s at offset %d of %s without a DLQ copy; its "
                    "record stays at CommitLog offset %d",
                    exc.msg_id,
                    exc.queue_offset,
                    mq,
                    m.commit_log_offset,
                )
                return
            log.warning(
                "bad message %s at offset %d of %s moved to %s as stored",
                exc.msg_id,
                exc.queue_offset,
                mq,
                dlq_topic(self.group),
            )
            return

    async def _pull_once(
        self, mq: MessageQueue, selector: MessageSelector, offset: int
    ) -> PullReply:
        # The broker of the group the last answer suggested (a slave when the master says
        # this reader is far behind), else the master, else a slave.
        preferred = self._pull_from.get(mq, MASTER_ID)
        addr = self.client.read_addr(mq.broker_name, preferred)
        if addr is None:
            await self.client.update_route(mq.topic)
            addr = self.client.read_addr(mq.broker_name, preferred)
        if addr is None:
            raise TopicNotExistError(f"broker {mq.broker_name} has left the route of {mq.topic}")
        commit = -1 if self.broadcasting else self.offsets.read_memory(mq)
        req = pull_request(
            group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            offset=offset,
            max_msg_nums=self.config.pull_batch_size,
            commit_offset=commit if commit > 0 else None,
            suspend_timeout_ms=self.config.broker_suspend_max_time_millis,
            subscription=selector.expression,
            expression_type=selector.type,
        )
        timeout = self.config.broker_suspend_max_time_millis / 1000 + 15
        resp = await self.client.broker(addr).pull(req, timeout)
        self._pull_from[mq] = resp.suggest_which_broker_id
        return resp

    # -- consuming ---------------------------------------------------------------------

    def _arrived(self, mq: MessageQueue, msgs: list[MessageExt]) -> float:
        """Metrics: a pull's messages reached the consumer; -> when (time.monotonic())."""
        assert self._metrics is not None
        self._metrics.observe_delivery(self.group, self.client.client_id, msgs)
        arrived = time.monotonic()
        arrivals = self._arrivals.get(mq)
        if arrivals is not None:
            arrivals.append((msgs[-1].queue_offset, arrived))
        return arrived

    def _arrival(self, mq: MessageQueue, offset: int) -> float:
        """Orderly with metrics: when the pull of the message at ``offset`` arrived."""
        arrivals = self._arrivals.get(mq)
        while arrivals and arrivals[0][0] < offset:
            arrivals.popleft()
        return arrivals[0][1] if arrivals else 0.0

    def _dispatch(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], arrived: float
    ) -> None:
        size = max(1, self.config.consume_message_batch_max_size)
        if size == 1:
            self._requests.extend([(mq, pq, [m], arrived) for m in msgs])
        else:
            self._requests.extend(
                [(mq, pq, msgs[i : i + size], arrived) for i in range(0, len(msgs), size)]
            )
        self._wake_workers(len(msgs))

    def _submit(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        batch: list[MessageExt],
        delay: float,
        arrived: float,
    ) -> None:
        if delay:
            asyncio.get_running_loop().call_later(delay, self._submit, mq, pq, batch, 0.0, arrived)
        else:
            self._requests.append((mq, pq, batch, arrived))
            self._wake_workers(1)

    def _wake_workers(self, n: int) -> None:
        idle = self._idle
        while n and idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    async def _worker(self) -> None:
        requests = self._requests
        loop = asyncio.get_running_loop()
        while True:
            if not requests:
                waiter = loop.create_future()
                self._idle.append(waiter)
                await waiter
                continue
            mq, pq, batch, arrived = requests.popleft()
            if pq.dropped:
                continue
            self._busy += 1
            try:
                await self._consume(mq, pq, batch, arrived)
            except Exception:
                log.exception("consuming %s of %s failed", batch[0].msg_id, mq)
            finally:
                self._busy -= 1

    async def _drain_workers(self, timeout: float) -> None:
        """Let the handlers running now finish (bounded), then stop the pool."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self._busy and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    async def _consume(
        self, mq: MessageQueue, pq: ProcessQueue, batch: list[MessageExt], arrived: float
    ) -> None:
        started = time.monotonic()
        result = await self._call_handler(batch, arrived)
        ok = result is ConsumeResult.SUCCESS
        self.stats.consumed(mq, (time.monotonic() - started) * 1000, len(batch), ok)
        if pq.dropped:
            return
        if ok:
            self.offsets.update(mq, pq.remove(batch))
            return
        failed: list[MessageExt] = []
        if self.broadcasting:
            log.warning(
                "broadcast message %s not consumed; dropped (no retry in broadcasting)",
                batch[0].msg_id,
            )
        else:
            failed = await self._send_back(mq, batch)
        done = [m for m in batch if m not in failed]
        if done:
            offset = pq.remove(done)
            if not pq.dropped:
                self.offsets.update(mq, offset)
        if failed and self.running:
            for m in failed:
                m.reconsume_times += 1
            self._submit(mq, pq, failed, SEND_BACK_RETRY_DELAY, arrived)

    async def _call_handler(self, batch: list[MessageExt], arrived: float) -> ConsumeResult:
        """The listener on ``batch`` (whose pull arrived at ``arrived``), traced and timed
        when tracing and metrics are on."""
        tracer, metrics = self.tracer, self._metrics
        if tracer is None and metrics is None:
            return await self._run_handler(batch)
        cid = self.client.client_id
        if tracer is not None:
            for m in batch:
                tracer.record(consume_event("SubBefore", self.group, cid, m))
        started = time.monotonic()
        if metrics is not None and arrived:
            metrics.observe_await(self.group, cid, batch, (started - arrived) * 1000)
        result = await self._run_handler(batch)
        elapsed = time.monotonic() - started
        ok = result is ConsumeResult.SUCCESS
        if metrics is not None:
            metrics.observe_process(batch[0].topic, self.group, cid, ok, elapsed * 1000)
        if tracer is not None:
            cost = int(elapsed * 1000)
            for m in batch:
                tracer.record(consume_event("SubAfter", self.group, cid, m, cost, ok))
        return result

    async def _invoke_listener(self, batch: list[MessageExt]) -> object:
        """The listener's own result on ``batch`` (or its exception)."""
        assert self.handler is not None
        if self._async_handler:
            return await self.handler(batch)  # type: ignore[misc]
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._pool, self.handler, batch)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _run_handler(self, batch: list[MessageExt]) -> ConsumeResult:
        try:
            result = await self._invoke_listener(batch)
        except Exception:
            log.exception(
                "handler of group %s failed on %s; it will be retried", self.group, batch[0].msg_id
            )
            return ConsumeResult.RECONSUME_LATER
        if not isinstance(result, ConsumeResult):
            log.warning(
                "handler of group %s returned %r, not a ConsumeResult; retrying the message",
                self.group,
                result,
            )
            return ConsumeResult.RECONSUME_LATER
        return result

    async def _send_back(self, mq: MessageQueue, batch: list[MessageExt]) -> list[MessageExt]:
        """Give failed messages back to the broker; -> those it could not take."""
        failed = []
        addr = self.client.master_addr(mq.broker_name)
        for m in batch:
            if addr is None:
                failed.append(m)
                continue
            req = send_back_request(
                self.group,
                m.commit_log_offset,
                delay_level=0,
                origin_msg_id=m.msg_id,
                origin_topic=m.topic,
                max_reconsume_times=self.config.max_reconsume_times,
            )
            try:
                await self.client.broker(addr).request(req, self.client.timeout)
            except RocketqError as exc:
                log.warning(
                    "sending %s back failed (%s); retrying it here in %.0f s",
                    m.msg_id,
                    exc,
                    SEND_BACK_RETRY_DELAY,
                )
                failed.append(m)
        return failed

    # -- orderly -----------------------------------------------------------------------

    async def _orderly_loop(self, mq: MessageQueue, pq: ProcessQueue, wake: asyncio.Event) -> None:
        """Consume one queue strictly in order, one batch at a time."""
        cfg = self.config
        size = max(1, cfg.consume_message_batch_max_size)
        while self.running and not pq.dropped:
            if pq.lock_expired(time.monotonic(), cfg.rebalance_lock_max_live_time / 1000):
                wake.clear()
                await wait_event(wake, 0.1)  # until the lock is renewed
                continue
            batch = pq.take(size)
            if not batch:
                wake.clear()
                await wake.wait()
                continue
            arrived = 0.0 if self._metrics is None else self._arrival(mq, batch[0].queue_offset)
            started = time.monotonic()
            result = await self._call_handler(batch, arrived)
            ok = result is ConsumeResult.SUCCESS
            self.stats.consumed(mq, (time.monotonic() - started) * 1000, len(batch), ok)
            if pq.dropped:
                return  # not committed: the queue's next owner consumes the batch again
            if ok:
                self.offsets.update(mq, pq.commit())
                continue
            if await self._dead_letters(mq, batch):
                self.offsets.update(mq, pq.commit())
                continue
            for m in batch:
                m.reconsume_times += 1
            pq.rollback()
            await asyncio.sleep(cfg.suspend_current_queue_time_millis / 1000)

    def _max_reconsume_times(self) -> int:
        n = self.config.max_reconsume_times
        return n if n >= 0 else 16

    async def _dead_letters(self, mq: MessageQueue, batch: list[MessageExt]) -> bool:
        """Orderly: send the batch's messages that used up their retries to the DLQ; True
        if none is left to retry."""
        return await move_to_dlq(self.client, self.group, mq, batch, self._max_reconsume_times())

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue; a queue whose lock is lost stops."""
        await self.locks.renew_all()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.persist_consumer_offset_interval / 1000)
            await self.offsets.persist_all(list(self.process_queues))
