"""Batches from Apache's C++ 4.x client (rocketmq-client-cpp), stored as their messages.

Every release of that client, 1.2.3 to 2.2.0, flags a batch in the send header with
``UtilAll::to_string(bool)``, which writes a C++ bool as "1" (the fix, which writes
"true", came after 2.2.0 and was never released). RocketMQ 4.9's broker reads the flag
with Java's Boolean.parseBoolean, takes "1" for false and stores the whole batch as one
message (rocketmq-client-cpp issues #363 and #447). rocketq stores it as its messages
whenever the body is RocketMQ's batch encoding, checked as SEND_BATCH_MESSAGE is; any other
body with that flag stays one message, as RocketMQ stores it.

The frames are the bytes the C++ client writes, laid out here by hand from its source:

- 2.2.0 (``src/producer/DefaultMQProducerImpl.cpp`` sendKernelImpl, then
  ``src/MQClientAPIImpl.cpp`` sendMessage): request code SEND_MESSAGE_V2 (310) with
  SendMessageRequestHeaderV2 (``src/protocol/CommandHeader.cpp`` Encode: a..m, where
  d, e, f, h and l are JSON numbers and the rest strings; m, the batch flag, is "1");
- 1.2.3 and 1.2.4 (``src/producer/DefaultMQProducer.cpp``): SEND_MESSAGE (10) with
  SendMessageRequestHeader (producerGroup ... batch, ``batch`` being "1").

The header is always JSON (``src/protocol/RemotingCommand.cpp`` Encode, jsoncpp 0.10's
FastWriter: keys in byte order, no spaces, control characters as \\u00XX, a newline at the
end; serialize type 0 in the header-length word). Every request is signed
(``src/common/ClientRPCHook.cpp``), with the default credentials too: AccessKey "",
OnsChannel "ALIYUN", Signature the Base64 HMAC-SHA1, keyed with the empty secret, of the
header's values in key order (AccessKey and OnsChannel among them) and the body. The body
is ``src/message/BatchMessage.cpp`` encode: per message TOTALSIZE, MAGICCODE 0, BODYCRC 0,
FLAG, body length and body, properties length (short) and properties (a std::map: keys in
order), each message given its own UNIQ_KEY. The header's properties are the
BatchMessage's own: WAIT=true.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
import zlib
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.broker.broker import Broker
from rocketq.broker.wire.send import CPP_BATCH_FLAG, batch_records, cpp_batch, is_batch_encoding
from rocketq.common.exceptions import MessageIllegalError, PropertiesSizeExceededError
from rocketq.common.message import MessageExt
from rocketq.common.record import encode_properties
from rocketq.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, decode
from rocketq.remoting.transport import Connection
from tests.broker.conftest import WIRE_TOPIC
from tests.broker.test_wire_batch import (
    BATCH_PROPS,
    binary_frame,
    json_frame,
    mutated,
    pull,
    raw_request,
    v2_fields,
)

TOPIC: Final = WIRE_TOPIC
GROUP: Final = "pg-cpp"
BORN_TS: Final = "1700000000000"
OPAQUE: Final = 5
VERSION_4_6_0: Final = 333  # MQVersion::V4_6_0, the version 2.2.0 sends (its ordinal)
VERSION_3_1_8: Final = 63  # MQVersion::V3_1_8, the version 1.2.x sends
# BatchMessage's own properties: Init sets WAIT, buildBatchMessage sets it again.
HEADER_PROPS: Final = "WAIT\x01true\x02"
# StringIdMaker::createUniqID: 127.0.0.1, the pid's low two bytes (12345), rand(), then the
# milliseconds since the month began and the counter: 32 upper-case hex digits.
UNIQ: Final = [f"7F00000130391A2B3C4D0A1B2C3D000{i}" for i in range(6)]
COMPRESSED_FLAG: Final = 0x1  # MessageSysFlag::CompressedFlag
TRANSACTION_PREPARED_TYPE: Final = 0x4  # MessageSysFlag::TransactionPreparedType


# -- the bytes the C++ client sends, by hand ---------------------------------------------


def cpp_entry(body: bytes, props: bytes, flag: int = 0) -> bytes:
    """BatchMessage::encode(MQMessage&): storeSize = 20 + body + 2 + properties, then
    magic 0, body CRC 0, flag, body length (all htonl), the body, the properties length
    (htons of a short) and the properties."""
    total = 20 + len(body) + 2 + len(props)
    return (
        struct.pack(">iiiii", total, 0, 0, flag, len(body))
        + body
        + struct.pack(">h", len(props))
        + props
    )


def cpp_props(i: int) -> bytes:
    """MQMessage("WireTopic", "tag-i", "key-i", body)'s properties once BatchMessage::encode
    gave it a unique id: MQDecoder::messageProperties2String of the std::map, so in key
    order, each pair ended by \\x02."""
    return (
        f"KEYS\x01key-{i}\x02TAGS\x01tag-{i}\x02UNIQ_KEY\x01{UNIQ[i]}\x02WAIT\x01true\x02"
    ).encode()


def cpp_batch_body(first: int = 0, count: int = 3) -> bytes:
    return b"".join(cpp_entry(f"order-{i}".encode(), cpp_props(i)) for i in range(first, count))


BODY: Final = cpp_batch_body()


def jsoncpp_text(value: str) -> str:
    """A string as jsoncpp 0.10's valueToQuotedStringN writes it."""
    escapes = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
    escapes["\t"] = "\\t"
    out = []
    for ch in value:
        if ch in escapes:
            out.append(escapes[ch])
        elif 0 < ord(ch) <= 0x1F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def signature(values: list[str], body: bytes) -> str:
    """ClientRPCHook::doBeforeRequest: spas_sign (HMAC-SHA1, Base64) over the request map's
    values in key order, then the body; the default credentials' secret key is empty."""
    data = "".join(values).encode() + body
    return base64.b64encode(hmac.new(b"", data, hashlib.sha1).digest()).decode()


def cpp_frame(
    code: int,
    fields: list[tuple[str, str | int]],
    body: bytes,
    *,
    version: int,
    opaque: int = OPAQUE,
) -> bytes:
    """RemotingCommand::Encode: the JSON of code, extFields, flag, language, opaque, remark
    and version (jsoncpp's key order), FastWriter's newline after it; the frame length
    (4 + header + body), the header length (serialize type 0, JSON), header, body.
    ``fields`` are the header's declared fields, in key order, ints as JSON numbers; the
    signature fields go before them (upper case sorts first)."""
    text = [str(v) for _, v in fields]
    signed = [
        ("AccessKey", ""),
        ("OnsChannel", "ALIYUN"),
        ("Signature", signature(["", "ALIYUN", *text], body)),
    ]
    ext = ",".join(
        f"{jsoncpp_text(k)}:{v if isinstance(v, int) else jsoncpp_text(v)}"
        for k, v in [*signed, *fields]
    )
    header = (
        f'{{"code":{code},"extFields":{{{ext}}},"flag":0,"language":"CPP",'
        f'"opaque":{opaque},"remark":"","version":{version}}}\n'
    ).encode()
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def v2_frame(
    body: bytes = BODY,
    *,
    topic: str = TOPIC,
    queue: int = 0,
    sys_flag: int = 0,
    props: str = HEADER_PROPS,
    batch: str = CPP_BATCH_FLAG,
    opaque: int = OPAQUE,
) -> bytes:
    """2.2.0's SEND_MESSAGE_V2 of a BatchMessage: SendMessageRequestHeaderV2 made from the
    V1 header sendKernelImpl fills (defaultTopicQueueNums 4, consumeRetryTimes 16, unitMode
    false as "0", batch true as "1")."""
    fields: list[tuple[str, str | int]] = [
        ("a", GROUP), ("b", topic), ("c", "TBW102"), ("d", 4), ("e", queue), ("f", sys_flag),
        ("g", BORN_TS), ("h", 0), ("i", props), ("j", "0"), ("k", "0"), ("l", 16),
        ("m", batch),
    ]  # fmt: skip
    return cpp_frame(
        RequestCode.SEND_MESSAGE_V2, fields, body, version=VERSION_4_6_0, opaque=opaque
    )


def v1_frame(body: bytes = BODY, *, queue: int = 0, opaque: int = OPAQUE) -> bytes:
    """1.2.4's SEND_MESSAGE of a BatchMessage: SendMessageRequestHeader (no
    consumeRetryTimes in its JSON), the fields in key order."""
    fields: list[tuple[str, str | int]] = [
        ("batch", "1"), ("bornTimestamp", BORN_TS), ("defaultTopic", "TBW102"),
        ("defaultTopicQueueNums", 4), ("flag", 0), ("producerGroup", GROUP),
        ("properties", HEADER_PROPS), ("queueId", queue), ("reconsumeTimes", "0"),
        ("sysFlag", 0), ("topic", TOPIC), ("unitMode", "0"),
    ]  # fmt: skip
    return cpp_frame(RequestCode.SEND_MESSAGE, fields, body, version=VERSION_3_1_8, opaque=opaque)


# The whole of 2.2.0's frame for a batch of three to WireTopic's queue 0, byte by byte.
GOLDEN_HEADER: Final = (
    b'{"code":310,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN",'
    b'"Signature":"IC4NC+uXIuVWBwof9bJRP3CkJCI=","a":"pg-cpp","b":"WireTopic",'
    b'"c":"TBW102","d":4,"e":0,"f":0,"g":"1700000000000","h":0,'
    b'"i":"WAIT\\u0001true\\u0002","j":"0","k":"0","l":16,"m":"1"},"flag":0,'
    b'"language":"CPP","opaque":5,"remark":"","version":333}\n'
)
GOLDEN_FIRST_ENTRY: Final = (
    bytes.fromhex(
        "00000067"  # TOTALSIZE 103 = 20 + 7 + 2 + 74
        "00000000"  # MAGICCODE 0
        "00000000"  # BODYCRC 0
        "00000000"  # FLAG 0
        "00000007"  # body length 7
    )
    + b"order-0"
    + bytes.fromhex("004a")  # properties length 74
    + b"KEYS\x01key-0\x02TAGS\x01tag-0\x02"
    + b"UNIQ_KEY\x017F00000130391A2B3C4D0A1B2C3D0000\x02WAIT\x01true\x02"
)


def test_the_golden_frame_is_what_the_cpp_client_writes() -> None:
    assert len(GOLDEN_HEADER) == 314
    assert len(GOLDEN_FIRST_ENTRY) == 103 and len(BODY) == 3 * 103
    assert BODY.startswith(GOLDEN_FIRST_ENTRY)
    assert BODY[103:].startswith(bytes.fromhex("00000067") + bytes(12) + bytes.fromhex("00000007"))
    golden = (
        bytes.fromhex("000002730000013a")  # 4 + 314 + 309; JSON (0) | 314
        + GOLDEN_HEADER
        + BODY
    )
    assert v2_frame() == golden
    # The signature is ClientRPCHook's over the values in key order, then the body.
    values = ["", "ALIYUN", GROUP, TOPIC, "TBW102", "4", "0", "0", BORN_TS, "0"]
    values += [HEADER_PROPS, "0", "0", "16", "1"]
    assert signature(values, BODY) == "IC4NC+uXIuVWBwof9bJRP3CkJCI="


def test_the_broker_reads_the_cpp_frame() -> None:
    cmd = decode(v2_frame()[4:])
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.serialize_type == SerializeType.JSON
    assert (
        cmd.opaque == OPAQUE and cmd.language == LanguageCode.CPP and bytes(cmd.body or b"") == BODY
    )
    ext = cmd.ext or {}
    assert ext["m"] == "1" and ext["d"] == "4" and ext["l"] == "16" and ext["e"] == "0"
    assert ext["i"] == HEADER_PROPS and ext["AccessKey"] == "" and ext["OnsChannel"] == "ALIYUN"
    v1 = decode(v1_frame()[4:])
    assert v1.code == RequestCode.SEND_MESSAGE and (v1.ext or {})["batch"] == "1"


# -- through a broker's remoting port ------------------------------------------------------


def broker_addr(b: Broker) -> str:
    """The broker's own remoting port (the one it registers), not the fixture's server."""
    return f"127.0.0.1:{b.port}"


def assert_cpp_messages(msgs: list[MessageExt], first: int, cluster: str) -> None:
    """The messages are the C++ batch's, each with its own body, tag, key and id."""
    n = range(first, first + len(msgs))
    assert [m.body for m in msgs] == [f"order-{i}".encode() for i in n]
    assert [m.tags for m in msgs] == [f"tag-{i}" for i in n]
    assert [m.keys for m in msgs] == [[f"key-{i}"] for i in n]
    assert [m.msg_id for m in msgs] == [UNIQ[i] for i in n]
    for m in msgs:
        assert m.topic == TOPIC and m.flag == 0 and m.sys_flag == 0
        assert m.born_timestamp == int(BORN_TS) and m.born_host.startswith("127.0.0.1:")
        assert m.properties["WAIT"] == "true" and m.properties["CLUSTER"] == cluster


@pytest.mark.parametrize("release", ["2.2.0", "1.2.4"])
async def test_a_cpp_clients_batch_is_stored_as_its_messages(
    wire: tuple[Broker, Connection], release: str
) -> None:
    b, conn = wire
    frame = v2_frame() if release == "2.2.0" else v1_frame()
    answer = await raw_request(broker_addr(b), frame)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.serialize_type == SerializeType.JSON and answer.opaque == OPAQUE
    ext = answer.ext or {}
    ids = ext["msgId"].split(",")  # SendMessageResponseHeader: the offset ids
    assert len(ids) == 3 and len(set(ids)) == 3
    assert ext["queueId"] == "0" and ext["queueOffset"] == "0"

    msgs = await pull(conn, TOPIC, 0, 3)
    assert len(msgs) == 3
    assert [m.queue_offset for m in msgs] == [0, 1, 2]
    assert [m.offset_msg_id for m in msgs] == ids
    assert_cpp_messages(msgs, 0, b.config.broker_cluster_name)

    # The next batch to the queue follows on: offsets 3, 4, 5.
    again = await raw_request(broker_addr(b), v2_frame(cpp_batch_body(3, 6), opaque=6))
    assert again.code == ResponseCode.SUCCESS, again.remark
    assert (again.ext or {})["queueOffset"] == "3"
    msgs = await pull(conn, TOPIC, 0, 6)
    assert [m.queue_offset for m in msgs] == [0, 1, 2, 3, 4, 5]
    assert_cpp_messages(msgs[3:], 3, b.config.broker_cluster_name)


NOT_A_BATCH: Final = {
    "plain": (b"a plain message body", 0),
    "trailing-byte": (BODY + b"\0", 0),
    "cut-short": (BODY[:-1], 0),
    "bad-total": (b"\0\0\0\x68" + BODY[4:103], 0),  # says 104 bytes, is 103
    "zlib": (zlib.compress(BODY), COMPRESSED_FLAG),  # 1.2.3 compressed large batches
    "compressed-flag": (BODY, COMPRESSED_FLAG),
}


@pytest.mark.parametrize("case", list(NOT_A_BATCH))
async def test_a_body_that_is_not_batch_encoding_stays_one_message(
    wire: tuple[Broker, Connection], case: str
) -> None:
    b, conn = wire
    body, sys_flag = NOT_A_BATCH[case]
    answer = await raw_request(broker_addr(b), v2_frame(body, queue=1, sys_flag=sys_flag))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert "," not in (answer.ext or {})["msgId"] and (answer.ext or {})["queueOffset"] == "0"
    (msg,) = await pull(conn, TOPIC, 1, 1)
    assert msg.body == body and msg.sys_flag == sys_flag and msg.queue_offset == 0
    assert msg.properties["WAIT"] == "true" and "UNIQ_KEY" not in msg.properties
    assert b.store.max_offset_in_queue(TOPIC, 1) == 1  # nothing else reached the queue


async def test_the_flag_true_still_makes_a_batch(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    # The Java client's frame (fastjson header, m=true), then the C++ client as fixed after
    # 2.2.0 (m=true), then "1" in RocketMQ's binary header: each stored as three messages.
    java = json_frame(RequestCode.SEND_MESSAGE_V2, v2_fields(TOPIC, 0, BATCH_PROPS), 7, BODY)
    fixed = v2_frame(cpp_batch_body(3, 6), batch="true", opaque=8)
    binary_fields = [(k, "1" if k == "m" else v) for k, v in v2_fields(TOPIC, 0, BATCH_PROPS)]
    binary = binary_frame(RequestCode.SEND_MESSAGE_V2, binary_fields, 9, BODY)
    offsets = []
    for frame in (java, fixed, binary):
        answer = await raw_request(broker_addr(b), frame)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert len((answer.ext or {})["msgId"].split(",")) == 3
        offsets.append((answer.ext or {})["queueOffset"])
    assert offsets == ["0", "3", "6"]
    msgs = await pull(conn, TOPIC, 0, 9)
    assert [m.queue_offset for m in msgs] == list(range(9))
    assert [m.body for m in msgs] == [f"order-{i}".encode() for i in (0, 1, 2, 3, 4, 5, 0, 1, 2)]


# -- refused as SEND_BATCH_MESSAGE is refused ----------------------------------------------

MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024  # the wire fixture's store: the default


@pytest.mark.parametrize(
    ("frame", "says"),
    [
        pytest.param(
            # The C++ client checks the delay level of every message but the first.
            v2_frame(cpp_entry(b"a", b"DELAY\x013\x02WAIT\x01true\x02") + BODY),
            "a batch cannot hold delayed messages", id="delayed-first-message",
        ),
        pytest.param(
            v2_frame(cpp_entry(b"a", b"TIMER_DELIVER_MS\x014102444800000\x02") + BODY),
            "a batch cannot hold messages with a delivery time", id="delivery-time",
        ),
        pytest.param(
            v2_frame(props="DELAY\x012\x02" + HEADER_PROPS),
            "a batch cannot hold delayed messages", id="delay-in-the-header",
        ),
        pytest.param(
            v2_frame(sys_flag=TRANSACTION_PREPARED_TYPE),
            "a transactional message cannot be sent in a batch", id="transactional",
        ),
        pytest.param(
            v2_frame(topic="%RETRY%cg"),
            "batch request does not support retry group %RETRY%cg", id="retry-topic",
        ),
        pytest.param(
            v2_frame(topic="bad topic"), "bad topic", id="illegal-topic",
        ),
        pytest.param(
            v2_frame(queue=7),
            "queue id 7 is illegal: topic WireTopic has 2 write queues", id="queue-id",
        ),
        pytest.param(
            v2_frame(cpp_entry(b"x" * (MAX_MESSAGE_SIZE // 2), b"") * 3),
            "a batch may hold at most 4194304 (max_message_size)", id="too-large",
        ),
        pytest.param(
            v2_frame(cpp_entry(b"a", b"K\x01" + b"v" * 32_757 + b"\x02")),
            "at most 32767 fit in a record", id="properties-too-long",
        ),
    ],
)  # fmt: skip
async def test_a_cpp_batch_is_refused_as_send_batch_message_is(
    wire: tuple[Broker, Connection], frame: bytes, says: str
) -> None:
    b, _conn = wire
    stored = b.store.max_phy_offset
    answer = await raw_request(broker_addr(b), frame)
    assert answer.code != ResponseCode.SUCCESS
    assert says in str(answer.remark), answer.remark
    assert b.store.max_phy_offset == stored  # nothing stored


async def test_a_refusal_is_the_one_send_batch_message_gets(
    wire: tuple[Broker, Connection],
) -> None:
    b, conn = wire
    body = cpp_entry(b"a", b"DELAY\x013\x02") + BODY
    cpp = await raw_request(broker_addr(b), v2_frame(body))
    request = RemotingCommand(
        RequestCode.SEND_BATCH_MESSAGE, dict(v2_fields(TOPIC, 0, HEADER_PROPS)), body
    )
    java = await conn.invoke(request, 5.0)
    assert (cpp.code, cpp.remark) == (java.code, java.remark)
    assert cpp.code == ResponseCode.MESSAGE_ILLEGAL


# -- the decision: total over any bytes ----------------------------------------------------


def _records(body: bytes, batch_properties: bytes = b"") -> tuple[bytes, list[int], int]:
    """batch_records of a batch body sent to topic T, queue 0, from 127.0.0.1:12345."""
    return batch_records(
        body,
        b"T",
        queue_id=0,
        born_timestamp=1,
        born=b"\x7f\0\0\x01\0\0\x30\x39",
        sys_flag=0,
        reconsume_times=0,
        batch_properties=batch_properties,
    )


def _decodes(body: bytes) -> bool:
    """Whether batch_records takes ``body`` as batch encoding (too long properties are a
    refusal of a batch, not a sign that it is none)."""
    try:
        _records(body)
    except PropertiesSizeExceededError:
        return True
    except MessageIllegalError:
        return False
    return True


_props = st.dictionaries(
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=10),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=16),
    max_size=4,
)
_entries = st.lists(
    st.tuples(st.binary(max_size=48), _props, st.integers(-(2**31), 2**31 - 1)),
    min_size=1,
    max_size=6,
)


@given(_entries)
@settings(max_examples=150, deadline=None)
def test_a_valid_batch_body_is_batch_encoding(
    entries: list[tuple[bytes, dict[str, str], int]],
) -> None:
    body = b"".join(cpp_entry(d, encode_properties(p), f) for d, p, f in entries)
    assert is_batch_encoding(body) and cpp_batch(CPP_BATCH_FLAG, body, 0)
    assert not cpp_batch(CPP_BATCH_FLAG, body, COMPRESSED_FLAG)
    assert not is_batch_encoding(body + b"\0") and not is_batch_encoding(body[:-1])


@given(_entries, st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_mutated_body_is_judged_as_the_batch_decoder_judges_it(
    entries: list[tuple[bytes, dict[str, str], int]], data: st.DataObject
) -> None:
    body = mutated(b"".join(cpp_entry(d, encode_properties(p), f) for d, p, f in entries), data)
    assert is_batch_encoding(body) is _decodes(body)


@given(st.binary(max_size=512), st.sampled_from(["1", "0", "true", "", None, "01", " 1"]))
@settings(max_examples=300, deadline=None)
def test_any_bytes_and_flag_are_judged(body: bytes, flag: str | None) -> None:
    assert is_batch_encoding(body) is _decodes(body)
    assert cpp_batch(flag, body, 0) is (flag == "1" and _decodes(body))
