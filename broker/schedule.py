"""Delayed messages by level (RocketMQ's ScheduleMessageService).

A message sent with ``DELAY=n`` is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1`` with
its real topic and queue in ``REAL_TOPIC`` / ``REAL_QID``; the dispatcher writes its
delivery time (store time + the level's delay) into the ConsumeQueue's tag-hash field. One
task per level walks that level's queue in order: a due entry is read back from the
CommitLog and written again to its real topic, and the walk waits at
the first entry not yet due (later entries of a level are never due earlier). Progress per
level is saved in ``delay_offset.json`` every ``flush_delay_offset_interval`` and at stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from rocketq.common.aio import cancel_all, wait_event
from rocketq.common.exceptions import (
    MessageIllegalError,
    ServiceNotAvailableError,
    StoreCorruptError,
)
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    MessageExt,
    transaction_type,
)
from rocketq.common.record import (
    decode_record,
    iter_records,
    property_value,
    rewrite_record,
)
from rocketq.storage.consume_queue import ENTRY
from rocketq.storage.message_store import MessageStore

log = logging.getLogger(__name__)

SCHEDULE_TOPIC_BYTES = SCHEDULE_TOPIC.encode()
DELAY_FOR_A_WHILE = 0.1  # s: how long a level waits again when its queue has nothing new
MAX_WAIT = 1.0  # s: the longest sleep before a level looks at its queue again
TRANSACTION_NOT_TYPE = 0
TRANSACTION_COMMIT_TYPE = 0x8


def is_delayed(record_props: bytes) -> int:
    """The delay level encoded properties ask for (0: none)."""
    raw = property_value(record_props, b"DELAY")
    return _level(raw.decode(errors="replace") if raw else "")


def _level(raw: str | None) -> int:
    try:
        return max(0, int(raw)) if raw else 0
    except ValueError:
        return 0


def delay_level_of(msg: MessageExt) -> int:
    return _level(msg.properties.get(PROPERTY_DELAY_TIME_LEVEL))


class ScheduleMessageService:
    def __init__(
        self,
        store: MessageStore,
        levels_ms: list[int],
        offset_path: Path,
        *,
        flush_interval_ms: int = 10_000,
    ) -> None:
        self.store = store
        self.levels_ms = levels_ms
        self.max_level = len(levels_ms)
        self.path = offset_path
        self.flush_interval = flush_interval_ms / 1000
        self.offsets: dict[int, int] = {}
        self._saved: dict[int, int] = {}
        self._wakes = [asyncio.Event() for _ in levels_ms]
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered = 0

    # -- the send side -----------------------------------------------------------------

    def tags_code(self, topic: bytes, props: bytes, store_ts: int) -> int:
        """The ConsumeQueue tag-hash field of a SCHEDULE_TOPIC entry: its delivery time."""
        level = min(max(is_delayed(props), 1), self.max_level)
        return store_ts + self.levels_ms[level - 1]

    def redirect(self, records: bytes, topic: str, queue_id: int) -> tuple[bytes, str, int] | None:
        """A single delayed record rewritten for SCHEDULE_TOPIC_XXXX, or None when the send
        is not delayed. A batch with a delayed record is refused."""
        if b"DELAY\x01" not in records:
            return None
        positions = list(iter_records(records))
        msg = decode_record(records, 0)
        level = delay_level_of(msg)
        if len(positions) > 1:
            for pos, _ in positions:
                if delay_level_of(decode_record(records, pos)):
                    raise MessageIllegalError(
                        "a batch cannot hold delayed messages; send them one by one"
                    )
            return None
        if level <= 0 or transaction_type(msg.sys_flag) not in (
            TRANSACTION_NOT_TYPE,
            TRANSACTION_COMMIT_TYPE,
        ):
            return None
        level = min(level, self.max_level)
        props = dict(msg.properties)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return rewrite_record(msg, SCHEDULE_TOPIC, props), SCHEDULE_TOPIC, level - 1

    # -- life --------------------------------------------------------------------------

    def load(self) -> None:
        doc = read_json(self.path, "delay offsets")
        table = doc.get("offsetTable") if isinstance(doc, dict) else None
        if doc is not None and not isinstance(table, dict):
            raise StoreCorruptError(
                f'{self.path}: expected {{"offsetTable": {{level: offset}}}}; fix or move the '
                "file away (delayed messages then start again from their queues' beginning)"
            )
        for key, value in (table or {}).items():
            # One bad entry is logged and skipped: that level's delayed messages start
            # again from its queue's beginning, the others go on where they were.
            digits = isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 10
            level = int(key) if digits else 0
            if type(value) is not int or not 1 <= level <= self.max_level or value < 0:
                log.error(
                    "%s: skipping the entry %.40r: %.40r, not a delay level (1-%d) and an "
                    "offset; that level is read again from its queue's start",
                    self.path,
                    key,
                    value,
                    self.max_level,
                )
                continue
            self.offsets[level] = value
        self._saved = dict(self.offsets)

    def persist(self) -> None:
        if self.offsets == self._saved and self.path.exists():
            return
        snapshot = dict(self.offsets)
        write_json_atomic(self.path, {"offsetTable": {str(k): v for k, v in snapshot.items()}})
        self._saved = snapshot

    def start(self) -> None:
        # Once, if started again; called for its own topic only.
        self.store.add_arrival_listener(self._on_arrival, topic=SCHEDULE_TOPIC_BYTES)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run_level(level)) for level in self.levels()]
        self._tasks.append(loop.create_task(self._persist_loop()))

    def levels(self) -> range:
        return range(1, self.max_level + 1)

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []
        await asyncio.to_thread(self.persist)

    def _on_arrival(self, topic: bytes, queue_id: int, max_offset: int, code: int) -> None:
        if topic == SCHEDULE_TOPIC_BYTES and 0 <= queue_id < self.max_level:
            self._wakes[queue_id].set()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            try:
                await asyncio.to_thread(self.persist)
            except OSError as exc:
                log.warning("cannot save %s: %s", self.path, exc)

    # -- delivery ----------------------------------------------------------------------

    async def _run_level(self, level: int) -> None:
        wake = self._wakes[level - 1]
        while True:
            try:
                wait = self._deliver_due(level)
            except ServiceNotAvailableError as exc:
                # The store refuses writes (a full disk): said once by the store; each
                # level waits and tries again without a traceback per attempt.
                log.debug("delay level %d waits: %s", level, exc)
                wait = MAX_WAIT
            except Exception:
                log.exception("delivering delay level %d failed; trying again", level)
                wait = MAX_WAIT
            if wait is None:
                wake.clear()
                if self._has_more(level):
                    continue
                await wait_event(wake, MAX_WAIT)
            elif wait > 0:
                await asyncio.sleep(wait)
            else:
                await asyncio.sleep(0)  # let others run between runs of due messages

    def _has_more(self, level: int) -> bool:
        cq = self.store.queues.get(SCHEDULE_TOPIC_BYTES, level - 1)
        return cq is not None and self.offsets.get(level, 0) < cq.max_offset

    def _deliver_due(self, level: int) -> float | None:
        """Deliver the due entries at the head of the level's queue (at most 32).

        -> None when the queue has nothing more, 0 when more may be due at once, else the
        seconds until the head entry is due (at most MAX_WAIT).
        """
        cq = self.store.queues.get(SCHEDULE_TOPIC_BYTES, level - 1)
        offset = self.offsets.get(level, 0)
        if cq is None or offset >= cq.max_offset:
            return None
        if offset < cq.min_offset:
            log.warning(
                "delay level %d: offset %d is below the queue's minimum %d; moving up",
                level,
                offset,
                cq.min_offset,
            )
            offset = cq.min_offset
        view = cq.entries(offset, 32)
        if view is None:
            return None
        try:
            entries: list[tuple[int, int, int]] = [
                ENTRY.unpack_from(view, i) for i in range(0, len(view), ENTRY.size)
            ]
        finally:
            view.release()
        now = int(time.time() * 1000)
        for phy_offset, _size, deliver_ts in entries:
            if deliver_ts > now:
                self.offsets[level] = offset
                return min((deliver_ts - now) / 1000.0, MAX_WAIT)
            self._deliver(level, phy_offset)
            offset += 1
            self.offsets[level] = offset
        return 0.0

    def _deliver(self, level: int, phy_offset: int) -> None:
        view = self.store.message_by_offset(phy_offset)
        if view is None:
            log.warning(
                "delay level %d: no record at CommitLog offset %d (deleted?); skipped",
                level,
                phy_offset,
            )
            return
        try:
            msg = decode_record(view)
        finally:
            view.release()
        props = dict(msg.properties)
        real_topic = props.get(PROPERTY_REAL_TOPIC)
        try:
            real_qid = int(props.get(PROPERTY_REAL_QUEUE_ID, ""))
        except ValueError:
            real_qid = -1
        if not real_topic or real_qid < 0 or real_topic == TRANS_HALF_TOPIC:
            log.warning(
                "delay level %d: message %s has no real topic/queue (or is a half message); "
                "discarded",
                level,
                msg.msg_id,
            )
            return
        # DELAY stays in the delivered copy, as RocketMQ's does (it writes the properties
        # string taken before clearing the level): a retried message shows DELAY=3, 4, ...
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        self.store.append(rewrite_record(msg, real_topic, props), real_topic, real_qid)
        self.delivered += 1
