"""A Raft member added at run time (LocalCluster.add_raft_member) is recorded in
cluster.json, and a handle loaded from the file knows it (to stop or restart it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.cluster.launcher import ClusterSpec, LauncherError, LocalCluster, Node


def test_a_loaded_cluster_knows_the_members_added_at_run_time(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterSpec(data_dir=tmp_path, replication="raft"))
    added = Node("broker-a-3", "broker", cluster.data_dir, broker_name="broker-a", broker_id=3)
    added.port, added.raft_port = 40123, 40124
    cluster.brokers.append(added)
    cluster._save()
    loaded = LocalCluster.load(tmp_path)
    again = loaded.node("broker-a-3")
    assert (again.broker_name, again.broker_id, again.port, again.raft_port) == (
        "broker-a",
        3,
        40123,
        40124,
    )
    assert [b.name for b in loaded.group_members("broker-a")][-1] == "broker-a-3"
    assert "n3-127.0.0.1:40124" in loaded.raft_peers(again)


def test_adding_a_member_needs_a_raft_group(tmp_path: Path) -> None:
    with pytest.raises(LauncherError, match="not raft"):
        LocalCluster(ClusterSpec(data_dir=tmp_path)).add_raft_member("broker-a")
    with pytest.raises(LauncherError, match="no broker group 'broker-x'"):
        LocalCluster(ClusterSpec(data_dir=tmp_path, replication="raft")).add_raft_member("broker-x")
