"""Servers of a peer benchmark are stopped by pid: on a normal exit, on an exception, on
Ctrl-C, and so are the daemons they spawn in sessions of their own (found by the run's
marker in their environment); a process that ran before the run is left alone."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketq.bench.peers.processes import (
    MARKER_ENV,
    ProcessGroup,
    free_port,
    port_open,
    process_environ,
    start_time,
    wait_until,
)

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def _gone(pid: int) -> bool:
    return start_time(pid) is None


def test_stopped_on_a_normal_exit(tmp_path: Path) -> None:
    with ProcessGroup() as procs:
        proc = procs.spawn("sleeper", SLEEP, log=tmp_path / "sleeper.log")
        assert start_time(proc.pid) is not None
        assert procs.alive("sleeper")
        # The kernel fills /proc/<pid>/environ a moment after exec is under way (after
        # Popen returns), so the marker is waited for rather than read once.
        wait_until(
            lambda: process_environ(proc.pid).get(MARKER_ENV) == procs.marker,
            10,
            "the run's marker in the sleeper's environment",
        )
    assert _gone(proc.pid)
    assert procs.tracked == []


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_stopped_on_an_exception_and_on_ctrl_c(exc: BaseException) -> None:
    pids: list[int] = []
    with pytest.raises(type(exc)), ProcessGroup() as procs:
        pids.append(procs.spawn("sleeper", SLEEP).pid)
        raise exc
    assert _gone(pids[0])


def test_a_process_that_ignores_sigterm_is_killed() -> None:
    stubborn = [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)",
    ]
    with ProcessGroup(stop_timeout=0.3) as procs:
        proc = procs.spawn("stubborn", stubborn)
        time.sleep(0.2)  # let it install its handler
    assert _gone(proc.pid)


def test_a_daemon_in_its_own_session_is_found_by_the_marker(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    # The child starts a grandchild in a new session (as erl starts epmd) and exits.
    script = (
        "import subprocess, sys; "
        f"p = subprocess.Popen({SLEEP!r}, start_new_session=True); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))"
    )
    with ProcessGroup() as procs:
        procs.spawn("launcher", [sys.executable, "-c", script]).wait(10)
        wait_until(lambda: pidfile.exists() and pidfile.read_text() != "", 10, "daemon pid")
        daemon = int(pidfile.read_text())
        assert start_time(daemon) is not None
    assert _gone(daemon)


def test_an_unrelated_process_is_left_alone() -> None:
    other = subprocess.Popen(SLEEP, start_new_session=True)
    try:
        with ProcessGroup() as procs:
            procs.spawn("sleeper", SLEEP)
        assert start_time(other.pid) is not None
    finally:
        other.kill()
        other.wait()


def test_stop_one_by_name_keeps_the_others() -> None:
    with ProcessGroup() as procs:
        a = procs.spawn("a", SLEEP)
        b = procs.spawn("b", SLEEP)
        procs.stop("a")
        assert _gone(a.pid) and start_time(b.pid) is not None
    assert _gone(b.pid)


def test_free_port_is_free() -> None:
    port = free_port()
    assert not port_open(port)
