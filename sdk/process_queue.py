"""A consumer's per-queue buffer (RocketMQ's ProcessQueue): messages pulled but not yet
consumed, ordered by queue offset, with the figures flow control reads."""

from __future__ import annotations

import bisect

from cluster.message import MessageExt


class ProcessQueue:
    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._msgs: dict[int, MessageExt] = {}
        self.msg_size = 0
        self.dropped = False
        self.max_offset = -1

    @property
    def msg_count(self) -> int:
        return len(self._offsets)

    @property
    def max_span(self) -> int:
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def put(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            if m.queue_offset in self._msgs:
                continue
            bisect.insort(self._offsets, m.queue_offset)
            self._msgs[m.queue_offset] = m
            self.msg_size += len(m.body)
            self.max_offset = max(self.max_offset, m.queue_offset)

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
        self._offsets.clear()
        self._msgs.clear()
        self.msg_size = 0
