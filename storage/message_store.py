"""The message store: one object that appends, dispatches, flushes, recovers and reads.

Lifecycle: ``await store.start()`` loads and recovers (blocking work on a thread), then
runs the flush threads and the dispatch and cleanup tasks on the event loop;
``await store.shutdown()`` drains dispatch, flushes everything, writes the checkpoint with
the clean-shutdown offsets and every queue's end (storage.queue_ends), then removes the
abort file.

After a crash ``start`` returns once the CommitLog's tail is checked and every queue's
next offset is known: appends are taken at once, and re-dispatch of what the ConsumeQueues
and the index may lack runs in the background, as dispatch always does (consumers see the
entries as they are built).

Writes are refused while :attr:`MessageStore.disk` says so (storage.disk_state): a full
disk (past ``disk_space_warning_level_ratio``, or no space left for a write or a new
segment; taken back by itself once space returns) or a failed write or fsync (until
restart). :meth:`MessageStore.write_refusal` tells why, :meth:`add_refusal_listener` when it
changes; a refused write raises :class:`DiskFullError` or :class:`StoreFailedError` (both
ServiceNotAvailableError, code 14). Reads never are.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.common.aio import cancel_all, wait_done
from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import DiskFullError, MessageIllegalError, ServiceNotAvailableError
from rocketq.common.file_modes import PRIVATE_FILE, private_dir, tighten
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.common.record import INT, POS_BODY, POS_BODY_LENGTH, USHORT, check_topic, encode_host
from rocketq.storage.checkpoint import CheckpointFile, fsync_dir
from rocketq.storage.commitlog import AppendResult, CommitLog
from rocketq.storage.consume_queue import CQ_UNIT_SIZE, ENTRY
from rocketq.storage.disk_state import DiskState, disk_used_ratio
from rocketq.storage.dispatch import (
    ArrivalListener,
    ConsumeQueueTable,
    Dispatcher,
    TagsCodeFn,
    property_value,
)
from rocketq.storage.flush import CommitLogFlusher, LogicsFlusher
from rocketq.storage.index_file import IndexService
from rocketq.storage.queue_ends import QueueEndsFile
from rocketq.storage.recovery import RecoveryResult, recover
from rocketq.storage.results import GetResult, GetStatus, PutResult, PutStatus
from rocketq.storage.retention import CleanReport, CleanService
from rocketq.storage.warm import CommitLogWarmer

log = logging.getLogger(__name__)

# RocketMQ scans at least this many ConsumeQueue bytes per pull (800 entries) when filtering.
_MIN_FILTER_SCAN_BYTES = 16000
_BLANK_CQ_SIZE = 0x7FFFFFFF
# Dispatch that could not write a ConsumeQueue or index entry (a full disk) tries again
# this often, from where it stopped.
_DISPATCH_RETRY = 1.0  # s


class MessageStore:
    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Callable[[], float] = time.time,
        auto_commit: bool = True,
        tags_code_overrides: dict[bytes, TagsCodeFn] | None = None,
        disk_ratio: Callable[[Path], float] = disk_used_ratio,
    ) -> None:
        self.config = config
        self.clock = clock
        self.auto_commit = auto_commit
        self._queue_offsets_stale = False
        # Told the CommitLog's new end after every append (replication wakes on it).
        self.append_listeners: list[Callable[[int], None]] = []
        # Run once after a run of appends (shipping them to a slave, making them a Raft
        # entry): by :meth:`settle`, or at the loop's next turn when nobody calls it.
        self.settle_listeners: list[Callable[[], None]] = []
        self._settle_handle: asyncio.Handle | None = None
        # Held appends lost by a failed write before settle (see append): settle raises it.
        self._lost_held: ServiceNotAvailableError | None = None
        # The error the free-space check before a segment raised last (not a write error).
        self._refused_segment: ServiceNotAvailableError | None = None
        root = Path(config.store_path_root_dir)
        self.root = root
        self.commitlog = CommitLog(
            Path(config.commit_log_dir),
            file_size=config.mapped_file_size_commit_log,
            max_message_size=config.max_message_size,
            store_host=encode_host(config.store_host),
            clock_ms=self._clock_ms,
        )
        self.queues = ConsumeQueueTable(
            Path(config.consume_queue_dir),
            config.mapped_file_size_consume_queue,
            config.flush_consume_queue_least_pages,
        )
        self.index = (
            IndexService(
                Path(config.index_dir), config.max_hash_slot_num, config.max_index_num, clock=clock
            )
            if config.message_index_enable
            else None
        )
        self.disk = DiskState(
            warning_ratio=config.disk_space_warning_level_ratio,
            directories=(
                Path(config.commit_log_dir),
                Path(config.consume_queue_dir),
                Path(config.index_dir),
            ),
            disk_ratio=disk_ratio,
        )
        # Free space is checked before each new CommitLog segment, not only on the timer.
        self.commitlog.files.before_create = self._before_segment
        self.dispatcher = Dispatcher(self.commitlog, self.queues, self.index, tags_code_overrides)
        self.flusher = CommitLogFlusher(
            self.commitlog,
            sync=config.flush_disk_type == "SYNC_FLUSH",
            interval_ms=config.flush_interval_commit_log,
            least_pages=config.flush_commit_log_least_pages,
            thorough_interval_ms=config.flush_commit_log_thorough_interval,
        )
        self.flusher.on_error = self._flush_failed
        self.warmer = CommitLogWarmer(
            self.commitlog.files,
            config.warm_mapped_file_ahead if config.flush_disk_type == "ASYNC_FLUSH" else 0,
        )
        self.warmer.on_error = self._warm_failed
        self.logics_flusher = LogicsFlusher(
            config, self.queues, self.index, self.dispatcher, self.flusher
        )
        self.logics_flusher.on_error = self._logics_flush_failed
        self.cleaner = CleanService(
            config,
            self.commitlog,
            self.queues,
            self.index,
            clock_ms=self._clock_ms,
            disk=self.disk,
        )
        self.checkpoint_file: CheckpointFile | None = None
        self.queue_ends = QueueEndsFile(config)
        self.recovery: RecoveryResult | None = None
        self.running = False
        self.writable = True
        self.read_only_reason = ""
        self._topics: dict[str, bytes] = {}
        self._dispatch_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Re-dispatch after a crash: where it ends, and when it began (for the log line).
        self._redispatch: tuple[int, float] | None = None

    def _clock_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.load)
        if self.dispatcher.behind:
            self._redispatch = (self.dispatcher.committed_offset, time.monotonic())
            self._dispatch_wake.set()
        loop = asyncio.get_running_loop()
        self.disk.bind_loop(loop)
        self.disk.check_space()
        self.flusher.start_on(loop)
        self.logics_flusher.start()
        self.warmer.start()
        self.running = True
        self._tasks = [
            loop.create_task(self._dispatch_loop(), name="store-dispatch"),
            loop.create_task(self._clean_loop(), name="store-clean"),
        ]

    def load(self) -> RecoveryResult:
        """Load every file and recover; blocking (``start`` runs it on a thread). Leaves
        the re-dispatch a crash needs to the dispatch task (``start`` wakes it)."""
        cfg = self.config
        # Messages are nobody else's: private folders and files, and what an older version
        # left readable by others is made private (once, logged).
        private_dir(self.root)
        tighten(self.root, "store")
        for folder in {Path(cfg.commit_log_dir), Path(cfg.consume_queue_dir), Path(cfg.index_dir)}:
            if not folder.is_relative_to(self.root):
                tighten(folder, "store")
        abort = Path(cfg.abort_path)
        last_exit_ok = not abort.exists()
        self.checkpoint_file = CheckpointFile(Path(cfg.checkpoint_path))
        cp = self.checkpoint_file.read()
        self.commitlog.files.load()
        # After a crash only the entries below the checkpoint's logics offset are known to
        # be on disk; a clean shutdown flushed them all, and recorded where each one ends.
        ends = self.queue_ends.take(cp, self.commitlog.min_offset, clean=last_exit_ok)
        durable = None if last_exit_ok else cp.logics_flushed_offset
        self.queues.load(durable, ends, self.commitlog.min_offset)
        if self.index is not None:
            self.index.load(last_exit_ok, cp.index_msg_timestamp)
        dropped = self.index.dropped_from if self.index is not None else None
        result = recover(
            self.commitlog,
            self.queues,
            cp,
            last_exit_ok=last_exit_ok,
            check_crc=cfg.check_crc_on_recover,
            with_index=self.index is not None,
            index_dropped_from=dropped,
        )
        self.recovery = result
        max_offset = result.max_offset
        if self.index is not None:
            self.index.truncate(max_offset)
        if last_exit_ok:
            # Everything below the dispatched offset was flushed at the clean shutdown.
            cp.logics_flushed_offset = cp.index_flushed_offset = result.dispatch_from
        elif dropped is not None:
            cp.index_flushed_offset = min(cp.index_flushed_offset, dropped)
        # recover() made the CommitLog durable up to its end.
        self.flusher.flushed = (max_offset, cp.physic_msg_timestamp)
        self.logics_flusher.restore(cp, max_offset=max_offset)
        self.logics_flusher.checkpoint_file = self.checkpoint_file
        if self.auto_commit:
            committed = max_offset
        else:
            dispatched = max(
                (cq.max_physic_offset for cq in self.queues.queues.values()), default=0
            )
            committed = min(max_offset, max(cp.confirm_phy_offset, dispatched))
        self.dispatcher.reset(max(result.dispatch_from, self.commitlog.min_offset, 0))
        self.dispatcher.committed_offset = committed
        # Clean-shutdown offsets are valid once: a crash from here on must not trust them.
        with self.logics_flusher.lock:
            self.logics_flusher.write_checkpoint()
        abort.touch(mode=PRIVATE_FILE)
        fsync_dir(abort.parent)
        self._rebuild_queue_table(result)
        log.info(
            "store loaded from %s: CommitLog [%d, %d), %d queues, %s; %d bytes to dispatch",
            self.root,
            self.commitlog.min_offset,
            max_offset,
            len(self.queues.queues),
            "fast recovery"
            if result.fast
            else f"checked {result.scanned_records} records ({result.scanned_bytes} bytes) "
            f"from offset {result.scan_from}",
            self.dispatcher.behind,
        )
        return result

    def _rebuild_queue_table(self, result: RecoveryResult) -> None:
        table = self.commitlog.queue_table
        table.clear()
        for key, cq in self.queues.queues.items():
            table[key] = cq.max_offset
        for key, next_offset in result.queue_offsets.items():
            if next_offset > table.get(key, 0):
                table[key] = next_offset

    async def shutdown(self) -> None:
        """Stop cleanly: everything flushed, checkpoint written, abort file removed."""
        if not self.running:
            return
        try:
            self._write_held()
        except ServiceNotAvailableError as exc:
            log.warning("held appends not written at shutdown: %s", exc)
        await self._stop_tasks()
        try:
            while self.dispatcher.run(1 << 20):
                pass
        except (OSError, DiskFullError) as exc:
            # What is not dispatched is re-dispatched from the CommitLog at the next start.
            log.warning("dispatch could not finish at shutdown: %s", exc)
        await asyncio.to_thread(self._shutdown_blocking)

    def _shutdown_blocking(self) -> None:
        if self.disk.failed is not None:
            # Nothing is flushed again and no clean checkpoint written: the abort file stays,
            # so the next start recovers from what is really on disk.
            log.error(
                "store stopping after a failed write or fsync: no final flush, the next "
                "start recovers from the disk (%s)",
                self.disk.failed,
            )
            self._crash_blocking()
            return
        self.warmer.halt()
        self.flusher.stop()
        self.logics_flusher.halt()
        self.queues.stop_preparing()
        self.flush_logics(clean=True)
        self.queue_ends.save(self.queues.ends(), self.commitlog, self.dispatcher.reput_offset)
        self.commitlog.files.close()
        self.queues.close()
        if self.index is not None:
            self.index.close()
        if self.checkpoint_file is not None:
            self.checkpoint_file.close()
        Path(self.config.abort_path).unlink(missing_ok=True)
        fsync_dir(Path(self.config.abort_path).parent)

    async def crash(self) -> None:
        """Stop like a killed process would (tests): no final flush, no checkpoint, the abort
        file stays. Threads are stopped and files closed so the directory can be reopened."""
        await self._stop_tasks()
        await asyncio.to_thread(self._crash_blocking)

    async def _stop_tasks(self) -> None:
        self.running = False
        await cancel_all(self._tasks)
        self._tasks = []

    def _crash_blocking(self) -> None:
        self.warmer.halt()
        self.flusher.halt()
        self.logics_flusher.halt()
        self.commitlog.files.close()
        self.queues.close()
        if self.index is not None:
            self.index.release()
        if self.checkpoint_file is not None:
            self.checkpoint_file.close()

    def flush_logics(self, *, clean: bool = False, thorough: bool = False) -> None:
        """One round of the logics flush, then the checkpoint (see flush.LogicsFlusher);
        ``thorough`` flushes every dirty ConsumeQueue and the index now."""
        self.logics_flusher.flush(clean=clean, thorough=thorough)

    async def _dispatch_loop(self) -> None:
        while True:
            await self._dispatch_wake.wait()
            self._dispatch_wake.clear()
            try:
                while self.dispatcher.run(1024):
                    await asyncio.sleep(0)
            except (OSError, DiskFullError) as exc:
                # The entries of what is stored could not be written (the records are safe
                # in the CommitLog): refuse writes, and try again from where it stopped.
                self.disk.write_error(exc, "writing ConsumeQueue or index entries")
                await asyncio.sleep(_DISPATCH_RETRY)
                self._dispatch_wake.set()
                continue
            if self._redispatch is not None and self.dispatcher.reput_offset >= self._redispatch[0]:
                log.info(
                    "re-dispatch after recovery caught up at CommitLog offset %d in %.3f s",
                    self._redispatch[0],
                    time.monotonic() - self._redispatch[1],
                )
                self._redispatch = None

    async def _clean_loop(self) -> None:
        interval = self.config.clean_resource_interval / 1000
        while True:
            await asyncio.sleep(interval)
            self.clean()

    def clean(self) -> CleanReport:
        """One retention run (every ``clean_resource_interval``; tests call it directly)."""
        report = self.cleaner.run()
        if report.commit_log_files and self.dispatcher.reput_offset < self.commitlog.min_offset:
            self.dispatcher.reset(self.commitlog.min_offset)
        return report

    # -- writing -------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if not self.running:
            raise ServiceNotAvailableError("the message store is not running")
        if not self.writable:
            raise ServiceNotAvailableError(
                f"the message store is read-only ({self.read_only_reason or 'slave'})"
            )
        refused = self.disk.error()
        if refused is not None:
            raise refused

    def write_refusal(self) -> str | None:
        """Why the store refuses writes now (a full disk, a failed write or fsync), or
        None when it takes them. Cheap: read it before every write if need be."""
        return self.disk.refusal()

    def add_refusal_listener(self, listener: Callable[[str | None], None]) -> None:
        """Call ``listener`` (on the event loop) with the new :meth:`write_refusal` each
        time the store starts or stops refusing writes."""
        if listener not in self.disk.listeners:
            self.disk.listeners.append(listener)

    def _before_segment(self, size: int) -> None:
        """Before a new CommitLog segment: measure the disk; refuse when it is full."""
        self.disk.check_space(size)
        refused = self.disk.error()
        if refused is not None:
            self._refused_segment = refused
            raise refused

    def _flush_failed(self, exc: BaseException) -> ServiceNotAvailableError:
        return self.disk.write_error(exc, "flushing the CommitLog")

    def _logics_flush_failed(self, exc: BaseException) -> None:
        self.disk.write_error(exc, "flushing ConsumeQueues, index or checkpoint")

    def _warm_failed(self, exc: OSError) -> None:
        self.disk.write_error(exc, "writing ahead in a CommitLog segment (warming)")

    def prepare_queues(self, topic: str, queue_nums: int) -> None:
        """A topic was created or grew: make the files of its new queues on a thread
        (``ConsumeQueueTable.prepare``). Only queues nothing was written to yet."""
        raw = self.topic_bytes(topic)
        written, queues = self.commitlog.queue_table, self.queues.queues
        keys = [(raw, q) for q in range(queue_nums) if (raw, q) not in written]
        self.queues.prepare(k for k in keys if k not in queues)

    def topic_bytes(self, topic: str) -> bytes:
        raw = self._topics.get(topic)
        if raw is None:
            raw = check_topic(topic)
            if len(self._topics) < 100_000:
                self._topics[topic] = raw
        return raw

    def append(
        self, blob: bytes | bytearray | memoryview, topic: str, queue_id: int
    ) -> AppendResult:
        """Append a batch now (no flush wait). Raises on bad input; nothing is written then.
        While writes are held (:meth:`hold_writes`) the batch is written by :meth:`settle`."""
        self._check_writable()
        commitlog = self.commitlog
        raw = self.topic_bytes(topic)
        held = commitlog.held_bytes
        try:
            result = commitlog.append(blob, raw, queue_id)
        except (OSError, DiskFullError) as exc:
            if exc is self._refused_segment:
                raise  # the free-space check refused the next segment (said already)
            # Nothing of the batch was stored (its queue offsets are free again).
            refused = self.disk.write_error(exc, "appending to the CommitLog", len(blob))
            if held and not commitlog.held_bytes:
                # The batches held before it were being written (a segment roll) and were
                # lost with it: settle must fail, so their answers are not sent.
                self._lost_held = refused
            raise refused from exc
        # Listeners first: what they schedule (shipping to a slave) runs before the
        # dispatch step this wakes, so replication does not wait behind dispatch.
        for listener in self.append_listeners:
            listener(result.end_offset)
        if (commitlog.holding or self.settle_listeners) and self._settle_handle is None:
            self._settle_handle = asyncio.get_running_loop().call_soon(self.settle)
        if self.auto_commit and not commitlog.holding:
            self.dispatcher.committed_offset = result.end_offset
            self._dispatch_wake.set()
        return result

    def append_parts(
        self, parts: list[tuple[bytes, bytes, int]]
    ) -> list[AppendResult | MessageIllegalError]:
        """:meth:`append` for several batches at once, each ``(records, topic bytes,
        queue id)``, written one after the other (``CommitLog.append_parts``) -> each
        one's result or the error that refused it. A write that fails refuses them all
        (raised, as :meth:`append` raises it)."""
        self._check_writable()
        commitlog = self.commitlog
        held = commitlog.held_bytes
        try:
            results = commitlog.append_parts(parts)
        except (OSError, DiskFullError) as exc:
            if exc is self._refused_segment:
                raise
            size = sum(len(p[0]) for p in parts)
            refused = self.disk.write_error(exc, "appending to the CommitLog", size)
            if held and not commitlog.held_bytes:
                self._lost_held = refused
            raise refused from exc
        # The stored parts lie one after the other in the order given: the last one
        # stored ends them.
        end = -1
        for r in reversed(results):
            if isinstance(r, AppendResult):
                end = r.end_offset
                break
        if end < 0:
            return results
        for listener in self.append_listeners:
            listener(end)
        if (commitlog.holding or self.settle_listeners) and self._settle_handle is None:
            self._settle_handle = asyncio.get_running_loop().call_soon(self.settle)
        if self.auto_commit and not commitlog.holding:
            self.dispatcher.committed_offset = end
            self._dispatch_wake.set()
        return results

    def hold_writes(self) -> None:
        """Hold the appends until :meth:`settle` and write them then in one ``pwrite`` (the
        broker calls this before it handles the requests of one network read, and settles
        before it answers them). Appends held are not read, shipped or dispatched before;
        should nobody settle, the loop's next turn does."""
        self.commitlog.holding = True

    def settle(self) -> None:
        """Write the held appends, then run what the appends since the last call queued
        for after them, instead of at the loop's next turn: a caller that has appended
        everything it has calls this, so its bytes leave for the slave or the Raft
        followers before anything else runs (the next stream message read, a dispatch
        step). When the write fails the error is raised: nothing held was stored, and the
        queue offsets it took are free again."""
        commitlog = self.commitlog
        commitlog.holding = False
        lost, self._lost_held = self._lost_held, None
        handle, self._settle_handle = self._settle_handle, None
        if lost is not None:
            if handle is not None:
                handle.cancel()
            raise lost
        if handle is None:
            return
        handle.cancel()
        if commitlog.held_bytes:
            held = commitlog.held_bytes
            try:
                commitlog.write_held()
            except (OSError, DiskFullError) as exc:
                # Nothing held was stored and its queue offsets are free; the caller drops
                # the answers of the held sends (none of them is acknowledged).
                raise self.disk.write_error(exc, "appending to the CommitLog", held) from exc
            if self.auto_commit:
                self.dispatcher.committed_offset = commitlog.max_offset
                self._dispatch_wake.set()
        for listener in self.settle_listeners:
            listener()

    def _write_held(self) -> None:
        """Write what is held before an operation that reads or rewrites the CommitLog."""
        if self.commitlog.held_bytes:
            self.settle()

    def append_raw(
        self, offset: int, data: bytes | bytearray | memoryview, *, wake_dispatch: bool = True
    ) -> None:
        """Append bytes replicated from another store's CommitLog at ``offset`` (our end);
        dispatch builds the ConsumeQueue and IndexFile from them as from our own appends.
        With ``wake_dispatch`` False the caller calls :meth:`wake_dispatch` itself (after
        acknowledging the bytes, so the ack does not wait behind dispatch)."""
        self._check_writable()
        try:
            self.commitlog.append_raw(offset, data)
        except (OSError, DiskFullError) as exc:
            raise self.disk.write_error(exc, "appending replicated bytes", len(data)) from exc
        self._queue_offsets_stale = True
        if self.auto_commit:
            self.dispatcher.committed_offset = self.commitlog.max_offset
            if wake_dispatch:
                self._dispatch_wake.set()

    def wake_dispatch(self) -> None:
        self._dispatch_wake.set()

    def truncate_to(self, offset: int) -> None:
        """Forget every record at or past ``offset`` (a replica ahead of its source): the
        CommitLog is cut there, and ConsumeQueue and index entries pointing past it go."""
        self._write_held()
        offset = max(offset, self.commitlog.min_offset)
        if offset >= self.commitlog.max_offset:
            return
        while self.dispatcher.run(1 << 20):
            pass
        log.warning(
            "cutting the CommitLog back from %d to %d (its source has less)",
            self.commitlog.max_offset,
            offset,
        )
        # Under the checkpoint lock: the flush thread must not write offsets from before
        # the cut after the checkpoint written here.
        with self.logics_flusher.lock:
            self.commitlog.files.truncate_dirty(offset)
            for cq in self.queues.queues.values():
                cq.truncate_dirty(offset)
            self.queues.cut(offset)
            if self.index is not None:
                self.index.truncate(offset)
            self.dispatcher.reset(min(self.dispatcher.reput_offset, offset))
            self.dispatcher.committed_offset = min(self.dispatcher.committed_offset, offset)
            self.commitlog.last_append = (offset, self.commitlog.last_append[1])
            self.flusher.flushed = (min(self.flusher.flushed[0], offset), self.flusher.flushed[1])
            self.logics_flusher.cut(offset)
        self._queue_offsets_stale = True
        self.refresh_queue_offsets()

    def refresh_queue_offsets(self) -> None:
        """Take the next queue offsets from the ConsumeQueues (after replicated appends, a
        replica's own appends must continue them)."""
        self._write_held()
        while self.dispatcher.run(1 << 20):
            pass
        table = self.commitlog.queue_table
        table.clear()
        for key, cq in self.queues.queues.items():
            table[key] = cq.max_offset
        self._queue_offsets_stale = False

    async def put(
        self, blob: bytes | bytearray | memoryview, topic: str, queue_id: int
    ) -> PutResult:
        """Append a batch and, under SYNC_FLUSH, wait for its group-commit fsync."""
        result = self.append(blob, topic, queue_id)
        return PutResult(await self.wait_stored(result.end_offset), result)

    @property
    def waits_for_flush(self) -> bool:
        return self.flusher.sync

    async def wait_stored(self, end_offset: int) -> PutStatus:
        """Under SYNC_FLUSH, wait until everything below ``end_offset`` is on disk (one
        group-commit fsync serves every writer waiting); PUT_OK at once otherwise. Raises
        :class:`StoreFailedError` when the fsync failed (it is not tried again)."""
        if not self.flusher.sync:
            return PutStatus.PUT_OK
        fut = self.flusher.wait_flushed(end_offset)
        if not await wait_done(fut, self.config.sync_flush_timeout / 1000):
            log.warning(
                "flush of CommitLog offset %d took longer than sync_flush_timeout %d ms",
                end_offset,
                self.config.sync_flush_timeout,
            )
            return PutStatus.FLUSH_DISK_TIMEOUT
        fut.result()  # a failed flush raises its error (StoreFailedError), never a timeout
        return PutStatus.PUT_OK

    def commit(self, offset: int) -> None:
        """Let dispatch follow the CommitLog up to ``offset`` (replication's commit point)."""
        offset = min(offset, self.commitlog.max_offset)
        if offset > self.dispatcher.committed_offset:
            self.dispatcher.committed_offset = offset
            self._dispatch_wake.set()

    def add_arrival_listener(
        self,
        listener: ArrivalListener,
        *,
        topic: bytes | None = None,
        idle: Callable[[], bool] | None = None,
    ) -> None:
        """Tell ``listener`` of every dispatched record (with ``topic``, of that topic's
        only); adding one twice (a service started again, as on a Raft leader change)
        keeps one. ``idle`` (listeners of every topic): True when the listener waits for
        nothing, and dispatch need not tell it (held pulls, while none is held)."""
        if topic is None:
            listeners = self.dispatcher.listeners
            if idle is not None:
                self.dispatcher.listener_idle[listener] = idle
        else:
            listeners = self.dispatcher.topic_listeners.setdefault(topic, [])
        if listener not in listeners:
            listeners.append(listener)

    # -- reading -------------------------------------------------------------------------

    @property
    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def committed_offset(self) -> int:
        return self.dispatcher.committed_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        return self.dispatcher.behind

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic.encode(), queue_id)
        return cq.min_offset if cq is not None else 0

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic.encode(), queue_id)
        return cq.max_offset if cq is not None else 0

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        cq = self.queues.get(topic.encode(), queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp_ms, self.commitlog.store_timestamp_at)

    def store_time_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.queues.get(topic.encode(), queue_id)
        entry = cq.entry(offset) if cq is not None else None
        return self.commitlog.store_timestamp_at(entry[0]) if entry else -1

    def phy_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int | None:
        """The CommitLog offset of the message at ``offset`` of a queue, or None when the
        queue holds no message there (not yet, or no longer)."""
        cq = self.queues.get(topic.encode(), queue_id)
        if cq is None or not cq.min_offset <= offset < cq.max_offset:
            return None
        entry = cq.entry(offset)
        return entry[0] if entry else None

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_count: int = 32,
        max_bytes: int | None = None,
        tag_filter: Callable[[int], bool] | None = None,
        record_filter: Callable[[memoryview], bool] | None = None,
    ) -> GetResult:
        """Records of one queue from ``offset``, as RocketMQ's getMessage answers a pull."""
        topic_raw = topic.encode()
        cq = self.queues.get(topic_raw, queue_id)
        hi = cq.max_offset if cq is not None else 0
        if offset >= hi and 0 < offset <= self.commitlog.queue_table.get((topic_raw, queue_id), 0):
            # The queue's records up to there are stored and not dispatched yet (the
            # re-dispatch after a crash): nothing new for now, not a bad offset.
            lo = cq.min_offset if cq is not None else 0
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        lo, hi = cq.min_offset, cq.max_offset
        if hi == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
        if offset < lo:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
        if offset == hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
        if offset > hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, lo if lo == 0 else hi, lo, hi)
        max_bytes = max_bytes or self.config.max_transfer_bytes_on_message_in_memory
        scan = max(_MIN_FILTER_SCAN_BYTES // CQ_UNIT_SIZE, max_count)
        entries = cq.entries(offset, scan)
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, lo, hi)
        if entries is None:
            result.status = GetStatus.OFFSET_FOUND_NULL
            return result
        clog = self.commitlog
        min_phy = clog.min_offset
        unpack = ENTRY.unpack_from
        run_start = run_end = -1
        count = total = 0
        removed = False
        pos = 0
        n = len(entries)
        while pos < n:
            phy, size, code = unpack(entries, pos)
            pos += CQ_UNIT_SIZE
            if size == _BLANK_CQ_SIZE or phy < min_phy:
                removed = True
                continue
            if total and total + size > max_bytes:
                pos -= CQ_UNIT_SIZE
                break
            if tag_filter is not None and not tag_filter(code):
                continue
            if record_filter is not None:
                view = clog.read(phy, size)
                if view is None or not record_filter(view):
                    continue
            if phy == run_end and clog.files.find(run_start) is clog.files.find(phy):
                run_end = phy + size
            else:
                if run_start >= 0:
                    self._add_run(result, run_start, run_end)
                run_start, run_end = phy, phy + size
            count += 1
            total += size
            result.max_phy_offset_pulling = phy
            if count >= max_count:
                break
        if run_start >= 0:
            self._add_run(result, run_start, run_end)
        result.next_begin_offset = offset + pos // CQ_UNIT_SIZE
        result.message_count = count
        result.buffer_total_size = total
        if result.buffers:
            result.status = GetStatus.FOUND
        elif removed and not count:
            result.status = GetStatus.MESSAGE_WAS_REMOVING
        return result

    def _add_run(self, result: GetResult, start: int, end: int) -> None:
        view = self.commitlog.read(start, end - start)
        if view is not None:
            result.buffers.append(view)

    def message_by_offset(self, phy_offset: int) -> memoryview | None:
        """The record stored at a CommitLog offset."""
        if phy_offset >= self.dispatcher.committed_offset:
            return None
        return self.commitlog.read_record(phy_offset)

    def message_by_id(self, offset_msg_id: str) -> memoryview | None:
        """The record an offset message id points to (its host part is not checked)."""
        _, phy_offset = decode_offset_msg_id(offset_msg_id)
        return self.message_by_offset(phy_offset)

    def messages_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int | None = None,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[memoryview]:
        """Records of ``topic`` whose KEYS (or unique id) include ``key``, newest first."""
        if self.index is None:
            return []
        topic_raw, key_raw = topic.encode(), key.encode()
        max_num = max_num or self.config.default_query_max_num
        end_ms = end_ms if end_ms is not None else self._clock_ms() + 1000
        found: list[memoryview] = []
        for phy in self.index.query(topic_raw, key_raw, max_num * 2, begin_ms, end_ms):
            view = self.message_by_offset(phy)
            if view is None or not _record_has_key(view, topic_raw, key_raw):
                continue  # hash collision, or an entry past a recovered tail
            found.append(view)
            if len(found) >= max_num:
                break
        return found

    def queue_keys(self) -> list[tuple[str, int]]:
        return sorted((t.decode(), q) for t, q in self.queues.queues)


def _record_has_key(view: memoryview, topic: bytes, key: bytes) -> bool:
    """Whether the record has ``key``; False for a record whose lengths do not fit it (a
    damaged one an index entry still points to)."""
    (body_len,) = INT.unpack_from(view, POS_BODY_LENGTH)
    tp = POS_BODY + body_len
    if body_len < 0 or tp + 3 > len(view):
        return False
    tl = view[tp]
    if bytes(view[tp + 1 : tp + 1 + tl]) != topic:
        return False
    pp = tp + 1 + tl
    if pp + 2 > len(view):
        return False
    (plen,) = USHORT.unpack_from(view, pp)
    props = bytes(view[pp + 2 : pp + 2 + plen])
    keys = property_value(props, b"KEYS")
    if keys and key in keys.split(b" "):
        return True
    return property_value(props, b"UNIQ_KEY") == key
