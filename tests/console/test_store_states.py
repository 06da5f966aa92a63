"""The cluster page shows what cluster-list shows of a store and of a Raft member: a full
disk or a failed store in the Store column (the refusal as its title), a member rebuilt
from a snapshot, and each member's lag as its leader counts it."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from rocketq.console.cluster_view import cluster_data
from rocketq.sdk.admin import BrokerInfo

REFUSAL = "service not available now. It may be caused by one of the following reasons"


class FakeAdmin:
    def __init__(self, brokers: list[BrokerInfo]) -> None:
        self.brokers = brokers

    async def cluster_list(self) -> list[BrokerInfo]:
        return self.brokers

    async def broker_config(self, addr: str) -> dict[str, str]:
        return {"authentication_enabled": "false", "authorization_enabled": "false"}


def member(broker_id: int, role: str, **runtime: str) -> BrokerInfo:
    rt = {
        "raftSelfId": f"n{broker_id}",
        "raftRole": role,
        "raftTerm": "3",
        "raftLeader": "n0",
        "storeWriteState": "writable",
        "diskUsedRatio": "0.40",
        **runtime,
    }
    return BrokerInfo("c", "g", broker_id, f"127.0.0.1:{10911 + broker_id}", rt)


def test_full_failed_and_rebuilding_members_read_as_cluster_list_reads_them() -> None:
    brokers = [
        member(0, "LEADER", raftFollowerLagBytes="n1=0,n2=1835008"),
        member(
            1,
            "FOLLOWER",
            storeWriteState="disk-full",
            diskUsedRatio="0.93",
            storeWriteRefusal=REFUSAL,
        ),
        member(
            2,
            "FOLLOWER",
            storeWriteState="failed",
            raftRebuilding="true",
            raftSnapshotReceived="1048576",
            raftSnapshotSize="4194304",
        ),
    ]
    data = asyncio.run(cluster_data(cast(Any, FakeAdmin(brokers))))
    stores = [b["store"] for b in data["brokers"]]
    assert stores == ["ok", "disk-full 0.93", "failed"]
    assert data["brokers"][1]["store_refusal"] == REFUSAL
    lags = {r["member"]: (r["lag"], r["rebuilding"]) for r in data["raft"]}
    assert lags == {
        "n0": ("n1:0 n2:1835008", False),
        "n1": ("0", False),
        "n2": ("rebuilding 1048576/4194304", True),
    }
