"""``rocketq cluster up --console``: the web console beside a local cluster, as a process of
its own (``rocketq console`` on a free port), its pid in ``<data_dir>/console/console.json``,
from which ``rocketq cluster down`` stops it (signalled only while /proc shows that very
process)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocketq.cluster.json_file import read_json, write_json_atomic
from rocketq.cluster.launcher import HOST, LauncherError, LocalCluster, free_ports
from rocketq.cluster.procs import POLL_INTERVAL, is_ours, proc_stat, tail

CONSOLE_FILE: Final = "console.json"


@dataclass
class Console:
    home: Path
    port: int
    pid: int
    start_time: int

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def alive(self) -> bool:
        return is_ours(self.pid, self.start_time)

    def stop(self, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL at the deadline; False if it was not running."""
        if not self.alive():
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(self.pid, os.WNOHANG)
            time.sleep(POLL_INTERVAL)
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        return True


def start_console(cluster: LocalCluster, *, ready_timeout: float = 30.0) -> Console:
    """Start ``rocketq console`` for ``cluster`` on a free port and wait until it answers."""
    home = cluster.data_dir / "console"
    home.mkdir(parents=True, exist_ok=True)
    stop_console(cluster.data_dir)
    port = free_ports(1)[0]
    log = home / "console.log"
    argv = [sys.executable, "-m", "rocketq.cluster.cli", "console"]
    argv += ["--namesrv", cluster.namesrv_addr, "--bind", HOST, "--port", str(port)]
    with log.open("ab") as out:
        offset = out.tell()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=home,
            start_new_session=True,
        )
    stat = proc_stat(proc.pid)
    console = Console(home, port, proc.pid, stat[1] if stat else 0)
    deadline = time.monotonic() + ready_timeout
    while not _answers(console.url):
        if proc.poll() is not None or time.monotonic() >= deadline:
            console.stop()
            raise LauncherError(
                f"the console did not answer within {ready_timeout:g} s; the end of {log}:\n"
                f"{tail(log, offset)}"
            )
        time.sleep(POLL_INTERVAL * 4)
    write_json_atomic(
        home / CONSOLE_FILE,
        {"port": port, "pid": proc.pid, "start_time": console.start_time, "url": console.url},
    )
    return console


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "api/session", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def load_console(data_dir: Path) -> Console | None:
    home = Path(data_dir).absolute() / "console"
    doc = read_json(home / CONSOLE_FILE, "console description")
    if not isinstance(doc, dict):
        return None
    try:
        return Console(home, int(doc["port"]), int(doc["pid"]), int(doc["start_time"]))
    except (KeyError, TypeError, ValueError):
        return None


def stop_console(data_dir: Path) -> bool:
    """Stop the cluster's console if one runs; True if one was stopped."""
    console = load_console(data_dir)
    if console is None:
        return False
    stopped = console.stop()
    (console.home / CONSOLE_FILE).unlink(missing_ok=True)
    return stopped
