"""The checkpoint file: how far each part of the store is known to be on disk.

RocketMQ's three timestamps first (CommitLog, ConsumeQueue and index flush times), then
the confirmed (committed) physical offset as RocketMQ 5 keeps it, then rocketq's two
clean-shutdown offsets, which let a clean restart skip the recovery scan, then three
CommitLog offsets that bound the recovery after a crash: the CommitLog's flushed offset,
and the offsets below which every ConsumeQueue entry and every index entry is on disk.
Each is written only after the flush that makes it true. A file from before those three
existed reads them as 0, "not recorded", and recovery falls back to the timestamps.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocketq.common.file_modes import PRIVATE_FILE, private_dir

_LAYOUT: Final = struct.Struct(">qqqqqqqqq")
_OLD_LAYOUT_SIZE: Final = 6 * 8
FILE_SIZE: Final = 4096


@dataclass(slots=True)
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    confirm_phy_offset: int = 0
    # Written only at a clean shutdown: the CommitLog's end and the dispatched offset.
    clean_max_phy_offset: int = -1
    clean_dispatched_offset: int = -1
    # CommitLog offsets known flushed (0: not recorded): the CommitLog itself, and the
    # offsets below which every record's ConsumeQueue entry / index keys are on disk.
    physic_flushed_offset: int = 0
    logics_flushed_offset: int = 0
    index_flushed_offset: int = 0

    def min_timestamp(self, *, with_index: bool) -> int:
        """The store time up to which every part was flushed (RocketMQ subtracts 3 s)."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if with_index:
            ts = min(ts, self.index_msg_timestamp)
        return max(0, ts - 3000)

    @property
    def has_offsets(self) -> bool:
        """Whether the flushed offsets were recorded (not an older file, not a new store)."""
        return self.physic_flushed_offset > 0 or self.logics_flushed_offset > 0


class CheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        if os.fstat(self._fd).st_size < FILE_SIZE:
            os.ftruncate(self._fd, FILE_SIZE)

    def read(self) -> Checkpoint:
        raw = os.pread(self._fd, _LAYOUT.size, 0)
        if len(raw) < _OLD_LAYOUT_SIZE or not any(raw):
            return Checkpoint()
        return Checkpoint(*_LAYOUT.unpack(raw.ljust(_LAYOUT.size, b"\0")))

    def write(self, cp: Checkpoint, *, sync: bool = True) -> None:
        os.pwrite(
            self._fd,
            _LAYOUT.pack(
                cp.physic_msg_timestamp,
                cp.logics_msg_timestamp,
                cp.index_msg_timestamp,
                cp.confirm_phy_offset,
                cp.clean_max_phy_offset,
                cp.clean_dispatched_offset,
                cp.physic_flushed_offset,
                cp.logics_flushed_offset,
                cp.index_flushed_offset,
            ),
            0,
        )
        if sync:
            os.fdatasync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def fsync_dir(path: Path) -> None:
    """Make the names in a directory durable (after a file in it was made, renamed or
    removed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
