"""Flush services: fsync on threads, never on the event loop.

``CommitLogFlusher`` is RocketMQ's FlushRealTimeService (ASYNC_FLUSH: every 500 ms when at
least 4 pages are dirty, or everything every 10 s) and GroupCommitService (SYNC_FLUSH: every
writer waiting for the same fsync shares it; waiters are woken in one batch per fsync).
``LogicsFlusher`` is RocketMQ's FlushConsumeQueueService (every second the ConsumeQueues
written since with at least 2 dirty pages, every dirty one each 60 s), flushes the index
every ``flush_interval_index`` and writes the checkpoint with what is on disk.

A failed fsync (or msync, syncfs) is never tried again as if the next one could make up
for it: the flushed offset stays where it was, the error goes to ``on_error`` (the store
stops taking writes, storage.disk_state), the waiting writers get that error instead of a
flush timeout, and the thread flushes no more (nor writes a checkpoint claiming more).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable

from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import ServiceNotAvailableError, StoreFailedError
from rocketq.storage.checkpoint import Checkpoint, CheckpointFile
from rocketq.storage.commitlog import CommitLog
from rocketq.storage.dispatch import ConsumeQueueTable, Dispatcher
from rocketq.storage.index_file import IndexService
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
        # Told a flush error; returns the error writers waiting for the flush get.
        self.on_error: Callable[[BaseException], ServiceNotAvailableError] | None = None
        # Set by a failed flush: no flush is tried again, every waiter gets it.
        self.failure: ServiceNotAvailableError | None = None

    def start_on(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop
        self.start()

    def stop(self) -> None:
        """Stop the thread after one last full flush (any thread; waiters are woken on the
        loop)."""
        self.halt()
        if self.failure is not None:
            return
        try:
            flushed = self.flush_all()
        except OSError as exc:
            self._failed(exc)
            return
        if self._waiters and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._resolve, flushed)

    def wait_flushed(self, end_offset: int) -> asyncio.Future[bool]:
        """A future that completes once everything below ``end_offset`` is on disk."""
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if self.failure is not None:
            fut.set_exception(self.failure)
            return fut
        if end_offset <= self.flushed[0]:
            fut.set_result(True)
            return fut
        self._waiters.append((end_offset, fut))
        self._wake.set()
        return fut

    def flush_all(self) -> int:
        """fsync the CommitLog; -> the flushed offset. Raises the OSError of a failed
        fsync (the flushed offset does not move then)."""
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
                except OSError as exc:
                    self._failed(exc)
                    return
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
                    except OSError as exc:
                        self._failed(exc)
                        return
                    if self._waiters and self._loop is not None:
                        self._loop.call_soon_threadsafe(self._resolve, flushed)

    def _failed(self, exc: OSError) -> None:
        """A flush failed: remember why, fail every waiter, flush no more."""
        log.error("CommitLog flush failed at flushed offset %d: %s", self.flushed[0], exc)
        failure = self.on_error(exc) if self.on_error is not None else None
        self.failure = failure or StoreFailedError(f"flushing the CommitLog failed: {exc}")
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._fail_waiters)
        else:
            self._fail_waiters()

    def _fail_waiters(self) -> None:
        failure = self.failure
        assert failure is not None
        waiters = self._waiters
        while waiters:
            _, fut = waiters.popleft()
            if not fut.done():
                fut.set_exception(failure)

    def _resolve(self, flushed: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            _, fut = waiters.popleft()
            if not fut.done():
                fut.set_result(True)


class LogicsFlusher(ServiceThread):
    """RocketMQ's FlushConsumeQueueService, the index flush and the checkpoint, on a thread.

    Every ``flush_interval_consume_queue`` a round flushes the ConsumeQueues written since
    the last one that have ``flush_consume_queue_least_pages`` dirty pages (or a full
    file), every dirty one each ``flush_consume_queue_thorough_interval``; the index each
    ``flush_interval_index``; then writes the checkpoint. The checkpoint claims only what
    is on disk: the CommitLog's flushed offset, the offset below which every ConsumeQueue
    entry is flushed (the dispatcher's built offset, or the oldest entry of a queue still
    dirty), and the one below which every index key is; the logics timestamp moves only
    when no queue is left dirty below what was built.
    """

    name = "logics-flush"

    def __init__(
        self,
        config: StoreConfig,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        dispatcher: Dispatcher,
        commitlog_flusher: CommitLogFlusher,
    ) -> None:
        super().__init__()
        self.config = config
        self.interval = config.flush_interval_consume_queue / 1000
        self.queues = queues
        self.index = index
        self.dispatcher = dispatcher
        self.commitlog_flusher = commitlog_flusher
        self.checkpoint_file: CheckpointFile | None = None
        # Told a flush or checkpoint error (the store stops taking writes); after one no
        # round runs again, so no checkpoint claims what the failed flush did not do.
        self.on_error: Callable[[BaseException], object] | None = None
        self.failed = False
        # Held by a round from reading the offsets to writing the checkpoint; whoever cuts
        # the CommitLog back holds it too, so no round writes offsets from before the cut.
        self.lock = threading.Lock()
        self.logics_flushed_offset = 0
        self.index_flushed_offset = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        now = time.monotonic()
        self._last_thorough = now
        self._last_index = now

    def restore(self, cp: Checkpoint, *, max_offset: int) -> None:
        """Start from what a checkpoint (the one read at load) says is flushed."""
        self.logics_flushed_offset = min(cp.logics_flushed_offset, max_offset)
        self.index_flushed_offset = min(cp.index_flushed_offset, max_offset)
        self.logics_msg_timestamp = cp.logics_msg_timestamp
        self.index_msg_timestamp = cp.index_msg_timestamp

    def flush(self, *, clean: bool = False, thorough: bool = False) -> None:
        """One round, then the checkpoint; ``thorough`` flushes every dirty queue and the
        index now, ``clean`` too and writes the clean-shutdown offsets."""
        cfg = self.config
        forced = thorough or clean
        if self.failed:
            return
        with self.lock:
            now = time.monotonic()
            thorough = forced or now - self._last_thorough >= (
                cfg.flush_consume_queue_thorough_interval / 1000
            )
            # Read before flushing: every entry for a record below it is written.
            built_offset, built_ts = self.dispatcher.built
            least = 0 if thorough else cfg.flush_consume_queue_least_pages
            durable = self.queues.flush(least, built_offset)
            if thorough:
                self._last_thorough = now
            if durable >= built_offset and built_ts:
                # No queue is dirty below the newest record built (RocketMQ moves
                # logicsMsgTimestamp on thorough flushes only; such a round is one).
                self.logics_msg_timestamp = built_ts
            self.logics_flushed_offset = max(self.logics_flushed_offset, durable)
            due = now - self._last_index >= cfg.flush_interval_index / 1000
            if self.index is not None and (forced or due):
                index_built = self.dispatcher.built[0]
                self.index_msg_timestamp = self.index.flush() or self.index_msg_timestamp
                self.index_flushed_offset = max(self.index_flushed_offset, index_built)
                self._last_index = now
            self.write_checkpoint(clean=clean)

    def cut(self, offset: int) -> None:
        """The CommitLog was cut back to ``offset`` (hold ``lock``): claim nothing past it."""
        self.logics_flushed_offset = min(self.logics_flushed_offset, offset)
        self.index_flushed_offset = min(self.index_flushed_offset, offset)
        self.write_checkpoint()

    def write_checkpoint(self, *, clean: bool = False) -> None:
        """Write what is known flushed (hold ``lock``)."""
        if self.checkpoint_file is None:
            return
        flushed_offset, flushed_ts = self.commitlog_flusher.flushed
        cp = Checkpoint(
            physic_msg_timestamp=flushed_ts,
            logics_msg_timestamp=self.logics_msg_timestamp,
            index_msg_timestamp=self.index_msg_timestamp,
            confirm_phy_offset=self.dispatcher.committed_offset,
            physic_flushed_offset=flushed_offset,
            logics_flushed_offset=self.logics_flushed_offset,
            index_flushed_offset=self.index_flushed_offset if self.index is not None else 0,
        )
        if clean:
            cp.clean_max_phy_offset = self.commitlog_flusher.commitlog.max_offset
            cp.clean_dispatched_offset = self.dispatcher.reput_offset
        self.checkpoint_file.write(cp)

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.interval)
            if self._stopping:
                break
            try:
                self.flush()
            except OSError as exc:
                self.fail(exc)
                return

    def fail(self, exc: BaseException) -> None:
        """A flush or the checkpoint write failed: flush and checkpoint no more."""
        log.error("consume queue / index flush or checkpoint failed: %s", exc)
        self.failed = True
        if self.on_error is not None:
            self.on_error(exc)
