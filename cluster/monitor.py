"""``rocketq cluster up --monitor``: a Prometheus beside a local cluster.

The ``prometheus`` binary (Debian's package) runs with a scrape config generated from
``cluster.json``: job ``rocketq-nameserver`` and job ``rocketq-broker`` over every node's
metrics port, the project's alert rules when they are found, and its data under
``<data_dir>/prometheus``. With TLS it scrapes over HTTPS trusting the cluster's CA; with
auth it sends the cluster's metrics token (``<data_dir>/secrets/metrics.token``, read by
Prometheus at each scrape: the config holds no secret). Its pid goes to
``<data_dir>/prometheus/prometheus.json``, from which ``rocketq cluster down`` stops it
(signalled only while /proc shows that very process).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Final

from rocketq.cluster.launcher import HOST, LauncherError, LocalCluster
from rocketq.cluster.sidecar import Sidecar, load_sidecar, start_sidecar, stop_sidecar
from rocketq.common.file_modes import PRIVATE_FILE, private_dir

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

    def job(name: str, nodes: list[Any]) -> dict[str, Any]:
        scrape: dict[str, Any] = {"job_name": name, "static_configs": targets(nodes)}
        if cluster.certs is not None:
            scrape["scheme"] = "https"
            scrape["tls_config"] = {"ca_file": str(cluster.certs.ca_file)}
        if cluster.secrets is not None:
            scrape["authorization"] = {
                "type": "Bearer",
                "credentials_file": str(cluster.secrets.metrics_token_file),
            }
        return scrape

    doc: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [
            job(NAMESERVER_JOB, cluster.nameservers),
            job(BROKER_JOB, cluster.brokers),
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
    home = private_dir(cluster.data_dir / "prometheus")
    config = home / "prometheus.yml"
    doc = scrape_config(cluster, scrape_interval=scrape_interval, rules=rules)
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(doc, indent=2))

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
