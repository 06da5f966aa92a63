"""What the push consumer's two consume services share (RocketMQ's ConsumeMessageService):
running the listener on a batch, traced and timed when tracing and metrics are on, and what
its answer means.

The concurrent service is :mod:`rocketq.sdk.consume_concurrently`, the orderly one
:mod:`rocketq.sdk.consume_orderly`.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
import time

from rocketq.common.message import MessageExt, MessageQueue
from rocketq.sdk.consumer_types import ConsumeResult
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.push_context import PushContext
from rocketq.sdk.trace import consume_event

log = logging.getLogger(__name__)

# The group's retry limit on the broker when the consumer sets none (max_reconsume_times -1).
DEFAULT_MAX_RECONSUME_TIMES = 16


class ConsumeService(abc.ABC):
    """Runs the consumer's listener on the batches the pull service hands over.

    Args:
        consumer: The push consumer this service consumes for (its config, client,
            offsets, statistics, tracer and metrics).
    """

    def __init__(self, consumer: PushContext) -> None:
        self.consumer = consumer
        # The handlers already reported for answering something that is not a
        # ConsumeResult (once each: the log says how to fix it).
        self._reported: set[int] = set()

    def start(self) -> None:
        """Start consuming (the consumer has just started); nothing to start by default."""
        return

    @abc.abstractmethod
    async def shutdown(self, timeout: float = 10.0) -> None:
        """Let the batches being consumed now finish within ``timeout`` seconds, then
        stop."""

    @abc.abstractmethod
    def on_pulled(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], arrived: float
    ) -> None:
        """A pull of ``mq`` brought ``msgs`` (already put in ``pq``) at ``arrived``
        (time.monotonic(); 0.0 when metrics are off): each service hands them to the
        listener its own way (batches at once, or one queue's messages in order)."""

    def start_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """The consumer now owns ``mq``; nothing to do by default (the orderly service
        starts the queue's consume loop)."""
        return

    async def stop_queue(self, mq: MessageQueue, wait: float = 1.0) -> None:
        """The consumer no longer owns ``mq`` (its process queue is already dropped); the
        batch being consumed may finish within ``wait`` seconds. Nothing to do by default
        (the orderly service ends the queue's consume loop)."""
        return

    def left_unseen(self, batch: list[MessageExt]) -> bool:
        """Whether the consumer, iterated with ``async for``, stopped before any loop got
        ``batch``: then it is neither consumed nor sent back, and its offsets stay
        uncommitted."""
        stream = self.consumer._stream
        return stream is not None and not self.consumer.running and stream.never_seen(batch)

    def max_reconsume_times(self) -> int:
        """How often a message is retried before it goes to the group's DLQ."""
        n = self.consumer.config.max_reconsume_times
        return n if n >= 0 else DEFAULT_MAX_RECONSUME_TIMES

    async def call_handler(self, batch: list[MessageExt], arrived: float) -> ConsumeResult:
        """The listener on ``batch`` (whose pull arrived at ``arrived``), traced and timed
        when tracing and metrics are on."""
        consumer = self.consumer
        tracer, metrics = consumer.tracer, consumer._metrics
        if tracer is None and metrics is None:
            return await self.run_handler(batch)
        group, cid = consumer.group, consumer.client.client_id
        if tracer is not None:
            for m in batch:
                tracer.record(consume_event("SubBefore", group, cid, m))
        started = time.monotonic()
        if metrics is not None and arrived:
            metrics.observe_await(group, cid, batch, (started - arrived) * 1000)
        result = await self.run_handler(batch)
        elapsed = time.monotonic() - started
        ok = result is ConsumeResult.SUCCESS
        if metrics is not None:
            metrics.observe_process(batch[0].topic, group, cid, ok, elapsed * 1000)
        if tracer is not None:
            cost = int(elapsed * 1000)
            for m in batch:
                tracer.record(consume_event("SubAfter", group, cid, m, cost, ok))
        return result

    async def invoke_listener(self, batch: list[MessageExt]) -> object:
        """The listener's own result on ``batch`` (or its exception)."""
        consumer = self.consumer
        handler = consumer.handler
        assert handler is not None
        if consumer._async_handler:
            return await handler(batch)  # type: ignore[misc]
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(consumer._pool, handler, batch)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def run_handler(self, batch: list[MessageExt]) -> ConsumeResult:
        """The listener's answer on ``batch``; RECONSUME_LATER when it raised or answered
        something that is not a ConsumeResult."""
        group = self.consumer.group
        try:
            result = await self.invoke_listener(batch)
        except Exception:
            log.exception(
                "handler of group %s failed on %s; it will be retried", group, batch[0].msg_id
            )
            return ConsumeResult.RECONSUME_LATER
        if not isinstance(result, ConsumeResult):
            self._bad_result(result, batch)
            return ConsumeResult.RECONSUME_LATER
        return result

    def _bad_result(self, result: object, batch: list[MessageExt]) -> None:
        """A handler answered ``result``, not a ConsumeResult: an error of the handler,
        logged as an error once per handler (with the fix), then at debug level."""
        handler = self.consumer.handler
        name = getattr(handler, "__qualname__", repr(handler))
        key = id(handler)
        if key in self._reported:
            log.debug("handler %s returned %r on %s; retrying it", name, result, batch[0].msg_id)
            return
        self._reported.add(key)
        log.error(
            "handler %s of group %s returned %r, not a ConsumeResult, so message %s (and "
            "every other it does this for) goes back for retry as if it had raised; return "
            "ConsumeResult.SUCCESS when the messages are consumed, or "
            "ConsumeResult.RECONSUME_LATER to have them retried",
            name,
            self.consumer.group,
            result,
            batch[0].msg_id,
        )
