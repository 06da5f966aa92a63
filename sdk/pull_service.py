"""The push consumer's pull service (RocketMQ's PullMessageService): one pull loop per owned
queue fills the queue's process queue, within the consumer's flow-control limits, and hands
what it pulled to the consume service. A bad message (:mod:`rocketq.sdk.message_body`) is
reported and moved, as stored, to ``%DLQ%<group>``; the queue goes on past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Final

from rocketq.common.exceptions import RocketqError, ServiceNotAvailableError
from rocketq.common.message import (
    MASTER_ID,
    PROPERTY_RETRY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageExt,
    MessageQueue,
    dlq_topic,
)
from rocketq.sdk import pulling
from rocketq.sdk.client_wire import send_back_request
from rocketq.sdk.consumer_types import MessageSelector
from rocketq.sdk.message_body import BadMessageError, report_bad
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.push_context import PushContext
from rocketq.sdk.wire import PullOutcome, PullReply

log = logging.getLogger(__name__)

# Seconds a pull loop waits when its queue holds too much, or (orderly) is not locked.
PULL_DELAY_WHEN_FLOW_CONTROL: Final = 0.05
PULL_DELAY_WHEN_NOT_LOCKED: Final = 3.0
# A bad message is offered to the DLQ this many times, PULL_DELAY_WHEN_EXCEPTION apart,
# before it is skipped (its record stays in the CommitLog).
BAD_MESSAGE_DLQ_ATTEMPTS: Final = 5


def tag_filter(selector: MessageSelector) -> set[str] | None:
    """The tags a tag subscription keeps (None: every message, or a SQL92 filter the broker
    applies)."""
    if selector.is_sql or selector.expression.strip() in ("", "*"):
        return None
    return {t.strip() for t in selector.expression.split("||")}


class PullService:
    """The pull loops of one push consumer's owned queues.

    Args:
        consumer: The push consumer to pull for.
    """

    def __init__(self, consumer: PushContext) -> None:
        self.consumer = consumer
        self._pulls: dict[MessageQueue, asyncio.Task[None]] = {}
        self._pull_from: dict[MessageQueue, int] = {}  # broker id suggested per queue

    def start_queue(
        self, mq: MessageQueue, pq: ProcessQueue, selector: MessageSelector, offset: int
    ) -> None:
        """Start pulling ``mq`` from ``offset`` into ``pq``."""
        self._pulls[mq] = asyncio.ensure_future(self._pull_loop(mq, pq, selector, offset))

    def stop_queue(self, mq: MessageQueue) -> None:
        """Stop pulling ``mq``."""
        task = self._pulls.pop(mq, None)
        if task is not None:
            task.cancel()
        self._pull_from.pop(mq, None)

    async def shutdown(self) -> None:
        """Stop every pull loop."""
        pulls = list(self._pulls.values())
        self._pulls.clear()
        for task in pulls:
            task.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)

    def _flow_controlled(self, pq: ProcessQueue) -> bool:
        cfg = self.consumer.config
        return (
            pq.msg_count > cfg.pull_threshold_for_queue
            or pq.msg_size > cfg.pull_threshold_size_for_queue * 1024 * 1024
            or (not self.consumer.orderly and pq.max_span > cfg.consume_concurrently_max_span)
        )

    async def _pull_loop(
        self, mq: MessageQueue, pq: ProcessQueue, selector: MessageSelector, offset: int
    ) -> None:
        consumer = self.consumer
        cfg = consumer.config
        tags = tag_filter(selector)
        while consumer.running and not pq.dropped:
            if self._flow_controlled(pq):
                await asyncio.sleep(PULL_DELAY_WHEN_FLOW_CONTROL)
                continue
            if consumer.orderly and not pq.locked:
                await asyncio.sleep(PULL_DELAY_WHEN_NOT_LOCKED)
                continue
            pull_started = time.monotonic()
            consumer.stats.pulling(mq)
            try:
                resp = await self._pull_once(mq, selector, offset)
            except RocketqError as exc:
                delay = pulling.PULL_DELAY_WHEN_EXCEPTION
                log.info("pull of %s failed: %s; retrying in %.0f s", mq, exc, delay)
                with contextlib.suppress(RocketqError):
                    await consumer.client.update_route(mq.topic)
                await asyncio.sleep(delay)
                continue
            if pq.dropped:
                return
            status = resp.outcome
            if status is PullOutcome.FOUND:
                found = pulling.read_found(
                    resp,
                    mq,
                    offset,
                    consumer.group,
                    max_body_bytes=cfg.max_body_bytes,
                    check_crc=cfg.check_crc,
                )
                msgs, bad, offset = found.messages, found.bad, found.next_offset
                if (
                    tags is not None
                    and mq.topic in consumer.subscriptions
                    and not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                ):
                    msgs = [m for m in msgs if m.tags in tags]
                    bad = [e for e in bad if e.message is None or e.message.tags in tags]
                if bad:
                    await self._reject(mq, pq, bad)
                    if pq.dropped:
                        return
                consumer.stats.pulled(mq, (time.monotonic() - pull_started) * 1000, len(msgs))
                if msgs:
                    arrived = 0.0
                    if consumer._metrics is not None:
                        consumer._metrics.observe_delivery(
                            consumer.group, consumer.client.client_id, msgs
                        )
                        arrived = time.monotonic()
                    pq.put(msgs)
                    consumer.consume_service.on_pulled(mq, pq, msgs, arrived)
                elif pq.msg_count == 0:
                    consumer.offsets.update(mq, offset)
            elif status in (PullOutcome.NO_NEW_MSG, PullOutcome.NO_MATCHED_MSG):
                offset = resp.next_begin_offset
                if pq.msg_count == 0:
                    consumer.offsets.update(mq, offset)
            else:
                log.warning(
                    "offset %d of %s is illegal; moving to %d", offset, mq, resp.next_begin_offset
                )
                offset = resp.next_begin_offset
                consumer.offsets.update(mq, offset, increase_only=False)
                with contextlib.suppress(RocketqError):
                    await consumer.offsets.persist(mq)
            if cfg.pull_interval:
                await asyncio.sleep(cfg.pull_interval)

    async def _pull_once(
        self, mq: MessageQueue, selector: MessageSelector, offset: int
    ) -> PullReply:
        # The broker of the group the last answer suggested (a slave when the master says
        # this reader is far behind), else the master, else a slave.
        consumer = self.consumer
        addr = await pulling.read_address(consumer.client, mq, self._pull_from.get(mq, MASTER_ID))
        commit = -1 if consumer.broadcasting else consumer.offsets.read_memory(mq)
        resp = await pulling.pull(
            consumer.client,
            addr,
            group=consumer.group,
            mq=mq,
            offset=offset,
            selector=selector,
            batch_size=consumer.config.pull_batch_size,
            suspend=consumer.config.broker_suspend_max_time,
            commit_offset=commit if commit > 0 else None,
        )
        self._pull_from[mq] = resp.suggest_which_broker_id
        return resp

    async def _reject(self, mq: MessageQueue, pq: ProcessQueue, bad: list[BadMessageError]) -> None:
        """Report bad messages and move each, as stored, to %DLQ%<group> (broadcasting:
        drop it; a record that does not decode has nothing to move); the queue's committed
        offset passes them either way."""
        consumer = self.consumer
        for exc in bad:
            report_bad(
                exc,
                group=consumer.group,
                client_id=consumer.client.client_id,
                counts=consumer.bad_messages,
                metrics=consumer._metrics,
            )
            if exc.message is not None and not consumer.broadcasting:
                await self._bad_to_dlq(mq, pq, exc.message, exc)
            pq.pass_over(exc.queue_offset)

    async def _bad_to_dlq(
        self, mq: MessageQueue, pq: ProcessQueue, m: MessageExt, exc: BadMessageError
    ) -> None:
        consumer = self.consumer
        client = consumer.client
        req = send_back_request(
            consumer.group,
            m.commit_log_offset,
            delay_level=-1,  # straight to %DLQ%<group>, as stored
            origin_msg_id=m.msg_id,
            origin_topic=m.properties.get(PROPERTY_RETRY_TOPIC, m.topic),
            max_reconsume_times=consumer.consume_service.max_reconsume_times(),
        )
        dlq = dlq_topic(consumer.group)
        for attempt in range(1, BAD_MESSAGE_DLQ_ATTEMPTS + 1):
            addr = client.master_addr(mq.broker_name)
            try:
                if addr is None:
                    await client.update_route(mq.topic)
                    raise ServiceNotAvailableError(f"broker {mq.broker_name} has no master now")
                await client.broker(addr).request(req, client.timeout)
            except RocketqError as err:
                log.warning(
                    "moving bad message %s to %s failed (attempt %d of %d): %s",
                    exc.msg_id,
                    dlq,
                    attempt,
                    BAD_MESSAGE_DLQ_ATTEMPTS,
                    err,
                )
                if attempt < BAD_MESSAGE_DLQ_ATTEMPTS and consumer.running and not pq.dropped:
                    await asyncio.sleep(pulling.PULL_DELAY_WHEN_EXCEPTION)
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
                dlq,
            )
            return
