"""RemotingCommand frames: golden bytes of both header encodings as RocketMQ 4.9 writes them
(RemotingCommand.encode, RocketMQSerializable, fastjson's field order), and bad frames."""

from __future__ import annotations

import json
import struct

import pytest

from rocketq.remoting.codes import LanguageCode, RequestCode, SerializeType
from rocketq.remoting.command import (
    MAX_JSON_DEPTH,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    RemotingCommand,
    RemotingError,
    decode,
    encode,
)


def test_binary_header_golden_bytes() -> None:
    cmd = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        {"a": "pg", "b": "T"},
        b"hi",
        opaque=7,
        language=LanguageCode.JAVA,
        version=399,
        serialize_type=SerializeType.ROCKETMQ,
    )
    header = bytes.fromhex(
        "0136"  # code 310
        "00"  # language JAVA
        "018f"  # version 399
        "00000007"  # opaque
        "00000000"  # flag: a request
        "00000000"  # no remark
        "00000011"  # ext fields: 17 bytes
        "0001" "61" "00000002" "7067"  # a = pg
        "0001" "62" "00000001" "54"  # b = T
    )  # fmt: skip
    assert len(header) == 38
    expected = struct.pack(">II", 4 + 38 + 2, (1 << 24) | 38) + header + b"hi"
    assert encode(cmd) == expected
    back = decode(expected[4:])
    assert (back.code, back.opaque, back.flag, back.version) == (310, 7, 0, 399)
    assert back.ext == {"a": "pg", "b": "T"} and bytes(back.body or b"") == b"hi"
    assert back.serialize_type == SerializeType.ROCKETMQ and back.language == LanguageCode.JAVA


def test_binary_header_with_remark_and_no_fields() -> None:
    cmd = RemotingCommand(
        17, None, None, opaque=1, flag=RESPONSE_FLAG, remark="топик",
        language=LanguageCode.JAVA, version=399, serialize_type=SerializeType.ROCKETMQ,
    )  # fmt: skip
    remark = "топик".encode()
    header = (
        struct.pack(">hbhii", 17, 0, 399, 1, 1)
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", 0)
    )
    assert encode(cmd) == struct.pack(">II", 4 + len(header), (1 << 24) | len(header)) + header
    back = decode(encode(cmd)[4:])
    assert back.remark == "топик" and back.ext is None and back.body is None and back.is_response


def test_json_header_golden_bytes() -> None:
    """fastjson writes RemotingCommand's getters in alphabetical order, leaves out a null
    remark and null ext fields, and names the language."""
    cmd = RemotingCommand(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": "TopicTest"},
        opaque=42,
        language=LanguageCode.JAVA,
        version=399,
    )
    text = (
        b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
        b'"opaque":42,"serializeTypeCurrentRPC":"JSON","version":399}'
    )
    assert encode(cmd) == struct.pack(">II", 4 + len(text), len(text)) + text
    reply = RemotingCommand(1, None, b"{}", opaque=42, flag=RESPONSE_FLAG, remark="no",
                            language=LanguageCode.JAVA, version=399)  # fmt: skip
    text = (
        b'{"code":1,"flag":1,"language":"JAVA","opaque":42,"remark":"no",'
        b'"serializeTypeCurrentRPC":"JSON","version":399}'
    )
    assert encode(reply) == struct.pack(">II", 4 + len(text) + 2, len(text)) + text + b"{}"


def test_a_json_header_from_another_client_decodes() -> None:
    """Fields in any order, numbers where strings are expected, a language we do not know."""
    text = json.dumps(
        {"opaque": 3, "code": 11, "flag": 2, "language": "NODE_JS", "version": 1,
         "extFields": {"queueId": 0, "commitOffset": "12", "sub": True}}
    ).encode()  # fmt: skip
    cmd = decode(struct.pack(">I", len(text)) + text + b"body")
    assert cmd.is_oneway and not cmd.is_response and cmd.opaque == 3
    assert cmd.ext == {"queueId": "0", "commitOffset": "12", "sub": "true"}
    assert cmd.language == LanguageCode.OTHER and bytes(cmd.body or b"") == b"body"


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_round_trip(kind: int) -> None:
    cmd = RemotingCommand(
        RequestCode.PULL_MESSAGE,
        {"consumerGroup": "cg", "topic": "T", "queueId": "3", "queueOffset": "100"},
        bytes(range(256)),
        opaque=2**31 - 1,
        flag=ONEWAY_FLAG,
        remark="r",
        serialize_type=kind,
    )
    back = decode(encode(cmd)[4:])
    assert back.ext == cmd.ext and bytes(back.body or b"") == bytes(range(256))
    assert (back.code, back.opaque, back.flag, back.remark) == (11, 2**31 - 1, 2, "r")
    assert back.language == LanguageCode.PYTHON
    resp = back.response(0, {"offset": "5"})
    assert resp.opaque == cmd.opaque and resp.is_response and resp.serialize_type == kind


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (b"\x00\x00", "too short"),
        (struct.pack(">I", 100) + b"{}", "runs past"),
        (struct.pack(">I", (7 << 24) | 2) + b"{}", "unknown serialize type 7"),
        (struct.pack(">I", 3) + b"{x}", "does not parse"),
        (struct.pack(">I", 2) + b"[]", "integer code"),
        (struct.pack(">I", (1 << 24) | 5) + b"\x00\x01\x00\x00\x00", "cut short"),
        (
            struct.pack(">I", (1 << 24) | 19)
            + struct.pack(">hbhii", 1, 0, 0, 0, 0)
            + struct.pack(">i", 50)
            + b"ab",
            "remark runs past",
        ),
    ],
)
def test_bad_frames_say_what_is_wrong(frame: bytes, why: str) -> None:
    with pytest.raises(RemotingError, match=why):
        decode(frame)


def test_a_missing_field_is_named() -> None:
    cmd = RemotingCommand(11, {"topic": "T"})
    assert cmd.field("topic") == "T"
    with pytest.raises(RemotingError, match="'queueId'"):
        cmd.field("queueId")


# -- hostile headers: every length checked before it moves the cursor ---------------------

# RocketMQ's binary header whose 8 bytes of ext fields are an empty key and value, then a
# key length of -6 (0xfffa, which also takes the blob off the ASCII path): the decoder once
# stepped back 4 bytes for each such key, round the same bytes for ever.
HANG_37: bytes = bytes.fromhex(
    "000000210100001d006a00000000000001000000000000000000000008000000000000fffa"
)


def binary_header(remark: bytes = b"", fields: bytes = b"", *, remark_len: int | None = None,
                  fields_len: int | None = None) -> bytes:  # fmt: skip
    """A frame (without its length word) of a binary header with these raw parts."""
    header = (
        struct.pack(">hbhii", 105, 0, 399, 1, 0)
        + struct.pack(">i", len(remark) if remark_len is None else remark_len)
        + remark
        + struct.pack(">i", len(fields) if fields_len is None else fields_len)
        + fields
    )
    return struct.pack(">I", (1 << 24) | len(header)) + header


def field(key: bytes, value: bytes, *, key_len: int | None = None,
          value_len: int | None = None) -> bytes:  # fmt: skip
    return (
        struct.pack(">h", len(key) if key_len is None else key_len)
        + key
        + struct.pack(">i", len(value) if value_len is None else value_len)
        + value
    )


def test_the_37_byte_frame_is_refused_at_once() -> None:
    assert len(HANG_37) == 37
    size = struct.unpack(">I", HANG_37[:4])[0]
    with pytest.raises(RemotingError, match="ext field at byte 6 has a bad key length"):
        decode(HANG_37[4 : 4 + size])


@pytest.mark.parametrize("non_ascii", [False, True], ids=["ascii", "utf8"])
@pytest.mark.parametrize(
    ("fields", "why"),
    [
        (field(b"a", b"", value_len=-6), "bad value length"),
        (field(b"a", b"", value_len=-1), "bad value length"),
        (field(b"a", b"x", value_len=-0x80000000), "bad value length"),
        (field(b"a", b"x", value_len=0x7FFFFFFF), "bad value length"),
        (field(b"", b"x", key_len=-1), "bad key length"),
        (field(b"", b"x", key_len=-0x8000), "bad key length"),
        (field(b"a", b"x", key_len=0x7FFF), "runs past"),
        (field(b"a", b"x")[:-2], "runs past"),
        (field(b"a", b"x") + b"\x00", "bad key length"),
        (field(b"a", b"x") + b"\x00\x00\x00", "runs past"),
    ],
)
def test_bad_ext_field_lengths_are_refused_on_both_paths(
    fields: bytes, why: str, non_ascii: bool
) -> None:
    if non_ascii:  # a field that is all right but takes the blob off the ASCII path
        fields = field("é".encode(), "ü".encode()) + fields
    with pytest.raises(RemotingError, match=why):
        decode(binary_header(fields=fields))


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (binary_header(b"x", remark_len=-1), "remark runs past"),
        (binary_header(b"x", remark_len=-0x80000000), "remark runs past"),
        (binary_header(b"x", remark_len=0x7FFFFFFF), "remark runs past"),
        (binary_header(b"\xff\xfe"), "remark is not UTF-8"),
        (binary_header(fields=b"x", fields_len=-1), "ext fields run past"),
        (binary_header(fields=b"x", fields_len=0x7FFFFFFF), "ext fields run past"),
        (binary_header(fields=field(b"k", b"\xc3")), "not UTF-8"),
        (binary_header(fields=field(b"\xed\xa0\x80", b"v")), "not UTF-8"),
        (
            struct.pack(">I", (1 << 24) | 20) + struct.pack(">hbhiii", 1, 0, 0, 0, 0, 3) + b"abc",
            "cut short",
        ),
    ],
)
def test_bad_binary_header_lengths_are_refused(frame: bytes, why: str) -> None:
    with pytest.raises(RemotingError, match=why):
        decode(frame)


def test_non_ascii_fields_decode_each_on_its_own() -> None:
    fields = field("ключ".encode(), "значение".encode()) + field(b"a", b"") + field(b"", b"b")
    cmd = decode(binary_header(fields=fields))
    assert cmd.ext == {"ключ": "значение", "a": "", "": "b"}


def json_frame(text: bytes) -> bytes:
    return struct.pack(">I", len(text)) + text


def nested_header(depth: int) -> bytes:
    """A JSON header whose ext field nests arrays until the header is ``depth`` deep."""
    inner = depth - 2  # the header object and extFields
    return b'{"code":1,"extFields":{"a":' + b"[" * inner + b"]" * inner + b"}}"


def test_json_header_nesting_is_bounded() -> None:
    assert decode(json_frame(nested_header(MAX_JSON_DEPTH))).ext == {
        "a": "[" * (MAX_JSON_DEPTH - 2) + "]" * (MAX_JSON_DEPTH - 2)
    }
    for depth in (MAX_JSON_DEPTH + 1, 100_000):
        with pytest.raises(RemotingError, match=f"deeper than {MAX_JSON_DEPTH} levels"):
            decode(json_frame(nested_header(depth)))
    # Brackets inside a string are text, however many.
    text = b'{"code":1,"remark":"' + b"[{" * 5000 + b'"}'
    assert decode(json_frame(text)).remark == "[{" * 5000


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"code":1,"opaque":1e999}', "bad field"),
        (b'{"code":1,"opaque":NaN}', "bad field"),
        (b'{"code":1,"opaque":-Infinity}', "bad field"),
        (b'{"code":1,"opaque":4294967296}', "opaque 4294967296 is outside"),
        (b'{"code":2147483648}', "code 2147483648 is outside"),
        (b'{"code":1,"flag":[1]}', "flag is list"),
        (b'{"code":1,"version":{"a":1}}', "version is dict"),
        (b'{"code":1,"language":300}', "language 300 is outside"),
        (b'{"code":1,"opaque":"' + b"9" * 5000 + b'"}', "bad field"),
        (b'{"code":1,"opaque":' + b"9" * 5000 + b"}", "does not parse"),
        (b'{"code":true}', "integer code"),
        (b'{"code":1.0}', "integer code"),
        (b'{"code":1,"extFields":[]}', "extFields is not an object"),
        (b'{"code":1,"remark":"\xff"}', "not UTF-8"),
        ('{"code":1}'.encode("utf-16"), "not UTF-8"),
        (b"\xef\xbb\xbf{}", "does not parse"),
        (rb'{"code":1,"extFields":{"topic":"\ud800"}}', "lone surrogate"),
        (rb'{"code":1,"remark":"\udfff"}', "lone surrogate"),
    ],
)
def test_bad_json_header_fields_are_refused(text: bytes, why: str) -> None:
    with pytest.raises(RemotingError, match=why):
        decode(json_frame(text))


def test_json_header_values_read_as_java_reads_them() -> None:
    text = b'{"code":1,"opaque":"7","flag":1.0,"extFields":{"a":null,"b":[1,{"c":2}],"d":1.5}}'
    cmd = decode(json_frame(text))
    assert (cmd.opaque, cmd.flag) == (7, 1)
    assert cmd.ext == {"b": '[1,{"c":2}]', "d": "1.5"}  # a null field is an absent one
