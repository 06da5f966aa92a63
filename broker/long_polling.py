"""Long polling (RocketMQ's PullRequestHoldService): a pull that finds nothing new is held
until a message for its queue is dispatched or its time is up, then answered."""

from __future__ import annotations

import asyncio
import contextlib

from rocketq.common.aio import wait_done


class PullRequestHoldService:
    def __init__(self) -> None:
        # (topic, queue id) -> held pulls: (offset they wait beyond, future).
        self._held: dict[tuple[bytes, int], list[tuple[int, asyncio.Future[None]]]] = {}

    async def hold(self, topic: bytes, queue_id: int, offset: int, timeout: float) -> bool:
        """Wait until the queue's max offset passes ``offset``; False on timeout."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        key = (topic, queue_id)
        entry = (offset, fut)
        self._held.setdefault(key, []).append(entry)
        try:
            return await wait_done(fut, timeout)
        finally:
            waiting = self._held.get(key)
            if waiting is not None:
                with contextlib.suppress(ValueError):
                    waiting.remove(entry)
                if not waiting:
                    del self._held[key]

    def notify(self, topic: bytes, queue_id: int, max_offset: int, tags_code: int) -> None:
        """The dispatcher wrote entries up to ``max_offset`` (exclusive) for the queue."""
        held = self._held
        if not held:  # nobody waits anywhere: no key to build
            return
        waiting = held.get((topic, queue_id))
        if not waiting:
            return
        for offset, fut in waiting:
            if max_offset > offset and not fut.done():
                fut.set_result(None)

    def idle(self) -> bool:
        """Whether no pull is held (the dispatcher then need not tell of arrivals)."""
        return not self._held

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self._held.values())
