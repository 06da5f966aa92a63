"""SEND_TOPICS_BATCH's bodies (rocketq.common.topics_batch): what the SDK writes the broker
reads back segment by segment, the answer likewise, and any other bytes are refused with
MessageIllegalError, never anything else."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.record import encode_batch_entry as batch_entry
from rocketq.common.topics_batch import (
    SegmentResult,
    decode_results,
    decode_segments,
    encode_results,
    encode_segment,
    segment_topics,
)
from tests.fuzz_mutations import mutated, total

TOPICS = st.text(string.ascii_letters + string.digits + "_-%|", min_size=1, max_size=127)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


@st.composite
def segments(draw: st.DrawFn) -> list[tuple[str, int, bytes]]:
    out = []
    for _ in range(draw(st.integers(1, 6))):
        entries = b"".join(
            batch_entry(draw(st.binary(max_size=40)), draw(st.binary(max_size=20)), flag)
            for flag in draw(st.lists(INT32, min_size=1, max_size=3))
        )
        out.append((draw(TOPICS), draw(INT32), entries))
    return out


RESULTS = st.lists(
    st.builds(
        SegmentResult,
        st.integers(-(1 << 15), (1 << 15) - 1),
        INT32,
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.text(max_size=60),
    ),
    max_size=6,
)


def _body(segs: list[tuple[str, int, bytes]]) -> bytes:
    return b"".join(encode_segment(t.encode(), q, e) for t, q, e in segs)


@given(segments())
def test_segments_round_trip(segs: list[tuple[str, int, bytes]]) -> None:
    decoded = list(decode_segments(_body(segs)))
    assert [(s.topic, s.queue_id, bytes(s.entries)) for s in decoded] == segs
    assert segment_topics(_body(segs)) == [t for t, _q, _e in segs]


@given(st.data(), segments())
def test_mutated_segments_decode_or_are_refused(
    data: st.DataObject, segs: list[tuple[str, int, bytes]]
) -> None:
    blob = data.draw(mutated(_body(segs)))
    total(lambda: list(decode_segments(blob)), MessageIllegalError)
    total(lambda: segment_topics(blob), MessageIllegalError)


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_are_refused(blob: bytes) -> None:
    total(lambda: list(decode_segments(blob)), MessageIllegalError)
    total(lambda: decode_results(blob), MessageIllegalError)


@given(RESULTS)
def test_results_round_trip(results: list[SegmentResult]) -> None:
    assert decode_results(encode_results(results)) == results


@given(st.data(), RESULTS)
def test_mutated_results_decode_or_are_refused(
    data: st.DataObject, results: list[SegmentResult]
) -> None:
    blob = data.draw(mutated(encode_results(results)))
    total(lambda: decode_results(blob), MessageIllegalError)


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"", "no segment"),
        (b"\x00\x00", "topic of 0 bytes"),
        (b"\x00\x80" + b"T" * 128 + b"\x00" * 8, "topic of 128 bytes"),
        (b"\x00\x01T\x00\x00\x00\x00", "cut short"),
        (b"\x00\x01T\x00\x00\x00\x00\x00\x00\x00\x00", "none or past the end"),
        (b"\x00\x01T\x00\x00\x00\x00\x00\x00\x00\x09abc", "past the end"),
        (b"\x00\x01\xff\x00\x00\x00\x00\x00\x00\x00\x01a", "not UTF-8"),
    ],
)
def test_a_broken_body_is_refused_saying_where(blob: bytes, why: str) -> None:
    with pytest.raises(MessageIllegalError, match=why):
        list(decode_segments(blob))
