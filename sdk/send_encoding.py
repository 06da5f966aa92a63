"""A message, or a batch of them, as the request that sends it: encoded once, with a unique
id per message that every retry keeps: SEND_MESSAGE_V2 with the body as the request body and
the properties in the header, or SEND_BATCH_MESSAGE with RocketMQ's batch encoding of every
message. And cutting a long list into batches that fit.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Final

from rocketq.common.exceptions import MessageIllegalError, NoPermissionError
from rocketq.common.message import Message, SysFlag, send_forbidden_reason
from rocketq.common.record import (
    FIXED_SIZE,
    check_topic,
    encode_batch_entry,
    encode_properties,
    message_properties,
)

_COMPRESSED = int(SysFlag.COMPRESSED)

# A batch holds at most this many bytes (RocketMQ's maxMessageSize).
BATCH_LIMIT = 4 * 1024 * 1024
_RECORD_OVERHEAD = FIXED_SIZE + 64  # header, separators and the unique id property


def estimated_size(msg: Message) -> int:
    """About the bytes a message takes in a batch (RocketMQ's ListSplitter estimate)."""
    props = sum(len(k) + len(v) + 2 for k, v in msg.properties.items())
    props += len(msg.tags or "") + sum(len(k) + 1 for k in msg.keys)
    return _RECORD_OVERHEAD + len(msg.topic) + len(msg.body) + props


def split_batches(msgs: Sequence[Message], limit: int = BATCH_LIMIT) -> list[list[Message]]:
    """Cut a list into batches of at most ``limit`` bytes each, in order. A message too
    big for a batch of its own is a MessageIllegalError naming it."""
    batches: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for i, m in enumerate(msgs):
        n = estimated_size(m)
        if n > limit:
            raise MessageIllegalError(
                f"message {i} alone is about {n} bytes, over the batch limit {limit}; "
                "send it by itself"
            )
        if current and size + n > limit:
            batches.append(current)
            current, size = [], 0
        current.append(m)
        size += n
    if current:
        batches.append(current)
    return batches


class Encoded:
    """A message (or a batch) as the body and header fields of its send request.

    Attributes:
        topic: The topic.
        body: The request body: the (maybe compressed) body, or the batch's entries.
        properties: The message's encoded properties; None for a batch (each entry of
            ``body`` has its own).
        ids: The unique id of each message, in order.
        flag: The message's flag (0 for a batch).
        sys_flag: The request's system flag (compressed, transaction type).
    """

    __slots__ = ("body", "flag", "ids", "properties", "sys_flag", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes,
        properties: str | None,
        ids: list[str],
        flag: int = 0,
        sys_flag: int = 0,
    ) -> None:
        self.topic = topic
        self.body = body
        self.properties = properties
        self.ids = ids
        self.flag = flag
        self.sys_flag = sys_flag

    @property
    def batch(self) -> bool:
        """Whether this is a batch."""
        return self.properties is None


def batch_entry_of(enc: Encoded) -> bytes:
    """A single message's encoding as one entry of a batch body (natural batching's
    batches and topics batches)."""
    return encode_batch_entry(
        enc.body, enc.properties.encode() if enc.properties else b"", enc.flag
    )


# Topics checked already (a valid name any group may send to): a send's checks cost a
# set lookup. Bounded, so names made up without end do not grow it.
_SENDABLE: Final[set[str]] = set()
_SENDABLE_MAX: Final = 100_000


def encode(
    msgs: Sequence[Message],
    *,
    group: str,
    next_id: Callable[[], str],
    max_message_size: int,
    compress_over: int,
    system_props: dict[str, str] | None = None,
    extra_sys_flag: int = 0,
    batch: bool = False,
) -> Encoded:
    """``msgs`` (one message, or a batch when ``batch``) as the body and header fields of
    their send request, each with a new unique id from ``next_id``; a message sent alone
    whose body is longer than ``compress_over`` bytes is compressed. ``system_props``
    join every message's properties (a transaction's half message).

    Raises:
        MessageIllegalError: No message, an empty or too big body, several topics in a
            batch, a batch over ``max_message_size``, or a bad topic name.
        NoPermissionError: A topic clients may not send to.
    """
    if not msgs:
        raise MessageIllegalError("nothing to send: the batch is empty")
    topic = msgs[0].topic
    if topic not in _SENDABLE:
        forbidden = send_forbidden_reason(topic, group)
        if forbidden is not None:
            raise NoPermissionError(f"sending to topic {topic} is forbidden: it is {forbidden}")
        check_topic(topic)
        if not send_forbidden_reason(topic, "") and len(_SENDABLE) < _SENDABLE_MAX:
            _SENDABLE.add(topic)  # no group makes it forbidden: checked once
    max_size = max_message_size
    single = not batch
    parts, ids = [], []
    body: bytes = b""
    props: bytes = b""
    sys_flag = 0
    for msg in msgs:
        if msg.topic != topic:
            raise MessageIllegalError(
                f"every message of a batch must have one topic ({topic!r}, not {msg.topic!r})"
            )
        body = msg.body
        if not isinstance(body, bytes | bytearray) or not body:
            raise MessageIllegalError("the message body is empty; send at least one byte")
        if len(body) > max_size:
            raise MessageIllegalError(
                f"the message body is {len(body)} bytes; the limit is {max_size} (max_message_size)"
            )
        uniq = next_id()
        if system_props:
            props = encode_properties({**message_properties(msg, uniq), **system_props})
        elif msg.tags or msg.keys or msg.properties or msg.delay_level or msg.deliver_at:
            props = encode_properties(message_properties(msg, uniq))
        else:
            props = b"UNIQ_KEY\x01" + uniq.encode() + b"\x02"
        ids.append(uniq)
        if single:
            # As RocketMQ's client: only a message sent alone is compressed.
            if len(body) > compress_over:
                body, sys_flag = zlib.compress(body), _COMPRESSED
        else:
            parts.append(encode_batch_entry(bytes(body), props, msg.flag))
    if single:
        return Encoded(
            topic, bytes(body), props.decode(), ids, msgs[0].flag, sys_flag | extra_sys_flag
        )
    joined = b"".join(parts)
    if len(joined) > max_message_size:
        raise MessageIllegalError(
            f"the batch is {len(joined)} bytes; a batch may hold at most "
            f"{max_message_size} (split it)"
        )
    return Encoded(topic, joined, None, ids, 0, extra_sys_flag)
