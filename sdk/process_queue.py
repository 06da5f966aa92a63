"""A consumer's per-queue buffer (RocketMQ's ProcessQueue): messages pulled but not yet
consumed, ordered by queue offset, with the figures flow control reads."""

from __future__ import annotations

import bisect

from rocketq.common.message import MessageExt


class ProcessQueue:
    """The messages of one owned queue pulled and not yet consumed, by offset.

    Attributes:
        msg_size: Bytes of their bodies.
        dropped: Whether the consumer gave the queue up (nothing of it is committed then).
        max_offset: The newest offset pulled (-1: none).
        locked: Orderly: whether this consumer holds the queue's lock.
        last_lock_time: Orderly: when the lock was last renewed (time.monotonic()).
    """

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._msgs: dict[int, MessageExt] = {}
        self.msg_size = 0
        self.dropped = False
        self.max_offset = -1
        # Orderly consumption: the batch being consumed, the queue lock held on the broker.
        self._taken: list[MessageExt] = []
        self.locked = False
        self.last_lock_time = 0.0

    @property
    def msg_count(self) -> int:
        """Messages held, the batch being consumed (orderly) included."""
        return len(self._offsets) + len(self._taken)

    @property
    def max_span(self) -> int:
        """The distance between the first and the last offset held."""
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def put(self, msgs: list[MessageExt]) -> None:
        """Hold pulled messages (one already held is ignored)."""
        for m in msgs:
            if m.queue_offset in self._msgs:
                continue
            bisect.insort(self._offsets, m.queue_offset)
            self._msgs[m.queue_offset] = m
            self.msg_size += len(m.body)
            self.max_offset = max(self.max_offset, m.queue_offset)

    def pass_over(self, offset: int) -> None:
        """A message at ``offset`` was handled without being buffered (a bad message sent
        to the DLQ): what is committed once the queue empties is past it."""
        self.max_offset = max(self.max_offset, offset)

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed messages; -> the offset to commit: the smallest unfinished
        offset, or one past the newest pulled when nothing is left."""
        for m in msgs:
            if self._msgs.pop(m.queue_offset, None) is not None:
                i = bisect.bisect_left(self._offsets, m.queue_offset)
                del self._offsets[i]
                self.msg_size -= len(m.body)
        return self._offsets[0] if self._offsets else self.max_offset + 1

    def clear(self) -> None:
        """Forget every message held."""
        self._offsets.clear()
        self._msgs.clear()
        self._taken.clear()
        self.msg_size = 0

    # -- orderly -------------------------------------------------------------------------

    def take(self, n: int) -> list[MessageExt]:
        """The next ``n`` messages in offset order, set aside as being consumed."""
        if self._taken:
            return list(self._taken)
        offsets, self._offsets = self._offsets[:n], self._offsets[n:]
        self._taken = [self._msgs.pop(o) for o in offsets]
        return list(self._taken)

    def commit(self) -> int:
        """The taken batch is consumed; -> the offset to commit (one past it)."""
        if not self._taken:
            return self._offsets[0] if self._offsets else self.max_offset + 1
        offset = self._taken[-1].queue_offset + 1
        self.msg_size -= sum(len(m.body) for m in self._taken)
        self._taken = []
        return offset

    def rollback(self) -> None:
        """Consume the taken batch again, before anything later."""
        for m in self._taken:
            self._msgs[m.queue_offset] = m
        self._offsets = [m.queue_offset for m in self._taken] + self._offsets
        self._taken = []

    def lock_expired(self, now: float, max_live: float) -> bool:
        """Orderly: whether the lock is not held, or was not renewed for ``max_live``
        seconds before ``now`` (time.monotonic())."""
        return not self.locked or now - self.last_lock_time > max_live
