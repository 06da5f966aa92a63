"""Recovery at start: find where the CommitLog's valid records end and bring the
ConsumeQueues back in line with it.

A clean shutdown (no abort file) wrote the CommitLog's end and the dispatched offset into
the checkpoint, so a clean start only checks that nothing lies past that end: no scan. A
start that finds the abort file picks the newest segment whose first record is older than
the checkpoint's flush times, checks every record from there (magic, sizes, physical
offset, body CRC), cuts the torn tail and zeroes it, drops ConsumeQueue entries past it,
and re-dispatches from that segment (queues and index skip what they already hold).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from rocketq.storage.checkpoint import Checkpoint
from rocketq.storage.commitlog import (
    BAD_RECORD,
    BLANK_RECORD,
    CommitLog,
    QueueKey,
    RecordInfo,
    check_record,
)
from rocketq.storage.dispatch import ConsumeQueueTable
from rocketq.storage.mapped_file import MappedFile

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RecoveryResult:
    max_offset: int
    dispatch_from: int
    scanned_records: int = 0
    torn_tail: bool = False
    fast: bool = False
    # Next queue offset per queue, from the records scanned (the CQs give the rest).
    queue_offsets: dict[QueueKey, int] = field(default_factory=dict)


def recover(
    commitlog: CommitLog,
    queues: ConsumeQueueTable,
    checkpoint: Checkpoint,
    *,
    last_exit_ok: bool,
    check_crc: bool,
    with_index: bool,
) -> RecoveryResult:
    files = commitlog.files.files
    if not files:
        for cq in queues.queues.values():
            cq.destroy()
        queues.queues.clear()
        return RecoveryResult(0, 0, fast=True)
    if last_exit_ok:
        fast = _fast_path(commitlog, checkpoint)
        if fast is not None:
            _truncate_queues(queues, fast.max_offset)
            return fast
        start = max(0, len(files) - 3)
        log.info(
            "clean shutdown without end offsets: checking the last %d segments", len(files) - start
        )
    else:
        start = _abnormal_start(files, checkpoint.min_timestamp(with_index=with_index))
        log.warning(
            "the store did not shut down cleanly: recovering from segment %s",
            files[start].path.name,
        )
    result = _scan(commitlog, start, check_crc=check_crc)
    _truncate_queues(queues, result.max_offset)
    return result


def _fast_path(commitlog: CommitLog, cp: Checkpoint) -> RecoveryResult | None:
    """Trust the clean-shutdown end offset if nothing is written past it."""
    end = cp.clean_max_phy_offset
    last = commitlog.files.files[-1]
    if cp.clean_dispatched_offset < 0 or not last.file_from_offset <= end <= last.end_offset:
        return None
    pos = end - last.file_from_offset
    if pos < last.file_size and any(last.buf[pos : pos + 8]):
        return None  # bytes past the recorded end: the checkpoint is stale
    last.wrote_position = last.flushed_position = pos
    return RecoveryResult(end, min(cp.clean_dispatched_offset, end), fast=True)


def _abnormal_start(files: list[MappedFile], min_timestamp: int) -> int:
    """The newest segment whose first record was stored before the checkpoint's time."""
    for i in range(len(files) - 1, -1, -1):
        info = check_record(
            files[i].buf, 0, files[i].file_size, files[i].file_from_offset, check_crc=False
        )
        if isinstance(info, RecordInfo) and 0 < info.store_timestamp <= min_timestamp:
            return i
    return 0


def _scan(commitlog: CommitLog, start: int, *, check_crc: bool) -> RecoveryResult:
    files = commitlog.files.files
    queue_offsets: dict[QueueKey, int] = {}
    scanned = 0
    valid_end = files[start].file_from_offset
    for mf in files[start:]:
        pos = 0
        end_of_file = False
        while pos < mf.file_size:
            info = check_record(mf.buf, pos, mf.file_size, mf.file_from_offset, check_crc=check_crc)
            if info == BLANK_RECORD:
                end_of_file = True
                break
            if info == BAD_RECORD or not isinstance(info, RecordInfo):
                break
            scanned += 1
            if info.sys_flag & 0xC not in (0x4, 0xC):
                key = (info.topic, info.queue_id)
                if info.queue_offset + 1 > queue_offsets.get(key, 0):
                    queue_offsets[key] = info.queue_offset + 1
            pos += info.size
        mf.wrote_position = mf.flushed_position = mf.file_size if end_of_file else pos
        valid_end = mf.end_offset if end_of_file else mf.file_from_offset + pos
        if not end_of_file:
            break
    dispatch_from = files[start].file_from_offset
    torn = _has_tail(files, valid_end)
    commitlog.files.truncate_dirty(valid_end)
    if torn:
        log.warning(
            "CommitLog cut at offset %d: the torn or corrupt tail after it is dropped", valid_end
        )
    return RecoveryResult(valid_end, dispatch_from, scanned, torn, queue_offsets=queue_offsets)


def _has_tail(files: list[MappedFile], valid_end: int) -> bool:
    """Whether anything was written past ``valid_end`` (a torn or corrupt tail)."""
    mf = files[-1] if files else None
    for candidate in files:
        if candidate.file_from_offset <= valid_end < candidate.end_offset:
            mf = candidate
            break
    if mf is None or valid_end >= mf.end_offset:
        return False
    pos = valid_end - mf.file_from_offset
    return any(mf.buf[pos : pos + 4096]) or mf is not files[-1]


def _truncate_queues(queues: ConsumeQueueTable, max_offset: int) -> None:
    for cq in queues.queues.values():
        if cq.max_physic_offset > max_offset:
            cq.truncate_dirty(max_offset)
