"""The launcher never loses a port race: another program takes a port the launcher chose
before the node (or the Raft group) could bind it, and ``rocketq cluster up``, a Raft
cluster and a chaos run still come up, on other ports."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rocketq.cluster.launcher as launcher
from rocketq.chaos.runner import ChaosOptions, ChaosRun
from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster, free_ports
from tests.chaos.real_runs import FAST_RAFT, assert_clean, assert_promises_kept


@pytest.fixture
def taken_once(held_port: int, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The launcher's port chooser, answering the held port first the first time it is
    asked for each number of ports (as if another program took the port it chose); the
    answers, in order."""
    real = launcher.free_ports
    answers: list[list[int]] = []

    def choose(count: int) -> list[int]:
        ports = real(count)
        if count not in {len(a) for a in answers} and held_port not in ports:
            ports[0] = held_port
        answers.append(ports)
        return ports

    monkeypatch.setattr(launcher, "free_ports", choose)
    return answers


def test_cluster_up_raft_and_a_chaos_run_come_up_when_a_chosen_port_is_taken(
    tmp_path: Path,
    held_port: int,
    taken_once: list[list[int]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "rocketq.cluster.launcher")
    # `rocketq cluster up` on a fixed nameserver port: the launcher chooses that
    # nameserver's metrics port (the other nodes bind port 0 for theirs and report them),
    # and is handed the held port.
    (namesrv_port,) = free_ports(1)
    data = tmp_path / "up"
    runner = CliRunner()
    up = runner.invoke(
        app,
        ["cluster", "up", "--data-dir", str(data), "--namesrv-port", str(namesrv_port),
         "--replication", "ha", "--set", "mapped_file_size_commit_log=67108864"],
    )  # fmt: skip
    try:
        assert up.exit_code == 0, up.output
        assert [a[0] for a in taken_once] == [held_port, taken_once[1][0]]  # chosen twice
        cluster = LocalCluster.load(data)
        assert cluster.nameservers[0].port == namesrv_port
        ports = {n.name: (n.port, n.metrics_port) for n in cluster.nodes}
        assert all(held_port not in p and all(p) for p in ports.values()), ports
        assert cluster.brokers[0].ha_port  # the master's, which its slave reaches
        assert cluster.status().all_alive
        doc = json.loads((data / "cluster.json").read_text())
        assert doc["nameservers"][0]["metrics_port"] == taken_once[1][0]
        assert "starting namesrv-0 again on new ports (attempt 2 of 5)" in caplog.text
    finally:
        down = runner.invoke(app, ["cluster", "down", "--data-dir", str(data)])
        assert down.exit_code == 0, down.output

    # A Raft cluster in a chaos run (`rocketq chaos run --replication raft`) whose first
    # Raft port is taken: the group starts again on new Raft ports.
    taken_once.clear()
    caplog.clear()
    run = ChaosRun(
        ChaosOptions(
            replication="raft",
            groups=1,
            nameservers=1,
            producers=1,
            consumers=1,
            faults=("pause",),
            interval=1.5,
            fault_duration=1.5,
            duration=4,
            seed=5,
            rate=100,
            data_dir=tmp_path / "chaos",
            settings=FAST_RAFT,
        ),
        echo=print,
    )
    try:
        outcome = run.run()
    finally:
        assert_clean(run)
    assert taken_once[0][0] == held_port
    assert "broker-a-0 could not listen on its raft port" in caplog.text
    assert "starting broker-a-0, broker-a-1, broker-a-2 again on new ports" in caplog.text
    assert outcome.recovered and not outcome.result.partial
    assert outcome.result.acked > 0
    assert_promises_kept(outcome)
