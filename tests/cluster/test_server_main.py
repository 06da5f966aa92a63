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
    try:
        freeze_long_lived()
        before = gc.get_freeze_count()
        keeper = asyncio.ensure_future(keep_collections_short(interval=0.01, threshold=5_000))
        grown = [Node(i) for i in range(20_000)]
        gc.collect()  # they live into the oldest generation
        deadline = asyncio.get_running_loop().time() + 5
        while gc.get_freeze_count() < before + len(grown):
            assert asyncio.get_running_loop().time() < deadline, "never frozen again"
            await asyncio.sleep(0.01)
        keeper.cancel()
    finally:
        gc.unfreeze()
