"""``rocketq bench recovery``: flags checked before anything starts, the broker's recovery
log lines read, and a run end to end on real processes at a few megabytes."""

from __future__ import annotations

import json
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
from rocketq.cluster.cli import app


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
