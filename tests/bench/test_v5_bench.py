"""``rocketq bench produce|consume --protocol v5``: the SDK and RocketMQ 5's official client
on one embedded broker in one run, both rates and their ratio; the driver processes'
events, and a driver that fails or says nothing stops the run with its reason."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.bench.v5_bench import default_processes, limit, parse_endpoints
from rocketq.bench.v5_drivers import V5BenchError, driver_argv, parse_event, started_drivers
from rocketq.cli.main import app


def _last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes: its parent has not reaped it yet.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2] != "Z"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_sides(doc: dict, bench: str) -> None:
    assert doc["bench"] == bench and doc["protocol"] == "v5"
    assert doc["remoting"]["msgs_per_s"] > 0
    assert doc["v5"]["msgs_per_s"] > 0
    assert doc["v5"]["errors"] == 0
    assert doc["ratio"] == pytest.approx(doc["round_ratios"][0], abs=1e-3)
    assert doc["ratio"] > 0
    assert doc["goal_ratio"] == 0.7 and isinstance(doc["goal_met"], bool)
    remoting, v5 = doc["windows"][0]
    # The broker's pid is known (--embedded): what each side cost it.
    assert remoting["broker_us_per_msg"] > 0 and v5["broker_us_per_msg"] > 0
    assert v5["processes"] == doc["processes"] == len(v5["drivers"])
    assert isinstance(doc["v5_limit"], str)
    assert 0 < v5["machine_busy"] <= os.cpu_count()


def test_produce_runs_both_protocols_and_reports_the_ratio(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "bench", "produce", "--embedded", "--data-dir", str(tmp_path),
            "--protocol", "v5", "-c", "8", "-s", "512", "--duration", "1", "--rounds", "1",
            "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = _last_json(result.output)
    _check_sides(doc, "produce-v5")
    assert doc["processes"] == min(default_processes(), 8)
    assert doc["in_flight_per_process"] * doc["processes"] >= 8
    assert "v5/remoting:" in result.output and "driver process" in result.output


def test_consume_runs_both_protocols_and_reports_the_ratio(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "bench", "consume", "--embedded", "--data-dir", str(tmp_path),
            "--protocol", "v5", "--backlog", "3000", "--duration", "2", "--rounds", "1",
            "--processes", "1", "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = _last_json(result.output)
    _check_sides(doc, "consume-v5")
    assert doc["backlog"] == 3000 and doc["processes"] == 1
    remoting, v5 = doc["windows"][0]
    assert remoting["msgs"] <= 3000 and v5["msgs"] <= 3000


def test_a_running_cluster_is_reached_through_its_endpoint(tmp_path: Path) -> None:
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    spec = ClusterSpec(data_dir=tmp_path / "cluster", grpc=True, metrics=False)
    with LocalCluster(spec) as cluster:
        endpoint = f"{cluster.brokers[0].host}:{cluster.brokers[0].grpc_port}"
        result = CliRunner().invoke(
            app,
            [
                "bench", "produce", "-n", cluster.namesrv_addr, "--v5-endpoint", endpoint,
                "--protocol", "v5", "-c", "4", "-s", "256", "--duration", "1", "--rounds", "1",
                "--processes", "1", "--json",
            ],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = _last_json(result.output)
    assert doc["remoting"]["msgs_per_s"] > 0 and doc["v5"]["msgs_per_s"] > 0
    assert doc["v5"]["errors"] == 0 and doc["processes"] == 1
    # Its broker's pid is not ours to read: no broker CPU, and no verdict from it.
    assert doc["v5"]["broker_us_per_msg"] is None and doc["v5_limit"] is None
    assert "the broker's pid is not known" in result.output


def test_driver_lines_are_read_as_events() -> None:
    assert parse_event('{"event": "ready", "pid": 12}\n') == {"event": "ready", "pid": 12}
    result = parse_event('{"event": "result", "msgs": 5, "elapsed_s": 1.5}')
    assert result == {"event": "result", "msgs": 5, "elapsed_s": 1.5}
    # What the client may print besides: not events.
    for other in ("", "a log line", "{not json", "[1, 2]", '{"msgs": 5}', '{"event": 3}'):
        assert parse_event(other) is None


def test_a_driver_against_a_bad_endpoint_fails_with_its_reason(tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{_closed_port()}"
    argv = driver_argv("produce", endpoint, "BenchmarkTest", 1.0, {"size": 64})
    started = time.monotonic()
    pids: list[int] = []
    with pytest.raises(V5BenchError) as info, started_drivers([argv], tmp_path) as drivers:
        pids = [d.pid for d in drivers]  # not reached: it never gets ready
    assert time.monotonic() - started < 60
    message = str(info.value)
    assert "v5 driver driver1" in message and endpoint in message
    assert "apache.rocketmq.v2 endpoint" in message
    assert not pids


def test_a_driver_that_exits_or_says_nothing_stops_the_run(tmp_path: Path) -> None:
    exits = [sys.executable, "-c", "import sys; print('starting'); sys.exit(4)"]
    with (
        pytest.raises(V5BenchError, match=r"exited \(status 4\) before 'ready'"),
        started_drivers([exits], tmp_path / "a"),
    ):
        pass
    # Silent until its input is closed: not ready in time, then stopped by its pid.
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    started = time.monotonic()
    with (
        pytest.raises(V5BenchError, match="did not report 'ready' in time") as info,
        started_drivers([silent], tmp_path / "b", startup_timeout=1.0),
    ):
        pass
    assert time.monotonic() - started < 30
    pid = int(str(info.value).split("(pid ")[1].split(")")[0])
    assert not _alive(pid)


def test_v5_options_are_checked_before_anything_starts(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, words in [
        (["produce", "--processes", "2"], "only with --protocol v5"),
        (["consume", "--v5-endpoint", "127.0.0.1:1"], "only with --protocol v5"),
        (["produce", "--protocol", "v5", "--embedded", "-b", "4"], "leave out -b"),
        (["produce", "--protocol", "v5", "--embedded", "--replication", "ha"], "one broker"),
    ]:
        result = runner.invoke(app, ["bench", *args, "--data-dir", str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert words in result.output
    assert not any(tmp_path.iterdir())


def test_what_limited_a_window() -> None:
    assert limit(0.95, 0.5, cores=2).startswith("the broker is the limit")
    assert limit(0.7, 1.1, cores=2).startswith("the cores are full")
    # Other work on the machine counts: its cores are full though ours use 1.2 of them.
    assert limit(0.6, 0.6, 1.9, cores=2).startswith("the cores are full")
    assert limit(0.5, 0.5, 1.0, cores=2).startswith("neither the broker nor the cores")
    assert "machine 1.00 of 2" in limit(0.5, 0.5, 1.0, cores=2)


def test_how_many_drivers_and_endpoints() -> None:
    # The broker keeps a core; a driver at full load takes about half of one.
    assert [default_processes(c) for c in (1, 2, 4)] == [1, 2, 6]
    assert parse_endpoints("127.0.0.1:8081; 10.0.0.2:8081") == ("127.0.0.1:8081", "10.0.0.2:8081")
    for bad in ("", "host", "host:port", ":8081", "h:0"):
        with pytest.raises(V5BenchError, match="--v5-endpoint"):
            parse_endpoints(bad)
