from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.cluster.cli import app

runner = CliRunner()


def test_bench_store_prints_tps_and_json(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["bench", "store", "--messages", "500", "--json", "--dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert any(line.startswith("[Store] Send TPS:") for line in lines)
    assert any(line.startswith("[Raw]") for line in lines)
    fields = json.loads(lines[-1])
    assert fields["messages"] == fields["stored_messages"] == 500
    assert fields["flush"] == "async" and fields["writers"] == 1 and fields["batch"] == 32
    assert fields["msgs_per_s"] > 0 and fields["ratio"] > 0
    assert list(tmp_path.iterdir()) == []  # the run's directory is removed


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--flush", "fast"], ["--flush", "async", "sync"]),
        (["--size", "0"], ["--size"]),
        (["--writers", "0"], ["--writers"]),
        (["--segment-size", "8192"], ["--batch", "--segment-size"]),
    ],
)
def test_bad_flags_are_usage_errors(args: list[str], words: list[str]) -> None:
    result = runner.invoke(app, ["bench", "store", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    for word in words:
        assert word in result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["replication", "--modes", "raft,paxos"], ["paxos", "async_master", "raft"]),
        (["replication", "--rounds", "0"], ["--rounds"]),
        (["failover", "--set", "novalue"], ["KEY=VALUE", "novalue"]),
        (["failover", "--kills", "0"], ["--kills"]),
    ],
)
def test_bad_replication_bench_flags_start_nothing(args: list[str], words: list[str]) -> None:
    result = runner.invoke(app, ["bench", *args], env={"COLUMNS": "200"})
    assert result.exit_code != 0
    assert all(w in result.output for w in words), result.output
    assert "Traceback" not in result.output
