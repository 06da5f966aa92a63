"""A process beside a local cluster (its Prometheus, its web console): started in a session
of its own with its output in ``<home>/<name>.log``, waited for until an HTTP URL answers
200, its pid and start time in ``<home>/<name>.json``, and signalled later only while /proc
shows that very process.

A sidecar that can serve a socket handed down to it (the console: ``--listen-fd``) is given
one the launcher bound, so no other process can take its port. One that binds its own port
(Prometheus) has it chosen free just before the start; when another process takes it before
the sidecar binds it (the sidecar exits, its log saying the address is in use), it starts
again on a newly chosen port, up to ``OWN_PORT_ATTEMPTS`` times, with a warning in the
launcher's log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocketq.cluster import launcher
from rocketq.cluster.launcher import HOST, LauncherError
from rocketq.cluster.pids import POLL_INTERVAL, is_ours, proc_stat, tail
from rocketq.common.file_modes import SERVER_UMASK, open_log, private_dir
from rocketq.common.json_file import read_json, write_json_atomic

log = logging.getLogger(__name__)
# What uvicorn (the console) and Prometheus log when their port is taken.
_IN_USE = "address already in use"
# Starts of a sidecar that binds its own port on newly chosen ports, when another process
# took the one chosen before the sidecar bound it.
OWN_PORT_ATTEMPTS = 5


@dataclass
class Sidecar:
    name: str  # prometheus, console: names its log and its pid file
    home: Path
    port: int
    pid: int
    start_time: int
    marker: bytes  # in its command line, against pid reuse
    scheme: str = "http"  # https: it serves HTTPS only (the console of a cluster with TLS)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{HOST}:{self.port}"

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


def _answers(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def start_sidecar(
    name: str,
    home: Path,
    argv: Callable[[int], list[str]],
    *,
    port: int = 0,
    ready_path: str,
    marker: bytes,
    ready_timeout: float = 30.0,
    https_ca: Path | None = None,
    sock: socket.socket | None = None,
) -> Sidecar:
    """Start ``argv(port)`` (after stopping the one ``home`` records) and wait until
    ``http://HOST:port<ready_path>`` answers 200 (``https://`` trusting the CA
    ``https_ca`` when given: the sidecar serves HTTPS only). ``sock``: a listening socket
    the sidecar is handed (``argv`` names its fd) and serves, closed here once it
    answers; without one, ``port`` 0 is a free port, chosen again when another process
    takes it before the sidecar binds it, and another ``port`` is the user's, and a
    sidecar that cannot bind it fails. Its home is private (0700), its log 0640, and it
    runs with the private umask."""
    private_dir(home)
    stop_sidecar(name, home, marker)
    scheme = "https" if https_ca is not None else "http"
    context = ssl.create_default_context(cafile=str(https_ca)) if https_ca is not None else None
    if sock is not None:
        port = sock.getsockname()[1]
    for attempt in range(1, OWN_PORT_ATTEMPTS + 1):
        chosen = port or launcher.free_ports(1)[0]
        try:
            side, offset, proc = _spawn(name, home, argv(chosen), chosen, marker, scheme, sock)
            text = _await_answer(side, proc, ready_path, ready_timeout, offset, context)
        finally:
            if sock is not None:
                sock.close()  # the sidecar has its own copy
        if text is None:
            break
        _kill(proc)  # not ready: whatever it is doing, it does not outlive the attempt
        if port or _IN_USE not in text.lower() or attempt == OWN_PORT_ATTEMPTS:
            raise LauncherError(
                f"{name} did not get ready within {ready_timeout:g} s; the end of "
                f"{side.log}:\n{text}"
            )
        log.warning(
            "%s: another process took port %d before %s could listen there; starting it "
            "again on another port (attempt %d of %d)",
            name, chosen, name, attempt + 1, OWN_PORT_ATTEMPTS,
        )  # fmt: skip
    write_json_atomic(
        home / f"{name}.json",
        {
            "port": side.port,
            "pid": side.pid,
            "start_time": side.start_time,
            "url": side.url,
            "scheme": side.scheme,
        },
    )
    return side


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill a sidecar this process started, by its Popen (its pid is not reused before it
    is reaped here), if it still runs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def _spawn(
    name: str,
    home: Path,
    argv: list[str],
    port: int,
    marker: bytes,
    scheme: str,
    sock: socket.socket | None = None,
) -> tuple[Sidecar, int, subprocess.Popen[bytes]]:
    """Start the process (handing it ``sock``); the offset where this run's log begins;
    its Popen."""
    with open(open_log(home / f"{name}.log"), "ab") as out:
        offset = out.seek(0, os.SEEK_END)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=home,
            start_new_session=True,
            umask=SERVER_UMASK,
            pass_fds=() if sock is None else (sock.fileno(),),
        )
    stat = proc_stat(proc.pid)
    side = Sidecar(name, home, port, proc.pid, stat[1] if stat else 0, marker, scheme)
    return side, offset, proc


def _await_answer(
    side: Sidecar,
    proc: subprocess.Popen[bytes],
    ready_path: str,
    timeout: float,
    offset: int,
    context: ssl.SSLContext | None = None,
) -> str | None:
    """Wait until the sidecar answers 200 (None); if it exits first or the time runs out,
    stop it and return the end of its log. It must still run after the answer: an answer
    from a process that took its port is not its own. Whether it runs is asked of its
    Popen, not of /proc: until the child has exec'd, /proc shows this process's command
    line, without the sidecar's marker."""
    deadline = time.monotonic() + timeout
    while True:
        exited = proc.poll() is not None
        if not exited and _answers(side.url + ready_path, context) and proc.poll() is None:
            return None
        if exited or time.monotonic() >= deadline:
            side.stop()
            _reap(side.pid)
            return tail(side.log, offset)
        time.sleep(POLL_INTERVAL * 4)


def load_sidecar(name: str, home: Path, marker: bytes) -> Sidecar | None:
    home = Path(home).absolute()
    doc = read_json(home / f"{name}.json", f"{name} description")
    if not isinstance(doc, dict):
        return None
    try:
        scheme = "https" if doc.get("scheme") == "https" else "http"
        return Sidecar(
            name, home, int(doc["port"]), int(doc["pid"]), int(doc["start_time"]), marker, scheme
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
