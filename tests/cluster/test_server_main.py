"""Servers keep full garbage collections short: what they built is frozen out of the
collector's sight at start and whenever enough more has lived into the oldest generation."""

from __future__ import annotations

import asyncio
import gc

from rocketq.cluster.server_main import freeze_long_lived, keep_collections_short


class Node:
    """A long-lived object the collector tracks (an instance with a reference)."""

    def __init__(self, peer: object) -> None:
        self.peer = peer


def test_freeze_moves_survivors_out_of_the_collectors_sight() -> None:
    try:
        kept = [Node(i) for i in range(10_000)]
        freeze_long_lived()
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)
        tracked = {id(o) for o in gc.get_objects(generation=2)}
        assert not any(id(o) in tracked for o in kept)
    finally:
        gc.unfreeze()


async def test_the_keeper_freezes_again_when_the_state_grows() -> None:
    # Counted by membership, not by gc.get_freeze_count(): objects frozen at the first
    # freeze may die meanwhile and lower the count by as many.
    try:
        freeze_long_lived()
        keeper = asyncio.ensure_future(keep_collections_short(interval=0.01, threshold=5_000))
        grown = [Node(i) for i in range(20_000)]
        gc.collect()  # they live into the oldest generation
        assert gc.is_tracked(grown[0])
        deadline = asyncio.get_running_loop().time() + 10
        while _still_collected(grown):
            assert asyncio.get_running_loop().time() < deadline, "never frozen again"
            await asyncio.sleep(0.01)
        keeper.cancel()
    finally:
        gc.unfreeze()


def _still_collected(objects: list[Node]) -> bool:
    """Whether any of ``objects`` is still in a generation the collector walks."""
    wanted = {id(o) for o in objects}
    return any(id(o) in wanted for o in gc.get_objects())
