"""IndexFile: the on-disk hash index from ``topic#key`` to CommitLog offsets, by time.

The layout is RocketMQ 4.x's, byte for byte (all big-endian)::

    header   40 B   beginTimestamp q, endTimestamp q, beginPhyOffset q, endPhyOffset q,
                    hashSlotCount i, indexCount i
    slots    hash_slot_num x 4 B   number of the newest entry in the slot, 0 = empty
    entries  index_num x 20 B      keyHash i, phyOffset q, timeDiff i, prevIndex i

``indexCount`` starts at 1 (entry number 0 is never used), entry ``n`` lies at
``40 + hash_slot_num * 4 + n * 20``, ``timeDiff`` is in seconds since the header's
``beginTimestamp`` and ``prevIndex`` chains the entries of one slot, newest first. A file is
created at its full size and memory-mapped; the blocks of its header and slots are
allocated then, its entries' a step ahead of the next one (storage.allocation), so a full
disk is a :class:`DiskFullError` before a write, never a SIGBUS.

One difference from RocketMQ: the key hash. RocketMQ uses Java's ``String.hashCode`` of
``topic + "#" + key`` (made non-negative); rocketq uses ``zlib.crc32`` of the same bytes
masked to 31 bits, which runs in C. Files are therefore laid out like RocketMQ's but their
hashes differ, so a RocketMQ index directory cannot be queried here (nor the reverse); it can
be rebuilt from the CommitLog. Like RocketMQ, hash collisions are returned as candidates and
the caller compares the real key of each message.

:class:`IndexService` owns the directory of index files, named by creation time
``yyyyMMddHHmmssSSS`` (local time, like RocketMQ). ``build`` and ``query`` run on the event
loop thread; ``flush`` (the fsync) runs on a flush thread.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.file_modes import PRIVATE_FILE, private_dir
from rocketq.storage.allocation import allocate

HEADER_SIZE: Final = 40
SLOT_SIZE: Final = 4
ENTRY_SIZE: Final = 20
INVALID_INDEX: Final = 0
NAME_DIGITS: Final = 17
MAX_TIME_DIFF: Final = 2**31 - 1
# Entries' blocks are allocated this far ahead of the next entry (3276 entries).
_ALLOCATE_STEP: Final = 64 * 1024
HASH_MASK: Final = 0x7FFFFFFF

_HEADER: Final = struct.Struct(">qqqqii")
_SLOT: Final = struct.Struct(">i")
_ENTRY: Final = struct.Struct(">iqii")


def key_hash(topic: bytes, key: bytes) -> int:
    """The 31-bit hash of ``topic#key`` an entry is filed under (see the module docstring)."""
    return zlib.crc32(topic + b"#" + key) & HASH_MASK


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def _check_sizes(hash_slot_num: int, index_num: int) -> None:
    if hash_slot_num < 1 or index_num < 2:
        raise ValueError(
            "max_hash_slot_num must be >= 1 and max_index_num >= 2, "
            f"got {hash_slot_num} and {index_num}"
        )


def time_name(ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time, RocketMQ's index file name."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms // 1000)) + f"{ms % 1000:03d}"


class IndexFile:
    """One index file: header, hash slots and entries in one mapping.

    ``put`` and ``select`` run on one thread; ``flush`` may run on another. A new file
    (``create=True``, which fails if the path exists) starts with begin and end set to
    ``end_timestamp``/``end_phy_offset``, the previous file's ends, like RocketMQ.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        hash_slot_num: int,
        index_num: int,
        *,
        create: bool,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> None:
        _check_sizes(hash_slot_num, index_num)
        self._path = Path(path)
        self._slot_num = hash_slot_num
        self._index_num = index_num
        self._entries_pos = HEADER_SIZE + hash_slot_num * SLOT_SIZE
        size = index_file_size(hash_slot_num, index_num)
        self._size = size
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self._fd = os.open(self._path, flags, PRIVATE_FILE)
        try:
            if create:
                os.ftruncate(self._fd, size)
                first = min(size, self._entries_pos + _ALLOCATE_STEP)
                allocate(self._fd, 0, first, str(self._path))
            else:
                actual = os.fstat(self._fd).st_size
                if actual != size:
                    raise StoreCorruptError(
                        f"index file {self._path} is {actual} bytes but {size} bytes are "
                        f"expected for max_hash_slot_num={hash_slot_num} and "
                        f"max_index_num={index_num}; set the values the file was written "
                        "with, or move the file away (it is rebuilt from the CommitLog)"
                    )
            self._mm = mmap.mmap(self._fd, size)
            # Puts land on random hash slots: a fault must read one page, not read_ahead_kb
            # around it (the device's read-ahead zero-fills megabytes of the sparse file).
            self._mm.madvise(mmap.MADV_RANDOM)
        except BaseException:
            os.close(self._fd)
            if create:
                self._path.unlink(missing_ok=True)
            raise
        self._fd_lock = threading.Lock()
        # Blocks below this are allocated (by this process; a loaded file's from its start).
        self._allocated = min(size, self._entries_pos + _ALLOCATE_STEP) if create else 0
        # Set by the writer after puts, cleared by the flush thread before it fsyncs.
        self.needs_flush = False
        if create:
            self._begin_timestamp = self._end_timestamp = end_timestamp
            self._begin_phy_offset = self._end_phy_offset = end_phy_offset
            self._hash_slot_count = 0
            self._index_count = 1
            self._write_header()
        else:
            begin_ts, end_ts, begin_off, end_off, slots, count = _HEADER.unpack_from(self._mm, 0)
            self._begin_timestamp, self._end_timestamp = begin_ts, end_ts
            self._begin_phy_offset, self._end_phy_offset = begin_off, end_off
            self._hash_slot_count = slots
            if count > index_num:
                self._release()
                raise StoreCorruptError(
                    f"index file {self._path} says it holds {count} entries but "
                    f"max_index_num={index_num}; the header is damaged or the file was "
                    "written with a larger max_index_num"
                )
            # 0 only if the process died between creating the file and writing the header.
            self._index_count = max(count, 1)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def begin_timestamp(self) -> int:
        return self._begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self._end_timestamp

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_phy_offset

    @property
    def end_phy_offset(self) -> int:
        return self._end_phy_offset

    @property
    def index_count(self) -> int:
        return self._index_count

    @property
    def is_full(self) -> bool:
        return self._index_count >= self._index_num

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self._mm,
            0,
            self._begin_timestamp,
            self._end_timestamp,
            self._begin_phy_offset,
            self._end_phy_offset,
            self._hash_slot_count,
            self._index_count,
        )

    def put(self, key_hash: int, phy_offset: int, store_timestamp_ms: int) -> bool:
        """Append one entry for a 31-bit ``key_hash``; False when the file is full."""
        return self.put_many([(key_hash, phy_offset, store_timestamp_ms)]) == 1

    def put_many(self, entries: list[tuple[int, int, int]], start: int = 0) -> int:
        """Append entries (31-bit key hash, CommitLog offset, store ms) from
        ``entries[start]`` on while the file has room, writing the header once; -> the
        position of the first entry not put (``len(entries)`` when all were)."""
        count = self._index_count
        room = self._index_num
        mm = self._mm
        slot_num = self._slot_num
        entries_pos = self._entries_pos
        begin_ts = self._begin_timestamp
        read_slot, write_slot, write_entry = _SLOT.unpack_from, _SLOT.pack_into, _ENTRY.pack_into
        i, n = start, len(entries)
        end = entries_pos + min(room, count + n - i) * ENTRY_SIZE
        if end > self._allocated:
            # Before any write: a full disk leaves the file as it was.
            stop = min(self._size, max(end, self._allocated + _ALLOCATE_STEP))
            allocate(self._fd, self._allocated, stop - self._allocated, str(self._path))
            self._allocated = stop
        while i < n and count < room:
            key_hash, phy_offset, store_ms = entries[i]
            slot_pos = HEADER_SIZE + (key_hash % slot_num) * SLOT_SIZE
            prev = read_slot(mm, slot_pos)[0]
            # A slot pointing at or past the next entry number is left over from a torn
            # write; chaining to it could loop, so the chain starts afresh.
            if not INVALID_INDEX < prev < count:
                prev = INVALID_INDEX
                self._hash_slot_count += 1
            if count == 1:
                begin_ts = self._begin_timestamp = store_ms
                self._begin_phy_offset = phy_offset
            diff = (store_ms - begin_ts) // 1000
            if diff < 0:
                diff = 0
            elif diff > MAX_TIME_DIFF:
                diff = MAX_TIME_DIFF
            write_entry(mm, entries_pos + count * ENTRY_SIZE, key_hash, phy_offset, diff, prev)
            write_slot(mm, slot_pos, count)
            count += 1
            i += 1
        if i > start:
            self._index_count = count
            _, self._end_phy_offset, self._end_timestamp = entries[i - 1]
            self._write_header()
        return i

    def select(self, key_hash: int, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Offsets of entries with ``key_hash`` stored in [begin_ms, end_ms], newest first.

        RocketMQ stops walking a chain at the first entry older than ``begin_ms``; this walk
        goes on to the chain's end instead, so an entry is not missed when store timestamps
        went backwards. A chain's numbers strictly decrease, and the walk is also capped at
        ``index_count`` steps.
        """
        found: list[int] = []
        count = self._index_count
        if max_num <= 0 or count <= 1:
            return found
        mm = self._mm
        entries_pos = self._entries_pos
        begin_timestamp = self._begin_timestamp
        slot_pos = HEADER_SIZE + (key_hash % self._slot_num) * SLOT_SIZE
        index = _SLOT.unpack_from(mm, slot_pos)[0]
        unpack_entry = _ENTRY.unpack_from
        for _ in range(count):
            if not INVALID_INDEX < index < count:
                break
            hash_read, phy_offset, diff, prev = unpack_entry(mm, entries_pos + index * ENTRY_SIZE)
            if diff < 0:  # damaged entry, as RocketMQ
                break
            if hash_read == key_hash and begin_ms <= begin_timestamp + diff * 1000 <= end_ms:
                found.append(phy_offset)
                if len(found) >= max_num:
                    break
            if prev >= index:
                break
            index = prev
        return found

    def clamp_end(self, max_phy_offset: int) -> None:
        """Say that nothing at or past ``max_phy_offset`` is indexed (the CommitLog was cut
        there), so records written there anew are indexed; stale entries stay and are
        filtered by the caller's key check."""
        if self._end_phy_offset >= max_phy_offset:
            self._end_phy_offset = max(0, max_phy_offset - 1)
            self._write_header()

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """Whether [begin_timestamp, end_timestamp] overlaps [begin_ms, end_ms]."""
        return begin_ms <= self._end_timestamp and end_ms >= self._begin_timestamp

    def flush(self) -> None:
        """fsync the file; safe on a flush thread, and a no-op once the file is closed."""
        with self._fd_lock:
            if self._fd >= 0:
                os.fsync(self._fd)

    def _release(self) -> None:
        with self._fd_lock:
            if self._fd < 0:
                return
            # A memoryview still pointing into the mapping raises BufferError; GC unmaps it.
            with contextlib.suppress(BufferError):
                self._mm.close()
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """fsync, unmap and close (RocketMQ's IndexFile.shutdown); idempotent."""
        self.flush()
        self._release()

    def destroy(self) -> None:
        """Unmap, close and delete the file, without an fsync."""
        self._release()
        self._path.unlink(missing_ok=True)


class IndexService:
    """The directory of index files: build entries, query them, flush and retire files."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        hash_slot_num: int,
        index_num: int,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _check_sizes(hash_slot_num, index_num)
        self._dir = Path(directory)
        self._slot_num = hash_slot_num
        self._index_num = index_num
        self._clock = clock
        self._files: list[IndexFile] = []
        # crc32 of b"<topic>#", the start of every key hash of that topic.
        self._prefixes: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self._flushed_timestamp = 0
        # The lowest CommitLog offset indexed by a file that load dropped (re-dispatch
        # starts at or below it); None when none was.
        self.dropped_from: int | None = None

    @property
    def files(self) -> list[IndexFile]:
        return list(self._files)

    @property
    def end_phy_offset(self) -> int:
        return self._files[-1].end_phy_offset if self._files else 0

    def load(self, last_exit_ok: bool, checkpoint_index_ms: int) -> None:
        """Open the files in name order; after a crash drop those begun after the checkpoint.

        Dropped files are rebuilt when the CommitLog is dispatched again from the recovery
        point. RocketMQ drops every file that *ends* after the checkpoint, which also throws
        away the durable older entries of the file being written; this keeps that file, and
        re-dispatch appends to it from its end offset (queries check every hit against the
        record, so an entry past a cut CommitLog tail is never returned).
        """
        private_dir(self._dir)
        names = sorted(
            p.name
            for p in self._dir.iterdir()
            if len(p.name) == NAME_DIGITS and p.name.isdigit() and p.is_file()
        )
        try:
            for name in names:
                f = IndexFile(self._dir / name, self._slot_num, self._index_num, create=False)
                if not last_exit_ok and f.begin_timestamp > checkpoint_index_ms:
                    begin = f.begin_phy_offset
                    f.destroy()
                    if self.dropped_from is None or begin < self.dropped_from:
                        self.dropped_from = begin
                else:
                    self._files.append(f)
        except BaseException:
            self.close()
            raise
        if not last_exit_ok and self._files:
            # Entries put before the crash may still be only in the page cache.
            self._files[-1].needs_flush = True
        newest = self._files[-1].end_timestamp if self._files else 0
        self._flushed_timestamp = max(checkpoint_index_ms, newest)

    def _new_file(self) -> IndexFile:
        private_dir(self._dir)
        number = int(time_name(int(self._clock() * 1000)))
        last = self._files[-1] if self._files else None
        if last is not None:
            # Names must sort in creation order even if the clock stepped back.
            number = max(number, int(last.path.name) + 1)
        while (path := self._dir / f"{number:0{NAME_DIGITS}d}").exists():
            number += 1  # one millisecond later
        end_offset, end_ts = (last.end_phy_offset, last.end_timestamp) if last else (0, 0)
        f = IndexFile(
            path,
            self._slot_num,
            self._index_num,
            create=True,
            end_timestamp=end_ts,
            end_phy_offset=end_offset,
        )
        self._files.append(f)
        return f

    def build(
        self, topic: bytes, keys: Iterable[bytes], phy_offset: int, store_timestamp_ms: int
    ) -> None:
        """Index one message under each non-empty key."""
        self.build_many([(topic, key, phy_offset, store_timestamp_ms) for key in keys])

    def build_many(self, keys: list[tuple[bytes, bytes, int, int]]) -> None:
        """Index messages, in CommitLog order: (topic, key, CommitLog offset, store ms)
        for each key of each message (empty keys are skipped).

        A message below the newest file's end offset was indexed before (the CommitLog is
        being dispatched again after recovery) and is skipped, as RocketMQ's buildIndex does.
        """
        files = self._files
        f = files[-1] if files else None
        # Everything below this was indexed before; at it too once the file has entries.
        done_below = -1 if f is None else f.end_phy_offset + (f.index_count > 1)
        prefixes = self._prefixes
        crc32 = zlib.crc32
        entries: list[tuple[int, int, int]] = []
        for topic, key, phy_offset, store_ms in keys:
            if phy_offset < done_below or not key:
                continue
            prefix = prefixes.get(topic)
            if prefix is None:
                prefix = crc32(topic + b"#")
                if len(prefixes) < 65536:
                    prefixes[topic] = prefix
            entries.append((crc32(key, prefix) & HASH_MASK, phy_offset, store_ms))
        i = 0
        while i < len(entries):
            if f is None or f.is_full:
                if f is not None:
                    f.needs_flush = True
                f = self._new_file()
            i = f.put_many(entries, i)
        if f is not None and entries:
            # After the puts, so a flush that sees the mark sees every key put.
            f.needs_flush = True

    def query(
        self, topic: bytes, key: bytes, max_num: int, begin_ms: int, end_ms: int
    ) -> list[int]:
        """CommitLog offsets of messages with ``key`` stored in [begin_ms, end_ms].

        Newest file first, newest entry first within a file, at most ``max_num``; entries
        whose key merely collides in hash are included, the caller checks the real key.
        """
        found: list[int] = []
        h = key_hash(topic, key)
        files = self._files
        last = len(files) - 1
        for i in range(last, -1, -1):
            if len(found) >= max_num:
                break
            f = files[i]
            if i == last or f.is_time_matched(begin_ms, end_ms):
                found.extend(f.select(h, max_num - len(found), begin_ms, end_ms))
        return found

    def flush(self) -> int:
        """fsync the files written since the last flush (runs on the flush thread).

        Returns the end timestamp of the newest data made durable, for the checkpoint's
        indexMsgTimestamp; the previous value when there was nothing to flush.
        """
        newest = 0
        for f in list(self._files):
            if not f.needs_flush:
                continue
            f.needs_flush = False
            # Read before the fsync: everything up to this timestamp is in the mapping.
            newest = max(newest, f.end_timestamp)
            f.flush()
        with self._lock:
            self._flushed_timestamp = max(self._flushed_timestamp, newest)
            return self._flushed_timestamp

    def truncate(self, max_phy_offset: int) -> None:
        """The CommitLog was cut at ``max_phy_offset``: files that only index records past
        it go, the rest no longer claim to cover them."""
        while len(self._files) > 1 and self._files[-1].begin_phy_offset >= max_phy_offset:
            self._files.pop().destroy()
        for f in self._files:
            f.clamp_end(max_phy_offset)

    def delete_below(self, min_phy_offset: int) -> int:
        """Destroy files (never the newest) whose entries all lie below ``min_phy_offset``."""
        doomed = [f for f in self._files[:-1] if f.end_phy_offset < min_phy_offset]
        if not doomed:
            return 0
        self._files = [f for f in self._files if f not in doomed]
        for f in doomed:
            f.destroy()
        return len(doomed)

    def release(self) -> None:
        """Unmap and close every file without flushing (a simulated crash)."""
        for f in self._files:
            f._release()
        self._files = []

    def close(self) -> None:
        """Flush and close every file."""
        self.flush()
        for f in self._files:
            f.close()
        self._files = []

    def destroy(self) -> None:
        """Delete every index file."""
        for f in self._files:
            f.destroy()
        self._files = []
