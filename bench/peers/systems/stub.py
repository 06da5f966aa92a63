"""An in-memory stub system (as dramatiq keeps a stub broker beside the real ones) for the
peer benchmark's unit tests: the same interface as the real systems, with a harmless real
child process as its "server" so that stopping by pid is exercised too. Not in SYSTEMS."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rocketq.bench.peers.install import Installer, Requirement, SystemMissingError
from rocketq.bench.peers.processes import ProcessGroup
from rocketq.bench.peers.systems.base import Consumer, Driver, PeerSystem, Producer, ServerInfo
from rocketq.bench.peers.workload import Durability, Scenario


class FakeStream:
    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.offsets: dict[str, int] = {}
        self.changed = asyncio.Event()


class FakeProducer(Producer):
    def __init__(self, driver: FakeDriver, stream: str) -> None:
        self.driver = driver
        self.stream = stream

    async def send(self, bodies: Sequence[bytes]) -> None:
        d = self.driver
        d.calls[len(bodies)] += 1
        d.in_flight += 1
        d.peak_in_flight = max(d.peak_in_flight, d.in_flight)
        try:
            await asyncio.sleep(d.send_delay)
        finally:
            d.in_flight -= 1
        s = d.streams[self.stream]
        s.items.extend(bodies)
        s.changed.set()


class FakeConsumer(Consumer):
    def __init__(self, driver: FakeDriver, stream: str, group: str) -> None:
        self.driver = driver
        self.stream = stream
        self.group = group

    async def receive(self, timeout: float) -> list[bytes]:
        s = self.driver.streams[self.stream]
        if s.offsets.setdefault(self.group, 0) >= len(s.items):
            s.changed.clear()
            try:
                await asyncio.wait_for(s.changed.wait(), timeout)
            except TimeoutError:
                return []
        start = s.offsets[self.group]
        got = s.items[start : start + 64]
        s.offsets[self.group] = start + len(got)
        return got


class FakeDriver(Driver):
    def __init__(self, send_delay: float, fail: Scenario | None) -> None:
        self.send_delay = send_delay
        self.fail = fail
        self.streams: dict[str, FakeStream] = {}
        self.calls: Counter[int] = Counter()  # batch size -> send calls
        self.in_flight = 0  # send calls under way
        self.peak_in_flight = 0
        self.prepared: list[str] = []
        self.closed = False

    async def prepare(self, stream: str) -> None:
        self.prepared.append(stream)
        if self.fail is not None and stream.endswith(str(self.fail)):
            raise RuntimeError(f"fake failure in {self.fail}")
        self.streams[stream] = FakeStream()

    async def producer(self, stream: str, *, acked: bool = False) -> Producer:
        return FakeProducer(self, stream)

    async def consumer(self, stream: str, group: str, *, latency: bool = False) -> Consumer:
        return FakeConsumer(self, stream, group)

    async def close(self) -> None:
        self.closed = True


class FakeSystem(PeerSystem):
    """``missing``: ensure_installed fails; ``requirement``: ensure_installed asks the
    installer for it, as a real system does; ``fail``: that scenario raises; ``send_delay``
    makes it slower (seconds per send call)."""

    def __init__(
        self,
        name: str,
        *,
        send_delay: float = 0.0,
        missing: bool = False,
        requirement: Requirement | None = None,
        fail: Scenario | None = None,
        matches_class: bool = True,
    ) -> None:
        self.name = name
        self.send_delay = send_delay
        self.missing = missing
        self.requirement = requirement
        self.fail = fail
        self.matches_class = matches_class
        self.driver_made: FakeDriver | None = None
        self.server_pid = 0
        self.workdir: Path | None = None

    def ensure_installed(self, installer: Installer) -> None:
        if self.missing:
            raise SystemMissingError(f"{self.name}: not installed; run with --install")
        if self.requirement is not None:
            installer.ensure(self.name, self.requirement)

    def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
        self.workdir = workdir
        proc = procs.spawn(self.name, [sys.executable, "-c", "import time; time.sleep(60)"])
        self.server_pid = proc.pid
        return ServerInfo(
            address="memory",
            durability=f"{durability} (fake)",
            settings="in memory",
            matches_class=self.matches_class,
            pids=(proc.pid,),
        )

    def driver(self, server: ServerInfo, durability: Durability) -> Driver:
        self.driver_made = FakeDriver(self.send_delay, self.fail)
        return self.driver_made
