"""Producer queue selection and latency fault tolerance (RocketMQ's ``TopicPublishInfo``,
``LatencyFaultToleranceImpl`` and ``MQFaultStrategy``).

After every send the producer reports the broker's latency; the latency maps to a window
during which the broker is avoided (``LATENCY_MAX`` / ``NOT_AVAILABLE_DURATION``): under
550 ms no window, 550 ms -> 30 s, ..., 15 s and more -> 10 min. A failed send counts as
30 000 ms, so a failing broker is avoided for 10 minutes. Selection goes round robin over
the topic's queues (across queues, not brokers), skipping queues of unavailable brokers and
of the broker that just failed; with every broker unavailable it takes the least bad one.

Time comes from an injected clock (seconds, ``time.monotonic`` by default); windows and
latencies are in milliseconds, as in RocketMQ.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from rocketq.common.message import MessageQueue

LATENCY_MAX: Final = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION: Final = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY: Final = 30000
"""The latency (ms) a failed send counts as."""

Clock = Callable[[], float]


def not_available_duration(
    latency_ms: float,
    latency_max: Sequence[float] = LATENCY_MAX,
    durations: Sequence[float] = NOT_AVAILABLE_DURATION,
) -> float:
    """The window (ms) for a latency: ``durations[i]`` for the largest ``i`` with
    ``latency_ms >= latency_max[i]``, 0 below the first threshold
    (``MQFaultStrategy.computeNotAvailableDuration``)."""
    for i in range(len(latency_max) - 1, -1, -1):
        if latency_ms >= latency_max[i]:
            return durations[i]
    return 0


class RoundRobinIndex:
    """A counter starting at a random value (RocketMQ's ``ThreadLocalIndex``; asyncio runs
    one thread, so one counter per topic suffices)."""

    __slots__ = ("_value",)

    def __init__(self, start: int | None = None) -> None:
        self._value = random.randrange(1 << 31) if start is None else start

    def next(self) -> int:
        """Increment and return the new value (never negative)."""
        self._value += 1
        return self._value


@dataclass
class FaultItem:
    """What is known of one broker: its last latency (ms) and when (clock seconds) its
    not-available window ends."""

    name: str
    current_latency_ms: float
    start_timestamp: float

    def is_available(self, now: float) -> bool:
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    """Per-broker fault items (``LatencyFaultToleranceImpl``)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}
        self._which_item_worst = RoundRobinIndex()

    def update_fault_item(
        self, name: str, current_latency_ms: float, not_available_duration_ms: float
    ) -> None:
        """Record a latency; ``name`` is unavailable for the next ``not_available_duration_ms``."""
        start = self.clock() + not_available_duration_ms / 1000
        self.items[name] = FaultItem(name, current_latency_ms, start)

    def is_available(self, name: str) -> bool:
        """True when ``name`` has no fault item or its window has passed."""
        item = self.items.get(name)
        return item is None or item.is_available(self.clock())

    def remove(self, name: str) -> None:
        self.items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """The least bad broker: rank the fault items (available first, then lower latency,
        then the window that ends first; RocketMQ breaks remaining ties by a shuffle, here by
        name) and go round robin over the better half (the best one when fewer than two)."""
        if not self.items:
            return None
        now = self.clock()
        ranked = sorted(
            self.items.values(),
            key=lambda it: (
                not it.is_available(now),
                it.current_latency_ms,
                it.start_timestamp,
                it.name,
            ),
        )
        half = len(ranked) // 2
        if half <= 0:
            return ranked[0].name
        return ranked[self._which_item_worst.next() % half].name


@dataclass
class TopicPublishInfo:
    """A topic's writable queues, all brokers' in one flat list, and its round-robin counter."""

    message_queues: list[MessageQueue]
    order_topic: bool = False
    send_which_queue: RoundRobinIndex = field(default_factory=RoundRobinIndex)

    def has_route(self) -> bool:
        return bool(self.message_queues)

    def broker_queues(self, broker_name: str) -> list[MessageQueue]:
        return [mq for mq in self.message_queues if mq.broker_name == broker_name]

    def next_queue(self) -> MessageQueue:
        """The next queue round robin."""
        if not self.message_queues:
            raise ValueError("the topic has no queue to send to; check has_route() first")
        return self.message_queues[self.send_which_queue.next() % len(self.message_queues)]

    def select_one(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin, skipping queues of ``last_broker_name`` (the broker the previous
        attempt of this send failed on) while another broker has queues."""
        if last_broker_name is not None:
            for _ in range(len(self.message_queues)):
                mq = self.next_queue()
                if mq.broker_name != last_broker_name:
                    return mq
        return self.next_queue()


class MQFaultStrategy:
    """Queue selection that avoids slow and failing brokers across sends.

    Enabled (rocketq's default; RocketMQ's is off), selection goes round robin for a queue
    whose broker is available and is not ``last_broker_name`` (an available queue of the
    last broker only if no other is); with none available it takes the broker
    ``pick_one_at_least`` names and a queue of it round robin (a named broker with no queue
    in this topic loses its fault item, as in RocketMQ); failing that, plain round robin.
    Disabled, it only avoids the last failed broker within one send's retries and records
    nothing. Unlike RocketMQ, which keeps the measured latency, a failed send is recorded as
    ``ISOLATION_LATENCY`` so failed brokers rank below slow ones in ``pick_one_at_least``.
    """

    def __init__(
        self,
        *,
        send_latency_fault_enable: bool = True,
        latency_max: Sequence[float] = LATENCY_MAX,
        not_available_duration: Sequence[float] = NOT_AVAILABLE_DURATION,
        clock: Clock = time.monotonic,
    ) -> None:
        if len(latency_max) != len(not_available_duration):
            raise ValueError(
                f"latency_max has {len(latency_max)} entries but not_available_duration has "
                f"{len(not_available_duration)}; they must pair up"
            )
        if list(latency_max) != sorted(latency_max):
            raise ValueError(f"latency_max must be ascending, not {list(latency_max)}")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max = tuple(latency_max)
        self.not_available_duration = tuple(not_available_duration)
        self.latency_fault_tolerance = LatencyFaultTolerance(clock)

    def compute_not_available_duration(self, latency_ms: float) -> float:
        return not_available_duration(latency_ms, self.latency_max, self.not_available_duration)

    def select_one_message_queue(
        self, tp_info: TopicPublishInfo, last_broker_name: str | None = None
    ) -> MessageQueue:
        if not self.send_latency_fault_enable:
            return tp_info.select_one(last_broker_name)
        tolerance = self.latency_fault_tolerance
        fallback: MessageQueue | None = None
        for _ in range(len(tp_info.message_queues)):
            mq = tp_info.next_queue()
            if not tolerance.is_available(mq.broker_name):
                continue
            if mq.broker_name != last_broker_name:
                return mq
            if fallback is None:
                fallback = mq
        if fallback is not None:
            return fallback
        least_bad = tolerance.pick_one_at_least()
        if least_bad is not None:
            queues = tp_info.broker_queues(least_bad)
            if queues:
                return queues[tp_info.send_which_queue.next() % len(queues)]
            tolerance.remove(least_bad)
        return tp_info.select_one(last_broker_name)

    def update_fault_item(
        self, broker_name: str, current_latency_ms: float, isolation: bool = False
    ) -> None:
        """Report a send's latency; ``isolation`` when it failed. No-op when disabled."""
        if not self.send_latency_fault_enable:
            return
        latency = ISOLATION_LATENCY if isolation else current_latency_ms
        self.latency_fault_tolerance.update_fault_item(
            broker_name, latency, self.compute_not_available_duration(latency)
        )
