"""``rocketq bench produce --sweep`` (auto_batch on against off over a grid) and
``--topics N``: the grid's flags checked before anything starts, the table's arithmetic,
and short runs on one real cluster shared by the module."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.bench.auto_batch_sweep import (
    TABLE_HEAD,
    SweepGrid,
    SweepRow,
    parse_grid_list,
    size_text,
    summary_line,
    table,
    worst,
)
from rocketq.bench.client_bench import embedded_cluster, topic_names
from rocketq.bench.report import BenchOptionError
from rocketq.cli.main import app

COLUMNS = ["topics", "in flight", "size", "msgs/s on", "msgs/s off", "on/off", "batched"]


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One nameserver and broker for the module's runs, stopped and removed after them."""
    base = tmp_path_factory.mktemp("sweep")
    with embedded_cluster(str(base), lambda _line: None) as cluster:
        yield cluster.namesrv_addr
    assert list(base.iterdir()) == []  # the cluster's data dir went with it


def _invoke(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["bench", "produce", *args])
    return result.exit_code, result.output.splitlines()


# -- flags ------------------------------------------------------------------------------------


def test_grid_lists_are_parsed_sorted_and_checked() -> None:
    assert parse_grid_list("--sweep-topics", "100,1,10,10", 1, 100) == (1, 10, 100)
    grid = SweepGrid.parse()
    assert grid.topics == (1, 10, 100, 1000, 10000)
    assert grid.threads == (1, 4, 32, 256)
    assert grid.sizes == (128, 1024, 65536)
    assert grid.cells == 60
    for flag, bad in (("--sweep-topics", "x"), ("--sweep-threads", "0,4"), ("--sweep-sizes", "")):
        lists = {"--sweep-topics": "1", "--sweep-threads": "1", "--sweep-sizes": "128", flag: bad}
        with pytest.raises(BenchOptionError) as info:
            SweepGrid.parse(*lists.values())
        assert info.value.flag == flag


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sweep-topics", "1,10"], "--sweep-topics: only with --sweep"),
        (["--sweep", "-c", "32"], "--sweep: leave out -c (use --sweep-threads)"),
        (["--sweep", "--topics", "10"], "--topics (use --sweep-topics)"),
        (["--sweep", "--no-auto-batch"], "--no-auto-batch (the sweep runs both)"),
        (["--sweep", "--sweep-sizes", "0"], "between 1 and"),
    ],
)
def test_bad_sweep_flags_fail_before_anything_starts(
    tmp_path: Path, args: list[str], says: str
) -> None:
    code, lines = _invoke("--embedded", "--data-dir", str(tmp_path), *args)
    assert code == 2 and says in " ".join(" ".join(lines).split()), lines
    assert not any(tmp_path.iterdir())


def test_pin_needs_the_embedded_cluster(tmp_path: Path) -> None:
    code, lines = _invoke("-n", "127.0.0.1:1", "--pin", "--sweep", "--data-dir", str(tmp_path))
    assert code == 2 and "pinning needs --embedded" in " ".join(lines), lines
    assert not any(tmp_path.iterdir())


def test_pinning_puts_the_cluster_and_the_client_on_different_cpus() -> None:
    """``--pin``: every thread of the cluster's processes on the last CPU, this process's
    on the others (put back by the benchmark when it ends, as here)."""
    import os
    import subprocess
    import sys

    from rocketq.bench.client_bench import _pin_threads, check_pin, pin_apart

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        with pytest.raises(BenchOptionError, match="two CPUs"):
            check_pin(True)
        return
    check_pin(True)
    # A child with a second thread, as a broker has its flush and warming threads.
    child = subprocess.Popen(
        [sys.executable, "-c", "import threading, time\n"
         "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
         "print('up', flush=True)\ntime.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    mine = os.sched_getaffinity(0)
    said: list[str] = []
    try:
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        pin_apart([child.pid], said.append)
        for tid in os.listdir(f"/proc/{child.pid}/task"):
            assert os.sched_getaffinity(int(tid)) == {cpus[-1]}
        assert os.sched_getaffinity(0) == set(cpus[:-1])
        assert said == [f"pinned: the cluster's 1 processes to CPU {cpus[-1]}, the client to "
                        f"CPU {','.join(map(str, cpus[:-1]))}"]  # fmt: skip
    finally:
        _pin_threads(os.getpid(), mine)
        child.kill()
        child.wait()
    assert os.sched_getaffinity(0) == mine


def test_queues_beyond_the_memory_maps_are_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocketq.bench.client_bench as client_bench

    limit = tmp_path / "max_map_count"
    limit.write_text("65530\n")
    monkeypatch.setattr(client_bench, "MAX_MAP_COUNT", str(limit))
    client_bench.check_memory_maps(10_000, 4)  # 40,000 ConsumeQueue files fit
    with pytest.raises(BenchOptionError, match=r"vm\.max_map_count"):
        client_bench.check_memory_maps(10_000, 8)
    data = tmp_path / "data"
    for args in (["--sweep", "--sweep-topics", "1,10000", "--queues", "8"],
                 ["--topics", "10000", "--queues", "8"]):  # fmt: skip
        code, lines = _invoke("--embedded", "--data-dir", str(data), *args)
        assert code == 2 and "vm.max_map_count" in " ".join(lines), lines
    assert not data.exists()
    monkeypatch.setattr(client_bench, "MAX_MAP_COUNT", str(tmp_path / "absent"))
    client_bench.check_memory_maps(1_000_000, 1024)  # nothing to check against


def test_topic_names() -> None:
    assert topic_names("T", 1) == ["T"]
    assert topic_names("T", 3) == ["T-0", "T-1", "T-2"]
    with pytest.raises(BenchOptionError):
        topic_names("T", 0)


# -- the table ----------------------------------------------------------------------------------


def _row(
    topics: int,
    in_flight: int,
    size: int,
    on: list[float],
    off: list[float],
    sent: int = 1_000,
    batched: int = 0,
) -> SweepRow:
    row = SweepRow(topics, in_flight, size)
    row.rates["on"].extend(on)
    row.rates["off"].extend(off)
    row.on_sent, row.on_batched = sent, batched
    return row


def test_rows_take_the_median_of_their_rounds_and_the_worst_is_named() -> None:
    rows = [
        _row(1, 32, 1024, [30_000, 36_000, 33_000], [20_000, 22_000, 21_000], 99_000, 98_000),
        _row(1000, 32, 1024, [21_000, 25_000, 20_000], [25_000, 26_000, 24_000], 66_000, 33_000),
        _row(10, 1, 65536, [1_000], [0]),  # off sent nothing: no ratio
    ]
    assert rows[0].msgs_per_s("on") == 33_000 and rows[0].msgs_per_s("off") == 21_000
    assert rows[0].ratio == pytest.approx(33 / 21)
    assert rows[1].ratio == pytest.approx(21 / 25)
    assert rows[2].ratio == 0.0
    assert worst(rows) is rows[2]
    assert worst(rows[:2]) is rows[1]
    assert summary_line(rows[:2]) == (
        "worst on/off: 0.84 at 1,000 topics, 32 in flight, 1 KiB (on 21,000, off 25,000 "
        "msgs/s); on slower than off in 1 of 2 rows, 0 of them with no message batched (the "
        "same requests as off); worst where on batched: 0.84 at 1,000 topics, 32 in flight, "
        "1 KiB"
    )
    # Rows where on batched nothing sent what off sent: told apart from the others.
    same = _row(1, 1, 128, [4_500], [5_000])
    assert summary_line([rows[0], same]) == (
        "worst on/off: 0.90 at 1 topic, 1 in flight, 128 B (on 4,500, off 5,000 msgs/s); on "
        "slower than off in 1 of 2 rows, 1 of them with no message batched (the same "
        "requests as off)"
    )
    assert summary_line(rows[:1]).endswith("on slower than off in 0 of 1 rows")
    lines = table(rows[:2])
    assert lines[0] == TABLE_HEAD
    assert lines[1].split() == ["1", "32", "1", "KiB", "33,000", "21,000", "1.57", "99%"]
    assert lines[2].split() == ["1,000", "32", "1", "KiB", "21,000", "25,000", "0.84", "50%"]
    assert [size_text(s) for s in (128, 1024, 1536, 65536, 1 << 20)] == [
        "128 B", "1 KiB", "1536 B", "64 KiB", "1 MiB"
    ]  # fmt: skip
    doc = rows[1].to_dict()
    assert doc["on_rounds"] == [21_000, 25_000, 20_000] and doc["ratio"] == 0.84
    assert doc["on_batched_share"] == 0.5


# -- runs on a real cluster --------------------------------------------------------------------


def test_a_tiny_sweep_prints_every_combination_and_their_ratios(namesrv: str) -> None:
    code, lines = _invoke(
        "-n", namesrv, "-t", "SweepTest", "--sweep", "--sweep-topics", "1,3",
        "--sweep-threads", "1,4", "--sweep-sizes", "128", "--duration", "0.3", "--json",
    )  # fmt: skip
    assert code == 0, lines
    doc = json.loads(lines[-1])
    assert doc["bench"] == "produce-sweep" and doc["rounds"] == 1 and doc["duration_s"] == 0.3
    rows = doc["rows"]
    assert [(r["topics"], r["in_flight"], r["size"]) for r in rows] == [
        (1, 1, 128), (1, 4, 128), (3, 1, 128), (3, 4, 128)
    ]  # fmt: skip
    for r in rows:
        assert r["on_failed"] == 0 and r["off_failed"] == 0, r
        assert r["on_msgs_per_s"] > 0 and r["off_msgs_per_s"] > 0, r
        assert r["on_rounds"] == [r["on_msgs_per_s"]] and r["off_rounds"] == [r["off_msgs_per_s"]]
        assert r["ratio"] == pytest.approx(r["on_msgs_per_s"] / r["off_msgs_per_s"], abs=0.001)
    low = min(rows, key=lambda r: r["ratio"])
    assert doc["worst"] == low
    assert doc["slower_rows"] == sum(1 for r in rows if r["ratio"] < 1.0)
    # One send in flight never waits for company: nothing batched, on sends what off sends.
    assert [r["on_batched_share"] for r in rows if r["in_flight"] == 1] == [0.0, 0.0]
    assert all(0.0 <= r["on_batched_share"] <= 1.0 for r in rows)
    # The table: its head, then one line per row with the same figures.
    head = lines.index(TABLE_HEAD)
    assert TABLE_HEAD.split() == " ".join(COLUMNS).split()
    for line, r in zip(lines[head + 1 : head + 5], rows, strict=True):
        cells = line.split()
        assert cells[:4] == [str(r["topics"]), str(r["in_flight"]), "128", "B"]
        assert float(cells[4].replace(",", "")) == pytest.approx(r["on_msgs_per_s"], abs=0.5)
        assert float(cells[5].replace(",", "")) == pytest.approx(r["off_msgs_per_s"], abs=0.5)
        assert float(cells[6]) == pytest.approx(
            r["ratio"], abs=0.006
        )  # two decimals of the 3-decimal JSON figure
        assert float(cells[7].rstrip("%")) == pytest.approx(100 * r["on_batched_share"], abs=0.6)
    summary = lines[head + 5]
    assert summary.startswith("worst on/off: ")
    # Two decimals of the unrounded ratio, against the JSON's three.
    assert float(summary.split()[2]) == pytest.approx(low["ratio"], abs=0.006)
    topics = "1 topic" if low["topics"] == 1 else "3 topics"
    assert f"{topics}, {low['in_flight']} in flight, 128 B" in summary
    # Each topic count's topics were created once, before its runs.
    assert sum(1 for line in lines if "created" in line) == 2


def test_produce_goes_round_robin_over_its_topics(namesrv: str) -> None:
    from rocketq.sdk.admin import Admin

    code, lines = _invoke(
        "-n", namesrv, "-t", "ManyTest", "--topics", "3", "-c", "4", "--queues", "2",
        "--duration", "0.5", "--json",
    )  # fmt: skip
    assert code == 0, lines
    doc = json.loads(lines[-1])
    assert doc["topics"] == 3 and doc["msgs"] > 0 and doc["failed"] == 0

    async def stored() -> dict[str, list[int]]:
        async with Admin(namesrv) as admin:
            return {
                name: [q.max_offset for q in await admin.topic_status(name)]
                for name in topic_names("ManyTest", 3)
            }

    queues = asyncio.run(stored())
    assert all(len(offsets) == 2 for offsets in queues.values()), queues  # --queues 2
    counts = {name: sum(offsets) for name, offsets in queues.items()}
    # The timed sends and one warm-up send per topic, spread evenly over the three.
    assert sum(counts.values()) == doc["msgs"] + 3
    assert max(counts.values()) - min(counts.values()) <= 4 + 1, counts
