"""The SDK's admin requests and their answers (sdk/admin_wire.py, with the four tables of
remoting/broker_tables.py): each request's code and exact header fields, each
answer parsed from a body as RocketMQ's broker writes it, and round trips through the
broker's own remoting handlers running in this process, checked against the broker's own
state (the attributes sdk/admin.py's callers read keep their names and values)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

import pytest

from rocketq.broker.broker import Broker
from rocketq.broker.runtime_info import config_table, runtime_table
from rocketq.common.exceptions import (
    ConsumerNotOnlineError,
    MessageIllegalError,
    QueryNotFoundError,
    RequestCodeNotSupportedError,
    RocketqError,
    RocketqSystemError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rocketq.common.message import TopicConfig
from rocketq.common.message_id import decode_offset_msg_id, encode_offset_msg_id
from rocketq.common.record import decode_records
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection
from rocketq.sdk import admin_wire as aw
from rocketq.sdk.wire import ConsumerData, SubscriptionData, heartbeat_request, parse_send
from rocketq.sdk.wire import send_request as wire_send
from tests.broker.conftest import WIRE_TOPIC, wire  # noqa: F401 - the fixture, shared
from tests.broker.test_wire_admin import FakeRaft
from tests.integration.waiting import wait_until

TOPIC = WIRE_TOPIC
Parser = Callable[[RemotingCommand], object]
MQ0 = b'{"brokerName":"broker-a","queueId":0,"topic":"T"}'
MQ1 = b'{"brokerName":"broker-a","queueId":1,"topic":"T"}'
TOPIC_KEYS = (
    "topic_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag", "order"
)  # fmt: skip
STATS_KEYS = ("topic", "queue_id", "min_offset", "max_offset", "last_update_timestamp")
PROGRESS_KEYS = ("topic", "queue_id", "max_offset", "consumer_offset", "last_update_timestamp")
CONNECTION_KEYS = (
    "client_id",
    "client_addr",
    "consume_type",
    "message_model",
    "consume_from_where",
)
GROUP_KEYS = (
    "group_name", "consume_enable", "consume_broadcast_enable", "retry_queue_nums",
    "retry_max_times", "broker_id", "which_broker_when_consume_slowly",
    "notify_consumer_ids_changed_enable", "consume_message_orderly",
)  # fmt: skip


def answer(
    code: int = ResponseCode.SUCCESS,
    body: bytes | None = None,
    ext: dict[str, str] | None = None,
    remark: str | None = None,
) -> RemotingCommand:
    return RemotingCommand(0).response(code, ext, body, remark)


def fields(obj: object, names: tuple[str, ...]) -> tuple[object, ...]:
    return tuple(getattr(obj, n) for n in names)


async def ask(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return await conn.invoke(cmd, 5.0)


async def send(conn: Connection, queue: int, props: str = "", body: bytes = b"m") -> str:
    """Send one message; its offset message id."""
    cmd = wire_send(body, props, group="pg", topic=TOPIC, queue_id=queue, born_timestamp=1)
    (msg_id,) = parse_send(await ask(conn, cmd)).msg_ids
    return msg_id


# -- requests ---------------------------------------------------------------------------


def test_request_codes_and_header_fields() -> None:
    topic = aw.update_and_create_topic_request(aw.TopicConfigData("T", 3, 4, 6, 1, order=True))
    assert topic.code == RequestCode.UPDATE_AND_CREATE_TOPIC and topic.body is None
    assert topic.ext == {
        "topic": "T", "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "4",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "1", "order": "true",
    }  # fmt: skip
    expected: list[tuple[RemotingCommand, int, dict[str, str] | None]] = [
        (aw.delete_topic_request("T"), RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T"}),
        (aw.topic_stats_request("T"), RequestCode.GET_TOPIC_STATS_INFO, {"topic": "T"}),
        (aw.consume_stats_request("g"), RequestCode.GET_CONSUME_STATS, {"consumerGroup": "g"}),
        (
            aw.consume_stats_request("g", "T"),
            RequestCode.GET_CONSUME_STATS,
            {"consumerGroup": "g", "topic": "T"},
        ),
        (
            aw.reset_offset_by_time_request("g", "T", 1700000000000),
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": "T", "group": "g", "timestamp": "1700000000000", "isForce": "true"},
        ),
        (
            aw.reset_offset_by_time_request("g", "T", -1, force=False),
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": "T", "group": "g", "timestamp": "-1", "isForce": "false"},
        ),
        (
            aw.query_topic_consume_by_who_request("T"),
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
            {"topic": "T"},
        ),
        (
            aw.consumer_connection_list_request("g"),
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            {"consumerGroup": "g"},
        ),
        (
            aw.query_message_request("T", "k", max_num=5, begin_timestamp=1, end_timestamp=2),
            RequestCode.QUERY_MESSAGE,
            {
                "topic": "T",
                "key": "k",
                "maxNum": "5",
                "beginTimestamp": "1",
                "endTimestamp": "2",
                "_UNIQUE_KEY_QUERY": "false",
            },
        ),
        (
            aw.query_message_request("T", "U1", unique_key=True),
            RequestCode.QUERY_MESSAGE,
            {
                "topic": "T",
                "key": "U1",
                "maxNum": "32",
                "beginTimestamp": "0",
                "endTimestamp": str(2**63 - 1),
                "_UNIQUE_KEY_QUERY": "true",
            },
        ),
        (aw.view_message_request(4096), RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "4096"}),
        (
            aw.resend_message_request("g", 4096),
            RocketqRequestCode.RESEND_MESSAGE,
            {"group": "g", "commitLogOffset": "4096"},
        ),
        (aw.transfer_leader_request("n1"), RocketqRequestCode.TRANSFER_LEADER, {"to": "n1"}),
        (
            aw.transfer_leader_request("n2", "rg"),
            RocketqRequestCode.TRANSFER_LEADER,
            {"to": "n2", "group": "rg"},
        ),
        (aw.broker_runtime_info_request(), RequestCode.GET_BROKER_RUNTIME_INFO, None),
        (aw.broker_config_request(), RequestCode.GET_BROKER_CONFIG, None),
        (aw.all_topic_config_request(), RequestCode.GET_ALL_TOPIC_CONFIG, None),
        (
            aw.all_subscription_group_config_request(),
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            None,
        ),
        (aw.all_consumer_offset_request(), RequestCode.GET_ALL_CONSUMER_OFFSET, None),
        (aw.all_delay_offset_request(), RequestCode.GET_ALL_DELAY_OFFSET, None),
    ]
    for cmd, code, ext in expected:
        assert (cmd.code, cmd.ext, cmd.body) == (code, ext, None), cmd


def test_subscription_group_body_is_the_bean_in_field_order() -> None:
    cmd = aw.update_subscription_group_request(
        aw.SubscriptionGroupConfig("g", consume_broadcast_enable=False, retry_max_times=5)
    )
    assert cmd.code == RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP and cmd.ext is None
    assert cmd.body == (
        b'{"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,'
        b'"consumeFromMinEnable":true,"consumeMessageOrderly":false,"groupName":"g",'
        b'"notifyConsumerIdsChangedEnable":true,'
        b'"retryMaxTimes":5,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}'
    )


# -- answers as the broker writes them ----------------------------------------------------


def test_queue_tables_keyed_by_bare_message_queues() -> None:
    stats = aw.parse_topic_stats(
        answer(body=b'{"offsetTable":{' + MQ1 + b':{"lastUpdateTimestamp":0,"maxOffset":0,'
               b'"minOffset":0},' + MQ0 + b':{"lastUpdateTimestamp":1700000000123,'
               b'"maxOffset":3,"minOffset":1}}}')
    )  # fmt: skip
    assert stats.queues == (
        aw.QueueStats("T", 0, 1, 3, 1700000000123, broker_name="broker-a"),
        aw.QueueStats("T", 1, broker_name="broker-a"),
    )
    consume = aw.parse_consume_stats(
        answer(body=b'{"consumeTps":2.5,"offsetTable":{' + MQ0 + b':{"brokerOffset":3,'
               b'"consumerOffset":2,"lastTimestamp":1700000000123}}}')
    )  # fmt: skip
    (q,) = consume.queues
    assert consume.consume_tps == 2.5
    assert fields(q, PROGRESS_KEYS) == ("T", 0, 3, 2, 1700000000123) and q.min_offset == 0
    reset = aw.parse_reset_offset_by_time(
        answer(body=b'{"offsetTable":{' + MQ1 + b":1," + MQ0 + b":3}}")
    )
    assert [(q.queue_id, q.consumer_offset) for q in reset.queues] == [(0, 3), (1, 1)]


def test_consumer_connection_from_a_java_broker() -> None:
    body = (
        b'{"connectionSet":[{"clientAddr":"10.0.0.3:53001","clientId":"10.0.0.3@9",'
        b'"language":"JAVA","version":409},{"clientAddr":"10.0.0.2:53000",'
        b'"clientId":"10.0.0.2@8","language":"JAVA","version":409}],'
        b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
        b'"messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,'
        b'"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
        b'"subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}}}'
    )
    listed = aw.parse_consumer_connection_list(answer(body=body))
    first, second = listed.connections
    sub = SubscriptionData("T", "TagA", "TAG", 1700000000000)
    assert first == aw.ConsumerConnection(
        "10.0.0.2@8", "10.0.0.2:53000", "CONSUME_PASSIVELY", "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET", (sub,), language="JAVA", version=409,
    )  # fmt: skip
    assert second.client_id == "10.0.0.3@9" and second.subscriptions == (sub,)
    # An enum no client stated is left out of the body.
    bare = aw.parse_consumer_connection_list(
        answer(body=b'{"connectionSet":[{"clientAddr":"a:1","clientId":"c"}]}')
    )
    assert fields(bare.connections[0], CONNECTION_KEYS) == ("c", "a:1", "", "", "")


def test_lists_tables_records_and_headers() -> None:
    groups = aw.parse_query_topic_consume_by_who(answer(body=b'{"groupList":["b","a"]}'))
    assert groups.groups == ("a", "b")
    info = aw.parse_broker_runtime_info(
        answer(body=b'{"table":{"brokerVersion":"409","msgPutTotalTodayNow":"12"}}')
    )
    assert info.table == {"brokerVersion": "409", "msgPutTotalTodayNow": "12"}
    config = aw.parse_broker_config(
        answer(
            body=b"brokerName=broker-a\nnamesrvAddr=127.0.0.1:9876\nlistenPort=10911\n",
            ext={"version": '{"counter":2,"timestamp":1700000000000}'},
        )
    )
    assert config.table == {
        "brokerName": "broker-a", "namesrvAddr": "127.0.0.1:9876", "listenPort": "10911"
    }  # fmt: skip
    assert config.version == aw.DataVersion(2, 1700000000000)
    found = aw.parse_query_message(
        answer(
            body=b"RECORDS",
            ext={"indexLastUpdateTimestamp": "17", "indexLastUpdatePhyoffset": "1024"},
        )
    )
    assert found == aw.QueryMessageResult(b"RECORDS", 17, 1024)
    assert aw.parse_view_message(answer(body=b"ONE")).records == b"ONE"
    host = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")
    msg_id = encode_offset_msg_id(host, 4096)
    resent = aw.parse_resend_message(
        answer(ext={"msgId": msg_id, "queueOffset": "0", "commitLogOffset": "4096"})
    )
    assert resent == aw.ResendResult(msg_id, 0, 4096, host)
    aw.parse_ok(answer())


def test_the_tables_a_slave_copies() -> None:
    topics = aw.parse_all_topic_config(
        answer(body=b'{"dataVersion":{"counter":7,"timestamp":1700000000000},'
               b'"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,'
               b'"topicFilterType":"MULTI_TAG","topicName":"T","topicSysFlag":0,'
               b'"writeQueueNums":4}}}')
    )  # fmt: skip
    assert topics.data_version == aw.DataVersion(7, 1700000000000)
    assert topics.topic_config_table == {
        "T": aw.TopicConfigData("T", 4, 4, 6, 0, False, "MULTI_TAG")
    }
    groups = aw.parse_all_subscription_group_config(
        answer(body=b'{"dataVersion":{"counter":1,"timestamp":5},"subscriptionGroupTable":'
               b'{"g":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,'
               b'"consumeFromMinEnable":true,"groupName":"g","notifyConsumerIdsChangedEnable":'
               b'true,"retryMaxTimes":3,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}')
    )  # fmt: skip
    assert groups.data_version == aw.DataVersion(1, 5)
    assert groups.subscription_group_table == {
        "g": aw.SubscriptionGroupConfig("g", consume_enable=False, retry_max_times=3)
    }
    offsets = aw.parse_all_consumer_offset(
        answer(body=b'{"offsetTable":{"T@g":{0:2,1:5},"%RETRY%g@g":{0:0}}}')
    )
    assert offsets.offset_table == {"T@g": {0: 2, 1: 5}, "%RETRY%g@g": {0: 0}}
    assert offsets.groups == {"g"}
    delay = aw.parse_all_delay_offset(answer(body=b'{"offsetTable":{3:7,1:4}}'))
    assert delay.offset_table == {1: 4, 3: 7} and list(delay.offset_table) == [1, 3]
    # Quoted keys, as a standard JSON writer gives them, read the same.
    quoted = aw.parse_all_delay_offset(answer(body=b'{"offsetTable":{"1":4}}'))
    assert quoted.offset_table == {1: 4}


@pytest.mark.parametrize(
    ("parse", "code", "error"),
    [
        (aw.parse_topic_stats, ResponseCode.TOPIC_NOT_EXIST, TopicNotExistError),
        (aw.parse_consume_stats, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
         SubscriptionGroupNotExistError),
        (aw.parse_consumer_connection_list, ResponseCode.CONSUMER_NOT_ONLINE,
         ConsumerNotOnlineError),
        (aw.parse_query_message, ResponseCode.QUERY_NOT_FOUND, QueryNotFoundError),
        (aw.parse_update_and_create_topic, ResponseCode.MESSAGE_ILLEGAL, MessageIllegalError),
        (aw.parse_resend_message, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
         RequestCodeNotSupportedError),
        (aw.parse_all_consumer_offset, ResponseCode.SYSTEM_ERROR, RocketqSystemError),
        (aw.parse_transfer_leader, ResponseCode.SYSTEM_ERROR, RocketqSystemError),
    ],
)  # fmt: skip
def test_an_error_answer_raises_its_class(
    parse: Parser, code: int, error: type[RocketqError]
) -> None:
    with pytest.raises(error, match="the remark"):
        parse(answer(code, remark="the remark"))


def test_a_body_of_the_wrong_shape_names_what_is_wrong() -> None:
    with pytest.raises(QueryNotFoundError, match="'absent'"):
        aw.parse_subscription_group(answer(body=b'{"subscriptionGroupTable":{}}'), "absent")
    cases: list[tuple[Parser, bytes, str]] = [
        (aw.parse_topic_stats, b"{not json", "not JSON"),
        (aw.parse_topic_stats, b"[]", "not a JSON object"),
        (aw.parse_topic_stats, b'{"offsetTable":{"T":{}}}', "MessageQueue"),
        (aw.parse_topic_stats, b'{"offsetTable":{' + MQ0 + b':{"maxOffset":"3"}}}', "maxOffset"),
        (aw.parse_consume_stats, b'{"consumeTps":"fast"}', "consumeTps"),
        (aw.parse_reset_offset_by_time, b'{"offsetTable":{' + MQ0 + b":true}}", "offset"),
        (aw.parse_query_topic_consume_by_who, b'{"groupList":"g"}', "groupList"),
        (aw.parse_consumer_connection_list, b'{"connectionSet":[1]}', "connectionSet"),
        (aw.parse_all_consumer_offset, b'{"offsetTable":{"T@g":{"x":1}}}', "'x'"),
        (aw.parse_all_topic_config, b'{"topicConfigTable":{"T":{"perm":true}}}', "perm"),
        (aw.parse_all_subscription_group_config,
         b'{"subscriptionGroupTable":{"g":{"consumeEnable":1}}}', "consumeEnable"),
        (aw.parse_view_message, b"", "no record"),
        (aw.parse_query_message, b"R", "indexLastUpdateTimestamp"),
        (aw.parse_resend_message, b"", "offset message id"),
    ]  # fmt: skip
    for parse, body, says in cases:
        with pytest.raises(RocketqSystemError, match=says):
            parse(answer(body=body or None))


# -- round trips through the broker -------------------------------------------------------


async def test_topics(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    config = aw.TopicConfigData("AdminT", 3, 4, 6, order=True)
    aw.parse_update_and_create_topic(await ask(conn, aw.update_and_create_topic_request(config)))
    assert b.topics.get("AdminT") == TopicConfig("AdminT", 3, 4, 6, 0, True)
    tables = aw.parse_all_topic_config(await ask(conn, aw.all_topic_config_request()))
    assert tables.topic_config_table["AdminT"] == config
    assert set(tables.topic_config_table) == set(b.topics.topics)
    assert tables.data_version.counter == b.topics.data_version
    aw.parse_delete_topic(await ask(conn, aw.delete_topic_request("AdminT")))
    assert b.topics.get("AdminT") is None
    with pytest.raises(TopicNotExistError, match="AdminT"):
        aw.parse_delete_topic(await ask(conn, aw.delete_topic_request("AdminT")))
    multi = aw.TopicConfigData("BadT", topic_filter_type="REGEX")
    with pytest.raises(MessageIllegalError, match="topicFilterType"):
        aw.parse_update_and_create_topic(await ask(conn, aw.update_and_create_topic_request(multi)))


async def test_topic_and_consume_stats_are_the_stores_offsets(
    wire: tuple[Broker, Connection],  # noqa: F811
) -> None:
    b, conn = wire
    for _ in range(3):
        await send(conn, 0)
    stats = aw.parse_topic_stats(await ask(conn, aw.topic_stats_request(TOPIC)))
    # (topic, queue, min, max, store time of the queue's last message)
    last = b.store.store_time_in_queue(TOPIC, 0, 2)
    assert [fields(q, STATS_KEYS) for q in stats.queues] == [
        (TOPIC, 0, 0, 3, last),
        (TOPIC, 1, 0, 0, 0),
    ]
    assert last > 0
    assert {q.broker_name for q in stats.queues} == {b.config.broker_name}
    with pytest.raises(TopicNotExistError, match="Nope"):
        aw.parse_topic_stats(await ask(conn, aw.topic_stats_request("Nope")))

    b.offsets.commit("cg", TOPIC, 0, 2)
    b.stats.got("cg", TOPIC, 6)
    for topic in (TOPIC, ""):
        consume = aw.parse_consume_stats(await ask(conn, aw.consume_stats_request("cg", topic)))
        # (topic, queue, broker's max, group's offset, store time of its last consumed one)
        consumed = b.store.store_time_in_queue(TOPIC, 0, 1)
        assert [fields(q, PROGRESS_KEYS) for q in consume.queues] == [
            (TOPIC, 0, 3, 2, consumed), (TOPIC, 1, 0, 0, 0)
        ]  # fmt: skip
        assert consume.consume_tps == pytest.approx(b.stats.consume_tps("cg", [TOPIC]), rel=0.5)
        assert consume.consume_tps > 0 and consumed > 0
    # A group or topic the broker does not know is refused, saying which.
    with pytest.raises(SubscriptionGroupNotExistError, match="nobody"):
        aw.parse_consume_stats(await ask(conn, aw.consume_stats_request("nobody")))
    with pytest.raises(TopicNotExistError, match="Nope"):
        aw.parse_consume_stats(await ask(conn, aw.consume_stats_request("cg", "Nope")))


async def test_reset_offsets_by_time(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    for q in (0, 0, 0, 1):
        await send(conn, q)
    ends = aw.parse_reset_offset_by_time(
        await ask(conn, aw.reset_offset_by_time_request("cg", TOPIC, -1))
    )
    assert [(q.topic, q.queue_id, q.consumer_offset) for q in ends.queues] == [
        (TOPIC, 0, 3), (TOPIC, 1, 1)
    ]  # fmt: skip
    assert b.offsets.offsets("cg", TOPIC) == {0: 3, 1: 1}
    b.offsets.commit("cg", TOPIC, 0, 1)
    kept = aw.parse_reset_offset_by_time(
        await ask(conn, aw.reset_offset_by_time_request("cg", TOPIC, -1, force=False))
    )
    assert [q.consumer_offset for q in kept.queues] == [1, 1]
    start = aw.parse_reset_offset_by_time(
        await ask(conn, aw.reset_offset_by_time_request("cg", TOPIC, 0))
    )
    assert [q.consumer_offset for q in start.queues] == [0, 0]
    with pytest.raises(TopicNotExistError, match="Nope"):
        aw.parse_reset_offset_by_time(
            await ask(conn, aw.reset_offset_by_time_request("cg", "Nope", 0))
        )
    with pytest.raises(SubscriptionGroupNotExistError, match="bad group"):
        aw.parse_reset_offset_by_time(
            await ask(conn, aw.reset_offset_by_time_request("bad group", TOPIC, 0))
        )


async def test_subscription_groups(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    config = aw.SubscriptionGroupConfig(
        "g1", consume_broadcast_enable=False, retry_queue_nums=2, retry_max_times=5,
        notify_consumer_ids_changed_enable=False,
    )  # fmt: skip
    aw.parse_update_subscription_group(
        await ask(conn, aw.update_subscription_group_request(config))
    )
    g1 = b.groups.groups["g1"]
    assert (g1.retry_max_times, g1.retry_queue_nums, g1.consume_broadcast_enable) == (5, 2, False)
    every = await ask(conn, aw.all_subscription_group_config_request())
    assert aw.parse_subscription_group(every, "g1").config == config
    held = asdict(b.groups.groups["g1"])
    assert fields(aw.parse_subscription_group(every, "g1").config, GROUP_KEYS) == tuple(
        held[k] for k in GROUP_KEYS
    )
    wrapper = aw.parse_all_subscription_group_config(every)
    assert set(wrapper.subscription_group_table) == set(b.groups.groups)
    with pytest.raises(QueryNotFoundError, match="'absent'"):
        aw.parse_subscription_group(every, "absent")
    bad = aw.update_subscription_group_request(aw.SubscriptionGroupConfig("bad group"))
    with pytest.raises(SubscriptionGroupNotExistError, match="bad group"):
        aw.parse_update_subscription_group(await ask(conn, bad))


async def test_connections_and_who_consumes(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    consumer = ConsumerData(
        "cg1",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        subscriptions=[SubscriptionData(TOPIC, "TagA || TagB", version=1)],
    )
    aw.parse_ok(await ask(conn, heartbeat_request("c1@1", [], [consumer])))
    listed = aw.parse_consumer_connection_list(
        await ask(conn, aw.consumer_connection_list_request("cg1"))
    )
    (c,) = listed.connections
    info = b.consumers.groups["cg1"]
    assert fields(c, CONNECTION_KEYS) == (
        "c1@1",
        info.client_addrs["c1@1"],
        info.consume_type,
        info.message_model,
        info.consume_from_where,
    )
    assert c.client_addr.startswith("127.0.0.1:") and c.consume_type == "CONSUME_PASSIVELY"
    subs = ("topic", "expression", "expression_type", "version")
    assert [fields(s, subs) for s in c.subscriptions] == [
        fields(s, subs) for s in info.subscriptions.values()
    ]
    assert c.subscriptions == (SubscriptionData(TOPIC, "TagA || TagB", "TAG", 1),)
    # The one thing the wire does not carry: when the client was last heard from.
    assert c.last_update_timestamp == 0 and info.clients["c1@1"] > 0
    with pytest.raises(ConsumerNotOnlineError, match="'x'"):
        aw.parse_consumer_connection_list(await ask(conn, aw.consumer_connection_list_request("x")))

    b.offsets.commit("cgA", TOPIC, 0, 1)
    who = aw.parse_query_topic_consume_by_who(
        await ask(conn, aw.query_topic_consume_by_who_request(TOPIC))
    )
    assert who.groups == ("cg1", "cgA")
    assert set(who.groups) == set(b.offsets.groups_of(TOPIC)) | {"cg1"}
    nobody = await ask(conn, aw.query_topic_consume_by_who_request("Other"))
    assert aw.parse_query_topic_consume_by_who(nobody).groups == ()


async def test_query_view_and_resend_messages(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    await send(conn, 0, "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02", b"one")
    second = await send(conn, 1, "KEYS\x01k1 k2\x02", b"two")
    _, offset = decode_offset_msg_id(second)
    await wait_until(lambda: b.store.dispatch_behind_bytes == 0, "the index")

    found = aw.parse_query_message(await ask(conn, aw.query_message_request(TOPIC, "k1")))
    assert sorted(m.body for m in decode_records(found.records)) == [b"one", b"two"]
    views = b.store.messages_by_key(TOPIC, "k1", max_num=32)
    try:
        assert found.records == b"".join(views)
    finally:
        for v in views:
            v.release()
    assert found.index_last_update_phyoffset >= offset
    assert found.index_last_update_timestamp > 1_600_000_000_000
    unique = aw.parse_query_message(
        await ask(conn, aw.query_message_request(TOPIC, "U1", max_num=1, unique_key=True))
    )
    assert [m.body for m in decode_records(unique.records)] == [b"one"]
    with pytest.raises(QueryNotFoundError, match="absent"):
        aw.parse_query_message(await ask(conn, aw.query_message_request(TOPIC, "absent")))

    view = aw.parse_view_message(await ask(conn, aw.view_message_request(offset)))
    (m,) = decode_records(view.records)
    assert m.body == b"two" and m.offset_msg_id == second
    with pytest.raises(QueryNotFoundError):
        aw.parse_view_message(await ask(conn, aw.view_message_request(1 << 40)))

    resent = aw.parse_resend_message(await ask(conn, aw.resend_message_request("cg", offset)))
    assert resent.store_host == b.store.commitlog.store_host
    assert encode_offset_msg_id(resent.store_host, resent.wrote_offset) == resent.msg_id
    assert resent.wrote_offset > offset and resent.queue_offset == 0
    copy_view = aw.parse_view_message(await ask(conn, aw.view_message_request(resent.wrote_offset)))
    (copy,) = decode_records(copy_view.records)
    assert copy.topic == "%RETRY%cg" and copy.body == b"two"
    with pytest.raises(SubscriptionGroupNotExistError, match="bad group"):
        aw.parse_resend_message(await ask(conn, aw.resend_message_request("bad group", offset)))


async def test_runtime_info_and_config(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    info = aw.parse_broker_runtime_info(await ask(conn, aw.broker_runtime_info_request()))
    assert set(info.table) == set(runtime_table(b))
    assert info.table["brokerName"] == b.config.broker_name and info.table["brokerId"] == "0"
    assert info.table["commitLogMaxOffset"] == str(b.store.max_phy_offset)
    config = aw.parse_broker_config(await ask(conn, aw.broker_config_request()))
    assert config.table == config_table(b.config, b.store_config)
    assert config.table["broker_name"] == b.config.broker_name
    assert config.table["listen_port"] == str(b.port)
    assert config.version == aw.DataVersion(0, int(b.boot_time * 1000))


async def test_the_slave_sync_tables_hold_the_brokers_tables(
    wire: tuple[Broker, Connection],  # noqa: F811
) -> None:
    b, conn = wire
    b.offsets.commit("cg", TOPIC, 1, 5)
    b.offsets.commit("cg", TOPIC, 0, 2)
    b.schedule.offsets.update({3: 7, 1: 4})
    b.groups.find_or_create("cg")

    topics = aw.parse_all_topic_config(await ask(conn, aw.all_topic_config_request()))
    assert topics.data_version.counter == b.topics.data_version
    assert {
        n: {f: getattr(t, f) for f in TOPIC_KEYS} for n, t in topics.topic_config_table.items()
    } == {n: asdict(t) for n, t in b.topics.topics.items()}

    offsets = aw.parse_all_consumer_offset(await ask(conn, aw.all_consumer_offset_request()))
    assert offsets.offset_table == b.offsets.table
    assert offsets.offset_table[f"{TOPIC}@cg"] == {0: 2, 1: 5} and "cg" in offsets.groups

    delay = aw.parse_all_delay_offset(await ask(conn, aw.all_delay_offset_request()))
    assert delay.offset_table == b.schedule.offsets == {1: 4, 3: 7}

    groups = aw.parse_all_subscription_group_config(
        await ask(conn, aw.all_subscription_group_config_request())
    )
    assert {
        n: dict(zip(GROUP_KEYS, fields(g, GROUP_KEYS), strict=True))
        for n, g in groups.subscription_group_table.items()
    } == {n: asdict(g) for n, g in b.groups.groups.items()}
    assert "cg" in groups.subscription_group_table


async def test_transfer_leader(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    with pytest.raises(RocketqSystemError, match="does not run Raft"):
        aw.parse_transfer_leader(await ask(conn, aw.transfer_leader_request("n1")))
    raft = FakeRaft()
    b.raft = raft  # type: ignore[assignment]
    try:
        aw.parse_transfer_leader(await ask(conn, aw.transfer_leader_request("n2", "rg")))
        with pytest.raises(RocketqSystemError, match="not a member"):
            aw.parse_transfer_leader(await ask(conn, aw.transfer_leader_request("n9")))
    finally:
        b.raft = None
    assert raft.transfers == [("rg", "n2")]
