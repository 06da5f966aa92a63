"""``rocketq bench recovery``: flags checked before anything starts, the broker's recovery
log lines read, and a run end to end on real processes at a few megabytes; the same for
its ``--topics`` mode (graceful restart and crash recovery by topic count)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.bench.recovery_bench import (
    SizeResult,
    check_options,
    parse_sizes,
    read_recovery_log,
)
from rocketq.bench.report import BenchOptionError
from rocketq.bench.restart_bench import (
    CountResult,
    RestartResult,
    check_mode,
    check_topics_options,
    json_report,
    parse_topic_counts,
    read_start_log,
    table,
)
from rocketq.cli.main import app


def test_sizes_are_two_ascending_and_checked() -> None:
    assert parse_sizes("3,0.4") == [0.4, 3.0]
    assert parse_sizes("2") == [0.25, 2.0]  # one size runs a small one too
    for bad in ("", "x", "0", "-1,2", "1,2,3", "5000", "nan"):
        with pytest.raises(BenchOptionError) as info:
            parse_sizes(bad)
        assert info.value.flag == "--gb"


def test_options_name_the_flag_at_fault() -> None:
    check_options(senders=8, batch=32, size=1024, segment_size=1 << 20)
    with pytest.raises(BenchOptionError) as info:
        check_options(senders=8, batch=32, size=1024, segment_size=8192)
    assert info.value.flag == "--segment-size"
    with pytest.raises(BenchOptionError) as info:
        check_options(senders=8, batch=1024, size=8192, segment_size=1 << 30)
    assert info.value.flag == "--batch"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--gb", "big"], "comma list"),
        (["--gb", "1,2,3"], "at most two"),
        (["--segment-size", "8192"], "too small"),
        (["--senders", "0"], "--senders"),
    ],
)
def test_bad_flags_fail_before_anything_starts(tmp_path: Path, flags: list[str], says: str) -> None:
    result = CliRunner().invoke(
        app, ["bench", "recovery", *flags, "--data-dir", str(tmp_path / "data")]
    )
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not (tmp_path / "data").exists()


def test_the_broker_log_lines_are_read() -> None:
    result = SizeResult(1.0)
    read_recovery_log(
        "x WARNING rocketq.storage.recovery: the store did not shut down cleanly: checked 52416 "
        "records (61326720 bytes) of the CommitLog from offset 3366417792 (the checkpoint's "
        "flushed offsets), end at 3427744512; re-dispatch from offset 2709645248 (718099264 "
        "bytes)\nx INFO rocketq.storage.message_store: re-dispatch after recovery caught up at "
        "CommitLog offset 3427744512 in 0.856 s\n",
        result,
    )
    assert (result.scanned_records, result.scanned_bytes, result.scan_from) == (
        52416,
        61326720,
        3366417792,
    )
    assert result.from_checkpoint is True
    assert (result.commitlog_bytes, result.redispatch_bytes) == (3427744512, 718099264)
    assert result.redispatch_caught_up_s == 0.856


def test_a_tiny_run_end_to_end(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "recovery",
            "--gb",
            "0.002,0.004",
            "--segment-size",
            str(1 << 20),
            "--data-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    report = json.loads(lines[-1])
    assert report["bench"] == "recovery"
    assert (report["senders"], report["batch"], report["size"]) == (8, 32, 1024)
    sizes = report["sizes"]
    assert [s["gb"] for s in sizes] == [0.002, 0.004]
    for s in sizes:
        assert s["messages"] >= s["gb"] * 1e9 / 1024
        assert s["send_failed"] == 0
        assert s["restart_to_send_ok_s"] > 0 and s["restart_to_ready_s"] > 0
        # The restarted broker's recovery log: it checked and re-dispatched the records
        # its checkpoint did not cover, up to the CommitLog's end.
        assert s["commitlog_bytes"] >= s["messages"] * 1024
        assert 0 < s["scanned_records"] <= s["messages"]
        assert 0 < s["scanned_bytes"] <= s["commitlog_bytes"]
        assert 0 < s["redispatch_bytes"] <= s["commitlog_bytes"]
        assert isinstance(s["from_checkpoint"], bool)
        assert s["redispatch_caught_up_s"] >= 0
    assert report["send_ok_ratio"] > 0
    assert any("to SEND_OK s" in line for line in lines)  # the table
    assert not any(p.name.startswith("bench-recovery-") for p in tmp_path.iterdir())


# -- --topics: graceful restart and crash recovery by topic count ---------------------------


def test_topic_counts_are_one_or_two_ascending_and_checked() -> None:
    assert parse_topic_counts("10000,1") == [1, 10000]
    assert parse_topic_counts("50") == [1, 50]  # one count runs one topic too
    assert parse_topic_counts("1") == [1]
    for bad in ("", "x", "1,a", "0,5", "1,2,3", "100001"):
        with pytest.raises(BenchOptionError) as info:
            parse_topic_counts(bad)
        assert info.value.flag == "--topics"


def test_the_flags_of_one_mode_are_refused_in_the_other() -> None:
    check_mode(topics=None, gb="1", messages=None, senders=4, batch=8)
    check_mode(topics="1,10", gb=None, messages=10, senders=None, batch=None)
    with pytest.raises(BenchOptionError) as info:
        check_mode(topics="1,10", gb="0.4", messages=None, senders=None, batch=None)
    assert info.value.flag == "--gb"
    assert "--topics and --gb do not go together" in str(info.value)
    with pytest.raises(BenchOptionError) as info:
        check_mode(topics="1,10", gb=None, messages=None, senders=8, batch=None)
    assert info.value.flag == "--senders"
    with pytest.raises(BenchOptionError) as info:
        check_mode(topics=None, gb=None, messages=5, senders=None, batch=None)
    assert info.value.flag == "--messages"
    check_topics_options(messages=1, size=1024)
    with pytest.raises(BenchOptionError) as info:
        check_topics_options(messages=0, size=1024)
    assert info.value.flag == "--messages"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--topics", "many"], "comma list"),
        (["--topics", "1,10,100"], "at most two"),
        (["--topics", "0,10"], "between 1"),
        (["--topics", "1,200000"], "between 1"),
        (["--topics", "1,10", "--gb", "0.4"], "--topics and --gb"),
        (["--topics", "1,10", "--messages", "0"], "at least 1"),
        (["--messages", "10"], "--messages"),
    ],
)
def test_bad_topics_flags_fail_before_anything_starts(
    tmp_path: Path, flags: list[str], says: str
) -> None:
    result = CliRunner().invoke(
        app, ["bench", "recovery", *flags, "--data-dir", str(tmp_path / "data")]
    )
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not (tmp_path / "data").exists()


def _restart(kind: str, send_ok_s: float, *, crash: bool) -> RestartResult:
    return RestartResult(
        kind,
        stop_s=0.2 if not crash else 0.05,
        restart_to_ready_s=send_ok_s + 0.1,
        restart_to_send_ok_s=send_ok_s,
        steps_s={"first_line": 0.3, "store_loaded": send_ok_s / 2},
        queues_loaded=40_000,
        recovery="checked" if crash else "fast",
        scanned_records=100_000 if crash else -1,
        scanned_bytes=118_000_000 if crash else -1,
        from_checkpoint=True if crash else None,
        redispatch_bytes=118_000_000 if crash else -1,
        redispatch_caught_up_s=0.9 if crash else -1.0,
        topics_routed=10_000,
        topics_verified=10,
    )


def test_the_topics_table_and_json_line() -> None:
    one = CountResult(1, messages=1000, create_s=0.01, fill_s=[0.5, 0.4])
    one.restarts = {
        "graceful": _restart("graceful", 0.5, crash=False),
        "crash": _restart("crash", 0.6, crash=True),
    }
    many = CountResult(10_000, messages=1000, create_s=20.0, fill_s=[0.8, 0.9])
    many.restarts = {
        "graceful": _restart("graceful", 2.0, crash=False),
        "crash": _restart("crash", 3.0, crash=True),
    }
    lines = table([one, many])
    assert "to SEND_OK s" in lines[0] and "stop s" in lines[0]
    rows = lines[1:5]
    assert [r.split()[:2] for r in rows] == [
        ["1", "graceful"],
        ["1", "crash"],
        ["10,000", "graceful"],
        ["10,000", "crash"],
    ]
    assert "118.0" in rows[3] and "0.90" in rows[3]
    assert lines[5] == "graceful: topics x10,000, stop x1.00, time to the first SEND_OK x4.00"
    assert lines[6] == "crash: topics x10,000, stop x1.00, time to the first SEND_OK x5.00"

    report = json.loads(json_report([one, many], messages=1000, size=1024))
    assert (report["bench"], report["mode"]) == ("recovery", "topics")
    assert (report["queues"], report["messages"], report["size"]) == (4, 1000, 1024)
    assert [c["topics"] for c in report["counts"]] == [1, 10_000]
    crash = report["counts"][1]["crash"]
    assert crash["restart_to_send_ok_s"] == 3.0 and crash["redispatch_bytes"] == 118_000_000
    assert report["counts"][1]["graceful"]["recovery"] == "fast"
    assert report["counts"][0]["fill_msgs_per_s"] == [2000.0, 2500.0]
    assert report["ratios"] == {
        "graceful": {"stop": 1.0, "restart_to_send_ok": 4.0},
        "crash": {"stop": 1.0, "restart_to_send_ok": 5.0},
    }
    # One count: rows, no ratio.
    assert len(table([one])) == 3
    assert "ratios" not in json.loads(json_report([one], messages=1000, size=1024))


def test_the_start_up_steps_are_read_from_the_broker_log() -> None:
    started = datetime(2025, 5, 1, 10, 0, 0).timestamp()
    text = (
        "2025-05-01 10:00:00,400 INFO rocketq.broker.broker: loading\n"
        "2025-05-01 10:00:01,250 WARNING rocketq.storage.recovery: the store did not shut "
        "down cleanly: checked 2002 records (2348346 bytes) of the CommitLog from offset "
        "2347173 (the checkpoint's flushed offsets), end at 4695519; re-dispatch from offset "
        "2347173 (2348346 bytes)\n"
        "2025-05-01 10:00:01,300 INFO rocketq.storage.message_store: store loaded from /d/store: "
        "CommitLog [0, 4695519), 40000 queues, checked 2002 records (2348346 bytes) from "
        "offset 2347173; 2348346 bytes to dispatch\n"
        "2025-05-01 10:00:01,500 INFO rocketq.broker.broker: The broker[broker-a, "
        "127.0.0.1:1] boot success. role ASYNC_MASTER, name server is 127.0.0.1:2\n"
        "2025-05-01 10:00:02,000 INFO rocketq.broker.registration: registered with "
        "nameserver 127.0.0.1:2\n"
        "2025-05-01 10:00:02,100 INFO rocketq.storage.message_store: re-dispatch after "
        "recovery caught up at CommitLog offset 4695519 in 0.700 s\n"
    )
    result = RestartResult("crash")
    read_start_log(text, started, result)
    assert result.steps_s == pytest.approx(
        {"first_line": 0.4, "store_loaded": 1.3, "boot": 1.5, "registered": 2.0}
    )
    assert (result.queues_loaded, result.recovery, result.commitlog_bytes) == (
        40000,
        "checked",
        4695519,
    )
    assert (result.scanned_records, result.scanned_bytes) == (2002, 2348346)
    assert result.from_checkpoint is True
    assert (result.redispatch_bytes, result.redispatch_caught_up_s) == (2348346, 0.7)

    clean = RestartResult("graceful")
    read_start_log(
        "2025-05-01 10:00:00,900 INFO rocketq.storage.message_store: store loaded from /d: "
        "CommitLog [0, 4695519), 40000 queues, fast recovery; 0 bytes to dispatch\n",
        started,
        clean,
    )
    assert (clean.recovery, clean.queues_loaded, clean.redispatch_bytes) == ("fast", 40000, -1)
    assert clean.steps_s == pytest.approx({"first_line": 0.9, "store_loaded": 0.9})


def test_a_small_topics_run_end_to_end(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "recovery",
            "--topics",
            "1,50",
            "--messages",
            "2000",
            "--segment-size",
            str(1 << 20),
            "--data-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    report = json.loads(lines[-1])
    assert (report["bench"], report["mode"], report["messages"]) == ("recovery", "topics", 2000)
    counts = report["counts"]
    assert [c["topics"] for c in counts] == [1, 50]
    for c in counts:
        assert c["send_failed"] == 0 and len(c["fill_s"]) == 2
        graceful, crash = c["graceful"], c["crash"]
        for r in (graceful, crash):
            assert r["stop_s"] > 0 and r["restart_to_send_ok_s"] > 0
            assert r["queues_loaded"] >= 4 * c["topics"]
            # Every topic routed again, a sample of them holding their messages.
            assert r["topics_routed"] == c["topics"]
            assert 1 <= r["topics_verified"] <= min(c["topics"], 10)
            assert r["log_steps_s"]["store_loaded"] <= r["restart_to_ready_s"]
        assert graceful["recovery"] == "fast" and graceful["redispatch_bytes"] == -1
        # The crash came after the second fill: its recovery checked and re-dispatched
        # what the checkpoint did not cover. How much that is depends on when the
        # ConsumeQueues were last flushed (a queue is flushed once it has two dirty pages,
        # as one topic's four queues may during the fill), so only that there was some.
        assert crash["recovery"] == "checked"
        assert 0 < crash["scanned_bytes"] <= crash["commitlog_bytes"]
        assert crash["redispatch_bytes"] > 0
        assert crash["redispatch_caught_up_s"] >= 0
    assert set(report["ratios"]) == {"graceful", "crash"}
    assert any("to SEND_OK s" in line for line in lines)  # the table
    assert any(line.startswith("crash: topics x50") for line in lines)
    assert not any(p.name.startswith("bench-restart-") for p in tmp_path.iterdir())
