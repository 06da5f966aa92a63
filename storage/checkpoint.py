"""The checkpoint file: how far each part of the store is known to be on disk.

RocketMQ's three timestamps first (CommitLog, ConsumeQueue and index flush times), then
the confirmed (committed) physical offset as RocketMQ 5 keeps it, then rocketq's two
clean-shutdown offsets, which let a clean restart skip the recovery scan.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_LAYOUT: Final = struct.Struct(">qqqqqq")
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

    def min_timestamp(self, *, with_index: bool) -> int:
        """The store time up to which every part was flushed (RocketMQ subtracts 3 s)."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if with_index:
            ts = min(ts, self.index_msg_timestamp)
        return max(0, ts - 3000)


class CheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size < FILE_SIZE:
            os.ftruncate(self._fd, FILE_SIZE)

    def read(self) -> Checkpoint:
        raw = os.pread(self._fd, _LAYOUT.size, 0)
        if len(raw) < _LAYOUT.size or not any(raw):
            return Checkpoint()
        return Checkpoint(*_LAYOUT.unpack(raw))

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
            ),
            0,
        )
        if sync:
            os.fdatasync(self._fd)

    def close(self) -> None:
        os.close(self._fd)
