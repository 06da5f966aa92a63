"""``rocketq cluster up --monitor`` starts a Prometheus that scrapes every node, prints its
URL, and ``rocketq cluster down`` stops it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocketq.cluster.monitor import load_monitor
from tests.monitoring.conftest import need_prometheus, wait_for_series


def rocketq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketq.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cluster_up_monitor_scrapes_every_node_and_down_stops_it(tmp_path: Path) -> None:
    need_prometheus()
    data = tmp_path / "cluster"
    up = rocketq("cluster", "up", "--data-dir", str(data), "--monitor")
    try:
        assert up.returncode == 0, up.stderr
        url = re.search(r"prometheus: (http://\S+)", up.stdout)
        assert url is not None, up.stdout
        # Both jobs are scraped and up.
        for job in ("rocketq-broker", "rocketq-nameserver"):
            found = wait_for_series(url.group(1), f'up{{job="{job}"}} == 1')
            assert len(found) == 1
        monitor = load_monitor(data)
        assert monitor is not None and monitor.alive()
    finally:
        down = rocketq("cluster", "down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert "prometheus" in down.stdout
    assert not monitor.alive()
    assert load_monitor(data) is None


def test_the_scrape_config_lists_every_node_by_job(tmp_path: Path) -> None:
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster
    from rocketq.cluster.monitor import scrape_config

    cluster = LocalCluster(ClusterSpec(data_dir=tmp_path, brokers=2, nameservers=2))
    for port, node in enumerate(cluster.nodes, start=20000):
        node.metrics_port = port
    doc = scrape_config(cluster, scrape_interval="2s", rules=None)
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert [t["targets"] for t in jobs["rocketq-nameserver"]["static_configs"]] == [
        ["127.0.0.1:20000"],
        ["127.0.0.1:20001"],
    ]
    assert len(jobs["rocketq-broker"]["static_configs"]) == 2
    assert doc["global"]["scrape_interval"] == "2s" and "rule_files" not in doc


def test_a_cluster_without_metrics_cannot_be_monitored(tmp_path: Path) -> None:
    from rocketq.cluster.launcher import ClusterSpec, LauncherError, LocalCluster
    from rocketq.cluster.monitor import start_monitor

    need_prometheus()
    cluster = LocalCluster(ClusterSpec(data_dir=tmp_path, metrics=False))
    with pytest.raises(LauncherError, match="serve no metrics"):
        start_monitor(cluster)
