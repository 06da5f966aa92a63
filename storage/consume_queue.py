"""ConsumeQueue: one per topic and queue, 20-byte entries pointing into the CommitLog.

Entry n lies at n * 20: CommitLog offset (8), record size (4), tag hash code (8). Files
hold ``mapped_file_size_consume_queue`` bytes (300,000 entries) and are named by the byte
offset of their first entry, under ``consumequeue/<topic>/<queueId>/``.

A broker may hold tens of thousands of these files, so they keep no file descriptor and are
mapped for random access (storage.mapped_file), when first used. A write tells the queue's
owner (``on_dirty``, once per run of entries) the CommitLog offset of its first entry and
whether the queue is now due for a flush (``flush_least_pages`` dirty pages in its last
file, or a full file not yet flushed), so a flush round touches only the queues due, and
knows what is durable without reading any queue.

At a start a queue's end comes from what the last clean stop recorded
(storage.queue_ends, :meth:`ConsumeQueue.restore`: no file is opened), or from a search of
its last files (:meth:`ConsumeQueue.load`) bounded by where each file's data ends, read
without mapping the file when that data is small.
"""

from __future__ import annotations

import logging
import mmap
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from rocketq.storage.mapped_file import OS_PAGE_SIZE, MappedFile, MappedFileQueue
from rocketq.storage.queue_ends import QueueEnd

log = logging.getLogger(__name__)

CQ_UNIT_SIZE: Final = 20
ENTRY: Final = struct.Struct(">qiq")
_pack_entry: Final = ENTRY.pack_into  # bound once: a write of one entry is one call
CQEntry = tuple[int, int, int, int]
"""An entry to write: CommitLog offset, size, tag code, queue offset."""
DirtyListener = Callable[["ConsumeQueue", int, bool], None]
"""(queue, a CommitLog offset at or below the first entry the write left unflushed, whether
the queue is now due for a flush), called after a write."""
# A gap filler, as RocketMQ writes before the first entry of a queue created mid-way.
_BLANK_SIZE: Final = 0x7FFFFFFF
# Blocks are allocated this far ahead of a queue's write position (819 entries): a few
# fallocate calls per file, and tens of thousands of queues with a handful of entries each
# take 16 KiB of disk apiece, not their whole 6 MB (storage.allocation).
ALLOCATE_STEP: Final = 16 * 1024
# A file whose data ends within this many bytes is read, not mapped, by the search at load.
_READ_LIMIT: Final = 64 * 1024


class _Contents:
    """The bytes of queue files for the search at load, each file read once: a file whose
    data (up to its first hole) is small is read through a descriptor, so no mapping is
    made (of tens of thousands of queues, most hold a few entries at the start of a sparse
    file, and many are not used again soon); a bigger one is mapped."""

    __slots__ = ("_got",)

    def __init__(self) -> None:
        self._got: dict[MappedFile, tuple[int, bytes | mmap.mmap]] = {}

    def __call__(self, mf: MappedFile) -> tuple[int, bytes | mmap.mmap]:
        """(where the file's data ends, its bytes: at least up to one entry past there)."""
        got = self._got.get(mf)
        if got is None:
            data_end, data = mf.read_data(_READ_LIMIT, tail=CQ_UNIT_SIZE)
            got = self._got[mf] = (data_end, data if data is not None else mf.buf)
        return got


class ConsumeQueue:
    __slots__ = (
        "_create_lock",
        "_min_checked",
        "_on_dirty",
        "file_size",
        "files",
        "flush_least_pages",
        "max_physic_offset",
        "min_logic_offset",
        "queue_id",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        directory: str | Path,
        file_size: int,
        *,
        on_dirty: DirtyListener | None = None,
        flush_least_pages: int = 2,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.files = MappedFileQueue(
            directory,
            file_size,
            keep_fd=False,
            random_access=True,
            allocate_step=ALLOCATE_STEP,
        )
        self.file_size = file_size
        # End of the newest CommitLog record this queue indexes (re-dispatch skips below it).
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        # The CommitLog min offset the min offset is known right for: no entry from it on
        # points below (new entries never do), so retention need not read (map) the file.
        self._min_checked = -1
        self._on_dirty = on_dirty
        # Dirty pages in the last file that make the queue due for a flush (RocketMQ's
        # flushConsumeQueueLeastPages; 0: any unflushed byte).
        self.flush_least_pages = flush_least_pages
        # Serialises creating the first file with :meth:`prepare` on the table's thread.
        self._create_lock = threading.Lock()

    def load(self, durable_below: int | None = None, commit_log_min_offset: int = 0) -> None:
        """Find the files and where the entries end. ``durable_below``: after a crash,
        only entries pointing below this CommitLog offset are known to be on disk (the
        checkpoint's logics offset); later ones count as unflushed. None: all of them are
        (a clean shutdown flushed everything). The min offset skips blank entries and
        those pointing below ``commit_log_min_offset`` (deleted records).

        Files are mapped when first used, not here: the search reads a file through a
        descriptor when its data is small, as in most queue files (see _Contents)."""
        self.files.load()
        contents = _Contents()
        self._recover_positions(contents)
        if self.files.files:
            self._find_min_offset(contents, commit_log_min_offset)
        if durable_below is not None:
            self._mark_unflushed_from(durable_below, contents)

    def restore(self, end: QueueEnd, commit_log_min_offset: int) -> bool:
        """Take the files and positions a clean stop recorded (storage.queue_ends) instead
        of searching them; the files are mapped when first used. The recorded min offset
        is right for ``commit_log_min_offset`` (the record is used only for the CommitLog
        it was written for). False, and nothing done, if the record does not describe
        queue files of this size."""
        first, count, end_offset, min_logic, max_physic = end
        size = self.file_size
        if count == 0:
            if first != -1 or end_offset != 0:
                return False
            min_logic, max_physic = 0, -1  # as a search finds an empty queue
        else:
            last_from = first + (count - 1) * size
            if not (
                count > 0
                and first >= 0
                and first % size == 0
                and last_from <= end_offset <= last_from + size
                and end_offset % CQ_UNIT_SIZE == 0
                and first <= min_logic <= end_offset
                and max_physic >= -1
            ):
                return False
        self.files.restore(first, count, end_offset)
        self.min_logic_offset = min_logic
        self.max_physic_offset = max_physic
        self._min_checked = commit_log_min_offset
        return True

    def end_record(self) -> QueueEnd:
        """What a clean stop records of this queue (see :meth:`restore`)."""
        files = self.files.files
        return QueueEnd(
            files[0].file_from_offset if files else -1,
            len(files),
            self.files.max_offset,
            self.min_logic_offset,
            self.max_physic_offset,
        )

    def _recover_positions(self, contents: _Contents) -> None:
        """Find where the written entries end, from the third-last file on (as RocketMQ):
        a binary search over each file's zero tail, up to where its data ends; the first
        file that is not full holds the end, and later files (never flushed before a
        crash) go."""
        files = self.files.files
        if not files:
            return
        units = self.file_size // CQ_UNIT_SIZE
        end_file = len(files) - 1
        for i in range(max(0, len(files) - 3), len(files)):
            mf = files[i]
            data_end, buf = contents(mf)
            # No entry starts past the file's data (most of a queue file is a hole).
            lo, hi = 0, min(units, -(-data_end // CQ_UNIT_SIZE))
            while lo < hi:
                mid = (lo + hi) // 2
                if ENTRY.unpack_from(buf, mid * CQ_UNIT_SIZE)[1] > 0:
                    lo = mid + 1
                else:
                    hi = mid
            mf.wrote_position = mf.flushed_position = lo * CQ_UNIT_SIZE
            if lo < units:
                end_file = i
                break
        for mf in files[end_file + 1 :]:
            log.warning(
                "consume queue %s-%d: dropping %s past the written entries",
                self.topic,
                self.queue_id,
                mf.path.name,
            )
            mf.destroy()
        del files[end_file + 1 :]
        if len(files) > 1 and files[-1].wrote_position == 0:
            files.pop().destroy()
        last = files[-1]
        self.max_physic_offset = -1
        if last.wrote_position:
            _, buf = contents(last)
            offset, size, _ = ENTRY.unpack_from(buf, last.wrote_position - CQ_UNIT_SIZE)
            if size != _BLANK_SIZE:
                self.max_physic_offset = offset + size

    def _mark_unflushed_from(self, durable_below: int, contents: _Contents) -> None:
        """Set each file's flushed position at its first entry pointing at or past
        ``durable_below`` (entries are in CommitLog order; blanks count as below)."""
        dirty = False
        for mf in reversed(self.files.files):
            units = mf.wrote_position // CQ_UNIT_SIZE
            if durable_below <= 0:  # nothing known on disk: no need to read the files
                mf.flushed_position = 0
                dirty = dirty or units > 0
                continue
            _, buf = contents(mf)
            lo, hi = 0, units
            while lo < hi:
                mid = (lo + hi) // 2
                offset, size, _ = ENTRY.unpack_from(buf, mid * CQ_UNIT_SIZE)
                if size == _BLANK_SIZE or offset < durable_below:
                    lo = mid + 1
                else:
                    hi = mid
            mf.flushed_position = min(mf.flushed_position, lo * CQ_UNIT_SIZE)
            dirty = dirty or lo < units
            if lo > 0:
                break  # the earlier files point further back still
        if dirty and self._on_dirty is not None:
            # Every entry below durable_below is on disk: the first unflushed one is at or
            # past it.
            self._on_dirty(self, max(durable_below, 0), self.needs_flush(self.flush_least_pages))

    def _find_min_offset(self, contents: _Contents, commit_log_min_offset: int) -> None:
        """The first entry that is not blank and points at or past the CommitLog's min
        offset (as :meth:`correct_min_offset` moves it later)."""
        first = self.files.files[0]
        pos = 0
        if first.wrote_position:
            _, buf = contents(first)
            while pos < first.wrote_position:
                offset, size, _ = ENTRY.unpack_from(buf, pos)
                if size != _BLANK_SIZE and offset >= commit_log_min_offset:
                    break
                pos += CQ_UNIT_SIZE
        self.min_logic_offset = first.file_from_offset + pos
        self._min_checked = commit_log_min_offset

    # -- writing -------------------------------------------------------------------------

    def put_many(self, entries: list[CQEntry]) -> int:
        """Write entries (CommitLog offset, size, tag code, queue offset) in queue order;
        -> how many were new. Consecutive entries that continue the queue within its last
        file are written in one pass; anything else goes through :meth:`put`."""
        offset, size, _, first = entries[0]
        n = len(entries)
        files = self.files.files
        mf = files[-1] if files else None
        if (
            mf is not None
            and offset + size > self.max_physic_offset
            and entries[-1][3] - first == n - 1
            and mf.file_from_offset + mf.wrote_position == first * CQ_UNIT_SIZE
            and mf.wrote_position + n * CQ_UNIT_SIZE <= mf.file_size
        ):
            buf, pos = mf.buf, mf.wrote_position
            if pos + n * CQ_UNIT_SIZE > mf.allocated_position:  # else nothing to allocate
                mf.ensure_allocated(pos + n * CQ_UNIT_SIZE)
            for offset, size, code, _ in entries:
                _pack_entry(buf, pos, offset, size, code)
                pos += CQ_UNIT_SIZE
            mf.wrote_position = pos
            self.max_physic_offset = offset + size
            if self._on_dirty is not None:
                least = self.flush_least_pages
                self._on_dirty(
                    self,
                    entries[0][0],
                    pos == mf.file_size
                    or pos // OS_PAGE_SIZE - mf.flushed_position // OS_PAGE_SIZE >= least,
                )
            return n
        new = sum(self._put(*entry) for entry in entries)
        if new and self._on_dirty is not None:
            self._on_dirty(self, entries[0][0], self.needs_flush(self.flush_least_pages))
        return new

    def prepare(self) -> None:
        """Create the first file of a queue that has none and whose first entry will be
        entry 0 (a new queue), ahead of that entry (the table's preparing thread)."""
        with self._create_lock:
            if self.files.last is None and self.max_physic_offset < 0:
                self.files.create(0)

    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write entry ``cq_offset``; False if it is already there (re-dispatch)."""
        new = self._put(offset, size, tags_code, cq_offset)
        if new and self._on_dirty is not None:
            self._on_dirty(self, offset, self.needs_flush(self.flush_least_pages))
        return new

    def _put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        if offset + size <= self.max_physic_offset:
            return False
        expect = cq_offset * CQ_UNIT_SIZE
        if cq_offset < 0 or (
            self.files.last is not None and expect - self.files.max_offset > self.file_size
        ):
            # A queue offset no writer gave (a damaged record, or bytes a replica was sent):
            # filling the gap up to it would write blank files without end.
            log.error(
                "consume queue %s-%d: the record at CommitLog offset %d has queue offset %d, "
                "past the queue's end %d by more than a file; not dispatched",
                self.topic,
                self.queue_id,
                offset,
                cq_offset,
                self.files.max_offset // CQ_UNIT_SIZE,
            )
            return False
        mf = self.files.last
        if mf is None:
            with self._create_lock:  # prepare() may be creating it right now
                mf = self.files.last
                if mf is None:
                    mf = self.files.create(expect - expect % self.file_size)
                    self.min_logic_offset = expect
                    self._fill_blank(mf, 0, expect - mf.file_from_offset)
        if mf.is_full:
            mf = self.files.create(mf.end_offset)
        current = mf.wrote_offset
        if expect < current:
            log.warning(
                "consume queue %s-%d: entry %d already built (at %d), skipped",
                self.topic,
                self.queue_id,
                cq_offset,
                current // CQ_UNIT_SIZE,
            )
            return False
        if expect != current:
            log.warning(
                "[BUG] consume queue %s-%d: expected entry %d but the queue ends at %d; "
                "filling the gap",
                self.topic,
                self.queue_id,
                cq_offset,
                current // CQ_UNIT_SIZE,
            )
            while expect >= mf.end_offset:
                self._fill_blank(mf, mf.wrote_position, mf.file_size)
                mf = self.files.create(mf.end_offset)
            self._fill_blank(mf, mf.wrote_position, expect - mf.file_from_offset)
        pos = mf.wrote_position
        mf.ensure_allocated(pos + CQ_UNIT_SIZE)
        ENTRY.pack_into(mf.buf, pos, offset, size, tags_code)
        mf.wrote_position = pos + CQ_UNIT_SIZE
        self.max_physic_offset = offset + size
        return True

    @staticmethod
    def _fill_blank(mf: MappedFile, start: int, end: int) -> None:
        mf.ensure_allocated(end)
        for pos in range(start, end, CQ_UNIT_SIZE):
            ENTRY.pack_into(mf.buf, pos, 0, _BLANK_SIZE, 0)
        mf.wrote_position = max(mf.wrote_position, end)

    # -- reading -------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """The next entry number to be written (max offset in queue)."""
        return self.files.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    def entries(self, start: int, max_count: int) -> memoryview | None:
        """Up to ``max_count`` entries from entry ``start``, within one file."""
        byte_offset = start * CQ_UNIT_SIZE
        mf = self.files.find(byte_offset)
        if mf is None:
            return None
        pos = byte_offset - mf.file_from_offset
        end = min(mf.wrote_position, pos + max_count * CQ_UNIT_SIZE)
        if pos >= end:
            return None
        return memoryview(mf.buf)[pos:end]

    def entry(self, index: int) -> tuple[int, int, int] | None:
        view = self.entries(index, 1)
        if view is None:
            return None
        offset, size, code = ENTRY.unpack_from(view, 0)
        return offset, size, code

    def offset_by_time(self, timestamp_ms: int, store_time: Callable[[int], int]) -> int:
        """The first entry stored at or after ``timestamp_ms`` (binary search through the
        CommitLog's store timestamps); max offset if every entry is older."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = self.entry(mid)
            ts = store_time(e[0]) if e is not None and e[1] != _BLANK_SIZE else -1
            if ts < 0:
                # Points to a deleted record or a gap: it is older than anything stored.
                lo = mid + 1
            elif ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- repair and retention ------------------------------------------------------------

    def truncate_dirty(self, max_phy_offset: int) -> None:
        """Drop trailing entries that point at or past ``max_phy_offset``."""
        while True:
            last = self.files.last
            if last is None:
                self.max_physic_offset = -1
                return
            pos = last.wrote_position
            while pos > 0:
                offset, size, _ = ENTRY.unpack_from(last.buf, pos - CQ_UNIT_SIZE)
                if size == _BLANK_SIZE or offset + size <= max_phy_offset:
                    break
                pos -= CQ_UNIT_SIZE
            if pos > 0 or len(self.files.files) == 1:
                if pos != last.wrote_position:
                    last.truncate_to(pos)
                if pos > 0:
                    offset, size, _ = ENTRY.unpack_from(last.buf, pos - CQ_UNIT_SIZE)
                    self.max_physic_offset = offset + size if size != _BLANK_SIZE else -1
                else:
                    self.max_physic_offset = -1
                    self.min_logic_offset = last.file_from_offset
                return
            self.files.files.pop()
            last.destroy()

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Move the min offset past entries whose records were deleted (nothing is read
        when it was checked for this CommitLog min offset or a later one)."""
        first = self.files.files[0] if self.files.files else None
        if first is None or commit_log_min_offset <= self._min_checked:
            return
        pos = max(0, self.min_logic_offset - first.file_from_offset)
        while pos < first.wrote_position:
            offset, size, _ = ENTRY.unpack_from(first.buf, pos)
            if size != _BLANK_SIZE and offset >= commit_log_min_offset:
                break
            pos += CQ_UNIT_SIZE
        self.min_logic_offset = max(self.min_logic_offset, first.file_from_offset + pos)
        self._min_checked = commit_log_min_offset

    def delete_expired(self, commit_log_min_offset: int) -> int:
        """Delete files whose every entry points below the CommitLog's min offset."""
        count = 0
        checked = commit_log_min_offset <= self._min_checked
        for mf in self.files.files[:-1]:
            if checked and self.min_logic_offset < mf.end_offset:
                break  # it holds the min offset's entry, which points at or past the min
            offset, size, _ = ENTRY.unpack_from(mf.buf, self.file_size - CQ_UNIT_SIZE)
            if size == _BLANK_SIZE or offset + size <= commit_log_min_offset:
                count += 1
            else:
                break
        deleted = self.files.delete_first(count)
        self.correct_min_offset(commit_log_min_offset)
        return deleted

    # -- flushing (the logics flush thread) ----------------------------------------------

    def needs_flush(self, least_pages: int) -> bool:
        """RocketMQ's isAbleToFlush: a full file with unflushed bytes always; the last file
        once it has ``least_pages`` dirty pages (any unflushed byte if ``least_pages`` <= 0)."""
        files = self.files.files
        if not files:
            return False
        for mf in files[-2:-1]:
            if mf.flushed_position < mf.wrote_position:
                return True
        last = files[-1]
        if least_pages <= 0 or last.is_full:
            return last.flushed_position < last.wrote_position
        return last.dirty_pages() >= least_pages

    def first_unflushed_offset(self) -> int | None:
        """The CommitLog offset of the oldest entry not yet on disk; None if all are.
        (Flush thread: a file the event loop closes meanwhile is skipped.)"""
        found: int | None = None
        for mf in reversed(self.files.files):
            if mf.flushed_position >= mf.wrote_position:
                if mf.wrote_position:
                    break
                continue
            pos = mf.flushed_position - mf.flushed_position % CQ_UNIT_SIZE
            try:
                while pos < mf.wrote_position:
                    offset, size, _ = ENTRY.unpack_from(mf.buf, pos)
                    if size != _BLANK_SIZE:
                        found = offset
                        break
                    pos += CQ_UNIT_SIZE
            except ValueError:  # unmapped: deleted by retention, or cut back
                continue
        return found

    def flush(self) -> None:
        """Flush every unflushed byte (flush thread)."""
        self.files.flush()

    def close(self) -> None:
        self.files.close()

    def destroy(self) -> None:
        self.files.destroy()
