"""What a consumer measures of itself for its running info (RocketMQ's ConsumerStatsManager):
per topic, pull and consume times and rates over the last minute and failed messages over
the last hour; per owned queue, when it last pulled and last consumed.

Recording costs a clock read and a few list operations per pull or consumed batch, never
per message; figures are computed when asked for. Times are epoch seconds from an injected
clock (``time.time`` by default), so tests drive it.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Final

from rocketq.common.message import MessageQueue
from rocketq.sdk.running_info import ConsumeStatus

MINUTE: Final = 60
HOUR: Final = 3600


class Window:
    """Sums and counts of what was recorded, in buckets of ``bucket`` seconds, over the
    last ``span`` seconds."""

    __slots__ = ("_buckets", "bucket", "span")

    def __init__(self, span: int, bucket: int = 1) -> None:
        self.span = span
        self.bucket = bucket
        # [bucket number, sum, count], oldest first
        self._buckets: collections.deque[list[float]] = collections.deque()

    def add(self, value: float, now: float) -> None:
        b = now // self.bucket
        buckets = self._buckets
        if buckets and buckets[-1][0] == b:
            last = buckets[-1]
            last[1] += value
            last[2] += 1
        else:
            buckets.append([b, value, 1])
            self._prune(b)

    def _prune(self, b: float) -> None:
        oldest = b - self.span // self.bucket
        buckets = self._buckets
        while buckets and buckets[0][0] <= oldest:
            buckets.popleft()

    def total(self, now: float) -> tuple[float, int]:
        """(sum, count) of what was recorded in the last ``span`` seconds."""
        self._prune(now // self.bucket)
        return sum(b[1] for b in self._buckets), int(sum(b[2] for b in self._buckets))


class TopicStats:
    """One topic's windows: pull times and pulled messages, consume times, consumed and
    failed messages (a minute), failed messages (an hour)."""

    __slots__ = (
        "consume_failed",
        "consume_failed_hour",
        "consume_ok",
        "consume_rt",
        "pull_rt",
        "pulled",
    )

    def __init__(self) -> None:
        self.pull_rt = Window(MINUTE)
        self.pulled = Window(MINUTE)
        self.consume_rt = Window(MINUTE)
        self.consume_ok = Window(MINUTE)
        self.consume_failed = Window(MINUTE)
        self.consume_failed_hour = Window(HOUR, 60)


class ConsumerStats:
    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.started = clock()
        self.topics: dict[str, TopicStats] = {}
        # per queue: [last pull, last consume] (epoch ms, 0: never)
        self.queues: dict[MessageQueue, list[int]] = {}

    def _topic(self, topic: str) -> TopicStats:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = TopicStats()
        return stats

    def _queue(self, mq: MessageQueue) -> list[int]:
        times = self.queues.get(mq)
        if times is None:
            times = self.queues[mq] = [0, 0]
        return times

    def pulling(self, mq: MessageQueue) -> None:
        """A pull of ``mq`` goes out now (the queue's last pull, as RocketMQ's)."""
        self._queue(mq)[0] = int(self.clock() * 1000)

    def pulled(self, mq: MessageQueue, rt_ms: float, found: int) -> None:
        """A pull of ``mq`` found ``found`` messages after ``rt_ms``; as RocketMQ, only
        pulls that found messages count in the pull time and rate."""
        if found:
            now = self.clock()
            stats = self._topic(mq.topic)
            stats.pull_rt.add(rt_ms, now)
            stats.pulled.add(found, now)

    def consumed(self, mq: MessageQueue, rt_ms: float, count: int, ok: bool) -> None:
        """The listener took ``rt_ms`` over a batch of ``count`` messages of ``mq``, and
        consumed them (``ok``) or has them consumed again."""
        now = self.clock()
        self._queue(mq)[1] = int(now * 1000)
        stats = self._topic(mq.topic)
        stats.consume_rt.add(rt_ms, now)
        if ok:
            stats.consume_ok.add(count, now)
        else:
            stats.consume_failed.add(count, now)
            stats.consume_failed_hour.add(count, now)

    def last_pull(self, mq: MessageQueue) -> int:
        return self.queues.get(mq, (0, 0))[0]

    def last_consume(self, mq: MessageQueue) -> int:
        return self.queues.get(mq, (0, 0))[1]

    def forget(self, mq: MessageQueue) -> None:
        """The queue is no longer owned."""
        self.queues.pop(mq, None)

    def status(self, topic: str) -> ConsumeStatus:
        """The topic's figures now: averages per pull or consumed batch (ms) and rates per
        second over the last minute (over the time since the consumer started, while that
        is shorter), and the messages that failed over the last hour."""
        stats = self.topics.get(topic)
        if stats is None:
            return ConsumeStatus()
        now = self.clock()
        seconds = max(1.0, min(float(MINUTE), now - self.started))

        def average(w: Window) -> float:
            total, count = w.total(now)
            return total / count if count else 0.0

        def rate(w: Window) -> float:
            return w.total(now)[0] / seconds

        return ConsumeStatus(
            pull_rt=average(stats.pull_rt),
            pull_tps=rate(stats.pulled),
            consume_rt=average(stats.consume_rt),
            consume_ok_tps=rate(stats.consume_ok),
            consume_failed_tps=rate(stats.consume_failed),
            consume_failed_msgs=int(stats.consume_failed_hour.total(now)[0]),
        )
