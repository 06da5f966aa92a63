"""``rocketq cluster up --monitor``: a Prometheus beside a local cluster.

The ``prometheus`` binary (Debian's package) runs with a scrape config generated from
``cluster.json``: job ``rocketq-nameserver`` and job ``rocketq-broker`` over every node's
metrics port, the project's alert rules when they are found, and its data under
``<data_dir>/prometheus``. Its pid goes to ``<data_dir>/prometheus/prometheus.json``, from which
``rocketq cluster down`` stops it (signalled only while /proc shows that very process).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Final

from rocketq.cluster.launcher import HOST, LauncherError, LocalCluster
from rocketq.cluster.sidecar import Sidecar, load_sidecar, start_sidecar, stop_sidecar

NAME: Final = "prometheus"  # its log prometheus.log, its pid file prometheus.json
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


Monitor = Sidecar  # a running Prometheus: its URL, pid and log


def start_monitor(
    cluster: LocalCluster,
    *,
    port: int = 0,
    scrape_interval: str = "5s",
    rules: Path | None = RULES,
    ready_timeout: float = 30.0,
) -> Monitor:
    """Start Prometheus for ``cluster`` and wait until it is ready; ``port`` 0: a free
    port (another one if that is taken before Prometheus binds it)."""
    binary = prometheus_binary()
    if not any(n.metrics_port for n in cluster.nodes):
        raise LauncherError("the cluster's nodes serve no metrics (started without metrics)")
    home = cluster.data_dir / "prometheus"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "prometheus.yml"
    config.write_text(
        json.dumps(scrape_config(cluster, scrape_interval=scrape_interval, rules=rules), indent=2)
    )

    def argv(port: int) -> list[str]:
        return [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address={HOST}:{port}",
            "--web.enable-lifecycle",
        ]

    return start_sidecar(
        NAME, home, argv, port=port, ready_path="/-/ready", marker=_MARKER,
        ready_timeout=ready_timeout,
    )  # fmt: skip


def load_monitor(data_dir: Path) -> Monitor | None:
    return load_sidecar(NAME, Path(data_dir).absolute() / "prometheus", _MARKER)


def stop_monitor(data_dir: Path) -> bool:
    """Stop the cluster's Prometheus if one runs; True if one was stopped."""
    return stop_sidecar(NAME, Path(data_dir).absolute() / "prometheus", _MARKER)
