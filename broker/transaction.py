"""Transactional messages (RocketMQ's TransactionalMessageService and its check service).

A prepared message is stored as a *half* message in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0
(its real topic and queue kept in properties), where no consumer sees it. The producer's
end of the transaction writes an *op* record to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` whose body
is the half message's queue offset and, on commit, the real message to its topic.

Every ``transaction_check_interval`` the check service walks the half queue from its saved
progress: a half message with an op record is done; one older than ``transaction_timeout``
(or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``) without one is written again with its check
count + 1 and a live producer of its group is asked how the transaction ended; one checked
``transaction_check_max`` times is discarded (logged). The walk stops at the first half
message too young to check. Progress through both queues is kept as the consumer offsets
of the system group ``CID_RMQ_SYS_TRANS``, persisted with the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rocketq.broker.metrics import BrokerCounters
from rocketq.common.exceptions import (
    MessageIllegalError,
    NoPermissionError,
    RocketqSystemError,
    ServiceNotAvailableError,
)
from rocketq.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    MessageExt,
    transaction_type,
)
from rocketq.common.record import (
    POS_SYS_FLAG,
    decode_record,
    encode_host,
    encode_properties,
    encode_record,
    iter_records,
    rewrite_record,
)

if TYPE_CHECKING:
    from rocketq.broker.host import BrokerHost

log = logging.getLogger(__name__)

SYSTEM_GROUP = "CID_RMQ_SYS_TRANS"
HALF_TOPIC_BYTES = TRANS_HALF_TOPIC.encode()
OP_TOPIC_BYTES = TRANS_OP_HALF_TOPIC.encode()
REMOVE_TAG = "d"
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
MAX_CHECKS_PER_RUN = 2000


def is_prepared(records: bytes) -> bool:
    """Whether the first record of a send is a prepared (half) transactional message."""
    if len(records) < POS_SYS_FLAG + 4:
        return False
    sys_flag = int.from_bytes(records[POS_SYS_FLAG : POS_SYS_FLAG + 4], "big")
    return transaction_type(sys_flag) == TRANSACTION_PREPARED_TYPE


def with_transaction_type(sys_flag: int, kind: int) -> int:
    return (sys_flag & ~0xC) | kind


class Resolution(enum.IntEnum):
    """How a producer ended a transaction."""

    UNKNOWN = 0  # not known yet: the check service asks again later
    COMMIT = 1
    ROLLBACK = 2


@dataclass(frozen=True, slots=True)
class CheckTransaction:
    """The broker asks a live producer of ``group`` how the transaction of a half message
    ended (it reaches the producer as CHECK_TRANSACTION_STATE)."""

    group: str
    commit_log_offset: int  # of the half message to resolve, as written again
    tran_state_table_offset: int  # its offset in the half queue
    msg_id: str
    transaction_id: str
    record: bytes  # the half message as stored


class EndRequest(Protocol):
    """What ending a transaction names (END_TRANSACTION's fields)."""

    @property
    def producer_group(self) -> str: ...
    @property
    def commit_log_offset(self) -> int: ...
    @property
    def tran_state_table_offset(self) -> int: ...
    @property
    def msg_id(self) -> str: ...
    @property
    def resolution(self) -> Resolution: ...
    @property
    def from_transaction_check(self) -> bool: ...


class TransactionalMessageService:
    def __init__(self, broker: BrokerHost) -> None:
        self.b = broker
        self.config = broker.config
        self._task: asyncio.Task[None] | None = None
        self.discarded = 0
        self.checks_sent = 0
        self.metrics: BrokerCounters | None = None  # set by the broker when metrics are on

    # -- prepare -----------------------------------------------------------------------

    def half(self, records: bytes, topic: str, queue_id: int) -> tuple[bytes, str, int]:
        """A prepared message rewritten as a half message (queue 0 of the half topic)."""
        if self.config.reject_transaction_message:
            raise NoPermissionError(
                f"the broker[{self.config.broker_addr}] sending transaction message is "
                "forbidden (reject_transaction_message)"
            )
        if len(list(iter_records(records))) != 1:
            raise MessageIllegalError(
                "a transactional message cannot be sent in a batch; send it by itself"
            )
        msg = decode_record(records)
        props = dict(msg.properties)
        if not props.get(PROPERTY_PRODUCER_GROUP):
            raise MessageIllegalError(
                "a transactional message needs its producer group (PGROUP) so the broker can "
                "check it; send it with TransactionProducer"
            )
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        # A half message is a plain record of the half queue (it needs a queue offset).
        sys_flag = with_transaction_type(msg.sys_flag, TRANSACTION_NOT_TYPE)
        return rewrite_record(msg, TRANS_HALF_TOPIC, props, sys_flag=sys_flag), TRANS_HALF_TOPIC, 0

    # -- end ---------------------------------------------------------------------------

    def _half_at(self, commit_log_offset: int) -> MessageExt:
        view = self.b.store.message_by_offset(commit_log_offset)
        if view is None:
            raise RocketqSystemError(
                f"no half message at CommitLog offset {commit_log_offset} (already ended, "
                "expired or never stored)"
            )
        try:
            msg = decode_record(view)
        finally:
            view.release()
        if msg.topic != TRANS_HALF_TOPIC:
            raise RocketqSystemError(
                f"the message at CommitLog offset {commit_log_offset} is not a half message"
            )
        return msg

    def check_half_topic(self, commit_log_offset: int, topic: str) -> None:
        """NoPermissionError unless the half message at ``commit_log_offset`` is one of
        ``topic`` (its real topic): what a v5 client's EndTransaction may end, for a user
        whose policies were checked on that topic."""
        half = self._half_at(commit_log_offset)
        real = half.properties.get(PROPERTY_REAL_TOPIC, "")
        if real != topic:
            raise NoPermissionError(
                f"the half message at CommitLog offset {commit_log_offset} is not of topic "
                f"{topic!r}"
            )

    async def end(self, req: EndRequest) -> None:
        """Commit or roll back a half message; UNKNOWN leaves it to the check service."""
        if self.config.broker_role == "SLAVE":
            raise NoPermissionError("a slave cannot end transactions; ask the master")
        resolution = req.resolution
        if resolution == Resolution.UNKNOWN:
            log.info(
                "transaction of %s (group %s) still unknown%s",
                req.msg_id,
                req.producer_group,
                " after a check" if req.from_transaction_check else "",
            )
            return
        half = self._half_at(req.commit_log_offset)
        group = half.properties.get(PROPERTY_PRODUCER_GROUP, "")
        if group != req.producer_group:
            raise RocketqSystemError(
                f"the half message belongs to producer group {group!r}, not {req.producer_group!r}"
            )
        if half.queue_offset != req.tran_state_table_offset:
            raise RocketqSystemError(
                f"the half message at {req.commit_log_offset} has queue offset "
                f"{half.queue_offset}, not {req.tran_state_table_offset}"
            )
        store = self.b.store
        if resolution == Resolution.COMMIT:
            props = dict(half.properties)
            topic = props.pop(PROPERTY_REAL_TOPIC, "")
            try:
                queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, ""))
            except ValueError:
                queue_id = -1
            if not topic or queue_id < 0:
                raise RocketqSystemError(f"half message {req.msg_id} lost its real topic/queue")
            props.pop(PROPERTY_TRANSACTION_PREPARED, None)
            props.pop(PROPERTY_TRANSACTION_CHECK_TIMES, None)
            record = rewrite_record(
                half,
                topic,
                props,
                sys_flag=with_transaction_type(half.sys_flag, TRANSACTION_COMMIT_TYPE),
                prepared_transaction_offset=req.commit_log_offset,
            )
            appended = store.append(record, topic, queue_id)
            await store.wait_stored(appended.end_offset)
        self._write_op(half.queue_offset)
        if self.metrics is not None:
            self.metrics.ended(
                half.properties.get(PROPERTY_REAL_TOPIC, ""),
                committed=resolution == Resolution.COMMIT,
            )

    def _write_op(self, half_queue_offset: int) -> None:
        record = encode_record(
            topic=OP_TOPIC_BYTES,
            body=str(half_queue_offset).encode(),
            properties=encode_properties({"TAGS": REMOVE_TAG}),
            born_timestamp=int(time.time() * 1000),
            born_host=encode_host(self.config.broker_addr),
        )
        self.b.store.append(record, TRANS_OP_HALF_TOPIC, 0)

    # -- check -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._check_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.transaction_check_interval / 1000)
            try:
                self.check()
            except ServiceNotAvailableError as exc:  # the store refuses writes (a full disk)
                log.debug("transaction check waits: %s", exc)
            except Exception:
                log.exception("transaction check failed; trying again next round")

    def _read(self, topic: bytes, offset: int) -> MessageExt | None:
        cq = self.b.store.queues.get(topic, 0)
        entry = cq.entry(offset) if cq is not None else None
        if entry is None:
            return None
        view = self.b.store.message_by_offset(entry[0])
        if view is None:
            return None
        try:
            return decode_record(view)
        finally:
            view.release()

    def _queue_bounds(self, topic: bytes) -> tuple[int, int]:
        cq = self.b.store.queues.get(topic, 0)
        return (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)

    def check(self) -> int:
        """One round over the half queue; -> how many producers were asked."""
        offsets = self.b.offsets
        half_min, half_max = self._queue_bounds(HALF_TOPIC_BYTES)
        op_min, op_max = self._queue_bounds(OP_TOPIC_BYTES)
        half_done = max(offsets.query(SYSTEM_GROUP, TRANS_HALF_TOPIC, 0), half_min)
        op_done = max(offsets.query(SYSTEM_GROUP, TRANS_OP_HALF_TOPIC, 0), op_min)
        # Which half offsets are ended, from the op records not yet behind us.
        ended: dict[int, int] = {}
        for i in range(op_done, op_max):
            op = self._read(OP_TOPIC_BYTES, i)
            if op is None:
                continue
            try:
                ended[int(op.body)] = i
            except ValueError:
                log.warning("op record %d has a body that is not an offset; ignored", i)
        now = int(time.time() * 1000)
        timeout = self.config.transaction_timeout
        asked = 0
        i = half_done
        while i < half_max and asked < MAX_CHECKS_PER_RUN:
            if i in ended:
                i += 1
                continue
            half = self._read(HALF_TOPIC_BYTES, i)
            if half is None:
                i += 1
                continue
            checks = int(half.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0") or 0)
            if checks >= self.config.transaction_check_max:
                self.discarded += 1
                if self.metrics is not None:
                    self.metrics.discarded(half.properties.get(PROPERTY_REAL_TOPIC, ""))
                log.warning(
                    "half message %s of group %s checked %d times without an answer; discarded",
                    half.msg_id,
                    half.properties.get(PROPERTY_PRODUCER_GROUP, ""),
                    checks,
                )
                i += 1
                continue
            immunity = timeout
            raw = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if raw and raw.isdigit() and checks == 0:
                immunity = max(timeout, int(raw) * 1000)
            if now - half.born_timestamp < immunity:
                break  # this one and every later one is too young
            self._check_again(half, checks + 1)
            asked += 1
            i += 1
        offsets.commit(SYSTEM_GROUP, TRANS_HALF_TOPIC, 0, i)
        # Op records can go once every half offset they end is behind the progress.
        new_op_done = op_done
        for offset, op_index in sorted(ended.items(), key=lambda kv: kv[1]):
            if offset >= i or op_index != new_op_done:
                break
            new_op_done += 1
        offsets.commit(SYSTEM_GROUP, TRANS_OP_HALF_TOPIC, 0, new_op_done)
        return asked

    def _check_again(self, half: MessageExt, checks: int) -> None:
        """Write the half message again (check count + 1) and ask a producer about it."""
        props = dict(half.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(checks)
        record = rewrite_record(half, TRANS_HALF_TOPIC, props)
        appended = self.b.store.append(record, TRANS_HALF_TOPIC, 0)
        group = props.get(PROPERTY_PRODUCER_GROUP, "")
        event = CheckTransaction(
            group=group,
            commit_log_offset=appended.wrote_offset,
            tran_state_table_offset=appended.queue_offset,
            msg_id=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, half.offset_msg_id),
            transaction_id=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
            record=record,
        )
        if self.b.consumers.tell_producer(group, event):
            self.checks_sent += 1
        else:
            log.warning(
                "no live producer of group %s to check transaction %s; asking again later",
                group,
                half.msg_id,
            )
