"""The systems of a peer benchmark, one module each, by name in run order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from rocketq.bench.peers.results import ROCKETQ
from rocketq.bench.peers.systems.base import PeerSystem


def _rocketq() -> PeerSystem:
    from rocketq.bench.peers.systems.rocketq import RocketqSystem

    return RocketqSystem()


def _redis() -> PeerSystem:
    from rocketq.bench.peers.systems.redis_streams import RedisSystem

    return RedisSystem()


def _nats() -> PeerSystem:
    from rocketq.bench.peers.systems.nats_jetstream import NatsSystem

    return NatsSystem()


def _rabbitmq() -> PeerSystem:
    from rocketq.bench.peers.systems.rabbitmq import RabbitmqSystem

    return RabbitmqSystem()


SYSTEMS: Final[dict[str, Callable[[], PeerSystem]]] = {
    ROCKETQ: _rocketq,
    "redis": _redis,
    "nats": _nats,
    "rabbitmq": _rabbitmq,
}


def make_systems(names: list[str] | None = None) -> list[PeerSystem]:
    """The named systems (all by default), in run order; ValueError for an unknown name."""
    chosen = names or list(SYSTEMS)
    unknown = [n for n in chosen if n not in SYSTEMS]
    if unknown:
        raise ValueError(
            f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}"
        )
    return [SYSTEMS[n]() for n in chosen]


def with_auto_batch_off(systems: list[PeerSystem]) -> list[PeerSystem]:
    """``systems`` with rocketq followed by rocketq whose producer's natural batching is
    off (``rocketq-no-auto-batch``), for the on / off ratios; ValueError when rocketq is
    not among them."""
    from rocketq.bench.peers.systems.rocketq import RocketqSystem

    names = [s.name for s in systems]
    if ROCKETQ not in names:
        raise ValueError("--compare-auto-batch compares rocketq with itself: add rocketq")
    at = names.index(ROCKETQ) + 1
    return [*systems[:at], RocketqSystem(auto_batch=False), *systems[at:]]
