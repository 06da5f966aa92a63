"""``rocketq cluster up --console``: the web console beside a local cluster, as a process of
its own (``rocketq console`` on a free port), its pid in ``<data_dir>/console/console.json``,
from which ``rocketq cluster down`` stops it (signalled only while /proc shows that very
process)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

from rocketq.cluster.launcher import HOST, LocalCluster, free_ports
from rocketq.cluster.sidecar import Sidecar, load_sidecar, start_sidecar, stop_sidecar

NAME: Final = "console"
_MARKER: Final = b"rocketq.cluster.cli"

Console = Sidecar


def start_console(cluster: LocalCluster, *, ready_timeout: float = 30.0) -> Console:
    """Start ``rocketq console`` for ``cluster`` on a free port and wait until it answers."""
    port = free_ports(1)[0]
    argv = [sys.executable, "-m", "rocketq.cluster.cli", "console"]
    argv += ["--namesrv", cluster.namesrv_addr, "--bind", HOST, "--port", str(port)]
    return start_sidecar(
        NAME, _home(cluster.data_dir), argv, port=port, ready_path="/api/session",
        marker=_MARKER, ready_timeout=ready_timeout,
    )  # fmt: skip


def _home(data_dir: Path) -> Path:
    return Path(data_dir).absolute() / "console"


def load_console(data_dir: Path) -> Console | None:
    return load_sidecar(NAME, _home(data_dir), _MARKER)


def stop_console(data_dir: Path) -> bool:
    """Stop the cluster's console if one runs; True if one was stopped."""
    return stop_sidecar(NAME, _home(data_dir), _MARKER)
