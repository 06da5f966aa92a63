"""Where a Raft member keeps its state: the term and vote, and a raft index over the
CommitLog (the CommitLog *is* the Raft log; no second copy of message data).

``HardStateFile`` holds ``{"term": T, "voted_for": V}``, written (and fsynced) before a
vote or a new term is used. ``RaftIndex`` is an append-only file of fixed 32-byte units,
one per entry (DLedger's unit size): the entry's term, its CommitLog position and size, and
a magic number; entry ``i`` is unit ``i - 1``, so a term or position is one read away. A
torn last unit (a crash mid-write) is cut off when the index is opened.
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
from rocketq.replication.raft.node import Entry
from rocketq.storage.message_store import MessageStore

log = logging.getLogger(__name__)

UNIT: Final = struct.Struct(">qqiI8x")  # term, position, size, magic, padding
UNIT_MAGIC: Final = 0xD1ED6E70
assert UNIT.size == 32


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
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself is durable before the vote is used
        finally:
            os.close(fd)


class RaftIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        self.units: list[tuple[int, int, int]] = []
        last_term, last_end = 0, 0
        for i in range(len(data) // UNIT.size):
            term, pos, size, magic = UNIT.unpack_from(data, i * UNIT.size)
            # A unit follows the one before it: its term no lower, its bytes after its.
            if magic != UNIT_MAGIC or size < 0 or term < last_term or pos < last_end:
                break
            self.units.append((term, pos, size))
            last_term, last_end = term, pos + size
        good = len(self.units) * UNIT.size
        if good != len(data):
            log.warning(
                "%s: cutting %d bytes after unit %d (torn or damaged)",
                path,
                len(data) - good,
                len(self.units),
            )
            os.ftruncate(self._fd, good)

    def last_index(self) -> int:
        return len(self.units)

    def term_at(self, index: int) -> int:
        return self.units[index - 1][0] if index > 0 else 0

    def position(self, index: int) -> tuple[int, int]:
        _, pos, size = self.units[index - 1]
        return pos, size

    def append(self, term: int, pos: int, size: int) -> None:
        os.pwrite(self._fd, UNIT.pack(term, pos, size, UNIT_MAGIC), len(self.units) * UNIT.size)
        self.units.append((term, pos, size))

    def truncate_after(self, index: int) -> None:
        del self.units[index:]
        os.ftruncate(self._fd, len(self.units) * UNIT.size)

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

    def last_index(self) -> int:
        return self.index.last_index()

    def term_at(self, index: int) -> int:
        return self.index.term_at(index)

    def entries(self, start: int, max_count: int) -> list[Entry]:
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
            if size == 0:
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
        while keep > 0 and self.end_of(keep) > end:
            keep -= 1
        if keep < last:
            log.warning(
                "raft index: entries %d-%d lie past the CommitLog's end %d; dropping them",
                keep + 1,
                last,
                end,
            )
            self.index.truncate_after(keep)
        covered = self.end_of(keep) if keep else 0
        if keep == 0 and covered == 0:
            covered = store.commitlog.min_offset if end else 0
        if end > covered:
            log.warning(
                "raft index: CommitLog bytes %d-%d belong to no entry; cutting them",
                covered,
                end,
            )
            store.truncate_to(covered)

    def end_of(self, index: int) -> int:
        """The CommitLog end after entry ``index`` (0: the log's start)."""
        if index == 0:
            return self.store.commitlog.min_offset if self.store.max_phy_offset else 0
        pos, size = self.index.position(index)
        return pos + size

    def record(self, term: int, pos: int, size: int) -> None:
        """Index an entry the leader already wrote to its own CommitLog."""
        self.index.append(term, pos, size)

    def append(self, entries: list[Entry]) -> None:
        """A follower: write the leader's bytes after our last entry, byte for byte."""
        for e in entries:
            pos = self.store.max_phy_offset
            if e.data:
                pos = self.store.commitlog.next_position_for(len(e.data))
                self.store.append_raw(pos, e.data)
            self.index.append(e.term, pos, len(e.data))

    def truncate_after(self, index: int) -> None:
        """Drop entries after ``index`` and their bytes from the CommitLog."""
        if index >= self.index.last_index():
            return
        self._read = None
        self.store.truncate_to(self.end_of(index))
        self.index.truncate_after(index)
