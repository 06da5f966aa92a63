"""Messages delivered at a given time (RocketMQ 5's timer messages, ``deliver_at``).

A message with ``TIMER_DELIVER_MS`` is stored in the ``rmq_sys_wheel_timer`` topic, its
real topic and queue in properties, its delivery time in the ConsumeQueue's tag-hash
field. The timer store follows that queue and appends a unit per message to the *timer
log* (``<store>/timerlog``: delivery ms, CommitLog offset, size), then files the unit in
a hashed timing wheel of one-second slots held in memory. Every second the due slot is
emptied: each due message is read back from the CommitLog and written to its real topic;
units of a later round stay in the slot.

What survives a restart: the timer log and a checkpoint (``<store>/timercheck``) of how
far the timer topic was read (with the timer log's length at that point) and which second
was delivered last. At start the log is cut back to the checkpointed length, and the
wheel is rebuilt from the units not yet due; reading the topic resumes where the
checkpoint says. A crash can deliver the last second's messages once more, never lose
one. Log segments whose units are all delivered are deleted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from rocketq.common.aio import cancel_all, wait_event
from rocketq.common.exceptions import (
    MessageIllegalError,
    ServiceNotAvailableError,
    StoreCorruptError,
)
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.common.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_WAIT_STORE_MSG_OK,
    TIMER_TOPIC,
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

TIMER_TOPIC_BYTES = TIMER_TOPIC.encode()
UNIT = struct.Struct(">qqiI")  # deliver ms, CommitLog offset, size, magic
UNIT_MAGIC = 0x54494D52  # "TIMR"
SEGMENT_UNITS = 256 * 1024  # units per timer log segment (6 MiB)
WHEEL_SLOTS = 3600  # one-second slots: one round is an hour
CHECKPOINT_INTERVAL = 1.0  # s
TICK = 0.05  # s between looks at the current second's slot
# s before delivering again when the store refused a delivery (a full disk).
REFUSED_WAIT = 1.0


def deliver_ms_of(props: bytes) -> int:
    raw = property_value(props, PROPERTY_TIMER_DELIVER_MS.encode())
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0


@dataclass(slots=True)
class TimerUnit:
    deliver_ms: int
    phy_offset: int
    size: int


class TimerLog:
    """Append-only segments of fixed-size units, named by their first unit's number."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segments: list[int] = sorted(
            int(p.name) for p in self.dir.iterdir() if p.name.isdigit() and p.is_file()
        )
        self.length = 0  # units
        if self.segments:
            last = self.segments[-1]
            size = (self.dir / f"{last:020d}").stat().st_size
            self.length = last + size // UNIT.size
        self._fd = -1
        self._fd_start = -1

    def _path(self, start: int) -> Path:
        return self.dir / f"{start:020d}"

    def truncate(self, length: int) -> None:
        """Cut the log back to ``length`` units (what the checkpoint vouches for)."""
        if length >= self.length:
            return
        self._close_fd()
        keep = length - length % SEGMENT_UNITS
        for start in list(self.segments):
            if start > keep:
                self._path(start).unlink(missing_ok=True)
                self.segments.remove(start)
        if keep in self.segments:
            os.truncate(self._path(keep), (length - keep) * UNIT.size)
        self.length = length

    def append(self, unit: TimerUnit) -> None:
        start = self.length - self.length % SEGMENT_UNITS
        if self._fd < 0 or self._fd_start != start:
            self._close_fd()
            if start not in self.segments:
                self.segments.append(start)
            self._fd = os.open(self._path(start), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._fd_start = start
        os.write(self._fd, UNIT.pack(unit.deliver_ms, unit.phy_offset, unit.size, UNIT_MAGIC))
        self.length += 1

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def units(self, from_unit: int = 0) -> list[tuple[int, TimerUnit]]:
        """(segment start, unit) of every intact unit from ``from_unit`` on."""
        out = []
        for start in self.segments:
            data = self._path(start).read_bytes()
            for i in range(len(data) // UNIT.size):
                if start + i < from_unit:
                    continue
                ms, phy, size, magic = UNIT.unpack_from(data, i * UNIT.size)
                if magic == UNIT_MAGIC:
                    out.append((start, TimerUnit(ms, phy, size)))
        return out

    def delete_segment(self, start: int) -> None:
        if start == self.segments[-1]:
            return  # the segment being written stays
        self._path(start).unlink(missing_ok=True)
        self.segments.remove(start)

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        self.flush()
        self._close_fd()


class TimerMessageStore:
    def __init__(
        self,
        store: MessageStore,
        root: Path,
        *,
        max_delay_ms: int,
    ) -> None:
        self.store = store
        self.max_delay_ms = max_delay_ms
        self.log = TimerLog(root / "timerlog")
        self.checkpoint_path = root / "timercheck"
        self.wheel: list[list[TimerUnit]] = [[] for _ in range(WHEEL_SLOTS)]
        self.segment_max: dict[int, int] = {}  # segment start -> latest delivery ms in it
        self.enqueue_offset = 0  # next entry of the timer topic's queue to file
        self.dequeue_sec = int(time.time())  # next second to deliver
        self.pending = 0
        self.delivered = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- the send side -----------------------------------------------------------------

    def check_and_redirect(
        self, records: bytes, topic: str, queue_id: int
    ) -> tuple[bytes, str, int] | None:
        """A single record with a future TIMER_DELIVER_MS rewritten for the timer topic;
        None when the send is not timed (or already due)."""
        if b"TIMER_DELIVER_MS\x01" not in records:
            return None
        positions = list(iter_records(records))
        if len(positions) > 1:
            raise MessageIllegalError(
                "a batch cannot hold messages with a delivery time; send them one by one"
            )
        msg = decode_record(records)
        raw = msg.properties.get(PROPERTY_TIMER_DELIVER_MS, "")
        try:
            deliver_ms = int(raw)
        except ValueError:
            raise MessageIllegalError(
                f"TIMER_DELIVER_MS {raw!r} is not epoch milliseconds"
            ) from None
        now = int(time.time() * 1000)
        if deliver_ms - now > self.max_delay_ms:
            raise MessageIllegalError(
                f"deliver_at is {(deliver_ms - now) / 86_400_000:.1f} days away; the limit is "
                f"{self.max_delay_ms / 86_400_000:g} days (timer_max_delay)"
            )
        if deliver_ms <= now:
            return None  # due already: an ordinary message
        props = dict(msg.properties)
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return rewrite_record(msg, TIMER_TOPIC, props), TIMER_TOPIC, 0

    def tags_code(self, topic: bytes, props: bytes, store_ts: int) -> int:
        """The timer topic's ConsumeQueue tag-hash field: the delivery time."""
        return deliver_ms_of(props) or store_ts

    # -- life --------------------------------------------------------------------------

    def load(self) -> None:
        doc = read_json(self.checkpoint_path, "timer checkpoint")
        if doc is not None:
            try:
                self.enqueue_offset = int(doc["enqueue_offset"])
                log_length = int(doc["log_length"])
                self.dequeue_sec = int(doc["dequeue_sec"])
            except (KeyError, TypeError, ValueError):
                raise StoreCorruptError(
                    f"{self.checkpoint_path}: expected enqueue_offset, log_length and "
                    "dequeue_sec; restore it or move it away (timed messages are then read "
                    "again from the timer topic's start)"
                ) from None
            self.log.truncate(log_length)
        else:
            self.log.truncate(0)
        due_from = self.dequeue_sec * 1000
        for start, unit in self.log.units():
            self.segment_max[start] = max(self.segment_max.get(start, 0), unit.deliver_ms)
            if unit.deliver_ms >= due_from:
                self._file(unit)
        log.info(
            "timer store: %d pending, reading the timer topic from %d, delivering from %s",
            self.pending,
            self.enqueue_offset,
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.dequeue_sec)),
        )

    def persist(self) -> None:
        self.log.flush()
        write_json_atomic(
            self.checkpoint_path,
            {
                "enqueue_offset": self.enqueue_offset,
                "log_length": self.log.length,
                "dequeue_sec": self.dequeue_sec,
            },
        )

    def start(self) -> None:
        # Once, if started again; called for its own topic only.
        self.store.add_arrival_listener(self._on_arrival, topic=TIMER_TOPIC_BYTES)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._enqueue_loop()),
            loop.create_task(self._dequeue_loop()),
            loop.create_task(self._checkpoint_loop()),
        ]

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []
        await asyncio.to_thread(self.persist)
        self.log.close()

    def _on_arrival(self, topic: bytes, queue_id: int, max_offset: int, code: int) -> None:
        if topic == TIMER_TOPIC_BYTES:
            self._wake.set()

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL)
            try:
                await asyncio.to_thread(self.persist)
            except OSError as exc:
                log.warning("cannot save the timer checkpoint: %s", exc)

    # -- filing ------------------------------------------------------------------------

    def _file(self, unit: TimerUnit) -> None:
        self.wheel[(unit.deliver_ms // 1000) % WHEEL_SLOTS].append(unit)
        self.pending += 1

    async def _enqueue_loop(self) -> None:
        while True:
            try:
                filed = self.enqueue_some()
            except (OSError, ServiceNotAvailableError) as exc:  # a full disk
                log.warning("timer: filing new messages waits: %s", exc)
                await asyncio.sleep(REFUSED_WAIT)
                continue
            if not filed:
                self._wake.clear()
                await wait_event(self._wake, 1.0)
            else:
                await asyncio.sleep(0)

    def enqueue_some(self, max_count: int = 256) -> int:
        """File new entries of the timer topic's queue; -> how many."""
        cq = self.store.queues.get(TIMER_TOPIC_BYTES, 0)
        if cq is None or self.enqueue_offset >= cq.max_offset:
            return 0
        if self.enqueue_offset < cq.min_offset:
            self.enqueue_offset = cq.min_offset
        view = cq.entries(self.enqueue_offset, max_count)
        if view is None:
            return 0
        try:
            entries = [ENTRY.unpack_from(view, i) for i in range(0, len(view), ENTRY.size)]
        finally:
            view.release()
        for phy, size, deliver_ms in entries:
            unit = TimerUnit(deliver_ms, phy, size)
            start = self.log.length - self.log.length % SEGMENT_UNITS
            self.log.append(unit)
            self.segment_max[start] = max(self.segment_max.get(start, 0), deliver_ms)
            if deliver_ms <= time.time() * 1000:
                # Due already (it arrived late). Should the store refuse it (a full disk),
                # the entry is read again later: the unit the log holds twice then is not
                # filed again at a start, its time being past.
                self._deliver(unit)
            else:
                self._file(unit)
            self.enqueue_offset += 1
        return len(entries)

    # -- delivery ----------------------------------------------------------------------

    async def _dequeue_loop(self) -> None:
        while True:
            now = time.time()
            now_sec = int(now)
            try:
                while self.dequeue_sec < now_sec:  # seconds wholly past: all of their units
                    self.deliver_second(self.dequeue_sec, (self.dequeue_sec + 1) * 1000 - 1)
                    self.dequeue_sec += 1
                    await asyncio.sleep(0)
                # The current second: what is due by now; the rest on a later tick.
                self.deliver_second(now_sec, int(now * 1000))
            except ServiceNotAvailableError as exc:
                # The store refuses writes (a full disk, said once by the store). The second
                # is not passed, so its checkpoint still covers what is left of it.
                log.debug("timer delivery waits: %s", exc)
                await asyncio.sleep(REFUSED_WAIT)
                continue
            self._delete_delivered_segments()
            await asyncio.sleep(TICK)

    def deliver_second(self, sec: int, up_to_ms: int) -> int:
        """Deliver the units of second ``sec`` due by ``up_to_ms``; -> how many."""
        index = sec % WHEEL_SLOTS
        slot = self.wheel[index]
        if not slot:
            return 0
        due = [u for u in slot if u.deliver_ms <= up_to_ms]
        if due:
            self.wheel[index] = [u for u in slot if u.deliver_ms > up_to_ms]
            self.pending -= len(due)
            ordered = sorted(due, key=lambda u: (u.deliver_ms, u.phy_offset))
            for i, unit in enumerate(ordered):
                try:
                    self._deliver(unit)
                except ServiceNotAvailableError:
                    # Refused: this unit and the rest stay in their slot for the next try.
                    self.wheel[index].extend(ordered[i:])
                    self.pending += len(ordered) - i
                    raise
        return len(due)

    def _deliver(self, unit: TimerUnit) -> None:
        view = self.store.message_by_offset(unit.phy_offset)
        if view is None:
            log.warning(
                "timer: no record at CommitLog offset %d (deleted?); skipped", unit.phy_offset
            )
            return
        try:
            msg = decode_record(view)
        finally:
            view.release()
        props = dict(msg.properties)
        topic = props.get(PROPERTY_REAL_TOPIC, "")
        try:
            queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID, ""))
        except ValueError:
            queue_id = -1
        if not topic or queue_id < 0:
            log.warning("timer: message %s has no real topic/queue; discarded", msg.msg_id)
            return
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        self.store.append(rewrite_record(msg, topic, props), topic, queue_id)
        self.delivered += 1

    def _delete_delivered_segments(self) -> None:
        done_ms = self.dequeue_sec * 1000
        for start in list(self.log.segments[:-1]):
            if self.segment_max.get(start, 0) < done_ms:
                self.log.delete_segment(start)
                self.segment_max.pop(start, None)

    def stats(self) -> dict[str, int]:
        return {"pending": self.pending, "delivered": self.delivered}
