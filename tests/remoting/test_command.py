"""RemotingCommand frames: golden bytes of both header encodings as RocketMQ 4.9 writes them
(RemotingCommand.encode, RocketMQSerializable, fastjson's field order), and bad frames."""

from __future__ import annotations

import json
import struct

import pytest

from rocketq.cluster.remoting.codes import LanguageCode, RequestCode, SerializeType
from rocketq.cluster.remoting.command import (
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
