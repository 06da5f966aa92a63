from __future__ import annotations

import struct
import zlib

import pytest

from rocketq.common.exceptions import MessageIllegalError, PropertiesSizeExceededError
from rocketq.common.message import Message, decode_properties
from rocketq.common.message_id import UniqIdGenerator, decode_offset_msg_id, encode_offset_msg_id
from rocketq.common.record import (
    FIXED_SIZE,
    MESSAGE_MAGIC_CODE,
    check_topic,
    decode_record,
    decode_records,
    encode_host,
    encode_message,
    encode_properties,
    encode_record,
    encode_send_record,
    iter_records,
    property_value,
    tags_hash_code,
)


def test_offset_msg_id_vector_from_the_spec() -> None:
    assert decode_offset_msg_id("0A00593B00002A9F000000000003AC51") == ("10.0.89.59:10911", 240721)
    host = encode_host("10.0.89.59:10911")
    assert encode_offset_msg_id(host, 240721) == "0A00593B00002A9F000000000003AC51"


def test_offset_msg_id_ipv6_and_errors() -> None:
    raw = bytes(15) + b"\x01" + struct.pack(">iq", 10911, 7)
    assert decode_offset_msg_id(raw.hex()) == ("[::1]:10911", 7)
    with pytest.raises(ValueError, match="not hex"):
        decode_offset_msg_id("zz")
    with pytest.raises(ValueError, match="16 \\(IPv4\\) or 28"):
        decode_offset_msg_id("00" * 10)


def test_uniq_ids_are_unique_and_32_hex() -> None:
    gen = UniqIdGenerator("10.0.0.1")
    ids = {gen.next_id() for _ in range(10000)}
    assert len(ids) == 10000
    one = next(iter(ids))
    assert len(one) == 32 and one.startswith("0A000001")
    int(one, 16)


def test_a_uniq_id_holds_the_milliseconds_since_the_month_began_and_a_counter() -> None:
    import time
    from datetime import datetime

    gen = UniqIdGenerator("10.0.0.1")
    now = datetime.now()
    start = int(datetime(now.year, now.month, 1).timestamp() * 1000)
    before = int(time.time() * 1000) - start
    ids = [gen.next_id() for _ in range(70000)]
    after = int(time.time() * 1000) - start
    times = [int(i[20:28], 16) for i in ids]
    assert before <= times[0] <= times[-1] <= after
    counters = [int(i[28:], 16) for i in ids]
    assert counters[:3] == [0, 1, 2] and counters[0xFFFF] == 0xFFFF and counters[0x10000] == 0
    assert {i[:20] for i in ids} == {ids[0][:20]}


def test_tags_hash_code_is_java_string_hash_code() -> None:
    assert tags_hash_code("hello") == 99162322
    assert tags_hash_code("TagA") == 2598919
    assert tags_hash_code("") == 0
    # Overflow wraps to a negative int as in Java.
    assert tags_hash_code("polygenelubricants") == -2147483648
    # Non-BMP characters count as two UTF-16 units.
    assert tags_hash_code("\U0001f600") == (0xD83D * 31 + 0xDE00)


def test_golden_record_bytes() -> None:
    topic, body, props = b"T1", b"hi", b"TAGS\x01a\x02"
    rec = encode_record(
        topic=topic,
        body=body,
        properties=props,
        born_timestamp=0x0102030405060708,
        born_host=encode_host("1.2.3.4:5"),
        queue_id=3,
        flag=9,
        sys_flag=0x8,
        reconsume_times=2,
        prepared_transaction_offset=77,
        queue_offset=11,
        physical_offset=12,
        store_timestamp=13,
        store_host=encode_host("10.0.89.59:10911"),
    )
    expected = (
        struct.pack(">i", FIXED_SIZE + 2 + 2 + len(props))
        + struct.pack(">I", MESSAGE_MAGIC_CODE)
        + struct.pack(">I", zlib.crc32(body) & 0x7FFFFFFF)  # sign bit cleared, as RocketMQ
        + struct.pack(">ii", 3, 9)
        + struct.pack(">qq", 11, 12)
        + struct.pack(">i", 0x8)
        + struct.pack(">q", 0x0102030405060708)
        + bytes([1, 2, 3, 4])
        + struct.pack(">i", 5)
        + struct.pack(">q", 13)
        + bytes([10, 0, 89, 59])
        + struct.pack(">i", 10911)
        + struct.pack(">iq", 2, 77)
        + struct.pack(">i", 2)
        + body
        + bytes([2])
        + topic
        + struct.pack(">H", len(props))
        + props
    )
    assert rec == expected
    assert len(rec) == FIXED_SIZE + len(body) + len(topic) + len(props)


def test_every_field_round_trips() -> None:
    rec = encode_record(
        topic=b"RT",
        body=b"\x00\xffbody",
        properties=encode_properties({"KEYS": "a b", "x": "y"}),
        born_timestamp=123,
        born_host=encode_host("127.0.0.1:999"),
        queue_id=5,
        flag=-1,
        sys_flag=4,
        reconsume_times=3,
        prepared_transaction_offset=1 << 40,
        queue_offset=1 << 33,
        physical_offset=1 << 35,
        store_timestamp=456,
        store_host=encode_host("10.0.89.59:10911"),
    )
    m = decode_record(rec)
    assert (m.topic, m.body, m.queue_id, m.flag, m.sys_flag) == ("RT", b"\x00\xffbody", 5, -1, 4)
    assert (m.queue_offset, m.commit_log_offset) == (1 << 33, 1 << 35)
    assert (m.born_timestamp, m.born_host) == (123, "127.0.0.1:999")
    assert (m.store_timestamp, m.store_host) == (456, "10.0.89.59:10911")
    assert (m.reconsume_times, m.prepared_transaction_offset) == (3, 1 << 40)
    assert m.keys == ["a", "b"] and m.properties["x"] == "y"
    assert m.body_crc == zlib.crc32(b"\x00\xffbody") & 0x7FFFFFFF
    assert m.offset_msg_id == "0A00593B00002A9F" + (1 << 35).to_bytes(8, "big").hex().upper()


def test_message_encoding_sets_system_properties() -> None:
    msg = Message(
        "T", b"b", tags="TagA", keys=["k1", "k2"], properties={"region": "eu"}, delay_level=3
    )
    rec = encode_message(msg, born_timestamp=1, born_host=encode_host("127.0.0.1:1"), uniq_id="ABC")
    m = decode_record(rec)
    assert m.tags == "TagA" and m.keys == ["k1", "k2"] and m.delay_level == 3
    assert m.msg_id == "ABC" and m.user_properties() == {"region": "eu"}


def test_batch_decoding_and_iteration() -> None:
    host = encode_host("127.0.0.1:1")
    blob = b"".join(
        encode_message(Message("T", bytes([i]) * i), born_timestamp=i, born_host=host)
        for i in range(5)
    )
    assert [m.body for m in decode_records(blob)] == [bytes([i]) * i for i in range(5)]
    assert len(list(iter_records(blob))) == 5
    with pytest.raises(MessageIllegalError, match="trailing"):
        list(iter_records(blob + b"\0\0"))


@pytest.mark.parametrize(
    ("topic", "match"),
    [
        ("", "empty"),
        ("a" * 128, "at most 127"),
        ("bad topic", "illegal characters"),
        ("t/x", "illegal"),
    ],
)
def test_topic_checks(topic: str, match: str) -> None:
    with pytest.raises(MessageIllegalError, match=match):
        check_topic(topic)


def test_properties_limits_and_reserved_names() -> None:
    with pytest.raises(PropertiesSizeExceededError, match="32767"):
        encode_properties({"big": "x" * 40000})
    with pytest.raises(MessageIllegalError, match="reserved characters"):
        encode_properties({"a": "b\x01"})
    with pytest.raises(MessageIllegalError, match="reserved system property"):
        encode_message(
            Message("T", b"", properties={"UNIQ_KEY": "x"}),
            born_timestamp=0,
            born_host=encode_host("127.0.0.1:1"),
        )
    with pytest.raises(MessageIllegalError, match="space"):
        encode_message(
            Message("T", b"", keys=["a b"]), born_timestamp=0, born_host=encode_host("127.0.0.1:1")
        )


def test_property_lookup_respects_pair_boundaries() -> None:
    raw = encode_properties({"XTAGS": "no", "TAGS": "yes", "A": ""})
    assert property_value(raw, b"TAGS") == b"yes"
    assert property_value(raw, b"A") == b""
    assert property_value(raw, b"B") is None
    assert decode_properties(raw) == {"XTAGS": "no", "TAGS": "yes", "A": ""}


def test_bad_host() -> None:
    with pytest.raises(ValueError, match="no port"):
        encode_host("1.2.3.4")
    with pytest.raises(ValueError, match="IPv4"):
        encode_host("host:1")


def test_send_record_matches_encode_message_but_for_the_crc() -> None:
    """The producer's fast encoding is the same record, CRC left for the broker to stamp."""
    host = encode_host("10.0.0.7:4242")
    msg = Message("Fast", b"payload", flag=3)
    slow = encode_message(msg, born_timestamp=1234, born_host=host, uniq_id="ABC", sys_flag=1)
    fast = encode_send_record(
        b"\x04Fast", b"payload", b"UNIQ_KEY\x01ABC\x02", 1234, host[:4], 4242, 3, 1
    )
    assert len(fast) == len(slow)
    assert fast[:8] == slow[:8] and fast[12:] == slow[12:]
    assert fast[8:12] == b"\0\0\0\0"
    decoded = decode_record(fast)
    assert (decoded.topic, decoded.body, decoded.msg_id, decoded.flag, decoded.sys_flag) == (
        "Fast",
        b"payload",
        "ABC",
        3,
        1,
    )
    assert decoded.born_host == "10.0.0.7:4242"
