"""The push consumer: rebalance, one pull loop per owned queue, a bounded pool of consume
tasks, retries through the broker's retry topic, offsets committed every 5 s.

Clustering: the group's consumers split the queues (averaging by default) and commit
offsets to the brokers; a message the handler does not finish (RECONSUME_LATER or an
exception) goes back to ``%RETRY%<group>`` and returns later with ``reconsume_times`` + 1.
Broadcasting: every consumer reads every queue, with offsets in a local file, no retries.

The consumer wires its services together: :mod:`rocketq.sdk.rebalance_service` (which
queues it owns), :mod:`rocketq.sdk.pull_service` (a pull loop per owned queue),
:mod:`rocketq.sdk.consume_concurrently` or :mod:`rocketq.sdk.consume_orderly` (the
listener on what was pulled).

For admins, through the broker (``sdk/consumer_diagnostics.py``): its running info
(settings, subscriptions, owned queues, measured figures) and its listener run once on a
stored message.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from rocketq.common.exceptions import ClientStateError, RocketqError, TopicNotExistError
from rocketq.common.message import TRACE_PRODUCER_GROUP, MessageExt, MessageQueue, retry_topic
from rocketq.common.record import decode_records
from rocketq.common.sql92 import validate
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk import consumer_diagnostics as diagnostics
from rocketq.sdk.client import ClientInstance, consumer_heartbeat
from rocketq.sdk.client_wire import DirectConsumeRequest, GroupChanged, Notice, OffsetReset
from rocketq.sdk.consume_concurrently import SEND_BACK_RETRY_DELAY, ConcurrentConsumeService
from rocketq.sdk.consume_orderly import OrderlyConsumeService
from rocketq.sdk.consume_service import ConsumeService, Handler
from rocketq.sdk.consumer_stats import ConsumerStats
from rocketq.sdk.consumer_types import ConsumeFrom, MessageModel, MessageSelector
from rocketq.sdk.message_body import MAX_BODY_INFLATE_RATIO, MAX_MESSAGE_SIZE, check_limits
from rocketq.sdk.message_stream import MessageIterator, MessageStream
from rocketq.sdk.metrics import MetricsOption, client_metrics
from rocketq.sdk.offset_store import LocalFileOffsetStore, RemoteOffsetStore
from rocketq.sdk.orderly_locks import QueueLocks
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.producer import Producer
from rocketq.sdk.pull_service import BAD_MESSAGE_DLQ_ATTEMPTS, PullService
from rocketq.sdk.pulling import (
    PULL_DELAY_WHEN_EXCEPTION,
    after_broken,
    finish_messages,
    finish_pulled,
)
from rocketq.sdk.rebalance import STRATEGIES
from rocketq.sdk.rebalance_service import RebalanceService
from rocketq.sdk.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketq.sdk.settings import make_config, resolve_namesrv
from rocketq.sdk.trace import TraceDispatcher

__all__ = [
    "BAD_MESSAGE_DLQ_ATTEMPTS",
    "PULL_DELAY_WHEN_EXCEPTION",
    "SEND_BACK_RETRY_DELAY",
    "ConsumerConfig",
    "Handler",
    "PushConsumer",
    "after_broken",
    "finish_messages",
    "finish_pulled",
]


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A push consumer's settings: RocketMQ's DefaultMQPushConsumer ones, snake_case, with
    its defaults; every duration is in seconds (a float).

    Attributes:
        allocate_strategy: How the group splits the queues: one of
            :data:`rocketq.sdk.rebalance.STRATEGIES` ("AVG", "AVG_BY_CIRCLE", ...).
        consume_thread_min: RocketMQ's minimum consume pool size (reported; the pool
            runs ``consume_thread_max`` tasks).
        consume_thread_max: Batches consumed at once (concurrent groups), and threads for
            a handler that is a plain function.
        consume_message_batch_max_size: Messages per handler call.
        pull_batch_size: Messages per pull.
        pull_threshold_for_queue: Pulling a queue pauses while it holds more messages
            than this, pulled and not consumed.
        pull_threshold_size_for_queue: ... or more than this many MiB of bodies.
        consume_concurrently_max_span: ... or (concurrent groups) when its first and last
            unconsumed offsets are further apart than this.
        max_reconsume_times: Retries before a message goes to ``%DLQ%<group>``; -1 uses
            the group's setting on the broker (16).
        pull_interval: Seconds a queue's pull loop waits between pulls (0: none).
        persist_consumer_offset_interval: Seconds between offset commits.
        rebalance_interval: Seconds between rebalances (a group change rebalances at once).
        heartbeat_broker_interval: Seconds between heartbeats to every broker.
        poll_name_server_interval: Seconds between route refreshes.
        broker_suspend_max_time: Seconds a broker may hold a pull waiting for messages
            (long polling); sent as milliseconds.
        consume_timestamp_ms: Where ``ConsumeFrom.TIMESTAMP`` starts a queue without a
            committed offset, in epoch milliseconds; 0 means 30 minutes before start.
        suspend_current_queue_time: Orderly: seconds before a batch the handler did not
            finish is consumed again.
        rebalance_lock_interval: Orderly: seconds between renewals of the queue locks
            (RocketMQ's ``rocketmq.client.rebalance.lockInterval``).
        rebalance_lock_max_live_time: Orderly: a lock not renewed for this many seconds
            is no longer trusted (``lockMaxLiveTime``).
        enable_trace: Write SubBefore/SubAfter trace events per message to
            ``trace_topic`` (see :mod:`rocketq.sdk.trace`).
        trace_topic: The topic trace events go to.
        offset_store_dir: Where broadcasting consumers keep their offsets.
        max_message_size: With ``max_body_inflate_ratio``, the cap of an inflated
            compressed body: ``max_message_size * max_body_inflate_ratio`` bytes (RocketMQ's
            producers compress only bodies of at most maxMessageSize, 4 MiB).
        max_body_inflate_ratio: See ``max_message_size``.
        check_crc: Check each body's CRC. A message failing it, or the inflation cap, goes
            to ``%DLQ%<group>`` as stored (see :mod:`rocketq.sdk.message_body`).
    """

    allocate_strategy: str = "AVG"
    consume_thread_min: int = 10
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int = -1
    pull_interval: float = 0.0
    persist_consumer_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    heartbeat_broker_interval: float = 30.0
    poll_name_server_interval: float = 30.0
    broker_suspend_max_time: float = 15.0
    consume_timestamp_ms: int = 0
    suspend_current_queue_time: float = 1.0
    rebalance_lock_interval: float = 20.0
    rebalance_lock_max_live_time: float = 30.0
    enable_trace: bool = False
    trace_topic: str = "RMQ_SYS_TRACE_TOPIC"
    offset_store_dir: str = str(Path.home() / ".rocketq_offsets")
    max_message_size: int = MAX_MESSAGE_SIZE
    max_body_inflate_ratio: int = MAX_BODY_INFLATE_RATIO
    check_crc: bool = True

    def __post_init__(self) -> None:
        check_limits(self.max_message_size, self.max_body_inflate_ratio)

    @property
    def max_body_bytes(self) -> int:
        """The most a compressed body may inflate to."""
        return self.max_message_size * self.max_body_inflate_ratio


class PushConsumer:
    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
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
        self.config = make_config(ConsumerConfig, config, settings, "PushConsumer")
        self.group = group
        self.namesrv = resolve_namesrv(namesrv, "PushConsumer")
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
        if self.config.allocate_strategy not in STRATEGIES:
            raise ClientStateError(
                f"allocate_strategy {self.config.allocate_strategy!r} is unknown; use one of "
                + ", ".join(sorted(STRATEGIES))
            )
        self.client = ClientInstance(
            self.namesrv,
            poll_name_server_interval=self.config.poll_name_server_interval,
            heartbeat_interval=self.config.heartbeat_broker_interval,
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
        # Set when the consumer runs without a handler, for ``async for`` loops.
        self._stream: MessageStream | None = None
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.pull_service = PullService(self)
        self.rebalance_service = RebalanceService(self)
        self.consume_service: ConsumeService
        if orderly:
            orderly_service = OrderlyConsumeService(self)
            wakes = orderly_service.wakes
            self.consume_service = orderly_service
        else:
            wakes = {}
            self.consume_service = ConcurrentConsumeService(self)
        self.locks = QueueLocks(self.client, self.group, self.process_queues, wakes)
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
        if self.running:
            return
        if self.handler is None or self._stream is not None:
            self._stream = MessageStream()
            self.on_message(self._stream.listener)
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
        self.consume_service.start()
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
            asyncio.ensure_future(self.rebalance_service.run()),
            asyncio.ensure_future(self._persist_loop()),
        ]
        if self.orderly:
            self._tasks.append(
                asyncio.ensure_future(self.locks.run(self.config.rebalance_lock_interval))
            )

    async def shutdown(self) -> None:
        await self._stop(failed=False)

    async def _stop(self, *, failed: bool) -> None:
        if not self.running:
            return
        self.running = False
        if self._stream is not None:
            self._stream.close(failed=failed)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.pull_service.shutdown()
        await self.consume_service.shutdown()
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

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        await self._stop(failed=exc_type is not None)

    # -- async for ---------------------------------------------------------------------

    def messages(self) -> MessageIterator:
        return MessageIterator(self._require_stream())

    def __aiter__(self) -> MessageIterator:
        return self.messages()

    def ack(self, msg: MessageExt) -> None:
        self._require_stream().settle(msg, consumed=True)

    def reconsume_later(self, msg: MessageExt) -> None:
        self._require_stream().settle(msg, consumed=False)

    def _require_stream(self) -> MessageStream:
        if self._stream is None or not self.running:
            raise ClientStateError(
                "iterate a started consumer (async with consumer: async for msg in consumer)"
            )
        if self.handler != self._stream.listener:
            raise ClientStateError(
                "this consumer has a handler (on_message): its messages go there, not to "
                "async for"
            )
        return self._stream

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
            self.rebalance_service.now.set()
        elif isinstance(event, OffsetReset) and event.group == self.group:
            await self.rebalance_service.reset(event.topic)

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
        pool = self.config.consume_thread_max if self.running else 0
        props[PROP_THREADPOOL_CORE_SIZE] = str(pool)
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
        return await diagnostics.consume_directly(
            self.consume_service.invoke_listener, msgs, orderly=self.orderly
        )

    # -- ownership and offsets ---------------------------------------------------------

    async def rebalance(self) -> None:
        """Take this consumer's share of the subscribed topics' queues now."""
        await self.rebalance_service.rebalance()

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue; a queue whose lock is lost stops."""
        await self.locks.renew_all()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.persist_consumer_offset_interval)
            await self.offsets.persist_all(list(self.process_queues))
