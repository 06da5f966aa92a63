"""Where a Raft member keeps its state: the term and vote, and a raft index over the
CommitLog (the CommitLog *is* the Raft log; no second copy of message data).

``HardStateFile`` holds ``{"term": T, "voted_for": V}``, written (and fsynced) before a
vote or a new term is used. ``RaftIndex`` is an append-only file of fixed 32-byte units,
one per entry (DLedger's unit size): the entry's term, its CommitLog position and size, and
a magic number; entry ``i`` is unit ``i - 1``, so a term or position is one read away. A
torn last unit (a crash mid-write) is cut off when the index is opened.

Compaction: when retention deletes CommitLog segments, the entries whose bytes lay there
are gone, and the index drops their units too. A compacted index starts with a 32-byte
base unit (:data:`BASE`): the last compacted index, its term, and the CommitLog offset its
retained entries start from; entry ``i`` is then unit ``i - base - 1`` after it. Asking for
an entry below the first retained one (its bytes, its position) raises
:class:`~rocketq.replication.raft.node.CompactedError`: an honest answer, never an empty list
that looks like "nothing yet". A member installing a snapshot
(:mod:`rocketq.replication.raft.snapshot`) resets its index to the snapshot's base and
units the same way.
``CommitLogRaftLog`` puts the two together behind the ``RaftLog`` protocol of
:mod:`rocketq.replication.raft.node`: an entry's data is the CommitLog byte range it covers.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.file_modes import PRIVATE_FILE, private_dir
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.replication.raft.membership import is_config
from rocketq.replication.raft.node import CompactedError, Entry
from rocketq.storage.checkpoint import fsync_dir
from rocketq.storage.message_store import MessageStore

log = logging.getLogger(__name__)

UNIT: Final = struct.Struct(">qqiI8x")  # term, position, size, magic, padding
UNIT_MAGIC: Final = 0xD1ED6E70
assert UNIT.size == 32
BASE: Final = struct.Struct(">qqqI4x")  # base index, base term, base end offset, magic
BASE_MAGIC: Final = 0xD1ED5BA5
assert BASE.size == UNIT.size


class HardStateFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> tuple[int, str | None]:
        doc = read_json(self.path, "raft term and vote")
        if doc is None:
            return 0, None
        try:
            term = doc["term"]
            voted = doc.get("voted_for")
            if type(term) is not int or term < 0 or not isinstance(voted, str | None):
                raise ValueError(f"term {term!r}, voted_for {voted!r}")
        except (KeyError, TypeError, ValueError, AttributeError):
            raise StoreCorruptError(
                f"{self.path}: expected {{'term': N, 'voted_for': id or null}}; restore it "
                "(moving it away can let this member vote twice in one term)"
            ) from None
        return term, voted

    def save(self, term: int, voted_for: str | None) -> None:
        write_json_atomic(self.path, {"term": term, "voted_for": voted_for})
        fsync_dir(self.path.parent)  # the rename itself is durable before the vote is used


class RaftIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        self.units: list[tuple[int, int, int]] = []
        # Entries 1..base are compacted; base_term is the term of entry base, base_end the
        # CommitLog offset the retained entries start from. _head: the base unit's bytes.
        self.base, self.base_term, self.base_end, self._head = 0, 0, 0, 0
        if len(data) >= BASE.size:
            base, base_term, base_end, magic = BASE.unpack_from(data, 0)
            if magic == BASE_MAGIC:
                if base < 0 or base_term < 0 or base_end < 0:
                    raise StoreCorruptError(
                        f"{path}: a base unit with index {base}, term {base_term}, offset "
                        f"{base_end}; restore the file or wipe this member's store"
                    )
                self.base, self.base_term, self.base_end = base, base_term, base_end
                self._head = BASE.size
        last_term, last_end = self.base_term, self.base_end
        for i in range((len(data) - self._head) // UNIT.size):
            term, pos, size, magic = UNIT.unpack_from(data, self._head + i * UNIT.size)
            # A unit follows the one before it: its term no lower, its bytes after its.
            if magic != UNIT_MAGIC or size < 0 or term < last_term or pos < last_end:
                break
            self.units.append((term, pos, size))
            last_term, last_end = term, pos + size
        good = self._head + len(self.units) * UNIT.size
        if good != len(data):
            log.warning(
                "%s: cutting %d bytes after unit %d (torn or damaged)",
                path,
                len(data) - good,
                len(self.units),
            )
            os.ftruncate(self._fd, good)

    def first_index(self) -> int:
        return self.base + 1

    def last_index(self) -> int:
        return self.base + len(self.units)

    def term_at(self, index: int) -> int:
        if index > self.base:
            return self.units[index - self.base - 1][0]
        if index == self.base:
            return self.base_term
        raise CompactedError(index, self.base + 1)

    def position(self, index: int) -> tuple[int, int]:
        if index <= self.base:
            raise CompactedError(index, self.base + 1)
        _, pos, size = self.units[index - self.base - 1]
        return pos, size

    def append(self, term: int, pos: int, size: int) -> None:
        at = self._head + len(self.units) * UNIT.size
        os.pwrite(self._fd, UNIT.pack(term, pos, size, UNIT_MAGIC), at)
        self.units.append((term, pos, size))

    def truncate_after(self, index: int) -> None:
        if index < self.base:
            raise CompactedError(index, self.base + 1)
        del self.units[index - self.base :]
        os.ftruncate(self._fd, self._head + len(self.units) * UNIT.size)

    def first_at_or_after(self, offset: int) -> int:
        """The first retained index whose entry starts at or after CommitLog ``offset``
        (last_index + 1 when none does); positions never decrease, so a binary search."""
        lo, hi = 0, len(self.units)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.units[mid][1] < offset:
                lo = mid + 1
            else:
                hi = mid
        return self.base + lo + 1

    def compact(self, first: int, base_end: int) -> None:
        """Drop the units of entries below ``first`` (their CommitLog bytes are gone);
        ``base_end``: where the retained entries' bytes start."""
        first = min(first, self.last_index() + 1)
        if first <= self.base + 1:
            return
        base = first - 1
        self.reset(base, self.term_at(base), base_end, self.units[base - self.base :])

    def reset(
        self, base: int, base_term: int, base_end: int, units: list[tuple[int, int, int]]
    ) -> None:
        """Make the index ``units`` after a base (compaction, an installed snapshot): a new
        file written beside the old, fsynced and renamed over it, so a crash leaves one or
        the other whole."""
        tmp = self.path.with_name(self.path.name + ".new")
        body = [BASE.pack(base, base_term, base_end, BASE_MAGIC)]
        body += [UNIT.pack(t, p, s, UNIT_MAGIC) for t, p, s in units]
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        try:
            data = memoryview(b"".join(body))
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
        except BaseException:
            os.close(fd)
            raise
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self.base, self.base_term, self.base_end, self._head = base, base_term, base_end, BASE.size
        self.units = list(units)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


class CommitLogRaftLog:
    """The Raft log over a store's CommitLog and a raft index."""

    def __init__(self, store: MessageStore, index: RaftIndex) -> None:
        self.store = store
        self.index = index
        # The last answer of :meth:`entries`: the leader asks the same for each follower at
        # the same place, and reads (and sends, see raft.wire.Encoder) those bytes once.
        self._read: tuple[int, int, int, list[Entry]] | None = None
        self._seen_min: int | None = None  # the CommitLog min offset compacted for

    def first_index(self) -> int:
        """The first entry this log still holds (1 until retention deleted segments)."""
        self.compact()
        return self.index.first_index()

    def last_index(self) -> int:
        return self.index.last_index()

    def term_at(self, index: int) -> int:
        return self.index.term_at(index)

    def compact(self) -> None:
        """Drop the index units of entries whose CommitLog bytes retention deleted (it
        deletes only committed segments, see storage.retention's keep_from): asked on
        every read of the first index or of entries, so the index follows the segments
        without a hook in retention."""
        min_offset = self.store.commitlog.min_offset
        if min_offset == self._seen_min:
            return
        self._seen_min = min_offset
        index = self.index
        if min_offset <= max(index.base_end, 0) or index.last_index() == index.base:
            return
        first = index.first_at_or_after(min_offset)
        if first <= index.first_index():
            return
        self._read = None
        log.info(
            "raft index: entries %d-%d compacted with the CommitLog below offset %d",
            index.first_index(),
            first - 1,
            min_offset,
        )
        index.compact(first, min_offset)

    def entries(self, start: int, max_count: int) -> list[Entry]:
        """Entries from ``start`` on (fewer when their bytes are not readable yet);
        raises :class:`CompactedError` when ``start`` lies below the first entry held."""
        self.compact()
        if start < self.index.first_index():
            raise CompactedError(start, self.index.first_index())
        last = self._read
        if last is not None and last[:3] == (start, max_count, self.index.last_index()):
            return last[3]
        out = self._entries(start, max_count)
        last_index = self.index.last_index()
        if len(out) == min(last_index, start + max_count - 1) - start + 1:  # all readable
            self._read = (start, max_count, last_index, out)
        return out

    def _entries(self, start: int, max_count: int) -> list[Entry]:
        out = []
        for i in range(start, min(self.index.last_index(), start + max_count - 1) + 1):
            pos, size = self.index.position(i)
            if size == 0:  # an empty entry, or a membership change (the node has its data)
                out.append(Entry(self.index.term_at(i), b""))
                continue
            view = self.store.commitlog.read(pos, size)
            if view is None:
                break  # not readable (yet): the caller asks again later
            try:
                out.append(Entry(self.index.term_at(i), bytes(view)))
            finally:
                view.release()
        return out

    def reconcile(self) -> None:
        """After a restart, make the raft index and the CommitLog agree: index units whose
        bytes the CommitLog's recovery cut are dropped, and CommitLog bytes no unit covers
        (a batch written but not yet recorded when the process died) are cut."""
        store = self.store
        end = store.max_phy_offset
        last = self.index.last_index()
        keep = last
        while keep > self.index.base and self.end_of(keep) > end:
            keep -= 1
        if keep < last:
            log.warning(
                "raft index: entries %d-%d lie past the CommitLog's end %d; dropping them",
                keep + 1,
                last,
                end,
            )
            self.index.truncate_after(keep)
        base = self.index.base
        covered = self.end_of(keep) if keep > base else (self.index.base_end if base else 0)
        if keep == base and covered == 0:
            covered = store.commitlog.min_offset if end else 0
        if end > covered:
            log.warning(
                "raft index: CommitLog bytes %d-%d belong to no entry; cutting them",
                covered,
                end,
            )
            store.truncate_to(covered)

    def end_of(self, index: int) -> int:
        """The CommitLog end after entry ``index`` (0: the log's start; the compacted
        base: where the retained entries start)."""
        if index == 0:
            return self.store.commitlog.min_offset if self.store.max_phy_offset else 0
        if index == self.index.base:
            return self.index.base_end
        pos, size = self.index.position(index)
        return pos + size

    def record(self, term: int, pos: int, size: int) -> None:
        """Index an entry the leader already wrote to its own CommitLog."""
        self.index.append(term, pos, size)

    def append(self, entries: list[Entry]) -> None:
        """A follower: write the leader's bytes after our last entry, byte for byte."""
        for e in entries:
            pos = self.store.max_phy_offset
            if e.data and not is_config(e.data):  # a change's data is in the member history
                pos = self.store.commitlog.next_position_for(len(e.data))
                self.store.append_raw(pos, e.data)
            self.index.append(e.term, pos, 0 if is_config(e.data) else len(e.data))

    def install(
        self, base: int, base_term: int, base_end: int, units: list[tuple[int, int, int]]
    ) -> None:
        """An installed snapshot: the index is ``units`` after entry ``base`` of
        ``base_term`` (the CommitLog, written by the caller, starts at ``base_end``)."""
        self._read = None
        self._seen_min = None
        self.index.reset(base, base_term, base_end, units)

    def truncate_after(self, index: int) -> None:
        """Drop entries after ``index`` and their bytes from the CommitLog."""
        if index >= self.index.last_index():
            return
        self._read = None
        self.store.truncate_to(self.end_of(index))
        self.index.truncate_after(index)
