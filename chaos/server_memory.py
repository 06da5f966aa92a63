"""The servers' memory during a chaos run: a thread reads ``/proc/<pid>/status`` (VmRSS,
VmHWM) of every node of the cluster at a fixed period, and notes a node whose process went
away.

At the end each process the run saw gets one ``server_memory`` record in the history
(``node``, ``pid``, ``rss_kib``: the largest VmRSS sampled, ``hwm_kib``: the last VmHWM
read - the kernel's peak of the process's resident set - and ``samples``); each exit seen
gets a ``server_exit`` record (``node``, ``pid``, ``returncode`` when known) at the time
it was seen. The report tells the exits outside a fault that stops nodes apart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rocketq.cluster.launcher import LocalCluster
from rocketq.cluster.pids import proc_stat

SAMPLE_PERIOD_S: Final = 0.5


@dataclass
class ProcessMemory:
    node: str
    pid: int
    rss_kib: int = 0
    hwm_kib: int = 0
    samples: int = 0
    exited: bool = False


def read_status(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) in KiB of a live process; None when it is gone or a zombie."""
    rss = hwm = -1
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    if rss < 0 or hwm < 0:  # a zombie has no memory lines
        return None
    return rss, hwm


class ServerMemory:
    """Samples every node of ``cluster`` in a thread until :meth:`stop`."""

    def __init__(
        self,
        cluster: LocalCluster,
        write: Callable[..., Any],
        *,
        period_s: float = SAMPLE_PERIOD_S,
    ) -> None:
        self.cluster = cluster
        self.write = write
        self.period_s = period_s
        self.seen: dict[tuple[str, int], ProcessMemory] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="server-memory", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def sample(self) -> None:
        for node in list(self.cluster.nodes):
            pid = node.pid
            if not pid:
                continue
            key = (node.name, pid)
            status = read_status(pid)
            seen = self.seen.get(key)
            if status is None:
                if seen is not None and not seen.exited:
                    seen.exited = True
                    code = node.process.poll() if node.process is not None else None
                    self.write("server_exit", node=node.name, pid=pid, returncode=code)
                continue
            stat = proc_stat(pid)
            if stat is None or stat[0] in "ZX":
                continue
            if seen is None:
                seen = self.seen[key] = ProcessMemory(node.name, pid)
            seen.rss_kib = max(seen.rss_kib, status[0])
            seen.hwm_kib = max(seen.hwm_kib, status[1])
            seen.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def stop(self) -> list[ProcessMemory]:
        """Stop sampling (one last sample first) and write the ``server_memory`` records."""
        if self._stop.is_set():
            return list(self.seen.values())
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self.sample()
        for seen in self.seen.values():
            self.write(
                "server_memory",
                node=seen.node,
                pid=seen.pid,
                rss_kib=seen.rss_kib,
                hwm_kib=seen.hwm_kib,
                samples=seen.samples,
            )
        return list(self.seen.values())

    def peaks_mib(self) -> dict[str, float]:
        """Node -> its largest VmHWM over its processes, in MiB."""
        peaks: dict[str, float] = {}
        for seen in self.seen.values():
            peaks[seen.node] = max(peaks.get(seen.node, 0.0), seen.hwm_kib / 1024)
        return peaks
