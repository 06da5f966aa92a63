"""Figures every broker keeps, metrics server or not, for its runtime info and the admin
calls (RocketMQ's BrokerStats and the get-nums stats of its BrokerStatsManager): messages
put and got since boot and since midnight, put and get TPS, each group's consume TPS.

One integer add per send request and one dict update per pull, never per message; a
snapshot every ``SAMPLE_INTERVAL`` seconds gives the TPS over the last minute.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections import deque
from dataclasses import dataclass
from typing import Final

SAMPLE_INTERVAL: Final = 10.0  # seconds between snapshots
WINDOW: Final = 60.0  # TPS is measured over the last minute (RocketMQ's per-minute stats)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    at: float  # time.monotonic()
    puts: int
    gets: int
    group_gets: dict[tuple[str, str], int]


class BrokerStats:
    """Totals since boot and snapshots of them; updated on the event loop."""

    def __init__(self, now: float | None = None) -> None:
        self.puts = 0  # messages stored by sends (a batch counts its messages)
        self.gets = 0  # messages handed to consumers by pulls
        self.group_gets: dict[tuple[str, str], int] = {}  # (group, topic) -> messages got
        self.puts_morning = 0  # totals at the last midnight (or at boot)
        self.gets_morning = 0
        self._day = datetime.date.today()
        self._snapshots: deque[_Snapshot] = deque(maxlen=int(WINDOW / SAMPLE_INTERVAL) + 1)
        self.sample(now)

    def got(self, group: str, topic: str, count: int) -> None:
        self.gets += count
        key = (group, topic)
        self.group_gets[key] = self.group_gets.get(key, 0) + count

    def sample(self, now: float | None = None) -> None:
        """Take a snapshot; at the first one after midnight, today's counts start again."""
        today = datetime.date.today()
        if today != self._day:
            self._day = today
            self.puts_morning, self.gets_morning = self.puts, self.gets
        at = time.monotonic() if now is None else now
        self._snapshots.append(_Snapshot(at, self.puts, self.gets, dict(self.group_gets)))

    def _base(self, now: float) -> _Snapshot:
        """The oldest snapshot within the window (the first one if none is)."""
        for snap in self._snapshots:
            if now - snap.at <= WINDOW + SAMPLE_INTERVAL:
                return snap
        return self._snapshots[-1]

    def tps(self, now: float | None = None) -> tuple[float, float]:
        """-> (put TPS, get TPS) over about the last minute."""
        now = time.monotonic() if now is None else now
        base = self._base(now)
        span = now - base.at
        if span <= 0:
            return 0.0, 0.0
        return (self.puts - base.puts) / span, (self.gets - base.gets) / span

    def consume_tps(self, group: str, topics: list[str], now: float | None = None) -> float:
        """Messages per second ``group`` got from ``topics`` over about the last minute."""
        now = time.monotonic() if now is None else now
        base = self._base(now)
        span = now - base.at
        if span <= 0:
            return 0.0
        got = sum(
            self.group_gets.get((group, t), 0) - base.group_gets.get((group, t), 0) for t in topics
        )
        return got / span

    def runtime_info(self) -> dict[str, str]:
        """RocketMQ's runtime-info keys for these figures."""
        put_tps, get_tps = self.tps()
        return {
            "msgPutTotalTodayNow": str(self.puts),
            "msgGetTotalTodayNow": str(self.gets),
            "msgPutTotalTodayMorning": str(self.puts_morning),
            "msgGetTotalTodayMorning": str(self.gets_morning),
            "putTps": f"{put_tps:.2f}",
            "getTransferedTps": f"{get_tps:.2f}",
        }

    async def run(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL)
            self.sample()
