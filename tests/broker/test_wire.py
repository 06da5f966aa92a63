"""The broker's remoting handlers against a broker running in this process: SEND_MESSAGE,
SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (RocketMQ's batch encoding, golden bytes),
PULL_MESSAGE with long polling, heartbeats, member lists, offsets, queue locks, send-back,
and bad requests answered with their codes."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest

from rocketq.broker.broker import Broker
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.common.record import decode_records
from rocketq.remoting import fastjson
from rocketq.remoting.codes import MessageSysFlag, PullSysFlag, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, connect
from tests.broker.conftest import WIRE_TOPIC
from tests.integration.waiting import wait_until

TOPIC = WIRE_TOPIC


def v2(topic: str, queue: int, props: str, **extra: str) -> dict[str, str]:
    return {
        "a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue), "f": "0",
        "g": "1700000000000", "h": "0", "i": props, "j": "0", "k": "false", **extra,
    }  # fmt: skip


def batch_message(body: bytes, props: bytes, flag: int = 0) -> bytes:
    """One message of RocketMQ's batch body, laid out by hand (MessageDecoder.encodeMessage):
    total size, magic, body CRC, flag, body length, body, properties length, properties."""
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return (
        struct.pack(">iiiii", total, 0, 0, flag, len(body))  # magic and CRC: 0, as the client
        + body
        + struct.pack(">h", len(props))
        + props
    )


async def test_send_v2_then_pull_it_back(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    props = "TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x01AABB\x02"
    sent = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 1, props), b"hello"), 5.0
    )
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    ext = sent.ext or {}
    assert ext["queueId"] == "1" and ext["queueOffset"] == "0" and ext["TRACE_ON"] == "true"
    addr, offset = decode_offset_msg_id(ext["msgId"])
    assert addr == b.config.broker_addr and offset >= 0

    pulled = await conn.invoke(
        RemotingCommand(
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "cg",
                "topic": TOPIC,
                "queueId": "1",
                "queueOffset": "0",
                "maxMsgNums": "32",
                "sysFlag": str(PullSysFlag.FLAG_SUBSCRIPTION),
                "commitOffset": "-1",
                "suspendTimeoutMillis": "0",
                "subscription": "TagA",
                "subVersion": "1",
            },
        ),
        5.0,
    )
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    assert (pulled.ext or {})["nextBeginOffset"] == "1"
    (msg,) = decode_records(bytes(pulled.body or b""))
    assert msg.body == b"hello" and msg.topic == TOPIC and msg.queue_id == 1
    assert msg.tags == "TagA" and msg.keys == ["k1"] and msg.offset_msg_id == ext["msgId"]
    # The born host is the connection's own address.
    assert msg.born_host.startswith("127.0.0.1:")


async def test_send_v1_names_and_a_batch(wire: tuple[Broker, Connection]) -> None:
    _b, conn = wire
    v1 = {
        "producerGroup": "pg", "topic": TOPIC, "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
        "bornTimestamp": "1700000000000", "flag": "7", "properties": "KEYS\x01v1\x02",
    }  # fmt: skip
    one = await conn.invoke(RemotingCommand(RequestCode.SEND_MESSAGE, v1, b"one"), 5.0)
    assert one.code == ResponseCode.SUCCESS, one.remark
    body = b"".join(
        batch_message(f"b{i}".encode(), f"KEYS\x01bk{i}\x02UNIQ_KEY\x01U{i}\x02".encode(), flag=i)
        for i in range(3)
    )
    # The first message, byte by byte: total 32 = 20 fixed + 2 body + 2 + 8 properties... as
    # RocketMQ 4.9's MessageDecoder.encodeMessage lays it out.
    first = batch_message(b"b0", b"KEYS\x01bk0\x02UNIQ_KEY\x01U0\x02")
    assert first[:8] == bytes.fromhex("0000002d00000000") and first[16:22] == b"\0\0\0\x02b0"
    batch = await conn.invoke(
        RemotingCommand(
            RequestCode.SEND_BATCH_MESSAGE, v2(TOPIC, 0, "WAIT\x01true\x02", m="true"), body
        ),
        5.0,
    )
    assert batch.code == ResponseCode.SUCCESS, batch.remark
    ids = (batch.ext or {})["msgId"].split(",")
    assert len(ids) == 3 and (batch.ext or {})["queueOffset"] == "1"
    pulled = await conn.invoke(
        RemotingCommand(
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "cg",
                "topic": TOPIC,
                "queueId": "0",
                "queueOffset": "0",
                "maxMsgNums": "32",
                "sysFlag": "0",
            },
        ),
        5.0,
    )
    msgs = decode_records(bytes(pulled.body or b""))
    assert [m.body for m in msgs] == [b"one", b"b0", b"b1", b"b2"]
    assert [m.flag for m in msgs] == [7, 0, 1, 2]
    assert [m.offset_msg_id for m in msgs[1:]] == ids
    assert [m.keys for m in msgs] == [["v1"], ["bk0"], ["bk1"], ["bk2"]]
    # Each entry keeps its own properties and gets the batch's (the header's) after them.
    assert [m.properties.get("UNIQ_KEY") for m in msgs[1:]] == ["U0", "U1", "U2"]
    assert all(m.properties.get("WAIT") == "true" for m in msgs[1:])
    # The broker's cluster, appended to what each message brought (PROPERTY_CLUSTER).
    assert all(m.properties["CLUSTER"] == _b.config.broker_cluster_name for m in msgs)
    assert list(msgs[0].properties) == ["KEYS", "CLUSTER"]
    assert list(msgs[1].properties) == ["KEYS", "UNIQ_KEY", "WAIT", "CLUSTER"]


async def test_a_held_pull_is_answered_when_a_message_arrives(
    wire: tuple[Broker, Connection],
) -> None:
    _b, conn = wire
    pull = {
        "consumerGroup": "cg", "topic": TOPIC, "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": str(PullSysFlag.FLAG_SUSPEND),
        "suspendTimeoutMillis": "5000",
    }  # fmt: skip
    empty = await conn.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, {**pull, "queueId": "1",
                              "suspendTimeoutMillis": "50"}), 5.0)  # fmt: skip
    assert empty.code == ResponseCode.PULL_NOT_FOUND
    started = time.monotonic()
    held = asyncio.ensure_future(conn.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, pull), 10))
    await asyncio.sleep(0.2)
    assert not held.done()  # held, while other requests on the connection still go through
    sent = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 0, ""), b"late"), 5.0
    )
    assert sent.code == ResponseCode.SUCCESS
    answer = await held
    assert answer.code == ResponseCode.SUCCESS and time.monotonic() - started < 4
    assert [m.body for m in decode_records(bytes(answer.body or b""))] == [b"late"]


@pytest.mark.parametrize(
    ("code", "ext", "body", "want", "says"),
    [
        (RequestCode.SEND_MESSAGE_V2, {"b": TOPIC}, b"x", ResponseCode.MESSAGE_ILLEGAL, "queueId"),
        (
            RequestCode.SEND_MESSAGE_V2,
            {"b": "bad topic!", "e": "0"},
            b"x",
            ResponseCode.MESSAGE_ILLEGAL,
            "topic",
        ),
        (
            RequestCode.SEND_MESSAGE_V2,
            {"b": TOPIC, "e": "x"},
            b"x",
            ResponseCode.MESSAGE_ILLEGAL,
            "not a number",
        ),
        (
            RequestCode.SEND_BATCH_MESSAGE,
            {"b": TOPIC, "e": "0", "m": "true"},
            struct.pack(">iiiii", 999, 0, 0, 0, 5) + b"abc",
            ResponseCode.MESSAGE_ILLEGAL,
            "batch",
        ),
        (
            RequestCode.SEND_MESSAGE_V2,
            {"b": TOPIC, "e": "99"},
            b"x",
            ResponseCode.SYSTEM_ERROR,
            "queue id 99",
        ),
        (
            RequestCode.PULL_MESSAGE,
            {"consumerGroup": "cg", "topic": TOPIC},
            None,
            ResponseCode.MESSAGE_ILLEGAL,
            "queueId",
        ),
    ],
)
async def test_bad_requests_are_answered_with_their_code(
    wire: tuple[Broker, Connection],
    code: int,
    ext: dict[str, str],
    body: bytes | None,
    want: int,
    says: str,
) -> None:
    _b, conn = wire
    answer = await conn.invoke(RemotingCommand(code, ext, body), 5.0)
    assert answer.code == want and says in str(answer.remark), answer
    ok = await conn.invoke(RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 0, ""), b"y"), 5)
    assert ok.code == ResponseCode.SUCCESS  # the connection is fine afterwards


def heartbeat(client_id: str, group: str, expression: str = "*") -> bytes:
    """A heartbeat body as a Java client writes it (HeartbeatData)."""
    return fastjson.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "consumeType": "CONSUME_PASSIVELY",
                    "groupName": group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "codeSet": [],
                            "expressionType": "TAG",
                            "subString": expression,
                            "subVersion": 1,
                            "tagsSet": [],
                            "topic": TOPIC,
                        }
                    ],
                    "unitMode": False,
                }
            ],
            "producerDataSet": [{"groupName": "pg"}, {"groupName": "CLIENT_INNER_PRODUCER"}],
        }
    )


async def test_heartbeat_members_and_a_closed_connection(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    beat = await conn.invoke(
        RemotingCommand(RequestCode.HEART_BEAT, None, heartbeat("c1@1", "cg1", "TagA || TagB")), 5
    )
    assert beat.code == ResponseCode.SUCCESS, beat.remark
    assert b.topics.get("%RETRY%cg1") is not None  # the retry topic exists from the heartbeat
    sub = b.consumers.subscription("cg1", TOPIC)
    assert sub is not None and sub.expression == "TagA || TagB" and len(sub.codes) == 2
    members = await conn.invoke(
        RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg1"}), 5
    )
    assert fastjson.loads(bytes(members.body or b"")) == {"consumerIdList": ["c1@1"]}
    # A second client on its own connection, then its connection closes: it leaves at once.
    other = await connect(conn.peer, {})
    await other.invoke(RemotingCommand(RequestCode.HEART_BEAT, None, heartbeat("c2@2", "cg1")), 5)
    assert b.consumers.client_ids("cg1") == ["c1@1", "c2@2"]
    other.close()
    await wait_until(lambda: b.consumers.client_ids("cg1") == ["c1@1"], "c2 gone")
    gone = await conn.invoke(
        RemotingCommand(
            RequestCode.UNREGISTER_CLIENT, {"clientID": "c1@1", "consumerGroup": "cg1"}
        ),
        5,
    )
    assert gone.code == ResponseCode.SUCCESS
    empty = await conn.invoke(
        RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg1"}), 5
    )
    assert empty.code == ResponseCode.SYSTEM_ERROR and "no consumer" in str(empty.remark)
    bad = await conn.invoke(RemotingCommand(RequestCode.HEART_BEAT, None, b"{not json"), 5)
    assert bad.code == ResponseCode.MESSAGE_ILLEGAL and "not JSON" in str(bad.remark)


async def test_offsets_and_queue_ends(wire: tuple[Broker, Connection]) -> None:
    _b, conn = wire
    for i in range(3):
        await conn.invoke(
            RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 0, ""), f"m{i}".encode()), 5
        )

    async def ask(code: int, **ext: str) -> RemotingCommand:
        return await conn.invoke(RemotingCommand(code, {"topic": TOPIC, "queueId": "0", **ext}), 5)

    assert (await ask(RequestCode.GET_MAX_OFFSET)).ext == {"offset": "3"}
    assert (await ask(RequestCode.GET_MIN_OFFSET)).ext == {"offset": "0"}
    assert (await ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp="0")).ext == {"offset": "0"}
    earliest = await ask(RequestCode.GET_EARLIEST_MSG_STORETIME)
    assert int((earliest.ext or {})["timestamp"]) > 1_600_000_000_000
    # A new group starts at 0 while the queue's first message is still there.
    assert (await ask(RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup="cg2")).ext == {
        "offset": "0"
    }
    await ask(RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup="cg2", commitOffset="2")
    await ask(RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup="cg2", commitOffset="-1")
    assert (await ask(RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup="cg2")).ext == {
        "offset": "2"
    }
    missing = await ask(RequestCode.GET_MAX_OFFSET, queueId="zero")
    assert missing.code == ResponseCode.MESSAGE_ILLEGAL and "queueId" in str(missing.remark)


async def test_queue_locks_and_send_back(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    mqs = [{"brokerName": b.config.broker_name, "queueId": q, "topic": TOPIC} for q in (0, 1)]
    body = fastjson.dumps({"clientId": "c1", "consumerGroup": "cg3", "mqSet": mqs})
    locked = await conn.invoke(RemotingCommand(RequestCode.LOCK_BATCH_MQ, None, body), 5)
    assert locked.code == ResponseCode.SUCCESS
    assert fastjson.loads(bytes(locked.body or b""))["lockOKMQSet"] == mqs
    theirs = fastjson.dumps({"clientId": "c2", "consumerGroup": "cg3", "mqSet": mqs})
    refused = await conn.invoke(RemotingCommand(RequestCode.LOCK_BATCH_MQ, None, theirs), 5)
    assert fastjson.loads(bytes(refused.body or b""))["lockOKMQSet"] == []
    unlocked = await conn.invoke(RemotingCommand(RequestCode.UNLOCK_BATCH_MQ, None, body), 5)
    assert unlocked.code == ResponseCode.SUCCESS

    sent = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 0, "KEYS\x01back\x02"), b"x"), 5
    )
    _, offset = decode_offset_msg_id((sent.ext or {})["msgId"])
    back = await conn.invoke(
        RemotingCommand(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(offset), "group": "cg3", "delayLevel": "-1", "originTopic": TOPIC},
        ),
        5,
    )
    assert back.code == ResponseCode.SUCCESS, back.remark
    dlq = b.topics.get("%DLQ%cg3")  # a negative delay level goes straight to the DLQ
    assert dlq is not None
    await wait_until(lambda: b.store.max_offset_in_queue("%DLQ%cg3", 0) == 1, "the dead letter")


class Listener:
    """A client connection that records the requests the broker sends it."""

    def __init__(self) -> None:
        self.got: list[RemotingCommand] = []

    def handlers(self) -> dict[int, Any]:
        def record(conn: Connection, cmd: RemotingCommand) -> None:
            self.got.append(cmd)

        codes = (
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            RequestCode.CHECK_TRANSACTION_STATE,
        )
        return dict.fromkeys(codes, record)

    def of(self, code: int) -> list[RemotingCommand]:
        return [c for c in self.got if c.code == code]


async def test_the_broker_tells_clients_over_their_connection(
    wire: tuple[Broker, Connection],
) -> None:
    b, conn = wire
    first = Listener()
    c1 = await connect(conn.peer, first.handlers())
    await c1.invoke(RemotingCommand(RequestCode.HEART_BEAT, None, heartbeat("c1@1", "cg5")), 5)
    c2 = await connect(conn.peer, {})
    await c2.invoke(RemotingCommand(RequestCode.HEART_BEAT, None, heartbeat("c2@2", "cg5")), 5)
    # A member joined: the others hear of it at once, oneway.
    await wait_until(lambda: first.of(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED), "the notice")
    notice = first.of(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)[0]
    assert notice.ext == {"consumerGroup": "cg5"} and notice.is_oneway
    # An offset reset is sent with the offsets to start from.
    b.offsets.commit("cg5", TOPIC, 1, 7)
    b.consumers.notify_reset_offset("cg5", TOPIC)
    await wait_until(lambda: first.of(RequestCode.RESET_CONSUMER_CLIENT_OFFSET), "the reset")
    reset = first.of(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)[0]
    assert reset.ext is not None and (reset.ext["topic"], reset.ext["group"]) == (TOPIC, "cg5")
    table = fastjson.loads(bytes(reset.body or b""))["offsetTable"]
    assert {(k.as_dict()["queueId"], v) for k, v in table.items()} == {(1, 7)}
    c2.close()
    c1.close()
    await wait_until(lambda: not b.consumers.client_ids("cg5"), "both gone")


async def test_end_transaction_and_the_check_back(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    producer = Listener()
    pc = await connect(conn.peer, producer.handlers())
    beat = fastjson.dumps({"clientID": "p@1", "consumerDataSet": [],
                           "producerDataSet": [{"groupName": "tpg"}]})  # fmt: skip
    await pc.invoke(RemotingCommand(RequestCode.HEART_BEAT, None, beat), 5)
    prepared = MessageSysFlag.TRANSACTION_PREPARED_TYPE

    async def half(body: bytes) -> tuple[int, int]:
        ext = v2(TOPIC, 0, "TRAN_MSG\x01true\x02PGROUP\x01tpg\x02UNIQ_KEY\x01T1\x02",
                 f=str(prepared), a="tpg")  # fmt: skip
        sent = await pc.invoke(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext, body), 5)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        ext = sent.ext or {}
        return decode_offset_msg_id(ext["msgId"])[1], int(ext["queueOffset"])

    offset, queue_offset = await half(b"committed")
    assert b.store.max_offset_in_queue(TOPIC, 0) == 0  # not visible before the commit
    end = {
        "producerGroup": "tpg", "tranStateTableOffset": str(queue_offset),
        "commitLogOffset": str(offset), "commitOrRollback": "8", "msgId": "T1",
    }  # fmt: skip
    done = await pc.invoke(RemotingCommand(RequestCode.END_TRANSACTION, end), 5)
    assert done.code == ResponseCode.SUCCESS, done.remark
    await wait_until(lambda: b.store.max_offset_in_queue(TOPIC, 0) == 1, "the commit")
    bad = await pc.invoke(
        RemotingCommand(RequestCode.END_TRANSACTION, {**end, "commitOrRollback": "5"}), 5
    )
    assert bad.code == ResponseCode.MESSAGE_ILLEGAL and "commitOrRollback" in str(bad.remark)
    # A half message left unresolved past the timeout (born long ago) is checked back with
    # its producer group, over the producer's own connection.
    await half(b"undecided")
    assert b.transactions.check() == 1
    await wait_until(lambda: producer.of(RequestCode.CHECK_TRANSACTION_STATE), "the check")
    check = producer.of(RequestCode.CHECK_TRANSACTION_STATE)[0]
    assert check.is_oneway and check.ext is not None and check.ext["transactionId"] == "T1"
    (msg,) = decode_records(bytes(check.body or b""))
    assert msg.body == b"undecided"
    pc.close()
