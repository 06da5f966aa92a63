"""What an orderly push consumer asks of the brokers beside its pulls: locks on the queues
it consumes (LOCK_BATCH_MQ when it takes a queue and every ``rebalance_lock_interval``
after, UNLOCK_BATCH_MQ when it gives one up), and the move of messages that used up their
retries to the group's DLQ (an orderly consumer retries in place, so it sends nothing back
until then)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from rocketq.common.exceptions import RocketqError
from rocketq.common.message import MessageExt, MessageQueue
from rocketq.sdk.client import ClientInstance
from rocketq.sdk.client_wire import (
    lock_batch_request,
    parse_lock_batch,
    send_back_request,
    unlock_batch_request,
)
from rocketq.sdk.process_queue import ProcessQueue

log = logging.getLogger(__name__)


class QueueLocks:
    """The locks of one consumer's queues. ``process_queues`` and ``wakes`` are the
    consumer's own tables (read, never replaced): a queue whose lock is renewed has its
    consuming task woken, one whose lock is lost stops taking batches."""

    def __init__(
        self,
        client: ClientInstance,
        group: str,
        process_queues: dict[MessageQueue, ProcessQueue],
        wakes: dict[MessageQueue, asyncio.Event],
    ) -> None:
        self.client = client
        self.group = group
        self.process_queues = process_queues
        self.wakes = wakes

    async def lock(self, broker_name: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """Lock (or renew) queues of one broker; -> the ones this client holds."""
        client = self.client
        addr = client.master_addr(broker_name)
        if addr is None:
            return set()
        req = lock_batch_request(self.group, client.client_id, mqs)
        try:
            held = parse_lock_batch(await client.broker(addr).invoke(req, client.timeout))
        except RocketqError as exc:
            log.warning("locking queues of %s failed: %s", broker_name, exc)
            return set()
        return {MessageQueue(topic, broker_name, qid) for topic, qid in held}

    async def unlock(self, mqs: list[MessageQueue]) -> None:
        """Release the locks of ``mqs`` (failures are ignored: a lock also expires)."""
        client = self.client
        for broker_name, queues in _by_broker(mqs).items():
            addr = client.master_addr(broker_name)
            if addr is None:
                continue
            req = unlock_batch_request(self.group, client.client_id, queues)
            with contextlib.suppress(RocketqError):
                await client.broker(addr).request(req, client.timeout)

    async def renew_all(self) -> None:
        """Renew the locks of every owned queue; a queue whose lock is lost stops."""
        for broker_name, mqs in _by_broker(list(self.process_queues)).items():
            held = await self.lock(broker_name, mqs)
            now = time.monotonic()
            for mq in mqs:
                pq = self.process_queues.get(mq)
                if pq is None:
                    continue
                if mq in held:
                    pq.locked, pq.last_lock_time = True, now
                    wake = self.wakes.get(mq)
                    if wake is not None:
                        wake.set()
                else:
                    if pq.locked:
                        log.warning("group %s lost the lock of %s", self.group, mq)
                    pq.locked = False

    async def run(self, interval: float) -> None:
        """Renew every ``interval`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.renew_all()


def _by_broker(mqs: list[MessageQueue]) -> dict[str, list[MessageQueue]]:
    by_broker: dict[str, list[MessageQueue]] = {}
    for mq in mqs:
        by_broker.setdefault(mq.broker_name, []).append(mq)
    return by_broker


async def move_to_dlq(
    client: ClientInstance,
    group: str,
    mq: MessageQueue,
    batch: list[MessageExt],
    max_reconsume_times: int,
) -> bool:
    """Send the batch's messages that used up their retries to ``%DLQ%<group>``, in order
    up to the first that has retries left; True if none is left to retry."""
    if all(m.reconsume_times < max_reconsume_times for m in batch):
        return False
    addr = client.master_addr(mq.broker_name)
    if addr is None:
        return False
    for m in batch:
        if m.reconsume_times < max_reconsume_times:
            return False
        req = send_back_request(
            group,
            m.commit_log_offset,
            delay_level=-1,  # straight to %DLQ%<group>
            origin_msg_id=m.msg_id,
            origin_topic=m.topic,
            max_reconsume_times=max_reconsume_times,
        )
        try:
            await client.broker(addr).request(req, client.timeout)
        except RocketqError as exc:
            log.warning("cannot move %s to the DLQ (%s); suspending", m.msg_id, exc)
            return False
        log.warning(
            "message %s of %s failed %d times; moved to the DLQ", m.msg_id, mq, m.reconsume_times
        )
    return True
