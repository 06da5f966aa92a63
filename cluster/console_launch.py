"""``rocketq cluster up --console``: the web console beside a local cluster, as a process of
its own (``rocketq console`` on 8080, rocketmq-dashboard's port, when it is free, else on a
free port; the launcher binds the port and hands the socket down), its pid in
``<data_dir>/console/console.json``, from which ``rocketq cluster down`` stops it
(signalled only while /proc shows that very process)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Final

from rocketq.cluster.launcher import HOST, LocalCluster, hold_port
from rocketq.cluster.sidecar import Sidecar, load_sidecar, start_sidecar, stop_sidecar
from rocketq.common.file_modes import private_dir
from rocketq.common.ports import listen_fd_arg

NAME: Final = "console"
# rocketmq-dashboard's port, which `rocketq cluster up --console` asks for first.
DEFAULT_CONSOLE_PORT: Final = 8080
CONSOLE_EXTRA: Final = "pip install 'rocketq[console]'"
# What the console imports, and what starlette imports for it (templates, sessions, forms).
_CONSOLE_MODULES: Final = (
    "starlette",
    "uvicorn",
    "jinja2",
    "markupsafe",
    "itsdangerous",
    "multipart",
    "pygal",
)
_MARKER: Final = b"rocketq.cli.main"

Console = Sidecar


def console_missing() -> str | None:
    """None when the console's packages are installed, else the error that says how."""
    absent = [m for m in _CONSOLE_MODULES if importlib.util.find_spec(m) is None]
    if not absent:
        return None
    return (
        f"the web console needs the console extra ({', '.join(absent)} not installed): "
        f"{CONSOLE_EXTRA}"
    )


def start_console(cluster: LocalCluster, *, port: int = 0, ready_timeout: float = 30.0) -> Console:
    """Start ``rocketq console`` for ``cluster`` on ``port`` when it is free, else (or with
    ``port`` 0) on a free port, which the log says, and wait until it answers; the
    launcher binds the port and hands the socket down, so no other process can take it
    first. With auth on, the console signs as the cluster's super user and its login is that
    user's name and password (a users file in its home); with TLS, it trusts the cluster's
    CA and serves HTTPS only, with the cluster's certificate."""
    home = _home(cluster.data_dir)
    argv = [sys.executable, "-m", "rocketq.cli.main", "console"]
    argv += ["--namesrv", cluster.namesrv_addr, "--bind", HOST]
    if cluster.secrets is not None:
        users = home / "users"
        private_dir(home)
        fd = os.open(users, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(cluster.secrets.console_users_line())
        argv += ["--users", str(users), "--credentials-file", str(cluster.secrets.admin_file)]
    https_ca = None
    if cluster.certs is not None:
        argv += ["--tls", "--tls-ca-file", str(cluster.certs.ca_file)]
        argv += ["--tls-cert", str(cluster.certs.cert_file)]
        argv += ["--tls-key", str(cluster.certs.key_file)]
        https_ca = cluster.certs.ca_file
    sock, _ = hold_port(HOST, port, "the console's port")
    argv += ["--listen-fd", listen_fd_arg("console", sock)]
    try:
        return start_sidecar(
            NAME, home, lambda port: [*argv, "--port", str(port)], ready_path="/login",
            marker=_MARKER, ready_timeout=ready_timeout, https_ca=https_ca, sock=sock,
        )  # fmt: skip
    finally:
        sock.close()  # the console has its own copy


def _home(data_dir: Path) -> Path:
    return Path(data_dir).absolute() / "console"


def load_console(data_dir: Path) -> Console | None:
    return load_sidecar(NAME, _home(data_dir), _MARKER)


def stop_console(data_dir: Path) -> bool:
    """Stop the cluster's console if one runs; True if one was stopped."""
    return stop_sidecar(NAME, _home(data_dir), _MARKER)
