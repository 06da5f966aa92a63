"""cluster-list's replication_lag column for Raft members: the leader's followers, each
follower's own lag as its leader counts it, and a member receiving a snapshot."""

from __future__ import annotations

from rocketq.cli.cluster_list import HEADER, rows
from rocketq.sdk.admin import BrokerInfo

LAG = HEADER.index("replication_lag")


def member(self_id: str, role: str, **more: str) -> dict[str, str]:
    return {"raftSelfId": self_id, "raftRole": role, "raftTerm": "3", **more}


def test_raft_lag_column() -> None:
    brokers = [
        BrokerInfo(
            "C",
            "broker-a",
            0,
            "10.0.0.1:10911",
            member("n1", "LEADER", raftFollowerLagBytes="n0=0,n2=1835008"),
        ),
        BrokerInfo("C", "broker-a", 1, "10.0.0.2:10911", member("n0", "FOLLOWER")),
        BrokerInfo(
            "C",
            "broker-a",
            3,
            "10.0.0.3:10911",
            member(
                "n2",
                "FOLLOWER",
                raftRebuilding="true",
                raftSnapshotReceived="3145728",
                raftSnapshotSize="10485760",
            ),
        ),
        # Another group, whose leader does not answer: its follower's lag is not known.
        BrokerInfo("C", "broker-b", 1, "10.0.0.4:10911", member("n0", "FOLLOWER")),
    ]
    shown = [r[LAG] for r in rows(brokers)]
    assert shown == ["n0:0 n2:1835008", "0", "rebuilding 3145728/10485760", "?"]


def test_a_lone_leader_has_no_lag() -> None:
    lone = BrokerInfo("C", "broker-a", 0, "10.0.0.1:10911", member("n0", "LEADER"))
    assert rows([lone])[0][LAG] == "0"
