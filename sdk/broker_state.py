"""What a broker's runtime info (``GetBrokerRuntimeInfo``, :class:`BrokerInfo`) says
about its store and its replication, as short texts: ``rocketq admin cluster-list`` and the
console's cluster page show the same words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rocketq.sdk.admin import BrokerInfo

NO_SLAVE: Final = "no slave"


def store_state(runtime: dict[str, str]) -> str:
    """Whether the broker's store takes writes: ``ok``, ``disk-full 0.93`` (the used ratio
    of its CommitLog's disk: sends refused until space is freed), ``failed`` (a write or
    fsync failed: sends refused until restart); "?" for a broker that does not say."""
    state = runtime.get("storeWriteState")
    if state is None:
        return "?"
    if state == "writable":
        return "ok"
    if state == "disk-full":
        return f"disk-full {runtime.get('diskUsedRatio', '?')}"
    return state


def replication_lag(runtime: dict[str, str]) -> str:
    """Bytes a master's best slave is behind it (a slave: behind its master); "no slave" for
    a master that has none connected now; "-" where the classic HA does not run (Raft)."""
    if runtime.get("haSlaves") == "0":  # first: older brokers sent their whole CommitLog
        return NO_SLAVE
    return runtime.get("haLagBytes", "-")


def raft_follower_lags(brokers: Sequence[BrokerInfo]) -> dict[str, dict[str, str]]:
    """Per broker group, the CommitLog bytes each Raft follower lacks, as its leader
    reports them (``raftFollowerLagBytes``: ``member=bytes,...``)."""
    out: dict[str, dict[str, str]] = {}
    for b in brokers:
        if b.runtime.get("raftRole") != "LEADER":
            continue
        table = out.setdefault(b.broker_name, {})
        for part in b.runtime.get("raftFollowerLagBytes", "").split(","):
            member, sep, lag = part.partition("=")
            if sep:
                table[member] = lag
    return out


def raft_lag(runtime: dict[str, str], follower_lags: dict[str, str]) -> str:
    """A Raft member's lag: ``rebuilding <received>/<size>`` while it receives a snapshot;
    a follower's CommitLog bytes behind its leader (as the leader counts them; "?" when no
    leader reports it); a leader's followers, ``n1:0 n2:512``."""
    if runtime.get("raftRebuilding") == "true":
        got, size = runtime.get("raftSnapshotReceived", "?"), runtime.get("raftSnapshotSize", "?")
        return f"rebuilding {got}/{size}"
    if runtime.get("raftRole") == "LEADER":
        return " ".join(f"{member}:{lag}" for member, lag in follower_lags.items()) or "0"
    return follower_lags.get(runtime["raftSelfId"], "?")


def raft_state(runtime: dict[str, str]) -> str:
    """``n1 LEADER t3`` / ``n0 FOLLOWER t3 ->n1``; "-" for a broker without Raft."""
    if "raftSelfId" not in runtime:
        return "-"
    text = f"{runtime['raftSelfId']} {runtime.get('raftRole', '?')} t{runtime.get('raftTerm', '?')}"
    leader = runtime.get("raftLeader", "")
    if leader and leader != runtime["raftSelfId"]:
        text += f" ->{leader}"
    return text
