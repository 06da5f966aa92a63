"""The push consumer's rebalance service (RocketMQ's RebalanceService and RebalanceImpl):
which queues of its subscribed topics this consumer owns, taken and given up as the group
and the routes change. Clustering consumers split the queues with the configured strategy
(:mod:`rocketq.sdk.rebalance`); broadcasting consumers own every queue. An orderly consumer
takes a queue only once it holds the queue's lock on the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from rocketq.common.aio import wait_event
from rocketq.common.exceptions import RocketqError, TopicNotExistError
from rocketq.common.message import RETRY_GROUP_TOPIC_PREFIX, MessageQueue
from rocketq.sdk.client import subscribe_queues
from rocketq.sdk.client_wire import max_offset_request, min_offset_request, search_offset_request
from rocketq.sdk.consumer_types import ConsumeFrom, MessageSelector
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.push_context import PushContext
from rocketq.sdk.rebalance import STRATEGIES

log = logging.getLogger(__name__)

# A subscribed topic missing from the routes is looked for again within this many seconds.
MISSING_TOPIC_RETRY = 1.0
# Without consume_timestamp, CONSUME_FROM_TIMESTAMP starts this many seconds before now.
DEFAULT_CONSUME_BACKWARD = 1800.0


class RebalanceService:
    """Owns the queues of one push consumer.

    Args:
        consumer: The push consumer whose queues this service assigns.

    Attributes:
        now: Set to rebalance at once (the group changed) instead of at the next period.
    """

    def __init__(self, consumer: PushContext) -> None:
        self.consumer = consumer
        self.now = asyncio.Event()
        self._missing_topics = False
        self._lock = asyncio.Lock()

    async def run(self) -> None:
        """Rebalance every ``rebalance_interval``, and at once when ``now`` is set."""
        consumer = self.consumer
        while consumer.running:
            interval = consumer.config.rebalance_interval
            if self._missing_topics:
                # A subscribed topic missing from the routes (a retry topic the broker has
                # just created) is looked for again soon.
                interval = min(interval, MISSING_TOPIC_RETRY)
            await wait_event(self.now, interval)
            self.now.clear()
            try:
                await self.rebalance()
            except RocketqError as exc:
                log.warning("rebalance of %s failed: %s", consumer.group, exc)

    async def rebalance(self) -> None:
        """Take this consumer's share of every subscribed topic's queues, and give up the
        queues that are no longer its own."""
        async with self._lock:
            self._missing_topics = False
            for topic, selector in list(self.consumer.subscriptions.items()):
                try:
                    await self._rebalance_topic(topic, selector)
                except TopicNotExistError:
                    self._missing_topics = True
                    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                        log.warning(
                            "topic %s of group %s does not exist yet", topic, self.consumer.group
                        )

    async def _rebalance_topic(self, topic: str, selector: MessageSelector) -> None:
        consumer = self.consumer
        client = consumer.client
        route = await client.update_route(topic)
        mqs = subscribe_queues(topic, route)
        if consumer.broadcasting:
            mine = set(mqs)
        else:
            cids = await client.consumer_ids(consumer.group, route)
            if client.client_id not in cids:
                # The broker does not know us (yet): say hello now and look again soon.
                await client.heartbeat_all()
                self._missing_topics = True
                if not cids:
                    return
            allocate = STRATEGIES[consumer.config.allocate_strategy]
            mine = set(allocate(consumer.group, client.client_id, mqs, cids))
        for mq in [m for m in consumer.process_queues if m.topic == topic and m not in mine]:
            await self.drop(mq)
        for mq in sorted(mine - set(consumer.process_queues)):
            await self.take(mq, selector)

    async def take(self, mq: MessageQueue, selector: MessageSelector) -> None:
        """Start consuming ``mq`` from its committed offset (or where the consumer is told
        to start); an orderly consumer first locks it."""
        consumer = self.consumer
        pq = ProcessQueue()
        if consumer.orderly:
            if mq not in await consumer.locks.lock(mq.broker_name, [mq]):
                # Another client still holds it (until it lets go or its lock expires).
                self._missing_topics = True
                log.info(
                    "group %s: %s is locked by another consumer; trying again", consumer.group, mq
                )
                return
            pq.locked, pq.last_lock_time = True, time.monotonic()
        try:
            offset = await self.start_offset(mq)
        except RocketqError as exc:
            log.warning("cannot start %s: %s", mq, exc)
            if consumer.orderly:
                await consumer.locks.unlock([mq])
            return
        consumer.offsets.update(mq, offset, increase_only=False)
        consumer.process_queues[mq] = pq
        consumer.pull_service.start_queue(mq, pq, selector, offset)
        consumer.consume_service.start_queue(mq, pq)
        log.info("group %s now consumes %s from offset %d", consumer.group, mq, offset)

    async def drop(self, mq: MessageQueue) -> None:
        """Stop consuming ``mq``: its batch being consumed finishes (briefly), its offset is
        committed and (orderly) its lock released."""
        consumer = self.consumer
        pq = consumer.process_queues.pop(mq, None)
        if pq is not None:
            pq.dropped = True
        consumer.pull_service.stop_queue(mq)
        await consumer.consume_service.stop_queue(mq)
        with contextlib.suppress(RocketqError):
            await consumer.offsets.persist(mq)
        consumer.offsets.remove(mq)
        consumer.stats.forget(mq)
        if consumer.orderly:
            await consumer.locks.unlock([mq])
        log.info("group %s gave up %s", consumer.group, mq)

    async def reset(self, topic: str) -> None:
        """Start the topic's owned queues again from their (just reset) committed offsets."""
        consumer = self.consumer
        async with self._lock:
            for mq in [m for m in consumer.process_queues if m.topic == topic]:
                pq = consumer.process_queues.pop(mq)
                pq.dropped = True
                consumer.pull_service.stop_queue(mq)
                await consumer.consume_service.stop_queue(mq, wait=0)
                consumer.offsets.remove(mq)
                await self.take(mq, consumer.subscriptions[topic])

    async def start_offset(self, mq: MessageQueue) -> int:
        """Where to start ``mq``: its committed offset, else where ``consume_from`` says."""
        consumer = self.consumer
        client = consumer.client
        offset = await consumer.offsets.read_store(mq)
        if offset >= 0:
            return offset
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 0
        addr = client.read_addr(mq.broker_name)
        if addr is None:
            raise TopicNotExistError(f"broker {mq.broker_name} is not in the route")
        if consumer.consume_from is ConsumeFrom.FIRST_OFFSET:
            req = min_offset_request(mq.topic, mq.queue_id)
        elif consumer.consume_from is ConsumeFrom.TIMESTAMP:
            stamp = consumer.config.consume_timestamp_ms or int(
                (time.time() - DEFAULT_CONSUME_BACKWARD) * 1000
            )
            req = search_offset_request(mq.topic, mq.queue_id, stamp)
        else:
            req = max_offset_request(mq.topic, mq.queue_id)
        return await client.broker(addr).offset(req, client.timeout)
