"""The push consumer's concurrent consume service (RocketMQ's
ConsumeMessageConcurrentlyService): a bounded pool of consume tasks takes the pulled
batches in any order; a batch the listener does not finish goes back to the broker
(``%RETRY%<group>``, returning later with ``reconsume_times`` + 1) and the queue's committed
offset moves past it. Broadcasting consumers have no retries: such a batch is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Final

from rocketq.common.exceptions import RocketqError
from rocketq.common.message import MessageExt, MessageQueue
from rocketq.sdk.client_wire import send_back_request
from rocketq.sdk.consume_service import ConsumeService
from rocketq.sdk.consumer_types import ConsumeResult
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.push_context import PushContext

log = logging.getLogger(__name__)

# Seconds before a batch the broker would not take back is consumed here again.
SEND_BACK_RETRY_DELAY: Final = 5.0

# A consume request: the queue, its process queue, the batch, and when the batch's pull
# arrived (time.monotonic(); 0.0 when metrics are off).
Request = tuple[MessageQueue, ProcessQueue, list[MessageExt], float]


class ConcurrentConsumeService(ConsumeService):
    """Consume requests, taken by ``consume_thread_max`` worker tasks (the consume pool);
    a worker with nothing to do parks on a future until a request comes."""

    def __init__(self, consumer: PushContext) -> None:
        super().__init__(consumer)
        self._requests: collections.deque[Request] = collections.deque()
        self._idle: collections.deque[asyncio.Future[None]] = collections.deque()
        self._workers: list[asyncio.Task[None]] = []
        self._busy = 0

    @property
    def pool_size(self) -> int:
        """The consume tasks running (0 before start and after shutdown)."""
        return len(self._workers)

    def start(self) -> None:
        """Start the pool of ``consume_thread_max`` consume tasks."""
        self._workers = [
            asyncio.ensure_future(self._worker())
            for _ in range(self.consumer.config.consume_thread_max)
        ]

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Let the handlers running now finish (up to ``timeout`` seconds), then stop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._busy and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    def on_pulled(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], arrived: float
    ) -> None:
        """Cut the pulled messages into batches of ``consume_message_batch_max_size`` and
        queue them for the pool."""
        size = max(1, self.consumer.config.consume_message_batch_max_size)
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

    async def _consume(
        self, mq: MessageQueue, pq: ProcessQueue, batch: list[MessageExt], arrived: float
    ) -> None:
        consumer = self.consumer
        started = time.monotonic()
        result = await self.call_handler(batch, arrived)
        ok = result is ConsumeResult.SUCCESS
        consumer.stats.consumed(mq, (time.monotonic() - started) * 1000, len(batch), ok)
        if pq.dropped or (not ok and self.left_unseen(batch)):
            return
        if ok:
            consumer.offsets.update(mq, pq.remove(batch))
            return
        failed: list[MessageExt] = []
        if consumer.broadcasting:
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
                consumer.offsets.update(mq, offset)
        if failed and consumer.running:
            for m in failed:
                m.reconsume_times += 1
            self._submit(mq, pq, failed, SEND_BACK_RETRY_DELAY, arrived)

    async def _send_back(self, mq: MessageQueue, batch: list[MessageExt]) -> list[MessageExt]:
        """Give failed messages back to the broker; -> those it could not take."""
        consumer = self.consumer
        client = consumer.client
        failed = []
        addr = client.master_addr(mq.broker_name)
        for m in batch:
            if addr is None:
                failed.append(m)
                continue
            req = send_back_request(
                consumer.group,
                m.commit_log_offset,
                delay_level=0,
                origin_msg_id=m.msg_id,
                origin_topic=m.topic,
                max_reconsume_times=consumer.config.max_reconsume_times,
            )
            try:
                await client.broker(addr).request(req, client.timeout)
            except RocketqError as exc:
                log.warning(
                    "sending %s back failed (%s); retrying it here in %.0f s",
                    m.msg_id,
                    exc,
                    SEND_BACK_RETRY_DELAY,
                )
                failed.append(m)
        return failed
