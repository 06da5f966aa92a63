"""What every system is asked to do in a peer benchmark: the same producers, consumers,
message size, batch, duration or count, and durability class for all of them."""

from __future__ import annotations

import enum
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Final


class Durability(enum.StrEnum):
    """How far a write must have gone before the system acknowledges it."""

    PAGE_CACHE = "page-cache"  # written to the OS (page cache, process memory), not fsynced
    FSYNC = "fsync"  # on disk (fsync) before the acknowledgement


class Scenario(enum.StrEnum):
    PRODUCE = "produce"  # N producers, batches pipelined: messages/s accepted
    CONSUME = "consume"  # M consumers drain a backlog written beforehand: messages/s
    E2E = "e2e"  # a fixed moderate rate; latency from send to receive
    SYNC_SEND = "sync_send"  # one sender, one message in flight: what a typical app does
    CONCURRENT = "concurrent"  # one producer, 32 single sends in flight: an asyncio app


ALL_SCENARIOS: Final = tuple(Scenario)
# A body starts with the sender's clock (time.perf_counter_ns, one process, so comparable).
STAMP: Final = struct.Struct(">Q")


class WorkloadError(ValueError):
    """A workload that cannot be run as given."""


@dataclass(frozen=True)
class Workload:
    """One run's parameters, applied identically to every system.

    ``batch`` is how many messages one producer hands the client per call in the produce
    and consume-backlog scenarios (each system sends them its own best way: rocketq a
    batch send, Redis a pipeline, NATS async publishes, RabbitMQ publishes then confirms).
    ``in_flight`` is how many single sends one producer keeps awaiting at once in the
    concurrent scenario (each its own coroutine, as an asyncio application sends).
    """

    durability: Durability = Durability.PAGE_CACHE
    scenarios: tuple[Scenario, ...] = ALL_SCENARIOS
    producers: int = 4
    consumers: int = 1
    size: int = 1024
    batch: int = 32
    duration: float = 10.0  # seconds per timed scenario
    messages: int = 0  # produce: stop after this many in all (0: run for ``duration``)
    backlog: int = 200_000  # consume: messages written first, then drained
    e2e_rate: int = 5_000  # messages/s in all, spread over the producers
    in_flight: int = 32  # concurrent: single sends awaited at once by one producer
    warmup: float = 1.0  # e2e: seconds whose messages are not counted
    drain_timeout: float = 10.0  # e2e: seconds to wait for stragglers after sending stops
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checks = (
            (self.producers >= 1, f"producers must be >= 1, got {self.producers}"),
            (self.consumers >= 1, f"consumers must be >= 1, got {self.consumers}"),
            (self.size >= STAMP.size, f"size must be >= {STAMP.size} bytes, got {self.size}"),
            (1 <= self.batch <= 1024, f"batch must be 1..1024, got {self.batch}"),
            (self.duration > 0, f"duration must be > 0, got {self.duration}"),
            (self.messages >= 0, f"messages must be >= 0, got {self.messages}"),
            (self.backlog >= 1, f"backlog must be >= 1, got {self.backlog}"),
            (self.e2e_rate >= 1, f"e2e rate must be >= 1, got {self.e2e_rate}"),
            (self.in_flight >= 1, f"in_flight must be >= 1, got {self.in_flight}"),
            (self.warmup >= 0, f"warmup must be >= 0, got {self.warmup}"),
            (bool(self.scenarios), "no scenario chosen"),
        )
        for ok, message in checks:
            if not ok:
                raise WorkloadError(message)

    @property
    def e2e_warmup(self) -> float:
        """The warm-up actually skipped: at most a fifth of the run."""
        return min(self.warmup, self.duration / 5)

    def describe(self) -> str:
        return (
            f"{self.producers} producers, {self.consumers} consumers, {self.size} B messages, "
            f"batch {self.batch}, {self.duration:g} s per scenario, backlog {self.backlog:,}, "
            f"e2e at {self.e2e_rate:,} msg/s, {self.in_flight} sends in flight in concurrent, "
            f"durability {self.durability}"
        )


def make_body(size: int) -> bytes:
    """A body of ``size`` bytes that does not compress to nothing."""
    return os.urandom(size // 2).hex().encode()[:size].ljust(size, b"x")


def stamped(body: bytes, now_ns: int | None = None) -> bytes:
    """``body`` with the send time in its first 8 bytes."""
    return STAMP.pack(time.perf_counter_ns() if now_ns is None else now_ns) + body[STAMP.size :]


def stamp_of(body: bytes) -> int:
    """The send time a stamped body carries."""
    value: int = STAMP.unpack_from(body)[0]
    return value
