"""The interface every system of a peer benchmark implements: a server it can start per
durability class, and a client side (producers, consumers) the scenarios drive the same
way for all. A fake in-memory system in the tests implements it too."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rocketq.bench.peers.install import Installer
from rocketq.bench.peers.processes import ProcessGroup
from rocketq.bench.peers.workload import Durability, Scenario


@dataclass(frozen=True)
class ServerInfo:
    """A server started for the run: where it listens, what it runs with, and what the
    durability class became there (``durability`` differs from the asked class when the
    system cannot do it; ``settings`` says how it was configured)."""

    address: str
    durability: str
    settings: str
    matches_class: bool = True
    pids: tuple[int, ...] = ()


class Producer(abc.ABC):
    """One producer (a client connection, or a share of one where that is the client's
    way)."""

    @abc.abstractmethod
    async def send(self, bodies: Sequence[bytes]) -> None:
        """Return once the system accepted every body at the run's durability class."""

    async def close(self) -> None:  # noqa: B027 - optional
        """Release what the producer holds."""


class Consumer(abc.ABC):
    """One member of a consumer group reading a stream from its start."""

    @abc.abstractmethod
    async def receive(self, timeout: float) -> list[bytes]:
        """The next bodies (at least one), or none after ``timeout`` seconds. What an
        earlier call returned counts as processed (acknowledged as the system allows)."""

    async def close(self) -> None:  # noqa: B027 - optional
        """Acknowledge what is left and release the consumer."""


class Driver(abc.ABC):
    """The client side of one system for one run."""

    @abc.abstractmethod
    async def prepare(self, stream: str) -> None:
        """Create ``stream`` (topic, stream, queue) empty."""

    @abc.abstractmethod
    async def producer(self, stream: str, *, acked: bool = False) -> Producer:
        """A new producer. ``acked``: every send must wait for the broker's answer (the
        sync-send and concurrent scenarios, which send one message per call), so a system
        that otherwise sends unacknowledged at this durability class must ask for one.
        Its sends may be awaited by many coroutines at once (the concurrent scenario)."""

    def durability_of(self, scenario: Scenario) -> str | None:
        """The durability a scenario actually ran at, when it differs from the server's
        (see ``producer(acked=True)``); None: the server's."""
        return None

    @abc.abstractmethod
    async def consumer(self, stream: str, group: str, *, latency: bool = False) -> Consumer:
        """A new member of ``group`` reading ``stream`` from its start. ``latency``: the
        scenario measures latency at a moderate rate, so a client that trades latency for
        batching (a pull that waits for a full batch) should use its low-latency mode."""

    async def settle(self, stream: str, total: int, timeout: float) -> None:  # noqa: B027
        """Return once ``total`` messages sent to ``stream`` are stored (for systems whose
        send returns before the broker has them)."""

    async def close(self) -> None:  # noqa: B027 - optional
        """Release connections."""


class PeerSystem(abc.ABC):
    """A system in the comparison."""

    name: str

    @abc.abstractmethod
    def ensure_installed(self, installer: Installer) -> None:
        """Raise SystemMissingError if the server or client is not here (and cannot be
        installed)."""

    @abc.abstractmethod
    def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
        """Start a server on loopback with its data under ``workdir``, through ``procs``
        (so it is stopped by pid whatever happens), and wait until it serves."""

    @abc.abstractmethod
    def driver(self, server: ServerInfo, durability: Durability) -> Driver:
        """The client side for a started server."""

    def stop(self, procs: ProcessGroup) -> None:
        """Stop the server (the run also stops every process of ``procs`` at its end)."""
        procs.stop_all()
