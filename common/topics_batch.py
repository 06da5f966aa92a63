"""The body of rocketq's SEND_TOPICS_BATCH (``RocketqRequestCode``): messages of many topics
to one broker in one request, and the body of its answer. Only rocketq's SDK sends it, and
only to a broker that announces it (its HEART_BEAT answer carries ``topicsBatch``); stock
clients never see it.

Request body, one *segment* per (topic, queue), in the order the client sends them::

    u16 topic length | topic (UTF-8) | i32 queue id | i32 entries length | entries

where the entries are RocketMQ's batch encoding (MessageDecoder.encodeMessages, as in
SEND_BATCH_MESSAGE's body). Each segment is stored as SEND_BATCH_MESSAGE stores its body:
whole or not at all, with the same checks; segments succeed or fail one by one.

Answer body, one result per segment, in the request's order::

    i16 code | i32 queue id | i64 queue offset | u32 text length | text (UTF-8)

``code`` is a send's answer code: SUCCESS or a wait outcome (FLUSH_DISK_TIMEOUT, ...) when
the segment was stored, and then ``text`` is the comma-joined offset message id of each of
its messages and ``queue offset`` the first one's; any other code is the error that
refused the segment, ``text`` its remark.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketq.common.exceptions import MessageIllegalError

_TOPIC_LEN: Final = struct.Struct(">H")
_SEGMENT_TAIL: Final = struct.Struct(">ii")  # queue id, entries length
_RESULT_HEAD: Final = struct.Struct(">hiqI")  # code, queue id, queue offset, text length
# Their sizes, as plain constants (compiled, a struct's ``size`` is an attribute lookup).
_TOPIC_LEN_SIZE: Final = 2
_SEGMENT_TAIL_SIZE: Final = 8
assert (_TOPIC_LEN.size, _SEGMENT_TAIL.size) == (_TOPIC_LEN_SIZE, _SEGMENT_TAIL_SIZE)
# What a broker's HEART_BEAT answer says (ext) when it takes SEND_TOPICS_BATCH.
TOPICS_BATCH_FIELD: Final = "topicsBatch"
TOPICS_BATCH_VERSION: Final = "1"
# Longest topic name a segment may carry (RocketMQ's topic length limit).
MAX_TOPIC_BYTES: Final = 127


class Segment:
    """One (topic, queue)'s messages inside a SEND_TOPICS_BATCH body."""

    __slots__ = ("entries", "queue_id", "topic")

    def __init__(self, topic: str, queue_id: int, entries: memoryview) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.entries = entries  # RocketMQ's batch encoding, not checked here

    def __repr__(self) -> str:
        return f"Segment({self.topic!r}, {self.queue_id}, {len(self.entries)} bytes)"


class SegmentResult:
    """What became of one segment (a plain class: the producer reads one per segment)."""

    __slots__ = ("code", "queue_id", "queue_offset", "text")

    def __init__(self, code: int, queue_id: int, queue_offset: int, text: str) -> None:
        self.code = code
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.text = text  # the offset message ids (stored) or the error's remark

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SegmentResult):
            return NotImplemented
        return (self.code, self.queue_id, self.queue_offset, self.text) == (
            other.code,
            other.queue_id,
            other.queue_offset,
            other.text,
        )

    __hash__ = None  # type: ignore[assignment]  # compared by value, as the tuple it was

    def __repr__(self) -> str:
        return (
            f"SegmentResult(code={self.code}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, text={self.text!r})"
        )


def encode_segment(topic: bytes, queue_id: int, entries: bytes) -> bytes:
    """One segment: a topic's (UTF-8) batch entries for one queue."""
    return b"".join(
        (_TOPIC_LEN.pack(len(topic)), topic, _SEGMENT_TAIL.pack(queue_id, len(entries)), entries)
    )


def decode_segments(body: bytes | memoryview) -> list[Segment]:
    """A SEND_TOPICS_BATCH body -> its segments, in order. Total: bytes that are not
    segments raise MessageIllegalError naming the segment and byte where they stop making
    sense; a body with no segment is refused too."""
    data = body if isinstance(body, bytes) else bytes(body)
    view = memoryview(data)
    topics, queue_ids, starts, ends = decode_segment_columns(data)
    return [Segment(topics[i], queue_ids[i], view[starts[i] : ends[i]]) for i in range(len(topics))]


def decode_segment_columns(data: bytes) -> tuple[list[str], list[int], list[int], list[int]]:
    """:func:`decode_segments` as one list per field: each segment's topic, queue id, and
    where its entries start and end in ``data``; raises as :func:`decode_segments`.

    Read byte by byte (no struct call, memoryview or object per segment): with many topics
    each segment holds a message or two, so the broker runs this about once a message."""
    end = len(data)
    pos = 0
    topics: list[str] = []
    queue_ids: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    while pos < end:
        count = len(topics)
        if end - pos < _TOPIC_LEN_SIZE:
            raise MessageIllegalError(
                f"the topics batch is cut short: segment {count} at byte {pos} of {end}"
            )
        topic_len = (data[pos] << 8) | data[pos + 1]
        if not 0 < topic_len <= MAX_TOPIC_BYTES:
            raise MessageIllegalError(
                f"segment {count} of the topics batch (at byte {pos} of {end}) names a topic "
                f"of {topic_len} bytes; a topic has 1 to {MAX_TOPIC_BYTES}"
            )
        at = pos + _TOPIC_LEN_SIZE
        tail = at + topic_len
        if tail + _SEGMENT_TAIL_SIZE > end:
            raise MessageIllegalError(
                f"segment {count} of the topics batch (at byte {pos} of {end}) is cut short"
            )
        try:
            topic = data[at:tail].decode()
        except UnicodeDecodeError:
            raise MessageIllegalError(
                f"segment {count} of the topics batch (at byte {pos} of {end}) names a "
                "topic that is not UTF-8"
            ) from None
        entries_len = _i32(data, tail + 4)
        start = tail + _SEGMENT_TAIL_SIZE
        if entries_len <= 0 or start + entries_len > end:
            raise MessageIllegalError(
                f"segment {count} of the topics batch (topic {topic!r}, at byte {pos} of "
                f"{end}) has {entries_len} bytes of messages, which is none or past the end"
            )
        topics.append(topic)
        queue_ids.append(_i32(data, tail))
        starts.append(start)
        pos = start + entries_len
        ends.append(pos)
    if not topics:
        raise MessageIllegalError("the topics batch has no segment")
    return topics, queue_ids, starts, ends


def _i32(data: bytes, at: int) -> int:
    """The big-endian signed 32-bit integer at ``at`` (four bytes there, checked before)."""
    value = (data[at] << 24) | (data[at + 1] << 16) | (data[at + 2] << 8) | data[at + 3]
    return value - (1 << 32) if value >= 1 << 31 else value


def segment_topics(body: bytes | memoryview) -> list[str]:
    """Every topic a SEND_TOPICS_BATCH body names, in order (what authorization checks);
    raises as :func:`decode_segments`."""
    return [segment.topic for segment in decode_segments(body)]


def encode_results(results: list[SegmentResult]) -> bytes:
    """The answer's body."""
    return encode_result_columns(
        [r.code for r in results],
        [r.queue_id for r in results],
        [r.queue_offset for r in results],
        [r.text for r in results],
    )


def encode_result_columns(
    codes: list[int], queue_ids: list[int], queue_offsets: list[int], texts: list[str]
) -> bytes:
    """The answer's body from each result's fields, one list per field (what the broker
    keeps while it stores a batch, rather than a result object per segment)."""
    parts: list[bytes] = []
    pack = _RESULT_HEAD.pack
    for i in range(len(codes)):
        text = texts[i].encode()
        parts.append(pack(codes[i], queue_ids[i], queue_offsets[i], len(text)))
        parts.append(text)
    return b"".join(parts)


def decode_results(body: bytes | memoryview) -> list[SegmentResult]:
    """An answer's body -> each segment's result; MessageIllegalError when the bytes are
    not results."""
    view = memoryview(body)
    end = len(view)
    pos = 0
    out: list[SegmentResult] = []
    while pos < end:
        if end - pos < _RESULT_HEAD.size:
            raise MessageIllegalError(
                f"the topics batch answer is cut short at result {len(out)} (byte {pos} of {end})"
            )
        code, queue_id, queue_offset, text_len = _RESULT_HEAD.unpack_from(view, pos)
        start = pos + _RESULT_HEAD.size
        if start + text_len > end:
            raise MessageIllegalError(
                f"result {len(out)} of the topics batch answer has {text_len} bytes of text, "
                "past the end"
            )
        try:
            text = bytes(view[start : start + text_len]).decode()
        except UnicodeDecodeError:
            raise MessageIllegalError(
                f"result {len(out)} of the topics batch answer is not UTF-8"
            ) from None
        out.append(SegmentResult(code, queue_id, queue_offset, text))
        pos = start + text_len
    return out


__all__ = [
    "MAX_TOPIC_BYTES",
    "TOPICS_BATCH_FIELD",
    "TOPICS_BATCH_VERSION",
    "Segment",
    "SegmentResult",
    "decode_results",
    "decode_segment_columns",
    "decode_segments",
    "encode_result_columns",
    "encode_results",
    "encode_segment",
    "segment_topics",
]
