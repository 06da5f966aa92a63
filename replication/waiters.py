"""Sends waiting for an offset to be reached: a slave's acknowledgement (SYNC_MASTER) or a
quorum's commit (Raft). RocketMQ's GroupTransferService, without its polling.

One heap of waiting sends keyed by their CommitLog end offset: each advance of the reached
offset completes, in one pass, every send it covers. A send costs a heap entry and a
future, no timer of its own: one sweeper task, alive while anything waits, times out the
sends past their deadline (within :data:`SWEEP_INTERVAL`).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from typing import Final

SWEEP_INTERVAL: Final = 0.1  # s between looks for sends past their deadline


class OffsetWaiters:
    def __init__(self) -> None:
        # (end offset, seq, deadline, future), smallest end first. The future's result:
        # True reached, False given up (fail_all), None timed out.
        self._heap: list[tuple[int, int, float, asyncio.Future[bool | None]]] = []
        self._seq = itertools.count()
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._heap)

    async def wait(self, end_offset: int, timeout: float) -> bool | None:
        """True once :meth:`advance` reaches ``end_offset``; None after ``timeout``; False
        if :meth:`fail_all` gives up on every waiting send first."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool | None] = loop.create_future()
        heapq.heappush(self._heap, (end_offset, next(self._seq), loop.time() + timeout, fut))
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = loop.create_task(self._sweep())
        try:
            return await fut
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def advance(self, reached: int) -> None:
        """Everything below ``reached`` is acknowledged: complete the sends it covers."""
        heap = self._heap
        while heap and heap[0][0] <= reached:
            fut = heapq.heappop(heap)[3]
            if not fut.done():
                fut.set_result(True)

    def fail_all(self) -> None:
        heap, self._heap = self._heap, []
        for entry in heap:
            if not entry[3].done():
                entry[3].set_result(False)

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
            while heap and (heap[0][2] <= now or heap[0][3].done()):
                fut = heapq.heappop(heap)[3]
                if not fut.done():
                    fut.set_result(None)
