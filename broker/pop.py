"""Pop consumption (RocketMQ 5's POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME).

A pop consumer does not own queues or offsets: it asks the broker for up to 32 messages of
a topic, and the broker picks them (across the topic's queues, and the group's pop retry
topic ``%RETRY%<group>_<topic>``), hides them for an *invisible time* and hands each out
with its receipt, the ``POP_CK`` property (:class:`ExtraInfo`). The consumer acknowledges
each message with that receipt, or changes its invisible time; a message not acknowledged
within it is delivered again, through the pop retry topic, with its reconsume count one
higher, until the group's ``retry_max_times``, after which it goes to ``%DLQ%<group>``.

What makes that durable is RocketMQ's: every pop appends a check point (CK: which messages
were popped, when, for how long) and every acknowledgement an ACK, as messages of the
cluster's revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (``revive_queue_num`` queues, tags
``ck`` and ``ack``, JSON bodies with RocketMQ's field names). They live in the CommitLog,
so a slave or a Raft follower has them as it has everything else. The group's offset in
each queue moves past the popped messages at once (the CK answers for them).

:class:`PopService` also runs the revive: on the writing broker (a master, a serving Raft
leader) it reads each revive queue in order from its own committed offset (group
``CID_RMQ_SYS_REVIVE_GROUP``), pairs ACKs with their CKs, and once a CK's invisible time
has passed puts each of its messages that has no ACK on the pop retry topic (or the DLQ).
Its offset moves only past records whose CKs are settled, so after a restart or a leader
change the revive reads them again and rebuilds what is pending: an acknowledged message is
never delivered again, and one whose revive was under way when the broker stopped may be
delivered twice (at least once, as RocketMQ).

An orderly pop (``order``, RocketMQ's RIP-51) writes no CK: the batch a queue gave out is
kept in memory (:class:`OrderBatch`) and locks the queue for the group until it is
acknowledged or its invisible time ends, and the group's offset moves only with the
acknowledgements, so what a restart forgets is given again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from rocketq.broker.filter import sql_filter, tag_filter
from rocketq.broker.host import BrokerHost
from rocketq.broker.pull_processor import physical_memory
from rocketq.common.aio import cancel_all
from rocketq.common.exceptions import (
    MessageIllegalError,
    NoMessageError,
    NoPermissionError,
    RocketqError,
    RocketqSystemError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rocketq.common.message import (
    PERM_READ,
    PERM_WRITE,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    REVIVE_TOPIC_PREFIX,
    dlq_topic,
)
from rocketq.common.names import is_valid_group_name, is_valid_topic_name
from rocketq.common.pop_body import decode_batch_acks
from rocketq.common.record import (
    FIXED_SIZE,
    INT,
    LONG,
    MAX_PROPERTIES_LENGTH,
    POS_BODY,
    POS_BODY_LENGTH,
    POS_QUEUE_OFFSET,
    USHORT,
    decode_records,
    encode_host,
    encode_properties,
    encode_record,
    iter_records,
    rewrite_record,
)
from rocketq.storage.results import GetStatus

if TYPE_CHECKING:
    from rocketq.broker.send_processor import SendProcessor

log = logging.getLogger(__name__)

PROPERTY_POP_CK: Final = "POP_CK"
PROPERTY_FIRST_POP_TIME: Final = "1ST_POP_TIME"
REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"
BATCH_ACK_TAG: Final = "bAck"
MAX_POP: Final = 32  # messages per pop, as RocketMQ
MAX_INVISIBLE_MS: Final = 12 * 3600 * 1000
INIT_MODE_MIN: Final = 0  # a group's first pop of a queue starts at its oldest message
INIT_MODE_MAX: Final = 1  # ... or at its end (ConsumeInitMode)
ORDER_REVIVE_QID: Final = 999  # an orderly pop's receipt: no CK (KeyBuilder.POP_ORDER_REVIVE_QUEUE)
_NORMAL: Final = "0"
_RETRY: Final = "1"
_REVIVE_READ: Final = 256  # revive records read per queue and turn
# How long a receipt's check waits for its CK to be dispatched into the revive queue.
_RECEIPT_DISPATCH_WAIT_S: Final = 2.0


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str) -> str:
    """Where a group's un-acknowledged pops of ``topic`` go again (KeyBuilder's v1 name)."""
    return f"%RETRY%{group}_{topic}"


@dataclass(frozen=True)
class ExtraInfo:
    """A popped message's receipt (the ``POP_CK`` property, RocketMQ's ExtraInfoUtil):
    ``ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId offset``,
    space-separated; ``retry`` is 1 for a message of the pop retry topic."""

    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: bool
    broker_name: str
    queue_id: int
    queue_offset: int

    def text(self) -> str:
        return (
            f"{self.ck_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
            f"{_RETRY if self.retry else _NORMAL} {self.broker_name} {self.queue_id} "
            f"{self.queue_offset}"
        )

    @classmethod
    def parse(cls, text: str | None) -> ExtraInfo:
        """A receipt as the consumer gave it back; MessageIllegalError if it is none."""
        parts = (text or "").split(" ")
        if len(parts) < 7:
            raise MessageIllegalError(
                f"extraInfo {str(text)[:80]!r} is not a pop receipt: expected 'ckQueueOffset "
                "popTime invisibleTime reviveQid retry brokerName queueId [offset]'"
            )
        try:
            numbers = [int(p) for p in parts[:4]] + [int(parts[6])]
            offset = int(parts[7]) if len(parts) > 7 else -1
        except ValueError:
            raise MessageIllegalError(
                f"extraInfo {str(text)[:80]!r} has a field that is not a number"
            ) from None
        if parts[4] not in (_NORMAL, _RETRY):
            raise MessageIllegalError(f"extraInfo's retry flag is {parts[4][:8]!r}, not 0 or 1")
        ck, pop_time, invisible, qid, queue_id = numbers
        return cls(ck, pop_time, invisible, qid, parts[4] == _RETRY, parts[5], queue_id, offset)


@dataclass
class CheckPoint:
    """One pop of one queue, as the revive holds it: its messages are ``start + d`` for
    each ``d`` of ``diffs``; ``acked`` has a bit per message."""

    topic: str  # the queue's topic: the popped topic or its pop retry topic
    group: str
    queue_id: int
    start: int
    pop_time: int
    invisible_time: int
    diffs: list[int]
    revive_offset: int  # where its CK is in its revive queue
    acked: int = 0

    @property
    def due(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def key(self) -> tuple[str, str, int, int, int]:
        return (self.topic, self.group, self.queue_id, self.start, self.pop_time)

    def ack(self, offset: int) -> None:
        with contextlib.suppress(ValueError):
            self.acked |= 1 << self.diffs.index(offset - self.start)

    @property
    def settled(self) -> bool:
        return self.acked == (1 << len(self.diffs)) - 1


@dataclass
class OrderBatch:
    """What an orderly pop of one queue gave out and is not acknowledged yet: the queue is
    locked for the group until every offset is acknowledged or the invisible time ends,
    and the batch is then given again (RocketMQ's ConsumerOrderInfoManager)."""

    offsets: list[int]
    pop_time: int
    invisible_time: int
    acked: set[int] = field(default_factory=set)
    attempts: dict[int, int] = field(default_factory=dict)  # offset -> deliveries

    def locked(self, now: int) -> bool:
        return len(self.acked) < len(self.offsets) and now < self.pop_time + self.invisible_time


@dataclass
class PopAnswer:
    records: list[bytes] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest: int = 0
    start_offsets: list[str] = field(default_factory=list)
    msg_offsets: list[str] = field(default_factory=list)
    order_counts: list[str] = field(default_factory=list)
    held: bool = False  # it waited for a message (long polling)


class PopHost(BrokerHost, Protocol):
    """The broker as pop sees it: its parts, and the send path it stores records with."""

    send: SendProcessor


class PopService:
    def __init__(self, broker: PopHost, clock_ms: Callable[[], int] | None = None) -> None:
        self.b = broker
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._busy: set[tuple[str, str, int]] = set()  # (group, topic, queue) being popped
        # Orderly pops given out, by (group, topic, queue): kept in memory only (a restart
        # gives the unacknowledged ones again at once, as the group's offset is theirs).
        self._order: dict[tuple[str, str, int], OrderBatch] = {}
        # The revive's view, per revive queue: the next record to read and the CKs pending.
        self._read: dict[int, int] = {}
        self._pending: dict[int, dict[tuple[str, str, int, int, int], CheckPoint]] = {}
        self._task: asyncio.Task[None] | None = None
        self.revived = 0  # messages put back for another delivery
        self.dead_lettered = 0
        self.turns = 0  # revive turns done while writing
        self._memory = physical_memory()  # bytes of RAM, for where a new group starts

    @property
    def revive_topic(self) -> str:
        return revive_topic(self.b.config.broker_cluster_name)

    @property
    def revive_queues(self) -> int:
        return self.b.config.revive_queue_num

    # -- life ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._revive_loop())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_all([task] if task is not None else [])

    # -- pop ---------------------------------------------------------------------------

    async def pop(
        self,
        group: str,
        topic: str,
        queue_id: int,
        *,
        max_nums: int,
        invisible_time: int,
        poll_time: int = 0,
        init_mode: int = INIT_MODE_MIN,
        expression: str = "*",
        expression_type: str = "TAG",
        order: bool = False,
        max_poll_ms: int | None = None,
    ) -> PopAnswer:
        """Up to ``max_nums`` messages of ``topic`` for ``group`` (of queue ``queue_id``,
        -1: any), hidden for ``invisible_time`` ms; with nothing to give, waits up to
        ``poll_time`` ms for a message to arrive. With ``order``, a queue gives its next
        messages only once those it gave before are acknowledged (or their invisible time
        is over: then they are given again, in order). The wait is at most ``max_poll_ms``
        (default ``long_polling_max_suspend_millis``)."""
        cfg = self.b.config
        if not cfg.broker_permission & PERM_READ:
            raise NoPermissionError(f"the broker[{cfg.broker_addr}] pulling message is forbidden")
        group_config = self.b.groups.find_or_create(group)
        if not group_config.consume_enable:
            raise NoPermissionError(
                f"consumer group {group} is not allowed to consume (consume_enable)"
            )
        config = self.b.topics.get(topic)
        if config is None:
            raise TopicNotExistError(f"topic {topic!r} does not exist on this broker")
        if not config.readable():
            raise NoPermissionError(f"the topic[{topic}] pulling message is forbidden")
        if queue_id >= config.read_queue_nums or queue_id < -1:
            raise RocketqSystemError(
                f"queue id {queue_id} is illegal: topic {topic} has {config.read_queue_nums} "
                "read queues on this broker"
            )
        if not 1 <= max_nums <= MAX_POP:
            raise MessageIllegalError(f"maxMsgNums is {max_nums}; pop 1 to {MAX_POP} at a time")
        if not 0 < invisible_time <= MAX_INVISIBLE_MS:
            raise MessageIllegalError(
                f"invisibleTime is {invisible_time} ms; it must be above 0 and at most 12 h"
            )
        self.b.send._check_writable()  # the CK is written here
        tags = tag_filter(expression, expression_type)
        records = sql_filter(expression, expression_type, enabled=cfg.enable_property_filter)
        queues = [queue_id] if queue_id >= 0 else list(range(config.read_queue_nums))
        if len(queues) > 1:
            first = random.randrange(len(queues))
            queues = queues[first:] + queues[:first]
        args = (group, topic, queues, max_nums, invisible_time, init_mode, tags, records)
        answer = await (self._pop_ordered(*args) if order else self._pop_once(*args))
        if answer.records or poll_time <= 0:
            return answer
        longest = cfg.long_polling_max_suspend_millis if max_poll_ms is None else max_poll_ms
        wait_ms = min(poll_time, longest)
        if await self._arrival(group, topic, queues, wait_ms / 1000):
            answer = await (self._pop_ordered(*args) if order else self._pop_once(*args))
        answer.held = True
        return answer

    async def _arrival(self, group: str, topic: str, queues: list[int], timeout: float) -> bool:
        """Wait until any of the queues (or the group's pop retry topic) has a message
        past the group's offset; False on timeout."""
        store = self.b.store
        waits = [(topic, q) for q in queues]
        retry = pop_retry_topic(topic, group)
        retry_config = self.b.topics.get(retry)
        # The first revive makes the retry topic: until then, wait on the queues it gets.
        retry_queues = (
            retry_config.read_queue_nums
            if retry_config is not None
            else self.b.groups.find_or_create(group).retry_queue_nums
        )
        waits += [(retry, q) for q in range(retry_queues)]
        tasks = [
            asyncio.ensure_future(
                self.b.holds.hold(t.encode(), q, store.max_offset_in_queue(t, q), timeout)
            )
            for t, q in waits
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            return any(t.result() for t in done)
        finally:
            for t in tasks:
                t.cancel()

    async def _pop_once(
        self,
        group: str,
        topic: str,
        queues: list[int],
        max_nums: int,
        invisible_time: int,
        init_mode: int,
        tags: Callable[[int], bool] | None,
        records: Callable[[memoryview], bool] | None,
    ) -> PopAnswer:
        pop_time = self.clock_ms()
        qid = random.randrange(self.revive_queues)
        answer = PopAnswer(pop_time=pop_time, invisible_time=invisible_time, revive_qid=qid)
        candidates = [(topic, q) for q in queues]
        retry = pop_retry_topic(topic, group)
        retry_config = self.b.topics.get(retry)
        if retry_config is not None:
            retries = [(retry, q) for q in range(retry_config.read_queue_nums)]
            # Retries first one pop in five (RocketMQ's popFromRetryProbability), else after.
            if random.randrange(100) < self.b.config.pop_from_retry_probability:
                candidates = retries + candidates
            else:
                candidates = candidates + retries
        for t, q in candidates:
            if len(answer.records) < max_nums:
                await self._pop_queue(
                    answer, group, topic, t, q, max_nums, init_mode, tags, records
                )
            else:
                answer.rest += self._rest(group, t, q)
        return answer

    async def _pop_ordered(
        self,
        group: str,
        topic: str,
        queues: list[int],
        max_nums: int,
        invisible_time: int,
        init_mode: int,
        tags: Callable[[int], bool] | None,
        records: Callable[[memoryview], bool] | None,
    ) -> PopAnswer:
        """An orderly pop: from each queue not locked for the group in turn, until
        ``max_nums`` are taken, its messages from the group's offset (which moves only as
        they are acknowledged); a queue a pop took from is locked until they are."""
        now = self.clock_ms()
        answer = PopAnswer(pop_time=now, invisible_time=invisible_time, revive_qid=ORDER_REVIVE_QID)
        for q in queues:
            key = (group, topic, q)
            batch = self._order.get(key)
            if batch is not None and batch.locked(now):
                answer.rest += self._rest(group, topic, q)
                continue
            if len(answer.records) >= max_nums:
                answer.rest += self._rest(group, topic, q)
                continue
            offset = self._start_offset(group, topic, q, init_mode)
            count = max_nums - len(answer.records)
            read = self._read_from(group, topic, q, offset, count, tags, records)
            if read is None:
                continue
            views, offsets, _, _ = read
            self.b.offsets.commit(group, topic, q, offset)  # where acknowledgements move on
            attempts = batch.attempts if batch is not None else {}
            fresh = OrderBatch(offsets, now, invisible_time)
            fresh.attempts = {o: attempts.get(o, 0) + 1 for o in offsets}
            self._order[key] = fresh
            for view, queue_offset in zip(views, offsets, strict=True):
                info = ExtraInfo(
                    offset,
                    now,
                    invisible_time,
                    ORDER_REVIVE_QID,
                    False,
                    self.b.config.broker_name,
                    q,
                    queue_offset,
                )
                answer.records.append(with_pop_receipt(view, info.text(), None))
                # Deliveries so far, as RocketMQ's orderCountInfo counts them: the first
                # delivery is 0.
                count = fresh.attempts[queue_offset] - 1
                answer.order_counts.append(f"{_NORMAL} qo{q}%{queue_offset} {count}")
            answer.start_offsets.append(f"{_NORMAL} {q} {offset}")
            answer.msg_offsets.append(f"{_NORMAL} {q} {','.join(map(str, offsets))}")
            answer.rest += max(0, read[3] - offsets[-1] - 1)
        return answer

    def _ack_ordered(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """An orderly pop's message acknowledged: the group's offset moves past every
        message of the batch acknowledged before the first one still out."""
        key = (group, topic, queue_id)
        batch = self._order.get(key)
        committed = self.b.offsets.query(group, topic, queue_id)
        if batch is None:
            if offset == committed:  # given before a restart, acknowledged in order
                self.b.offsets.commit(group, topic, queue_id, offset + 1)
            return
        if offset not in batch.offsets:
            return  # a receipt of an older delivery
        batch.acked.add(offset)
        next_offset = committed
        for o in batch.offsets:
            if o not in batch.acked:
                break
            next_offset = o + 1
        if next_offset > committed:
            self.b.offsets.commit(group, topic, queue_id, next_offset)
        if len(batch.acked) == len(batch.offsets):
            del self._order[key]

    def _read_from(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        count: int,
        tags: Callable[[int], bool] | None,
        records: Callable[[memoryview], bool] | None,
    ) -> tuple[list[bytes], list[int], int, int] | None:
        """Up to ``count`` records of the queue from ``offset``: (the records, their queue
        offsets, the next offset, the queue's end); None when there are none, after moving
        the group's offset past what the filter skipped or to where a cut queue starts."""
        result = self.b.store.get_messages(
            topic, queue_id, offset, max_count=count, tag_filter=tags, record_filter=records
        )
        try:
            found = result.to_bytes() if result.status is GetStatus.FOUND else b""
        finally:
            result.release()
        if result.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            # The queue's oldest messages are gone (or it was cut): start where it is.
            self.b.offsets.commit(group, topic, queue_id, result.next_begin_offset)
            return None
        next_offset = max(offset, result.next_begin_offset)
        if not found:
            if next_offset > offset:  # messages the filter skipped
                self.b.offsets.commit(group, topic, queue_id, next_offset)
            return None
        views = [found[pos : pos + size] for pos, size in iter_records(found)]
        offsets = [LONG.unpack_from(v, POS_QUEUE_OFFSET)[0] for v in views]
        return views, offsets, next_offset, result.max_offset

    def _rest(self, group: str, topic: str, queue_id: int) -> int:
        offset = self.b.offsets.query(group, topic, queue_id)
        return max(0, self.b.store.max_offset_in_queue(topic, queue_id) - max(offset, 0))

    def _start_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """Where the group's pop of the queue starts: its offset; for a group that has none
        yet, where :meth:`init_offset` says, committed at once (RocketMQ does), so that
        what arrives before its next pop is its too."""
        offset = self.b.offsets.query(group, topic, queue_id)
        if offset < 0:
            offset = self.init_offset(topic, queue_id, init_mode)
            self.b.offsets.commit(group, topic, queue_id, offset)
        return offset

    def init_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        """Where a new group starts in a queue (RocketMQ's getInitOffset). A retry topic,
        or INIT_MODE_MIN: the oldest message. INIT_MODE_MAX: the first message while the
        queue still has it and it is within ``access_message_in_memory_max_ratio`` of
        memory from the CommitLog's end (``init_pop_offset_by_check_msg_in_mem``), else
        the queue's last message."""
        store = self.b.store
        if init_mode != INIT_MODE_MAX or topic.startswith("%RETRY%"):
            return store.min_offset_in_queue(topic, queue_id)
        cfg = self.b.config
        if (
            cfg.init_pop_offset_by_check_msg_in_mem
            and store.min_offset_in_queue(topic, queue_id) <= 0
        ):
            first = store.phy_offset_in_queue(topic, queue_id, 0)
            window = self._memory * cfg.access_message_in_memory_max_ratio // 100
            if first is not None and store.max_phy_offset - first <= window:
                return 0
        return max(0, store.max_offset_in_queue(topic, queue_id) - 1)

    async def _pop_queue(
        self,
        answer: PopAnswer,
        group: str,
        asked: str,
        topic: str,
        queue_id: int,
        max_nums: int,
        init_mode: int,
        tags: Callable[[int], bool] | None,
        records: Callable[[memoryview], bool] | None,
    ) -> None:
        key = (group, topic, queue_id)
        if key in self._busy:
            return  # another pop of this group is taking this queue's messages now
        self._busy.add(key)
        try:
            offset = self._start_offset(group, topic, queue_id, init_mode)
            count = max_nums - len(answer.records)
            read = self._read_from(group, topic, queue_id, offset, count, tags, records)
            if read is None:
                return
            views, offsets, next_offset, max_offset = read
            ck = {
                "so": offset,
                "pt": answer.pop_time,
                "it": answer.invisible_time,
                "bm": 0,
                "n": len(offsets),
                "q": queue_id,
                "t": topic,
                "c": group,
                "ro": -1,
                "d": [o - offset for o in offsets],
                "bn": self.b.config.broker_name,
            }
            await self._put_record(CK_TAG, ck, answer.revive_qid)
            self.b.offsets.commit(group, topic, queue_id, next_offset)
            retry = topic != asked
            for view, queue_offset in zip(views, offsets, strict=True):
                info = ExtraInfo(
                    offset,
                    answer.pop_time,
                    answer.invisible_time,
                    answer.revive_qid,
                    retry,
                    self.b.config.broker_name,
                    queue_id,
                    queue_offset,
                )
                answer.records.append(
                    with_pop_receipt(view, info.text(), asked.encode() if retry else None)
                )
            flag = _RETRY if retry else _NORMAL
            answer.start_offsets.append(f"{flag} {queue_id} {offset}")
            answer.msg_offsets.append(f"{flag} {queue_id} {','.join(map(str, offsets))}")
            answer.rest += max(0, max_offset - next_offset)
        finally:
            self._busy.discard(key)

    # -- ack and change ---------------------------------------------------------------

    def _check_receipt(self, group: str, topic: str, info: ExtraInfo) -> str:
        """The queue's topic the receipt is for (the topic or its pop retry topic)."""
        if group not in self.b.groups.groups:
            raise SubscriptionGroupNotExistError(
                f"consumer group {group!r} does not exist on this broker"
            )
        if self.b.topics.get(topic) is None:
            raise TopicNotExistError(f"topic {topic!r} does not exist on this broker")
        if info.revive_qid != ORDER_REVIVE_QID and not 0 <= info.revive_qid < self.revive_queues:
            raise MessageIllegalError(
                f"the receipt's revive queue {info.revive_qid} is not one of this broker's "
                f"{self.revive_queues}"
            )
        return pop_retry_topic(topic, group) if info.retry else topic

    async def verify_receipt(
        self, group: str, topic: str, info: ExtraInfo, commit_log_offset: int
    ) -> None:
        """Check that a receipt handle a client gave back is one this broker gave ``group``:
        the message at the receipt's queue offset of ``topic`` (or the group's pop retry
        topic of it) is the one at ``commit_log_offset``, and the pop it came from still
        waits for it (its check point is pending, or, for an orderly pop, the queue's batch
        holds it). NoMessageError otherwise: a forged, spent or expired handle acts on
        nothing."""
        real = self._check_receipt(group, topic, info)
        where = self.b.store.phy_offset_in_queue(real, info.queue_id, info.queue_offset)
        if where is None or where != commit_log_offset:
            raise NoMessageError(
                f"the receipt handle names no message of {real} queue {info.queue_id} at "
                f"offset {info.queue_offset} and CommitLog offset {commit_log_offset}"
            )
        if info.revive_qid == ORDER_REVIVE_QID:
            batch = self._order.get((group, real, info.queue_id))
            if batch is None or info.queue_offset not in batch.offsets:
                raise NoMessageError(
                    f"the receipt handle is not of a pending orderly pop of {real} queue "
                    f"{info.queue_id} by {group}"
                )
            return
        if not self._writing():
            raise NoMessageError("this broker does not hold the group's pops (it is not writing)")
        key = (real, group, info.queue_id, info.ck_offset, info.pop_time)
        deadline = time.monotonic() + _RECEIPT_DISPATCH_WAIT_S
        while True:
            self._read_revive_queue(info.revive_qid)
            ck = self._pending.get(info.revive_qid, {}).get(key)
            # A CK stored a moment ago may not be in its revive queue's index yet.
            if ck is not None or not self.b.store.dispatch_behind_bytes:
                break
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.005)
        diff = info.queue_offset - info.ck_offset
        if ck is None or diff not in ck.diffs or ck.acked >> ck.diffs.index(diff) & 1:
            raise NoMessageError(
                f"the receipt handle is not of a pending pop of {real} queue {info.queue_id} "
                f"by {group} (it was acknowledged, its invisible time ended, or it was never "
                "given)"
            )

    async def ack(
        self, group: str, topic: str, queue_id: int, extra_info: str, offset: int
    ) -> None:
        """Acknowledge the popped message at ``offset`` of the receipt's queue."""
        self.b.send._check_writable()
        info = ExtraInfo.parse(extra_info)
        real = self._check_receipt(group, topic, info)
        store = self.b.store
        lo = store.min_offset_in_queue(real, queue_id)
        hi = store.max_offset_in_queue(real, queue_id)
        if not lo <= offset < hi:
            raise NoMessageError(
                f"no message at offset {offset} of {real} queue {queue_id} (it holds {lo} to "
                f"{hi - 1})"
            )
        if info.revive_qid == ORDER_REVIVE_QID:
            self._ack_ordered(group, real, queue_id, offset)
            return
        ack = {
            "ao": offset,
            "so": info.ck_offset,
            "c": group,
            "t": real,
            "q": queue_id,
            "pt": info.pop_time,
            "bn": info.broker_name,
        }
        await self._put_record(ACK_TAG, ack, info.revive_qid)

    async def batch_ack(self, body: bytes | memoryview | None) -> int:
        """BATCH_ACK_MESSAGE: every ack of the body is checked before any is written; each
        entry's offsets are acknowledged with one record (tag ``bAck``, its offsets in
        ``aol``). -> how many offsets were acknowledged."""
        self.b.send._check_writable()
        try:
            acks = decode_batch_acks(body)
        except ValueError as exc:
            raise MessageIllegalError(str(exc)) from None
        checked = []
        for a in acks:
            info = ExtraInfo(
                a.start_offset, a.pop_time, a.invisible_time, a.revive_qid, a.retry, "", 0, 0
            )
            checked.append((a, self._check_receipt(a.group, a.topic, info)))
        count = 0
        for a, real in checked:
            if not a.bits:
                continue
            count += len(a.bits)
            if a.revive_qid == ORDER_REVIVE_QID:
                for offset in a.offsets:
                    self._ack_ordered(a.group, real, a.queue_id, offset)
                continue
            record = {
                "aol": a.offsets,
                "so": a.start_offset,
                "c": a.group,
                "t": real,
                "q": a.queue_id,
                "pt": a.pop_time,
                "bn": self.b.config.broker_name,
            }
            await self._put_record(BATCH_ACK_TAG, record, a.revive_qid)
        return count

    async def change_invisible(
        self,
        group: str,
        topic: str,
        queue_id: int,
        extra_info: str,
        offset: int,
        invisible_time: int,
    ) -> ExtraInfo:
        """Hide the popped message at ``offset`` for ``invisible_time`` ms from now: a new
        CK for it, then an ACK of the old one (RocketMQ's order: the message is never in
        neither). -> its new receipt."""
        self.b.send._check_writable()
        if not 0 <= invisible_time <= MAX_INVISIBLE_MS:
            raise MessageIllegalError(f"invisibleTime is {invisible_time} ms; it must be 0 to 12 h")
        info = ExtraInfo.parse(extra_info)
        real = self._check_receipt(group, topic, info)
        now = self.clock_ms()
        if info.revive_qid == ORDER_REVIVE_QID:
            # The queue stays locked for the new time (RocketMQ updates the lock's time).
            batch = self._order.get((group, real, queue_id))
            if batch is not None and offset in batch.offsets:
                batch.pop_time, batch.invisible_time = now, invisible_time
            return ExtraInfo(
                info.ck_offset,
                now,
                invisible_time,
                ORDER_REVIVE_QID,
                False,
                self.b.config.broker_name,
                queue_id,
                offset,
            )
        ck = {
            "so": offset,
            "pt": now,
            "it": invisible_time,
            "bm": 0,
            "n": 1,
            "q": queue_id,
            "t": real,
            "c": group,
            "ro": -1,
            "d": [0],
            "bn": self.b.config.broker_name,
        }
        await self._put_record(CK_TAG, ck, info.revive_qid)
        await self.ack(group, topic, queue_id, extra_info, offset)
        return ExtraInfo(
            offset,
            now,
            invisible_time,
            info.revive_qid,
            info.retry,
            self.b.config.broker_name,
            queue_id,
            offset,
        )

    async def _put_record(self, tag: str, body: dict[str, Any], qid: int) -> None:
        """Append a CK or ACK to revive queue ``qid`` and wait until it is stored as a
        send is (flush, quorum)."""
        topic = self.revive_topic
        self.b.topics.create_system(topic, self.revive_queues, PERM_READ | PERM_WRITE)
        record = encode_record(
            topic=topic.encode(),
            body=json.dumps(body, separators=(",", ":")).encode(),
            properties=encode_properties({PROPERTY_TAGS: tag}),
            born_timestamp=self.clock_ms(),
            born_host=encode_host(self.b.config.broker_addr),
        )
        await self.b.send.store_internal(record, topic, qid)

    # -- revive ------------------------------------------------------------------------

    async def _revive_loop(self) -> None:
        interval = self.b.config.revive_interval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.revive()
            except asyncio.CancelledError:
                raise
            except RocketqError as exc:
                log.debug("revive skipped: %s", exc)
            except Exception:
                log.exception("revive failed; trying again in %.1f s", interval)

    def _writing(self) -> bool:
        try:
            self.b.send._check_writable()
        except RocketqError:
            return False
        return self.b.store.running

    async def revive(self) -> int:
        """One turn: read what is new in every revive queue, then put back the messages
        of due CKs that have no ACK. -> how many were put back (or dead-lettered)."""
        if not self._writing():
            # A slave or a follower keeps no revive state: it rebuilds it when it writes.
            self._read.clear()
            self._pending.clear()
            return 0
        if self.b.topics.get(self.revive_topic) is None:
            self.turns += 1
            return 0
        count = 0
        for qid in range(self.revive_queues):
            self._read_revive_queue(qid)
            count += await self._revive_due(qid)
        self.turns += 1
        return count

    def _read_revive_queue(self, qid: int) -> None:
        store, topic = self.b.store, self.revive_topic
        offset = self._read.get(qid)
        if offset is None:
            offset = max(self.b.offsets.query(REVIVE_GROUP, topic, qid), 0)
            offset = max(offset, store.min_offset_in_queue(topic, qid))
        pending = self._pending.setdefault(qid, {})
        while True:
            result = store.get_messages(topic, qid, offset, max_count=_REVIVE_READ)
            try:
                data = result.to_bytes() if result.status is GetStatus.FOUND else b""
            finally:
                result.release()
            if result.status is GetStatus.OFFSET_TOO_SMALL:
                offset = result.next_begin_offset
                continue
            if not data:
                break
            for msg in decode_records(data):
                self._take(pending, msg.tags or "", msg.body, msg.queue_offset)
            offset = result.next_begin_offset
            if result.message_count < _REVIVE_READ:
                break
        self._read[qid] = offset

    def _take(
        self,
        pending: dict[tuple[str, str, int, int, int], CheckPoint],
        tag: str,
        body: bytes,
        revive_offset: int,
    ) -> None:
        try:
            doc = json.loads(body)
            if tag == CK_TAG:
                ck = CheckPoint(
                    str(doc["t"]),
                    str(doc["c"]),
                    int(doc["q"]),
                    int(doc["so"]),
                    int(doc["pt"]),
                    int(doc["it"]),
                    [int(d) for d in doc["d"]],
                    revive_offset,
                )
                if not is_valid_topic_name(ck.topic) or not is_valid_group_name(ck.group):
                    raise ValueError(
                        f"a check point of topic {ck.topic[:80]!r} and group {ck.group[:80]!r}: "
                        "not valid names"
                    )
                pending.setdefault(ck.key, ck)
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                key = (str(doc["t"]), str(doc["c"]), int(doc["q"]), int(doc["so"]), int(doc["pt"]))
                found = pending.get(key)
                if found is not None:  # else settled and gone already
                    offsets = doc["aol"] if tag == BATCH_ACK_TAG else [doc["ao"]]
                    for offset in offsets:
                        found.ack(int(offset))
                    if found.settled:
                        del pending[key]
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping revive record at %d: %s", revive_offset, exc)

    async def _revive_due(self, qid: int) -> int:
        pending = self._pending.get(qid, {})
        now = self.clock_ms()
        count = 0
        for key, ck in sorted(pending.items(), key=lambda kv: kv[1].revive_offset):
            if ck.due > now:
                continue
            for i, diff in enumerate(ck.diffs):
                if not ck.acked >> i & 1:
                    count += await self._revive_one(ck, ck.start + diff)
                    ck.acked |= 1 << i
            del pending[key]
        oldest = min((ck.revive_offset for ck in pending.values()), default=None)
        done = oldest if oldest is not None else self._read.get(qid, 0)
        topic = self.revive_topic
        if done != self.b.offsets.query(REVIVE_GROUP, topic, qid):
            self.b.offsets.commit(REVIVE_GROUP, topic, qid, done)
        return count

    async def _revive_one(self, ck: CheckPoint, offset: int) -> int:
        """Put the message at ``offset`` of the CK's queue back for another delivery."""
        store = self.b.store
        result = store.get_messages(ck.topic, ck.queue_id, offset, max_count=1)
        try:
            data = result.to_bytes() if result.status is GetStatus.FOUND else b""
        finally:
            result.release()
        msgs = decode_records(data) if data else []
        if not msgs or msgs[0].queue_offset != offset:
            log.warning(
                "pop revive: no message at offset %d of %s queue %d (removed?)",
                offset,
                ck.topic,
                ck.queue_id,
            )
            return 0
        msg = msgs[0]
        group_config = self.b.groups.find_or_create(ck.group)
        props = dict(msg.properties)
        original = props.get(PROPERTY_RETRY_TOPIC) or ck.topic
        props[PROPERTY_RETRY_TOPIC] = original
        props.setdefault(PROPERTY_FIRST_POP_TIME, str(ck.pop_time))
        if msg.reconsume_times >= group_config.retry_max_times:
            target = dlq_topic(ck.group)
            self.b.topics.create_system(target, 1, PERM_READ | PERM_WRITE)
            queue_id = 0
            self.dead_lettered += 1
            log.info(
                "popped message %s of group %s sent to %s after %d deliveries",
                msg.msg_id,
                ck.group,
                target,
                msg.reconsume_times + 1,
            )
        else:
            target = pop_retry_topic(original, ck.group)
            config = self.b.topics.create_system(
                target, group_config.retry_queue_nums, PERM_READ | PERM_WRITE
            )
            queue_id = random.randrange(config.write_queue_nums)
            self.revived += 1
        record = rewrite_record(msg, target, props, reconsume_times=msg.reconsume_times + 1)
        await self.b.send.store_internal(record, target, queue_id)
        return 1


def with_pop_receipt(record: bytes, extra_info: str, topic: bytes | None) -> bytes:
    """A stored record with the ``POP_CK`` property added (and its topic given back as
    ``topic``: a message of the pop retry topic goes out under the topic popped), its
    stamped fields as stored."""
    (body_len,) = INT.unpack_from(record, POS_BODY_LENGTH)
    tpos = POS_BODY + body_len
    tl = record[tpos]
    ppos = tpos + 1 + tl
    (pl,) = USHORT.unpack_from(record, ppos)
    props = record[ppos + 2 : ppos + 2 + pl] + f"{PROPERTY_POP_CK}\x01{extra_info}\x02".encode()
    name = record[tpos + 1 : tpos + 1 + tl] if topic is None else topic
    if len(props) > MAX_PROPERTIES_LENGTH:
        props = record[ppos + 2 : ppos + 2 + pl]
    head = bytearray(record[:tpos])
    INT.pack_into(head, 0, FIXED_SIZE + body_len + len(name) + len(props))
    return bytes(head) + bytes((len(name),)) + name + USHORT.pack(len(props)) + props
