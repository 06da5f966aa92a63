"""The broker's topics (RocketMQ's TopicConfigManager), kept in config/topics.json and a
change log beside it.

``topics.json`` is the snapshot (RocketMQ's JSON: ``dataVersion`` + ``topicConfigTable``);
``topics.log`` holds one line per change made since, so creating a topic costs one small
append, not a rewrite of the whole table::

    {"dataVersion": 8, "put": [{"topic_name": "T", "read_queue_nums": 4, ...}], "delete": []}

A line is one change set (one topic, or what one copy from the master changed), applied
whole or not at all. Loading reads the snapshot and replays the lines with a newer
``dataVersion``; the bytes after the last newline are a torn append (the process died
inside the write) and are ignored. One bad entry never stops a broker: a topic config of
the snapshot that is not one (a bad name, a bad number) and a line of the log that is not
a change are logged, naming the file and the line, and skipped; the table is then
compacted at once, so each is logged once. A snapshot that is not a JSON object at all is
a :class:`StoreCorruptError` naming the file. Once the log holds as many changes as the
table has topics (at least ``COMPACT_MIN_CHANGES``), a new snapshot is written in a worker
thread and the log restarts; a load that replayed anything compacts at once.

Appends are not fsynced one by one: an fsync costs 140-160 us here against about 1 us
for the write (``os.write`` lands in the page cache, so a killed process loses nothing),
and topic creation runs on the event loop inside a send. A worker thread fdatasyncs the
log shortly after a burst of changes, which leaves only an OS crash inside that moment to
lose the last changes (RocketMQ never fsyncs its config files). Snapshots are written as
``cluster.json_file`` writes them: temp file, fsync, rename.

Every change is also kept in memory (``JOURNAL_MAX`` of them) so the registration with
the nameservers can send what changed since the version a nameserver holds
(:meth:`TopicConfigManager.changes_since`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rocketq.common.exceptions import MessageIllegalError, StoreCorruptError, TopicNotExistError
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.common.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    SCHEDULE_TOPIC,
    TRACE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TopicConfig,
)
from rocketq.common.names import check_topic_name, check_user_topic

log = logging.getLogger(__name__)

DELAY_LEVELS = 18
# The log is compacted into a new snapshot once it holds this many changes, or as many as
# the table has topics if that is more (so a compaction's cost is spread over as many
# changes as it writes topics).
COMPACT_MIN_CHANGES: Final = 1000
# Changes kept in memory for delta registrations; a nameserver further behind gets the
# full table.
JOURNAL_MAX: Final = 10_000

_FIELDS: Final = (
    "topic_name",
    "read_queue_nums",
    "write_queue_nums",
    "perm",
    "topic_sys_flag",
    "order",
)


def config_doc(t: TopicConfig) -> dict[str, Any]:
    return {
        "topic_name": t.topic_name,
        "read_queue_nums": t.read_queue_nums,
        "write_queue_nums": t.write_queue_nums,
        "perm": t.perm,
        "topic_sys_flag": t.topic_sys_flag,
        "order": t.order,
    }


# Each integer field's range as a file may hold it (Java ints; a perm is 3 bits).
_RANGES: Final = {
    "read_queue_nums": (0, (1 << 31) - 1),
    "write_queue_nums": (0, (1 << 31) - 1),
    "perm": (0, 7),
    "topic_sys_flag": (-(1 << 31), (1 << 31) - 1),
}


def _show(value: Any) -> str:
    """A value for an error message, cut short (a damaged file may hold megabytes)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int of 5000 digits, a list nested too deep
        text = type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def config_of(doc: Any) -> TopicConfig:
    """A topic config from its JSON; ValueError naming the field that is not one."""
    if not isinstance(doc, dict) or set(doc) - set(_FIELDS) or "topic_name" not in doc:
        raise ValueError(f"not a topic config: {_show(doc)}")
    name = doc["topic_name"]
    if not isinstance(name, str):
        raise ValueError(f"topic_name {_show(name)} is not a text")
    try:
        check_topic_name(name)
    except MessageIllegalError as exc:
        raise ValueError(str(exc)) from None
    for field, (low, high) in _RANGES.items():
        if field in doc:
            value = doc[field]
            if type(value) is not int or not low <= value <= high:
                raise ValueError(
                    f"topic {name}: {field} is {_show(value)}, not an integer {low}-{high}"
                )
    if "order" in doc and not isinstance(doc["order"], bool):
        raise ValueError(f"topic {name}: order is {_show(doc['order'])}, not true or false")
    return TopicConfig(**doc)


def _version(doc: dict[str, Any], default: int | None) -> int:
    """The dataVersion of a snapshot or change: a whole number, as written."""
    value = doc.get("dataVersion", default) if default is not None else doc["dataVersion"]
    if type(value) is not int:
        raise ValueError(f"dataVersion is {_show(value)}, not an integer")
    return value


def snapshot_doc(topics: dict[str, TopicConfig], version: int) -> dict[str, Any]:
    return {
        "dataVersion": version,
        "topicConfigTable": {n: config_doc(t) for n, t in sorted(topics.items())},
    }


@dataclass(frozen=True, slots=True)
class TopicDelta:
    """What changed between two versions of the table: the latest config of each topic put,
    and the topics deleted (a topic is in one list at most)."""

    put: list[TopicConfig]
    deleted: list[str]

    @property
    def size(self) -> int:
        return len(self.put) + len(self.deleted)


class TopicConfigManager:
    def __init__(self, path: Path, *, auto_create: bool, default_queue_nums: int) -> None:
        self.path = path
        self.log_path = path.with_suffix(".log")
        self.auto_create = auto_create
        self.default_queue_nums = default_queue_nums
        self.topics: dict[str, TopicConfig] = {}
        self.data_version = 0
        # Called after every change (the broker registers the change with the nameservers).
        self.on_change: Callable[[], None] = lambda: None
        # Called with the topics a change created or updated (the broker prepares their
        # queues' files ahead of their first messages).
        self.on_put: Callable[[list[TopicConfig]], None] = lambda put: None
        self._log_fd: int | None = None
        self._log_changes = 0  # changes in the log since the snapshot
        # A background compaction: the lines appended since it took its copy of the table.
        self._compaction: asyncio.Future[None] | None = None
        self._since_copy: list[bytes] | None = None
        self._snapshot_lock = threading.Lock()
        self._generation = 0  # of the snapshot last asked for; older ones are not written
        self._flush: asyncio.Future[None] | None = None
        self._unsynced = False  # appended since the last fdatasync began
        # (data version, topic, config or None for a delete), oldest first; complete for
        # every base version from _journal_floor up to _journal_version.
        self._journal: deque[tuple[int, str, TopicConfig | None]] = deque()
        self._journal_floor = 0
        self._journal_version = 0

    # -- loading -----------------------------------------------------------------------

    def load(self) -> None:
        """Read the snapshot and replay the log; entries that cannot be read are logged and
        skipped (see the module's text), and the table is compacted if any were."""
        doc = read_json(self.path, "topic configs")
        skipped = 0
        if doc is not None:
            try:
                if not isinstance(doc, dict):
                    raise ValueError("the file holds no JSON object")
                entries = doc.get("topicConfigTable", {})
                if not isinstance(entries, dict):
                    raise ValueError("topicConfigTable is not an object")
                version = _version(doc, 0)
            except (AttributeError, TypeError, ValueError) as exc:
                raise StoreCorruptError(
                    f"{self.path}: not a topic config snapshot ({exc}); restore it from a "
                    "backup or move it away to start without it"
                ) from None
            table = {}
            for name, fields in entries.items():
                try:
                    config = config_of(fields)
                    if config.topic_name != name:
                        raise ValueError(f"{_show(name)} holds the config of {config.topic_name}")
                except (AttributeError, TypeError, ValueError, RecursionError) as exc:
                    log.error(
                        "%s: skipping the entry %s, not a topic config (%s): %s",
                        self.path,
                        _show(name),
                        exc,
                        _show(fields),
                    )
                    skipped += 1
                    continue
                table[name] = config
            self.topics, self.data_version = table, version
        replayed, bad = self._replay()
        skipped += bad
        self._system_topics()
        self._journal.clear()
        self._journal_floor = self._journal_version = self.data_version
        if replayed or skipped or (self.log_path.exists() and self.log_path.stat().st_size):
            self.compact()

    def _replay(self) -> tuple[int, int]:
        """Apply the log's change sets newer than the snapshot: how many were applied, and
        how many lines (or topic configs in them) were skipped as unreadable."""
        try:
            data = self.log_path.read_bytes()
        except FileNotFoundError:
            return 0, 0
        except OSError as exc:
            raise StoreCorruptError(
                f"{self.log_path}: cannot read the topic change log ({exc})"
            ) from None
        lines = data.split(b"\n")
        torn = lines.pop()  # what follows the last newline: an append cut short
        if torn:
            log.warning(
                "%s: ignoring a torn last line of %d bytes (the broker stopped inside an "
                "append; that change was not acknowledged)",
                self.log_path,
                len(torn),
            )
        applied = skipped = 0
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict):
                    raise ValueError("not a JSON object")
                version = _version(entry, None)
                puts, deletes = entry.get("put", []), entry.get("delete", [])
                if not isinstance(puts, list) or not isinstance(deletes, list):
                    raise ValueError("put and delete must be arrays")
            # RecursionError: arrays nested deeper than the JSON parser goes.
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                log.error(
                    "%s: skipping line %d, not a topic change (%s): %s",
                    self.log_path,
                    number,
                    exc,
                    _show(line),
                )
                skipped += 1
                continue
            put = []
            for doc in puts:
                try:
                    put.append(config_of(doc))
                except (ValueError, TypeError, RecursionError) as exc:
                    log.error(
                        "%s: line %d: skipping a topic config that is not one (%s): %s",
                        self.log_path,
                        number,
                        exc,
                        _show(doc),
                    )
                    skipped += 1
            deleted = []
            for name in deletes:
                if not isinstance(name, str):
                    log.error(
                        "%s: line %d: skipping a deleted topic that is not a name: %s",
                        self.log_path,
                        number,
                        _show(name),
                    )
                    skipped += 1
                    continue
                deleted.append(name)
            if version <= self.data_version:
                continue  # already in the snapshot
            for t in put:
                self.topics[t.topic_name] = t
            for name in deleted:
                self.topics.pop(name, None)
            self.data_version = version
            applied += 1
        return applied, skipped

    def _system_topics(self) -> None:
        system = [
            TopicConfig(SCHEDULE_TOPIC, DELAY_LEVELS, DELAY_LEVELS),
            TopicConfig(TRANS_HALF_TOPIC, 1, 1),
            TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1),
        ]
        if self.auto_create:
            n = self.default_queue_nums
            system.append(
                TopicConfig(
                    AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_INHERIT | PERM_READ | PERM_WRITE
                )
            )
        else:
            self.topics.pop(AUTO_CREATE_TOPIC_KEY_TOPIC, None)
        for t in system:
            self.topics.setdefault(t.topic_name, t)

    # -- changes -----------------------------------------------------------------------

    def _changed(self, put: list[TopicConfig], deleted: list[str], version: int) -> None:
        """Record one change set that brought the table to ``version``."""
        if version < self.data_version or self._journal_version != self.data_version:
            # The version went back (or was set from outside): deltas cannot span it.
            self._journal.clear()
            self._journal_floor = version
        for t in put:
            self._journal.append((version, t.topic_name, t))
        for name in deleted:
            self._journal.append((version, name, None))
        while len(self._journal) > JOURNAL_MAX:
            self._journal_floor = max(self._journal_floor, self._journal.popleft()[0])
        self.data_version = self._journal_version = version
        self._append(put, deleted, version)
        if put:
            self.on_put(put)
        self.on_change()

    def _append(self, put: list[TopicConfig], deleted: list[str], version: int) -> None:
        entry = {"dataVersion": version, "put": [config_doc(t) for t in put], "delete": deleted}
        line = json.dumps(entry, separators=(",", ":")).encode() + b"\n"
        if self._log_fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._log_fd, line)  # one write: a crash leaves a prefix, never a mix
        if self._since_copy is not None:
            self._since_copy.append(line)
        self._log_changes += len(put) + len(deleted)
        loop = _running_loop()
        if loop is None:
            if self._log_changes >= self._compact_at():
                self.compact()
            return
        self._unsynced = True
        if self._flush is None:
            self._start_flush(loop)
        if self._log_changes >= self._compact_at() and self._compaction is None:
            self._compaction = asyncio.ensure_future(self._compact_in_background())

    def _compact_at(self) -> int:
        return max(COMPACT_MIN_CHANGES, len(self.topics))

    def _sync_log(self) -> None:
        # A descriptor of its own: the log may be swapped meanwhile, and an fsync flushes
        # the file (whichever descriptor asks), so this one never races a close.
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.log_path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def _start_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        self._unsynced = False
        self._flush = loop.run_in_executor(None, self._sync_log)
        self._flush.add_done_callback(self._flushed)

    def _flushed(self, fut: asyncio.Future[None]) -> None:
        self._flush = None
        if not fut.cancelled() and fut.exception() is not None:
            log.error("cannot sync the topic change log %s: %s", self.log_path, fut.exception())
        loop = _running_loop()
        if self._unsynced and loop is not None:
            self._start_flush(loop)  # appends that came after this flush began

    # -- snapshots ---------------------------------------------------------------------

    def compact(self) -> None:
        """Write the table as a new snapshot, then start an empty log (blocking)."""
        self._generation += 1
        self._write_snapshot(dict(self.topics), self.data_version, self._generation)
        self._swap_log([])

    async def _compact_in_background(self) -> None:
        """The snapshot is written in a worker thread from a copy of the table; the lines
        appended meanwhile go on into the new log."""
        self._generation += 1
        generation = self._generation
        self._since_copy = []
        try:
            written = await asyncio.to_thread(
                self._write_snapshot, dict(self.topics), self.data_version, generation
            )
            if written and generation == self._generation:
                self._swap_log(self._since_copy)
        except OSError as exc:
            log.error("cannot compact the topic configs into %s: %s", self.path, exc)
        finally:
            self._since_copy = None
            self._compaction = None

    def _write_snapshot(
        self, topics: dict[str, TopicConfig], version: int, generation: int
    ) -> bool:
        with self._snapshot_lock:
            if generation != self._generation:
                return False  # a newer snapshot was asked for meanwhile
            write_json_atomic(self.path, snapshot_doc(topics, version))
            return True

    def _swap_log(self, lines: list[bytes]) -> None:
        """The log restarts with ``lines`` (the changes newer than the snapshot). A crash
        before the rename keeps the old log, whose older lines the snapshot covers."""
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None
        if lines:
            tmp = self.log_path.with_name(self.log_path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, b"".join(lines))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.log_path)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.log_path.unlink()
        self._log_changes = sum(
            len(e.get("put", ())) + len(e.get("delete", ())) for e in map(json.loads, lines)
        )

    def replace_all(self, topics: dict[str, TopicConfig], version: int) -> None:
        """Take another broker's table (a slave copying its master). A newer version is
        recorded as one change set (what differs); an older one rewrites the snapshot."""
        if version == self.data_version and topics == self.topics:
            return
        if version > self.data_version:
            put = [t for n, t in topics.items() if self.topics.get(n) != t]
            deleted = [n for n in self.topics if n not in topics]
            self.topics = dict(topics)
            self._changed(put, deleted, version)
            return
        # Older than ours: our own newer lines must not be replayed over it, so the log
        # goes first (a crash in between leaves the old snapshot, and the next copy).
        self._generation += 1
        self._swap_log([])
        self.topics = dict(topics)
        self.data_version = version
        self._journal.clear()
        self._journal_floor = self._journal_version = version
        self._write_snapshot(dict(self.topics), version, self._generation)
        self.on_change()

    def persist(self) -> None:
        """Write the whole table now (snapshot, empty log)."""
        self.compact()

    async def close(self) -> None:
        """Wait for a background compaction and flush; close the log."""
        while (fut := self._compaction or self._flush) is not None:
            with contextlib.suppress(Exception):
                await fut
            await asyncio.sleep(0)  # let the done callbacks run
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None

    # -- reading and changing ----------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def update(self, config: TopicConfig) -> TopicConfig:
        """Create or change a topic (an admin's UPDATE_AND_CREATE_TOPIC); a bad name or
        queue count is MessageIllegalError and changes nothing."""
        check_topic_name(config.topic_name)
        if config.topic_name == AUTO_CREATE_TOPIC_KEY_TOPIC:
            raise MessageIllegalError(
                f"topic {config.topic_name} is the auto-create template; choose another name"
            )
        if not (1 <= config.read_queue_nums <= 1024 and 1 <= config.write_queue_nums <= 1024):
            raise MessageIllegalError(
                f"topic {config.topic_name}: read and write queue counts must be 1-1024 "
                f"(got {config.read_queue_nums}/{config.write_queue_nums})"
            )
        if not 0 <= config.perm <= 7:
            raise MessageIllegalError(f"topic {config.topic_name}: perm must be 0-7")
        self.topics[config.topic_name] = config
        self._changed([config], [], self.data_version + 1)
        log.info("topic %s updated: %s", config.topic_name, config)
        return config

    def delete(self, topic: str) -> bool:
        if self.topics.pop(topic, None) is None:
            return False
        self._changed([], [topic], self.data_version + 1)
        log.info("topic %s deleted", topic)
        return True

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int) -> TopicConfig:
        """The topic of a send, created from the default topic (TBW102) when allowed. A
        name that is not valid or is reserved (:func:`check_user_topic`) is never created:
        MessageIllegalError. The trace topic is the one reserved topic a send creates (the
        trace writers' first send)."""
        found = self.topics.get(topic)
        if found is not None:
            return found
        if topic == TRACE_TOPIC:
            check_topic_name(topic)
        else:
            check_user_topic(topic)
        template = self.topics.get(default_topic or AUTO_CREATE_TOPIC_KEY_TOPIC)
        if not self.auto_create or template is None or not template.perm & PERM_INHERIT:
            raise TopicNotExistError(
                f"topic {topic!r} does not exist on this broker and auto_create_topic_enable "
                "is off; create it first with `rocketq admin update-topic`"
            )
        n = max(1, min(queue_nums or self.default_queue_nums, template.write_queue_nums))
        config = TopicConfig(topic, n, n, template.perm & ~PERM_INHERIT)
        log.info("auto-creating topic %s from %s with %d queues", topic, template.topic_name, n)
        self.topics[topic] = config
        self._changed([config], [], self.data_version + 1)
        return config

    def create_system(self, topic: str, queue_nums: int, perm: int) -> TopicConfig:
        """Retry and DLQ topics, created on demand (a name longer than a topic may be,
        from a long group name, is MessageIllegalError)."""
        found = self.topics.get(topic)
        if found is not None:
            return found
        check_topic_name(topic)
        config = TopicConfig(topic, queue_nums, queue_nums, perm)
        self.topics[topic] = config
        self._changed([config], [], self.data_version + 1)
        log.info("created topic %s with %d queues", topic, queue_nums)
        return config

    def registrable(self) -> list[TopicConfig]:
        return list(self.topics.values())

    def topic_count(self) -> int:
        return len(self.topics)

    def changes_since(self, version: int) -> TopicDelta | None:
        """What changed after ``version`` up to :attr:`data_version`, in time proportional
        to the changes; None when the journal does not reach back that far (or the table
        was replaced behind the manager's back): then only the full table will do."""
        if self._journal_version != self.data_version or not (
            self._journal_floor <= version <= self.data_version
        ):
            return None
        latest: dict[str, TopicConfig | None] = {}
        for v, name, config in reversed(self._journal):
            if v <= version:
                break
            latest.setdefault(name, config)
        put = [c for c in latest.values() if c is not None]
        deleted = [n for n, c in latest.items() if c is None]
        return TopicDelta(put, deleted)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
