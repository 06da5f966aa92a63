from __future__ import annotations

import pytest

from rocketq.cli.cluster_list import HEADER, NO_SLAVE, raft_state, replication_lag, rows
from rocketq.sdk.admin import BrokerInfo

LONE_MASTER = {
    "brokerRole": "ASYNC_MASTER",
    "commitLogMaxOffset": "441",
    "haSlaves": "0",
    "haSlaveAckOffset": "-1",
}


@pytest.mark.parametrize(
    ("runtime", "shown"),
    [
        (LONE_MASTER, NO_SLAVE),
        # A broker from before haLagBytes was left out without a slave: its whole CommitLog.
        ({**LONE_MASTER, "haLagBytes": "441"}, NO_SLAVE),
        ({"brokerRole": "SYNC_MASTER", "haSlaves": "1", "haLagBytes": "0"}, "0"),
        ({"brokerRole": "ASYNC_MASTER", "haSlaves": "2", "haLagBytes": "4096"}, "4096"),
        ({"brokerRole": "SLAVE", "haMaster": "127.0.0.1:10912", "haLagBytes": "96"}, "96"),
        ({"brokerRole": "ASYNC_MASTER", "raftSelfId": "n0", "raftRole": "LEADER"}, "-"),
        ({"error": "broker unreachable"}, "-"),
    ],
)
def test_replication_lag(runtime: dict[str, str], shown: str) -> None:
    assert replication_lag(runtime) == shown


def test_raft_state() -> None:
    assert raft_state(LONE_MASTER) == "-"
    leader = {"raftSelfId": "n1", "raftRole": "LEADER", "raftTerm": "3", "raftLeader": "n1"}
    assert raft_state(leader) == "n1 LEADER t3"
    follower = {"raftSelfId": "n0", "raftRole": "FOLLOWER", "raftTerm": "3", "raftLeader": "n1"}
    assert raft_state(follower) == "n0 FOLLOWER t3 ->n1"


def test_rows_follow_the_header() -> None:
    brokers = [
        BrokerInfo("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", LONE_MASTER),
        BrokerInfo("DefaultCluster", "broker-b", 0, "127.0.0.1:10921", {"error": "down"}),
    ]
    lone, down = (dict(zip(HEADER, row, strict=True)) for row in rows(brokers))
    assert lone["broker"] == "broker-a" and lone["role"] == "ASYNC_MASTER"
    assert lone["max_offset"] == "441" and lone["replication_lag"] == NO_SLAVE
    assert lone["raft"] == lone["committed"] == "-" and lone["error"] == ""
    assert down["role"] == "?" and down["replication_lag"] == "-" and down["error"] == "down"
