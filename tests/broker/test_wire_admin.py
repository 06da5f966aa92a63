"""The broker's remoting admin handlers (broker/wire/admin.py) against a broker running in
this process: each request's happy path with the exact JSON RocketMQ's clients read (field
names, bare MessageQueue and number keys), and its bad input answered with RocketMQ's code."""

from __future__ import annotations

from typing import Any

from rocketq.broker.broker import Broker
from rocketq.broker.runtime_info import config_table, runtime_table
from rocketq.broker.wire.admin import AdminRequests
from rocketq.broker.wire.client import ClientRequests
from rocketq.broker.wire.pull import PullRequests
from rocketq.broker.wire.send import SendRequests
from rocketq.common.exceptions import RocketqSystemError
from rocketq.common.message import TopicConfig
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.common.record import decode_records
from rocketq.remoting import fastjson
from rocketq.remoting.codes import (
    RequestCode,
    ResponseCode,
    RocketqRequestCode,
    RocketqVersion,
)
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection
from tests.broker.test_wire import TOPIC, heartbeat, v2
from tests.integration.waiting import wait_until

LONG_MAX = str(2**63 - 1)  # what mqadmin sends as the end of a query's time range


async def ask(
    conn: Connection, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
) -> RemotingCommand:
    return await conn.invoke(RemotingCommand(code, ext, body), 5.0)


def doc_of(answer: RemotingCommand) -> Any:
    assert answer.code == ResponseCode.SUCCESS, answer
    return fastjson.loads(bytes(answer.body or b""))


def mq(b: Broker, queue_id: int, topic: str = TOPIC) -> fastjson.ObjectKey:
    return fastjson.ObjectKey.of(
        {"brokerName": b.config.broker_name, "queueId": queue_id, "topic": topic}
    )


async def send(conn: Connection, queue: int, props: str = "", body: bytes = b"m") -> int:
    """Send one message; its CommitLog offset."""
    sent = await ask(conn, RequestCode.SEND_MESSAGE_V2, v2(TOPIC, queue, props), body)
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    return decode_offset_msg_id((sent.ext or {})["msgId"])[1]


def refused(answer: RemotingCommand, code: int, says: str) -> None:
    assert answer.code == code and says in str(answer.remark), answer


def test_the_handlers_and_rocketqs_own_codes() -> None:
    nobody: Any = None  # handlers() only names bound methods
    admin = set(AdminRequests(nobody).handlers())
    assert {RequestCode.NAMES.get(c) or RocketqRequestCode.NAMES[c] for c in admin} == {
        "UPDATE_AND_CREATE_TOPIC", "DELETE_TOPIC_IN_BROKER", "GET_ALL_TOPIC_CONFIG",
        "GET_TOPIC_STATS_INFO", "GET_CONSUME_STATS", "QUERY_MESSAGE", "VIEW_MESSAGE_BY_ID",
        "INVOKE_BROKER_TO_RESET_OFFSET", "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
        "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", "GET_BROKER_RUNTIME_INFO",
        "GET_CONSUMER_CONNECTION_LIST", "QUERY_TOPIC_CONSUME_BY_WHO", "GET_BROKER_CONFIG",
        "GET_ALL_CONSUMER_OFFSET", "GET_ALL_DELAY_OFFSET", "TRANSFER_LEADER", "RESEND_MESSAGE",
        "GET_CONSUMER_RUNNING_INFO", "CONSUME_MESSAGE_DIRECTLY",
        "RAFT_ADD_MEMBER", "RAFT_REMOVE_MEMBER", "RAFT_MEMBERS",
    }  # fmt: skip
    others = (SendRequests(nobody), PullRequests(nobody), ClientRequests(nobody))
    assert not admin & {code for o in others for code in o.handlers()}
    assert RocketqRequestCode.NAMES == {
        30000: "TRANSFER_LEADER",
        30001: "RESEND_MESSAGE",
        30002: "GET_AUTH_METADATA",
        30003: "AUTH_SESSION",
        30010: "RAFT_ADD_MEMBER",
        30011: "RAFT_REMOVE_MEMBER",
        30012: "RAFT_MEMBERS",
        30020: "SEND_TOPICS_BATCH",
    }
    assert RocketqRequestCode.SEND_TOPICS_BATCH in SendRequests(nobody).handlers()
    assert not set(RocketqRequestCode.NAMES) & set(RequestCode.NAMES)
    # int16 in the ROCKETMQ binary header
    assert all(code < 32768 for code in RocketqRequestCode.NAMES)


async def test_create_list_and_delete_a_topic(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    header = {
        "topic": "AdminT", "defaultTopic": "TBW102", "readQueueNums": "3",
        "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "true",
    }  # fmt: skip
    created = await ask(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
    assert created.code == ResponseCode.SUCCESS, created.remark
    assert b.topics.get("AdminT") == TopicConfig("AdminT", 3, 4, 6, 0, True)

    wrapper = doc_of(await ask(conn, RequestCode.GET_ALL_TOPIC_CONFIG))
    assert list(wrapper) == ["dataVersion", "topicConfigTable"]
    assert wrapper["dataVersion"] == {"counter": b.topics.data_version, "timestamp": 0}
    assert wrapper["topicConfigTable"]["AdminT"] == {
        "order": True, "perm": 6, "readQueueNums": 3, "topicFilterType": "SINGLE_TAG",
        "topicName": "AdminT", "topicSysFlag": 0, "writeQueueNums": 4,
    }  # fmt: skip
    assert set(wrapper["topicConfigTable"]) == set(b.topics.topics)

    gone = await ask(conn, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminT"})
    assert gone.code == ResponseCode.SUCCESS and b.topics.get("AdminT") is None
    again = await ask(conn, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminT"})
    refused(again, ResponseCode.TOPIC_NOT_EXIST, "AdminT")
    refused(
        await ask(conn, RequestCode.DELETE_TOPIC_IN_BROKER), ResponseCode.MESSAGE_ILLEGAL, "topic"
    )

    no_read = {k: v for k, v in header.items() if k != "readQueueNums"}
    refused(
        await ask(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, no_read),
        ResponseCode.MESSAGE_ILLEGAL,
        "readQueueNums",
    )
    refused(
        await ask(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, {**header, "topicFilterType": "X"}),
        ResponseCode.MESSAGE_ILLEGAL,
        "topicFilterType",
    )
    refused(
        await ask(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, {**header, "writeQueueNums": "0"}),
        ResponseCode.MESSAGE_ILLEGAL,
        "queue counts",
    )


async def test_topic_stats(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    for _ in range(3):
        await send(conn, 0)
    answer = await ask(conn, RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
    # The queue is a bare object key, as fastjson writes a map keyed by MessageQueue.
    raw = bytes(answer.body or b"")
    assert raw.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"')
    table = doc_of(answer)["offsetTable"]
    last = b.store.store_time_in_queue(TOPIC, 0, 2)
    assert table == {
        mq(b, 0): {"lastUpdateTimestamp": last, "maxOffset": 3, "minOffset": 0},
        mq(b, 1): {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0},
    }
    assert last > 1_600_000_000_000
    unknown = await ask(conn, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
    refused(unknown, ResponseCode.TOPIC_NOT_EXIST, "Nope")
    refused(
        await ask(conn, RequestCode.GET_TOPIC_STATS_INFO), ResponseCode.MESSAGE_ILLEGAL, "topic"
    )


async def test_consume_stats(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    for _ in range(3):
        await send(conn, 0)
    b.offsets.commit("cg", TOPIC, 0, 2)
    b.stats.got("cg", TOPIC, 6)
    answer = await ask(conn, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "cg", "topic": TOPIC})
    stats = doc_of(answer)
    assert list(stats) == ["consumeTps", "offsetTable"]
    assert isinstance(stats["consumeTps"], float) and stats["consumeTps"] > 0
    assert stats["offsetTable"] == {
        mq(b, 0): {
            "brokerOffset": 3,
            "consumerOffset": 2,
            "lastTimestamp": b.store.store_time_in_queue(TOPIC, 0, 1),
        },
        mq(b, 1): {"brokerOffset": 0, "consumerOffset": 0, "lastTimestamp": 0},
    }
    # No topic: every topic the group has offsets for.
    every = doc_of(await ask(conn, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "cg"}))
    assert every["offsetTable"] == stats["offsetTable"]

    unknown = await ask(conn, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "nobody"})
    refused(unknown, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "nobody")
    no_topic = await ask(
        conn, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "cg", "topic": "Nope"}
    )
    refused(no_topic, ResponseCode.TOPIC_NOT_EXIST, "Nope")
    missing = await ask(conn, RequestCode.GET_CONSUME_STATS, {"topic": TOPIC})
    refused(missing, ResponseCode.MESSAGE_ILLEGAL, "consumerGroup")


async def test_query_and_view_messages_as_stored(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    first = await send(conn, 0, "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02", b"one")
    second = await send(conn, 1, "KEYS\x01k1 k2\x02UNIQ_KEY\x01U2\x02", b"two")
    await send(conn, 0, "KEYS\x01other\x02", b"three")
    await wait_until(lambda: b.store.dispatch_behind_bytes == 0, "the index")

    def stored(offset: int) -> bytes:
        view = b.store.message_by_offset(offset)
        assert view is not None
        try:
            return bytes(view)
        finally:
            view.release()

    query = {"topic": TOPIC, "key": "k1", "maxNum": "32", "beginTimestamp": "0",
             "endTimestamp": LONG_MAX}  # fmt: skip
    answer = await ask(conn, RequestCode.QUERY_MESSAGE, query)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    body = bytes(answer.body or b"")
    # The records exactly as the CommitLog holds them, one after another (newest first).
    assert body == stored(second) + stored(first)
    assert [m.body for m in decode_records(body)] == [b"two", b"one"]
    ext = answer.ext or {}
    assert int(ext["indexLastUpdatePhyoffset"]) >= second
    assert int(ext["indexLastUpdateTimestamp"]) > 1_600_000_000_000
    by_id = await ask(
        conn,
        RequestCode.QUERY_MESSAGE,
        {**query, "key": "U2", "maxNum": "1", "_UNIQUE_KEY_QUERY": "true"},
    )
    assert bytes(by_id.body or b"") == stored(second)

    none = await ask(conn, RequestCode.QUERY_MESSAGE, {**query, "key": "absent"})
    refused(none, ResponseCode.QUERY_NOT_FOUND, "absent")
    no_key = {k: v for k, v in query.items() if k != "key"}
    refused(await ask(conn, RequestCode.QUERY_MESSAGE, no_key), ResponseCode.MESSAGE_ILLEGAL, "key")

    view = await ask(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(second)})
    assert view.code == ResponseCode.SUCCESS and bytes(view.body or b"") == stored(second)
    nowhere = await ask(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(1 << 40)})
    refused(nowhere, ResponseCode.QUERY_NOT_FOUND, str(1 << 40))
    bad = await ask(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "x"})
    refused(bad, ResponseCode.MESSAGE_ILLEGAL, "not a number")
    refused(await ask(conn, RequestCode.VIEW_MESSAGE_BY_ID), ResponseCode.MESSAGE_ILLEGAL, "offset")


async def test_reset_offsets_by_time_tells_the_consumers(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    for q in (0, 0, 0, 1):
        await send(conn, q)
    b.consumers.register_consumer(
        "cg", "c1", client_addr="127.0.0.1:1", consume_type="CONSUME_PASSIVELY",
        message_model="CLUSTERING", consume_from_where="CONSUME_FROM_LAST_OFFSET",
        subscriptions=[],
    )  # fmt: skip
    events = b.consumers.open_channel("c1")
    while not events.empty():
        events.get_nowait()  # the join notice
    reset = {"topic": TOPIC, "group": "cg", "timestamp": "0", "isForce": "true"}
    body = doc_of(await ask(conn, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset))
    assert body == {"offsetTable": {mq(b, 0): 0, mq(b, 1): 0}}
    assert b.offsets.offsets("cg", TOPIC) == {0: 0, 1: 0}
    assert events.get_nowait() == ("reset", "cg", TOPIC)

    # -1: each queue's end.
    ends = doc_of(
        await ask(conn, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "timestamp": "-1"})
    )
    assert ends == {"offsetTable": {mq(b, 0): 3, mq(b, 1): 1}}
    # Not forced: a stored offset behind the target is kept.
    b.offsets.commit("cg", TOPIC, 0, 1)
    kept = doc_of(
        await ask(
            conn,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            {**reset, "timestamp": "-1", "isForce": "false"},
        )
    )
    assert kept == {"offsetTable": {mq(b, 0): 1, mq(b, 1): 1}}

    refused(
        await ask(conn, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "topic": "Nope"}),
        ResponseCode.TOPIC_NOT_EXIST,
        "Nope",
    )
    refused(
        await ask(conn, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "group": "bad group"}),
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "bad group",
    )
    refused(
        await ask(conn, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": TOPIC, "group": "cg"}),
        ResponseCode.MESSAGE_ILLEGAL,
        "timestamp",
    )


async def test_subscription_groups(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    config = {
        "brokerId": 0, "consumeBroadcastEnable": False, "consumeEnable": True,
        "consumeFromMinEnable": True, "consumeMessageOrderly": True, "groupName": "g1",
        "notifyConsumerIdsChangedEnable": False,
        "retryMaxTimes": 5, "retryQueueNums": 2, "whichBrokerWhenConsumeSlowly": 1,
    }  # fmt: skip
    made = await ask(
        conn, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, fastjson.dumps(config)
    )
    assert made.code == ResponseCode.SUCCESS, made.remark
    g1 = b.groups.groups["g1"]
    assert (g1.retry_max_times, g1.retry_queue_nums, g1.consume_broadcast_enable) == (5, 2, False)
    assert g1.notify_consumer_ids_changed_enable is False and g1.consume_message_orderly

    wrapper = doc_of(await ask(conn, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
    assert list(wrapper) == ["dataVersion", "subscriptionGroupTable"]
    assert wrapper["dataVersion"] == {"counter": 0, "timestamp": 0}
    assert wrapper["subscriptionGroupTable"]["g1"] == config
    assert list(wrapper["subscriptionGroupTable"]["g1"]) == sorted(config)  # bean field order

    # Absent fields take RocketMQ's defaults.
    plain = await ask(
        conn, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, b'{"groupName":"g2"}'
    )
    assert plain.code == ResponseCode.SUCCESS
    g2 = b.groups.groups["g2"]
    assert (g2.retry_max_times, g2.retry_queue_nums, g2.consume_enable) == (16, 1, True)

    for body, code, says in [
        (b"{not json", ResponseCode.MESSAGE_ILLEGAL, "not JSON"),
        (b"[]", ResponseCode.MESSAGE_ILLEGAL, "not a JSON object"),
        (b'{"consumeEnable":true}', ResponseCode.MESSAGE_ILLEGAL, "groupName"),
        (b'{"groupName":"g3","retryMaxTimes":"x"}', ResponseCode.MESSAGE_ILLEGAL, "retryMaxTimes"),
        (b'{"groupName":"g3","consumeEnable":1}', ResponseCode.MESSAGE_ILLEGAL, "consumeEnable"),
        (b'{"groupName":"bad group"}', ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "bad group"),
    ]:
        answer = await ask(conn, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        refused(answer, code, says)
    assert "g3" not in b.groups.groups


# The keys every broker's runtime table has (besides its stats', its registration's and its
# replication's).
RUNTIME_KEYS = {
    "brokerName", "brokerId", "brokerRole", "brokerAddr", "commitLogMinOffset",
    "commitLogMaxOffset", "dispatchBehindBytes", "flushedOffset", "bootTimestamp",
    "runtimeSeconds", "sendsInFlight", "sendsRejected", "pullsHeld", "pullsFound", "topics",
    "topicCount", "consumerGroups", "brokerVersionDesc",
}  # fmt: skip


async def test_runtime_info_is_the_brokers_runtime_table(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    await send(conn, 0)
    answer = await ask(conn, RequestCode.GET_BROKER_RUNTIME_INFO)
    kv = doc_of(answer)
    assert list(kv) == ["table"]
    table = kv["table"]
    assert set(table) == set(runtime_table(b)) and set(table) >= RUNTIME_KEYS
    assert set(b.stats.runtime_info()) <= set(table)
    assert set(b.registration.runtime_info()) <= set(table)
    assert all(isinstance(v, str) for v in table.values())
    assert table["brokerName"] == b.config.broker_name and table["brokerId"] == "0"
    assert (table["brokerRole"], table["brokerAddr"]) == (
        b.config.broker_role,
        b.config.broker_addr,
    )
    assert table["commitLogMaxOffset"] == str(b.store.max_phy_offset) != "0"
    assert table["topicCount"] == str(len(b.topics.topics))
    assert table["bootTimestamp"] == str(int(b.boot_time * 1000))
    assert table["brokerVersionDesc"].startswith("rocketq ")


async def test_consumer_connection_list(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    beat = await ask(conn, RequestCode.HEART_BEAT, None, heartbeat("c1@1", "cg1", "TagA || TagB"))
    assert beat.code == ResponseCode.SUCCESS
    answer = await ask(conn, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg1"})
    doc = doc_of(answer)
    assert list(doc) == [
        "connectionSet", "consumeFromWhere", "consumeType", "messageModel", "subscriptionTable"
    ]  # fmt: skip
    (connection,) = doc["connectionSet"]
    assert connection == {
        "clientAddr": b.consumers.groups["cg1"].client_addrs["c1@1"],
        "clientId": "c1@1",
        "language": "PYTHON",  # as the heartbeat's command header said
        "version": RocketqVersion.CURRENT,
    }
    assert connection["clientAddr"].startswith("127.0.0.1:")
    assert doc["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    assert (doc["consumeType"], doc["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
    assert doc["subscriptionTable"] == {
        TOPIC: {
            "classFilterMode": False,
            "codeSet": [2598919, 2598920],  # Java's "TagA".hashCode(), "TagB".hashCode()
            "expressionType": "TAG",
            "subString": "TagA || TagB",
            "subVersion": 1,
            "tagsSet": ["TagA", "TagB"],
            "topic": TOPIC,
        }
    }
    offline = await ask(conn, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "x"})
    refused(offline, ResponseCode.CONSUMER_NOT_ONLINE, "'x'")
    missing = await ask(conn, RequestCode.GET_CONSUMER_CONNECTION_LIST)
    refused(missing, ResponseCode.MESSAGE_ILLEGAL, "consumerGroup")


async def test_who_consumes_a_topic(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    b.offsets.commit("cgA", TOPIC, 0, 1)
    await ask(conn, RequestCode.HEART_BEAT, None, heartbeat("c1@1", "cgB"))
    answer = await ask(conn, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    assert bytes(answer.body or b"") == b'{"groupList":["cgA","cgB"]}'
    nobody = await ask(conn, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Other"})
    assert doc_of(nobody) == {"groupList": []}
    refused(
        await ask(conn, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO),
        ResponseCode.MESSAGE_ILLEGAL,
        "topic",
    )


async def test_broker_config_as_a_properties_text(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    answer = await ask(conn, RequestCode.GET_BROKER_CONFIG)
    assert answer.code == ResponseCode.SUCCESS
    text = bytes(answer.body or b"").decode()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert dict(line.split("=", 1) for line in lines) == config_table(b.config, b.store_config)
    assert f"broker_name={b.config.broker_name}" in lines
    assert fastjson.loads((answer.ext or {})["version"]) == {
        "counter": 0,
        "timestamp": int(b.boot_time * 1000),
    }


async def test_all_consumer_and_delay_offsets(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    b.offsets.table.clear()
    b.offsets.commit("cg", TOPIC, 1, 5)
    b.offsets.commit("cg", TOPIC, 0, 2)
    answer = await ask(conn, RequestCode.GET_ALL_CONSUMER_OFFSET)
    # Queue ids are bare number keys.
    assert bytes(answer.body or b"") == b'{"offsetTable":{"WireTopic@cg":{0:2,1:5}}}'
    assert doc_of(answer) == {"offsetTable": {f"{TOPIC}@cg": {0: 2, 1: 5}}}

    b.schedule.offsets.clear()
    b.schedule.offsets.update({3: 7, 1: 4})
    delay = await ask(conn, RequestCode.GET_ALL_DELAY_OFFSET)
    assert bytes(delay.body or b"") == b'{"offsetTable":{1:4,3:7}}'
    b.schedule.offsets.clear()
    empty = await ask(conn, RequestCode.GET_ALL_DELAY_OFFSET)
    assert bytes(empty.body or b"") == b'{"offsetTable":{}}'


class FakeRaft:
    """Stands in for the broker's Raft member: records transfers, refuses unknown ones."""

    def __init__(self) -> None:
        self.transfers: list[tuple[str, str]] = []

    def transfer(self, group: str, to: str) -> None:
        if to == "n9":
            raise RocketqSystemError(f"{to!r} is not a member of raft group g")
        self.transfers.append((group, to))


async def test_transfer_leader(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    code = RocketqRequestCode.TRANSFER_LEADER
    refused(await ask(conn, code, {"to": "n1"}), ResponseCode.SYSTEM_ERROR, "does not run Raft")
    refused(await ask(conn, code, {"group": "g"}), ResponseCode.MESSAGE_ILLEGAL, "'to'")
    raft = FakeRaft()
    b.raft = raft  # type: ignore[assignment]
    try:
        assert (await ask(conn, code, {"to": "n1"})).code == ResponseCode.SUCCESS
        assert (await ask(conn, code, {"group": "g", "to": "n2"})).code == ResponseCode.SUCCESS
        refused(await ask(conn, code, {"to": "n9"}), ResponseCode.SYSTEM_ERROR, "not a member")
    finally:
        b.raft = None
    assert raft.transfers == [("", "n1"), ("g", "n2")]


async def test_resend_a_stored_message_to_a_group(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    offset = await send(conn, 0, "KEYS\x01again\x02", b"dead letter")
    code = RocketqRequestCode.RESEND_MESSAGE
    answer = await ask(conn, code, {"group": "cg", "commitLogOffset": str(offset)})
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ext = answer.ext or {}
    _, copy_at = decode_offset_msg_id(ext["msgId"])
    assert copy_at == int(ext["commitLogOffset"]) > offset and ext["queueOffset"] == "0"
    view = await ask(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": ext["commitLogOffset"]})
    (copy,) = decode_records(bytes(view.body or b""))
    assert copy.topic == "%RETRY%cg" and copy.body == b"dead letter"
    assert copy.properties["RETRY_TOPIC"] == TOPIC and copy.reconsume_times == 0
    retry = b.topics.get("%RETRY%cg")
    assert retry is not None
    assert (
        sum(b.store.max_offset_in_queue("%RETRY%cg", q) for q in range(retry.write_queue_nums)) == 1
    )

    nowhere = await ask(conn, code, {"group": "cg", "commitLogOffset": str(1 << 40)})
    refused(nowhere, ResponseCode.QUERY_NOT_FOUND, str(1 << 40))
    bad_group = await ask(conn, code, {"group": "bad group", "commitLogOffset": str(offset)})
    refused(bad_group, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "bad group")
    refused(await ask(conn, code, {"group": "cg"}), ResponseCode.MESSAGE_ILLEGAL, "commitLogOffset")
