"""Flush services: fsync on threads, never on the event loop.

``CommitLogFlusher`` is RocketMQ's FlushRealTimeService (ASYNC_FLUSH: every 500 ms when at
least 4 pages are dirty, or everything every 10 s) and GroupCommitService (SYNC_FLUSH: every
writer waiting for the same fsync shares it; waiters are woken in one batch per fsync).
``LogicsFlusher`` flushes ConsumeQueues and the index every second and writes the checkpoint.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable

from rocketq.storage.commitlog import CommitLog
from rocketq.storage.service_thread import ServiceThread

log = logging.getLogger(__name__)


class CommitLogFlusher(ServiceThread):
    name = "commitlog-flush"

    def __init__(
        self,
        commitlog: CommitLog,
        *,
        sync: bool,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
    ) -> None:
        super().__init__()
        self.commitlog = commitlog
        self.sync = sync
        self.interval = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough_interval = thorough_interval_ms / 1000
        # (flushed offset, store timestamp of the newest flushed record), for the checkpoint.
        self.flushed: tuple[int, int] = (commitlog.max_offset, 0)
        self._waiters: collections.deque[tuple[int, asyncio.Future[bool]]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.fsync_count = 0

    def start_on(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop
        self.start()

    def stop(self) -> None:
        """Stop the thread after one last full flush (any thread; waiters are woken on the
        loop)."""
        self.halt()
        flushed = self.flush_all()
        if self._waiters and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._resolve, flushed)

    def wait_flushed(self, end_offset: int) -> asyncio.Future[bool]:
        """A future that completes once everything below ``end_offset`` is on disk."""
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if end_offset <= self.flushed[0]:
            fut.set_result(True)
            return fut
        self._waiters.append((end_offset, fut))
        self._wake.set()
        return fut

    def flush_all(self) -> int:
        snapshot = self.commitlog.last_append
        flushed = self.commitlog.files.flush()
        self.fsync_count += 1
        ts = snapshot[1] if snapshot[0] <= flushed else self.flushed[1]
        self.flushed = (flushed, ts)
        return flushed

    def _run(self) -> None:
        last_thorough = time.monotonic()
        while not self._stopping:
            if self.sync:
                self._wake.wait(0.01)
                self._wake.clear()
                if not self._waiters:
                    continue
                try:
                    flushed = self.flush_all()
                except OSError:
                    log.exception("commitlog flush failed; waiters will time out")
                    continue
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._resolve, flushed)
            else:
                self._wake.wait(self.interval)
                self._wake.clear()
                now = time.monotonic()
                thorough = now - last_thorough >= self.thorough_interval
                if thorough or self.commitlog.files.dirty_pages() >= self.least_pages:
                    if thorough:
                        last_thorough = now
                    try:
                        flushed = self.flush_all()
                    except OSError:
                        log.exception("commitlog flush failed")
                        continue
                    if self._waiters and self._loop is not None:
                        self._loop.call_soon_threadsafe(self._resolve, flushed)

    def _resolve(self, flushed: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            _, fut = waiters.popleft()
            if not fut.done():
                fut.set_result(True)


class LogicsFlusher(ServiceThread):
    """Flushes ConsumeQueues and the index, then writes the checkpoint, on a thread."""

    name = "logics-flush"

    def __init__(self, interval_ms: int, flush_once: Callable[[], None]) -> None:
        super().__init__()
        self.interval = interval_ms / 1000
        self.flush_once = flush_once

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.interval)
            if self._stopping:
                break
            try:
                self.flush_once()
            except OSError:
                log.exception("consume queue / index flush failed")
