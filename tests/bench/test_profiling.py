"""Benchmark profiles: py-spy records real processes while a block runs and stops by pid;
``rocketq bench profile`` summarizes collapsed stacks per thread, by function."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.bench.profiling import (
    ProfileError,
    compare,
    find_py_spy,
    format_comparison,
    format_summary,
    note_messages,
    recording,
    summarize,
)
from rocketq.cli.main import app

_MAIN = "thread (0x7f01): MainThread;run (asyncio/runners.py:118)"


def _stacks(counted: list[tuple[str, int]]) -> str:
    """py-spy's raw format: a stack and its sample count per line."""
    return "".join(f"{stack} {count}\n" for stack, count in counted)


RAW = _stacks(
    [
        (f"{_MAIN};handle (broker/send.py:10);append (storage/commitlog.py:200)", 30),
        (f"{_MAIN};handle (broker/send.py:12);append (storage/commitlog.py:210)", 10),
        (f"{_MAIN};handle (broker/send.py:14)", 20),
        ("thread (0x7f01): MainThread;run (asyncio/runners.py:120)", 50),
        ("thread (0x7f02): commitlog-flush;flush (storage/flush.py:80)", 5),
    ]
)


def test_stacks_are_summed_per_thread_and_function(tmp_path: Path) -> None:
    path = tmp_path / "broker.txt"
    path.write_text(RAW)
    profile = summarize(path)
    assert profile.samples == 115
    assert {n: t.samples for n, t in profile.threads.items()} == {
        "MainThread": 110,
        "commitlog-flush": 5,
    }
    main = profile.threads["MainThread"]
    # Lines of one function count together; "total" counts a function once per stack.
    assert main.self_samples["append (storage/commitlog.py)"] == 40
    assert main.self_samples["handle (broker/send.py)"] == 20
    assert main.total_samples["handle (broker/send.py)"] == 60
    assert main.total_samples["run (asyncio/runners.py)"] == 110
    lines = format_summary(profile, top=2)
    assert lines[0].endswith("115 samples at 200 Hz")
    assert lines[1] == "  thread MainThread: 110 samples (0.6 s busy)"
    assert lines[-2:] == [
        "     45.5    100.0  run (asyncio/runners.py)",
        "     36.4     36.4  append (storage/commitlog.py)",
    ]
    flush = format_summary(profile, thread="commitlog-flush")
    assert flush[-1] == "    100.0    100.0  flush (storage/flush.py)"
    with pytest.raises(ProfileError, match=r"no thread 'nope'.*MainThread, commitlog-flush"):
        format_summary(profile, thread="nope")


@pytest.mark.parametrize(
    ("content", "says"),
    [("not a profile\n", "not a py-spy raw stack"), ("a;b c\n", "not a py-spy raw stack")],
)
def test_what_is_not_a_profile_is_a_clear_error(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "p.txt"
    path.write_text(content)
    with pytest.raises(ProfileError, match=says):
        summarize(path)
    result = CliRunner().invoke(app, ["bench", "profile", str(path)])
    assert result.exit_code == 1 and says in result.output
    missing = CliRunner().invoke(app, ["bench", "profile", str(tmp_path / "none.txt")])
    assert missing.exit_code == 1 and "cannot read the profile" in missing.output


def test_the_command_prints_and_emits_json(tmp_path: Path) -> None:
    path = tmp_path / "broker.txt"
    path.write_text(RAW)
    shown = CliRunner().invoke(app, ["bench", "profile", str(path), "--top", "1"])
    assert shown.exit_code == 0, shown.output
    assert "thread MainThread: 110 samples" in shown.output
    assert "45.5    100.0  run (asyncio/runners.py)" in shown.output
    as_json = CliRunner().invoke(app, ["bench", "profile", str(path), "--json"])
    doc = json.loads(as_json.output.strip().splitlines()[-1])
    top = doc[0]["threads"]["MainThread"]["top_self"]
    assert doc[0]["samples"] == 115 and top[1]["function"] == "append (storage/commitlog.py)"


OTHER = _stacks(
    [
        (f"{_MAIN};handle (broker/send.py:10);append (storage/commitlog.py:200)", 20),
        (f"{_MAIN};handle (broker/send.py:14)", 60),
        (f"{_MAIN};handle (broker/send.py:14);segment (broker/send.py:30)", 40),
        ("thread (0x7f02): commitlog-flush;flush (storage/flush.py:80)", 5),
    ]
)


def _recorded(path: Path, raw: str, messages: int | None) -> Path:
    """A profile as a benchmark leaves it: the stacks, the meta beside them (4 s at
    200 Hz), and the messages noted when given."""
    path.write_text(raw)
    path.with_name(path.stem + ".meta.json").write_text(json.dumps({"seconds": 4, "rate": 200}))
    if messages is not None:
        note_messages([path], messages)
    return path


def test_two_profiles_side_by_side_per_message(tmp_path: Path) -> None:
    base = summarize(_recorded(tmp_path / "one.txt", RAW, 1_000))
    other = summarize(_recorded(tmp_path / "many.txt", OTHER, 500))
    assert (base.messages, other.messages) == (1_000, 500)
    unit, changes = compare(base, other)
    assert unit == "µs/msg"
    # Own samples / rate / messages: append 40 samples over 1,000 messages at 200 Hz is
    # 200 µs per message; in the other, 20 over 500 is 200 as well.
    by_name = {c.function: (c.base, c.other) for c in changes}
    assert by_name["append (storage/commitlog.py)"] == pytest.approx((200.0, 200.0))
    assert by_name["handle (broker/send.py)"] == pytest.approx((100.0, 600.0))
    assert by_name["segment (broker/send.py)"] == pytest.approx((0.0, 400.0))
    assert by_name["run (asyncio/runners.py)"] == pytest.approx((250.0, 0.0))
    assert by_name["flush (storage/flush.py)"] == pytest.approx((25.0, 50.0))
    # The largest growth first, the largest fall last.
    assert [c.function for c in changes][:2] == [
        "handle (broker/send.py)",
        "segment (broker/send.py)",
    ]
    assert changes[-1].function == "run (asyncio/runners.py)"
    lines = format_comparison(base, other, top=2)
    assert lines[1] == (
        "  CPU per message (every thread): 575.0 -> 1250.0 µs (+675.0); 1,000 and 500 messages"
    )
    assert lines[3] == "    100.00   600.00  +500.00  handle (broker/send.py)"
    assert lines[-1] == "    250.00     0.00  -250.00  run (asyncio/runners.py)"


def test_without_message_counts_profiles_compare_as_shares(tmp_path: Path) -> None:
    base = summarize(_recorded(tmp_path / "one.txt", RAW, None))
    other = summarize(_recorded(tmp_path / "many.txt", OTHER, 500))
    unit, changes = compare(base, other)
    assert unit == "%"
    by_name = {c.function: (c.base, c.other) for c in changes}
    assert by_name["handle (broker/send.py)"] == pytest.approx((100 * 20 / 115, 100 * 60 / 125))
    assert "shares of all samples" in format_comparison(base, other)[1]
    # A meta that is not the recorder's is left alone and read as none.
    (tmp_path / "bad.meta.json").write_text("[1, 2]")
    (tmp_path / "bad.txt").write_text(RAW)
    note_messages([tmp_path / "bad.txt", tmp_path / "absent.txt"], 10)
    assert (tmp_path / "bad.meta.json").read_text() == "[1, 2]"
    assert summarize(tmp_path / "bad.txt").messages is None


def test_the_command_compares_two_profiles(tmp_path: Path) -> None:
    one = _recorded(tmp_path / "one.txt", RAW, 1_000)
    many = _recorded(tmp_path / "many.txt", OTHER, 500)
    shown = CliRunner().invoke(app, ["bench", "profile", str(one), str(many), "--compare"])
    assert shown.exit_code == 0, shown.output
    assert "+500.00  handle (broker/send.py)" in shown.output
    as_json = CliRunner().invoke(
        app, ["bench", "profile", str(one), str(many), "--compare", "--json"]
    )
    doc = json.loads(as_json.output.strip().splitlines()[-1])
    assert doc["unit"] == "µs/msg"
    assert doc["functions"][0] == {
        "function": "handle (broker/send.py)",
        "base": 100.0,
        "other": 600.0,
        "change": 500.0,
    }
    alone = CliRunner().invoke(app, ["bench", "profile", str(one), "--compare"])
    assert alone.exit_code == 2 and "two profiles" in alone.output
    bad = tmp_path / "bad.txt"
    bad.write_text("not a profile\n")
    broken = CliRunner().invoke(app, ["bench", "profile", str(one), str(bad), "--compare"])
    assert broken.exit_code == 1 and "not a py-spy raw stack" in broken.output


def test_a_real_process_is_recorded_and_py_spy_stopped(tmp_path: Path) -> None:
    assert find_py_spy() is not None, "py-spy is in the test dependencies"
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\n"
            "def spin(end):\n"
            "    while time.monotonic() < end: pass\n"
            "spin(time.monotonic() + 30)\n",
        ]
    )
    try:
        with recording([("spinner", busy.pid)], tmp_path, print) as files:
            # Sampled while the spinner burns a second and a half of CPU (a bounded wait).
            start = _cpu_seconds(busy.pid)
            deadline = time.monotonic() + 20
            while _cpu_seconds(busy.pid) - start < 1.5:
                assert time.monotonic() < deadline, "the spinner never ran"
                time.sleep(0.05)
        profile = summarize(files["spinner"])
    finally:
        busy.kill()
        busy.wait()
    main = profile.busiest
    assert main is not None and main.samples > 50
    assert main.self_samples.most_common(1)[0][0] == "spin (<string>)"


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_replication_profiles_are_of_the_plain_comparison() -> None:
    result = CliRunner().invoke(
        app, ["bench", "replication", "--compare-security", "--profile", "/tmp/unused"]
    )
    assert result.exit_code == 2 and "leave out --compare-security" in result.output


def test_a_replication_run_profiles_its_broker_and_client(tmp_path: Path) -> None:
    out = tmp_path / "profiles"
    result = CliRunner().invoke(
        app,
        [
            "bench", "replication", "--modes", "", "-c", "4", "--duration", "1",
            "--data-dir", str(tmp_path / "data"), "--profile", str(out), "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert sorted(Path(p).name for p in summary["profiles"]) == [
        "lone-r1-broker-a-0.txt",
        "lone-r1-client.txt",
    ]
    broker = summarize(out / "lone-r1-broker-a-0.txt")
    assert "MainThread" in broker.threads and broker.samples > 0
    # The time it was recorded is kept beside it: busy shares of that time.
    assert broker.rate == 200 and broker.seconds is not None and broker.seconds >= 1.0
    assert "% of the time)" in result.output
    assert f"{out / 'lone-r1-broker-a-0.txt'}: " in result.output
