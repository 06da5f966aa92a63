"""The SDK's client-management requests and the broker's notices (sdk/client_wire.py):
header fields and bodies as RocketMQ 4.9's client writes them, the notices read back, and
round trips through the broker's own handlers in this process, notices included (a client
hears that its group changed over the connection its heartbeat came on)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketq.broker.broker import Broker
from rocketq.common.exceptions import QueryNotFoundError, RocketqSystemError
from rocketq.common.message import MessageQueue
from rocketq.common.record import encode_properties, encode_record
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import BrokerData, QueueData, TopicRouteData
from rocketq.remoting.transport import Connection
from rocketq.sdk.client import ClientInstance, consumer_heartbeat
from rocketq.sdk.client_wire import (
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
    TRANSACTION_UNKNOWN,
    GroupChanged,
    Notice,
    OffsetReset,
    TransactionCheck,
    consumer_list_request,
    end_transaction_request,
    lock_batch_request,
    max_offset_request,
    min_offset_request,
    parse_consumer_list,
    parse_lock_batch,
    parse_notice,
    parse_offset,
    query_offset_request,
    search_offset_request,
    send_back_request,
    unlock_batch_request,
    unregister_request,
    update_offset_request,
)
from rocketq.sdk.wire import parse_send, send_request
from tests.broker.conftest import WIRE_TOPIC, wire  # noqa: F401 - the fixture, shared

TOPIC = WIRE_TOPIC


def test_offset_headers_use_rocketmqs_field_names() -> None:
    q = query_offset_request("cg", "T", 3)
    assert (q.code, q.ext) == (
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"topic": "T", "queueId": "3", "consumerGroup": "cg"},
    )
    u = update_offset_request("cg", "T", 3, 42)
    assert (u.code, u.ext) == (
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"topic": "T", "queueId": "3", "consumerGroup": "cg", "commitOffset": "42"},
    )
    assert max_offset_request("T", 1).code == RequestCode.GET_MAX_OFFSET
    assert min_offset_request("T", 1).code == RequestCode.GET_MIN_OFFSET
    s = search_offset_request("T", 1, 1_700_000_000_000)
    assert s.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
    assert s.ext == {"topic": "T", "queueId": "1", "timestamp": "1700000000000"}
    assert consumer_list_request("cg").ext == {"consumerGroup": "cg"}
    assert unregister_request("c@1", "pg").ext == {"clientID": "c@1", "producerGroup": "pg"}
    assert unregister_request("c@1", consumer_group="cg").ext == {
        "clientID": "c@1",
        "consumerGroup": "cg",
    }


def test_send_back_and_end_transaction_headers() -> None:
    back = send_back_request(
        "cg", 1234, delay_level=-1, origin_msg_id="ID", origin_topic="T", max_reconsume_times=16
    )
    assert back.code == RequestCode.CONSUMER_SEND_MSG_BACK
    assert back.ext == {
        "offset": "1234", "group": "cg", "delayLevel": "-1", "originMsgId": "ID",
        "originTopic": "T", "unitMode": "false", "maxReconsumeTimes": "16",
    }  # fmt: skip
    end = end_transaction_request(
        "pg",
        commit_log_offset=99,
        tran_state_table_offset=7,
        msg_id="OFFSETID",
        transaction_id="UNIQ",
        commit_or_rollback=TRANSACTION_COMMIT,
        from_transaction_check=True,
    )
    assert end.code == RequestCode.END_TRANSACTION
    assert end.ext == {
        "producerGroup": "pg", "tranStateTableOffset": "7", "commitLogOffset": "99",
        "commitOrRollback": "8", "fromTransactionCheck": "true", "msgId": "OFFSETID",
        "transactionId": "UNIQ",
    }  # fmt: skip
    # MessageSysFlag's transaction types, as the header carries them.
    assert (TRANSACTION_UNKNOWN, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK) == (0, 8, 12)


def test_lock_bodies_are_lock_batch_request_bodies() -> None:
    queues = [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 2)]
    for cmd, code in (
        (lock_batch_request("cg", "c@1", queues), RequestCode.LOCK_BATCH_MQ),
        (unlock_batch_request("cg", "c@1", queues), RequestCode.UNLOCK_BATCH_MQ),
    ):
        assert cmd.code == code and cmd.ext is None
        assert fastjson.loads(bytes(cmd.body or b"")) == {
            "clientId": "c@1",
            "consumerGroup": "cg",
            "mqSet": [
                {"brokerName": "broker-a", "queueId": 0, "topic": "T"},
                {"brokerName": "broker-a", "queueId": 2, "topic": "T"},
            ],
        }


def test_answers_read_back_and_bad_ones_name_the_problem() -> None:
    request = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET)
    assert parse_offset(request.response(ResponseCode.SUCCESS, {"offset": "17"})) == 17
    with pytest.raises(QueryNotFoundError, match="no offset"):
        parse_offset(request.response(ResponseCode.QUERY_NOT_FOUND, remark="no offset"))
    with pytest.raises(RocketqSystemError, match="offset"):
        parse_offset(request.response(ResponseCode.SUCCESS, {"offset": "x"}))
    ids = request.response(ResponseCode.SUCCESS, None, b'{"consumerIdList":["a","b"]}')
    assert parse_consumer_list(ids) == ["a", "b"]
    locked = request.response(
        ResponseCode.SUCCESS,
        None,
        b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":1,"topic":"T"}]}',
    )
    assert parse_lock_batch(locked) == {("T", 1)}
    with pytest.raises(RocketqSystemError, match="lockOKMQSet"):
        parse_lock_batch(request.response(ResponseCode.SUCCESS, None, b'{"lockOKMQSet":[1]}'))


def test_notices_read_back() -> None:
    changed = RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"})
    assert parse_notice(changed) == GroupChanged("cg")
    table = {
        fastjson.ObjectKey.of({"brokerName": "broker-a", "queueId": 1, "topic": "T"}): 5,
        fastjson.ObjectKey.of({"brokerName": "broker-b", "queueId": 0, "topic": "T"}): 9,
    }
    reset = RemotingCommand(
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        {"topic": "T", "group": "cg", "timestamp": "0", "isForce": "false"},
        fastjson.dumps({"offsetTable": table}),
    )
    assert parse_notice(reset) == OffsetReset("cg", "T", {("broker-a", 1): 5, ("broker-b", 0): 9})
    record = encode_record(
        topic=b"RMQ_SYS_TRANS_HALF_TOPIC",
        body=b"half",
        properties=encode_properties({"PGROUP": "pg", "UNIQ_KEY": "U1"}),
        born_timestamp=1,
        born_host=bytes(8),
        queue_id=0,
    )
    check = RemotingCommand(
        RequestCode.CHECK_TRANSACTION_STATE,
        {"tranStateTableOffset": "3", "commitLogOffset": "77", "msgId": "M", "offsetMsgId": "M"},
        record,
    )
    assert parse_notice(check) == TransactionCheck("pg", 77, 3, "M", "U1", record)
    with pytest.raises(RocketqSystemError, match="commitLogOffset"):
        parse_notice(RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, {}, record))
    with pytest.raises(RocketqSystemError, match="not JSON"):
        parse_notice(RemotingCommand(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, {}, b"{oops"))
    with pytest.raises(RocketqSystemError, match="not a notice"):
        parse_notice(RemotingCommand(RequestCode.HEART_BEAT))


async def test_round_trips_through_the_broker(wire: tuple[Broker, Connection]) -> None:  # noqa: F811
    b, conn = wire
    for i in range(3):
        parse_send(
            await conn.invoke(
                send_request(b"m%d" % i, "", group="pg", topic=TOPIC, queue_id=1,
                             born_timestamp=int(time.time() * 1000)),
                5,
            )
        )  # fmt: skip
    assert parse_offset(await conn.invoke(max_offset_request(TOPIC, 1), 5)) == 3
    assert parse_offset(await conn.invoke(min_offset_request(TOPIC, 1), 5)) == 0
    assert parse_offset(await conn.invoke(search_offset_request(TOPIC, 1, 0), 5)) == 0
    # A group that never committed starts at 0 while the first message is there.
    assert parse_offset(await conn.invoke(query_offset_request("cg", TOPIC, 1), 5)) == 0
    ok = await conn.invoke(update_offset_request("cg", TOPIC, 1, 2), 5)
    assert ok.code == ResponseCode.SUCCESS
    assert parse_offset(await conn.invoke(query_offset_request("cg", TOPIC, 1), 5)) == 2
    assert b.offsets.query("cg", TOPIC, 1) == 2

    queues = [MessageQueue(TOPIC, b.config.broker_name, q) for q in (0, 1)]
    held = parse_lock_batch(await conn.invoke(lock_batch_request("cg", "c@1", queues), 5))
    assert held == {(TOPIC, 0), (TOPIC, 1)}
    other = parse_lock_batch(await conn.invoke(lock_batch_request("cg", "c@2", queues), 5))
    assert other == set()  # c@1 holds both
    unlock = await conn.invoke(unlock_batch_request("cg", "c@1", queues[:1]), 5)
    assert unlock.code == ResponseCode.SUCCESS
    other = parse_lock_batch(await conn.invoke(lock_batch_request("cg", "c@2", queues), 5))
    assert other == {(TOPIC, 0)}

    with pytest.raises(RocketqSystemError, match="no consumer"):
        parse_consumer_list(await conn.invoke(consumer_list_request("nobody"), 5))


async def test_a_client_hears_its_group_change_over_its_heartbeats_connection(
    wire: tuple[Broker, Connection],  # noqa: F811
) -> None:
    b, _ = wire
    addr = f"127.0.0.1:{b.port}"
    heard: list[Notice] = []
    clients = []
    for n in range(2):
        client = ClientInstance("127.0.0.1:1", client_id=f"c@{n}")
        client.broker_addrs = {b.config.broker_name: {0: addr}}
        client.heartbeat = lambda c=client: consumer_heartbeat(
            c.client_id, "cg", consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET", subscriptions={TOPIC: ("*", "TAG")},
        )  # fmt: skip

        async def on_event(notice: Notice, source: str, c: ClientInstance = client) -> None:
            if c.client_id == "c@0":
                heard.append(notice)

        client.on_event = on_event
        await client.start()
        clients.append(client)
    try:
        await clients[0].heartbeat_all()
        assert b.consumers.client_ids("cg") == ["c@0"]
        await clients[1].heartbeat_all()  # c@1 joins: c@0 is told
        deadline = time.monotonic() + 5
        while GroupChanged("cg") not in heard:
            assert time.monotonic() < deadline, f"no group change heard: {heard}"
            await asyncio.sleep(0.02)
        assert await clients[0].consumer_ids("cg", route_of(b.config.broker_name, addr)) == [
            "c@0",
            "c@1",
        ]
        await clients[1].unregister(consumer_group="cg")
        assert b.consumers.client_ids("cg") == ["c@0"]
        # A client whose connection broke registers again over the new one at once.
        clients[0].brokers.remoting.close_connection(addr)
        deadline = time.monotonic() + 5
        while b.consumers.client_ids("cg") != []:
            assert time.monotonic() < deadline, "the broker kept a closed client"
            await asyncio.sleep(0.02)
        await clients[0].broker(addr).offset(max_offset_request(TOPIC, 0), 5)  # reconnects
        while b.consumers.client_ids("cg") != ["c@0"]:
            assert time.monotonic() < deadline, "the reconnected client did not heartbeat"
            await asyncio.sleep(0.02)
    finally:
        for client in clients:
            await client.shutdown()


def route_of(broker_name: str, addr: str) -> TopicRouteData:
    """A route of one broker with one master."""
    return TopicRouteData(
        [QueueData(broker_name, 2, 2, 6)], [BrokerData("DefaultCluster", broker_name, {0: addr})]
    )
