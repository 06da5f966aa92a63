"""Two short real chaos runs (bounded: about a minute each) through ``ChaosRun``, the code
behind ``rocketq chaos run``: Raft with kill-master, pause and (as root) partition, and
SYNC_MASTER master/slave with kill-master and kill-consumer. Each must lose nothing it
acknowledged and receive nothing it never sent, and leave no process, network namespace
or nftables table behind. The second run's history is checked again by
``rocketq chaos check``, which must agree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketq.chaos.netns import netns_unavailable_reason
from rocketq.chaos.runner import ChaosOptions, ChaosRun
from tests.chaos.real_runs import (
    FAST_RAFT,
    SMALL,
    assert_clean,
    assert_promises_kept,
    check_again,
    echo,
    run_to_end,
)


def partition_allowed() -> bool:
    reason = netns_unavailable_reason()
    if reason is None:
        return True
    if os.environ.get("CI") and os.geteuid() == 0:
        pytest.fail(f"the partition fault cannot run here: {reason}")
    return False


@pytest.mark.timeout(240)
def test_raft_kill_pause_partition_loses_nothing(tmp_path: Path) -> None:
    faults = ("kill-master", "pause") + (("partition",) if partition_allowed() else ())
    run, outcome = run_to_end(
        ChaosOptions(
            replication="raft",
            groups=2,
            nameservers=2,
            faults=faults,
            interval=3,
            fault_duration=3,
            duration=25,
            seed=7,
            rate=100,
            data_dir=tmp_path / "raft",
            settings=FAST_RAFT,
        )
    )
    assert_promises_kept(outcome)
    assert run.faults_made >= 3
    if "partition" in faults:
        assert run.lab is not None  # the cut was made with nftables, not the proxy


@pytest.mark.timeout(240)
def test_sync_master_kill_master_and_consumer_loses_nothing(tmp_path: Path) -> None:
    run, outcome = run_to_end(
        ChaosOptions(
            replication="ha",
            role="SYNC_MASTER",
            groups=2,
            nameservers=2,
            faults=("kill-master", "kill-consumer"),
            interval=3,
            fault_duration=3,
            duration=25,
            seed=3,
            rate=100,
            data_dir=tmp_path / "ha",
            settings=SMALL,
        )
    )
    assert_promises_kept(outcome)
    assert run.faults_made >= 3
    doc, _ = check_again(run.history_path)
    assert doc["lost"] == 0 and doc["unexpected"] == 0
    assert sum(doc["faults"].values()) == run.faults_made


@pytest.mark.timeout(240)
def test_async_master_kill_random_nameserver_and_restart_reports_its_loss_window(
    tmp_path: Path,
) -> None:
    """ASYNC_MASTER promises no more than what its master had: a loss is reported (as a
    window), not a broken promise; the other faults heal and the run completes."""
    run, outcome = run_to_end(
        ChaosOptions(
            replication="ha",
            role="ASYNC_MASTER",
            groups=2,
            nameservers=2,
            faults=("kill-random", "kill-nameserver", "restart"),
            interval=3,
            fault_duration=3,
            duration=20,
            seed=11,
            rate=100,
            data_dir=tmp_path / "async",
            settings=SMALL,
        )
    )
    result = outcome.result
    assert result.unexpected == 0
    assert outcome.broken == []  # with or without a loss window
    assert (result.loss_window is None) == (result.lost == 0)
    assert sum(result.faults.values()) == run.faults_made >= 2


def test_an_interrupted_run_stops_everything_it_started(tmp_path: Path) -> None:
    """Ctrl-C in the middle of a fault: the paused master is resumed and every process
    stopped by pid; the history says how far the run got."""

    def echo_until_the_pause(line: str) -> None:
        echo(line)
        if " pause " in f" {line} ":
            raise KeyboardInterrupt

    run = ChaosRun(
        ChaosOptions(
            replication="ha",
            groups=1,
            nameservers=1,
            consumers=1,
            producers=1,
            faults=("pause",),
            interval=2,
            fault_duration=30,
            duration=60,
            data_dir=tmp_path / "cut",
            settings=SMALL,
        ),
        echo=echo_until_the_pause,
    )
    with pytest.raises(KeyboardInterrupt):
        run.run()
    assert_clean(run)
    from rocketq.chaos.checker import check
    from rocketq.chaos.history import read_history

    result = check(read_history(run.history_path), str(run.history_path))
    assert result.partial and result.faults == {"pause": 1}
