"""Whether the store takes writes, and why not.

Two states refuse writes (reads, pulls and everything that only reads go on):

- **disk full**: the disk holding the CommitLog is used past
  ``disk_space_warning_level_ratio``, or a write or an allocation found no space left
  (ENOSPC). Checked by the retention timer and before every new CommitLog segment; left by
  itself once the ratio is back at or below the level (and, after an ENOSPC, once the space
  that was missing is free).
- **failed**: a write or an fsync of a store file failed otherwise (EIO...). What was not on
  disk cannot be trusted to get there by trying again (an fsync that failed may have
  dropped the dirty pages and a second one report success: PostgreSQL's "fsyncgate"), so
  the state lasts until the broker is restarted and recovery reads back what is on disk.

Both refuse with code 14 (SERVICE_NOT_AVAILABLE) and RocketMQ's text for it, which names
the disk usage, so a producer sends to another broker. Each change is said once in the log
and told to the listeners (on the event loop).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import DiskFullError, ServiceNotAvailableError, StoreFailedError
from rocketq.storage.allocation import NO_SPACE

log = logging.getLogger(__name__)

# The states, as the metrics gauge reports them.
WRITABLE: Final = 0
DISK_FULL: Final = 1
FAILED: Final = 2
STATE_NAMES: Final = {WRITABLE: "writable", DISK_FULL: "disk-full", FAILED: "failed"}

# RocketMQ's broker answers a put its store refuses with this (SendMessageProcessor,
# SERVICE_NOT_AVAILABLE); the brackets hold the used ratio of the CommitLog's, the
# ConsumeQueues' and the index's disks.
REFUSAL_TEXT: Final = (
    "service not available now. It may be caused by one of the following reasons: the "
    "broker's disk is full [{usage}], messages are put to the slave, message store has "
    "been shut down, etc."
)

# After a write found no space, at least this much must be free again before writes are
# taken (else the next write fails the same way at once).
MIN_FREE_AFTER_NO_SPACE: Final = 4 * 1024 * 1024


def disk_used_ratio(path: Path) -> float:
    """The used fraction of the file system holding ``path``, as RocketMQ measures it
    (UtilAll.getDiskPartitionSpaceUsedPercent): used / (used + available to this user),
    rounded up to the percent; 0.0 where it cannot be told."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return 0.0
    return math.ceil(used * 100 / entire) / 100


def free_bytes(path: Path) -> int:
    """Bytes of the file system holding ``path`` this user may still take (-1: unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def is_no_space(exc: BaseException) -> bool:
    """Whether an error says the disk has no space (ENOSPC, a quota, or a segment whose
    blocks could not be allocated)."""
    if isinstance(exc, DiskFullError):
        return True
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


class DiskState:
    """The store's write refusal: disk full (leaves by itself) or failed (until restart).

    Changes happen on the event loop (appends, the timer) and on the flush threads (an
    fsync error); they are made under a lock, said once in the log, and told to every
    listener on the loop given to :meth:`bind_loop` (at once when there is none).
    """

    def __init__(
        self,
        *,
        warning_ratio: float,
        directories: Sequence[Path],
        disk_ratio: Callable[[Path], float] = disk_used_ratio,
        free_space: Callable[[Path], int] = free_bytes,
    ) -> None:
        """``directories``: the CommitLog's (whose disk decides), then the ConsumeQueues'
        and the index's (named in the refusal text)."""
        self.warning_ratio = warning_ratio
        self.directories = tuple(directories)
        self.disk_ratio = disk_ratio
        self.free_space = free_space
        self.full: str | None = None
        """Why the disk counts as full, or None."""
        self.failed: str | None = None
        """The write or fsync error that stopped writes for good, or None."""
        self.ratio = 0.0
        """The used ratio of the CommitLog's disk at the last check."""
        self.listeners: list[Callable[[str | None], None]] = []
        self._need_bytes = 0
        self._usage = ""
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop

    # -- reading -------------------------------------------------------------------------

    @property
    def state(self) -> int:
        """WRITABLE, DISK_FULL or FAILED (the metrics gauge)."""
        if self.failed is not None:
            return FAILED
        return DISK_FULL if self.full is not None else WRITABLE

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    def refusal(self) -> str | None:
        """Why writes are refused (the failure first), or None when they are taken."""
        return self.failed if self.failed is not None else self.full

    def error(self) -> ServiceNotAvailableError | None:
        """The error a refused write raises: RocketMQ's text, then why; None when writes
        are taken."""
        failed, full = self.failed, self.full
        if failed is None and full is None:
            return None
        text = REFUSAL_TEXT.format(usage=self._usage or self._measure_usage())
        if failed is not None:
            return StoreFailedError(f"{text} The store stopped taking writes: {failed}")
        return DiskFullError(f"{text} The broker's disk is full: {full}")

    # -- changing ------------------------------------------------------------------------

    def check_space(self, need_bytes: int = 0) -> float:
        """Measure the CommitLog's disk and enter or leave the disk-full state by it; with
        ``need_bytes`` (a segment about to be made), fewer free bytes than that is full
        too. -> the used ratio."""
        directory = self.directories[0]
        ratio = self.disk_ratio(directory) if directory.exists() else 0.0
        self.ratio = ratio
        free = self.free_space(directory) if need_bytes or self._need_bytes else -1
        reason: str | None = None
        if ratio > self.warning_ratio:
            reason = (
                f"{directory} is on a disk {ratio:.0%} used, past "
                f"disk_space_warning_level_ratio {self.warning_ratio:.2f}; free space there "
                "or lower file_reserved_time"
            )
        elif 0 <= free < need_bytes:
            reason = (
                f"{directory} has {free} bytes free, less than the {need_bytes} a new "
                "segment takes; free space there"
            )
        if reason is not None:
            self._enter_full(reason, need_bytes)
        elif self.full is not None and (free < 0 or free >= self._need_bytes):
            self._leave_full(ratio)
        return ratio

    def no_space(self, exc: BaseException, doing: str, need_bytes: int = 0) -> None:
        """A write or an allocation found no space: the disk is full until at least
        ``need_bytes`` are free and the ratio is back under the level."""
        self._enter_full(f"{doing} failed: {exc}", max(need_bytes, MIN_FREE_AFTER_NO_SPACE))

    def fail(self, exc: BaseException, doing: str) -> None:
        """A write or an fsync failed (not for want of space): refuse writes until the
        broker is restarted."""
        with self._lock:
            if self.failed is not None:
                return
            self.failed = f"{doing} failed: {exc}; restart the broker once the disk is checked"
            self._usage = ""
        log.error(
            "store: %s failed: %s; refusing writes until the broker is restarted (what was "
            "not flushed is not trusted to reach the disk by trying again)",
            doing,
            exc,
        )
        self._changed()

    def write_error(
        self, exc: BaseException, doing: str, need_bytes: int = 0
    ) -> ServiceNotAvailableError:
        """Take a failed write's error into the state (no space: disk full; else failed)
        and return the error the write's caller gets."""
        if is_no_space(exc):
            self.no_space(exc, doing, need_bytes)
        else:
            self.fail(exc, doing)
        refused = self.error()
        assert refused is not None
        return refused

    def _enter_full(self, reason: str, need_bytes: int) -> None:
        with self._lock:
            self._need_bytes = max(self._need_bytes, need_bytes)
            self._usage = self._measure_usage()
            entered = self.full is None
            self.full = reason
        if entered:
            log.error("store: disk full, refusing writes until space is freed: %s", reason)
            self._changed()

    def _leave_full(self, ratio: float) -> None:
        with self._lock:
            if self.full is None:
                return
            self.full = None
            self._need_bytes = 0
            self._usage = ""
        log.warning(
            "store: disk back to %.0f%% used (disk_space_warning_level_ratio %.2f): taking "
            "writes again",
            ratio * 100,
            self.warning_ratio,
        )
        self._changed()

    def _measure_usage(self) -> str:
        """RocketMQ's "CL: 0.95 CQ: 0.95 INDEX: 0.95" (the ratios of the three disks)."""
        names = ("CL", "CQ", "INDEX")
        parts = []
        for name, directory in zip(names, self.directories, strict=False):
            parts.append(f"{name}: {self.disk_ratio(directory):5.2f}")
        return " ".join(parts)

    def _changed(self) -> None:
        refusal = self.refusal()
        loop = self._loop
        for listener in list(self.listeners):
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(listener, refusal)
            else:
                listener(refusal)
