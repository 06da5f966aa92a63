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
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from rocketq.common.exceptions import ClientStateError, RocketqError, TopicNotExistError
from rocketq.common.message import TRACE_PRODUCER_GROUP, MessageExt, MessageQueue, retry_topic
from rocketq.common.names import check_group_name, check_topic_name
from rocketq.common.record import decode_records
from rocketq.common.sql92 import validate
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk import consumer_diagnostics as diagnostics
from rocketq.sdk.client import ClientInstance, consumer_heartbeat
from rocketq.sdk.client_wire import DirectConsumeRequest, GroupChanged, Notice, OffsetReset
from rocketq.sdk.consume_concurrently import SEND_BACK_RETRY_DELAY, ConcurrentConsumeService
from rocketq.sdk.consume_orderly import OrderlyConsumeService
from rocketq.sdk.consume_service import ConsumeService
from rocketq.sdk.consumer_config import ConsumerConfig
from rocketq.sdk.consumer_stats import ConsumerStats
from rocketq.sdk.consumer_types import ConsumeFrom, MessageModel, MessageSelector
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
from rocketq.sdk.push_context import Handler
from rocketq.sdk.rebalance import STRATEGIES
from rocketq.sdk.rebalance_service import RebalanceService
from rocketq.sdk.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketq.sdk.security import client_security, security_settings
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


class PushConsumer:
    """A consumer the brokers' messages are pushed to (RocketMQ's DefaultMQPushConsumer):
    it owns its share of the subscribed topics' queues, pulls them, and hands the messages
    to a handler or to ``async for`` loops, committing offsets as they are consumed.

    With a handler::

        consumer = PushConsumer("cg", "127.0.0.1:9876")
        consumer.subscribe("Orders", "TagA || TagB")

        @consumer.on_message
        async def handle(msgs: list[MessageExt]) -> ConsumeResult:
            ...
            return ConsumeResult.SUCCESS

        async with consumer:
            await stop.wait()

    Without one, iterate it (ack semantics in :mod:`rocketq.sdk.message_stream`)::

        async with consumer:
            async for msg in consumer:  # msg is consumed when the loop asks for the next
                ...

    Args:
        group: The consumer group.
        namesrv: Nameserver address(es), ``host:port`` separated by ``;``; when None, the
            ``NAMESRV_ADDR`` environment variable.
        model: CLUSTERING (the group shares the queues, offsets on the brokers, retries
            through ``%RETRY%<group>``) or BROADCASTING (every consumer reads everything,
            offsets in a local file, no retries).
        consume_from: Where a queue without a committed offset starts.
        orderly: Consume each queue strictly in order, one batch at a time, holding the
            queue's lock on the broker (CLUSTERING only).
        config: All settings at once; or give them as keyword ``settings``, not both.
        metrics: True, or a prometheus_client CollectorRegistry, records
            ``rocketmq_delivery_latency``, ``rocketmq_await_time`` and
            ``rocketmq_process_time`` (see :mod:`rocketq.sdk.metrics`) into a registry of
            the consumer's own or into that one.
        **settings: :class:`ConsumerConfig` fields.

    Raises:
        TypeError: ``config`` and ``settings`` together, or an unknown setting.
        ConfigError: No nameserver address, a setting out of range, half a key pair, an
            unreadable credentials file, or a TLS file that is missing or does not load.
        ClientStateError: An orderly broadcasting consumer, or an unknown strategy.

    Attributes:
        group: The consumer group.
        namesrv: The nameserver address(es) used.
        model: The message model.
        consume_from: Where a queue without a committed offset starts.
        orderly: Whether queues are consumed in order.
        config: The settings.
        client: The connection to the cluster (routes, brokers, heartbeats).
        subscriptions: Topic -> selector; the retry topic joins at start (CLUSTERING).
        handler: The listener; None until set (or when iterated).
        stats: Pull and consume times and rates, for the running info.
        bad_messages: Bad messages met (:mod:`rocketq.sdk.message_body`), by reason.
        started_ms: When the consumer started, in epoch milliseconds (0: not yet).
        process_queues: The owned queues and their pulled, unconsumed messages.
        offsets: The offset store (on the brokers, or a local file when broadcasting).
        running: Whether it is started.
        tracer: Where trace events go when ``enable_trace`` is on.
        locks: The queue locks of an orderly consumer.
        pull_service: The per-queue pull loops.
        rebalance_service: Which queues this consumer owns.
        consume_service: The concurrent or the orderly consume service.
    """

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
            security=client_security(self.config, "PushConsumer"),
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
        """Consume ``topic``'s messages that ``expression`` selects: tags (``"TagA ||
        TagB"``, ``"*"`` for all) or a :class:`MessageSelector` (SQL92 with
        ``MessageSelector.sql``).

        Raises:
            MessageIllegalError: ``topic`` is not a valid topic name.
            SubscriptionParseFailedError: A SQL92 expression that does not parse.
        """
        check_topic_name(topic)
        selector = (
            expression
            if isinstance(expression, MessageSelector)
            else (MessageSelector.tags(expression))
        )
        if selector.is_sql:
            validate(selector.expression)
        self.subscriptions[topic] = selector

    def on_message(self, handler: Handler) -> Handler:
        """Set the handler (usable as a decorator): it gets a batch of messages
        (``consume_message_batch_max_size``, 1 by default) and returns a ConsumeResult.

        An ``async def`` handler runs on the event loop, a plain function on the consumer's
        thread pool. SUCCESS consumes the batch; RECONSUME_LATER, or an exception, sends
        it back for retry (orderly: consumes it again after ``suspend_current_queue_time``).
        Returning anything else, None included, is an error of the handler: the batch
        goes back for retry as if it had raised, and the error is logged once per handler.
        """
        self.handler = handler
        self._async_handler = inspect.iscoroutinefunction(handler)
        return handler

    @property
    def broadcasting(self) -> bool:
        """Whether every consumer of the group reads every queue."""
        return self.model is MessageModel.BROADCASTING

    async def start(self) -> None:
        """Connect, register with the brokers, take this consumer's queues and start
        consuming. Without a handler, the messages go to ``async for`` loops.

        Raises:
            ClientStateError: Nothing subscribed.
            MessageIllegalError: The group name is not valid.
            RocketqError: A broker refused a SQL92 subscription (its filter is off).
        """
        if self.running:
            return
        check_group_name(self.group)
        stream = self._stream
        if self.handler is None or (stream is not None and self.handler == stream.listener):
            # No handler of the user's: the messages go to ``async for`` loops.
            self._stream = MessageStream()
            self.on_message(self._stream.listener)
        else:
            self._stream = None
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
            writer = Producer(TRACE_PRODUCER_GROUP, self.namesrv, **security_settings(self.config))
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
        """Stop pulling, let the batches being consumed finish (up to 10 s), commit the
        offsets, release orderly locks and unregister from the brokers."""
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
        """Start the consumer."""
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        """Shut the consumer down; with an exception, the message an ``async for`` loop
        had goes back for retry."""
        await self._stop(failed=exc_type is not None)

    # -- async for ---------------------------------------------------------------------

    def messages(self) -> MessageIterator:
        """An ``async for`` loop's iterator over the messages (the same as iterating the
        consumer); see :mod:`rocketq.sdk.message_stream` for when a message counts as
        consumed.

        Raises:
            ClientStateError: The consumer is not started, or has a handler.
        """
        return MessageIterator(self._require_stream())

    def __aiter__(self) -> MessageIterator:
        """``async for msg in consumer``: see :meth:`messages`."""
        return self.messages()

    def ack(self, msg: MessageExt) -> None:
        """Count ``msg``, a message a loop got, as consumed now (before a ``break``, say).

        Raises:
            ClientStateError: ``msg`` is not in flight (settled already, or not from here).
        """
        self._require_stream().settle(msg, consumed=True)

    def reconsume_later(self, msg: MessageExt) -> None:
        """Send ``msg``, a message a loop got, back for retry, as a handler's
        RECONSUME_LATER would; the loop goes on with the next message.

        Raises:
            ClientStateError: ``msg`` is not in flight (settled already, or not from here).
        """
        self._require_stream().settle(msg, consumed=False)

    def _require_stream(self) -> MessageStream:
        stream = self._stream
        if self.handler is not None and (stream is None or self.handler != stream.listener):
            raise ClientStateError(
                "this consumer has a handler (on_message): its messages go there, not to async for"
            )
        if stream is None or not self.running:
            raise ClientStateError(
                "iterate a started consumer (async with consumer: async for msg in consumer)"
            )
        return stream

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
