"""The pieces of the apache.rocketmq.v2 protocol the endpoint's RPCs share: statuses and
RocketMQ's codes, signatures, times and durations, a stored message as a v2 Message, and
what a request's metadata says of its client."""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rocketq.broker.consumer_manager import ConsumerManager
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2.routes import PERM_READ, PERM_WRITE
from rocketq.broker.host import BrokerHost
from rocketq.broker.metrics import BrokerCounters
from rocketq.broker.pop import PROPERTY_POP_CK, ExtraInfo
from rocketq.common.exceptions import (
    FlushDiskTimeoutError,
    FlushSlaveTimeoutError,
    MessageIllegalError,
    NoMessageError,
    NoPermissionError,
    NotLeaderError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    SystemBusyError,
    TopicNotExistError,
)
from rocketq.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)
from rocketq.common.names import check_topic_name

if TYPE_CHECKING:
    from rocketq.broker.pop import PopService
    from rocketq.broker.send_processor import SendProcessor
    from rocketq.broker.transaction import TransactionalMessageService

OK: Final = d.Code.OK
# rocketmq_rpc_latency's response_code of each v2 status code: ok, message_not_found...
CODE_LABELS: Final = {int(value): name.lower() for name, value in d.Code.items()}
CONSUMER_TYPES: Final = (d.ClientType.PUSH_CONSUMER, d.ClientType.SIMPLE_CONSUMER)
MAX_POLL_MS: Final = 20_000
POLL_MARGIN_S: Final = 1.0  # a long poll ends this long before the call's deadline
# The settings RocketMQ 5's proxy gives (ProxyConfig's defaults): a producer's retries...
PRODUCER_MAX_ATTEMPTS: Final = 3
PRODUCER_BACKOFF_INITIAL_MS: Final = 10
PRODUCER_BACKOFF_MAX_MS: Final = 1000
PRODUCER_BACKOFF_MULTIPLIER: Final = 2.0
# ... a consumer's batch (grpcClientConsumerLongPollingBatchSize) and its group's retry
# delays (CustomizedRetryPolicy: 1 s 5 s 10 s 30 s 1 m 2 m ... 10 m 20 m 30 m 1 h 2 h).
RECEIVE_BATCH_SIZE: Final = 32
RETRY_DELAYS_MS: Final = tuple(
    s * 1000 for s in (1, 5, 10, 30, *(60 * m for m in range(1, 11)), 1200, 1800, 3600, 7200)
)
# The properties RocketMQ keeps for itself (MessageConst.STRING_HASH_SET): a v2 message's
# user properties are the others, and a client may not send one of these.
HIDDEN: Final = frozenset(
    {
        "1ST_POP_TIME", "ARRIVE_TIME", "BORN_TIMESTAMP", "BUYER_ID", "CLUSTER",
        "CONSUME_START_TIME", "CORRECTION_FLAG", "CORRELATION_ID", "DELAY",
        "DLQ_ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DUP_INFO", "EXTEND_UNIQ_INFO",
        "INNER_MULTI_QUEUE_OFFSET", "INSTANCE_ID", "KEYS", "MAX_OFFSET",
        "MAX_RECONSUME_TIMES", "MIN_OFFSET", "MQ2_FLAG", "MSG_REGION", "MSG_TYPE",
        "ORIGIN_MESSAGE_ID", "PGROUP", "POP_CK", "POP_CK_OFFSET", "PUSH_REPLY_TIME",
        "REAL_QID", "REAL_TOPIC", "RECONSUME_TIME", "REPLY_TO_CLIENT", "RETRY_TOPIC", "TAGS",
        "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
        "TIMER_DEL_UNIQKEY", "TIMER_DEQUEUE_MS", "TIMER_ENQUEUE_MS", "TIMER_OUT_MS",
        "TIMER_ROLL_TIMES", "TRACE_ON", "TRANSFER_FLAG", "TRAN_MSG",
        "TRAN_PREPARED_QUEUE_OFFSET", "TTL", "UNIQ_KEY", "WAIT", "__BORNHOST", "__CRC32#",
    }
)  # fmt: skip
# Properties the v2 message's system properties are read from (RocketMQ's MessageConst).
PROPERTY_BORN_HOST: Final = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
PROPERTY_TRACE_CONTEXT: Final = "TRACE_CONTEXT"
PROPERTY_DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"


class EndpointHost(BrokerHost, Protocol):
    send: SendProcessor
    pop: PopService
    transactions: TransactionalMessageService
    metrics: BrokerCounters | None
    consumers: ConsumerManager


def status(code: int, message: str = "") -> d.Status:
    status = d.Status(message=message or d.Code.Name(code))
    status.code = code  # type: ignore[assignment]
    return status


def error_status(exc: BaseException) -> d.Status:
    """A broker error as the v2 Status a RocketMQ 5 client understands."""
    code: int
    if isinstance(exc, TopicNotExistError):
        code = d.Code.TOPIC_NOT_FOUND
    elif isinstance(exc, SubscriptionGroupNotExistError):
        code = d.Code.CONSUMER_GROUP_NOT_FOUND
    elif isinstance(exc, NoPermissionError):
        code = d.Code.FORBIDDEN
    elif isinstance(exc, NoMessageError):
        code = d.Code.INVALID_RECEIPT_HANDLE
    elif isinstance(exc, MessageIllegalError):
        code = d.Code.BAD_REQUEST
    elif isinstance(exc, SystemBusyError):
        code = d.Code.TOO_MANY_REQUESTS
    elif isinstance(exc, FlushDiskTimeoutError):
        code = d.Code.MASTER_PERSISTENCE_TIMEOUT
    elif isinstance(exc, FlushSlaveTimeoutError):
        code = d.Code.SLAVE_PERSISTENCE_TIMEOUT
    elif isinstance(exc, (NotLeaderError, ServiceNotAvailableError)):
        code = d.Code.HA_NOT_AVAILABLE
    else:
        code = d.Code.INTERNAL_SERVER_ERROR
    return status(code, str(exc))


def credential(header: str) -> tuple[str, str]:
    """(access key, signature) of an ``authorization`` header as RocketMQ 5's clients write
    it: ``MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>``;
    ("", "") when it is none."""
    _, _, rest = header.partition(" ")
    fields = {}
    for part in rest.split(","):
        key, _, value = part.strip().partition("=")
        fields[key] = value.strip()
    return fields.get("Credential", ""), fields.get("Signature", "")


def signature(secret: str, date_time: str) -> str:
    """HMAC-SHA1 of the ``x-mq-date-time`` header with the secret key, in hex."""
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def peer_ip(peer: str) -> str:
    """The address of a gRPC peer (``ipv4:10.0.0.1:5555``, ``ipv6:[::1]:5555``)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1 : rest.find("]")]
    return rest.rpartition(":")[0] if kind == "ipv4" else ""


def illegal_topic(topic: str) -> d.Status | None:
    """ILLEGAL_TOPIC naming what is wrong with a topic name a request gives (RocketMQ's
    characters and length, :mod:`rocketq.common.names`), or None when it is a name."""
    try:
        check_topic_name(topic)
    except MessageIllegalError as exc:
        return status(d.Code.ILLEGAL_TOPIC, str(exc))
    return None


def receipt_error(exc: BaseException) -> d.Status:
    """The status of a failed ack, change or forward: a receipt handle that does not parse
    is INVALID_RECEIPT_HANDLE, the rest as :func:`error_status`."""
    if isinstance(exc, MessageIllegalError):
        return status(d.Code.INVALID_RECEIPT_HANDLE, str(exc))
    return error_status(exc)


def ms(ts: Timestamp) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(value: Duration) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


_Unary = Callable[[Any, Any, Any], Awaitable[Any]]


def timed(rpc: str) -> Callable[[_Unary], _Unary]:
    """Count a unary RPC in ``rocketmq_rpc_latency`` (protocol ``grpc``, the response's
    status code)."""

    def wrap(method: _Unary) -> _Unary:
        @functools.wraps(method)
        async def run(self: Any, request: Any, context: Any) -> Any:
            started = time.perf_counter()
            response = await method(self, request, context)
            self._observe(rpc, started, response.status.code)
            return response

        return run

    return wrap


def receipt(handle: str) -> tuple[ExtraInfo, int]:
    """A v2 receipt handle as :func:`message` makes it: the pop's receipt and the message's
    CommitLog offset; MessageIllegalError when it is not one."""
    info = ExtraInfo.parse(handle)
    offset = handle.rpartition(" ")[2]
    if handle.count(" ") < 8 or not offset.isdigit():
        raise MessageIllegalError("the receipt handle has no CommitLog offset")
    return info, int(offset)


def message(msg: MessageExt, invisible: int, topic: str = "", attempt: int = 0) -> d.Message:
    """A stored message as the v2 Message a client reads, field by field as RocketMQ 5's
    proxy writes it (GrpcConverter.buildMessage): the body's MD5 digest in upper-case hex
    (the one digest every official client checks alike), the type (transaction, delay,
    FIFO, normal, in that order), the born host the producer gave (else the address it
    sent from), the delivery time, the message group, the trace context, the dead letter
    queue's origin, and the properties RocketMQ does not keep for itself as user
    properties. The receipt handle is the pop's receipt and the CommitLog offset."""
    props = msg.properties
    receipt = (
        f"{props[PROPERTY_POP_CK]} {msg.commit_log_offset}" if PROPERTY_POP_CK in props else ""
    )
    sp = d.SystemProperties(
        message_id=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.offset_msg_id,
        body_digest=d.Digest(
            type=d.DigestType.MD5, checksum=hashlib.md5(msg.body).hexdigest().upper()
        ),
        body_encoding=d.Encoding.GZIP if msg.sys_flag & 1 else d.Encoding.IDENTITY,
        born_timestamp=timestamp(msg.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or msg.born_host.rpartition(":")[0],
        store_timestamp=timestamp(msg.store_timestamp),
        store_host=msg.store_host,
        receipt_handle=receipt or None,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        invisible_duration=Duration(seconds=invisible // 1000, nanos=invisible % 1000 * 10**6),
        delivery_attempt=attempt or msg.reconsume_times + 1,
    )
    if msg.tags is not None:
        sp.tag = msg.tags
    if msg.keys:
        sp.keys.extend(msg.keys)
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        sp.message_type = d.MessageType.TRANSACTION
    elif (
        PROPERTY_DELAY_TIME_LEVEL in props
        or PROPERTY_TIMER_DELIVER_MS in props
        or PROPERTY_TIMER_DELAY_SEC in props
    ):
        sp.message_type = d.MessageType.DELAY
    elif PROPERTY_SHARDING_KEY in props:
        sp.message_type = d.MessageType.FIFO
    else:
        sp.message_type = d.MessageType.NORMAL
    due = _delivery_ms(props)
    if due is not None:
        sp.delivery_timestamp.CopyFrom(timestamp(due))
    group = props.get(PROPERTY_SHARDING_KEY)
    if group is not None:
        sp.message_group = group
    trace = props.get(PROPERTY_TRACE_CONTEXT)
    if trace is not None:
        sp.trace_context = trace
    origin_topic = props.get(PROPERTY_DLQ_ORIGIN_TOPIC)
    origin_id = props.get(PROPERTY_DLQ_ORIGIN_MESSAGE_ID)
    if origin_topic is not None and origin_id is not None:
        sp.dead_letter_queue.topic = origin_topic
        sp.dead_letter_queue.message_id = origin_id
    user = {k: v for k, v in props.items() if k not in HIDDEN}
    return d.Message(
        topic=d.Resource(name=topic or msg.topic), user_properties=user,
        system_properties=sp, body=msg.body,
    )  # fmt: skip


def _delivery_ms(props: dict[str, str]) -> int | None:
    """When a delayed message is due: TIMER_DELAY_SEC from now, else TIMER_DELIVER_MS;
    None when neither is a number."""
    try:
        if PROPERTY_TIMER_DELAY_SEC in props:
            return now_ms() + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
        if PROPERTY_TIMER_DELIVER_MS in props:
            return int(props[PROPERTY_TIMER_DELIVER_MS])
    except ValueError:
        return None
    return None


def scheme(host: str) -> d.AddressScheme:
    """IPv4 for an address like 10.0.0.1, DOMAIN_NAME for a host name."""
    parts = host.split(".")
    if len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts):
        return d.AddressScheme.IPv4
    if ":" in host:
        return d.AddressScheme.IPv6
    return d.AddressScheme.DOMAIN_NAME


def permission(perm: int) -> d.Permission:
    """RocketMQ's permission bits as the v2 Permission."""
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return d.Permission.READ_WRITE
    if readable:
        return d.Permission.READ
    return d.Permission.WRITE if writable else d.Permission.NONE


def bind_errno(host: str, port: int) -> int | None:
    """Why ``host:port`` cannot be bound now (EADDRINUSE...), None when it can."""
    try:
        with socket.create_server((host, port)):
            return None
    except OSError as exc:
        return exc.errno


def bind_error(host: str, port: int) -> str:
    code = bind_errno(host, port)
    return os.strerror(code) if code is not None else "gRPC could not bind it"


def describe_client(context: Any) -> tuple[str, str]:
    """(language, version) a v5 client's headers name."""
    found = {"x-mq-language": "unknown", "x-mq-client-version": ""}
    for key, value in context.invocation_metadata() or ():
        if key.lower() in found:
            found[key.lower()] = str(value)[:32]
    return found["x-mq-language"].lower(), found["x-mq-client-version"]


def client_id(context: Any) -> str:
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "x-mq-client-id":
            return str(value)
    return ""


def now_ms() -> int:
    return int(time.time() * 1000)
