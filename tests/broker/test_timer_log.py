"""The timer log: units appended across segments, cut back to a checkpoint, read again."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.broker import timer
from rocketq.broker.timer import TimerLog, TimerUnit


def test_append_truncate_and_reopen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timer, "SEGMENT_UNITS", 4)
    log = TimerLog(tmp_path / "timerlog")
    for i in range(10):
        log.append(TimerUnit(1000 + i, 100 * i, 10))
    log.flush()
    assert log.segments == [0, 4, 8] and log.length == 10
    log.truncate(6)  # a checkpoint taken after 6 units
    assert log.segments == [0, 4] and log.length == 6
    log.close()
    again = TimerLog(tmp_path / "timerlog")
    assert again.length == 6
    assert [u.deliver_ms for _, u in again.units()] == [1000 + i for i in range(6)]
    again.append(TimerUnit(2000, 1, 1))
    assert [start for start, _ in again.units(from_unit=5)] == [4, 4]
    again.delete_segment(0)
    assert again.segments == [4] and again.length == 7
    again.close()


def test_truncate_to_nothing_keeps_a_usable_log(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "timerlog")
    log.append(TimerUnit(1, 2, 3))
    log.truncate(0)
    assert log.length == 0 and log.units() == []
    log.append(TimerUnit(4, 5, 6))
    assert [u.phy_offset for _, u in log.units()] == [5]
    log.close()
