"""The warmer: keeps page-cache pages allocated ahead of the CommitLog writer.

Allocating a fresh page-cache page is most of what writing a record costs the kernel. A
thread of its own writes zeros a little ahead of the write position (``os.pwrite``
releases the GIL, so that work runs beside the event loop), and appends then land on pages
that already exist, as RocketMQ's warmed mapped files do. Each zero write holds the
segment's write lock and starts at or past the write position read under that lock, so
it can never land on a record.

A zero write that fails is no one's loss (no record is there), but it says something of
the disk: the error goes to ``on_error`` (no space: the store counts its disk as full; any
other: the store stops taking writes, storage.disk_state), and the warmer leaves that
segment alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from rocketq.storage.mapped_file import MappedFile, MappedFileQueue
from rocketq.storage.service_thread import ServiceThread

log = logging.getLogger(__name__)

CHUNK: Final = 256 * 1024
# Caught up, the thread sleeps this long, then warms what the writer has used since in one
# go: waking often would take the GIL from the event loop hundreds of times a second for
# nothing (a 2 ms poll cost 32 sends in flight about 5 % of their rate). At a
# hundred MB/s the writer uses 5 MB of the 8 MB ahead meanwhile.
IDLE_WAIT: Final = 0.05  # s


class CommitLogWarmer(ServiceThread):
    name = "commitlog-warm"

    def __init__(self, files: MappedFileQueue, ahead_bytes: int) -> None:
        super().__init__()
        self.files = files
        self.ahead = ahead_bytes
        self._zeros = bytes(CHUNK)
        self.warmed_bytes = 0
        # Told a failed zero write (the store's disk state takes it).
        self.on_error: Callable[[OSError], object] | None = None
        self._given_up: MappedFile | None = None  # the segment a write failed on

    def start(self) -> None:
        if self.ahead > 0:
            super().start()

    def _run(self) -> None:
        while not self._stopping:
            mf = self.files.last
            if mf is None or mf.is_full or mf is self._given_up:
                self._wake.wait(IDLE_WAIT)
                continue
            target = min(mf.file_size, mf.wrote_position + self.ahead)
            start = max(mf.warmed_position, mf.wrote_position)
            if start >= target:
                self._wake.wait(IDLE_WAIT)
                continue
            try:
                mf.warm(start, self._zeros)
            except OSError as exc:
                log.warning("warming %s failed (%s); appends go on without it", mf.path, exc)
                self._given_up = mf
                if self.on_error is not None:
                    self.on_error(exc)
                continue
            self.warmed_bytes += min(CHUNK, mf.file_size - start)
