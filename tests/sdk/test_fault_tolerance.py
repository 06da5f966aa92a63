"""Latency fault tolerance and queue selection, driven by a fake clock."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.common.message import MessageQueue
from rocketq.sdk.fault_tolerance import (
    ISOLATION_LATENCY,
    LATENCY_MAX,
    NOT_AVAILABLE_DURATION,
    LatencyFaultTolerance,
    MQFaultStrategy,
    RoundRobinIndex,
    TopicPublishInfo,
    not_available_duration,
)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def queues(brokers: tuple[str, ...] = ("a", "b", "c"), per_broker: int = 4) -> list[MessageQueue]:
    return [MessageQueue("T", b, i) for b in brokers for i in range(per_broker)]


def info(
    brokers: tuple[str, ...] = ("a", "b", "c"), per_broker: int = 4, start: int | None = 0
) -> TopicPublishInfo:
    return TopicPublishInfo(queues(brokers, per_broker), send_which_queue=RoundRobinIndex(start))


def strategy(clock: FakeClock, *, enabled: bool = True) -> MQFaultStrategy:
    return MQFaultStrategy(send_latency_fault_enable=enabled, clock=clock)


# -- the latency table ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("latency_ms", "window_ms"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (100, 0),
        (549, 0),
        (550, 30_000),
        (999.9, 30_000),
        (1000, 60_000),
        (2000, 120_000),
        (3000, 180_000),
        (14_999, 180_000),
        (15_000, 600_000),
        (ISOLATION_LATENCY, 600_000),
    ],
)
def test_not_available_duration_table(latency_ms: float, window_ms: int) -> None:
    assert not_available_duration(latency_ms) == window_ms
    assert MQFaultStrategy().compute_not_available_duration(latency_ms) == window_ms


def test_tables_pair_up() -> None:
    assert len(LATENCY_MAX) == len(NOT_AVAILABLE_DURATION) == 7
    assert list(LATENCY_MAX) == sorted(LATENCY_MAX)


@given(st.floats(0, 1e6), st.floats(0, 1e6))
def test_window_grows_with_latency(x: float, y: float) -> None:
    lo, hi = sorted((x, y))
    assert not_available_duration(lo) <= not_available_duration(hi)


def test_custom_tables_are_validated() -> None:
    with pytest.raises(ValueError, match="pair up"):
        MQFaultStrategy(latency_max=(1, 2), not_available_duration=(0,))
    with pytest.raises(ValueError, match="ascending"):
        MQFaultStrategy(latency_max=(2, 1), not_available_duration=(0, 0))
    s = MQFaultStrategy(latency_max=(0, 10), not_available_duration=(1, 5000))
    assert s.compute_not_available_duration(3) == 1
    assert s.compute_not_available_duration(10) == 5000


# -- fault windows ----------------------------------------------------------------------


def test_isolation_makes_a_broker_unavailable_for_ten_minutes() -> None:
    clock = FakeClock()
    s = strategy(clock)
    s.update_fault_item("a", 3, isolation=True)
    item = s.latency_fault_tolerance.items["a"]
    assert item.current_latency_ms == ISOLATION_LATENCY
    assert not s.latency_fault_tolerance.is_available("a")
    clock.advance(599.999)
    assert not s.latency_fault_tolerance.is_available("a")
    clock.advance(0.001)
    assert s.latency_fault_tolerance.is_available("a")


def test_slow_broker_unavailable_then_available_after_its_window() -> None:
    clock = FakeClock()
    s = strategy(clock)
    tolerance = s.latency_fault_tolerance
    s.update_fault_item("a", 600, isolation=False)
    assert not tolerance.is_available("a")
    clock.advance(29.9)
    assert not tolerance.is_available("a")
    clock.advance(0.1)
    assert tolerance.is_available("a")


def test_fast_send_keeps_or_makes_a_broker_available() -> None:
    clock = FakeClock()
    s = strategy(clock)
    tolerance = s.latency_fault_tolerance
    assert tolerance.is_available("never-seen")
    s.update_fault_item("a", 49, isolation=False)
    assert tolerance.is_available("a")
    s.update_fault_item("a", 0, isolation=True)
    assert not tolerance.is_available("a")
    s.update_fault_item("a", 20, isolation=False)  # a later fast send lifts the window
    assert tolerance.is_available("a")


def test_remove_forgets_a_broker() -> None:
    tolerance = LatencyFaultTolerance(FakeClock())
    tolerance.update_fault_item("a", 30_000, 600_000)
    tolerance.remove("a")
    tolerance.remove("unknown")
    assert tolerance.is_available("a")
    assert tolerance.pick_one_at_least() is None


# -- pick_one_at_least ------------------------------------------------------------------


def test_pick_one_at_least_with_one_item_or_none() -> None:
    tolerance = LatencyFaultTolerance(FakeClock())
    assert tolerance.pick_one_at_least() is None
    tolerance.update_fault_item("a", 30_000, 600_000)
    assert tolerance.pick_one_at_least() == "a"


def test_pick_one_at_least_round_robins_over_the_better_half() -> None:
    clock = FakeClock()
    tolerance = LatencyFaultTolerance(clock)
    tolerance.update_fault_item("slow", 5000, 180_000)
    tolerance.update_fault_item("failed", 30_000, 600_000)
    tolerance.update_fault_item("fast-but-unavailable", 600, 30_000)
    tolerance.update_fault_item("available", 900, 0)  # available ranks first
    picks = [tolerance.pick_one_at_least() for _ in range(10)]
    assert set(picks) == {"available", "fast-but-unavailable"}
    assert all(picks[i] != picks[i + 1] for i in range(9))


def test_pick_one_at_least_ranks_ties_by_earlier_window_end() -> None:
    clock = FakeClock()
    tolerance = LatencyFaultTolerance(clock)
    tolerance.update_fault_item("later", 1000, 60_000)
    clock.advance(-1)
    tolerance.update_fault_item("earlier", 1000, 60_000)
    clock.advance(1)
    tolerance.update_fault_item("worse", 2000, 120_000)
    # Three items: the better half is the single best one.
    assert {tolerance.pick_one_at_least() for _ in range(5)} == {"earlier"}


# -- TopicPublishInfo -------------------------------------------------------------------


def test_publish_info_round_robin_spreads_evenly() -> None:
    tp = info(start=0)
    picks = [tp.select_one() for _ in range(12 * 10)]
    assert picks[:12] == tp.message_queues[1:] + tp.message_queues[:1]
    assert set(Counter(picks).values()) == {10}


def test_publish_info_skips_the_last_failed_broker() -> None:
    tp = info(start=None)
    for _ in range(100):
        assert tp.select_one("b").broker_name != "b"


def test_publish_info_with_only_the_last_failed_broker_uses_it() -> None:
    tp = info(("a",), start=None)
    assert tp.select_one("a").broker_name == "a"


def test_publish_info_route() -> None:
    assert info().has_route()
    empty = TopicPublishInfo([])
    assert not empty.has_route()
    assert not empty.order_topic
    with pytest.raises(ValueError, match="has_route"):
        empty.select_one()


def test_counter_starts_at_random_and_never_goes_negative() -> None:
    starts = {RoundRobinIndex().next() for _ in range(20)}
    assert len(starts) > 1
    assert min(starts) > 0


# -- MQFaultStrategy --------------------------------------------------------------------


def test_selection_skips_unavailable_brokers_and_spreads_over_the_rest() -> None:
    clock = FakeClock()
    s = strategy(clock)
    tp = info(start=0)
    s.update_fault_item("b", 700, isolation=False)
    picks = [s.select_one_message_queue(tp, None) for _ in range(80)]
    assert {mq.broker_name for mq in picks} == {"a", "c"}
    assert set(Counter(picks).values()) == {10}
    clock.advance(30)
    assert {s.select_one_message_queue(tp, None).broker_name for _ in range(12)} == {
        "a",
        "b",
        "c",
    }


def test_selection_skips_the_last_failed_broker_even_when_available() -> None:
    s = strategy(FakeClock())
    tp = info(start=None)
    for _ in range(100):
        assert s.select_one_message_queue(tp, "a").broker_name != "a"


def test_selection_uses_last_broker_when_it_is_the_only_available_one() -> None:
    s = strategy(FakeClock())
    tp = info(start=None)
    s.update_fault_item("b", 0, isolation=True)
    s.update_fault_item("c", 0, isolation=True)
    assert {s.select_one_message_queue(tp, "a").broker_name for _ in range(20)} == {"a"}


def test_all_unavailable_falls_back_to_the_least_bad_broker() -> None:
    clock = FakeClock()
    s = strategy(clock)
    tp = info(("a", "b"), start=0)
    s.update_fault_item("a", 700, isolation=False)  # 30 s
    s.update_fault_item("b", 5, isolation=True)  # 10 min, latency 30 000
    picks = [s.select_one_message_queue(tp, "a") for _ in range(8)]
    assert {mq.broker_name for mq in picks} == {"a"}
    assert set(Counter(picks).values()) == {2}


def test_least_bad_broker_outside_the_topic_is_dropped_then_round_robin() -> None:
    clock = FakeClock()
    s = strategy(clock)
    tp = info(("a", "b"), start=0)
    s.update_fault_item("other-topic-broker", 5, isolation=False)
    s.update_fault_item("a", 0, isolation=True)
    s.update_fault_item("b", 0, isolation=True)
    mq = s.select_one_message_queue(tp, "a")
    assert mq.broker_name == "b"  # plain round robin, still avoiding the last failed broker
    assert "other-topic-broker" not in s.latency_fault_tolerance.items
    assert s.select_one_message_queue(tp, None).broker_name in {"a", "b"}


def test_disabled_strategy_is_plain_round_robin_and_records_nothing() -> None:
    s = strategy(FakeClock(), enabled=False)
    tp, twin = info(start=7), info(start=7)
    s.update_fault_item("a", 0, isolation=True)
    assert s.latency_fault_tolerance.items == {}
    assert [s.select_one_message_queue(tp, None) for _ in range(24)] == [
        twin.select_one() for _ in range(24)
    ]
    assert all(s.select_one_message_queue(tp, "a").broker_name != "a" for _ in range(24))


def test_strategy_can_be_switched_at_runtime() -> None:
    s = strategy(FakeClock(), enabled=False)
    tp = info(start=None)
    s.send_latency_fault_enable = True
    s.update_fault_item("a", 0, isolation=True)
    assert all(s.select_one_message_queue(tp, None).broker_name != "a" for _ in range(24))
    s.send_latency_fault_enable = False
    assert "a" in {s.select_one_message_queue(tp, None).broker_name for _ in range(24)}


brokers_st = st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True)


@given(
    brokers=brokers_st,
    faults=st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 40_000)),
    last=st.none() | st.sampled_from("abcdef"),
    start=st.integers(0, 1000),
)
def test_selection_prefers_available_brokers_other_than_the_last(
    brokers: list[str], faults: dict[str, float], last: str | None, start: int
) -> None:
    clock = FakeClock()
    s = strategy(clock)
    for name, latency in faults.items():
        s.update_fault_item(name, latency, isolation=False)
    tp = info(tuple(brokers), per_broker=2, start=start)
    available = [b for b in brokers if s.latency_fault_tolerance.is_available(b)]
    mq = s.select_one_message_queue(tp, last)
    assert mq in tp.message_queues
    if [b for b in available if b != last]:
        assert mq.broker_name in available
        assert mq.broker_name != last
    elif available:
        assert mq.broker_name == last
