"""Short real chaos runs (bounded: about a minute each) through ``ChaosRun``, the code
behind ``rocketq chaos run``: Raft with kill-master, pause and (as root) partition, with
authentication, authorization and TLS on every node (``--auth --tls``), and SYNC_MASTER
master/slave with kill-master and kill-consumer. Each must lose nothing it
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
from rocketq.chaos.workload import TOPIC
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import RocketqError
from tests.chaos.real_runs import (
    FAST_RAFT,
    SMALL,
    assert_clean,
    assert_promises_kept,
    brokers_without_topic,
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


def refused_without_credentials_and_tls(cluster: LocalCluster) -> None:
    """While the run's clients send, the cluster refuses a client without TLS and one over
    TLS without credentials (the nameserver's list of every topic is a super user's)."""
    from rocketq.remoting.codes import RequestCode, ResponseCode
    from rocketq.remoting.command import RemotingCommand
    from rocketq.remoting.tls import ClientSecurity, client_context
    from rocketq.remoting.transport import request_blocking

    assert cluster.certs is not None and cluster.secrets is not None
    addr = cluster.nameservers[0].addr
    with pytest.raises(RocketqError):
        request_blocking(addr, RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 5.0)
    unsigned = ClientSecurity(ssl=client_context(str(cluster.certs.ca_file)))
    answer = request_blocking(
        addr,
        RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        5.0,
        security=unsigned,
    )
    assert answer.code == ResponseCode.NO_PERMISSION, answer.remark
    signed = request_blocking(
        addr,
        RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        5.0,
        security=cluster.client_security(),
    )
    assert signed.code == ResponseCode.SUCCESS, signed.remark


@pytest.mark.timeout(240)
def test_raft_kill_pause_partition_with_auth_and_tls_loses_nothing(tmp_path: Path) -> None:
    """Every client of the run (producers, consumers, the topic set-up, the harness's own
    status requests) signs as the super user over TLS, through killed, paused and cut-off
    leaders restarted with the secrets and certificates kept in the cluster's directory."""
    faults = ("kill-master", "pause") + (("partition",) if partition_allowed() else ())
    probed: list[str] = []
    holder: list[ChaosRun] = []

    def echo_and_probe(line: str) -> None:
        echo(line)
        if not probed and "consumer(s) running" in line:
            cluster = holder[0].cluster
            assert cluster is not None
            refused_without_credentials_and_tls(cluster)
            probed.append(line)

    opts = ChaosOptions(
        replication="raft",
        groups=2,
        nameservers=2,
        faults=faults,
        interval=2.5,
        fault_duration=2.5,
        duration=20,
        seed=7,
        rate=100,
        data_dir=tmp_path / "raft",
        settings=FAST_RAFT,
        auth=True,
        tls=True,
    )
    run, outcome = run_to_end(opts, say=echo_and_probe, started=holder.append)
    assert_promises_kept(outcome)
    assert probed, "the cluster was not probed while the run's clients sent"
    assert run.faults_made >= 3
    assert outcome.result.faults.get("kill-master", 0) >= 1
    # Every member has the topic: followers copy the leader's topics from the leader they
    # find through the nameservers (asked over TLS, signed), so a new leader serves it and
    # the group of each killed leader is sent to again.
    assert brokers_without_topic(run, TOPIC) == []
    assert outcome.result.failover_missing.get("kill-master") == 0, outcome.result.failovers
    if "partition" in faults:
        assert run.lab is not None  # the cut was made with nftables, not the proxy
    assert outcome.result.security == {"auth": True, "tls": True}
    doc, printed = check_again(run.history_path)
    assert doc["security"] == {"auth": True, "tls": True}
    assert "auth on" in printed and "TLS on" in printed


@pytest.mark.timeout(240)
def test_sync_master_kill_master_and_consumer_loses_nothing(tmp_path: Path) -> None:
    run, outcome = run_to_end(
        ChaosOptions(
            replication="ha",
            role="SYNC_MASTER",
            groups=2,
            nameservers=2,
            faults=("kill-master", "kill-consumer"),
            interval=2.5,
            fault_duration=2.5,
            duration=20,
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
            interval=2.5,
            fault_duration=2.5,
            duration=15,
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
