"""The driver processes of ``rocketq bench produce|consume --protocol v5``: each runs RocketMQ
5's official Python client (``python -m rocketq.bench.v5_driver``), reports ``ready``, starts
on ``go`` and reports its result as JSON lines; a driver that fails or says nothing in time
stops the run with its own words, and every driver is stopped by its pid."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from rocketq.common.exceptions import RocketqError

DRIVER_MODULE: Final = "rocketq.bench.v5_driver"
STARTUP_TIMEOUT: Final = 60.0  # s for a driver to start its client and report "ready"
RESULT_GRACE: Final = 30.0  # s beyond the run's duration for a driver's result
STOP_TIMEOUT: Final = 10.0  # s for a driver to exit once its input is closed
_STDERR_TAIL: Final = 2000


class V5BenchError(RocketqError):
    """The v5 comparison cannot run: a driver failed, or the options do not fit."""


# -- driver processes --------------------------------------------------------------------


def parse_event(line: str) -> dict[str, Any] | None:
    """A driver's line as an event (a JSON object with a string ``event``); None for any
    other line (the client may print something of its own)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("event"), str):
        return None
    return doc


class Driver:
    """One driver process: its events read from stdout by a thread, ``go`` written to its
    stdin, stopped by its pid."""

    def __init__(self, label: str, argv: Sequence[str], env: Mapping[str, str], logs: Path):
        self.label = label
        self.stderr_path = logs / f"{label}.stderr"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=dict(env),
                start_new_session=True,
            )
        self.pid = self.proc.pid
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=self._read, args=(stdout,), name=f"{label}-out", daemon=True
        )
        self._reader.start()

    def _read(self, stdout: IO[bytes]) -> None:
        for raw in stdout:
            event = parse_event(raw.decode(errors="replace"))
            if event is not None:
                self._events.put(event)
        self._events.put(None)  # end of output: the process is exiting

    def _stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace").strip()
        except OSError:
            return ""
        return text[-_STDERR_TAIL:]

    def expect(self, kind: str, deadline: float) -> dict[str, Any]:
        """The next event, which must be ``kind``; V5BenchError with the driver's own
        words when it reports an error, exits, or says nothing before ``deadline``."""
        while True:
            try:
                event = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise V5BenchError(
                    f"v5 driver {self.label} (pid {self.pid}) did not report {kind!r} in time; "
                    "it was stopped"
                ) from None
            if event is None:
                try:
                    code = self.proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    code = None
                tail = self._stderr_tail()
                raise V5BenchError(
                    f"v5 driver {self.label} (pid {self.pid}) exited (status {code}) before "
                    f"{kind!r}" + (f"; the end of its stderr:\n{tail}" if tail else "")
                )
            if event["event"] == "error":
                raise V5BenchError(f"v5 driver {self.label}: {event.get('error', event)}")
            if event["event"] == kind:
                return event

    def go(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(b"go\n")
            stdin.flush()
        except OSError as exc:  # it is gone: expect() says how
            self._events.put({"event": "error", "error": f"cannot be told to start ({exc})"})

    def stop(self) -> None:
        """Close its input (it shuts its client down and exits), then kill it by its pid
        if it is still there after :data:`STOP_TIMEOUT`."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self._reader.join(STOP_TIMEOUT)
            self.proc.stdout.close()


def driver_argv(
    role: str, endpoint: str, topic: str, duration: float, options: Mapping[str, object]
) -> list[str]:
    """The command line of one driver: ``role`` with ``--wait-go`` and a ``--timeout``
    that bounds it even if its parent is gone."""
    argv = [sys.executable, "-m", DRIVER_MODULE, role, "--endpoint", endpoint, "--topic", topic]
    argv += ["--duration", f"{duration:g}", "--wait-go"]
    argv += ["--timeout", f"{STARTUP_TIMEOUT + duration + RESULT_GRACE:g}"]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


@contextlib.contextmanager
def started_drivers(
    argvs: Sequence[Sequence[str]], home: Path, startup_timeout: float = STARTUP_TIMEOUT
) -> Iterator[list[Driver]]:
    """Start every driver at once, wait until each reports ``ready``; stop them all (by
    pid) when the block is left, errors included. ``home`` is their ``HOME``: the official
    client writes its log under ``~/logs/rocketmq_python``."""
    env = {**os.environ, "HOME": str(home)}
    home.mkdir(parents=True, exist_ok=True)
    drivers: list[Driver] = []
    try:
        for i, argv in enumerate(argvs):
            drivers.append(Driver(f"driver{i + 1}", argv, env, home))
        deadline = time.monotonic() + startup_timeout
        for d in drivers:
            d.expect("ready", deadline)
        yield drivers
    finally:
        for d in drivers:
            d.stop()


def run_window(drivers: Sequence[Driver], duration: float) -> list[dict[str, Any]]:
    """``go`` to every driver at once; their results."""
    for d in drivers:
        d.go()
    deadline = time.monotonic() + duration + RESULT_GRACE
    return [d.expect("result", deadline) for d in drivers]
