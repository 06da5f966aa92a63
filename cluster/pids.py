"""Local processes by pid, for the launcher: a pid is trusted only while ``/proc`` shows a
live ``rocketq.cli.main`` process started at the recorded time, so a pid the kernel has handed
to another process is never signalled."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

POLL_INTERVAL: Final = 0.05
LOG_TAIL_LINES: Final = 30


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) of a live pid, None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[0], int(fields[19])


def is_ours(pid: int, start_time: int, marker: bytes = b"rocketq.cli.main") -> bool:
    """A live (not zombie) process whose command line holds ``marker`` (by default a
    ``rocketq.cli.main`` process) and that is the one we started."""
    if pid <= 0:
        return False
    stat = proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    if start_time and stat[1] != start_time:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return marker in cmdline


def wait_until(cond: Callable[[], bool], deadline: float) -> bool:
    """Poll ``cond`` until it holds (True) or the monotonic ``deadline`` passes (False)."""
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL)


def tail(path: Path, offset: int = 0, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log from ``offset`` on, for an error message."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
