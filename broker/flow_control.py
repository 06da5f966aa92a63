"""Fast failure (RocketMQ's BrokerFastFailure): answer SYSTEM_BUSY at once instead of
queuing sends without bound when the broker falls behind.

Two signals: more sends in flight than ``send_thread_pool_queue_capacity``, or the event
loop running later than ``wait_time_mills_in_send_queue`` (a send would wait that long
before it is even looked at: RocketMQ's "[TIMEOUT_CLEAN_QUEUE]"), measured by a probe
timer and counted while the loop is still behind (the probe's next timer overdue).
"""

from __future__ import annotations

import asyncio
import time

from rocketq.common.exceptions import SystemBusyError

PROBE_INTERVAL = 0.01


class FlowControl:
    def __init__(self, *, capacity: int, max_wait_ms: int, enabled: bool) -> None:
        self.capacity = capacity
        self.max_wait = max_wait_ms / 1000
        self.enabled = enabled
        self.in_flight = 0
        self.loop_lag = 0.0
        self.rejected = 0
        # When the probe's current timer is due (None: no probe runs).
        self._due: float | None = None

    async def probe(self) -> None:
        """Measure how late the loop runs a timer (the time a new request would queue)."""
        while True:
            start = time.monotonic()
            self._due = start + PROBE_INTERVAL
            await asyncio.sleep(PROBE_INTERVAL)
            self.loop_lag = max(0.0, time.monotonic() - start - PROBE_INTERVAL)

    def _behind(self) -> bool:
        """Whether the loop is still late: the probe's timer is overdue. After one stall
        the probe catches up at once, and what arrives then (a client's immediate retry)
        is not refused for a lateness that is over."""
        return self._due is None or time.monotonic() >= self._due

    def check(self) -> None:
        if not self.enabled:
            return
        if self.in_flight >= self.capacity:
            self.rejected += 1
            raise SystemBusyError(
                f"[OVERLOAD] system busy, start flow control for a while: {self.in_flight} sends "
                f"in flight (send_thread_pool_queue_capacity {self.capacity})"
            )
        if self.loop_lag > self.max_wait and self._behind():
            self.rejected += 1
            raise SystemBusyError(
                "[TIMEOUT_CLEAN_QUEUE] broker busy, start flow control for a while: requests "
                f"wait {self.loop_lag * 1000:.0f} ms (wait_time_mills_in_send_queue "
                f"{self.max_wait * 1000:.0f})"
            )
