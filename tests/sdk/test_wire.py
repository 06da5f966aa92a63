"""The SDK's send, pull and heartbeat requests and replies (sdk/wire.py): the header fields
and bodies as RocketMQ 4.9's client writes them, and round trips through the broker's own
handlers running in this process."""

from __future__ import annotations

import struct

import pytest

from rocketq.broker.broker import Broker
from rocketq.common.exceptions import RocketqSystemError, TopicNotExistError
from rocketq.common.record import decode_records, tags_hash_code
from rocketq.common.record import encode_batch_entry as batch_entry
from rocketq.remoting import fastjson
from rocketq.remoting.codes import PullSysFlag, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection
from rocketq.sdk.wire import (
    ConsumerData,
    PullOutcome,
    SubscriptionData,
    batch_body,
    heartbeat_request,
    parse_pull,
    parse_send,
    pull_request,
    send_request,
)
from tests.broker.conftest import WIRE_TOPIC, wire  # noqa: F401 - the fixture, shared

TOPIC = WIRE_TOPIC


def test_send_header_uses_the_one_letter_names() -> None:
    cmd = send_request(
        b"hi", "TAGS\x01A\x02", group="pg", topic="T", queue_id=3, born_timestamp=17, flag=5
    )
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.body == b"hi"
    assert cmd.ext == {
        "a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "17",
        "h": "5", "i": "TAGS\x01A\x02", "j": "0", "k": "false",
    }  # fmt: skip
    retry = send_request(b"x", "", group="pg", topic="%RETRY%g", queue_id=0, born_timestamp=1,
                         reconsume_times=2, max_reconsume_times=16)  # fmt: skip
    assert retry.ext is not None and (retry.ext["j"], retry.ext["l"]) == ("2", "16")
    batch = send_request(b"", "WAIT\x01true\x02", group="pg", topic="T", queue_id=0,
                         born_timestamp=1, batch=True)  # fmt: skip
    assert batch.code == RequestCode.SEND_BATCH_MESSAGE and batch.ext and batch.ext["m"] == "true"


def test_batch_entry_golden_bytes() -> None:
    entry = batch_entry(b"ab", b"K\x01v\x02", flag=9)
    assert entry == (
        struct.pack(">iiiii", 28, 0, 0, 9, 2)  # total 22 + 2 + 4, magic 0, CRC 0, flag, body
        + b"ab"
        + b"\x00\x04"
        + b"K\x01v\x02"
    )
    assert batch_body([(b"ab", b"K\x01v\x02", 9), (b"c", b"", 0)]) == entry + batch_entry(b"c", b"")


def test_pull_header_flags() -> None:
    plain = pull_request(group="g", topic="T", queue_id=1, offset=5)
    assert plain.ext is not None and plain.ext["sysFlag"] == "0"
    assert "subscription" not in plain.ext
    full = pull_request(group="g", topic="T", queue_id=1, offset=5, commit_offset=4,
                        suspend_timeout_ms=15000, subscription="a || b", sub_version=7)  # fmt: skip
    want = PullSysFlag.FLAG_COMMIT_OFFSET | PullSysFlag.FLAG_SUSPEND | PullSysFlag.FLAG_SUBSCRIPTION
    assert full.ext is not None and full.ext["sysFlag"] == str(want)
    assert (full.ext["commitOffset"], full.ext["subscription"], full.ext["subVersion"]) == (
        "4", "a || b", "7"
    )  # fmt: skip


def test_heartbeat_body_is_heartbeat_data() -> None:
    cmd = heartbeat_request(
        "c@1",
        ["pg"],
        [ConsumerData("cg", subscriptions=[SubscriptionData("T", "TagA || TagB", version=3)])],
    )
    doc = fastjson.loads(bytes(cmd.body or b""))
    assert doc["clientID"] == "c@1" and doc["producerDataSet"] == [{"groupName": "pg"}]
    (consumer,) = doc["consumerDataSet"]
    assert consumer["groupName"] == "cg" and consumer["messageModel"] == "CLUSTERING"
    (sub,) = consumer["subscriptionDataSet"]
    assert sub["tagsSet"] == ["TagA", "TagB"]
    assert sub["codeSet"] == [tags_hash_code("TagA"), tags_hash_code("TagB")]
    assert sub["subString"] == "TagA || TagB" and sub["expressionType"] == "TAG"


def test_replies_that_are_errors_raise_their_class() -> None:
    request = RemotingCommand(RequestCode.SEND_MESSAGE_V2)
    with pytest.raises(TopicNotExistError, match="no topic"):
        parse_send(request.response(ResponseCode.TOPIC_NOT_EXIST, remark="no topic"))
    with pytest.raises(RocketqSystemError, match="not a number"):
        parse_send(request.response(0, {"msgId": "X", "queueId": "a", "queueOffset": "1"}))
    stored = parse_send(
        request.response(
            ResponseCode.FLUSH_SLAVE_TIMEOUT, {"msgId": "A,B", "queueId": "1", "queueOffset": "7"}
        )
    )
    assert stored.msg_ids == ["A", "B"] and stored.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
    with pytest.raises(RocketqSystemError, match="lacks its offsets"):
        parse_pull(request.response(ResponseCode.PULL_NOT_FOUND))


async def test_round_trips_through_the_broker(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    one = parse_send(
        await conn.invoke(
            send_request(
                b"single",
                "KEYS\x01k\x02",
                group="pg",
                topic=TOPIC,
                queue_id=0,
                born_timestamp=1_700_000_000_000,
            ),
            5,
        )
    )
    assert one.queue_offset == 0 and len(one.msg_ids) == 1
    body = batch_body([(f"b{i}".encode(), f"UNIQ_KEY\x01U{i}\x02".encode(), 0) for i in range(3)])
    many = parse_send(
        await conn.invoke(
            send_request(
                body,
                "",
                group="pg",
                topic=TOPIC,
                queue_id=0,
                born_timestamp=1_700_000_000_000,
                batch=True,
            ),
            5,
        )
    )
    assert many.queue_offset == 1 and len(many.msg_ids) == 3
    await conn.invoke(heartbeat_request("c@1", [], [ConsumerData("cg", subscriptions=[
        SubscriptionData(TOPIC, "*")])]), 5)  # fmt: skip
    reply = parse_pull(
        await conn.invoke(pull_request(group="cg", topic=TOPIC, queue_id=0, offset=0), 5)
    )
    assert reply.outcome is PullOutcome.FOUND and reply.next_begin_offset == 4
    msgs = decode_records(reply.records)
    assert [m.body for m in msgs] == [b"single", b"b0", b"b1", b"b2"]
    assert [m.offset_msg_id for m in msgs] == one.msg_ids + many.msg_ids
    nothing = parse_pull(
        await conn.invoke(pull_request(group="cg", topic=TOPIC, queue_id=1, offset=0), 5)
    )
    assert nothing.outcome is PullOutcome.NO_NEW_MSG and nothing.records == b""
    assert b.consumers.client_ids("cg") == ["c@1"]
