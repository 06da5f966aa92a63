"""Timed messages while the store refuses writes (a full disk): a refused delivery keeps
its unit, and every other unit of its second, in the wheel; the second is not passed, so
the checkpoint still covers them; once writes are taken again each is delivered once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

import pytest

from rocketq.broker import timer
from rocketq.broker.timer import TimerMessageStore, TimerUnit
from rocketq.common.exceptions import DiskFullError


class Refusing:
    """Stands in for ``_deliver``: refuses the first ``refusals`` calls, then records."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.delivered: list[TimerUnit] = []

    def __call__(self, unit: TimerUnit) -> None:
        if self.refusals:
            self.refusals -= 1
            raise DiskFullError("the broker's disk is full")
        self.delivered.append(unit)


def timer_store(tmp_path: Path) -> TimerMessageStore:
    return TimerMessageStore(cast(Any, None), tmp_path, max_delay_ms=86_400_000)


def test_a_refused_second_keeps_its_units_until_they_are_delivered(tmp_path: Path) -> None:
    ts = timer_store(tmp_path)
    sec = int(time.time()) - 5
    units = [TimerUnit(sec * 1000 + i, 100 * i, 90) for i in range(4)]
    for unit in units:
        ts._file(unit)
    deliver = Refusing(refusals=1)
    ts._deliver = deliver  # type: ignore[method-assign]
    with pytest.raises(DiskFullError):
        ts.deliver_second(sec, (sec + 1) * 1000 - 1)
    assert ts.pending == 4 and ts.wheel[sec % timer.WHEEL_SLOTS] == units
    assert ts.deliver_second(sec, (sec + 1) * 1000 - 1) == 4
    assert deliver.delivered == units and ts.pending == 0


def test_the_dequeue_loop_waits_on_the_same_second_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timer, "REFUSED_WAIT", 0.01)
    ts = timer_store(tmp_path)
    first = int(time.time()) - 3
    ts.dequeue_sec = first
    units = [TimerUnit((first + i) * 1000 + 7, 100 * i, 90) for i in range(3)]
    for unit in units:
        ts._file(unit)
    deliver = Refusing(refusals=5)
    ts._deliver = deliver  # type: ignore[method-assign]
    ts._delete_delivered_segments = lambda: None  # type: ignore[method-assign]

    async def run() -> None:
        task = asyncio.create_task(ts._dequeue_loop())
        deadline = time.monotonic() + 5
        while len(deliver.delivered) < len(units) and time.monotonic() < deadline:
            assert ts.dequeue_sec == first or deliver.refusals == 0
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert deliver.delivered == units and ts.pending == 0
    assert ts.dequeue_sec >= first + 3
