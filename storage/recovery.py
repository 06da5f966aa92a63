"""Recovery at start: find where the CommitLog's valid records end and bring the
ConsumeQueues back in line with it.

A clean shutdown (no abort file) wrote the CommitLog's end and the dispatched offset into
the checkpoint, so a clean start only checks that nothing lies past that end: no scan.

A start that finds the abort file checks records (magic, sizes, physical offset, body
CRC, topic and properties) from the checkpoint's offsets on: the lower of the CommitLog's
flushed offset and the offset below which every ConsumeQueue entry is on disk. What lies
below both was fsynced before the checkpoint was written and is trusted, as RocketMQ
trusts every segment before the one its recovery starts from. The scan cuts the torn tail
and zeroes it, and learns the next queue offset of every queue written since; the caller
drops ConsumeQueue entries past the cut and re-dispatches from the lowest of the
checkpoint's offsets (queues and index skip what they already hold), in the background.
So the time to recover follows what was written since the last checkpoint, not the
CommitLog's size.

A checkpoint without those offsets (a file from an older rocketq) falls back to
RocketMQ's choice: the newest segment whose first record is older than the checkpoint's
flush times, checked and re-dispatched from its start.
"""

from __future__ import annotations

import logging
import mmap
import struct
import zlib
from dataclasses import dataclass, field
from typing import Final

from rocketq.common.record import (
    BLANK_MAGIC_CODE,
    CRC_MASK,
    FIXED_SIZE,
    MESSAGE_MAGIC_CODE,
    POS_BODY,
    USHORT,
)
from rocketq.storage.checkpoint import Checkpoint
from rocketq.storage.commitlog import (
    TOPIC_BYTES,
    CommitLog,
    QueueKey,
    RecordInfo,
    check_record,
)
from rocketq.storage.dispatch import ConsumeQueueTable
from rocketq.storage.mapped_file import MappedFile

log = logging.getLogger(__name__)

# size, magic, body CRC, queue id, queue offset, physical offset, sys flag, body length.
_RECORD: Final = struct.Struct(">iIIi4xqqi8x8x8x8x4x8xi")
assert _RECORD.size == POS_BODY
# Transaction types that get no queue offset (prepared, rollback).
_NO_QUEUE_OFFSET: Final = frozenset({0x4, 0xC})


@dataclass(slots=True)
class RecoveryResult:
    max_offset: int
    dispatch_from: int
    scanned_records: int = 0
    torn_tail: bool = False
    fast: bool = False
    # Next queue offset per queue, from the records scanned (the CQs give the rest).
    queue_offsets: dict[QueueKey, int] = field(default_factory=dict)
    # Where the check began (-1: no scan) and how many bytes it covered.
    scan_from: int = -1
    scanned_bytes: int = 0
    # Whether the scan began at the checkpoint's flushed offset (not at a segment start).
    from_checkpoint: bool = False


def recover(
    commitlog: CommitLog,
    queues: ConsumeQueueTable,
    checkpoint: Checkpoint,
    *,
    last_exit_ok: bool,
    check_crc: bool,
    with_index: bool,
    index_dropped_from: int | None = None,
) -> RecoveryResult:
    """Recover the CommitLog's end. ``index_dropped_from``: the lowest CommitLog offset an
    index file dropped at load had indexed (re-dispatch must start at or below it)."""
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
        result = _scan(commitlog, files[start].file_from_offset, check_crc=check_crc)
    else:
        start_at = _checkpoint_start(commitlog, checkpoint)
        if start_at is not None:
            scan_from, exact = start_at
            result = _scan(commitlog, scan_from, check_crc=check_crc)
            result.from_checkpoint = exact
            dispatch_from = checkpoint.logics_flushed_offset
            if with_index:
                dispatch_from = min(dispatch_from, checkpoint.index_flushed_offset)
            result.dispatch_from = min(scan_from, dispatch_from)
        else:
            start = _abnormal_start(files, checkpoint.min_timestamp(with_index=with_index))
            log.warning(
                "the checkpoint records no flushed offsets: recovering from segment %s",
                files[start].path.name,
            )
            result = _scan(commitlog, files[start].file_from_offset, check_crc=check_crc)
        if index_dropped_from is not None:
            result.dispatch_from = min(result.dispatch_from, index_dropped_from)
        result.dispatch_from = min(
            max(result.dispatch_from, commitlog.min_offset, 0), result.max_offset
        )
        log.warning(
            "the store did not shut down cleanly: checked %d records (%d bytes) of the "
            "CommitLog from offset %d%s, end at %d%s; re-dispatch from offset %d (%d bytes)",
            result.scanned_records,
            result.scanned_bytes,
            result.scan_from,
            " (the checkpoint's flushed offsets)" if result.from_checkpoint else "",
            result.max_offset,
            ", torn tail cut" if result.torn_tail else "",
            result.dispatch_from,
            result.max_offset - result.dispatch_from,
        )
    # What the scan accepted is the log from now on: make it durable before anything (a
    # checkpoint, a new record) builds on it. Only pages still dirty are written.
    commitlog.files.flush()
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
    # The checkpoint has no checksum: its two offsets must agree with each other and with
    # the log (dispatch stops at the end, and where it stopped a record begins), or one of
    # them is damaged and the last segments are checked instead of trusting a cut mid-record.
    dispatched = cp.clean_dispatched_offset
    if dispatched > end or (dispatched < end and not _record_at(commitlog, dispatched)):
        log.warning(
            "the checkpoint's clean-stop offsets (end %d, dispatched %d) do not fit the "
            "CommitLog: checking its last segments",
            end,
            dispatched,
        )
        return None
    last.wrote_position = last.flushed_position = pos
    return RecoveryResult(end, min(cp.clean_dispatched_offset, end), fast=True)


def _record_at(commitlog: CommitLog, offset: int) -> bool:
    """Whether a whole record (or a segment's closing blank) begins at ``offset``."""
    mf = commitlog.files.find(offset)
    if mf is None:
        return False
    pos = offset - mf.file_from_offset
    info = check_record(mf.buf, pos, mf.file_size, mf.file_from_offset, check_crc=False)
    return isinstance(info, RecordInfo) or (info == 0 and pos > 0)


def _checkpoint_start(commitlog: CommitLog, cp: Checkpoint) -> tuple[int, bool] | None:
    """Where the scan after a crash starts: the lower of the CommitLog's flushed offset
    and the ConsumeQueues' (below it every queue's entries are on disk, so the queue
    offsets of the records past it are all the scan must learn), and whether it is that
    offset (not its segment's start, when no record begins there). None when the
    checkpoint has no offsets or they do not fit this CommitLog (files were lost)."""
    if not cp.has_offsets:
        return None
    files = commitlog.files.files
    start = max(min(cp.physic_flushed_offset, cp.logics_flushed_offset), files[0].file_from_offset)
    if start > files[-1].end_offset:
        log.warning(
            "the checkpoint's flushed offset %d lies past the CommitLog's last segment "
            "(ending at %d); recovering by the timestamps instead",
            start,
            files[-1].end_offset,
        )
        return None
    mf = commitlog.files.find(start)
    if mf is None:
        return start, True  # the end of the last segment: nothing can follow
    pos = start - mf.file_from_offset
    info = check_record(mf.buf, pos, mf.file_size, mf.file_from_offset, check_crc=False)
    if isinstance(info, RecordInfo) or info == 0 or not any(mf.buf[pos : pos + 8]):
        return start, True
    # Bytes that are not a record where one must begin: a write torn right at the flushed
    # offset, or a checkpoint that does not belong to these files. The segment's start is a
    # record boundary either way.
    log.warning(
        "no record at the checkpoint's offset %d; checking its segment %s from the start",
        start,
        mf.path.name,
    )
    return mf.file_from_offset, False


def _abnormal_start(files: list[MappedFile], min_timestamp: int) -> int:
    """The newest segment whose first record was stored before the checkpoint's time."""
    for i in range(len(files) - 1, -1, -1):
        info = check_record(
            files[i].buf, 0, files[i].file_size, files[i].file_from_offset, check_crc=False
        )
        if isinstance(info, RecordInfo) and 0 < info.store_timestamp <= min_timestamp:
            return i
    return 0


def _scan(commitlog: CommitLog, start_offset: int, *, check_crc: bool) -> RecoveryResult:
    """Check records from ``start_offset`` (a record boundary) to the first bad one, set
    the segments' positions and cut everything after it."""
    files = commitlog.files.files
    queue_offsets: dict[QueueKey, int] = {}
    scanned = 0
    valid_end = start_offset
    first = next((i for i, mf in enumerate(files) if mf.end_offset > start_offset), len(files))
    for mf in files[first:]:
        pos = max(0, start_offset - mf.file_from_offset)
        pos, records, end_of_file = check_segment(
            mf.buf,
            pos,
            mf.file_size,
            mf.file_from_offset,
            check_crc=check_crc,
            queue_offsets=queue_offsets,
        )
        scanned += records
        mf.wrote_position = mf.file_size if end_of_file else pos
        # Unknown whether it reached the disk before the crash: the caller flushes it.
        mf.flushed_position = min(mf.flushed_position, max(0, start_offset - mf.file_from_offset))
        valid_end = mf.end_offset if end_of_file else mf.file_from_offset + pos
        if not end_of_file:
            break
    torn = _has_tail(files, valid_end)
    commitlog.files.truncate_dirty(valid_end)
    if torn:
        log.warning(
            "CommitLog cut at offset %d: the torn or corrupt tail after it is dropped", valid_end
        )
    return RecoveryResult(
        valid_end,
        start_offset,
        scanned,
        torn,
        queue_offsets=queue_offsets,
        scan_from=start_offset,
        scanned_bytes=valid_end - start_offset,
    )


def check_segment(
    buf: mmap.mmap | bytes,
    pos: int,
    limit: int,
    base: int,
    *,
    check_crc: bool,
    queue_offsets: dict[QueueKey, int],
) -> tuple[int, int, bool]:
    """Check the records of one segment from ``pos``, as ``check_record`` does each (one
    header unpack per record, no objects): -> (where the valid records end, how many,
    whether a blank record ends the segment there). Each queue's next queue offset goes
    to ``queue_offsets``."""
    unpack = _RECORD.unpack_from
    ushort = USHORT.unpack_from
    crc32 = zlib.crc32
    topic_ok = TOPIC_BYTES.fullmatch
    view = memoryview(buf)
    records = 0
    try:
        while pos + 8 <= limit:
            if pos + FIXED_SIZE > limit:
                size, magic = struct.unpack_from(">iI", buf, pos)
                return pos, records, magic == BLANK_MAGIC_CODE and size >= 8
            size, magic, body_crc, qid, qoff, phy, sys_flag, body_len = unpack(buf, pos)
            if magic != MESSAGE_MAGIC_CODE:
                return pos, records, magic == BLANK_MAGIC_CODE and size >= 8
            end = pos + size
            if size < FIXED_SIZE or end > limit or phy != base + pos or body_len < 0:
                break
            tp = pos + POS_BODY + body_len
            if tp + 3 > end:
                break
            tl = buf[tp]
            pp = tp + 1 + tl
            if pp + 2 > end:
                break
            (props_len,) = ushort(buf, pp)
            if FIXED_SIZE + body_len + tl + props_len != size:
                break
            # Stores before the sign bit was cleared kept it: both forms are whole.
            if check_crc and (crc32(view[pos + POS_BODY : tp]) ^ body_crc) & CRC_MASK:
                break
            # The CRC covers the body only: a tail torn inside topic or properties shows as
            # zeros where a legal topic and "key\x01value\x02" pairs must be.
            if not topic_ok(view[tp + 1 : pp]) or (
                props_len and (buf[end - 1] != 2 or buf.find(b"\0", pp + 2, end) >= 0)
            ):
                break
            if sys_flag & 0xC not in _NO_QUEUE_OFFSET:
                key = (bytes(view[tp + 1 : pp]), qid)
                if qoff >= queue_offsets.get(key, 0):
                    queue_offsets[key] = qoff + 1
            records += 1
            pos = end
        return pos, records, False
    finally:
        view.release()


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
    queues.cut(max_offset)
