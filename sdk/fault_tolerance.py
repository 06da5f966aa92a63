"""Latency fault tolerance (RocketMQ's MQFaultStrategy and LatencyFaultToleranceImpl).

After each send the broker's latency maps to a window during which it is avoided: under
550 ms no window, 550 ms -> 30 s ... 15 s -> 10 min; a failed send counts as 30 s of
latency (10 min). Queue selection goes round robin over queues of available brokers,
avoiding the broker that just failed.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from cluster.message import MessageQueue

LATENCY_MAX: Final = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION: Final = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY: Final = 30000


def not_available_duration(latency_ms: float) -> int:
    """The window (ms) for a latency: the entry of the largest threshold it reaches."""
    for i in range(len(LATENCY_MAX) - 1, -1, -1):
        if latency_ms >= LATENCY_MAX[i]:
            return NOT_AVAILABLE_DURATION[i]
    return 0


@dataclass(slots=True)
class FaultItem:
    name: str
    latency_ms: float
    start: float  # when the broker becomes available again (clock seconds)


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}
        self._which = itertools.count(random.randrange(1 << 16))

    def update_fault_item(self, name: str, latency_ms: float, not_available_ms: float) -> None:
        self.items[name] = FaultItem(name, latency_ms, self.clock() + not_available_ms / 1000)

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or self.clock() >= item.start

    def remove(self, name: str) -> None:
        self.items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """Among brokers with a record: available first, then lower latency, then sooner
        available; round robin over the better half."""
        if not self.items:
            return None
        now = self.clock()
        ranked = sorted(
            self.items.values(), key=lambda it: (now < it.start, it.latency_ms, it.start)
        )
        half = max(1, len(ranked) // 2)
        return ranked[next(self._which) % half].name


@dataclass(slots=True)
class TopicPublishInfo:
    message_queues: list[MessageQueue]
    order_topic: bool = False
    _index: itertools.count[int] = field(
        default_factory=lambda: itertools.count(random.randrange(1 << 16))
    )

    def has_route(self) -> bool:
        return bool(self.message_queues)

    def next_index(self) -> int:
        return next(self._index)

    def select_one(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin, skipping the broker that just failed when another exists."""
        queues = self.message_queues
        if last_broker_name is not None:
            for _ in range(len(queues)):
                mq = queues[self.next_index() % len(queues)]
                if mq.broker_name != last_broker_name:
                    return mq
        return queues[self.next_index() % len(queues)]


class MQFaultStrategy:
    def __init__(
        self,
        *,
        send_latency_fault_enable: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = send_latency_fault_enable
        self.tolerance = LatencyFaultTolerance(clock)

    def select_one_message_queue(
        self, info: TopicPublishInfo, last_broker_name: str | None
    ) -> MessageQueue:
        if not self.enabled:
            return info.select_one(last_broker_name)
        queues = info.message_queues
        for _ in range(len(queues)):
            mq = queues[info.next_index() % len(queues)]
            if self.tolerance.is_available(mq.broker_name) and (
                last_broker_name is None
                or mq.broker_name != last_broker_name
                or len({q.broker_name for q in queues}) == 1
            ):
                return mq
        best = self.tolerance.pick_one_at_least()
        if best is not None:
            of_best = [q for q in queues if q.broker_name == best]
            if of_best:
                return of_best[info.next_index() % len(of_best)]
            self.tolerance.remove(best)
        return info.select_one(last_broker_name)

    def update_fault_item(
        self, broker_name: str, current_latency_ms: float, *, isolation: bool
    ) -> None:
        if not self.enabled:
            return
        latency = ISOLATION_LATENCY if isolation else current_latency_ms
        self.tolerance.update_fault_item(broker_name, latency, not_available_duration(latency))
