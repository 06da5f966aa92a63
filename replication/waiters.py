"""Sends waiting for an offset to be reached: a slave's acknowledgement (SYNC_MASTER) or a
quorum's commit (Raft). RocketMQ's GroupTransferService, without its polling.

One heap of waiting sends keyed by their CommitLog end offset: each advance of the reached
offset completes, in one pass, every send it covers. A send costs a heap entry and a
callback, no timer of its own: one sweeper task, alive while anything waits, times out the
sends past their deadline (within :data:`SWEEP_INTERVAL`).

The callbacks run inside :meth:`OffsetWaiters.advance`, i.e. in the callback that read the
acknowledgement or the commit: a send is answered there, before whatever else the event
loop has queued (a dispatch step, the next stream message), not a loop turn later in a
task of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable
from typing import Final, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

SWEEP_INTERVAL: Final = 0.1  # s between looks for sends past their deadline

Reached = Callable[[bool | None], None]
"""Told how a wait ended: True reached, None timed out, False given up (fail_all)."""


class OffsetWaiters:
    def __init__(self) -> None:
        # (end offset, seq, deadline, callback), smallest end first.
        self._heap: list[tuple[int, int, float, Reached]] = []
        self._seq = itertools.count()
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, end_offset: int, timeout: float, reached: Reached) -> None:
        """Call ``reached`` exactly once: True from the :meth:`advance` that reaches
        ``end_offset``, None after ``timeout``, False from :meth:`fail_all`."""
        loop = asyncio.get_running_loop()
        heapq.heappush(self._heap, (end_offset, next(self._seq), loop.time() + timeout, reached))
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = loop.create_task(self._sweep())

    async def wait(self, end_offset: int, timeout: float) -> bool | None:
        """:meth:`add` as a coroutine: True once reached, None after ``timeout``, False if
        :meth:`fail_all` gives up on every waiting send first."""
        fut: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        self.add(end_offset, timeout, resolver(fut))
        try:
            return await fut
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def advance(self, reached: int) -> None:
        """Everything below ``reached`` is acknowledged: complete the sends it covers."""
        heap = self._heap
        while heap and heap[0][0] <= reached:
            _call(heapq.heappop(heap)[3], True)

    def fail_all(self) -> None:
        heap, self._heap = self._heap, []
        for entry in heap:
            _call(entry[3], False)

    async def close(self) -> None:
        self.fail_all()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while self._heap:
            await asyncio.sleep(SWEEP_INTERVAL)
            heap = self._heap
            now = loop.time()
            # Deadlines grow with end offsets (one timeout per kind of wait), so the late
            # ones are at the top; one behind an earlier send waits one more sweep at most.
            while heap and heap[0][2] <= now:
                _call(heapq.heappop(heap)[3], None)


def resolver(fut: asyncio.Future[T]) -> Callable[[T], None]:
    """A callback that sets ``fut``'s result (unless it is done, e.g. cancelled)."""

    def resolve(value: T) -> None:
        if not fut.done():
            fut.set_result(value)

    return resolve


def _call(reached: Reached, result: bool | None) -> None:
    try:
        reached(result)
    except Exception:  # one broken callback must not keep the others waiting
        log.exception("a send waiting for its offset failed to take its answer")
