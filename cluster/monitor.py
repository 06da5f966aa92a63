"""``rocketq cluster up --monitor``: a Prometheus beside a local cluster.

The ``prometheus`` binary (Debian's package) runs with a scrape config generated from
``cluster.json``: job ``rocketq-nameserver`` and job ``rocketq-broker`` over every node's
metrics port, the project's alert rules when they are found, and its data under
``<data_dir>/prometheus``. Its pid goes to ``<data_dir>/prometheus/monitor.json``, from which
``rocketq cluster down`` stops it (signalled only while /proc shows that very process).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rocketq.cluster.json_file import read_json, write_json_atomic
from rocketq.cluster.launcher import HOST, LauncherError, LocalCluster, free_ports
from rocketq.cluster.procs import POLL_INTERVAL, is_ours, proc_stat, tail

MONITOR_FILE: Final = "monitor.json"
BROKER_JOB: Final = "rocketq-broker"
NAMESERVER_JOB: Final = "rocketq-nameserver"
# The project's alert rules, found beside the package in a checkout (deploy/ is not installed).
RULES: Final = (
    Path(__file__).resolve().parent.parent / "deploy" / "k8s" / "prometheus" / "rules.yml"
)
_MARKER: Final = b"prometheus"


def prometheus_binary() -> str:
    """Where ``prometheus`` is, or a LauncherError saying how to get it."""
    found = shutil.which("prometheus")
    if found is None:
        raise LauncherError(
            "--monitor needs the prometheus binary, which is not on PATH; install it "
            "(Debian: apt-get install prometheus; `make test` installs it as root) or run "
            "without --monitor"
        )
    return found


def scrape_config(
    cluster: LocalCluster, *, scrape_interval: str = "5s", rules: Path | None = RULES
) -> dict[str, Any]:
    """Prometheus' config for the cluster (JSON is YAML, so it is written as JSON)."""

    def targets(nodes: list[Any]) -> list[dict[str, Any]]:
        return [
            {"targets": [f"{n.host}:{n.metrics_port}"], "labels": {"rocketq_node": n.name}}
            for n in nodes
            if n.metrics_port
        ]

    doc: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [
            {"job_name": NAMESERVER_JOB, "static_configs": targets(cluster.nameservers)},
            {"job_name": BROKER_JOB, "static_configs": targets(cluster.brokers)},
        ],
    }
    if rules is not None and rules.is_file():
        doc["rule_files"] = [str(rules)]
    return doc


@dataclass
class Monitor:
    """A running Prometheus: its URL and pid."""

    home: Path
    port: int
    pid: int
    start_time: int

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / "prometheus.log"

    def alive(self) -> bool:
        return is_ours(self.pid, self.start_time, _MARKER)

    def stop(self, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL at the deadline; False if it was not running."""
        if not self.alive():
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            _reap(self.pid)
            time.sleep(POLL_INTERVAL)
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            _reap(self.pid)
        return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def start_monitor(
    cluster: LocalCluster,
    *,
    port: int = 0,
    scrape_interval: str = "5s",
    rules: Path | None = RULES,
    ready_timeout: float = 30.0,
) -> Monitor:
    """Start Prometheus for ``cluster`` and wait until it is ready."""
    binary = prometheus_binary()
    if not any(n.metrics_port for n in cluster.nodes):
        raise LauncherError("the cluster's nodes serve no metrics (started without metrics)")
    home = cluster.data_dir / "prometheus"
    home.mkdir(parents=True, exist_ok=True)
    stop_monitor(cluster.data_dir)  # one per cluster
    config = home / "prometheus.yml"
    config.write_text(
        json.dumps(scrape_config(cluster, scrape_interval=scrape_interval, rules=rules), indent=2)
    )
    port = port or free_ports(1)[0]
    log = home / "prometheus.log"
    with log.open("ab") as out:
        offset = out.tell()
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address={HOST}:{port}",
                "--web.enable-lifecycle",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=home,
            start_new_session=True,
        )
    stat = proc_stat(proc.pid)
    monitor = Monitor(home, port, proc.pid, stat[1] if stat else 0)
    deadline = time.monotonic() + ready_timeout
    while not _ready(monitor.url):
        if proc.poll() is not None or time.monotonic() >= deadline:
            monitor.stop()
            raise LauncherError(
                f"prometheus did not get ready within {ready_timeout:g} s; the end of {log}:\n"
                f"{tail(log, offset)}"
            )
        time.sleep(POLL_INTERVAL * 4)
    write_json_atomic(
        home / MONITOR_FILE,
        {"port": port, "pid": proc.pid, "start_time": monitor.start_time, "url": monitor.url},
    )
    return monitor


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def load_monitor(data_dir: Path) -> Monitor | None:
    home = Path(data_dir).absolute() / "prometheus"
    doc = read_json(home / MONITOR_FILE, "monitor description")
    if not isinstance(doc, dict):
        return None
    try:
        return Monitor(home, int(doc["port"]), int(doc["pid"]), int(doc["start_time"]))
    except (KeyError, TypeError, ValueError):
        return None


def stop_monitor(data_dir: Path) -> bool:
    """Stop the cluster's Prometheus if one runs; True if one was stopped."""
    monitor = load_monitor(data_dir)
    if monitor is None:
        return False
    stopped = monitor.stop()
    (monitor.home / MONITOR_FILE).unlink(missing_ok=True)
    return stopped
