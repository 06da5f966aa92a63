"""The table of ``rocketq admin cluster-list``: one row per broker, read from the runtime
info it reports (``GetBrokerRuntimeInfo``), for people and, with ``--json``, for tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from rocketq.sdk.broker_state import (
    NO_SLAVE,
    raft_follower_lags,
    raft_lag,
    raft_state,
    replication_lag,
    store_state,
)

if TYPE_CHECKING:
    from rocketq.sdk.admin import BrokerInfo

__all__ = [
    "HEADER",
    "NO_SLAVE",
    "raft_follower_lags",
    "raft_lag",
    "raft_state",
    "replication_lag",
    "rows",
    "store_state",
]

HEADER: Final = (
    "cluster",
    "broker",
    "id",
    "address",
    "role",
    "raft",
    "max_offset",
    "committed",
    "replication_lag",
    "dispatch_behind",
    "store",
    "error",
)


def rows(brokers: Sequence[BrokerInfo]) -> list[list[object]]:
    """One row per broker, in :data:`HEADER`'s order."""
    lags = raft_follower_lags(brokers)
    return [
        [
            b.cluster,
            b.broker_name,
            b.broker_id,
            b.addr,
            b.runtime.get("brokerRole", "?"),
            raft_state(b.runtime),
            b.runtime.get("commitLogMaxOffset", "?"),
            b.runtime.get("raftCommittedOffset", "-"),
            raft_lag(b.runtime, lags.get(b.broker_name, {}))
            if "raftSelfId" in b.runtime
            else replication_lag(b.runtime),
            b.runtime.get("dispatchBehindBytes", "?"),
            store_state(b.runtime),
            b.runtime.get("error", ""),
        ]
        for b in brokers
    ]
