"""The push consumer's orderly consume service (RocketMQ's ConsumeMessageOrderlyService):
one consume task per owned (and locked) queue takes its messages strictly in queue order,
one batch at a time. A batch the listener does not finish is consumed again here after
``suspend_current_queue_time`` seconds, before anything later; one that used up its retries goes to
the group's DLQ (:mod:`rocketq.sdk.orderly_locks`).
"""

from __future__ import annotations

import asyncio
import collections
import time

from rocketq.common.aio import wait_event
from rocketq.common.message import MessageExt, MessageQueue
from rocketq.sdk.consume_service import ConsumeService
from rocketq.sdk.consumer_types import ConsumeResult
from rocketq.sdk.orderly_locks import move_to_dlq
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.push_context import PushContext


class OrderlyConsumeService(ConsumeService):
    """A consume task per owned queue, woken when messages arrive or its lock is renewed.

    Attributes:
        wakes: Per owned queue, the event that wakes its consume task (the queue locks
            set it too).
    """

    def __init__(self, consumer: PushContext) -> None:
        super().__init__(consumer)
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.wakes: dict[MessageQueue, asyncio.Event] = {}
        # With metrics: per owned queue, (last offset, arrival time) of each pull not yet
        # consumed, for the await time of what the listener gets.
        self._arrivals: dict[MessageQueue, collections.deque[tuple[int, float]]] = {}

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Let the batches being consumed finish (up to ``timeout`` seconds), then stop."""
        if not self._tasks:
            return
        orderly = list(self._tasks.values())
        for wake in self.wakes.values():
            wake.set()
        await asyncio.wait(orderly, timeout=timeout)
        for task in orderly:
            task.cancel()
        await asyncio.gather(*orderly, return_exceptions=True)

    def start_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Start the consume task of a queue the consumer now owns (and has locked)."""
        if self.consumer._metrics is not None:
            self._arrivals[mq] = collections.deque()
        wake = self.wakes[mq] = asyncio.Event()
        self._tasks[mq] = asyncio.ensure_future(self._loop(mq, pq, wake))

    async def stop_queue(self, mq: MessageQueue, wait: float = 1.0) -> None:
        """Stop the consume task of a queue given up, letting the batch being consumed
        finish (up to ``wait`` seconds; 0: stop at once)."""
        consuming = self._tasks.pop(mq, None)
        wake = self.wakes.pop(mq, None)
        self._arrivals.pop(mq, None)
        if consuming is None:
            return
        if wait > 0:
            if wake is not None:
                wake.set()
            await asyncio.wait((consuming,), timeout=wait)
        consuming.cancel()

    def on_pulled(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], arrived: float
    ) -> None:
        """Wake the queue's consume task (and note when the pull arrived, for metrics)."""
        arrivals = self._arrivals.get(mq)
        if arrived and arrivals is not None:
            arrivals.append((msgs[-1].queue_offset, arrived))
        wake = self.wakes.get(mq)
        if wake is not None:
            wake.set()

    def _arrival(self, mq: MessageQueue, offset: int) -> float:
        """With metrics: when the pull of the message at ``offset`` arrived."""
        arrivals = self._arrivals.get(mq)
        while arrivals and arrivals[0][0] < offset:
            arrivals.popleft()
        return arrivals[0][1] if arrivals else 0.0

    async def _loop(self, mq: MessageQueue, pq: ProcessQueue, wake: asyncio.Event) -> None:
        """Consume one queue strictly in order, one batch at a time."""
        consumer = self.consumer
        cfg = consumer.config
        size = max(1, cfg.consume_message_batch_max_size)
        while consumer.running and not pq.dropped:
            if pq.lock_expired(time.monotonic(), cfg.rebalance_lock_max_live_time):
                wake.clear()
                await wait_event(wake, 0.1)  # until the lock is renewed
                continue
            batch = pq.take(size)
            if not batch:
                wake.clear()
                await wake.wait()
                continue
            arrived = 0.0 if consumer._metrics is None else self._arrival(mq, batch[0].queue_offset)
            started = time.monotonic()
            result = await self.call_handler(batch, arrived)
            ok = result is ConsumeResult.SUCCESS
            consumer.stats.consumed(mq, (time.monotonic() - started) * 1000, len(batch), ok)
            if pq.dropped or (not ok and self.left_unseen(batch)):
                return  # not committed: the queue's next owner consumes the batch again
            if ok:
                consumer.offsets.update(mq, pq.commit())
                continue
            if await self._dead_letters(mq, batch):
                consumer.offsets.update(mq, pq.commit())
                continue
            for m in batch:
                m.reconsume_times += 1
            pq.rollback()
            await asyncio.sleep(cfg.suspend_current_queue_time)

    async def _dead_letters(self, mq: MessageQueue, batch: list[MessageExt]) -> bool:
        """Send the batch's messages that used up their retries to the DLQ; True if none
        is left to retry."""
        consumer = self.consumer
        return await move_to_dlq(
            consumer.client, consumer.group, mq, batch, self.max_reconsume_times()
        )
