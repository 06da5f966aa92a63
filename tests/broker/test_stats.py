"""BrokerStats: totals since boot and since midnight, TPS over the last minute."""

from __future__ import annotations

import datetime

from rocketq.broker.stats import SAMPLE_INTERVAL, BrokerStats


def test_tps_is_measured_over_the_last_minute() -> None:
    stats = BrokerStats(now=0.0)
    stats.puts += 100
    stats.got("g", "T", 40)
    assert stats.tps(now=10.0) == (10.0, 4.0)
    assert stats.consume_tps("g", ["T"], now=10.0) == 4.0
    assert stats.consume_tps("g", ["Other"], now=10.0) == 0.0
    # Snapshots every 10 s; after two minutes only the last minute counts.
    t = 0.0
    for _ in range(12):
        t += SAMPLE_INTERVAL
        stats.sample(t)
    stats.puts += 60  # 60 messages in the last 10 s
    put_tps, get_tps = stats.tps(now=t + SAMPLE_INTERVAL)
    assert put_tps == 60 / (7 * SAMPLE_INTERVAL) and get_tps == 0.0


def test_today_starts_again_after_midnight() -> None:
    stats = BrokerStats(now=0.0)
    stats.puts, stats.gets = 7, 3
    info = stats.runtime_info()
    assert info["msgPutTotalTodayNow"] == "7" and info["msgPutTotalTodayMorning"] == "0"
    stats._day = datetime.date.today() - datetime.timedelta(days=1)  # the clock passes midnight
    stats.sample(1.0)
    stats.puts += 2
    info = stats.runtime_info()
    assert (info["msgPutTotalTodayNow"], info["msgPutTotalTodayMorning"]) == ("9", "7")
    assert (info["msgGetTotalTodayNow"], info["msgGetTotalTodayMorning"]) == ("3", "3")


def test_no_time_passed_gives_no_tps() -> None:
    stats = BrokerStats(now=5.0)
    stats.puts += 1
    assert stats.tps(now=5.0) == (0.0, 0.0) and stats.consume_tps("g", ["T"], now=5.0) == 0.0
