"""Send: checks, topic auto-creation, the store append, and consumer send-back (retry and
dead-letter queues). The records travel and are stored as one blob; nothing here builds a
per-message object on the send path."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Final, Protocol

from rocketq.broker.config import BrokerConfig
from rocketq.broker.flow_control import FlowControl
from rocketq.broker.metrics import DELAY, FIFO, NORMAL, TRANSACTION, BrokerCounters
from rocketq.broker.schedule import ScheduleMessageService, delay_level_of
from rocketq.broker.stats import BrokerStats
from rocketq.broker.subscription_group import SubscriptionGroupManager
from rocketq.broker.timer import TimerMessageStore
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.broker.transaction import TransactionalMessageService, is_prepared
from rocketq.common.exceptions import (
    FlushDiskTimeoutError,
    FlushSlaveTimeoutError,
    MessageIllegalError,
    NoPermissionError,
    NotLeaderError,
    QueryNotFoundError,
    RocketqSystemError,
    ServiceNotAvailableError,
)
from rocketq.common.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PERM_READ,
    PERM_WRITE,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_SHARDING_KEY,
    RETRY_GROUP_TOPIC_PREFIX,
    TRACE_TOPIC,
    TRANSACTION_TYPE_MASK,
    TopicConfig,
    dlq_topic,
    retry_topic,
    send_forbidden_reason,
)
from rocketq.common.record import (
    FIXED_SIZE,
    POS_BODY,
    POS_SYS_FLAG,
    SIZE_MAGIC_SYSFLAG_BODYLEN,
    decode_record,
    iter_records,
    rewrite_record,
)
from rocketq.replication.ha.master import HAMaster
from rocketq.storage.commitlog import AppendResult
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutResult, PutStatus

log = logging.getLogger(__name__)

# A message with a sharding key is a FIFO message (RocketMQ 5's TopicMessageType).
SHARDING_KEY_NAME: Final = PROPERTY_SHARDING_KEY.encode() + b"\x01"
# What a batch may not hold: a delay level, a delivery time (checked on the bytes first).
_DELAY = b"DELAY\x01"
_TIMER_DELIVER_MS = b"TIMER_DELIVER_MS\x01"
DEL_NAMES: Final = b"DEL"  # in both names
# What the builder of a batch's records (wire.send.batch_records) noted in their
# properties, so that check_batch and the metrics need not search them again: a name
# holding "DEL" (a delay level or a delivery time may be there), a sharding key (a FIFO
# message). UNKNOWN_TRAITS: nothing was looked at; the records are searched.
MAY_DELAY: Final = 1
SHARDED: Final = 2
UNKNOWN_TRAITS: Final = -1


class Quorum(Protocol):
    """What sends need from a Raft member (``raft_member.RaftMember``): whether this
    member may write now, and a call when a quorum has what was written."""

    def check_writable(self) -> None: ...

    def wait_committed_then(
        self,
        end_offset: int,
        timeout: float,
        done: Callable[[PutStatus | NotLeaderError], None],
    ) -> None: ...

    async def wait_committed(self, end_offset: int, timeout: float) -> PutStatus: ...


class SendProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        flow: FlowControl,
        schedule: ScheduleMessageService | None = None,
        transactions: TransactionalMessageService | None = None,
        timer: TimerMessageStore | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.flow = flow
        self.schedule = schedule
        self.transactions = transactions
        self.timer = timer
        # SYNC_MASTER: sends also wait for a slave (set by the broker).
        self.ha: HAMaster | None = None
        # Raft mode: only the serving leader writes; sends wait for a quorum commit.
        self.raft: Quorum | None = None
        self._flush_waits: set[asyncio.Task[PutStatus]] = set()  # of wait_stored_then
        # What sends store, for the metrics (None: metrics off, nothing counted).
        self.metrics: BrokerCounters | None = None
        self.stats = BrokerStats()  # the broker's own, set by the broker
        # Topics whose name a batch may use (see sendable_topic) -> their bytes, and their
        # length byte and bytes (a record's topic field).
        self.sendable: dict[str, tuple[bytes, bytes]] = {}

    @property
    def waits(self) -> bool:
        """Whether a stored send waits before it is answered (flush or slave)."""
        return self.store.waits_for_flush or self.ha is not None or self.raft is not None

    def _check_writable(self) -> None:
        if self.raft is not None:
            self.raft.check_writable()
        elif self.config.broker_role == "SLAVE":
            raise ServiceNotAvailableError(
                f"broker {self.config.broker_name} id {self.config.broker_id} is a slave; "
                "send to the master"
            )
        if not self.config.broker_permission & PERM_WRITE:
            raise NoPermissionError(
                f"the broker[{self.config.broker_addr}] sending message is forbidden"
            )

    def append(
        self,
        records: bytes,
        topic: str,
        queue_id: int,
        *,
        default_topic: str = "",
        default_queue_nums: int = 0,
        producer_group: str = "",
        batch: bool = False,
        traits: int = UNKNOWN_TRAITS,
    ) -> AppendResult:
        """Check and store a single record or a batch a client sent for one topic and
        queue (no wait). A batch (``batch``: the request was one, however many records it
        holds) is refused, as RocketMQ's broker refuses it, when it goes to a retry topic or
        holds a delayed, timed or transactional message."""
        self._check_writable()
        self.flow.check()
        self._check_name(topic, producer_group, batch)
        config = self.topics.create_in_send(topic, default_topic, default_queue_nums)
        if not config.writable():
            raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
        if not 0 <= queue_id < config.write_queue_nums:
            # SYSTEM_ERROR as RocketMQ: the producer refreshes its route and tries again.
            raise RocketqSystemError(
                f"queue id {queue_id} is illegal: topic {topic} has {config.write_queue_nums} "
                "write queues on this broker (refresh the route)"
            )
        if batch:
            check_batch(records, traits)
            # Nothing to redirect (no delay, timer or transaction): stored as it came.
            kind = FIFO if self.metrics is not None and _sharded(records, traits) else NORMAL
            result = self.store.append(records, topic, queue_id)
        else:
            result, kind = self._append(records, topic, queue_id)
        self.stats.puts += result.msg_count
        if self.metrics is not None:
            self.metrics.stored(topic, kind, result.msg_count, len(records))
        return result

    def accepting(self) -> None:
        """Raise when the broker takes no sends now (a slave, a full disk, flow control):
        what refuses every part of a topics batch alike."""
        self._check_writable()
        self.flow.check()

    def part_config(
        self,
        topic: str,
        queue_id: int,
        config: TopicConfig | None,
        default_topic: str,
        default_queue_nums: int,
    ) -> None:
        """The checks of one part of a topics batch (a topic's batch for one queue) that
        need its topic's config (``config``: the broker's, or None to create the topic as
        a send does): writable, and the queue one of its write queues."""
        if config is None:
            config = self.topics.create_in_send(topic, default_topic, default_queue_nums)
        if not config.perm & PERM_WRITE:  # config.writable(), without the call
            raise NoPermissionError(f"the topic[{topic}] sending message is forbidden")
        if not 0 <= queue_id < config.write_queue_nums:
            raise RocketqSystemError(
                f"queue id {queue_id} is illegal: topic {topic} has "
                f"{config.write_queue_nums} write queues on this broker (refresh the route)"
            )

    def store_parts(
        self, ready: list[tuple[bytes, bytes, int]], topics: list[str], traits: list[int]
    ) -> list[AppendResult | MessageIllegalError]:
        """Store parts of a topics batch that passed :meth:`accepting`,
        :meth:`sendable_topic`, :meth:`part_config` and check_batch, each ``(records,
        topic bytes, queue id)``, together (one CommitLog write) -> each one's result or
        the error that refused it, and count what was stored. ``topics`` and ``traits``:
        each part's topic and what batch_records noted (or UNKNOWN_TRAITS)."""
        stored = self.store.append_parts(ready)
        metrics = self.metrics
        puts = 0
        for i in range(len(stored)):
            result = stored[i]
            if isinstance(result, AppendResult):
                puts += result.msg_count
                if metrics is not None:
                    records = ready[i][0]
                    kind = FIFO if _sharded(records, traits[i]) else NORMAL
                    metrics.stored(topics[i], kind, result.msg_count, len(records))
        self.stats.puts += puts
        return stored

    def sendable_topic(self, topic: str, producer_group: str) -> tuple[bytes, bytes]:
        """The checks of a batch's topic that depend on its name alone (and the producer
        group, for the trace topic) -> its bytes, and its length byte and bytes (a
        record's topic field); a name that passes is remembered in :attr:`sendable` (the
        trace topic, allowed for one group only, is not)."""
        raw = self._check_name(topic, producer_group, True)
        known = (raw, bytes((len(raw),)) + raw)
        if topic != TRACE_TOPIC and len(self.sendable) < 100_000:
            self.sendable[topic] = known
        return known

    def _check_name(self, topic: str, producer_group: str, batch: bool) -> bytes:
        """Whether a client may send to a topic of that name -> its bytes (length and
        characters checked, with a clear error)."""
        if batch and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # RocketMQ's SendMessageProcessor: MESSAGE_ILLEGAL with this remark.
            raise MessageIllegalError(
                f"batch request does not support retry group {topic}; a consumer gives a "
                "message back to its group's retry topic one by one (RECONSUME_LATER)"
            )
        forbidden = send_forbidden_reason(topic, producer_group)
        if forbidden is not None:
            raise NoPermissionError(f"sending to topic {topic} is forbidden: it is {forbidden}")
        if topic == AUTO_CREATE_TOPIC_KEY_TOPIC:
            raise MessageIllegalError(
                f"the topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC; "
                "send to a topic of your own"
            )
        return self.store.topic_bytes(topic)

    def _append(self, records: bytes, topic: str, queue_id: int) -> tuple[AppendResult, str]:
        """Store records; a delayed message goes to its level's queue of SCHEDULE_TOPIC_XXXX,
        a prepared (transactional) one to the half queue. -> the result and the message
        type (normal, fifo, delay, transaction)."""
        if self.transactions is not None and is_prepared(records):
            half = self.transactions.half(records, topic, queue_id)
            result = self.store.append(*half)
            if self.metrics is not None:
                self.metrics.prepared(topic)
            return result, TRANSACTION
        if self.timer is not None:
            timed = self.timer.check_and_redirect(records, topic, queue_id)
            if timed is not None:
                return self.store.append(*timed), DELAY
        if self.schedule is not None:
            delayed = self.schedule.redirect(records, topic, queue_id)
            if delayed is not None:
                return self.store.append(*delayed), DELAY
        # Only the metrics tell FIFO from normal: with them off, no scan of the records.
        kind = (
            FIFO
            if self.metrics is not None and has_property(records, SHARDING_KEY_NAME)
            else NORMAL
        )
        return self.store.append(records, topic, queue_id), kind

    def wait_stored_then(
        self, end_offset: int, done: Callable[[PutStatus | BaseException], None]
    ) -> None:
        """Call ``done`` with the status of the stored sends ending at ``end_offset`` once
        their waits are over: the flush (SYNC_FLUSH), then a slave (SYNC_MASTER) or a
        quorum (Raft), each only while the status is PUT_OK; or with the error that ended
        them. The slave and quorum waits answer from the callback that reads the
        acknowledgement or the commit, with no task in between; only a flush wait runs in
        a task."""
        self.flow.in_flight += 1

        def finish(status: PutStatus | BaseException) -> None:
            self.flow.in_flight -= 1
            done(status)

        if not self.store.waits_for_flush:
            self._replicas_then(end_offset, PutStatus.PUT_OK, finish)
            return
        task = asyncio.ensure_future(self.store.wait_stored(end_offset))
        self._flush_waits.add(task)
        task.add_done_callback(self._flush_waits.discard)
        task.add_done_callback(lambda t: self._replicas_then(end_offset, _outcome(t), finish))

    def _replicas_then(
        self,
        end_offset: int,
        status: PutStatus | BaseException,
        done: Callable[[PutStatus | BaseException], None],
    ) -> None:
        timeout = self.store.config.sync_flush_timeout / 1000
        raft = self.raft

        metrics = self.metrics
        if metrics is not None and status is PutStatus.PUT_OK and (self.ha or raft):
            done = _timed(done, metrics, time.perf_counter())

        def quorum(status: PutStatus | BaseException) -> None:
            if raft is None or status is not PutStatus.PUT_OK:
                done(status)
            else:
                raft.wait_committed_then(end_offset, timeout, done)

        if self.ha is None or status is not PutStatus.PUT_OK:
            quorum(status)
        else:
            self.ha.wait_slave_then(end_offset, timeout, quorum)

    async def resend(self, group: str, commit_log_offset: int) -> AppendResult:
        """A stored message (typically a dead letter) goes to ``group`` again: a copy on
        %RETRY%group, due at once, with its reconsume count back at 0; consumers of the
        group see it under its original topic."""
        self._check_writable()
        self.groups.find_or_create(group)
        view = self.store.message_by_offset(commit_log_offset)
        if view is None:
            raise QueryNotFoundError(
                f"no message at CommitLog offset {commit_log_offset} to resend"
            )
        try:
            msg = decode_record(view)
        finally:
            view.release()
        props = dict(msg.properties)
        props[PROPERTY_RETRY_TOPIC] = _origin_topic(msg.topic, props)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.offset_msg_id)
        props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        target = retry_topic(group)
        config = self.topics.create_system(
            target, self.groups.find_or_create(group).retry_queue_nums, PERM_READ | PERM_WRITE
        )
        record = rewrite_record(msg, target, props, reconsume_times=0)
        appended = self.store.append(record, target, random.randrange(config.write_queue_nums))
        result = PutResult(await self.store.wait_stored(appended.end_offset), appended)
        if result.status is PutStatus.FLUSH_DISK_TIMEOUT:
            raise FlushDiskTimeoutError("the resent copy was stored but its flush timed out")
        if self.raft is not None:
            timeout = self.store.config.sync_flush_timeout / 1000
            if await self.raft.wait_committed(appended.end_offset, timeout) != PutStatus.PUT_OK:
                raise FlushSlaveTimeoutError("the resent copy was stored but no quorum has it yet")
        log.info("message %s resent to group %s through %s", msg.offset_msg_id, group, target)
        return appended

    async def store_internal(self, record: bytes, topic: str, queue_id: int) -> AppendResult:
        """Append a record the broker made itself (a pop's check point or acknowledgement,
        a popped message put back) and wait as a send waits: the flush under SYNC_FLUSH,
        a quorum in Raft mode; raises when either times out."""
        self._check_writable()
        appended = self.store.append(record, topic, queue_id)
        status = await self.store.wait_stored(appended.end_offset)
        if status is PutStatus.FLUSH_DISK_TIMEOUT:
            raise FlushDiskTimeoutError(f"a record on {topic} was stored but its flush timed out")
        if self.raft is not None:
            timeout = self.store.config.sync_flush_timeout / 1000
            if await self.raft.wait_committed(appended.end_offset, timeout) != PutStatus.PUT_OK:
                raise FlushSlaveTimeoutError(
                    f"a record on {topic} was stored but no quorum has it yet"
                )
        return appended

    async def send_back(
        self,
        group: str,
        commit_log_offset: int,
        delay_level: int,
        max_reconsume_times: int,
        *,
        origin_topic: str | None = None,
    ) -> AppendResult:
        """A consumer gives a message back: to %RETRY%group with a delay level, or after
        the group's max reconsume times to %DLQ%group. With ``origin_topic`` (checked when
        authorization is on: the sender was allowed to read that topic and the group, not
        the whole store), the message must be of that topic or the group's retry topic."""
        self._check_writable()
        view = self.store.message_by_offset(commit_log_offset)
        if view is None:
            raise QueryNotFoundError(
                f"no message at CommitLog offset {commit_log_offset} to send back"
            )
        try:
            msg = decode_record(view)
        finally:
            view.release()
        if origin_topic is not None and msg.topic not in (origin_topic, retry_topic(group)):
            raise NoPermissionError(
                f"the message at CommitLog offset {commit_log_offset} is not of topic "
                f"{origin_topic!r} nor of group {group!r}'s retry topic"
            )
        group_config = self.groups.find_or_create(group)
        max_times = (
            max_reconsume_times if max_reconsume_times >= 0 else group_config.retry_max_times
        )
        props = dict(msg.properties)
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.offset_msg_id)
        reconsume = msg.reconsume_times + 1
        if msg.reconsume_times >= max_times or delay_level < 0:
            if self.metrics is not None:
                self.metrics.dead_lettered(props[PROPERTY_RETRY_TOPIC], group)
            target = dlq_topic(group)
            self.topics.create_system(target, 1, PERM_READ | PERM_WRITE)
            queue_id = 0
            props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
            log.info(
                "message %s of group %s sent to %s after %d reconsumes",
                msg.msg_id,
                group,
                target,
                msg.reconsume_times,
            )
        else:
            target = retry_topic(group)
            config = self.topics.create_system(
                target, group_config.retry_queue_nums, PERM_READ | PERM_WRITE
            )
            queue_id = random.randrange(config.write_queue_nums)
            level = delay_level if delay_level > 0 else 3 + msg.reconsume_times
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        record = rewrite_record(msg, target, props, reconsume_times=reconsume)
        appended, _ = self._append(record, target, queue_id)
        result = PutResult(await self.store.wait_stored(appended.end_offset), appended)
        if result.status is PutStatus.FLUSH_DISK_TIMEOUT:
            raise FlushDiskTimeoutError("the retry copy was stored but its flush timed out")
        if self.raft is not None:
            timeout = self.store.config.sync_flush_timeout / 1000
            if await self.raft.wait_committed(appended.end_offset, timeout) != PutStatus.PUT_OK:
                raise FlushSlaveTimeoutError("the retry copy was stored but no quorum has it yet")
        return result.append


def check_batch(records: bytes, traits: int = UNKNOWN_TRAITS) -> None:
    """Refuse a batch's records (RocketMQ's CommitLog.asyncPutMessages refuses the batch as
    MESSAGE_ILLEGAL) if it is transactional or a record has a delay level or a delivery
    time. Only the records' properties are searched (not their bodies), and not at all
    when ``traits`` (batch_records') says none holds "DEL"; only a record whose properties
    name DELAY is decoded, to read its level."""
    # Every record has the header's sys flag; its transaction bits are in its last byte
    # (read as a byte: no struct call, this runs once per stored batch).
    if len(records) >= POS_SYS_FLAG + 4 and records[POS_SYS_FLAG + 3] & TRANSACTION_TYPE_MASK:
        raise MessageIllegalError(
            "a transactional message cannot be sent in a batch; send it by itself"
        )
    if traits >= 0 and not traits & MAY_DELAY:
        return  # no property name holds "DEL" (batch_records looked)
    if not has_property(records, DEL_NAMES):
        return  # both names below hold it: one search over the properties, most batches
    if has_property(records, _TIMER_DELIVER_MS):
        raise MessageIllegalError(
            "a batch cannot hold messages with a delivery time; send them one by one"
        )
    if has_property(records, _DELAY):
        for pos, _size in iter_records(records):
            if delay_level_of(decode_record(records, pos)) > 0:
                raise MessageIllegalError(
                    "a batch cannot hold delayed messages (TimeDelayLevel is not supported "
                    "for batching); send them one by one"
                )


def _sharded(records: bytes, traits: int) -> bool:
    """Whether a message of the records has a sharding key (a FIFO message)."""
    if traits >= 0:
        return bool(traits & SHARDED)
    return has_property(records, SHARDING_KEY_NAME)


def has_property(records: bytes, needle: bytes) -> bool:
    """Whether ``needle`` (``NAME\x01``) occurs in the properties of any of the records,
    searched in place, record by record, without their bodies. Where the bytes stop being
    records the rest is searched whole (the answer may then be a false yes, never a false
    no)."""
    n = len(records)
    pos = 0
    while pos < n:
        if n - pos < FIXED_SIZE:
            break
        size, _magic, _sys_flag, body_len = SIZE_MAGIC_SYSFLAG_BODYLEN.unpack_from(records, pos)
        end = pos + size
        topic_at = pos + POS_BODY + body_len
        if size < FIXED_SIZE or end > n or body_len < 0 or topic_at + 3 > end:
            break
        props_at = topic_at + 1 + records[topic_at] + 2
        if props_at > end:
            break
        if records.find(needle, props_at, end) >= 0:
            return True
        pos = end
    return pos < n and records.find(needle, pos) >= 0


def _origin_topic(topic: str, props: dict[str, str]) -> str:
    """The topic a message was first sent to (retry and DLQ copies carry it)."""
    return props.get(PROPERTY_RETRY_TOPIC) or topic


def _timed(
    done: Callable[[PutStatus | BaseException], None], metrics: BrokerCounters, started: float
) -> Callable[[PutStatus | BaseException], None]:
    """``done``, recording first how long the send waited for its replicas."""

    def timed(status: PutStatus | BaseException) -> None:
        metrics.waited_for_replicas(started)
        done(status)

    return timed


def _outcome(task: asyncio.Task[PutStatus]) -> PutStatus | BaseException:
    if task.cancelled():
        return ServiceNotAvailableError("the broker is stopping; send again")
    exc = task.exception()
    return exc if exc is not None else task.result()
