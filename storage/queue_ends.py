"""The queue ends file: where every ConsumeQueue ended when the store last stopped cleanly.

Finding a queue's end means listing its directory, opening its last files and searching
them for where the entries stop (storage.consume_queue); with tens of thousands of queues
that was most of a start. So a clean stop, once every queue is flushed, writes one
file next to the checkpoint, ``<root>/queue_ends``: for each queue its first file, how
many files it has, where its entries end, its min offset and the end of the newest
CommitLog record it indexes; and what it was written for: the ConsumeQueue file size, the
CommitLog's min and max offsets and the dispatched offset. A CRC32 covers the whole. It is
written to a temporary file, fsynced and renamed, so it is there whole or not at all.

A start that finds no abort file, and this file whole and written for the store it finds
(the checkpoint's clean-stop offsets, the CommitLog's min offset, the file size), takes
each queue's end from it: that queue's directory is not listed and its files are mapped
when first used. Any other start searches every queue, as before: after a crash the file
is ignored, a damaged or stale one gets a warning naming it. It is removed once read, so
only the stop that wrote it vouches for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from rocketq.common.config import StoreConfig
from rocketq.common.file_modes import PRIVATE_FILE
from rocketq.storage.checkpoint import Checkpoint, fsync_dir
from rocketq.storage.commitlog import CommitLog, QueueKey

log = logging.getLogger(__name__)

FILE_NAME: Final = "queue_ends"
_MAGIC: Final = b"RQQE"
_VERSION: Final = 1
# magic, version, ConsumeQueue file size, CommitLog min and max offsets, dispatched offset,
# number of queues.
_HEADER: Final = struct.Struct(">4sIqqqqI")
# Per queue, after a byte of topic length and the topic: queue id, first file's offset,
# number of files, end offset, min logic offset, max physic offset.
_ENTRY: Final = struct.Struct(">iqiqqq")
_CRC: Final = struct.Struct(">I")


class QueueEnd(NamedTuple):
    """One queue at a clean stop (offsets in bytes, as the files are named)."""

    first_offset: int  # the first file's start; -1 when the queue has no file
    files: int
    end_offset: int  # where its entries end: max offset x 20
    min_logic_offset: int
    max_physic_offset: int  # end of the newest CommitLog record it indexes; -1: none


@dataclass(frozen=True, slots=True)
class StoreEnds:
    """What a queue ends file was written for: it vouches for that store only."""

    file_size: int
    commit_log_min: int
    commit_log_max: int
    dispatched: int


class QueueEndsError(ValueError):
    """The file is not a whole queue ends file of this version."""


def encode(stamp: StoreEnds, queues: Iterable[tuple[QueueKey, QueueEnd]]) -> bytes:
    parts = [b""]
    pack = _ENTRY.pack
    count = 0
    for (topic, queue_id), end in queues:
        if len(topic) > 255:
            continue  # not a topic the store takes (127 bytes at most): searched at start
        parts.append(bytes((len(topic),)) + topic + pack(queue_id, *end))
        count += 1
    parts[0] = _HEADER.pack(
        _MAGIC,
        _VERSION,
        stamp.file_size,
        stamp.commit_log_min,
        stamp.commit_log_max,
        stamp.dispatched,
        count,
    )
    body = b"".join(parts)
    return body + _CRC.pack(zlib.crc32(body))


def decode(data: bytes) -> tuple[StoreEnds, dict[QueueKey, QueueEnd]]:
    if len(data) < _HEADER.size + _CRC.size:
        raise QueueEndsError(f"{len(data)} bytes, shorter than a header")
    body = memoryview(data)[: -_CRC.size]
    (crc,) = _CRC.unpack_from(data, len(body))
    if zlib.crc32(body) != crc:
        raise QueueEndsError("the checksum does not match")
    magic, version, file_size, clog_min, clog_max, dispatched, count = _HEADER.unpack_from(body)
    if magic != _MAGIC or version != _VERSION:
        raise QueueEndsError(f"not a version {_VERSION} queue ends file")
    queues: dict[QueueKey, QueueEnd] = {}
    unpack = _ENTRY.unpack_from
    size = _ENTRY.size
    pos = _HEADER.size
    try:
        for _ in range(count):
            n = body[pos]
            topic = bytes(body[pos + 1 : pos + 1 + n])
            pos += 1 + n
            queue_id, *end = unpack(body, pos)
            pos += size
            queues[(topic, queue_id)] = QueueEnd(*end)
    except (IndexError, struct.error) as exc:
        raise QueueEndsError(f"cut short within its {count} queues") from exc
    if pos != len(body):
        raise QueueEndsError(f"{len(body) - pos} bytes past its {count} queues")
    return StoreEnds(file_size, clog_min, clog_max, dispatched), queues


class QueueEndsFile:
    """``<root>/queue_ends`` of one store (next to its checkpoint)."""

    def __init__(self, config: StoreConfig) -> None:
        self.path = Path(config.checkpoint_path).with_name(FILE_NAME)
        self.file_size = config.mapped_file_size_consume_queue

    def save(
        self, queues: Iterable[tuple[QueueKey, QueueEnd]], commitlog: CommitLog, dispatched: int
    ) -> None:
        """Record every queue's end (at a clean stop, after the queues are flushed), for
        ``commitlog`` as it is and ``dispatched``, the dispatcher's offset. A failure is
        logged, not raised: the next start then searches, as after a crash."""
        if commitlog.min_offset < 0:
            return  # no CommitLog: the next start drops every queue (storage.recovery)
        stamp = StoreEnds(self.file_size, commitlog.min_offset, commitlog.max_offset, dispatched)
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            data = encode(stamp, queues)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
        except OSError as exc:
            log.warning(
                "cannot write %s (%s): the next start searches every consume queue's end",
                self.path,
                exc,
            )
            for path in (tmp, self.path):
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)

    def take(
        self, cp: Checkpoint, commit_log_min: int, *, clean: bool
    ) -> dict[QueueKey, QueueEnd] | None:
        """The recorded ends if the store stopped cleanly (``clean``: no abort file) and the
        file was written for it (``cp``: the checkpoint read at this start); else None,
        and every queue is searched. The file is removed either way (the caller makes that
        durable with the abort file's directory)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            if clean and cp.clean_max_phy_offset >= 0:
                log.warning(
                    "no %s after a clean stop (an older rocketq stopped the store, or the "
                    "file was removed): searching every consume queue's end",
                    self.path,
                )
            return None
        except OSError as exc:
            log.warning("cannot read %s (%s): searching every consume queue's end", self.path, exc)
            data = None
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning(
                "cannot remove %s (%s): searching every consume queue's end", self.path, exc
            )
            return None
        if data is None:
            return None
        if not clean:
            log.info("ignoring %s: the store did not stop cleanly", self.path)
            return None
        try:
            stamp, queues = decode(data)
        except QueueEndsError as exc:
            log.warning(
                "ignoring %s, damaged: %s; searching every consume queue's end", self.path, exc
            )
            return None
        found = StoreEnds(
            self.file_size, commit_log_min, cp.clean_max_phy_offset, cp.clean_dispatched_offset
        )
        if stamp != found:
            log.warning(
                "ignoring %s, stale: written for %s, the store has %s; searching every "
                "consume queue's end",
                self.path,
                stamp,
                found,
            )
            return None
        return queues
