"""Fixed-size memory-mapped files and the ordered queue of them that makes one log.

A segment is named by the 20-digit offset of its first byte, created sparse at its full
size and mapped; positions say how far it is written and flushed. fsync runs on a flush
thread, never on the event loop (``os.fdatasync`` releases the GIL).
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import time
from pathlib import Path

from rocketq.cluster.errors import StoreCorruptError

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096
NAME_DIGITS = 20


def offset_name(offset: int) -> str:
    return f"{offset:0{NAME_DIGITS}d}"


class MappedFile:
    """One fixed-size segment: the mapping, its start offset and its positions."""

    __slots__ = (
        "_closed",
        "_fd",
        "_lock",
        "buf",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "last_modified_ms",
        "path",
        "warmed_position",
        "write_lock",
        "wrote_position",
    )

    def __init__(self, path: Path, file_size: int, *, create: bool) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self._fd = os.open(path, flags, 0o644)
        try:
            actual = os.fstat(self._fd).st_size
            if create:
                os.ftruncate(self._fd, file_size)
            elif actual != file_size:
                raise StoreCorruptError(
                    f"{path} is {actual} bytes but segments here are {file_size} bytes; "
                    "set the matching mapped_file_size_* in the config, or move the file away"
                )
            self.buf = mmap.mmap(self._fd, file_size)
        except BaseException:
            os.close(self._fd)
            if create:
                path.unlink(missing_ok=True)
            raise
        self.wrote_position = 0
        self.flushed_position = 0
        self.last_modified_ms = 0 if not create else int(time.time() * 1000)
        self._lock = threading.Lock()
        # Serialises appends with the warmer's zero writes ahead of them (storage.warm).
        self.write_lock = threading.Lock()
        self.warmed_position = 0
        self._closed = False

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def wrote_offset(self) -> int:
        return self.file_from_offset + self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def modified_ms(self) -> int:
        """When the segment was last written: in memory if this process wrote it, else mtime."""
        if self.last_modified_ms:
            return self.last_modified_ms
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def append_bytes(self, data: bytes | bytearray | memoryview, *, fill: bool = False) -> None:
        """Write ``data`` at the write position through the file and advance it (with
        ``fill``, to the end of the file: the rest is already zero).

        ``pwrite`` shares the page cache with the mapping readers use, and costs no page
        fault per fresh page as copying into the mapping does.
        """
        with self.write_lock:
            view = memoryview(data)
            position = self.wrote_position
            while view:
                written = os.pwrite(self._fd, view, position)
                view = view[written:]
                position += written
            self.wrote_position = self.file_size if fill else position

    def warm(self, position: int, zeros: bytes) -> None:
        """Write zeros at ``position``, past the write position (the warmer's thread)."""
        with self.write_lock:
            if self._closed or position < self.wrote_position:
                return
            end = min(position + len(zeros), self.file_size)
            os.pwrite(self._fd, zeros[: end - position], position)
            self.warmed_position = end

    def flush(self) -> int:
        """fsync what is written; returns the flushed position. Runs on a flush thread."""
        with self._lock:
            if self._closed:
                return self.flushed_position
            target = self.wrote_position
            if target > self.flushed_position:
                os.fdatasync(self._fd)
                self.flushed_position = target
            return self.flushed_position

    def dirty_pages(self) -> int:
        return self.wrote_position // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE

    def truncate_to(self, position: int) -> None:
        """Forget everything from ``position`` on and make those bytes zero again."""
        with self._lock, self.write_lock:
            self.wrote_position = position
            self.warmed_position = min(self.warmed_position, position)
            self.flushed_position = min(self.flushed_position, position)
            if position < self.file_size:
                os.ftruncate(self._fd, position)
                os.ftruncate(self._fd, self.file_size)
                os.fdatasync(self._fd)

    def close(self) -> bool:
        """Unmap and close; False if a reader still holds a view (try again later)."""
        with self._lock:
            if self._closed:
                return True
            try:
                self.buf.close()
            except BufferError:
                return False
            os.close(self._fd)
            self._closed = True
            return True

    def destroy(self) -> bool:
        """Delete the file; the mapping goes as soon as no reader holds a view of it."""
        self.path.unlink(missing_ok=True)
        return self.close()


class MappedFileQueue:
    """The ordered segments of one log (the CommitLog, or one ConsumeQueue)."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self._hanged: list[MappedFile] = []

    def load(self) -> None:
        """Map every segment in the directory, in offset order, checking names and sizes."""
        if not self.directory.exists():
            return
        names = sorted(p.name for p in self.directory.iterdir() if p.is_file())
        for name in names:
            if len(name) != NAME_DIGITS or not name.isdigit():
                log.warning(
                    "ignoring %s: not a segment (20-digit offset name)", self.directory / name
                )
                continue
            path = self.directory / name
            if name == names[-1] and path.stat().st_size == 0:
                # Created, then the process died before the file got its size: never used.
                log.warning("removing %s: an empty segment left by an interrupted start", path)
                path.unlink()
                continue
            mf = MappedFile(path, self.file_size, create=False)
            if self.files and mf.file_from_offset != self.files[-1].end_offset:
                mf.close()
                raise StoreCorruptError(
                    f"{mf.path} does not follow {self.files[-1].path}: segment "
                    f"{offset_name(self.files[-1].end_offset)} is missing; restore it or "
                    "move the later segments away"
                )
            if mf.file_from_offset % self.file_size:
                mf.close()
                raise StoreCorruptError(
                    f"{mf.path} starts at an offset that is not a multiple of the segment "
                    f"size {self.file_size}; check mapped_file_size_* in the config"
                )
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else -1

    @property
    def max_offset(self) -> int:
        last = self.last
        return last.wrote_offset if last else 0

    @property
    def flushed_offset(self) -> int:
        for mf in reversed(self.files):
            if mf.flushed_position:
                return mf.file_from_offset + mf.flushed_position
        return self.files[0].file_from_offset if self.files else 0

    def create(self, start_offset: int) -> MappedFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        mf = MappedFile(self.directory / offset_name(start_offset), self.file_size, create=True)
        self.files.append(mf)
        return mf

    def last_writable(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to, creating the next one when the last is full."""
        last = self.last
        if last is None:
            return self.create(start_offset - start_offset % self.file_size)
        if last.is_full:
            return self.create(last.end_offset)
        return last

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding ``offset`` (O(1): segments are contiguous)."""
        files = self.files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= index < len(files):
            return files[index]
        return None

    def flush(self) -> int:
        """fsync every segment with unflushed bytes; returns the flushed offset."""
        for mf in list(self.files):
            if mf.wrote_position > mf.flushed_position:
                mf.flush()
        return self.flushed_offset

    def dirty_pages(self) -> int:
        return sum(mf.dirty_pages() for mf in self.files[-2:])

    def truncate_dirty(self, offset: int) -> None:
        """Drop everything at and after ``offset``: later segments go, the one holding it
        is cut at it."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_from_offset >= offset:
                if not mf.destroy():
                    self._hanged.append(mf)
                continue
            keep.append(mf)
        self.files = keep
        last = self.last
        if last is not None and offset < last.end_offset:
            last.truncate_to(max(0, offset - last.file_from_offset))

    def delete_first(self, count: int) -> int:
        """Delete the oldest ``count`` segments (never the last one); returns how many went."""
        count = min(count, len(self.files) - 1)
        for mf in self.files[:count]:
            if not mf.destroy():
                self._hanged.append(mf)
        del self.files[: max(count, 0)]
        self.retry_hanged()
        return max(count, 0)

    def retry_hanged(self) -> None:
        self._hanged = [mf for mf in self._hanged if not mf.close()]

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.retry_hanged()

    def destroy(self) -> None:
        for mf in self.files:
            mf.destroy()
        self.files = []
