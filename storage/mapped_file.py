"""Fixed-size memory-mapped files and the ordered queue of them that makes one log.

A segment is named by the 20-digit offset of its first byte, created at its full size and
mapped; positions say how far it is written and flushed. Its disk blocks are allocated
(storage.allocation): a CommitLog segment's whole when it is created, a mapping-written
file's a step ahead of what is written (``allocate_step``), so a full disk is an error a
writer sees before it writes, never a SIGBUS of a page the file system cannot back. fsync
runs on a flush thread, never on the event loop (``os.fdatasync`` releases the GIL).

Two kinds of segment share this code. The CommitLog's keep their file descriptor: they are
written with ``pwrite`` and read sequentially. Mapping-written files (ConsumeQueues, many
thousands of them on a broker with many topics) are opened with ``keep_fd=False`` and
``random_access=True``. Their descriptor is closed once the file is mapped (the mapping
holds the file and no descriptor, see ``map_without_fd``; a flush is an ``msync`` of the
dirty page range), so tens of thousands of queues need no more descriptors than a few.
Their mapping is advised ``MADV_RANDOM`` before any access: otherwise the first touch of
a sparse page makes the kernel read around it, up to the device's ``read_ahead_kb`` (8 MiB
on the machines measured), which zero-fills the whole 6 MB file into the page cache, and
thrashes once the queues outgrow memory. Loaded from disk, they are mapped when their
bytes are first used (``lazy``), not at load: a start need not map tens of thousands of
files, many not used again soon (``read_data`` lets a search at load read one without
mapping it). Many dirty ones are flushed at once with ``syncfs``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import mmap
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.file_modes import PRIVATE_FILE, private_dir
from rocketq.storage.allocation import allocate

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096
NAME_DIGITS = 20
# ``allocate_step`` of a segment whose blocks are allocated whole when it is created.
ALLOCATE_WHOLE: Final = 0
# ``allocate_step`` of a segment whose blocks are not allocated ahead (sparse).
ALLOCATE_NONE: Final = -1
_MAP_FIXED: Final = 0x10  # Linux; the mmap module does not export it

_MS_SYNC: Final = 4  # Linux

# ctypes releases the GIL around a foreign call (CDLL, not PyDLL): an msync through it lets
# the event loop run while the pages go to disk, where ``mmap.flush`` holds the GIL for
# the whole write (CPython 3.11 calls msync without releasing it).
_libc = ctypes.CDLL(None, use_errno=True)
_libc.msync.restype = ctypes.c_int
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]


def map_without_fd(fd: int, size: int) -> mmap.mmap:
    """A shared read-write mapping of ``fd`` that holds no file descriptor of its own, so
    the caller may close ``fd`` (the mapping keeps the file).

    CPython's mmap object duplicates the descriptor it maps and keeps the copy until it is
    closed (Python 3.13 has ``trackfd=False`` against that). Before 3.13 an anonymous
    mapping of the same size is made, which holds no descriptor, and the file is mapped
    over it in place (``MAP_FIXED`` at its address): the object then covers the file's
    pages and keeps every check of its own (no access once closed, no close while a view
    is exported); ``flush`` is an msync of the file's pages.
    """
    if sys.version_info >= (3, 13):
        return mmap.mmap(fd, size, trackfd=False)
    buf = mmap.mmap(-1, size)
    anchor = ctypes.c_char.from_buffer(buf)
    address = ctypes.addressof(anchor)
    del anchor  # releases the export, so ``buf`` can be closed
    got = _libc.mmap(
        address, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | _MAP_FIXED, fd, 0
    )
    if got != address:
        err = ctypes.get_errno()
        buf.close()
        raise OSError(err, f"mmap of fd {fd} over its placeholder failed: {os.strerror(err)}")
    return buf


def mapping_address(buf: mmap.mmap) -> int:
    """Where ``buf``'s mapping starts (the export is released at once)."""
    anchor = ctypes.c_char.from_buffer(buf)
    address = ctypes.addressof(anchor)
    del anchor
    return address


def msync(address: int, length: int) -> None:
    """Write a mapped range to disk and wait, without holding the GIL."""
    if _libc.msync(address, length, _MS_SYNC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"msync failed: {os.strerror(err)}")


_syncfs = getattr(_libc, "syncfs", None)
if _syncfs is not None:
    _syncfs.restype = ctypes.c_int
    _syncfs.argtypes = [ctypes.c_int]
HAS_SYNCFS: Final = _syncfs is not None


def syncfs(directory: Path) -> None:
    """Write every dirty page of the file system holding ``directory`` and wait, without
    holding the GIL: one pass the kernel batches, where an ``msync`` or ``fsync`` per file
    costs a journal commit and a device cache flush each. Errors are reported by Linux 5.8
    and later."""
    if _syncfs is None:
        raise OSError(errno.ENOSYS, "syncfs is not available")
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs of {directory} failed: {os.strerror(err)}")
    finally:
        os.close(fd)


def _data_end(fd: int, size: int) -> int:
    """The start of the first hole of a ``size``-byte file if no data follows it, else
    ``size`` (also where ``SEEK_HOLE`` is not supported)."""
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        return size
    if hole >= size:
        return size
    try:
        os.lseek(fd, hole, os.SEEK_DATA)
    except OSError as exc:
        return hole if exc.errno == errno.ENXIO else size  # ENXIO: no data past the hole
    return size  # data after a hole: no shortcut


def offset_name(offset: int) -> str:
    return f"{offset:0{NAME_DIGITS}d}"


class MappedFile:
    """One fixed-size segment: the mapping, its start offset and its positions."""

    __slots__ = (
        "_address",
        "_buf",
        "_closed",
        "_fd",
        "_lock",
        "_path",
        "allocate_step",
        "allocated_position",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "keep_fd",
        "last_modified_ms",
        "random_access",
        "warmed_position",
        "write_lock",
        "wrote_position",
    )

    def __init__(
        self,
        path: str | Path,
        file_size: int,
        *,
        create: bool,
        keep_fd: bool = True,
        random_access: bool = False,
        lazy: bool = False,
        allocate_step: int = ALLOCATE_NONE,
    ) -> None:
        """``lazy`` (an existing file without its descriptor): open and map it when its
        bytes are first used (:attr:`buf`); a missing file or a wrong size is found then.
        ``allocate_step``: ALLOCATE_WHOLE allocates a created file's blocks at once; a
        positive step allocates them that many bytes at a time ahead of the writer
        (:meth:`ensure_allocated`); ALLOCATE_NONE leaves the file sparse. A created file
        whose blocks cannot be had is removed again (:class:`DiskFullError`)."""
        # A string: a store holds tens of thousands of these, and building a Path apiece
        # took a third of a start's time.
        self._path = os.fspath(path)
        self.file_size = file_size
        self.file_from_offset = int(os.path.basename(self._path))
        self.keep_fd = keep_fd
        self.random_access = random_access
        self._fd = -1
        self._buf: mmap.mmap | None = None
        self._address = 0
        self.wrote_position = 0
        self.flushed_position = 0
        self.last_modified_ms = 0 if not create else int(time.time() * 1000)
        self._lock = threading.Lock()
        # Serialises appends with the warmer's zero writes ahead of them (storage.warm).
        self.write_lock = threading.Lock()
        self.warmed_position = 0
        self.allocate_step = allocate_step
        # Blocks below this were allocated by this process (see ensure_allocated).
        self.allocated_position = 0
        self._closed = False
        if lazy and (create or keep_fd):
            raise ValueError("only an existing file without its descriptor can be mapped lazily")
        if not lazy:
            self._map(create=create)

    @property
    def path(self) -> Path:
        return Path(self._path)

    def _map(self, *, create: bool) -> mmap.mmap:
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        path = self._path
        file_size = self.file_size
        keep_fd = self.keep_fd
        fd = os.open(path, flags, PRIVATE_FILE)
        try:
            actual = os.fstat(fd).st_size
            if create:
                os.ftruncate(fd, file_size)
                step = self.allocate_step
                if step >= 0:
                    size = file_size if step == ALLOCATE_WHOLE else min(step, file_size)
                    allocate(fd, 0, size, path)
                    self.allocated_position = size
            elif actual != file_size:
                raise StoreCorruptError(
                    f"{path} is {actual} bytes but segments here are {file_size} bytes; "
                    "set the matching mapped_file_size_* in the config, or move the file away"
                )
            buf = mmap.mmap(fd, file_size) if keep_fd else map_without_fd(fd, file_size)
            self._address = 0 if keep_fd else mapping_address(buf)
            if self.random_access:
                # Before any access: a fault then reads one page, not read_ahead_kb around it.
                buf.madvise(mmap.MADV_RANDOM)
        except BaseException:
            os.close(fd)
            if create:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            raise
        if keep_fd:
            self._fd = fd
        else:
            os.close(fd)
        self._buf = buf
        return buf

    def ensure_allocated(self, end: int) -> None:
        """Allocate the blocks below ``end`` before bytes are written there through the
        mapping, a step at a time (at most one ``fallocate`` per ``allocate_step`` bytes).
        Raises :class:`DiskFullError` when the space is not there (nothing is written)."""
        if end <= self.allocated_position or self.allocate_step <= 0:
            return
        start = self.allocated_position
        stop = min(self.file_size, max(end, start + self.allocate_step))
        with self._lock:
            fd = self._fd if self._fd >= 0 else os.open(self._path, os.O_RDWR)
            try:
                allocate(fd, start, stop - start, self._path)
            finally:
                if fd != self._fd:
                    os.close(fd)
            self.allocated_position = max(self.allocated_position, stop)

    @property
    def buf(self) -> mmap.mmap:
        """The mapping (made now if the file was opened lazily; a closed file's raises
        ValueError on use, as a closed mmap does)."""
        buf = self._buf
        if buf is not None:
            return buf
        with self._lock:
            if self._buf is not None:
                return self._buf
            if self._closed:
                raise ValueError(f"{self.path} is closed")
            try:
                return self._map(create=False)
            except FileNotFoundError as exc:
                raise StoreCorruptError(
                    f"{self.path} is missing: it held entries when the store stopped; "
                    "restore it, or move its queue's directory away and restart"
                ) from exc

    @property
    def mapped(self) -> bool:
        return self._buf is not None

    def read_data(self, limit: int, *, tail: int = 0) -> tuple[int, bytes | None]:
        """Where the file's data ends as its file system tells (``SEEK_HOLE``): the start
        of its first hole when no data follows that hole, else the file size; and, when
        that is at most ``limit``, the bytes up to there and ``tail`` more (within the
        file), read through a descriptor, so no mapping is made. Everything past the end
        reads as zeros: a search for the end of what is written need not fault those
        pages in (in a sparse file each would be a fresh zero page)."""
        fd = self._fd if self._fd >= 0 else os.open(self._path, os.O_RDONLY)
        try:
            end = _data_end(fd, self.file_size)
            if end > limit:
                return end, None
            return end, os.pread(fd, min(end + tail, self.file_size), 0)
        finally:
            if fd != self._fd:
                os.close(fd)

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
            return int(os.stat(self._path).st_mtime * 1000)
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
            start = position = self.wrote_position
            try:
                while view:
                    written = os.pwrite(self._fd, view, position)
                    if written <= 0:
                        raise OSError(errno.EIO, f"pwrite of {self._path} wrote nothing")
                    view = view[written:]
                    position += written
            except BaseException:
                # A short write then an error (ENOSPC): what went in is past the write
                # position; zero it, so no part of the failed write reads as a record.
                if position > start:
                    with contextlib.suppress(OSError):
                        os.pwrite(self._fd, bytes(position - start), start)
                raise
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
        """Make what is written durable; returns the flushed position. Runs on a flush
        thread. With the descriptor kept, ``fdatasync``; without, an ``msync`` of the pages
        from the flushed position's page to the write position (the rest is clean)."""
        with self._lock:
            if self._closed:
                return self.flushed_position
            target = self.wrote_position
            if target > self.flushed_position:
                if self._fd >= 0:
                    os.fdatasync(self._fd)
                else:
                    if self._buf is None:
                        # Not mapped yet: the unflushed bytes are an earlier process's (see
                        # ConsumeQueue.load), in the page cache; msync writes those too.
                        self._map(create=False)
                    start = self.flushed_position - self.flushed_position % OS_PAGE_SIZE
                    msync(self._address + start, target - start)
                self.flushed_position = target
            return self.flushed_position

    def mark_flushed(self, position: int) -> None:
        """Everything below ``position`` was made durable by other means (``syncfs``)."""
        with self._lock:
            if position > self.flushed_position:
                self.flushed_position = min(position, self.wrote_position)

    def dirty_pages(self) -> int:
        return self.wrote_position // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE

    def truncate_to(self, position: int) -> None:
        """Forget everything from ``position`` on and make those bytes zero again."""
        with self._lock, self.write_lock:
            self.wrote_position = position
            self.warmed_position = min(self.warmed_position, position)
            self.flushed_position = min(self.flushed_position, position)
            if position < self.file_size:
                # A file without its descriptor gets one for this (rare: recovery, a replica
                # cut back).
                fd = self._fd if self._fd >= 0 else os.open(self._path, os.O_RDWR)
                try:
                    os.ftruncate(fd, position)
                    os.ftruncate(fd, self.file_size)
                    os.fdatasync(fd)
                finally:
                    if fd != self._fd:
                        os.close(fd)

    def close(self) -> bool:
        """Unmap and close; False if a reader still holds a view (try again later)."""
        with self._lock:
            if self._closed:
                return True
            if self._buf is not None:
                try:
                    self._buf.close()
                except BufferError:
                    return False
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._closed = True
            return True

    def destroy(self) -> bool:
        """Delete the file; the mapping goes as soon as no reader holds a view of it."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)
        return self.close()


class MappedFileQueue:
    """The ordered segments of one log (the CommitLog, or one ConsumeQueue); ``keep_fd``,
    ``random_access`` and ``allocate_step`` are passed to every segment (see the module
    docstring). ``before_create``, when set, is called with the segment size before a
    segment is created and may refuse it by raising (the store's free-space check)."""

    __slots__ = (
        "_dir",
        "_hanged",
        "allocate_step",
        "before_create",
        "file_size",
        "files",
        "keep_fd",
        "random_access",
    )

    def __init__(
        self,
        directory: str | Path,
        file_size: int,
        *,
        keep_fd: bool = True,
        random_access: bool = False,
        allocate_step: int = ALLOCATE_NONE,
    ) -> None:
        self._dir = os.fspath(directory)  # a string, as MappedFile's path
        self.file_size = file_size
        self.keep_fd = keep_fd
        self.random_access = random_access
        self.allocate_step = allocate_step
        self.before_create: Callable[[int], None] | None = None
        self.files: list[MappedFile] = []
        self._hanged: list[MappedFile] = []

    def load(self) -> None:
        """Open every segment in the directory, in offset order, checking names and sizes.
        Segments without their descriptor are mapped when first used."""
        try:
            with os.scandir(self._dir) as it:
                found = sorted((entry.name, entry) for entry in it if entry.is_file())
        except FileNotFoundError:
            return
        lazy = not self.keep_fd
        for name, entry in found:
            path = entry.path
            if len(name) != NAME_DIGITS or not name.isdigit():
                log.warning("ignoring %s: not a segment (20-digit offset name)", path)
                continue
            actual = entry.stat().st_size
            if name == found[-1][0] and actual == 0:
                # Created, then the process died before the file got its size: never used.
                log.warning("removing %s: an empty segment left by an interrupted start", path)
                os.unlink(path)
                continue
            if actual != self.file_size:
                raise StoreCorruptError(
                    f"{path} is {actual} bytes but segments here are {self.file_size} bytes; "
                    "set the matching mapped_file_size_* in the config, or move the file away"
                )
            if self.files and int(name) != self.files[-1].end_offset:
                raise StoreCorruptError(
                    f"{path} does not follow {self.files[-1].path}: segment "
                    f"{offset_name(self.files[-1].end_offset)} is missing; restore it or "
                    "move the later segments away"
                )
            if int(name) % self.file_size:
                raise StoreCorruptError(
                    f"{path} starts at an offset that is not a multiple of the segment "
                    f"size {self.file_size}; check mapped_file_size_* in the config"
                )
            mf = MappedFile(
                path,
                self.file_size,
                create=False,
                keep_fd=self.keep_fd,
                random_access=self.random_access,
                lazy=lazy,
                allocate_step=self.allocate_step,
            )
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    def restore(self, first_offset: int, count: int, end_offset: int) -> None:
        """Take ``count`` segments from ``first_offset`` on, written up to ``end_offset``
        and all on disk, without looking at the directory (a clean stop recorded them; see
        storage.queue_ends). Files without their descriptor are mapped on first use."""
        size = self.file_size
        lazy = not self.keep_fd
        for start in range(first_offset, first_offset + count * size, size):
            mf = MappedFile(
                os.path.join(self._dir, offset_name(start)),
                size,
                create=False,
                keep_fd=self.keep_fd,
                random_access=self.random_access,
                lazy=lazy,
                allocate_step=self.allocate_step,
            )
            mf.wrote_position = mf.flushed_position = size
            self.files.append(mf)
        if self.files:
            last = self.files[-1]
            last.wrote_position = last.flushed_position = end_offset - last.file_from_offset

    @property
    def directory(self) -> Path:
        return Path(self._dir)

    def _open(self, path: str, *, create: bool) -> MappedFile:
        return MappedFile(
            path,
            self.file_size,
            create=create,
            keep_fd=self.keep_fd,
            random_access=self.random_access,
            allocate_step=self.allocate_step,
        )

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
        """Make the segment starting at ``start_offset`` (after ``before_create`` let it);
        one whose blocks cannot be allocated is removed and :class:`DiskFullError` raised."""
        if self.before_create is not None:
            self.before_create(self.file_size)
        private_dir(self._dir)
        mf = self._open(os.path.join(self._dir, offset_name(start_offset)), create=True)
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
