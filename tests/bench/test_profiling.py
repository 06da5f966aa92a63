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
    find_py_spy,
    format_summary,
    recording,
    summarize,
)
from rocketq.cli.main import app

_MAIN = "thread (0x7f01): MainThread;run (asyncio/runners.py:118)"
RAW = "".join(
    f"{stack} {count}\n"
    for stack, count in [
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
