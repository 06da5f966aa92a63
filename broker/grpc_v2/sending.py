"""The sending RPCs of the v2 endpoint: SendMessage stores one message through the broker's
send path (``TAGS``, ``KEYS``, ``UNIQ_KEY``, a FIFO message's group as ``__SHARDINGKEY``
choosing its queue, a delay as ``TIMER_DELIVER_MS``, a transactional message as a half
message whose producer group is its topic), EndTransaction commits or rolls back a half
message by the transaction id SendMessage gave (where it is in the CommitLog and its
queue).

A store that refuses writes (a full disk, a failed write or fsync: remoting code 14) is
answered INTERNAL_SERVER_ERROR with RocketMQ's text, as RocketMQ 5's proxy answers the
broker's SERVICE_NOT_AVAILABLE (its ResponseBuilder maps no v2 code to 14); the v5 clients
retry a send so answered on another broker."""

from __future__ import annotations

import asyncio
import itertools
import zlib
from dataclasses import dataclass
from typing import Any

from rocketq.broker.grpc_v2 import convert as v2
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as s
from rocketq.broker.grpc_v2.base import RpcBase
from rocketq.broker.grpc_v2.convert import (
    OK,
    EndpointHost,
    error_status,
)
from rocketq.broker.transaction import Resolution
from rocketq.common.exceptions import (
    DiskFullError,
    FlushDiskTimeoutError,
    FlushSlaveTimeoutError,
    MessageIllegalError,
    RocketqError,
    StoreFailedError,
)
from rocketq.common.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from rocketq.common.record import (
    encode_host,
    encode_properties,
    encode_record,
)
from rocketq.remoting.codes import MessageSysFlag
from rocketq.storage.results import PutStatus


class SendRpcs(RpcBase):
    """The sending RPCs, a part of the endpoint."""

    def __init__(self, broker: EndpointHost) -> None:
        super().__init__(broker)
        self._next_queue = itertools.count()  # the queue of the next send that is not FIFO

    @v2.timed("send_message")
    async def SendMessage(
        self, request: s.SendMessageRequest, context: Any
    ) -> s.SendMessageResponse:
        refused = self._refusal(
            "SendMessage", context, request.messages[0].topic.name if request.messages else "", ""
        )
        if refused is not None:
            return s.SendMessageResponse(status=refused)
        if len(request.messages) != 1:
            return s.SendMessageResponse(
                status=v2.status(d.Code.BAD_REQUEST, "send one message per request")
            )
        msg = request.messages[0]
        illegal = v2.illegal_topic(msg.topic.name)
        if illegal is not None:
            return s.SendMessageResponse(status=illegal)
        if self.b.topics.get(msg.topic.name) is None:
            # Sending would create the topic: Create on it is needed too.
            refused = self._creation_refusal(context, msg.topic.name)
            if refused is not None:
                return s.SendMessageResponse(status=refused)
        try:
            entry = await self._send(msg, context.peer())
        except _PropertyKeyError as exc:
            return s.SendMessageResponse(
                status=v2.status(d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, str(exc))
            )
        except RocketqError as exc:
            return s.SendMessageResponse(status=_send_error_status(exc))
        return s.SendMessageResponse(status=v2.status(OK), entries=[entry])

    async def _send(self, msg: d.Message, peer: str) -> s.SendResultEntry:
        topic = msg.topic.name
        sp = msg.system_properties
        if not msg.body:
            raise MessageIllegalError("the message body is empty")
        props = dict(msg.user_properties)
        clash = sorted(set(props) & v2.HIDDEN)
        if clash:
            raise _PropertyKeyError(f"property is used by system: {', '.join(clash)}")
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
        # What RocketMQ 5's proxy keeps of the client's system properties besides: the
        # born host it names (else the address it sent from), its born time, its trace
        # context and how long an open transaction waits for its first check.
        host, _, port = peer.rpartition(":") if peer.startswith("ipv4:") else ("", "", "0")
        host = host.removeprefix("ipv4:")
        if sp.born_host or host:
            props[v2.PROPERTY_BORN_HOST] = sp.born_host or host
        if sp.HasField("born_timestamp"):
            props[v2.PROPERTY_BORN_TIMESTAMP] = str(v2.ms(sp.born_timestamp))
        if sp.trace_context:
            props[v2.PROPERTY_TRACE_CONTEXT] = sp.trace_context
        if sp.HasField("tag"):
            props[PROPERTY_TAGS] = sp.tag
        if sp.keys:
            props[PROPERTY_KEYS] = " ".join(sp.keys)
        kind = sp.message_type
        config = self.b.topics.get(topic) or self.b.topics.create_in_send(
            topic, AUTO_CREATE_TOPIC_KEY_TOPIC, 0
        )
        queues = max(1, config.write_queue_nums)
        if kind == d.MessageType.FIFO:
            if not sp.message_group:
                raise MessageIllegalError("a FIFO message needs a message group")
            props[PROPERTY_SHARDING_KEY] = sp.message_group
            queue_id = zlib.crc32(sp.message_group.encode()) % queues
        else:
            queue_id = next(self._next_queue) % queues
        if kind == d.MessageType.DELAY:
            when = sp.delivery_timestamp
            # The 5.1.2 Python client writes milliseconds into the seconds field.
            due = when.seconds if when.seconds > 10**11 else v2.ms(when)
            props[PROPERTY_TIMER_DELIVER_MS] = str(due)
        sys_flag = 1 if sp.body_encoding == d.Encoding.GZIP else 0
        if kind == d.MessageType.TRANSACTION:
            # A half message until EndTransaction; its producer group is the topic, as
            # RocketMQ 5's proxy makes it.
            props[PROPERTY_TRANSACTION_PREPARED] = "true"
            props[PROPERTY_PRODUCER_GROUP] = topic
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
            if sp.HasField("orphaned_transaction_recovery_duration"):
                wait_s = v2.duration_ms(sp.orphaned_transaction_recovery_duration) // 1000
                props[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(max(0, wait_s))
        born_host = encode_host(f"{host or '127.0.0.1'}:{port or 0}")
        record = encode_record(
            topic=topic.encode(),
            body=msg.body,
            properties=encode_properties(props),
            born_timestamp=v2.ms(sp.born_timestamp),
            born_host=born_host,
            queue_id=queue_id,
            sys_flag=sys_flag,
        )
        result = self.b.send.append(
            record,
            topic,
            queue_id,
            default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_queue_nums=4,
            producer_group=topic,
        )
        if self.b.send.waits:
            done: asyncio.Future[PutStatus | BaseException] = (
                asyncio.get_running_loop().create_future()
            )

            def stored(status: PutStatus | BaseException) -> None:
                if not done.done():
                    done.set_result(status)

            self.b.send.wait_stored_then(result.end_offset, stored)
            status = await done
            if isinstance(status, BaseException):
                raise status
            if status is PutStatus.FLUSH_DISK_TIMEOUT:
                raise FlushDiskTimeoutError("the message was stored but its flush timed out")
            if status is PutStatus.FLUSH_SLAVE_TIMEOUT:
                raise FlushSlaveTimeoutError("the message was stored; no replica has it yet")
        transaction_id = ""
        if kind == d.MessageType.TRANSACTION:
            # Where the half message is: what EndTransaction needs back.
            transaction_id = f"{result.wrote_offset}:{result.queue_offset}"
        return s.SendResultEntry(
            status=v2.status(OK),
            message_id=sp.message_id,
            offset=result.queue_offset,
            transaction_id=transaction_id,
        )

    @v2.timed("end_transaction")
    async def EndTransaction(
        self, request: s.EndTransactionRequest, context: Any
    ) -> s.EndTransactionResponse:
        refused = self._refusal("EndTransaction", context, request.topic.name, "")
        if refused is not None:
            return s.EndTransactionResponse(status=refused)
        try:
            offset_text, _, queue_text = request.transaction_id.partition(":")
            try:
                end = _End(
                    producer_group=request.topic.name,
                    commit_log_offset=int(offset_text),
                    tran_state_table_offset=int(queue_text),
                    msg_id=request.message_id,
                    resolution=Resolution(int(request.resolution)),
                    from_transaction_check=request.source
                    == d.TransactionSource.SOURCE_SERVER_CHECK,
                )
            except ValueError:
                return s.EndTransactionResponse(
                    status=v2.status(
                        d.Code.INVALID_TRANSACTION_ID,
                        f"transaction id {request.transaction_id[:60]!r} is not one this "
                        "endpoint gave",
                    )
                )
            # The transaction id names a CommitLog offset: it must be a half message of
            # the topic the user may publish to, not of any other.
            self.b.transactions.check_half_topic(end.commit_log_offset, request.topic.name)
            await self.b.transactions.end(end)
        except RocketqError as exc:
            status = _send_error_status(exc)
            if status.code == d.Code.INTERNAL_SERVER_ERROR and not _store_refused(exc):
                status = v2.status(d.Code.INVALID_TRANSACTION_ID, str(exc))
            return s.EndTransactionResponse(status=status)
        return s.EndTransactionResponse(status=v2.status(OK))


def _store_refused(exc: BaseException) -> bool:
    return isinstance(exc, (DiskFullError, StoreFailedError))


def _send_error_status(exc: BaseException) -> d.Status:
    """The status of a failed send: a store refusing writes as the proxy answers it
    (INTERNAL_SERVER_ERROR, RocketMQ's text), the rest as :func:`error_status`."""
    if _store_refused(exc):
        return v2.status(d.Code.INTERNAL_SERVER_ERROR, str(exc))
    return error_status(exc)


class _PropertyKeyError(MessageIllegalError):
    """A user property named as one RocketMQ keeps for itself (ILLEGAL_MESSAGE_PROPERTY_KEY)."""


@dataclass(frozen=True)
class _End:
    """An EndTransaction as the transaction service reads it (its EndRequest)."""

    producer_group: str
    commit_log_offset: int
    tran_state_table_offset: int
    msg_id: str
    resolution: Resolution
    from_transaction_check: bool
