"""The consumer's checks of pulled bodies: CRC, inflation under a cap that a bomb never
allocates past, the split into good messages and BadMessageErrors, the options' checks,
and the order poll() hands out a pull's good runs and bad messages in."""

from __future__ import annotations

import contextlib
import time
import tracemalloc
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import ConfigError, MessageIllegalError, RocketqError
from rocketq.common.message import MessageExt, MessageQueue, SysFlag
from rocketq.common.record import decode_record, encode_record
from rocketq.sdk.message_body import (
    BAD_RECORD,
    BODY_CRC,
    INFLATE_CAP,
    MAX_BODY_INFLATE_RATIO,
    MAX_MESSAGE_SIZE,
    NOT_ZLIB,
    BadMessageError,
    InflateError,
    check_messages,
    decode_pulled,
    inflate_body,
)
from rocketq.sdk.metrics import ClientMetrics
from rocketq.sdk.pull_consumer import PullConsumer, PullConsumerConfig, _in_order
from rocketq.sdk.push_consumer import (
    ConsumerConfig,
    PushConsumer,
    after_broken,
    finish_messages,
    finish_pulled,
)

MiB = 1024 * 1024


def bomb(inflated: int) -> bytes:
    """A zlib stream of ``inflated`` zero bytes, made without holding them."""
    deflate = zlib.compressobj(9)
    chunk = bytes(MiB)
    parts = [deflate.compress(chunk) for _ in range(inflated // MiB)]
    parts.append(deflate.flush())
    return b"".join(parts)


def message(
    body: bytes,
    *,
    offset: int = 0,
    compressed: bool = False,
    crc: int | None = None,
    topic: bytes = b"T",
) -> MessageExt:
    return decode_record(
        encode_record(
            topic=topic,
            body=body,
            properties=b"UNIQ_KEY\x01ID" + str(offset).encode() + b"\x02",
            born_timestamp=1,
            born_host=b"\x7f\0\0\1\0\0\0\1",
            queue_offset=offset,
            sys_flag=int(SysFlag.COMPRESSED) if compressed else 0,
            body_crc=crc,
        )
    )


def test_the_default_cap_is_rocketmqs_max_message_size_four_times() -> None:
    assert 4 * MiB == MAX_MESSAGE_SIZE and MAX_BODY_INFLATE_RATIO == 4
    assert ConsumerConfig().max_body_bytes == 16 * MiB
    assert PullConsumerConfig().max_body_bytes == 16 * MiB
    assert ConsumerConfig(max_body_inflate_ratio=2, max_message_size=MiB).max_body_bytes == 2 * MiB


def test_a_body_exactly_at_the_cap_inflates_and_one_byte_more_does_not() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    data = zlib.compress(body)
    assert inflate_body(data, len(body)) == body
    with pytest.raises(InflateError) as caught:
        inflate_body(data, len(body) - 1)
    assert caught.value.reason == INFLATE_CAP


def test_a_bomb_is_refused_without_allocating_past_the_cap() -> None:
    data = bomb(256 * MiB)  # about 256 KiB compressed
    assert len(data) < 300 * 1024
    tracemalloc.start()
    try:
        started = time.monotonic()
        with pytest.raises(InflateError) as caught:
            inflate_body(data, 16 * MiB)
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.reason == INFLATE_CAP
    assert peak < 16 * MiB + 4 * MiB, peak
    assert elapsed < 5.0


@pytest.mark.parametrize(
    "data",
    [b"not zlib at all", zlib.compress(b"x" * 1000)[:-6], b"", b"\x78\x9c"],
    ids=["garbage", "truncated", "empty", "header-only"],
)
def test_data_that_is_not_a_whole_zlib_stream_is_not_zlib(data: bytes) -> None:
    with pytest.raises(InflateError) as caught:
        inflate_body(data, 16 * MiB)
    assert caught.value.reason == NOT_ZLIB


def test_good_messages_pass_and_bad_ones_become_errors_with_their_place() -> None:
    plain = message(b"plain", offset=1)
    packed = message(zlib.compress(b"packed" * 100), offset=2, compressed=True)
    garbage = message(b"\x00garbage", offset=3, compressed=True)
    big = message(bomb(32 * MiB), offset=4, compressed=True)
    crc = message(b"flipped", offset=5, crc=12345)
    good, bad = check_messages(
        [plain, packed, garbage, big, crc], max_body_bytes=16 * MiB, check_crc=True
    )
    assert [m.body for m in good] == [b"plain", b"packed" * 100]
    assert [(e.reason, e.queue_offset) for e in bad] == [
        (NOT_ZLIB, 3),
        (INFLATE_CAP, 4),
        (BODY_CRC, 5),
    ]
    for e in bad:
        assert isinstance(e, MessageIllegalError) and isinstance(e, RocketqError)
        assert e.topic == "T" and e.queue_id == 0 and e.msg_id == f"ID{e.queue_offset}"
        assert str(e.queue_offset) in str(e) and e.reason in str(e)
    # The bad messages are left as stored, for the DLQ.
    assert [e.message.body for e in bad if e.message is not None] == [
        b"\x00garbage",
        bad[1].message.body if bad[1].message else b"",
        b"flipped",
    ]


def test_crc_checks_can_be_turned_off() -> None:
    good, bad = check_messages([message(b"x", crc=1)], max_body_bytes=10, check_crc=False)
    assert [m.body for m in good] == [b"x"] and bad == []


def test_finish_messages_raises_the_first_bad_one_and_finish_pulled_splits() -> None:
    msgs = [message(b"ok", offset=1), message(b"zz", offset=2, compressed=True)]
    with pytest.raises(BadMessageError) as caught:
        finish_messages(msgs, "g")
    assert caught.value.queue_offset == 2
    good, bad = finish_pulled(
        [message(b"ok", offset=1), message(b"zz", offset=2, compressed=True)], "g"
    )
    assert [m.body for m in good] == [b"ok"] and [e.queue_offset for e in bad] == [2]


@pytest.mark.parametrize(
    "setting",
    [
        {"max_body_inflate_ratio": 0},
        {"max_body_inflate_ratio": True},
        {"max_body_inflate_ratio": 1.5},
        {"max_message_size": -1},
    ],
)
def test_limits_are_checked_at_once(setting: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(setting))):
        ConsumerConfig(**setting)
    with pytest.raises(ConfigError):
        PullConsumerConfig(**setting)
    with pytest.raises(ConfigError):
        PushConsumer("g", **setting)
    with pytest.raises(ConfigError):
        PullConsumer("g", **setting)


def test_poll_hands_out_good_runs_and_bad_messages_in_queue_order() -> None:
    msgs = [message(b"a", offset=1), message(b"c", offset=3), message(b"d", offset=4)]
    bad = [
        BadMessageError(message(b"e", offset=5), NOT_ZLIB, "x"),
        BadMessageError(message(b"b", offset=2), NOT_ZLIB, "x"),
        BadMessageError(message(b"0", offset=0), BODY_CRC, "x"),
    ]
    items = _in_order(msgs, bad)
    shape = [
        ("bad", i.queue_offset)
        if isinstance(i, BadMessageError)
        else ("good", [m.queue_offset for m in i])
        for i in items
    ]
    assert shape == [
        ("bad", 0),
        ("good", [1]),
        ("bad", 2),
        ("good", [3, 4]),
        ("bad", 5),
    ]
    assert _in_order(msgs, []) == [msgs] and _in_order([], []) == []


@settings(max_examples=200, deadline=2000)
@given(st.binary(max_size=4096))
def test_inflating_any_bytes_gives_bytes_under_the_cap_or_inflate_error(data: bytes) -> None:
    try:
        out = inflate_body(data, 64 * 1024)
    except InflateError as exc:
        assert exc.reason in (NOT_ZLIB, INFLATE_CAP)
    else:
        assert len(out) <= 64 * 1024


@settings(max_examples=100, deadline=2000)
@given(st.binary(max_size=20_000), st.integers(min_value=0, max_value=40_000))
def test_valid_bodies_round_trip_within_the_cap(body: bytes, limit: int) -> None:
    data = zlib.compress(body)
    if len(body) <= limit:
        assert inflate_body(data, limit) == body
    else:
        with pytest.raises(InflateError):
            inflate_body(data, limit)


@settings(max_examples=100, deadline=2000)
@given(st.binary(min_size=1, max_size=2000), st.data())
def test_mutated_streams_never_escape_inflate_error(body: bytes, data: st.DataObject) -> None:
    stream = bytearray(zlib.compress(body))
    i = data.draw(st.integers(min_value=0, max_value=len(stream) - 1))
    stream[i] ^= data.draw(st.integers(min_value=1, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(stream)))
    for candidate in (bytes(stream), bytes(stream[:cut])):
        with contextlib.suppress(InflateError):
            inflate_body(candidate, 4096)


def test_bad_messages_are_counted_in_the_client_metrics_from_the_first() -> None:
    metrics = ClientMetrics()
    assert metrics.registry.get_sample_value("rocketq_consumer_bad_messages_total") is None
    metrics.observe_bad_message("T", "g", "c1", NOT_ZLIB)
    metrics.observe_bad_message("T", "g", "c1", NOT_ZLIB)
    labels = {"topic": "T", "consumer_group": "g", "client_id": "c1", "reason": NOT_ZLIB}
    assert metrics.registry.get_sample_value("rocketq_consumer_bad_messages_total", labels) == 2
    # A second client on the same registry shares the counter.
    ClientMetrics(metrics.registry).observe_bad_message("T", "g", "c2", BODY_CRC)


def test_a_record_that_does_not_decode_ends_the_pull_and_is_skipped_when_first() -> None:
    mq = MessageQueue("T", "broker-a", 0)
    good = [encode(b"one", 5), encode(b"two", 6)]
    broken = bytearray(encode(b"three", 7))
    broken[4:8] = b"\0\0\0\0"  # not a message's magic code
    records, error = decode_pulled(b"".join(good) + bytes(broken) + encode(b"four", 8))
    assert [m.body for m in records] == [b"one", b"two"]
    assert isinstance(error, MessageIllegalError)
    # After good records: pull again from the broken one, nothing skipped yet.
    assert after_broken(mq, records, 5, error) == (7, None)
    # First in the answer: skip the offset pulled, and say so.
    records, error = decode_pulled(bytes(broken))
    assert records == [] and error is not None
    offset, skipped = after_broken(mq, records, 7, error)
    assert offset == 8 and skipped is not None
    assert (skipped.reason, skipped.queue_offset, skipped.message) == (BAD_RECORD, 7, None)
    assert "offset 7 of T queue 0" in str(skipped) and isinstance(skipped, MessageIllegalError)
    records, error = decode_pulled(b"".join(good))
    assert [m.queue_offset for m in records] == [5, 6] and error is None


def encode(body: bytes, offset: int) -> bytes:
    return encode_record(
        topic=b"T",
        body=body,
        properties=b"",
        born_timestamp=1,
        born_host=bytes(8),
        queue_offset=offset,
    )
