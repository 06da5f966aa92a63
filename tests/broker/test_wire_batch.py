"""Batches decided by the request header, as RocketMQ 4.9's broker decides them: a
SEND_MESSAGE_V2 with ``m=true`` or a SEND_MESSAGE with ``batch=true`` is stored as a batch,
each message its own record, exactly as SEND_BATCH_MESSAGE is; refused as it is.

The requests are the bytes a stock Java client (MQClientAPIImpl, RemotingCommand) sends,
laid out here by hand from RocketMQ's format: the frame length, the header length with the
serialize type in its high byte, a JSON header (fastjson's) or the binary one
(RocketMQSerializable), and the body as MessageDecoder.encodeMessages lays out a batch.
The batch body decoder is total: property tests over valid bodies, then mutated ones.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.broker.broker import Broker
from rocketq.broker.wire.send import SendHeader, batch_records, java_true
from rocketq.common.exceptions import MessageIllegalError, PropertiesSizeExceededError
from rocketq.common.message import MessageExt
from rocketq.common.record import decode_records, encode_properties, iter_records
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, decode
from rocketq.remoting.transport import Connection
from tests.broker.conftest import WIRE_TOPIC
from tests.integration.waiting import wait_until

TOPIC: Final = WIRE_TOPIC
BORN_TS: Final = "1700000000000"
VERSION_4_9_4: Final = 401  # MQVersion.Version.V4_9_4.ordinal(), what a 4.9.4 client sends
# What the Java client's MessageBatch carries in the header: the first message's WAIT.
BATCH_PROPS: Final = "WAIT\x01true\x02"


# -- the bytes a stock client sends, by hand ---------------------------------------------


def java_entry(body: bytes, props: bytes, flag: int = 0) -> bytes:
    """MessageDecoder.encodeMessage: TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, body length
    and body, properties length (short) and properties."""
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return (
        struct.pack(">iiiii", total, 0, 0, flag, len(body))
        + body
        + struct.pack(">h", len(props))
        + props
    )


def stock_props(i: int) -> bytes:
    """A Java Message("WireTopic", "tag-i", "key-i", body)'s properties after the producer
    gave it a unique id (MessageClientIDSetter.setUniqID)."""
    uniq = f"7F0000011F9018B4AAC2179D3E8A000{i}"
    return f"KEYS\x01key-{i}\x02TAGS\x01tag-{i}\x02WAIT\x01true\x02UNIQ_KEY\x01{uniq}\x02".encode()


STOCK_BODY: Final = b"".join(java_entry(f"order-{i}".encode(), stock_props(i)) for i in range(4))


def test_the_stock_batch_body_is_laid_out_as_rocketmq_does() -> None:
    # The first message: total 103 = 20 + 7 (body) + 2 + 74 (properties); magic and body
    # CRC 0 as the client writes them, flag 0, then the body and the short properties length.
    first = bytes.fromhex("0000006700000000000000000000000000000007")
    first += b"order-0" + bytes.fromhex("004a") + stock_props(0)
    assert STOCK_BODY.startswith(first) and len(first) == 103
    assert len(STOCK_BODY) == 4 * 103


def v2_fields(topic: str, queue: int, props: str, sys_flag: int = 0) -> list[tuple[str, str]]:
    """SendMessageRequestHeaderV2 of a MessageBatch, fields as the Java client fills them
    (l, maxReconsumeTimes, is null for a topic that is not a retry topic: left out)."""
    return [
        ("a", "pg-stock"), ("b", topic), ("c", "TBW102"), ("d", "4"), ("e", str(queue)),
        ("f", str(sys_flag)), ("g", BORN_TS), ("h", "0"), ("i", props), ("j", "0"),
        ("k", "false"), ("m", "true"),
    ]  # fmt: skip


def v1_fields(topic: str, queue: int, props: str, sys_flag: int = 0) -> list[tuple[str, str]]:
    """SendMessageRequestHeader (SEND_MESSAGE) with its batch field set."""
    return [
        ("producerGroup", "pg-stock"), ("topic", topic), ("defaultTopic", "TBW102"),
        ("defaultTopicQueueNums", "4"), ("queueId", str(queue)), ("sysFlag", str(sys_flag)),
        ("bornTimestamp", BORN_TS), ("flag", "0"), ("properties", props),
        ("reconsumeTimes", "0"), ("unitMode", "false"), ("batch", "true"),
    ]  # fmt: skip


def fastjson_text(value: str) -> str:
    """A string as fastjson writes it: control characters as \\u00XX."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def json_frame(code: int, fields: list[tuple[str, str]], opaque: int, body: bytes) -> bytes:
    """A frame with fastjson's header: fields in alphabetical order, remark left out."""
    ext = ",".join(f"{fastjson_text(k)}:{fastjson_text(v)}" for k, v in fields)
    header = (
        f'{{"code":{code},"extFields":{{{ext}}},"flag":0,"language":"JAVA",'
        f'"opaque":{opaque},"serializeTypeCurrentRPC":"JSON","version":{VERSION_4_9_4}}}'
    ).encode()
    # length (all after this word), then serialize type 0 (JSON) | header length
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def binary_frame(code: int, fields: list[tuple[str, str]], opaque: int, body: bytes) -> bytes:
    """A frame with RocketMQ's binary header (RocketMQSerializable.rocketMQProtocolEncode)."""
    ext = b"".join(
        struct.pack(">h", len(k.encode()))
        + k.encode()
        + struct.pack(">i", len(v.encode()))
        + v.encode()
        for k, v in fields
    )
    header = struct.pack(">hbhii", code, 0, VERSION_4_9_4, opaque, 0)  # code, JAVA, version
    header += struct.pack(">i", 0)  # no remark
    header += struct.pack(">i", len(ext)) + ext
    # serialize type 1 (ROCKETMQ) in the high byte, the header length in the low three
    return (
        struct.pack(">I", 4 + len(header) + len(body))
        + bytes([1])
        + len(header).to_bytes(3, "big")
        + header
        + body
    )


def test_the_json_header_is_laid_out_as_fastjson_writes_it() -> None:
    frame = json_frame(RequestCode.SEND_MESSAGE_V2, [("i", BATCH_PROPS), ("m", "true")], 7, b"")
    header = (
        b'{"code":310,"extFields":{"i":"WAIT\\u0001true\\u0002","m":"true"},"flag":0,'
        b'"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    assert len(header) == 149
    assert frame == bytes.fromhex("0000009900000095") + header  # 4 + 149; JSON | 149


def test_the_binary_header_is_laid_out_as_rocketmq_does() -> None:
    frame = binary_frame(RequestCode.SEND_MESSAGE_V2, [("m", "true")], 7, b"")
    assert frame == bytes.fromhex(
        "00000024"  # length: 4 + 32 header bytes, no body
        "01000020"  # ROCKETMQ | header length 32
        "0136" "00" "0191" "00000007" "00000000"  # 310, JAVA, 401, opaque 7, flag 0
        "00000000"  # remark length 0
        "0000000b" "0001" "6d" "00000004" "74727565"  # ext fields: "m" -> "true"
    )  # fmt: skip


FRAMES = {"json": json_frame, "rocketmq": binary_frame}
FORMS = {"json": SerializeType.JSON, "rocketmq": SerializeType.ROCKETMQ}
HEADERS = {
    RequestCode.SEND_MESSAGE_V2: v2_fields,
    RequestCode.SEND_MESSAGE: v1_fields,
    RequestCode.SEND_BATCH_MESSAGE: v2_fields,
}


async def raw_request(addr: str, frame: bytes) -> RemotingCommand:
    """Write ``frame`` as it is to the broker at ``addr`` on a socket of its own; the
    answer."""
    host, _, port = addr.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(frame)
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5.0), "big")
        return decode(await asyncio.wait_for(reader.readexactly(size), 5.0))
    finally:
        writer.close()


async def pull_once(conn: Connection, topic: str, queue: int) -> list[MessageExt]:
    request = {
        "consumerGroup": "cg", "topic": topic, "queueId": str(queue), "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "-1", "suspendTimeoutMillis": "0",
    }  # fmt: skip
    answer = await conn.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, request), 5.0)
    if answer.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
        return []
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return decode_records(bytes(answer.body or b""))


async def pull(conn: Connection, topic: str, queue: int, count: int) -> list[MessageExt]:
    """The queue's messages from offset 0, once ``count`` are there (the broker's dispatch
    to its ConsumeQueue follows the append)."""
    got: list[MessageExt] = []

    async def enough() -> bool:
        got[:] = await pull_once(conn, topic, queue)
        return len(got) >= count

    await wait_until(enough, lambda: f"{count} messages in {topic}:{queue}, have {len(got)}", 10)
    return got


def facts(msg: MessageExt) -> tuple[object, ...]:
    """What a consumer sees of a message, apart from where it was stored."""
    return (msg.topic, msg.body, msg.flag, msg.sys_flag, msg.born_timestamp, msg.properties)


@pytest.mark.parametrize("form", ["json", "rocketmq"])
@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE])
async def test_a_stock_clients_batch_with_the_header_flag_is_stored_as_a_batch(
    wire: tuple[Broker, Connection], form: str, code: int
) -> None:
    b, conn = wire
    frame = FRAMES[form](code, HEADERS[code](TOPIC, 0, BATCH_PROPS), 7, STOCK_BODY)
    # The broker's frame decoder reads the request a stock client sent.
    cmd = decode(frame[4:])
    assert cmd.code == code and cmd.serialize_type == FORMS[form] and cmd.opaque == 7
    assert bytes(cmd.body or b"") == STOCK_BODY
    assert java_true(SendHeader(cmd).get("batch"))

    answer = await raw_request(conn.peer, frame)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.serialize_type == FORMS[form] and answer.opaque == 7 and answer.is_response
    ext = answer.ext or {}
    ids = ext["msgId"].split(",")  # the batch's offset ids, joined by commas
    assert len(ids) == 4 and len(set(ids)) == 4
    assert ext["queueId"] == "0" and ext["queueOffset"] == "0"  # the first message's

    msgs = await pull(conn, TOPIC, 0, 4)
    assert [m.body for m in msgs] == [b"order-0", b"order-1", b"order-2", b"order-3"]
    assert [m.queue_offset for m in msgs] == [0, 1, 2, 3]
    assert [m.offset_msg_id for m in msgs] == ids
    assert [m.tags for m in msgs] == [f"tag-{i}" for i in range(4)]
    assert [m.keys for m in msgs] == [[f"key-{i}"] for i in range(4)]
    assert [m.msg_id for m in msgs] == [f"7F0000011F9018B4AAC2179D3E8A000{i}" for i in range(4)]
    assert all(m.born_timestamp == int(BORN_TS) for m in msgs)
    assert all(m.properties["CLUSTER"] == b.config.broker_cluster_name for m in msgs)

    # SEND_BATCH_MESSAGE with the same body stores the same messages (queue 1).
    same = FRAMES[form](
        RequestCode.SEND_BATCH_MESSAGE, v2_fields(TOPIC, 1, BATCH_PROPS), 8, STOCK_BODY
    )
    answer_320 = await raw_request(conn.peer, same)
    assert answer_320.code == ResponseCode.SUCCESS, answer_320.remark
    assert set(answer_320.ext or {}) == set(ext)
    assert (answer_320.ext or {})["queueOffset"] == "0"
    assert [facts(m) for m in await pull(conn, TOPIC, 1, 4)] == [facts(m) for m in msgs]


@pytest.mark.parametrize(
    ("value", "is_batch"),
    [("true", True), ("True", True), ("TRUE", True), ("false", False), ("1", False),
     (" true", False), ("", False), (None, False)],
)  # fmt: skip
def test_the_flag_is_read_as_javas_boolean_parse_boolean(value: str | None, is_batch: bool) -> None:
    assert java_true(value) is is_batch


async def test_the_flag_in_any_case_makes_a_batch_and_without_it_the_body_is_one_message(
    wire: tuple[Broker, Connection],
) -> None:
    _b, conn = wire
    fields = dict(v2_fields(TOPIC, 0, BATCH_PROPS))
    upper = RemotingCommand(RequestCode.SEND_MESSAGE_V2, {**fields, "m": "True"}, STOCK_BODY)
    answer = await conn.invoke(upper, 5.0)
    assert answer.code == ResponseCode.SUCCESS and len((answer.ext or {})["msgId"].split(",")) == 4
    # m=false: the body is one message's, whatever it holds (as RocketMQ stores it).
    single = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, {**fields, "e": "1", "m": "false"}, STOCK_BODY
    )
    answer = await conn.invoke(single, 5.0)
    assert answer.code == ResponseCode.SUCCESS and "," not in (answer.ext or {})["msgId"]
    (msg,) = await pull(conn, TOPIC, 1, 1)
    assert msg.body == STOCK_BODY


# -- refusals: the same for the header flag as for SEND_BATCH_MESSAGE ----------------------

DELAYED_PROPS: Final = b"TAGS\x01t\x02DELAY\x012\x02"
TIMED_PROPS: Final = b"TIMER_DELIVER_MS\x014102444800000\x02"
TRANSACTION_PREPARED_TYPE: Final = 0x4
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024  # the wire fixture's store: the default


@pytest.mark.parametrize(
    ("topic", "header_props", "body", "sys_flag", "says"),
    [
        pytest.param(
            "%RETRY%cg", BATCH_PROPS, STOCK_BODY, 0,
            "batch request does not support retry group %RETRY%cg", id="retry-topic",
        ),
        pytest.param(
            TOPIC, BATCH_PROPS, java_entry(b"a", b"") + java_entry(b"b", DELAYED_PROPS), 0,
            "a batch cannot hold delayed messages", id="delayed-entry",
        ),
        pytest.param(
            TOPIC, BATCH_PROPS, java_entry(b"a", DELAYED_PROPS), 0,
            "a batch cannot hold delayed messages", id="delayed-batch-of-one",
        ),
        pytest.param(
            TOPIC, "DELAY\x013\x02" + BATCH_PROPS, STOCK_BODY, 0,
            "a batch cannot hold delayed messages", id="delay-in-the-header",
        ),
        pytest.param(
            TOPIC, BATCH_PROPS, java_entry(b"a", TIMED_PROPS) * 2, 0,
            "a batch cannot hold messages with a delivery time", id="delivery-time",
        ),
        pytest.param(
            TOPIC, BATCH_PROPS, STOCK_BODY, TRANSACTION_PREPARED_TYPE,
            "a transactional message cannot be sent in a batch", id="transactional",
        ),
        pytest.param(
            TOPIC, BATCH_PROPS, java_entry(b"x" * (MAX_MESSAGE_SIZE // 2), b"") * 3, 0,
            "a batch may hold at most 4194304 (max_message_size)", id="too-large",
        ),
        pytest.param(
            TOPIC, BATCH_PROPS, java_entry(b"a", b"") + b"\0\0\0", 0,
            "is not RocketMQ's batch encoding", id="cut-short",
        ),
    ],
)  # fmt: skip
async def test_a_refused_batch_gets_rocketmqs_code_and_one_remark_however_it_was_flagged(
    wire: tuple[Broker, Connection],
    topic: str,
    header_props: str,
    body: bytes,
    sys_flag: int,
    says: str,
) -> None:
    b, conn = wire
    stored = b.store.max_phy_offset
    answers = {}
    for code in (
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_MESSAGE,
    ):
        fields = HEADERS[code](topic, 0, header_props, sys_flag)
        for form, frame in FRAMES.items():
            answers[code, form] = await raw_request(conn.peer, frame(code, fields, 9, body))
    for key, answer in answers.items():
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL, (key, answer.remark)
        assert says in str(answer.remark), (key, answer.remark)
    if "batch encoding" not in says:  # those name what made the request a batch
        assert len({a.remark for a in answers.values()}) == 1, answers
    assert b.store.max_phy_offset == stored  # nothing stored


@pytest.mark.parametrize(
    ("code", "fields", "says"),
    [
        (RequestCode.SEND_MESSAGE_V2, v2_fields(TOPIC, 0, ""), "header says batch (m=true)"),
        (RequestCode.SEND_MESSAGE, v1_fields(TOPIC, 0, ""), "header says batch (batch=true)"),
        (RequestCode.SEND_BATCH_MESSAGE, v2_fields(TOPIC, 0, ""), "SEND_BATCH_MESSAGE's body"),
    ],
)
@pytest.mark.parametrize("body", [b"a plain message body", b"", java_entry(b"a", b"")[:-1]])
async def test_a_batch_flag_on_a_body_that_is_not_a_batch_is_refused_clearly(
    wire: tuple[Broker, Connection],
    code: int,
    fields: list[tuple[str, str]],
    says: str,
    body: bytes,
) -> None:
    b, conn = wire
    stored = b.store.max_phy_offset
    answer = await raw_request(conn.peer, json_frame(code, fields, 3, body))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert says in str(answer.remark) and "not RocketMQ's batch encoding" in str(answer.remark)
    assert b.store.max_phy_offset == stored


# -- the batch body decoder: total ------------------------------------------------------------

_props = st.dictionaries(
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=12),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=20),
    max_size=4,
)
_entries = st.lists(
    st.tuples(st.binary(max_size=64), _props, st.integers(-(2**31), 2**31 - 1)),
    min_size=1,
    max_size=8,
)


def _decode(body: bytes) -> tuple[bytes, list[int], int]:
    return batch_records(
        body,
        b"T",
        queue_id=1,
        born_timestamp=5,
        born=b"\x7f\0\0\x01\0\0\x30\x39",
        sys_flag=0,
        reconsume_times=0,
        batch_properties=b"CLUSTER\x01c\x02",
    )


@given(_entries)
@settings(max_examples=200, deadline=None)
def test_a_valid_batch_body_decodes_to_its_messages(
    entries: list[tuple[bytes, dict[str, str], int]],
) -> None:
    body = b"".join(
        java_entry(data, encode_properties(props), flag) for data, props, flag in entries
    )
    records, sizes, _traits = _decode(body)
    assert sum(sizes) == len(records) and [s for _, s in iter_records(records)] == sizes
    msgs = decode_records(records)
    assert [(m.body, m.flag, m.topic, m.queue_id) for m in msgs] == [
        (data, flag, "T", 1) for data, _, flag in entries
    ]
    assert [m.properties for m in msgs] == [{**props, "CLUSTER": "c"} for _, props, _ in entries]


def _checked(body: bytes) -> None:
    """The decoder returns well-formed records or raises MessageIllegalError: nothing else."""
    try:
        records, sizes, _traits = _decode(body)
    except MessageIllegalError:
        return
    assert sum(sizes) == len(records) and [s for _, s in iter_records(records)] == sizes


@given(_entries, st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_mutated_batch_body_decodes_or_is_refused(
    entries: list[tuple[bytes, dict[str, str], int]], data: st.DataObject
) -> None:
    body = b"".join(java_entry(d, encode_properties(p), f) for d, p, f in entries)
    _checked(mutated(body, data))


def mutated(body: bytes, data: st.DataObject) -> bytes:
    """``body`` with one to four bytes flipped, cut, inserted or size fields set to
    anything."""
    out = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(out)))
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "int"]))
        if kind == "flip" and at < len(out):
            out[at] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del out[at:]
        elif kind == "insert":
            out[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif kind == "int" and at + 4 <= len(out):  # a size field set to anything
            out[at : at + 4] = struct.pack(">i", data.draw(st.integers(-(2**31), 2**31 - 1)))
    return bytes(out)


@given(st.binary(max_size=512))
@settings(max_examples=300, deadline=None)
def test_any_bytes_decode_or_are_refused(body: bytes) -> None:
    _checked(body)


def test_properties_past_a_records_limit_are_refused() -> None:
    props = b"K\x01" + b"v" * 32_757 + b"\x02"  # 32,760 bytes; 32,770 with the batch's CLUSTER
    with pytest.raises(PropertiesSizeExceededError, match="at most 32767"):
        _decode(java_entry(b"a", props))
    # A length no Java client writes (over Short.MAX_VALUE) is refused the same way.
    entry = struct.pack(">iiiii", 22 + 1 + 65535, 0, 0, 0, 1) + b"a" + b"\xff\xff" + b"v" * 65535
    with pytest.raises(PropertiesSizeExceededError):
        _decode(entry)
