"""``rocketq bench spark``: a run end to end on a tiny backlog, in a process of its own
(an embedded cluster and a local Spark, both stopped by the command): the write, the
batch read and the streaming read, each against the SDK."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rocketq.bench.profiling import summarize

RUN_TIMEOUT_S = 540.0


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_tiny_run_reports_both_ratios(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cmd = [
        sys.executable,
        "-m",
        "rocketq.cli.main",
        "bench",
        "spark",
        "--embedded",
        "--data-dir",
        str(data),
        "--messages",
        "2000",
        "--size",
        "64",
        "--queues",
        "4",
        "--profile",
        str(tmp_path / "profiles"),
        "--json",
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("NAMESRV_ADDR", None)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,  # its cluster and Spark's JVM in one group, killed on timeout
    )
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        pytest.fail(f"rocketq bench spark ran over {RUN_TIMEOUT_S:.0f} s:\n{out[-4000:]}")
    assert proc.returncode == 0, out[-4000:]
    lines = out.strip().splitlines()
    result = json.loads(lines[-1])
    assert result["bench"] == "spark"
    assert result["messages"] == 2000 and result["size"] == 64 and result["queues"] == 4
    # The SDK writes whole batches of 32 (2,016) after one warm-up send.
    assert result["backlog"] == 2017
    for side in ("write", "read", "stream"):
        pair = result[side]
        for field in ("sdk_msgs_per_s", "spark_msgs_per_s", "ratio"):
            assert isinstance(pair[field], (int, float)) and pair[field] > 0, (side, pair)
        assert pair["ratio"] == pytest.approx(
            pair["spark_msgs_per_s"] / pair["sdk_msgs_per_s"], rel=0.02
        )
    # The stream reads the SDK's backlog, against the SDK's read rate.
    assert result["stream"]["sdk_msgs_per_s"] == result["read"]["sdk_msgs_per_s"]
    assert result["session_start_s"] > 0 and result["warmup_s"] > 0
    assert result["warmup_messages"] == 1000
    assert any(line.startswith("write ") for line in lines)  # the table
    assert any(line.startswith("stream ") for line in lines)
    # Each phase's CPU per message by process: the SDK's client is the bench process, the
    # Spark phases run in the JVM and its Python workers; the embedded broker does both.
    cpu = result["cpu_us_per_msg"]
    assert set(cpu) == {"sdk_write", "spark_write", "sdk_read", "spark_read", "spark_stream"}
    for phase in ("sdk_write", "sdk_read"):
        assert cpu[phase]["bench process"] > 0 and cpu[phase]["broker"] > 0, cpu
    for phase in ("spark_write", "spark_read", "spark_stream"):
        assert cpu[phase]["Spark JVM"] > 0 and cpu[phase]["Spark Python workers"] > 0, cpu
    assert any(line.startswith("  Spark Python workers") for line in lines)
    # --profile: py-spy recorded the data source's Python workers in each Spark phase, and
    # the SDK's event loop thread there is in the profile (the tasks' pulls and sends).
    assert result["profile_dir"] == str(tmp_path / "profiles")
    for phase in ("spark_write", "spark_read", "spark_stream"):
        files = sorted((tmp_path / "profiles").glob(f"{phase}-worker-*.txt"))
        assert files, phase
        assert any("rocketq-sdk" in summarize(f).threads for f in files), phase
    # The command stopped its cluster: its temporary data directory is gone.
    assert not any(p.name.startswith("bench-cluster-") for p in data.iterdir())
