"""The CommitLog: every message of every topic, appended in one sequential log.

One writer. A batch arrives as concatenated records (cluster.record's layout) for one
topic and queue; it is validated whole before a byte is written, copied into the mapped
segment in one go, and stamped in place (queue id and offset, physical offset, store time
and host, body CRC). A batch never spans two segments: when it does not fit, the rest of
the segment becomes a blank record (END_OF_FILE) and the batch goes to the next one.

Held writes: while :attr:`CommitLog.holding` is set (the broker sets it while it handles
the requests of one network read), stamped batches are kept in memory at reserved
positions and :meth:`CommitLog.write_held` writes them all with one ``pwrite``. Readers
see only written bytes (``max_offset`` is the written end); the queue offsets the held
batches took are given back if that write fails.
"""

from __future__ import annotations

import logging
import mmap
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import (
    MessageIllegalError,
    PropertiesSizeExceededError,
    StoreCorruptError,
)
from rocketq.common.record import (
    BLANK,
    BLANK_MAGIC_CODE,
    CRC_MASK,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_SIZE,
    HEADER,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    POS_BODY,
    SIZE_MAGIC,
    SIZE_MAGIC_SYSFLAG_BODYLEN,
    STAMP_CRC_QUEUE_ID,
    STAMP_OFFSETS,
    STAMP_STORE,
    USHORT,
)
from rocketq.storage.mapped_file import ALLOCATE_WHOLE, MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

QueueKey = tuple[bytes, int]

# Transaction types that get queue offset 0 and do not advance the queue (prepared, rollback).
_NO_QUEUE_OFFSET: Final = frozenset({0x4, 0xC})
# A part append_parts gave no result (never: each is stored or refused).
_NOT_STORED: Final = MessageIllegalError("the batch was not stored")
# What stamping calls for every record, bound once (a batch of many topics stamps a few
# records per call).
_unpack_record_head: Final = SIZE_MAGIC_SYSFLAG_BODYLEN.unpack_from
_unpack_ushort: Final = USHORT.unpack_from
_pack_crc_queue_id: Final = STAMP_CRC_QUEUE_ID.pack_into
_pack_offsets: Final = STAMP_OFFSETS.pack_into
_crc32: Final = zlib.crc32


class AppendResult:
    """Where a batch landed: its first record's physical and queue offsets. A plain class
    with its own constructor: compiled, a dataclass's generated ``__init__`` runs as
    Python, and every stored batch (every message, with many topics) makes one."""

    __slots__ = ("msg_count", "queue_offset", "store_timestamp", "wrote_bytes", "wrote_offset")

    def __init__(
        self,
        wrote_offset: int,
        wrote_bytes: int,
        msg_count: int,
        queue_offset: int,
        store_timestamp: int,
    ) -> None:
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.msg_count = msg_count
        self.queue_offset = queue_offset
        self.store_timestamp = store_timestamp

    @property
    def end_offset(self) -> int:
        return self.wrote_offset + self.wrote_bytes

    def _fields(self) -> tuple[int, int, int, int, int]:
        return (
            self.wrote_offset,
            self.wrote_bytes,
            self.msg_count,
            self.queue_offset,
            self.store_timestamp,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AppendResult):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"AppendResult(wrote_offset={self.wrote_offset}, wrote_bytes={self.wrote_bytes}, "
            f"msg_count={self.msg_count}, queue_offset={self.queue_offset}, "
            f"store_timestamp={self.store_timestamp})"
        )


@dataclass(frozen=True)
class RecordInfo:
    """What dispatch and recovery read from one record's header (no body copy)."""

    size: int
    topic: bytes
    queue_id: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    store_timestamp: int
    properties: bytes


TOPIC_BYTES: Final = re.compile(rb"[%|a-zA-Z0-9_-]+")

# Results of check_record besides a positive record size.
BLANK_RECORD: Final = 0
BAD_RECORD: Final = -1


class CommitLog:
    def __init__(
        self,
        directory: Path,
        *,
        file_size: int,
        max_message_size: int,
        store_host: bytes,
        clock_ms: Callable[[], int],
    ) -> None:
        # Every segment's blocks are allocated when it is made (storage.allocation).
        self.files = MappedFileQueue(directory, file_size, allocate_step=ALLOCATE_WHOLE)
        self.file_size = file_size
        self.max_message_size = max_message_size
        self.store_host = store_host
        self.clock_ms = clock_ms
        # (topic, queue id) -> next queue offset.
        self.queue_table: dict[QueueKey, int] = {}
        # (wrote offset, store timestamp) of the newest append, read by the flush thread.
        self.last_append: tuple[int, int] = (0, 0)
        # Held writes (see the module's docstring): stamped batches not written yet, their
        # size, and the queue offsets they took (the value before, None: no entry).
        self.holding = False
        self._held: list[bytearray] = []
        self._held_bytes = 0
        self._held_undo: dict[QueueKey, int | None] = {}
        self._held_ts = 0

    # -- writing -------------------------------------------------------------------------

    def stamp(
        self, buf: bytearray, topic: bytes, queue_id: int, base: int, first_qoff: int, ts: int
    ) -> tuple[int, int]:
        """Check every record of a batch and stamp it in place, in one pass.

        ``buf`` is the writer's private copy: when a record is bad the error is raised and
        the copy dropped, so nothing is written. -> (records, next queue offset).
        """
        n = len(buf)
        if n == 0:
            raise MessageIllegalError("the batch is empty")
        if n + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise MessageIllegalError(
                f"the batch is {n} bytes, larger than a CommitLog segment ({self.file_size}); "
                "send fewer messages per batch"
            )
        store_stamp = STAMP_STORE.pack(ts, self.store_host)
        return self.stamp_range(
            buf, memoryview(buf), 0, n, topic, queue_id, base, first_qoff, store_stamp
        )

    def stamp_range(
        self,
        buf: bytearray,
        view: memoryview,
        start: int,
        n: int,
        topic: bytes,
        queue_id: int,
        base: int,
        first_qoff: int,
        store_stamp: bytes,
    ) -> tuple[int, int]:
        """:meth:`stamp` for the records in ``buf[start:n]`` (one topic and queue), where
        ``buf`` (``view`` its memoryview) starts at physical offset ``base``; each record
        gets ``store_stamp`` (store time and host). -> (records, next queue offset)."""
        unpack = _unpack_record_head
        ushort = _unpack_ushort
        stamp_crc = _pack_crc_queue_id
        stamp_offsets = _pack_offsets
        crc32 = _crc32
        tl = len(topic)
        max_body = self.max_message_size
        qoff = first_qoff
        count = 0
        pos = start
        while pos < n:
            if n - pos < FIXED_SIZE:
                raise MessageIllegalError(f"record {count} of the batch is truncated")
            size, magic, sys_flag, body_len = unpack(buf, pos)
            if magic != MESSAGE_MAGIC_CODE or size < FIXED_SIZE or pos + size > n:
                raise MessageIllegalError(
                    f"record {count} of the batch is not a message record "
                    f"(size {size}, magic {magic:#x})"
                )
            if body_len < 0 or body_len > max_body:
                raise MessageIllegalError(
                    f"message body is {body_len} bytes; the limit is {max_body} (max_message_size)"
                )
            body_end = pos + POS_BODY + body_len
            if body_end + 3 + tl > pos + size:
                raise MessageIllegalError(f"record {count} of the batch has a bad layout")
            if buf[body_end] != tl or not buf.startswith(topic, body_end + 1):
                raise MessageIllegalError(
                    "every message of a batch must have the batch's topic "
                    f"{topic.decode(errors='replace')!r}"
                )
            (props_len,) = ushort(buf, body_end + 1 + tl)
            if props_len > MAX_PROPERTIES_LENGTH:
                raise PropertiesSizeExceededError(
                    f"message properties are {props_len} bytes; at most "
                    f"{MAX_PROPERTIES_LENGTH} are allowed"
                )
            if FIXED_SIZE + body_len + tl + props_len != size:
                raise MessageIllegalError(
                    f"record {count} of the batch: field lengths do not add up to its size"
                )
            if props_len and buf[pos + size - 1] != 2:
                raise MessageIllegalError(
                    f"record {count} of the batch: properties must be key\\x01value\\x02 pairs"
                )
            # RocketMQ's body CRC: CRC32 with the sign bit cleared (UtilAll.crc32).
            stamp_crc(buf, pos + 8, crc32(view[pos + POS_BODY : body_end]) & CRC_MASK, queue_id)
            if (sys_flag & 0xC) in _NO_QUEUE_OFFSET:
                stamp_offsets(buf, pos + 20, 0, base + pos)
            else:
                stamp_offsets(buf, pos + 20, qoff, base + pos)
                qoff += 1
            buf[pos + 56 : pos + 72] = store_stamp
            pos += size
            count += 1
        return count, qoff

    def _place(self, n: int) -> tuple[MappedFile | None, bool, int]:
        """Where ``n`` bytes appended now go: (the last segment, whether they start a new
        one, their physical offset), after what is held."""
        mf: MappedFile | None = self.files.last
        if mf is None:
            return None, True, 0
        used = mf.wrote_position + self._held_bytes
        if mf.is_full or n + END_FILE_MIN_BLANK_LENGTH > mf.file_size - used:
            return mf, True, mf.end_offset
        return mf, False, mf.file_from_offset + used

    def append(
        self, blob: bytes | bytearray | memoryview, topic: bytes, queue_id: int
    ) -> AppendResult:
        """Validate, stamp and write one batch (one topic, one queue) in one go.

        The batch is stamped in a private copy and written with one ``pwrite`` (while
        :attr:`holding`, with the other held batches by :meth:`write_held`): on Linux
        that shares the page cache with the mapping readers use, and it avoids a page
        fault per fresh page that copying into the mapping costs.
        """
        buf = bytearray(blob)
        n = len(buf)
        mf, roll, base = self._place(n)
        ts = self.clock_ms()
        key = (topic, queue_id)
        before = self.queue_table.get(key)
        first_qoff = before or 0
        count, qoff = self.stamp(buf, topic, queue_id, base, first_qoff, ts)
        if roll:
            self.write_held()  # what is held ends the segment, before its blank record
            mf = self._roll(mf, ts)
        assert mf is not None
        if self.holding:
            if key not in self._held_undo:
                self._held_undo[key] = before
            self._held.append(buf)
            self._held_bytes += n
            self._held_ts = ts
        else:
            mf.append_bytes(buf)
            mf.last_modified_ms = ts
            self.last_append = (base + n, ts)
        self.queue_table[key] = qoff
        return AppendResult(base, n, count, first_qoff, ts)

    def append_parts(
        self, parts: list[tuple[bytes, bytes, int]]
    ) -> list[AppendResult | MessageIllegalError]:
        """Validate, stamp and write several batches, each ``(records, topic, queue id)``,
        one after the other in one go (one copy, one ``pwrite``): what :meth:`append` does
        for each, at the cost of one. -> each part's result, or the error that refused
        it (a refused part takes no place: the others are stored without it)."""
        out: list[AppendResult | MessageIllegalError | None] = [None] * len(parts)
        live = list(range(len(parts)))
        while live:
            n = 0
            for i in live:
                n += len(parts[i][0])
            if n + END_FILE_MIN_BLANK_LENGTH > self.file_size:
                if len(live) == 1:  # append's error for a batch too large
                    i = live[0]
                    try:
                        out[i] = self.append(*parts[i])
                    except MessageIllegalError as exc:
                        out[i] = exc
                    return [r if r is not None else _NOT_STORED for r in out]
                # Too much for one segment: the first half, then the rest.
                half = len(live) // 2
                first = self.append_parts([parts[i] for i in live[:half]])
                rest = self.append_parts([parts[i] for i in live[half:]])
                for i, r in zip(live, first + rest, strict=True):
                    out[i] = r
                return [r if r is not None else _NOT_STORED for r in out]
            buf = bytearray().join([parts[i][0] for i in live])
            view = memoryview(buf)
            mf, roll, base = self._place(n)
            ts = self.clock_ms()
            store_stamp = STAMP_STORE.pack(ts, self.store_host)
            table = self.queue_table
            taken: list[tuple[QueueKey, int | None]] = []  # each queue's offset before
            stamped: list[tuple[int, AppendResult]] = []
            pos = 0
            refused = -1
            for i in live:
                records, topic, queue_id = parts[i]
                size = len(records)
                key = (topic, queue_id)
                before = table.get(key)
                first_qoff = before or 0
                try:
                    if size == 0:
                        raise MessageIllegalError("the batch is empty")
                    count, qoff = self.stamp_range(
                        buf, view, pos, pos + size, topic, queue_id, base, first_qoff, store_stamp
                    )
                except MessageIllegalError as exc:
                    out[i] = exc
                    refused = i
                    break
                taken.append((key, before))
                table[key] = qoff
                stamped.append((i, AppendResult(base + pos, size, count, first_qoff, ts)))
                pos += size
            view.release()
            if refused >= 0:
                # Give back the queue offsets the parts before it took, and stamp again
                # without it (its bytes would be a hole in the log).
                _give_back(table, taken)
                live.remove(refused)
                continue
            if roll:
                self.write_held()  # what is held ends the segment, before its blank record
                mf = self._roll(mf, ts)
            assert mf is not None
            if self.holding:
                held_undo = self._held_undo
                for key, before in taken:
                    if key not in held_undo:
                        held_undo[key] = before
                self._held.append(buf)
                self._held_bytes += n
                self._held_ts = ts
            else:
                try:
                    mf.append_bytes(buf)
                except BaseException:
                    _give_back(table, taken)
                    raise
                mf.last_modified_ms = ts
                self.last_append = (base + n, ts)
            for i, result in stamped:
                out[i] = result
            break
        return [r if r is not None else _NOT_STORED for r in out]

    @property
    def held_bytes(self) -> int:
        """Bytes of stamped batches not written yet (see :attr:`holding`)."""
        return self._held_bytes

    def write_held(self) -> int:
        """Write the held batches with one ``pwrite``. -> how many bytes. When the write
        fails, the batches are dropped, the queue offsets they took given back, and the
        error raised: nothing of them was stored."""
        if not self._held:
            return 0
        held, self._held = self._held, []
        n, self._held_bytes = self._held_bytes, 0
        undo, self._held_undo = self._held_undo, {}
        mf = self.files.last
        assert mf is not None
        try:
            mf.append_bytes(held[0] if len(held) == 1 else b"".join(held))
        except BaseException:
            _give_back(self.queue_table, undo.items())
            raise
        mf.last_modified_ms = self._held_ts
        self.last_append = (mf.wrote_offset, self._held_ts)
        return n

    def append_raw(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Write bytes copied from another CommitLog at ``offset``, our end: the other
        side's stamped records and segment-end blanks, byte for byte, so both logs are
        identical. An empty log may start at any segment boundary (the source's oldest
        segments may be gone)."""
        self.write_held()
        view = memoryview(data).cast("B")
        mf = self.files.last
        if mf is None:
            if offset % self.file_size:
                raise StoreCorruptError(
                    f"replication must start an empty CommitLog at a segment boundary, not "
                    f"at {offset}"
                )
        elif offset == mf.end_offset and offset > self.max_offset:
            # The source rolled to a new segment here: end ours with the same blank record.
            mf = self._roll(mf, self.clock_ms())
        elif offset != self.max_offset:
            raise StoreCorruptError(
                f"replicated bytes start at {offset} but this CommitLog ends at "
                f"{self.max_offset}; they must continue it"
            )
        pos = offset
        while view:
            if mf is None or mf.is_full:
                mf = self.files.create(pos - pos % self.file_size)
            part = view[: mf.file_size - mf.wrote_position]
            mf.append_bytes(part)
            mf.last_modified_ms = self.clock_ms()
            view = view[len(part) :]
            pos += len(part)
        self.last_append = (pos, self.clock_ms())

    def next_position_for(self, size: int) -> int:
        """Where a batch of ``size`` bytes appended now would start (a batch that does not
        fit the current segment starts the next one)."""
        return self._place(size)[2]

    def _roll(self, mf: MappedFile | None, ts: int) -> MappedFile:
        """END_OF_FILE: a blank record fills the rest of the segment; a new one starts."""
        if mf is None:
            return self.files.create(0)
        free = mf.file_size - mf.wrote_position
        if free:
            mf.append_bytes(BLANK.pack(free, BLANK_MAGIC_CODE), fill=True)
            mf.last_modified_ms = ts
        return self.files.create(mf.end_offset)

    # -- reading -------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def read(self, offset: int, size: int) -> memoryview | None:
        """The bytes [offset, offset + size) if they lie written in one segment."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if size <= 0 or pos + size > mf.wrote_position:
            return None
        return memoryview(mf.buf)[pos : pos + size]

    def record_size_at(self, offset: int) -> int:
        mf = self.files.find(offset)
        if mf is None:
            return 0
        pos = offset - mf.file_from_offset
        if pos + FIXED_SIZE > mf.wrote_position:
            return 0
        size, magic = SIZE_MAGIC.unpack_from(mf.buf, pos)
        return int(size) if magic == MESSAGE_MAGIC_CODE else 0

    def read_record(self, offset: int) -> memoryview | None:
        size = self.record_size_at(offset)
        return self.read(offset, size) if size else None

    def store_timestamp_at(self, offset: int) -> int:
        view = self.read(offset, FIXED_SIZE)
        if view is None:
            return -1
        return int(HEADER.unpack_from(view, 0)[11])

    def next_segment_offset(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size


def _give_back(table: dict[QueueKey, int], taken: Iterable[tuple[QueueKey, int | None]]) -> None:
    """Put back in ``table`` the queue offsets that were taken, each ``(queue, offset
    before)`` (None: the queue had no entry), in the order they were taken (the earliest
    is put back last, so it stays)."""
    for key, before in reversed(list(taken)):
        if before is None:
            table.pop(key, None)
        else:
            table[key] = before


def check_record(
    buf: mmap.mmap | bytes | memoryview,
    pos: int,
    limit: int,
    file_from_offset: int,
    *,
    check_crc: bool,
) -> RecordInfo | int:
    """Validate the record at ``pos`` of a segment: a RecordInfo, BLANK_RECORD (end of the
    segment) or BAD_RECORD (torn, corrupt or never written)."""
    if pos + 8 > limit:
        return BAD_RECORD
    size, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return BLANK_RECORD if pos + size == limit or size >= 8 else BAD_RECORD
    if magic != MESSAGE_MAGIC_CODE or size < FIXED_SIZE or pos + size > limit:
        return BAD_RECORD
    (
        _size,
        _magic,
        body_crc,
        queue_id,
        _flag,
        queue_offset,
        physical_offset,
        sys_flag,
        _born_ts,
        _born_ip,
        _born_port,
        store_ts,
        _store_ip,
        _store_port,
        _reconsume,
        _prepared,
        body_len,
    ) = HEADER.unpack_from(buf, pos)
    if physical_offset != file_from_offset + pos or body_len < 0:
        return BAD_RECORD
    tpos = pos + POS_BODY + body_len
    if tpos + 3 > pos + size:
        return BAD_RECORD
    tl = buf[tpos]
    ppos = tpos + 1 + tl
    if ppos + 2 > pos + size:
        return BAD_RECORD
    (props_len,) = USHORT.unpack_from(buf, ppos)
    if FIXED_SIZE + body_len + tl + props_len != size:
        return BAD_RECORD
    if check_crc and (zlib.crc32(buf[pos + POS_BODY : tpos]) ^ body_crc) & CRC_MASK:
        return BAD_RECORD
    topic = bytes(buf[tpos + 1 : ppos])
    props = bytes(buf[ppos + 2 : ppos + 2 + props_len])
    # The CRC covers the body only: a tail torn inside topic or properties shows as zeros
    # where a legal topic and "key\x01value\x02" pairs must be.
    if not TOPIC_BYTES.fullmatch(topic) or (props and (props[-1] != 2 or 0 in props)):
        return BAD_RECORD
    return RecordInfo(
        size, topic, queue_id, queue_offset, physical_offset, sys_flag, store_ts, props
    )
