"""The dispatcher ("reput"): follows the CommitLog up to the committed offset and builds
ConsumeQueue and IndexFile entries, then tells arrival listeners (long polling).

The committed offset is the caller's: without replication it moves with every append;
with replication it moves only when the record is safe, so a consumer never sees an
entry that could be rolled back. Re-dispatching a range (recovery) is harmless: queues
and the index skip what they already hold.
"""

from __future__ import annotations

import gc
import logging
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import ServiceNotAvailableError
from rocketq.common.record import (
    BLANK_MAGIC_CODE,
    FIXED_SIZE,
    MESSAGE_MAGIC_CODE,
    POS_BODY,
    USHORT,
    tags_hash_code,
)
from rocketq.storage.commitlog import TOPIC_BYTES, CommitLog, QueueKey
from rocketq.storage.consume_queue import ConsumeQueue, CQEntry
from rocketq.storage.index_file import IndexService
from rocketq.storage.mapped_file import HAS_SYNCFS, syncfs
from rocketq.storage.queue_ends import QueueEnd

log = logging.getLogger(__name__)

# size, magic, queue id, queue offset, sys flag, store timestamp, body length.
_DISPATCH: Final = struct.Struct(">iI4xi4xq8xi16xq8x4x8xi")
# How many checked topic names dispatch remembers (a broker has at most thousands).
GOOD_TOPICS_KEPT: Final = 100_000
assert _DISPATCH.size == POS_BODY

TagsCodeFn = Callable[[bytes, bytes, int], int]
"""(topic, encoded properties, store timestamp) -> the ConsumeQueue's tag code, for topics
whose code is not the tags' hash (a delay topic keeps the delivery time there)."""
# A thorough flush of at least this many queues is one syncfs (ConsumeQueueTable._sync_all).
# Not Final: a compiled build would inline it, and the tests lower it.
SYNCFS_MIN_QUEUES = 256
ArrivalListener = Callable[[bytes, int, int, int], None]
"""(topic, queue id, next queue offset, tag code), called after a batch of dispatch."""


def property_value(props: bytes, name: bytes) -> bytes | None:
    """One property's value straight from ``key\\x01value\\x02`` pairs."""
    at = props.find(name)
    while at >= 0:
        end_name = at + len(name)
        if (at == 0 or props[at - 1] == 2) and props[end_name : end_name + 1] == b"\x01":
            end = props.find(b"\x02", end_name + 1)
            return props[end_name + 1 : end if end >= 0 else len(props)]
        at = props.find(name, at + 1)
    return None


class TagsCodeCache:
    """Java's hashCode of a TAGS value, as the ConsumeQueue's tag code, cached per tag."""

    def __init__(self) -> None:
        self.codes: dict[bytes, int] = {}

    def __call__(self, tags: bytes) -> int:
        code = tags_hash_code(tags.decode(errors="replace"))
        if len(self.codes) < 65536:
            self.codes[tags] = code
        return code


class ConsumeQueueTable:
    """Every ConsumeQueue of the store, keyed by (topic bytes, queue id), the ones with
    unflushed entries and the ones due for a flush. RocketMQ's FlushConsumeQueueService
    walks every queue each round; with tens of thousands of queues that walk costs more
    than the writes (and here it holds the GIL the event loop needs), so the writes say
    what is dirty and due, a round flushes only those due, and a thorough round of many
    is one ``syncfs``."""

    def __init__(self, directory: Path, file_size: int, flush_least_pages: int = 2) -> None:
        self.directory = directory
        self.file_size = file_size
        self.queues: dict[QueueKey, ConsumeQueue] = {}
        self.flush_least_pages = flush_least_pages
        # Every queue with unflushed entries -> a CommitLog offset at or below its first
        # unflushed entry; and the queues a write found due for a flush.
        self._dirty: dict[ConsumeQueue, int] = {}
        self._due: set[ConsumeQueue] = set()
        self._dirty_lock = threading.Lock()
        # Queues are made by the dispatcher and by the preparing thread (see prepare).
        self._table_lock = threading.Lock()
        self._preparer: ThreadPoolExecutor | None = None
        # Queues handed to the preparing thread, and those it finished (each counter has
        # one writer: the caller's thread, the preparing thread).
        self._prepare_asked = 0
        self._prepare_done = 0

    def load(
        self,
        durable_below: int | None = None,
        ends: dict[QueueKey, QueueEnd] | None = None,
        commit_log_min_offset: int = 0,
    ) -> None:
        """Find every queue directory and load its queue: from ``ends`` (what a clean stop
        recorded, storage.queue_ends) when it is there, else by searching its files for
        its end (see ConsumeQueue.load for ``durable_below`` and the min offset).

        The collector is paused meanwhile: every object made here lives as long as the
        store, and its passes over the growing table cost as much as building it."""
        paused = gc.isenabled()
        gc.disable()
        try:
            self._load(durable_below, ends, commit_log_min_offset)
        finally:
            if paused:
                gc.enable()

    def _load(
        self,
        durable_below: int | None,
        ends: dict[QueueKey, QueueEnd] | None,
        commit_log_min_offset: int,
    ) -> None:
        try:
            with os.scandir(self.directory) as it:
                topics = sorted(entry.name for entry in it if entry.is_dir())
        except FileNotFoundError:
            return
        restored = searched = 0
        root = os.fspath(self.directory)
        for topic in topics:
            topic_dir = os.path.join(root, topic)  # strings: no Path per queue
            with os.scandir(topic_dir) as it:
                names = sorted(entry.name for entry in it)
            raw = topic.encode()
            for name in names:
                if not name.isdigit():
                    log.warning(
                        "ignoring %s: queue directories are numbers", os.path.join(topic_dir, name)
                    )
                    continue
                key = (raw, int(name))
                cq = ConsumeQueue(
                    topic,
                    key[1],
                    os.path.join(topic_dir, name),
                    self.file_size,
                    on_dirty=self.mark_dirty,
                    flush_least_pages=self.flush_least_pages,
                )
                end = ends.get(key) if ends is not None else None
                if end is not None and cq.restore(end, commit_log_min_offset):
                    restored += 1
                else:
                    searched += 1
                    cq.load(durable_below, commit_log_min_offset)
                self.queues[key] = cq
        if ends is not None:
            log.info(
                "%d consume queues took their end from the clean stop's record%s",
                restored,
                f"; {searched} not recorded there (or not fitting it) were searched"
                if searched
                else "",
            )

    def ends(self) -> list[tuple[QueueKey, QueueEnd]]:
        """Every queue's end, for the record a clean stop writes (storage.queue_ends)."""
        return [(key, cq.end_record()) for key, cq in self.queues.items()]

    def get(self, topic: bytes, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: bytes, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None:
            with self._table_lock:
                cq = self.queues.get(key)
                if cq is None:
                    name = topic.decode()
                    cq = ConsumeQueue(
                        name,
                        queue_id,
                        self.directory / name / str(queue_id),
                        self.file_size,
                        on_dirty=self.mark_dirty,
                        flush_least_pages=self.flush_least_pages,
                    )
                    self.queues[key] = cq
        return cq

    def prepare(self, keys: Iterable[QueueKey]) -> None:
        """Create the directories and first files of new queues on a thread, ahead of their
        first entries. Creating them costs ~100 us apiece (two directories and a file on
        ext4); a broker given thousands of new queues would otherwise spend seconds of
        its event loop on it in the middle of dispatch. A queue written before its turn
        here creates its file itself, as before."""
        keys = list(keys)
        if not keys:
            return
        if self._preparer is None:
            self._preparer = ThreadPoolExecutor(1, thread_name_prefix="cq-prepare")
        self._prepare_asked += len(keys)
        self._preparer.submit(self._prepare, keys)

    @property
    def preparing(self) -> int:
        """Queues whose files the preparing thread has still to make."""
        return self._prepare_asked - self._prepare_done

    def _prepare(self, keys: list[QueueKey]) -> None:
        for topic, queue_id in keys:
            try:
                self.get_or_create(topic, queue_id).prepare()
            except (OSError, ServiceNotAvailableError) as exc:  # a full disk: writes say so
                log.warning("cannot prepare consume queue %r-%d: %s", topic, queue_id, exc)
            finally:
                self._prepare_done += 1

    def mark_dirty(self, cq: ConsumeQueue, since: int, due: bool) -> None:
        """A write left entries of ``cq`` unflushed, the first at or past CommitLog offset
        ``since``; ``due``: the queue has enough dirty pages to be flushed (the writer's
        thread, after the write). Lock-free when it is already marked: the flush thread
        swaps the table out before it looks at any queue's positions, so it sees every
        write made before a queue was found marked."""
        if cq not in self._dirty:
            with self._dirty_lock:
                self._dirty.setdefault(cq, since)
        if due and cq not in self._due:
            with self._dirty_lock:
                self._due.add(cq)

    @property
    def dirty_count(self) -> int:
        return len(self._dirty)

    def cut(self, offset: int) -> None:
        """The CommitLog was cut back to ``offset``: entries written from now on point
        below what the dirty queues recorded, so none may claim more than ``offset``."""
        with self._dirty_lock:
            for cq, since in self._dirty.items():
                if since > offset:
                    self._dirty[cq] = offset

    def flush(self, least_pages: int = 0, built_offset: int = 0) -> int:
        """Flush the queues due (``least_pages`` dirty pages in the last file, or a full
        file: the writes said so); every dirty one with ``least_pages`` <= 0 (a thorough
        flush). Runs on the flush thread; costs O(queues flushed), plus one pass over the
        dirty table in C for the durable offset.

        ``built_offset`` is the dispatcher's offset read before this call: every entry for
        a record below it was written. Returns the CommitLog offset below which every
        entry is on disk: ``built_offset``, or the oldest unflushed entry of a queue still
        dirty, whichever is lower.
        """
        with self._dirty_lock:
            batch, self._dirty = self._dirty, {}
            due, self._due = self._due, set()
        flushed: list[ConsumeQueue] = []
        try:
            if least_pages <= 0:
                flushed = [*batch, *(cq for cq in due if cq not in batch)]
                if len(flushed) >= SYNCFS_MIN_QUEUES and HAS_SYNCFS:
                    self._sync_all(flushed)
                else:
                    for cq in flushed:
                        cq.flush()
            else:
                flushed = list(due)
                for cq in flushed:
                    cq.flush()
        except BaseException:
            with self._dirty_lock:
                for cq, since in batch.items():
                    self._dirty[cq] = min(since, self._dirty.get(cq, since))
                self._due.update(due)
            raise
        for cq in flushed:
            # Written again while it was flushed: dirty from the first entry left.
            first = cq.first_unflushed_offset()
            if first is None:
                batch.pop(cq, None)
            else:
                batch[cq] = first
        with self._dirty_lock:
            for cq, since in self._dirty.items():  # marked since the swap: later offsets
                batch.setdefault(cq, since)
            self._dirty = batch
        return min(built_offset, min(batch.values(), default=built_offset))

    def _sync_all(self, batch: list[ConsumeQueue]) -> None:
        """Flush every file of ``batch`` with one ``syncfs`` of their file system: an
        ``msync`` per file costs a journal commit and a device cache flush each (tens of
        thousands of queues took seconds), one pass costs one. Only what was written
        before it began is claimed flushed."""
        targets = [
            (mf, mf.wrote_position)
            for cq in batch
            for mf in list(cq.files.files)
            if mf.flushed_position < mf.wrote_position
        ]
        syncfs(self.directory)
        for mf, target in targets:
            mf.mark_flushed(target)

    def stop_preparing(self) -> None:
        """Stop the preparing thread (before the queues are flushed and recorded at a
        stop: a file it made after that would be in neither)."""
        if self._preparer is not None:
            self._preparer.shutdown(wait=True, cancel_futures=True)
            self._preparer = None

    def close(self) -> None:
        self.stop_preparing()
        for cq in list(self.queues.values()):
            cq.close()


class Dispatcher:
    def __init__(
        self,
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        tags_code_overrides: dict[bytes, TagsCodeFn] | None = None,
    ) -> None:
        self.commitlog = commitlog
        self.queues = queues
        # Time spent in run() and the records it dispatched (`rocketq bench store`).
        self.busy_ns = 0
        self.dispatched = 0
        self.index = index
        self.tags_code_overrides = tags_code_overrides or {}
        self.tag_codes = TagsCodeCache()
        # Topic names dispatch has checked already (records of many topics interleave).
        self.good_topics: set[bytes] = set()
        self.listeners: list[ArrivalListener] = []
        # Listeners that can say they wait for nothing (held pulls: none held) -> how; a
        # run calls them only when they wait for something.
        self.listener_idle: dict[ArrivalListener, Callable[[], bool]] = {}
        # Listeners of one topic's arrivals only (the timer's and the delay levels'), by
        # topic: a run over many topics calls them only for theirs.
        self.topic_listeners: dict[bytes, list[ArrivalListener]] = {}
        self.reput_offset = 0
        self.committed_offset = 0
        # (offset, store timestamp) of the newest dispatched record, for the checkpoint.
        self.last_dispatched: tuple[int, int] = (0, 0)
        # (offset, store timestamp): every record below the offset has its ConsumeQueue
        # entry and index keys written (set after the writes; the flush thread reads it).
        self.built: tuple[int, int] = (0, 0)

    def reset(self, offset: int) -> None:
        """Dispatch from ``offset`` on (recovery, a replica cut back)."""
        self.reput_offset = offset
        self.built = (offset, self.built[1])

    @property
    def behind(self) -> int:
        return self.committed_offset - self.reput_offset

    def run(self, max_records: int = 4096) -> int:
        """Dispatch up to ``max_records`` records below the committed offset. When an
        entry cannot be written (no space for a ConsumeQueue or index file) the error is
        raised and the run's start is kept: the next run writes what is missing (entries
        already there are skipped)."""
        start = self.reput_offset
        try:
            return self._run(max_records)
        except BaseException:
            self.reput_offset = start
            raise

    def _run(self, max_records: int) -> int:
        started = time.perf_counter_ns()
        done = 0
        cq_entries: list[tuple[ConsumeQueue, bytes, int, list[CQEntry]]] = []
        keys: list[tuple[bytes, bytes, int, int]] | None = [] if self.index else None
        files = self.commitlog.files
        while done < max_records and self.reput_offset < self.committed_offset:
            mf = files.find(self.reput_offset)
            if mf is None:
                if self.reput_offset < files.min_offset:
                    log.warning(
                        "dispatch behind too much: %d is below the CommitLog min offset %d",
                        self.reput_offset,
                        files.min_offset,
                    )
                    self.reput_offset = files.min_offset
                    continue
                break
            base = mf.file_from_offset
            limit = min(mf.wrote_position, self.committed_offset - base)
            done, pos, end_of_file = self._run_segment(
                mf.buf, base, self.reput_offset - base, limit, done, max_records, cq_entries, keys
            )
            self.reput_offset = mf.end_offset if end_of_file else base + pos
            if not end_of_file:
                break  # the committed bytes end, or a record's rest is still to come
        # Each queue written that someone listens to -> its last run of entries in
        # cq_entries (keyed by the queue itself: no key to build per queue when every
        # record is another topic's). With no pull held and no topic of a topic listener
        # (the timer's, the delay levels') in the run, that is no queue at all.
        listeners = self._waiting_listeners()
        by_topic = self.topic_listeners
        arrivals: dict[ConsumeQueue, int] = {}
        for i in range(len(cq_entries)):
            cq, topic, _qid, entries = cq_entries[i]
            if cq.put_many(entries) and (listeners or topic in by_topic):
                arrivals[cq] = i
        if keys:
            assert self.index is not None
            self.index.build_many(keys)  # one pass for the run, in CommitLog order
        self.built = (self.reput_offset, self.last_dispatched[1])
        for i in arrivals.values():
            _cq, topic, qid, entries = cq_entries[i]
            _, _, code, queue_offset = entries[-1]
            next_offset = queue_offset + 1
            for listener in listeners:
                listener(topic, qid, next_offset, code)
            if topic in by_topic:
                for listener in by_topic[topic]:
                    listener(topic, qid, next_offset, code)
        self.busy_ns += time.perf_counter_ns() - started
        self.dispatched += done
        return done

    def _waiting_listeners(self) -> list[ArrivalListener]:
        """The arrival listeners (of every topic) not idle now."""
        idle = self.listener_idle
        if not idle:
            return self.listeners
        out: list[ArrivalListener] = []
        for listener in self.listeners:
            check = idle.get(listener)
            if check is None or not check():
                out.append(listener)
        return out

    def _run_segment(
        self,
        buf: mmap.mmap,
        base: int,
        pos: int,
        limit: int,
        done: int,
        max_records: int,
        cq_entries: list[tuple[ConsumeQueue, bytes, int, list[CQEntry]]],
        index_keys: list[tuple[bytes, bytes, int, int]] | None,
    ) -> tuple[int, int, bool]:
        """-> (records done, position reached, whether the segment's end was reached).
        The ConsumeQueue entries of the records go to ``cq_entries`` (one list per run of
        records of one queue) and their index keys to ``index_keys``; the caller writes
        them. A record cut by ``limit`` (a replica got part of it) waits there for its
        rest; one whose lengths or topic are not a record's ends the segment's dispatch,
        as a missing record does (a segment damaged on disk, or bytes a replica was sent)."""
        unpack = _DISPATCH.unpack_from
        ushort = USHORT.unpack_from
        queues = self.queues.queues
        get_or_create = self.queues.get_or_create
        overrides = self.tags_code_overrides
        codes = self.tag_codes.codes
        new_code = self.tag_codes
        last_ts = self.last_dispatched[1]
        start_pos = pos
        file_size = len(buf)
        topic_ok = TOPIC_BYTES.fullmatch
        good_topics = self.good_topics
        last_topic, last_qid = b"", -1
        checked_topic = b""
        entries: list[CQEntry] = []
        while pos < limit and done < max_records:
            if pos + POS_BODY > limit:
                # Too short for a message: the blank record that ends the segment, or the
                # start of a record whose rest a replica has not received yet.
                if pos + 8 <= limit and int.from_bytes(buf[pos + 4 : pos + 8], "big") == (
                    BLANK_MAGIC_CODE
                ):
                    if pos != start_pos:
                        self.last_dispatched = (base + pos, last_ts)
                    return done, pos, True
                if limit < file_size:
                    break
                log.error("[BUG] dispatch found no record at CommitLog offset %d", base + pos)
                if pos != start_pos:
                    self.last_dispatched = (base + pos, last_ts)
                return done, pos, True
            size, magic, qid, qoff, sys_flag, store_ts, body_len = unpack(buf, pos)
            if magic != MESSAGE_MAGIC_CODE:
                if magic != BLANK_MAGIC_CODE:
                    log.error(
                        "[BUG] dispatch found no record at CommitLog offset %d; skipping to "
                        "the next segment",
                        base + pos,
                    )
                if pos != start_pos:
                    self.last_dispatched = (base + pos, last_ts)
                return done, pos, True
            end = pos + size
            if size < FIXED_SIZE or end > file_size or not 0 <= body_len <= size - FIXED_SIZE:
                return self._damaged(base, pos, start_pos, last_ts, done, "its lengths")
            if end > limit:
                break  # a replica has part of the record: wait for the rest
            tp = pos + POS_BODY + body_len
            tl = buf[tp]
            topic = buf[tp + 1 : tp + 1 + tl]
            pp = tp + 1 + tl
            if pp + 2 > end:
                return self._damaged(base, pos, start_pos, last_ts, done, "its lengths")
            (plen,) = ushort(buf, pp)
            if pp + 2 + plen != end:
                return self._damaged(base, pos, start_pos, last_ts, done, "its lengths")
            tx = sys_flag & 0xC
            to_queue = tx == 0 or tx == 0x8
            # Records of one batch share their queue: look it up once per run of them, and
            # write their entries together. A queue that exists names a topic checked
            # before (with many topics most records start a run: one lookup, no check).
            new_run = to_queue and (qid != last_qid or topic != last_topic)
            cq = queues.get((topic, qid)) if new_run else None
            if cq is not None:
                checked_topic = topic
            elif topic != checked_topic:
                if topic not in good_topics:
                    if not topic_ok(topic):
                        return self._damaged(base, pos, start_pos, last_ts, done, "its topic")
                    if len(good_topics) < GOOD_TOPICS_KEPT:
                        good_topics.add(topic)
                checked_topic = topic
            if new_run:
                if cq is None:
                    cq = get_or_create(topic, qid)
                last_topic, last_qid = topic, qid
                entries = []
                cq_entries.append((cq, topic, qid, entries))
            props = buf[pp + 2 : pp + 2 + plen]
            if to_queue:
                override = overrides.get(topic) if overrides else None
                if override is not None:
                    code = override(topic, props, store_ts)
                else:
                    at = props.find(b"TAGS\x01")
                    if at >= 0 and (at == 0 or props[at - 1] == 2):
                        end = props.find(b"\x02", at + 5)
                        tags = props[at + 5 : end if end >= 0 else plen]
                        cached = codes.get(tags)
                        code = new_code(tags) if cached is None else cached
                    else:
                        code = 0
                entries.append((base + pos, size, code, qoff))
            if index_keys is not None and tx != 0xC:
                # KEYS and UNIQ_KEY, found inline: this runs once per stored message.
                at = props.find(b"KEYS\x01")
                if at >= 0 and (at == 0 or props[at - 1] == 2):
                    end = props.find(b"\x02", at + 5)
                    for key in props[at + 5 : end if end >= 0 else plen].split(b" "):
                        index_keys.append((topic, key, base + pos, store_ts))
                at = props.find(b"UNIQ_KEY\x01")
                if at >= 0 and (at == 0 or props[at - 1] == 2):
                    end = props.find(b"\x02", at + 9)
                    index_keys.append(
                        (topic, props[at + 9 : end if end >= 0 else plen], base + pos, store_ts)
                    )
            last_ts = store_ts
            pos += size
            done += 1
        if pos != start_pos:
            self.last_dispatched = (base + pos, last_ts)
        return done, pos, False

    def _damaged(
        self, base: int, pos: int, start_pos: int, last_ts: int, done: int, what: str
    ) -> tuple[int, int, bool]:
        """A record whose ``what`` is not a record's: what follows in its segment is not
        dispatched (recovery cuts such a tail after a crash)."""
        log.error(
            "dispatch found a damaged record at CommitLog offset %d (%s); skipping to the "
            "next segment",
            base + pos,
            what,
        )
        if pos != start_pos:
            self.last_dispatched = (base + pos, last_ts)
        return done, pos, True
