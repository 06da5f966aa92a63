"""Changing a Raft group's members from a chaos run, as an operator replacing a failed host
does: a new member started by the launcher (``LocalCluster.add_raft_member``) and added to
its group, an old one taken out of its group and then stopped. The changes are the requests
``rocketq admin raft add-member`` and ``remove-member`` send (RAFT_ADD_MEMBER,
RAFT_REMOVE_MEMBER), sent by the harness itself to the leader the members report, signed
and over TLS as the cluster requires (a process per change would cost seconds under
load)."""

from __future__ import annotations

import signal
import time
from typing import Final

from rocketq.chaos.disk import SmallDisks
from rocketq.chaos.history import ChaosError
from rocketq.chaos.members import group_leader
from rocketq.cluster.launcher import LocalCluster, Node, raft_member_id
from rocketq.common.exceptions import RocketqError
from rocketq.remoting.codes import ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import request_blocking

CHANGE_TIMEOUT_S: Final = 10.0  # one request
CHANGE_WAIT_S: Final = 20.0  # a change, asked again until then
LEADER_WAIT_S: Final = 15.0
RETRY_PAUSE_S: Final = 0.5


class RaftMembership:
    """Adds and removes members of ``cluster``'s Raft groups; ``removed`` gets the name of
    every member stopped for good (taken out, or never added), which the run neither starts
    again nor expects to catch up."""

    def __init__(
        self, cluster: LocalCluster, removed: set[str], disks: SmallDisks | None = None
    ) -> None:
        self.cluster = cluster
        self.removed = removed
        self.disks = disks

    def _change(self, group: str, code: int, ext: dict[str, str]) -> None:
        """Send a membership change to ``group``'s leader, again (to the leader then) until
        it is taken or ``CHANGE_WAIT_S`` pass: leadership may move, and a leader takes one
        change at a time (a new member's promotion to voter is one)."""
        deadline = time.monotonic() + CHANGE_WAIT_S
        while True:
            leader = group_leader(self.cluster, group, time.monotonic() + LEADER_WAIT_S)
            if leader is None:
                why, by = "no leader", group
            else:
                by = leader.name
                try:
                    answer = request_blocking(
                        self.cluster.node(leader.name).addr,
                        RemotingCommand(code, dict(ext)),
                        CHANGE_TIMEOUT_S,
                        security=self.cluster.client_security(),
                    )
                    if answer.code == ResponseCode.SUCCESS:
                        return
                    why = f"code {answer.code}: {answer.remark}"
                except (RocketqError, OSError) as exc:
                    why = str(exc)
            if time.monotonic() >= deadline:
                raise ChaosError(f"{by} refused the change {ext} of {group}: {why}")
            time.sleep(RETRY_PAUSE_S)

    def add(self, group: str) -> Node:
        """Start a new member of ``group`` on new ports and add it to the group (it joins
        as a learner and becomes a voter once it has caught up). In a run with small disks
        the new member gets one too, mounted on the home the launcher gives it (the
        group's name and the next broker id) before it starts."""
        if self.disks is not None:
            next_id = max(b.broker_id for b in self.cluster.group_members(group)) + 1
            home = self.cluster.data_dir / f"{group}-{next_id}"
            if home not in self.disks.mounts:  # mounted by an attempt that failed
                self.disks.mount(home)
        node = self.cluster.add_raft_member(group)
        ext = {"member": raft_member_id(node), "address": f"{node.host}:{node.raft_port}"}
        try:
            self._change(group, RocketqRequestCode.RAFT_ADD_MEMBER, ext)
        except ChaosError:
            self.removed.add(node.name)
            self.cluster.kill(node.name, signal.SIGTERM)
            raise
        return node

    def remove(self, group: str, node: Node) -> None:
        """Take ``node`` out of ``group``, then stop it for good."""
        ext = {"member": raft_member_id(node)}
        self._change(group, RocketqRequestCode.RAFT_REMOVE_MEMBER, ext)
        self.removed.add(node.name)
        self.cluster.kill(node.name, signal.SIGTERM)
