"""cluster-list's store column: whether each broker's store takes writes."""

from __future__ import annotations

from rocketq.cli.cluster_list import HEADER, rows, store_state
from rocketq.sdk.admin import BrokerInfo


def test_store_state_says_whether_writes_are_taken() -> None:
    assert store_state({"storeWriteState": "writable", "diskUsedRatio": "0.40"}) == "ok"
    full = {"storeWriteState": "disk-full", "diskUsedRatio": "0.93"}
    assert store_state(full) == "disk-full 0.93"
    assert store_state({"storeWriteState": "failed"}) == "failed"
    assert store_state({"error": "broker unreachable"}) == "?"


def test_the_store_column_follows_the_header() -> None:
    runtime = {
        "brokerRole": "ASYNC_MASTER",
        "storeWriteState": "disk-full",
        "diskUsedRatio": "0.91",
    }
    (row,) = rows([BrokerInfo("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", runtime)])
    assert dict(zip(HEADER, row, strict=True))["store"] == "disk-full 0.91"
