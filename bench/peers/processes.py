"""Server processes of a peer benchmark: started in their own session, remembered by pid
(with their start time, so a pid the kernel handed to another process is never
signalled), and stopped by pid when the run ends, normally or by an exception or Ctrl-C.

Daemons a server spawns outside its own session (RabbitMQ's ``epmd``) are found by name
and adopted, so they are stopped too; one that was already running before is left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

HOST: Final = "127.0.0.1"
# Every process a run starts carries this variable with the run's own value, and so do
# the daemons those processes spawn in sessions of their own (RabbitMQ's epmd): that is
# how the run finds them to stop them, without touching one that ran before it.
MARKER_ENV: Final = "ROCKETQ_BENCH_RUN"
STOP_TIMEOUT: Final = 10.0
_POLL: Final = 0.05


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def start_time(pid: int) -> int | None:
    """The start time of a live, non-zombie pid (``/proc/<pid>/stat`` field 22)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def process_environ(pid: int) -> dict[str, str]:
    """The environment a process was started with (empty if it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``cond`` until it holds; TimeoutError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s")
        time.sleep(_POLL)


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


@dataclass(frozen=True)
class Tracked:
    """One process this run started or adopted."""

    name: str
    pid: int
    start_time: int
    group: bool  # its own session: signal the process group whose id is its pid

    def alive(self) -> bool:
        return start_time(self.pid) == self.start_time


class ProcessGroup:
    """Every process one benchmark run started; ``stop_all`` (and leaving the ``with``
    block, however it is left) stops them by pid, newest first: SIGTERM, then SIGKILL
    after ``stop_timeout`` seconds."""

    def __init__(self, stop_timeout: float = STOP_TIMEOUT, marker: str | None = None) -> None:
        self.stop_timeout = stop_timeout
        self.marker = marker or uuid.uuid4().hex
        self._tracked: list[Tracked] = []
        self._popens: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def tracked(self) -> list[Tracked]:
        return list(self._tracked)

    def spawn(
        self,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        log: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in a new session (its output to ``log``) and remember it."""
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
        full_env = {**(os.environ if env is None else env), MARKER_ENV: self.marker}
        try:
            proc = subprocess.Popen(
                argv,
                env=full_env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            if log:
                out.close()  # type: ignore[union-attr]
        self._popens[proc.pid] = proc
        self._tracked.append(Tracked(name, proc.pid, start_time(proc.pid) or 0, True))
        return proc

    def adopt(self, name: str, pid: int) -> None:
        """Stop ``pid`` too when the run ends (a daemon one of ours spawned)."""
        st = start_time(pid)
        if st is not None and all(t.pid != pid for t in self._tracked):
            self._tracked.append(Tracked(name, pid, st, False))

    def adopt_marked(self) -> None:
        """Adopt every live process that carries this run's marker in its environment
        (daemons our servers spawned outside their session, such as epmd)."""
        me = os.getpid()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            pid = int(entry.name)
            if process_environ(pid).get(MARKER_ENV) == self.marker:
                self.adopt(_comm(pid) or "process", pid)

    def alive(self, name: str) -> bool:
        return any(t.alive() for t in self._tracked if t.name == name)

    def stop(self, name: str, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop the processes called ``name`` (first with ``sig``, SIGKILL if they stay)."""
        self._stop([t for t in self._tracked if t.name == name], first=sig)

    def stop_all(self) -> None:
        """Stop every process started or adopted, and every one carrying the marker."""
        self.adopt_marked()
        self._stop(list(self._tracked))

    def _stop(self, targets: list[Tracked], first: signal.Signals = signal.SIGTERM) -> None:
        for sig, wait in ((first, self.stop_timeout), (signal.SIGKILL, 5.0)):
            live = [t for t in reversed(targets) if t.alive()]
            for t in live:
                self._signal(t, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(self._alive_reaped(t) for t in live):
                time.sleep(_POLL)
        for t in targets:
            if not t.alive():
                self._tracked.remove(t)
                self._popens.pop(t.pid, None)

    def _alive_reaped(self, t: Tracked) -> bool:
        proc = self._popens.get(t.pid)
        if proc is not None:
            proc.poll()  # reap our own child so it does not linger as a zombie
        return t.alive()

    def _signal(self, t: Tracked, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if t.group:
                # The session leader's pid is its group's id: its children go too.
                os.killpg(t.pid, sig)
            else:
                os.kill(t.pid, sig)

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()
