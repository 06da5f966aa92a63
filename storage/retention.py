"""Retention: delete CommitLog segments older than ``file_reserved_time`` at the
``delete_when`` hours, or at once when the disk fills; ConsumeQueue and index files whose
entries all point below the CommitLog's new min offset go after them.

Like RocketMQ: the newest segment is never deleted, deletion stops at the first segment
that is not expired (never a hole in the middle), at most 10 segments per run, and it does
not check whether the messages were consumed. Each run also measures the disk
(storage.disk_state): above ``disk_space_warning_level_ratio`` the store refuses writes
until space is freed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rocketq.common.config import StoreConfig
from rocketq.storage.commitlog import CommitLog
from rocketq.storage.disk_state import DiskState, disk_used_ratio
from rocketq.storage.dispatch import ConsumeQueueTable
from rocketq.storage.index_file import IndexService

__all__ = ["CleanReport", "CleanService", "disk_used_ratio"]

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX: Final = 10


@dataclass(frozen=True, slots=True)
class CleanReport:
    commit_log_files: int
    consume_queue_files: int
    index_files: int
    disk_ratio: float
    disk_full: bool


class CleanService:
    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        *,
        clock_ms: Callable[[], int],
        disk: DiskState,
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.clock_ms = clock_ms
        self.disk = disk
        # Segments ending past this CommitLog offset are kept (a Raft member's commit
        # point: only committed entries may be compacted); None: no such bound.
        self.keep_below: Callable[[], int] | None = None

    @property
    def disk_full(self) -> bool:
        return self.disk.full is not None

    def run(self) -> CleanReport:
        cfg = self.config
        now = self.clock_ms()
        ratio = self.disk.check_space()
        clean_now = ratio > cfg.disk_space_clean_forcibly_ratio
        space_full = ratio > cfg.disk_max_used_space_ratio / 100
        hour = time.localtime(now / 1000).tm_hour
        time_up = hour in cfg.delete_hours
        deleted = 0
        if time_up or space_full or clean_now:
            deleted = self._delete_commit_log(now, force=clean_now)
        cq_deleted, index_deleted = self._delete_logics()
        if deleted and self.disk.full is not None:
            ratio = self.disk.check_space()  # what was deleted may have ended it
        return CleanReport(deleted, cq_deleted, index_deleted, ratio, self.disk_full)

    def _delete_commit_log(self, now: int, *, force: bool) -> int:
        reserved_ms = self.config.file_reserved_time * 3600 * 1000
        files = self.commitlog.files.files
        count = 0
        limit = self.keep_below() if self.keep_below is not None else None
        for mf in files[:-1][:DELETE_FILES_BATCH_MAX]:
            if limit is not None and mf.end_offset > limit:
                break
            if force or now >= mf.modified_ms() + reserved_ms:
                count += 1
            else:
                break
        if count:
            first = files[0].path.name
            deleted = self.commitlog.files.delete_first(count)
            log.info(
                "deleted %d CommitLog segment(s) from %s (file_reserved_time %d h%s); "
                "min offset now %d",
                deleted,
                first,
                self.config.file_reserved_time,
                ", disk nearly full" if force else "",
                self.commitlog.min_offset,
            )
            return deleted
        return 0

    def _delete_logics(self) -> tuple[int, int]:
        min_offset = self.commitlog.min_offset
        if min_offset <= 0:
            return 0, 0
        cq_deleted = 0
        for cq in list(self.queues.queues.values()):
            cq_deleted += cq.delete_expired(min_offset)
        index_deleted = self.index.delete_below(min_offset) if self.index is not None else 0
        self.commitlog.files.retry_hanged()
        return cq_deleted, index_deleted
