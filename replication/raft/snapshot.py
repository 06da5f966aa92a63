"""Snapshots of a Raft member's store: how a member that lacks entries its leader no
longer holds (a wiped disk, or one down while retention ran) is rebuilt.

What a snapshot is. The leader's CommitLog from its min offset (a segment boundary) to the
end of its last committed entry, and the raft index units of the entries over it, as one
byte stream: a head (:data:`STREAM_HEAD`: the first entry's index, the term of the entry
before it, the CommitLog range, the unit count, the size of the group's configurations),
the units (the store module's 32-byte units), the group's configurations up to the last
entry (JSON, the membership module's documents: a membership change's entry holds no
CommitLog bytes, its data lives in the member history, so it travels here), then the
CommitLog bytes, byte for byte (records and segment-end blanks). The
ConsumeQueues and the index file are not sent: every record carries its topic, queue and
queue offset, so the follower's normal dispatch builds the same queues from the installed
CommitLog (an empty ConsumeQueue starts at the first queue offset it is given, as it does
for a slave that copies a master from its min offset). Sending them would add bytes and a
second format to keep in step for nothing the records do not say; the cost is the dispatch
of the installed bytes after the install, which runs in the background as after a crash.
Consumer offsets, topics and groups are not in the log: the member copies them from the
leader as every follower does (broker.slave_sync).

How it travels (:class:`~rocketq.replication.raft.node.SnapshotChunk`): chunks of
:data:`CHUNK_SIZE` (1 MiB), each with its CRC-32 and the SHA-256 chain over every chunk up
to it (``chain = sha256(previous chain + payload)``, starting from the snapshot id), so
each chunk and the whole are checked as they arrive; a chunk that does not check is
refused and sent again. The follower writes them to ``<dir>/stream`` and records after
each one (data fsynced first) how far it got and the chain there in ``<dir>/progress.json``:
after a lost link or a restart it tells the leader where it is and the leader goes on from
there when the chain is the one it sent (else it starts another snapshot). A leader keeps
its snapshot while its CommitLog still starts where the snapshot does, so followers share
it; a new leader makes its own, and a member that was half-way through another leader's
starts that one from the beginning.

Installing. Once every byte is in and checks, the member empties its store (CommitLog,
ConsumeQueues, index file) and raft index, writes the CommitLog bytes through the store's
replica path (``append_raw``, at the same offsets), fsyncs them, and makes its raft index
the snapshot's units after its base (the entry before the first). The node then commits up
to the snapshot's last entry, which lets dispatch build the queues.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocketq.common.file_modes import PRIVATE_FILE, private_dir
from rocketq.common.json_file import write_json_atomic
from rocketq.replication.raft.membership import MemberHistory, Members, MembershipError
from rocketq.replication.raft.node import SnapshotChunk, SnapshotError, SnapshotOffer
from rocketq.replication.raft.store import UNIT, UNIT_MAGIC, CommitLogRaftLog

log = logging.getLogger(__name__)

STREAM_MAGIC: Final = b"RQSN"
# magic, first index, base term, CommitLog start, CommitLog end, unit count, configs size
STREAM_HEAD: Final = struct.Struct(">4sqqqqqq")
MAX_CONFIGS: Final = 1024 * 1024  # bytes of configurations a snapshot may carry
CHUNK_SIZE: Final = 1024 * 1024
INSTALL_PIECE: Final = 4 * 1024 * 1024  # CommitLog bytes written to the store at once


def chain_start(snapshot_id: int) -> bytes:
    """The chain before a snapshot's first chunk: bound to its id."""
    return hashlib.sha256(STREAM_MAGIC + snapshot_id.to_bytes(8, "big")).digest()


def chain_next(chain: bytes, payload: bytes) -> bytes:
    return hashlib.sha256(chain + payload).digest()


@dataclass(frozen=True, slots=True)
class StreamHead:
    first_index: int
    base_term: int
    start: int
    end: int
    units: int
    configs: int = 0

    @property
    def prefix_size(self) -> int:
        return STREAM_HEAD.size + self.units * UNIT.size + self.configs

    @property
    def size(self) -> int:
        return self.prefix_size + self.end - self.start


def decode_head(data: bytes) -> StreamHead:
    """A snapshot stream's head; SnapshotError names what is wrong."""
    if len(data) < STREAM_HEAD.size:
        raise SnapshotError(f"a snapshot of {len(data)} bytes has no head")
    magic, first, base_term, start, end, units, configs = STREAM_HEAD.unpack_from(data)
    if magic != STREAM_MAGIC:
        raise SnapshotError(f"a snapshot stream starting {magic!r}, not {STREAM_MAGIC!r}")
    if (
        first < 1
        or base_term < 0
        or start < 0
        or end < start
        or units < 0
        or not 0 <= configs <= MAX_CONFIGS
    ):
        raise SnapshotError(
            f"a snapshot head with first index {first}, base term {base_term}, CommitLog "
            f"range [{start}, {end}), {units} units and {configs} bytes of configurations"
        )
    return StreamHead(first, base_term, start, end, units, configs)


def encode_configs(configs: list[tuple[int, int, Members]]) -> bytes:
    return json.dumps(
        {"configs": [{"index": i, "term": t, **m.to_doc()} for i, t, m in configs]}
    ).encode()


def decode_configs(
    head: StreamHead, data: bytes, last_index: int
) -> list[tuple[int, int, Members]]:
    """The group's configurations in a snapshot (after its units): indexes rising, none
    past the snapshot's last entry; SnapshotError names what is wrong."""
    at = STREAM_HEAD.size + head.units * UNIT.size
    raw = data[at : at + head.configs]
    if not head.configs:
        return []
    if len(raw) != head.configs:
        raise SnapshotError("a snapshot cut short in its configurations")
    out = []
    try:
        doc = json.loads(raw)
        last = 0
        for item in doc["configs"]:
            index, term = item["index"], item["term"]
            if type(index) is not int or type(term) is not int or not last < index <= last_index:
                raise ValueError(f"a configuration at index {index!r} (term {term!r})")
            if term < 0:
                raise ValueError(f"a configuration of term {term}")
            out.append((index, term, Members.from_doc(item)))
            last = index
    except (ValueError, KeyError, TypeError, AttributeError, MembershipError) as exc:
        raise SnapshotError(f"a snapshot's configurations are unreadable: {exc}") from None
    return out


def decode_units(
    head: StreamHead, data: bytes, last_index: int, last_term: int
) -> list[tuple[int, int, int]]:
    """The units after the head, checked against the head and the snapshot's last entry:
    one per entry from the first to the last, terms never falling, each entry's bytes
    after the one before and inside the CommitLog range."""
    if head.first_index + head.units - 1 != last_index:
        raise SnapshotError(
            f"a snapshot of {head.units} entries from {head.first_index} that does not end "
            f"at its last index {last_index}"
        )
    if len(data) < head.prefix_size:
        raise SnapshotError("a snapshot cut short in its units")
    units = []
    term, end = head.base_term, head.start
    for i in range(head.units):
        t, pos, size, magic = UNIT.unpack_from(data, STREAM_HEAD.size + i * UNIT.size)
        if magic != UNIT_MAGIC or t < term or size < 0 or pos < end or pos + size > head.end:
            raise SnapshotError(
                f"a snapshot's unit for entry {head.first_index + i} (term {t}, bytes "
                f"{pos}+{size}) does not follow the one before it"
            )
        units.append((t, pos, size))
        term, end = t, pos + size
    if term != last_term:
        raise SnapshotError(f"a snapshot whose last entry has term {term}, not {last_term}")
    return units


@dataclass(slots=True)
class _Source:
    """What a leader's offer is read from."""

    offer: SnapshotOffer
    head: StreamHead
    prefix: bytes
    chains: dict[int, bytes]


@dataclass(slots=True)
class _Progress:
    snapshot_id: int
    last_index: int
    last_term: int
    size: int
    received: int
    chain: bytes
    leader: str
    started: float

    def to_doc(self) -> dict[str, object]:
        return {
            "snapshot_id": self.snapshot_id,
            "last_index": self.last_index,
            "last_term": self.last_term,
            "size": self.size,
            "received": self.received,
            "chain": self.chain.hex(),
            "leader": self.leader,
        }


class CommitLogSnapshots:
    """Snapshots of a member's CommitLog and raft index (both sides), staged in ``dir``."""

    def __init__(
        self,
        raft_log: CommitLogRaftLog,
        directory: Path,
        *,
        chunk_size: int = CHUNK_SIZE,
        history: MemberHistory | None = None,
    ) -> None:
        """``history``: the member's group configurations (the node's), sent with a
        snapshot and replaced by an installed one's (None: a group of fixed members)."""
        self.log = raft_log
        self.history = history
        self.chunk_size = chunk_size
        self.store = raft_log.store
        self.dir = directory
        self._source: _Source | None = None
        self._progress = self._load_progress()
        # For metrics and the admin's view: bytes received in all, snapshots installed.
        self.bytes_received = 0
        self.installed = 0

    # -- leader side -------------------------------------------------------------------

    def offer(self, commit_index: int) -> SnapshotOffer | None:
        src = self._source
        min_offset = self.store.commitlog.min_offset
        if src is not None and src.head.start == min_offset:
            return src.offer
        self._source = None
        log_ = self.log
        first = log_.first_index()
        last = min(commit_index, log_.last_index())
        if last < first:
            return None  # nothing committed past the compaction point yet
        start = max(min_offset, 0)
        end = log_.end_of(last)
        if end <= start:
            return None
        units = [log_.index.units[i - log_.index.base - 1] for i in range(first, last + 1)]
        history = self.history
        configs = encode_configs(
            [c for c in history.configs if c[0] <= last] if history is not None else []
        )
        head = StreamHead(first, log_.term_at(first - 1), start, end, len(units), len(configs))
        prefix = STREAM_HEAD.pack(
            STREAM_MAGIC, first, head.base_term, start, end, len(units), len(configs)
        )
        prefix += b"".join(UNIT.pack(t, p, s, UNIT_MAGIC) for t, p, s in units)
        prefix += configs
        snap_id = secrets.randbits(64)
        offer = SnapshotOffer(snap_id, last, log_.term_at(last), head.size, self.chunk_size)
        self._source = _Source(offer, head, prefix, {0: chain_start(snap_id)})
        return offer

    def _read(self, src: _Source, offset: int, size: int) -> bytes:
        out = bytearray()
        if offset < len(src.prefix):
            out += src.prefix[offset : offset + size]
        pos = src.head.start + max(0, offset - len(src.prefix))
        want = offset + size - max(offset, len(src.prefix))
        commitlog = self.store.commitlog
        while want > 0:
            in_segment = commitlog.file_size - pos % commitlog.file_size
            n = min(want, in_segment)
            view = commitlog.read(pos, n)
            if view is None:
                raise SnapshotError(f"CommitLog bytes {pos}+{n} are gone (retention ran)")
            try:
                out += view
            finally:
                view.release()
            pos += n
            want -= n
        return bytes(out)

    def chunk(self, offer: SnapshotOffer, offset: int) -> SnapshotChunk:
        src = self._source
        if src is None or src.offer.snapshot_id != offer.snapshot_id:
            raise SnapshotError(f"snapshot {offer.snapshot_id:016x} is no longer offered")
        if src.head.start != self.store.commitlog.min_offset:
            raise SnapshotError("retention deleted CommitLog segments the snapshot covers")
        known = max(k for k in src.chains if k <= offset)
        chain = src.chains[known]
        while known < offset:  # (chunks are read in order; this is the rare catch-up)
            payload = self._read(src, known, min(offer.chunk_size, offer.size - known))
            chain = chain_next(chain, payload)
            known += len(payload)
            src.chains[known] = chain
        payload = self._read(src, offset, min(offer.chunk_size, offer.size - offset))
        chain = chain_next(chain, payload)
        src.chains[offset + len(payload)] = chain
        return SnapshotChunk(
            0,
            "",
            offer.snapshot_id,
            offer.last_index,
            offer.last_term,
            offer.size,
            offset,
            payload,
            zlib.crc32(payload),
            chain,
        )

    def chain_at(self, offer: SnapshotOffer, offset: int) -> bytes | None:
        src = self._source
        if src is None or src.offer.snapshot_id != offer.snapshot_id:
            return None
        return src.chains.get(offset)

    # -- follower side -----------------------------------------------------------------

    @property
    def _stream(self) -> Path:
        return self.dir / "stream"

    @property
    def _progress_path(self) -> Path:
        return self.dir / "progress.json"

    def _load_progress(self) -> _Progress | None:
        """A snapshot half received before a restart; anything unreadable is dropped (the
        leader sends the snapshot again)."""
        try:
            doc = json.loads(self._progress_path.read_text())
            p = _Progress(
                int(doc["snapshot_id"]),
                int(doc["last_index"]),
                int(doc["last_term"]),
                int(doc["size"]),
                int(doc["received"]),
                bytes.fromhex(doc["chain"]),
                str(doc["leader"]),
                time.monotonic(),
            )
            if self._stream.stat().st_size < p.received or len(p.chain) != 32:
                raise ValueError("the stream is shorter than recorded")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("dropping a partly received snapshot in %s: %s", self.dir, exc)
            shutil.rmtree(self.dir, ignore_errors=True)
            return None
        log.info(
            "a snapshot from %s is partly received (%d of %d bytes): rebuilding goes on from there",
            p.leader,
            p.received,
            p.size,
        )
        return p

    def receiving(self) -> bool:
        return self._progress is not None

    def progress(self) -> tuple[int, int]:
        """(bytes received, bytes in all) of the snapshot being received; (0, 0): none."""
        p = self._progress
        return (p.received, p.size) if p is not None else (0, 0)

    def abandon(self) -> None:
        if self._progress is not None:
            log.info("dropping the partly received snapshot: the leader sends entries")
        self._progress = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def accept(self, chunk: SnapshotChunk) -> tuple[int, bytes, int]:
        p = self._progress
        if p is None or p.snapshot_id != chunk.snapshot_id:
            if chunk.offset != 0:
                return 0, b"", 0  # another snapshot, or none: from its beginning
            p = self._begin(chunk)
        if (chunk.last_index, chunk.last_term, chunk.size) != (p.last_index, p.last_term, p.size):
            raise SnapshotError(
                "a chunk whose last index, term or size differs from its snapshot's"
            )
        if p.received == p.size:  # all in, the install failed (a full disk): again
            return p.received, p.chain, self._install(p)
        if chunk.offset != p.received:
            return p.received, p.chain, 0  # where it goes on
        if zlib.crc32(chunk.payload) != chunk.crc:
            raise SnapshotError("its CRC-32 does not match its bytes")
        chain = chain_next(p.chain, chunk.payload)
        if chain != chunk.chain:
            raise SnapshotError("its chain digest does not match the chunks before it")
        if chunk.offset + len(chunk.payload) > p.size or (
            not chunk.payload and p.received < p.size
        ):
            raise SnapshotError("it runs past its snapshot's size (or is empty)")
        fd = os.open(self._stream, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE)
        try:
            os.pwrite(fd, chunk.payload, chunk.offset)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        p.received += len(chunk.payload)
        p.chain = chain
        self.bytes_received += len(chunk.payload)
        write_json_atomic(self._progress_path, p.to_doc())
        if p.received < p.size:
            return p.received, p.chain, 0
        installed = self._install(p)
        return p.received, p.chain, installed

    def _begin(self, chunk: SnapshotChunk) -> _Progress:
        if self._progress is not None:
            log.info(
                "dropping snapshot %016x (%d of %d bytes): %s sends another",
                self._progress.snapshot_id,
                self._progress.received,
                self._progress.size,
                chunk.leader,
            )
        shutil.rmtree(self.dir, ignore_errors=True)
        private_dir(self.dir)
        p = _Progress(
            chunk.snapshot_id,
            chunk.last_index,
            chunk.last_term,
            chunk.size,
            0,
            chain_start(chunk.snapshot_id),
            chunk.leader,
            time.monotonic(),
        )
        self._progress = p
        write_json_atomic(self._progress_path, p.to_doc())
        log.info(
            "rebuilding from %s: receiving snapshot %016x (entries up to %d, %d bytes)",
            chunk.leader,
            chunk.snapshot_id,
            chunk.last_index,
            chunk.size,
        )
        return p

    def _install(self, p: _Progress) -> int:
        """Replace the store and raft index with the snapshot; -> its last index."""
        with self._stream.open("rb") as f:
            try:
                head = decode_head(f.read(STREAM_HEAD.size))
                if head.size != p.size:
                    raise SnapshotError(f"a snapshot of {p.size} bytes whose head says {head.size}")
                f.seek(0)
                prefix = f.read(head.prefix_size)
                units = decode_units(head, prefix, p.last_index, p.last_term)
                configs = decode_configs(head, prefix, p.last_index)
            except SnapshotError:
                self.abandon()  # checked bytes that do not make a snapshot: never again
                raise
            store = self.store
            if head.start % store.commitlog.file_size:
                self.abandon()
                raise SnapshotError(
                    f"the leader's CommitLog starts at {head.start}, not a boundary of this "
                    f"member's {store.commitlog.file_size}-byte segments: the members' "
                    "mapped_file_size_commit_log must match"
                )
            self._empty_store()
            pos = head.start
            while pos < head.end:
                piece = f.read(min(INSTALL_PIECE, head.end - pos))
                if not piece:
                    raise SnapshotError("the snapshot stream ends early")
                store.append_raw(pos, piece, wake_dispatch=False)
                pos += len(piece)
        store.commitlog.files.flush()
        if store.dispatcher.reput_offset < head.start:
            store.dispatcher.reset(head.start)
        self.log.install(head.first_index - 1, head.base_term, head.start, units)
        history = self.history
        if history is not None:  # the group's configurations up to the snapshot
            history.truncate_after(0)
            for index, term, members in configs:
                history.record(index, term, members)
        seconds = time.monotonic() - p.started
        log.info(
            "rebuilt from %s: installed snapshot %016x (entries %d-%d, CommitLog [%d, %d), "
            "%d bytes) in %.1f s",
            p.leader,
            p.snapshot_id,
            head.first_index,
            p.last_index,
            head.start,
            head.end,
            p.size,
            seconds,
        )
        self.installed += 1
        self._progress = None
        shutil.rmtree(self.dir, ignore_errors=True)
        return p.last_index

    def _empty_store(self) -> None:
        """Forget everything the store holds (a member behind the leader's compaction
        point): CommitLog, ConsumeQueues and index, as a wiped disk would."""
        store = self.store
        if store.commitlog.files.files:
            store.truncate_to(store.commitlog.min_offset)
        queues = store.queues
        with store.logics_flusher.lock:
            store.commitlog.files.truncate_dirty(max(store.commitlog.min_offset, 0))
            for cq in list(queues.queues.values()):
                with contextlib.suppress(OSError):
                    cq.destroy()
            queues.queues.clear()
        store.commitlog.queue_table.clear()
