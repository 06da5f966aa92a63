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
import zlib
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
    PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SYSTEM_PROPERTY_NAMES,
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
HIDDEN: Final = SYSTEM_PROPERTY_NAMES | {PROPERTY_POP_CK, "1ST_POP_TIME", "CLUSTER"}


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
    """A stored message as the v2 Message a client reads: its receipt handle (the pop's
    receipt and the CommitLog offset), digest, times, type and user properties."""
    props = msg.properties
    receipt = (
        f"{props[PROPERTY_POP_CK]} {msg.commit_log_offset}" if PROPERTY_POP_CK in props else ""
    )
    sp = d.SystemProperties(
        message_id=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.offset_msg_id,
        body_digest=d.Digest(type=d.DigestType.CRC32, checksum=f"{zlib.crc32(msg.body):08X}"),
        body_encoding=d.Encoding.GZIP if msg.sys_flag & 1 else d.Encoding.IDENTITY,
        born_timestamp=timestamp(msg.born_timestamp),
        born_host=msg.born_host,
        store_timestamp=timestamp(msg.store_timestamp),
        store_host=msg.store_host,
        receipt_handle=receipt or None,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        invisible_duration=Duration(seconds=invisible // 1000, nanos=invisible % 1000 * 10**6),
        delivery_attempt=attempt or msg.reconsume_times + 1,
    )
    if msg.tags:
        sp.tag = msg.tags
    if msg.keys:
        sp.keys.extend(msg.keys)
    group = props.get(PROPERTY_SHARDING_KEY)
    if group:
        sp.message_type = d.MessageType.FIFO
        sp.message_group = group
    elif PROPERTY_TIMER_DELIVER_MS in props:
        sp.message_type = d.MessageType.DELAY
        sp.delivery_timestamp.CopyFrom(timestamp(int(props[PROPERTY_TIMER_DELIVER_MS])))
    else:
        sp.message_type = d.MessageType.NORMAL
    user = {k: v for k, v in props.items() if k not in HIDDEN}
    return d.Message(
        topic=d.Resource(name=topic or msg.topic), user_properties=user,
        system_properties=sp, body=msg.body,
    )  # fmt: skip


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
