"""The producer and consumer processes of a chaos run, started, killed and stopped by pid.

Each worker is ``python -m rocketq.chaos.workload <role> ...`` (with RocketMQ 5's official
client, ``rocketq.chaos.v5_workload``) in a session of its own, its output in
``<logs>/<name>.log``. A pid is signalled only while it is still the child this
object started (``Popen.poll`` says it has not been reaped), so a reused pid is never hit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocketq.chaos.history import ChaosError
from rocketq.cluster.pids import tail, wait_until

WORKLOAD_MODULE: Final = "rocketq.chaos.workload"  # rocketq's SDK, the remoting protocol
V5_WORKLOAD_MODULE: Final = "rocketq.chaos.v5_workload"  # RocketMQ 5's client, gRPC v2
STOP_TIMEOUT_S: Final = 30.0
READY_TIMEOUT_S: Final = 60.0
# What a worker does not inherit from the harness's environment: credentials and TLS
# settings meant for another cluster would win over the run's own (gRPC's roots are the
# CA a v5 worker trusts).
CLIENT_ENV_PREFIXES: Final = (
    "ROCKETQ_ACCESS_KEY",
    "ROCKETQ_SECRET_KEY",
    "ROCKETQ_SECURITY_TOKEN",
    "ROCKETQ_CREDENTIALS_FILE",
    "ROCKETQ_TLS",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
)


def worker_env(
    client_env: Mapping[str, str], base: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The environment of a workload process: ``base`` without its client credential and
    TLS variables (gRPC's roots among them), plus ``client_env`` (the run's cluster's,
    ``LocalCluster.client_env``)."""
    env = {k: v for k, v in base.items() if not k.startswith(CLIENT_ENV_PREFIXES)}
    return env | dict(client_env)


@dataclass
class Worker:
    name: str
    argv: list[str]
    log: Path
    ready_line: bool  # prints {"ready": ...} once started
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    starts: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Workers:
    """Start, kill, restart and stop the run's workload processes; ``env`` is their
    environment (None: the harness's own)."""

    def __init__(self, logs: Path, env: Mapping[str, str] | None = None) -> None:
        self.logs = logs
        self.env = dict(env) if env is not None else None
        self.workers: dict[str, Worker] = {}

    def add(
        self,
        name: str,
        args: list[str],
        *,
        ready_line: bool = False,
        module: str = WORKLOAD_MODULE,
    ) -> Worker:
        """A worker running ``python -m <module> <args>``, started by :meth:`start`."""
        argv = [sys.executable, "-m", module, *args]
        worker = Worker(name, argv, self.logs / f"{name}.log", ready_line)
        self.workers[name] = worker
        return worker

    def start(self, name: str) -> None:
        worker = self.workers[name]
        if worker.alive:
            return
        self.logs.mkdir(parents=True, exist_ok=True)
        with worker.log.open("ab") as log:
            offset = log.tell()
            worker.process = subprocess.Popen(
                worker.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env,
                start_new_session=True,
            )
        worker.starts += 1
        if worker.ready_line:
            self._await_ready(worker, offset)

    def _await_ready(self, worker: Worker, offset: int) -> None:
        def ready() -> bool:
            if not worker.alive:
                return True
            for line in tail(worker.log, offset, lines=1000).splitlines():
                with contextlib.suppress(ValueError, AttributeError):
                    if json.loads(line).get("ready"):
                        return True
            return False

        if not wait_until(ready, time.monotonic() + READY_TIMEOUT_S) or not worker.alive:
            self.kill(worker.name)
            raise ChaosError(
                f"{worker.name} did not start within {READY_TIMEOUT_S:g} s; the end of "
                f"{worker.log}:\n{tail(worker.log, offset)}"
            )

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send ``sig``; for SIGKILL wait until the process is gone."""
        worker = self.workers[name]
        if not worker.alive or worker.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(sig)
        if sig == signal.SIGKILL:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=STOP_TIMEOUT_S)

    def stop(self, names: list[str] | None = None, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        """SIGTERM, then SIGKILL at the deadline; -> the names that had to be killed."""
        chosen = [self.workers[n] for n in (names if names is not None else list(self.workers))]
        for w in chosen:
            if w.alive and w.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    w.process.send_signal(signal.SIGTERM)
        wait_until(lambda: not any(w.alive for w in chosen), time.monotonic() + timeout)
        killed = [w.name for w in chosen if w.alive]
        for name in killed:
            self.kill(name)
        return killed

    def alive(self) -> list[str]:
        return [w.name for w in self.workers.values() if w.alive]

    def pids(self) -> list[int]:
        return [w.pid for w in self.workers.values() if w.pid]
