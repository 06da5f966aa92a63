"""Changing a Raft group's members from a chaos run: a new member started by the launcher
(``LocalCluster.add_raft_member``) and added to its group, an old one removed from its
group and stopped, as an operator replacing a failed host does with ``rocketq admin raft
add-member`` and ``remove-member``."""

from __future__ import annotations

from rocketq.chaos.history import ChaosError
from rocketq.cluster.launcher import LocalCluster, Node


class RaftMembership:
    """Adds and removes members of ``cluster``'s Raft groups."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def missing(self) -> str | None:
        """What this build lacks to change a group's members, or None."""
        if not hasattr(self.cluster, "add_raft_member"):
            return "the launcher cannot start a new Raft member (LocalCluster.add_raft_member)"
        return None

    def add(self, group: str) -> Node:
        """Start a new member of ``group`` on new ports and add it to the group."""
        reason = self.missing()
        if reason is not None:
            raise ChaosError(f"replace-member: {reason}")
        node: Node = self.cluster.add_raft_member(group)  # type: ignore[attr-defined]
        return node

    def remove(self, group: str, node: Node) -> None:
        """Take ``node`` out of ``group`` and stop it for good."""
        remove = getattr(self.cluster, "remove_raft_member", None)
        if remove is None:
            raise ChaosError(
                "replace-member: the launcher cannot remove a Raft member "
                "(LocalCluster.remove_raft_member)"
            )
        remove(node.name)
