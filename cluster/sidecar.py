"""A process beside a local cluster (its Prometheus, its web console): started in a session
of its own with its output in ``<home>/<name>.log``, waited for until an HTTP URL answers
200, its pid and start time in ``<home>/<name>.json``, and signalled later only while /proc
shows that very process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rocketq.cluster.launcher import HOST, LauncherError
from rocketq.cluster.pids import POLL_INTERVAL, is_ours, proc_stat, tail
from rocketq.common.json_file import read_json, write_json_atomic


@dataclass
class Sidecar:
    name: str  # prometheus, console: names its log and its pid file
    home: Path
    port: int
    pid: int
    start_time: int
    marker: bytes  # in its command line, against pid reuse

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / f"{self.name}.log"

    def alive(self) -> bool:
        return is_ours(self.pid, self.start_time, self.marker)

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


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def start_sidecar(
    name: str,
    home: Path,
    argv: list[str],
    *,
    port: int,
    ready_path: str,
    marker: bytes,
    ready_timeout: float = 30.0,
) -> Sidecar:
    """Start ``argv`` (after stopping the one ``home`` records) and wait until
    ``http://HOST:port<ready_path>`` answers 200."""
    home.mkdir(parents=True, exist_ok=True)
    stop_sidecar(name, home, marker)
    log = home / f"{name}.log"
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
    side = Sidecar(name, home, port, proc.pid, stat[1] if stat else 0, marker)
    deadline = time.monotonic() + ready_timeout
    while not _answers(side.url + ready_path):
        if proc.poll() is not None or time.monotonic() >= deadline:
            side.stop()
            raise LauncherError(
                f"{name} did not get ready within {ready_timeout:g} s; the end of {log}:\n"
                f"{tail(log, offset)}"
            )
        time.sleep(POLL_INTERVAL * 4)
    write_json_atomic(
        home / f"{name}.json",
        {"port": port, "pid": proc.pid, "start_time": side.start_time, "url": side.url},
    )
    return side


def load_sidecar(name: str, home: Path, marker: bytes) -> Sidecar | None:
    home = Path(home).absolute()
    doc = read_json(home / f"{name}.json", f"{name} description")
    if not isinstance(doc, dict):
        return None
    try:
        return Sidecar(
            name, home, int(doc["port"]), int(doc["pid"]), int(doc["start_time"]), marker
        )
    except (KeyError, TypeError, ValueError):
        return None


def stop_sidecar(name: str, home: Path, marker: bytes) -> bool:
    """Stop the recorded process if it runs; True if one was stopped."""
    side = load_sidecar(name, home, marker)
    if side is None:
        return False
    stopped = side.stop()
    (side.home / f"{name}.json").unlink(missing_ok=True)
    return stopped
