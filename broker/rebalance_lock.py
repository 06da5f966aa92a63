"""Queue locks of orderly consumers (RocketMQ's RebalanceLockManager).

A lock is held per (group, topic, queue) by one client id; the holder renews it (every
20 s by the consumer), and a lock not renewed for ``rebalance_lock_max_live_time`` (60 s)
may be taken by another client of the group. Locking a batch answers the queues the
client holds afterwards; unlocking releases only the caller's own locks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update: float

    def expired(self, now: float, max_live: float) -> bool:
        return now - self.last_update > max_live


class RebalanceLockManager:
    def __init__(
        self, max_live_time_ms: int = 60_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_live = max_live_time_ms / 1000
        self.clock = clock
        self._locks: dict[str, dict[QueueKey, LockEntry]] = {}

    def try_lock_batch(
        self, group: str, queues: Iterable[QueueKey], client_id: str
    ) -> list[QueueKey]:
        """Lock (or renew) what is free, expired or already the client's; -> the queues
        the client holds now, in the order asked."""
        now = self.clock()
        table = self._locks.setdefault(group, {})
        held = []
        for mq in queues:
            entry = table.get(mq)
            if entry is None:
                table[mq] = LockEntry(client_id, now)
                log.info("group %s: %s locked by %s", group, mq, client_id)
            elif entry.client_id == client_id:
                entry.last_update = now
            elif entry.expired(now, self.max_live):
                log.warning(
                    "group %s: lock of %s held by %s expired; now %s's",
                    group,
                    mq,
                    entry.client_id,
                    client_id,
                )
                entry.client_id, entry.last_update = client_id, now
            else:
                continue
            held.append(mq)
        return held

    def unlock_batch(self, group: str, queues: Iterable[QueueKey], client_id: str) -> None:
        table = self._locks.get(group)
        if not table:
            return
        for mq in queues:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
                log.info("group %s: %s unlocked by %s", group, mq, client_id)

    def holder(self, group: str, mq: QueueKey) -> str | None:
        """The live holder of a queue's lock, if any."""
        entry = self._locks.get(group, {}).get(mq)
        if entry is None or entry.expired(self.clock(), self.max_live):
            return None
        return entry.client_id
