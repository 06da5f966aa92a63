"""Receipts kept invisible for the consumers that asked for ``auto_renew`` (RocketMQ 5's
push consumers): what they received stays hidden while they work on it, as RocketMQ 5's
proxy keeps it (its ReceiptHandleProcessor).

A message received with ``auto_renew`` is hidden for :attr:`Renewals.invisible_ms` (60 s).
While it is not acknowledged, its invisible time is changed again to that much
:attr:`Renewals.before_ms` (10 s) before it ends, checked every :attr:`Renewals.every_s`
(5 s), for at most :attr:`Renewals.max_ms` (3 h) after it was received. A change gives a new
receipt; the consumer still holds the first, so an ack, a change or a dead-letter forward
names the first and is applied to the newest (:meth:`Renewals.take`). A renewal that fails
(the message was acknowledged or is gone) ends it. The table is kept in memory: after a
restart the messages come back when their last invisible time ends (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from rocketq.common.exceptions import RocketqError

log = logging.getLogger(__name__)

INVISIBLE_MS: Final = 60_000
BEFORE_MS: Final = 10_000
EVERY_S: Final = 5.0
MAX_MS: Final = 3 * 3600 * 1000
LIMIT: Final = 100_000  # receipts renewed at once; beyond it a receipt is not renewed

# Change a receipt's invisible time: (group, topic, receipt, invisible ms) -> new receipt.
Change = Callable[[str, str, str, int], Awaitable[str]]


@dataclass
class _Held:
    group: str
    topic: str
    client_id: str
    handle: str  # the newest receipt
    due_ms: int  # when the message shows again unless renewed
    until_ms: int  # renewed no later than this
    renewing: asyncio.Future[None] | None = field(default=None, repr=False)


class Renewals:
    def __init__(self, change: Change, clock_ms: Callable[[], int]) -> None:
        self.change = change
        self.clock_ms = clock_ms
        self.invisible_ms = INVISIBLE_MS
        self.before_ms = BEFORE_MS
        self.every_s = EVERY_S
        self.max_ms = MAX_MS
        self._held: dict[str, _Held] = {}  # first receipt -> its state
        self.renewed = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def configure(
        self,
        *,
        invisible_ms: int = INVISIBLE_MS,
        before_ms: int = BEFORE_MS,
        every_s: float = EVERY_S,
    ) -> None:
        """Set the times (tests shorten them); the next check follows at once."""
        self.invisible_ms, self.before_ms, self.every_s = invisible_ms, before_ms, every_s
        self._wake.set()

    def __len__(self) -> int:
        return len(self._held)

    def add(self, client_id: str, group: str, topic: str, handle: str, due_ms: int) -> None:
        if len(self._held) < LIMIT and handle:
            now = self.clock_ms()
            self._held[handle] = _Held(group, topic, client_id, handle, due_ms, now + self.max_ms)

    async def take(self, handle: str) -> str:
        """The newest receipt of ``handle`` (itself when it is not renewed), which is no
        longer renewed: the consumer is done with it."""
        held = self._held.pop(handle, None)
        if held is None:
            return handle
        if held.renewing is not None:  # a change in flight: its new receipt is the one
            await asyncio.shield(held.renewing)
        return held.handle

    def drop_client(self, client_id: str) -> None:
        """A consumer went away: its messages show again when their time ends."""
        for first in [h for h, held in self._held.items() if held.client_id == client_id]:
            del self._held[first]

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._held.clear()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.every_s)
            self._wake.clear()
            try:
                await self.renew_due()
            except Exception:  # the next turn tries again
                log.exception("renewing received messages failed")

    async def renew_due(self) -> int:
        """Renew every receipt whose invisible time ends within ``before_ms``; -> how many."""
        now = self.clock_ms()
        due = [
            (first, held)
            for first, held in self._held.items()
            if held.due_ms - now <= self.before_ms and held.renewing is None
        ]
        count = 0
        for first, held in due:
            if now >= held.until_ms:
                self._held.pop(first, None)
                continue
            held.renewing = asyncio.get_running_loop().create_future()
            try:
                held.handle = await self.change(
                    held.group, held.topic, held.handle, self.invisible_ms
                )
                held.due_ms = self.clock_ms() + self.invisible_ms
                count += 1
            except RocketqError as exc:
                log.debug("receipt %s not renewed: %s", first[:60], exc)
                if self._held.get(first) is held:
                    del self._held[first]
            finally:
                held.renewing.set_result(None)
                held.renewing = None
        self.renewed += count
        return count
