"""The membership of a Raft group as one member sees it, for admins (``rocketq admin raft
members``): the configuration and, on the leader, each member's progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketq.replication.raft.node import RaftNode, Role


def describe(node: RaftNode, end_of: Callable[[int], int] | None = None) -> dict[str, Any]:
    """The group's membership as ``node`` sees it, for admins: the configuration and, on
    the leader, each member's match index and lag in entries (and in CommitLog bytes,
    given ``end_of``: the CommitLog end after an entry)."""
    index, members = node.members_history.latest()
    last = node.log.last_index()
    leading = node.role is Role.LEADER

    def lag_bytes(match: int) -> int | None:
        if end_of is None:
            return None
        try:
            return max(0, end_of(last) - end_of(max(match, 0)))
        except (LookupError, ValueError, OSError):
            return None  # entries compacted below it: a snapshot tells it

    rows = []
    for member, address in sorted(members.addresses.items()):
        row: dict[str, Any] = {"id": member, "address": address, "state": members.role_of(member)}
        if member == node.node_id:
            row["role"] = node.role.value
            row["matchIndex"] = last
        elif leading and member in node.progress:
            pr = node.progress[member]
            row["role"] = "LEARNER" if member in node.learners else "FOLLOWER"
            row["matchIndex"] = pr.match_index
            row["lagEntries"] = max(0, last - pr.match_index)
            row["lagBytes"] = lag_bytes(pr.match_index)
            row["lastAckSecondsAgo"] = round(max(0.0, node.clock() - pr.last_ack), 1)
        rows.append(row)
    return {
        "self": node.node_id,
        "selfState": members.role_of(node.node_id),
        "role": node.role.value,
        "term": node.term,
        "leader": node.leader or "",
        "commitIndex": node.commit_index,
        "lastIndex": last,
        "configIndex": index,
        "changeCommitted": index <= node.commit_index,
        "members": rows,
    }
