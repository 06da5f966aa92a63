"""Queue locks of orderly consumers: one holder per queue, renewal, expiry, own unlocks."""

from __future__ import annotations

from rocketq.broker.rebalance_lock import RebalanceLockManager


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_holder_renewal_and_expiry() -> None:
    clock = Clock()
    locks = RebalanceLockManager(60_000, clock)
    q0, q1 = ("T", 0), ("T", 1)
    assert locks.try_lock_batch("g", [q0, q1], "a") == [q0, q1]
    assert locks.try_lock_batch("g", [q0, q1], "b") == []
    assert locks.try_lock_batch("other-group", [q0], "b") == [q0]  # per group
    clock.now = 50
    assert locks.try_lock_batch("g", [q0], "a") == [q0]  # renewed at 50 s
    clock.now = 61
    assert locks.try_lock_batch("g", [q0, q1], "b") == [q1]  # q1 expired, q0 renewed
    assert locks.holder("g", q1) == "b" and locks.holder("g", q0) == "a"
    clock.now = 200
    assert locks.holder("g", q0) is None


def test_unlock_releases_only_the_callers_locks() -> None:
    locks = RebalanceLockManager(60_000, Clock())
    locks.try_lock_batch("g", [("T", 0)], "a")
    locks.unlock_batch("g", [("T", 0)], "b")
    assert locks.holder("g", ("T", 0)) == "a"
    locks.unlock_batch("g", [("T", 0)], "a")
    assert locks.try_lock_batch("g", [("T", 0)], "b") == [("T", 0)]
