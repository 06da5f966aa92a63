"""``rocketq cluster up --console`` starts the web console beside the cluster and prints
its URL; ``rocketq cluster down`` stops it."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from rocketq.cluster.console_launch import load_console


def rocketq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketq.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cluster_up_console_serves_the_cluster_page_and_down_stops_it(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    up = rocketq("cluster", "up", "--data-dir", str(data), "--console")
    try:
        assert up.returncode == 0, up.stderr
        url = re.search(r"console: (http://\S+)", up.stdout)
        assert url is not None, up.stdout
        with urllib.request.urlopen(url.group(1), timeout=10) as resp:
            page = resp.read().decode()
        assert resp.status == 200 and "broker-a" in page
        console = load_console(data)
        assert console is not None and console.alive()
    finally:
        down = rocketq("cluster", "down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert "console" in down.stdout
    assert not console.alive() and load_console(data) is None
