"""The body of REGISTER_BROKER: a broker's topic table, as RocketMQ 4.9's RegisterBrokerBody.

Compressed (``compressed=true``, what rocketq's brokers send), a zlib stream of::

    int32 n + n bytes    DataVersion JSON ({"counter":..,"timestamp":..})
    int32 count          topics, then for each: int32 n + n bytes of
                         "<name> <read> <write> <perm> <filterType> <sysFlag> <order>"
    int32 n + n bytes    the filter server list, a JSON array
    [int32 count         rocketq's deltas only: the topics deleted, each int32 n + name]

RocketMQ's topic line stops after the filter type; rocketq adds the sys flag and the order
flag, and reads lines of either length. The line is split at its spaces, so it is read
exactly or not at all: every name is a valid topic name (:mod:`rocketq.common.names`, no
spaces), checked by the encoder, which refuses a table holding another, and by the
decoder, which refuses a line of any other number of fields, a name that is not valid, a
number that is not one written plainly or out of its range, a filter type it does not know
and an order flag other than ``true``/``false``: a body is refused whole rather than read
as something its broker did not mean. Uncompressed, the body is the JSON
``{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":..,"topicConfigTable":..}}``
that a stock broker sends by default. ``bodyCrc32`` is CRC32 with the sign bit cleared
(RocketMQ's UtilAll.crc32) of the body as sent.

The data version of rocketq's table is one number: the DataVersion's counter.

Inflating is bounded by what the table announces: the DataVersion may take
MAX_VERSION_BYTES, and once the topic count is read the whole table may take
``table_cap(count)``: TABLE_BASE_BYTES (the DataVersion, the filter server list and a
delta's deleted names) plus MAX_TOPIC_ENTRY_BYTES per topic, at most MAX_TABLE_BYTES. A
topic line is at most 196 bytes with its length (a 127-character name, 32-bit numbers);
real ones are 40 to 160 (10,000 topics named ``Many-00000``.. inflate to 410,047 bytes,
10,000 of 127 characters to 1,580,047), so a table over its cap is a zlib bomb or not
rocketq's. The stream is inflated INFLATE_STEP bytes at a time
(``decompressobj().decompress(data, max_length)``), so it never holds more than the cap;
the nameserver decodes a table whose cap is over INLINE_TABLE_BYTES off its event loop.
RocketMQ's nameserver inflates the body whole, with no limit.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common.message import TopicConfig
from rocketq.common.names import is_valid_topic_name
from rocketq.remoting import fastjson

_MIB: Final = 1024 * 1024
# The most any table inflates to (about 1.5 million topics of typical names, 340,000 of
# 127 characters), whatever its topic count says.
MAX_TABLE_BYTES: Final = 64 * _MIB
# What each announced topic may add to the cap (a line is at most 196 bytes).
MAX_TOPIC_ENTRY_BYTES: Final = 256
# The cap before topics: the DataVersion, the filter server list and a delta's deleted
# topic names (30,000 of 127 characters).
TABLE_BASE_BYTES: Final = 4 * _MIB
# The DataVersion JSON ({"counter":..,"timestamp":..} is about 50 bytes).
MAX_VERSION_BYTES: Final = 4096
# Bytes of output per inflate step.
INFLATE_STEP: Final = _MIB
# Decoded on the event loop: a table whose cap is at most this (16,384 topics; inflating
# 8 MiB takes milliseconds), a JSON body of at most INLINE_JSON_BYTES; others in a thread.
INLINE_TABLE_BYTES: Final = 8 * _MIB
INLINE_JSON_BYTES: Final = _MIB
_I32: Final = struct.Struct(">i")
_FILTER_TYPE: Final = "SINGLE_TAG"
_FILTER_TYPES: Final = frozenset({"SINGLE_TAG", "MULTI_TAG"})
# A number as a topic line writes it: no leading zeros, no "-0", at most 10 digits.
_NUMBER: Final = re.compile(r"0|-?[1-9][0-9]{0,9}")
_INT_MAX: Final = (1 << 31) - 1


class RegisterBodyError(ValueError):
    """The body of a registration cannot be read; ``reason`` names why for the counter of
    refused registrations."""

    reason = "bad_body"


class RegisterBodyCrcError(RegisterBodyError):
    """The body does not match the CRC32 its request names."""

    reason = "crc"


class RegisterBodyTooLargeError(RegisterBodyError):
    """The topic table inflates past what its topic count allows (``cap`` bytes)."""

    reason = "inflate_cap"

    def __init__(self, text: str, cap: int) -> None:
        super().__init__(text)
        self.cap = cap


def table_cap(topic_count: int, ceiling: int = MAX_TABLE_BYTES) -> int:
    """The most a table announcing ``topic_count`` topics may inflate to (never past
    ``ceiling``, the nameserver's register_body_max_inflated_bytes)."""
    return min(ceiling, TABLE_BASE_BYTES + topic_count * MAX_TOPIC_ENTRY_BYTES)


@dataclass
class RegisterBody:
    topics: list[TopicConfig] = field(default_factory=list)
    data_version: int = 0
    deleted: list[str] = field(default_factory=list)


def crc32(body: bytes | memoryview) -> int:
    """RocketMQ's body CRC: CRC32 with the sign bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


def _chunk(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


def _checked_name(name: str) -> str:
    """``name`` if a topic line or a deleted name may carry it; RegisterBodyError if not
    (a name with a space would split its line)."""
    if not is_valid_topic_name(name):
        raise RegisterBodyError(
            f"topic name {name[:80]!r} is not a valid topic name; a registration cannot carry it"
        )
    return name


def topic_line(t: TopicConfig) -> bytes:
    """A topic's line; RegisterBodyError when its name is not a valid topic name."""
    _checked_name(t.topic_name)
    return (
        f"{t.topic_name} {t.read_queue_nums} {t.write_queue_nums} {t.perm} {_FILTER_TYPE} "
        f"{t.topic_sys_flag} {'true' if t.order else 'false'}"
    ).encode()


def encode_body(
    topics: Iterable[TopicConfig], data_version: int, deleted: Iterable[str] | None = None
) -> bytes:
    """The compressed body (topics in the order given)."""
    lines = [topic_line(t) for t in topics]
    parts = [
        _chunk(
            json.dumps({"counter": data_version, "timestamp": 0}, separators=(",", ":")).encode()
        ),
        _I32.pack(len(lines)),
        *map(_chunk, lines),
        _chunk(b"[]"),
    ]
    if deleted is not None:
        names = [_checked_name(n).encode() for n in deleted]
        parts.append(_I32.pack(len(names)))
        parts.extend(map(_chunk, names))
    return zlib.compress(b"".join(parts), 6)


def _number(text: str, line: str, low: int, high: int) -> int:
    if _NUMBER.fullmatch(text) is None or not low <= int(text) <= high:
        raise RegisterBodyError(
            f"topic line {line[:80]!r}: {text[:20]!r} is not a number {low}-{high}"
        )
    return int(text)


def _parse_line(line: str) -> TopicConfig:
    """A topic line read exactly (see the module's text), or RegisterBodyError."""
    fields = line.split(" ")
    if len(fields) not in (5, 7):
        raise RegisterBodyError(f"topic line {line[:80]!r} has {len(fields)} fields, not 5 or 7")
    name = fields[0]
    if not is_valid_topic_name(name):
        raise RegisterBodyError(f"topic line {line[:80]!r}: {name[:80]!r} is not a topic name")
    if fields[4] not in _FILTER_TYPES:
        raise RegisterBodyError(f"topic line {line[:80]!r}: unknown filter type")
    if len(fields) == 7 and fields[6] not in ("true", "false"):
        raise RegisterBodyError(f"topic line {line[:80]!r}: order is not true or false")
    return TopicConfig(
        name,
        _number(fields[1], line, 0, _INT_MAX),
        _number(fields[2], line, 0, _INT_MAX),
        _number(fields[3], line, 0, 7),
        _number(fields[5], line, -_INT_MAX - 1, _INT_MAX) if len(fields) == 7 else 0,
        len(fields) == 7 and fields[6] == "true",
    )


def _deleted_name(raw: bytes) -> str:
    name = raw.decode()
    if not is_valid_topic_name(name):
        raise RegisterBodyError(f"a deleted topic {name[:80]!r} is not a topic name")
    return name


def _version(doc: Any) -> int:
    if not isinstance(doc, dict):
        return 0
    counter = doc.get("counter", 0)
    return (
        int(counter)
        if isinstance(counter, (int, str)) and str(counter).lstrip("-").isdigit()
        else 0
    )


def _announced(head: bytearray) -> int | None:
    """The topic count a table's first bytes announce (None: not inflated that far)."""
    if len(head) < 4:
        return None
    (n,) = _I32.unpack_from(head, 0)
    if n < 0 or n > MAX_VERSION_BYTES:
        raise RegisterBodyError(
            f"the DataVersion takes {n} bytes; at most {MAX_VERSION_BYTES} are read"
        )
    if len(head) < 8 + n:
        return None
    count: int = _I32.unpack_from(head, 4 + n)[0]
    if count < 0:
        raise RegisterBodyError(f"a topic count of {count}")
    return count


def inflate_table(body: bytes | memoryview, ceiling: int = MAX_TABLE_BYTES) -> bytearray:
    """The inflated topic table, never more than its cap (see the module's text)."""
    inflate = zlib.decompressobj()
    out = bytearray()
    pending = bytes(body)
    cap = 8 + MAX_VERSION_BYTES  # until the topic count is read
    count: int | None = None
    try:
        while not inflate.eof:
            step = min(INFLATE_STEP, cap + 1 - len(out))
            chunk = inflate.decompress(pending, step)
            out += chunk
            pending = inflate.unconsumed_tail
            if count is None:
                count = _announced(out)
                if count is not None:
                    cap = table_cap(count, ceiling)
            if len(out) > cap:
                raise RegisterBodyTooLargeError(
                    f"the topic table inflates past {cap} bytes, more than its "
                    f"{count} topics may take ({len(body)} bytes compressed; "
                    f"{MAX_TOPIC_ENTRY_BYTES} bytes a topic beside {TABLE_BASE_BYTES}, "
                    f"at most {ceiling}): refused as a zlib bomb",
                    cap,
                )
            if not pending and len(chunk) < step:
                break
    except zlib.error as exc:
        raise RegisterBodyError(f"the topic table is not zlib data ({exc})") from None
    if not inflate.eof:
        raise RegisterBodyError(f"the topic table ends early ({len(body)} bytes compressed)")
    return out


def decode_compressed(body: bytes | memoryview, ceiling: int = MAX_TABLE_BYTES) -> RegisterBody:
    raw = inflate_table(body, ceiling)
    view = memoryview(raw)
    pos = 0

    def chunk() -> bytes:
        nonlocal pos
        (n,) = _I32.unpack_from(view, pos)
        if n < 0 or pos + 4 + n > len(view):
            raise RegisterBodyError(f"a length of {n} at byte {pos} runs past the table")
        out = bytes(view[pos + 4 : pos + 4 + n])
        pos += 4 + n
        return out

    def count() -> int:
        nonlocal pos
        n: int = _I32.unpack_from(view, pos)[0]
        pos += 4
        if n < 0:
            raise RegisterBodyError(f"a count of {n} at byte {pos - 4}")
        return n

    try:
        version = _version(json.loads(chunk()))
        topics = [_parse_line(chunk().decode()) for _ in range(count())]
        chunk()  # the filter server list
        deleted = [_deleted_name(chunk()) for _ in range(count())] if pos < len(view) else []
    except struct.error:
        raise RegisterBodyError("the topic table is cut short") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RegisterBodyError(f"the topic table has a bad entry: {exc}") from None
    return RegisterBody(topics, version, deleted)


def decode_json(body: bytes | memoryview) -> RegisterBody:
    """The uncompressed JSON form a stock broker sends."""
    head = bytes(body[:64]).lstrip()
    if head[:1] not in (b"{", b"["):  # refused before the body is copied and decoded
        raise RegisterBodyError("the registration body is not JSON: it starts with neither { nor [")
    try:
        doc = fastjson.loads(bytes(body))
    except ValueError as exc:
        raise RegisterBodyError(f"the registration body is not JSON: {exc}") from None
    wrapper = doc.get("topicConfigSerializeWrapper", doc) if isinstance(doc, dict) else None
    if not isinstance(wrapper, dict):
        raise RegisterBodyError("the registration body has no topicConfigSerializeWrapper")
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise RegisterBodyError("topicConfigTable is not an object")
    topics = []
    for name, t in table.items():
        if not isinstance(t, dict):
            raise RegisterBodyError(f"the config of topic {name[:80]!r} is not an object")
        topic_name = t.get("topicName", name)
        if not isinstance(topic_name, str) or not is_valid_topic_name(topic_name):
            raise RegisterBodyError(f"{str(topic_name)[:80]!r} is not a valid topic name")
        try:
            topics.append(
                TopicConfig(
                    topic_name,
                    int(t.get("readQueueNums", 16)),
                    int(t.get("writeQueueNums", 16)),
                    int(t.get("perm", 6)),
                    int(t.get("topicSysFlag", 0)),
                    bool(t.get("order", False)),
                )
            )
        except (TypeError, ValueError):
            raise RegisterBodyError(f"the config of topic {name} has a bad number") from None
    return RegisterBody(topics, _version(wrapper.get("dataVersion")))


def decode_body(
    body: bytes | memoryview | None,
    *,
    compressed: bool,
    crc: int,
    ceiling: int = MAX_TABLE_BYTES,
) -> RegisterBody:
    """A REGISTER_BROKER body, checked against its CRC (0: not checked, as RocketMQ); a
    compressed table inflates to at most ``ceiling`` bytes however many topics it announces."""
    if not body:
        return RegisterBody()
    if crc:
        got = crc32(body)
        if got != crc:
            raise RegisterBodyCrcError(
                f"the body's CRC32 is {got}, the request says {crc} ({len(body)} bytes): "
                "damaged on the way"
            )
    return decode_compressed(body, ceiling) if compressed else decode_json(body)


def announced_count(body: bytes | memoryview) -> int | None:
    """The topic count a compressed table announces, inflating no more than its head
    (None if the head cannot be read)."""
    inflate = zlib.decompressobj()
    try:
        head = bytearray(inflate.decompress(bytes(body[: 64 * 1024]), 8 + MAX_VERSION_BYTES))
        return _announced(head)
    except (zlib.error, RegisterBodyError):
        return None


def decodes_inline(
    body: bytes | memoryview | None, *, compressed: bool, ceiling: int = MAX_TABLE_BYTES
) -> bool:
    """Whether decoding ``body`` is quick enough for an event loop (else use a thread): a
    table announcing at most INLINE_TABLE_BYTES of cap, or a head that cannot be read (it
    is refused at once); JSON of at most INLINE_JSON_BYTES."""
    if not body:
        return True
    if not compressed:
        return len(body) <= INLINE_JSON_BYTES
    count = announced_count(body)
    return count is None or table_cap(count, ceiling) <= INLINE_TABLE_BYTES
