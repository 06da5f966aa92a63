"""The CommitLog record: RocketMQ 4.x's layout, big-endian, IPv4 hosts.

Field order and sizes (total fixed part 91 bytes)::

    TOTALSIZE 4 | MAGICCODE 4 | BODYCRC 4 | QUEUEID 4 | FLAG 4 | QUEUEOFFSET 8 |
    PHYSICALOFFSET 8 | SYSFLAG 4 | BORNTIMESTAMP 8 | BORNHOST 4+4 | STORETIMESTAMP 8 |
    STOREHOST 4+4 | RECONSUMETIMES 4 | PREPAREDTRANSACTIONOFFSET 8 | BODY 4+n |
    TOPIC 1+n | PROPERTIES 2+n

A producer encodes each message with this layout (store-side fields zero); the broker
stamps queue id, offsets, store time and host and the body CRC in place, and a pull
returns the bytes as they lie in the CommitLog. :func:`decode_records` turns them into
``MessageExt`` objects for the SDK and tools; nothing on the broker's hot path does.
"""

from __future__ import annotations

import functools
import socket
import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Final

from rocketq.common.exceptions import MessageIllegalError, PropertiesSizeExceededError
from rocketq.common.message import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SYSTEM_PROPERTY_NAMES,
    Message,
    MessageExt,
    decode_properties,
)
from rocketq.common.names import check_topic_name

MESSAGE_MAGIC_CODE: Final = 0xDAA320A7
BLANK_MAGIC_CODE: Final = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH: Final = 4 + 4
FIXED_SIZE: Final = 91
MAX_PROPERTIES_LENGTH: Final = 32767

# Field positions inside a record.
POS_TOTAL_SIZE: Final = 0
POS_MAGIC: Final = 4
POS_BODY_CRC: Final = 8
POS_QUEUE_ID: Final = 12
POS_FLAG: Final = 16
POS_QUEUE_OFFSET: Final = 20
POS_PHYSICAL_OFFSET: Final = 28
POS_SYS_FLAG: Final = 36
POS_BORN_TIMESTAMP: Final = 40
POS_BORN_HOST: Final = 48
POS_STORE_TIMESTAMP: Final = 56
POS_STORE_HOST: Final = 64
POS_RECONSUME_TIMES: Final = 72
POS_PREPARED_TX_OFFSET: Final = 76
POS_BODY_LENGTH: Final = 84
POS_BODY: Final = 88

# The whole fixed header up to the body length, in one unpack.
HEADER: Final = struct.Struct(">iIIiiqqiq4sIq4sIiqi")
assert HEADER.size == POS_BODY
# The same, hosts skipped (a reader slices them whole).
HEADER_NO_HOSTS: Final = struct.Struct(">iIIiiqqiq8xq8xiqi")
# Size, magic, sys flag and body length: what a writer needs to validate a record.
SIZE_MAGIC_SYSFLAG_BODYLEN: Final = struct.Struct(">iI28xi44xi")
SIZE_MAGIC: Final = struct.Struct(">iI")
BLANK: Final = struct.Struct(">iI")
INT: Final = struct.Struct(">i")
UINT: Final = struct.Struct(">I")
USHORT: Final = struct.Struct(">H")
LONG: Final = struct.Struct(">q")
# Store-side stamps, each over contiguous fields.
STAMP_CRC_QUEUE_ID: Final = struct.Struct(">Ii")
# A record's body CRC is CRC32 with the sign bit cleared, as RocketMQ's UtilAll.crc32.
CRC_MASK: Final = 0x7FFFFFFF
STAMP_OFFSETS: Final = struct.Struct(">qq")
STAMP_STORE: Final = struct.Struct(">q8s")


def encode_host(address: str) -> bytes:
    """``"10.0.0.1:10911"`` -> 8 bytes (IPv4 4 + port 4), as records and ids carry it."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"address {address!r} has no port; expected 'a.b.c.d:port'")
    try:
        return socket.inet_aton(host) + struct.pack(">i", int(port))
    except (OSError, ValueError) as exc:
        raise ValueError(f"address {address!r} is not an IPv4 'a.b.c.d:port'") from exc


def check_topic(topic: str) -> bytes:
    """The topic's bytes, or MessageIllegalError naming what is wrong with it (the rules of
    :func:`rocketq.common.names.check_topic_name`)."""
    return check_topic_name(topic).encode()


@functools.lru_cache(maxsize=4096)
def tags_hash_code(tags: str) -> int:
    """Java's ``String.hashCode`` of the tags, as RocketMQ stores it in the ConsumeQueue."""
    units = tags.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def encode_properties(props: Mapping[str, str]) -> bytes:
    """``key\\x01value\\x02`` pairs; separators inside keys or values are refused."""
    parts = []
    for k, v in props.items():
        if not k:
            raise MessageIllegalError("a property name is empty")
        for text in (k, v):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise MessageIllegalError(
                    f"property {k!r} contains the reserved characters \\x01 or \\x02"
                )
        parts.append(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}")
    raw = "".join(parts).encode()
    if len(raw) > MAX_PROPERTIES_LENGTH:
        raise PropertiesSizeExceededError(
            f"the message properties are {len(raw)} bytes encoded; at most "
            f"{MAX_PROPERTIES_LENGTH} fit in a record (shorten keys, tags or user properties)"
        )
    return raw


def _field_lengths(buf: bytes | memoryview, pos: int, total: int, body_len: int) -> tuple[int, int]:
    """(topic length, properties length) of the record of ``total`` bytes at ``pos``, each
    checked to lie inside it before it is read; MessageIllegalError names what does not."""
    if body_len < 0 or body_len > total - FIXED_SIZE:
        raise MessageIllegalError(
            f"record at {pos} has a body of {body_len} bytes in a record of {total}"
        )
    p = pos + POS_BODY + body_len
    topic_len = buf[p]
    if topic_len > total - FIXED_SIZE - body_len:
        raise MessageIllegalError(
            f"record at {pos} has a topic of {topic_len} bytes past its end ({total} bytes)"
        )
    props_at = p + 3 + topic_len
    props_len = (buf[props_at - 2] << 8) | buf[props_at - 1]
    if FIXED_SIZE + body_len + topic_len + props_len != total:
        raise MessageIllegalError(f"record at {pos} has inconsistent field lengths")
    return topic_len, props_len


def record_properties(record: bytes | memoryview) -> dict[str, str]:
    """The properties of one stored record (for filters that read them); raises
    MessageIllegalError if the record's lengths do not add up."""
    if len(record) < FIXED_SIZE:
        raise MessageIllegalError(f"a record of {len(record)} bytes is truncated")
    total = int.from_bytes(record[POS_TOTAL_SIZE:POS_MAGIC], "big", signed=True)
    if total < FIXED_SIZE or total > len(record):
        raise MessageIllegalError(f"a record of {len(record)} bytes has a bad size {total}")
    body_len = int.from_bytes(record[POS_BODY_LENGTH:POS_BODY], "big", signed=True)
    topic_len, props_len = _field_lengths(record, 0, total, body_len)
    p = POS_BODY + body_len + 3 + topic_len
    return decode_properties(record[p : p + props_len])


def property_value(raw: bytes, name: bytes) -> bytes | None:
    """One property's value straight from encoded properties, without decoding them all."""
    needle = name + b"\x01"
    at = raw.find(needle)
    while at > 0 and raw[at - 1] != 2:
        at = raw.find(needle, at + 1)
    if at < 0:
        return None
    start = at + len(needle)
    end = raw.find(b"\x02", start)
    return raw[start : end if end >= 0 else len(raw)]


def message_properties(msg: Message, uniq_id: str | None) -> dict[str, str]:
    """All properties of a producer's message: system ones from its fields, then user ones."""
    for name in msg.properties:
        if name in SYSTEM_PROPERTY_NAMES:
            raise MessageIllegalError(
                f"user property {name!r} is a reserved system property name; rename it"
            )
    props: dict[str, str] = {}
    if msg.tags:
        props[PROPERTY_TAGS] = msg.tags
    if msg.keys:
        for key in msg.keys:
            if KEY_SEPARATOR in key:
                raise MessageIllegalError(f"key {key!r} contains a space; keys are space-separated")
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(msg.keys)
    if msg.delay_level > 0:
        if msg.deliver_at:
            raise MessageIllegalError(
                "a message has either a delay_level or a deliver_at time, not both"
            )
        props[PROPERTY_DELAY_TIME_LEVEL] = str(msg.delay_level)
    if msg.deliver_at:
        if msg.deliver_at < 0:
            raise MessageIllegalError(
                f"deliver_at {msg.deliver_at} is not a time; give epoch milliseconds"
            )
        props[PROPERTY_TIMER_DELIVER_MS] = str(msg.deliver_at)
    if uniq_id:
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_id
    props.update(msg.properties)
    return props


def encode_record(
    *,
    topic: bytes,
    body: bytes | memoryview,
    properties: bytes,
    born_timestamp: int,
    born_host: bytes,
    queue_id: int = 0,
    flag: int = 0,
    sys_flag: int = 0,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    store_timestamp: int = 0,
    store_host: bytes = b"\0" * 8,
    body_crc: int | None = None,
) -> bytes:
    """One record. Store-side fields default to zero; the broker stamps them."""
    total = FIXED_SIZE + len(body) + len(topic) + len(properties)
    crc = zlib.crc32(body) & CRC_MASK if body_crc is None else body_crc
    return b"".join(
        (
            HEADER.pack(
                total,
                MESSAGE_MAGIC_CODE,
                crc,
                queue_id,
                flag,
                queue_offset,
                physical_offset,
                sys_flag,
                born_timestamp,
                born_host[:4],
                int.from_bytes(born_host[4:8], "big"),
                store_timestamp,
                store_host[:4],
                int.from_bytes(store_host[4:8], "big"),
                reconsume_times,
                prepared_transaction_offset,
                len(body),
            ),
            body,
            bytes((len(topic),)),
            topic,
            USHORT.pack(len(properties)),
            properties,
        )
    )


_ZERO_IP: Final = b"\0\0\0\0"
# A batch entry's head (RocketMQ's MessageDecoder.encodeMessage): total size, magic, body
# CRC (clients write zeros), flag, body length.
_BATCH_ENTRY_HEAD: Final = struct.Struct(">iiiii")


def encode_batch_entry(body: bytes | memoryview, properties: bytes, flag: int = 0) -> bytes:
    """One message of a batch body (RocketMQ's MessageDecoder.encodeMessage): its head,
    body, properties' length and properties."""
    return b"".join(
        (
            _BATCH_ENTRY_HEAD.pack(22 + len(body) + len(properties), 0, 0, flag, len(body)),
            body,
            USHORT.pack(len(properties)),
            properties,
        )
    )


def encode_send_record(
    topic_part: bytes,
    body: bytes | memoryview,
    properties: bytes,
    born_timestamp: int,
    born_ip: bytes,
    born_port: int,
    flag: int = 0,
    sys_flag: int = 0,
    queue_id: int = 0,
    reconsume_times: int = 0,
) -> bytes:
    """A record to be stamped, the fast way: ``topic_part`` is the topic's length byte
    and bytes; store-side fields and the body CRC stay zero (the broker stamps them)."""
    return b"".join(
        (
            HEADER.pack(
                FIXED_SIZE - 1 + len(body) + len(topic_part) + len(properties),
                MESSAGE_MAGIC_CODE,
                0,
                queue_id,
                flag,
                0,
                0,
                sys_flag,
                born_timestamp,
                born_ip,
                born_port,
                0,
                _ZERO_IP,
                0,
                reconsume_times,
                0,
                len(body),
            ),
            body,
            topic_part,
            USHORT.pack(len(properties)),
            properties,
        )
    )


def rewrite_record(
    msg: MessageExt,
    topic: str,
    properties: Mapping[str, str],
    *,
    sys_flag: int | None = None,
    reconsume_times: int | None = None,
    prepared_transaction_offset: int | None = None,
) -> bytes:
    """A stored message as a new record for ``topic`` with ``properties``: body, flag,
    born time and host carried over, and sys flag, reconsume times and prepared offset
    unless given; the store stamps the rest (the delay, timer, retry and transaction
    services move messages between topics this way)."""
    return encode_record(
        topic=topic.encode(),
        body=msg.body,
        properties=encode_properties(properties),
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host_bytes,
        flag=msg.flag,
        sys_flag=msg.sys_flag if sys_flag is None else sys_flag,
        reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
        prepared_transaction_offset=(
            msg.prepared_transaction_offset
            if prepared_transaction_offset is None
            else prepared_transaction_offset
        ),
    )


def encode_message(
    msg: Message,
    *,
    born_timestamp: int,
    born_host: bytes,
    uniq_id: str | None = None,
    queue_id: int = 0,
    sys_flag: int = 0,
) -> bytes:
    """A producer's message as a record ready to send (one blob; a batch concatenates them)."""
    topic = check_topic(msg.topic)
    props = encode_properties(message_properties(msg, uniq_id))
    return encode_record(
        topic=topic,
        body=msg.body,
        properties=props,
        born_timestamp=born_timestamp,
        born_host=born_host,
        queue_id=queue_id,
        flag=msg.flag,
        sys_flag=sys_flag,
    )


_topics: dict[bytes, str] = {}


def _decode_at(buf: bytes, pos: int) -> MessageExt:
    end = len(buf)
    if end - pos < FIXED_SIZE:
        raise MessageIllegalError(f"record at {pos} is truncated ({end - pos} bytes)")
    (
        total,
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_ts,
        store_ts,
        reconsume,
        prepared,
        body_len,
    ) = HEADER_NO_HOSTS.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise MessageIllegalError(f"record at {pos} has magic code {magic:#x}, not a message")
    if total < FIXED_SIZE or total > end - pos:
        raise MessageIllegalError(f"record at {pos} has a bad size {total}")
    topic_len, props_len = _field_lengths(buf, pos, total, body_len)
    p = pos + POS_BODY + body_len
    props_at = p + 3 + topic_len
    raw_topic = buf[p + 1 : p + 1 + topic_len]
    topic = _topics.get(raw_topic)
    if topic is None:
        topic = raw_topic.decode(errors="replace")
        if len(_topics) < 4096:
            _topics[raw_topic] = topic
    return MessageExt(
        topic,
        buf[pos + POS_BODY : pos + POS_BODY + body_len],
        buf[props_at : props_at + props_len],
        queue_id,
        queue_offset,
        physical_offset,
        total,
        sys_flag,
        flag,
        body_crc,
        born_ts,
        buf[pos + POS_BORN_HOST : pos + POS_BORN_HOST + 8],
        store_ts,
        buf[pos + POS_STORE_HOST : pos + POS_STORE_HOST + 8],
        reconsume,
        prepared,
    )


def decode_record(buf: bytes | memoryview, pos: int = 0) -> MessageExt:
    """Decode the record at ``pos``; raises MessageIllegalError if it is not a valid record."""
    return _decode_at(buf if isinstance(buf, bytes) else bytes(buf), pos)


def iter_records(buf: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """(position, size) of each record in a blob of concatenated records."""
    view = memoryview(buf)
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < 8:
            raise MessageIllegalError(f"trailing {end - pos} bytes after the last record")
        size, magic = SIZE_MAGIC.unpack_from(view, pos)
        if magic != MESSAGE_MAGIC_CODE or size < FIXED_SIZE or pos + size > end:
            raise MessageIllegalError(f"record at {pos} is not a valid message record")
        yield pos, size
        pos += size


def decode_records(buf: bytes | memoryview) -> list[MessageExt]:
    """Every record of a blob of concatenated records (a pull's answer, a batch)."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    out = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < 8:
            raise MessageIllegalError(f"trailing {end - pos} bytes after the last record")
        msg = _decode_at(data, pos)
        out.append(msg)
        pos += msg.store_size
    return out
