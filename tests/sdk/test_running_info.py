"""What a consumer answers a broker's forwarded admin requests with, and how an admin reads
it (sdk/running_info.py, the two requests in sdk/client_wire.py and sdk/admin_wire.py):
golden bodies as RocketMQ 4.9's fastjson writes ConsumerRunningInfo and
ConsumeMessageDirectlyResult, a Java client's bodies read back, the request headers, and
the pieces a consumer builds its answer from (sdk/consumer_stats.py,
sdk/consumer_diagnostics.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rocketq.common.exceptions import (
    ConsumerNotOnlineError,
    RequestCodeNotSupportedError,
    RocketqSystemError,
)
from rocketq.common.message import MessageExt, MessageQueue
from rocketq.common.record import decode_records, encode_record
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqVersion
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk import admin_wire as aw
from rocketq.sdk import consumer_diagnostics as diagnostics
from rocketq.sdk.client_wire import (
    DirectConsumeRequest,
    RunningInfoRequest,
    direct_result_answer,
    group_not_here_answer,
    no_consumer_answer,
    parse_consumer_request,
    running_info_answer,
)
from rocketq.sdk.consumer_stats import ConsumerStats
from rocketq.sdk.consumer_types import ConsumeResult, MessageSelector
from rocketq.sdk.push_consumer import ConsumerConfig
from rocketq.sdk.running_info import (
    CR_LATER,
    CR_RETURN_NULL,
    CR_SUCCESS,
    CR_THROW_EXCEPTION,
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
    direct_result_body,
    running_info_body,
)
from rocketq.sdk.wire import SubscriptionData

MQ = MessageQueue("T", "broker-a", 1)
INFO = ConsumerRunningInfo(
    {"consumerGroup": "cg", PROP_CONSUME_TYPE: "CONSUME_PASSIVELY"},
    (SubscriptionData("T", "TagA"),),
    {MQ: ProcessQueueInfo(commit_offset=5, locked=True)},
    {"T": ConsumeStatus(pull_rt=1.5, consume_failed_msgs=2)},
)
INFO_BODY = (
    b'{"mqTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"cachedMsgCount":0,'
    b'"cachedMsgMaxOffset":0,"cachedMsgMinOffset":0,"cachedMsgSizeInMiB":0,"commitOffset":5,'
    b'"droped":false,"lastConsumeTimestamp":0,"lastLockTimestamp":0,"lastPullTimestamp":0,'
    b'"locked":true,"transactionMsgCount":0,"transactionMsgMaxOffset":0,'
    b'"transactionMsgMinOffset":0,"tryUnlockTimes":0}},"properties":{"PROP_CONSUME_TYPE":'
    b'"CONSUME_PASSIVELY","consumerGroup":"cg"},"statusTable":{"T":{"consumeFailedMsgs":2,'
    b'"consumeFailedTPS":0.0,"consumeOKTPS":0.0,"consumeRT":0.0,"pullRT":1.5,"pullTPS":0.0}},'
    b'"subscriptionSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG",'
    b'"subString":"TagA","subVersion":0,"tagsSet":["TagA"],"topic":"T"}]}'
)


def answer(code: int = ResponseCode.SUCCESS, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand(code, None, body, flag=1, remark=None if code == 0 else "why")


def test_running_info_is_written_as_fastjson_writes_it() -> None:
    assert running_info_body(INFO) == INFO_BODY
    assert aw.parse_consumer_running_info(answer(body=INFO_BODY)) == INFO
    with_dump = ConsumerRunningInfo(jstack='"main" tid=1')
    body = running_info_body(with_dump)
    assert body.startswith(b'{"jstack":"\\"main\\" tid=1","mqTable":{}')  # null: left out
    assert aw.parse_consumer_running_info(answer(body=body)) == with_dump


def test_a_java_consumers_running_info_reads() -> None:
    # DefaultMQPushConsumerImpl.consumerRunningInfo as fastjson writes it: Properties in
    # hash order, two queues (one orderly batch in flight), a retry topic's figures.
    body = (
        b'{"jstack":"\\"main\\" Id=1 RUNNABLE\\n","mqTable":{'
        b'{"brokerName":"broker-b","queueId":0,"topic":"T"}:{"cachedMsgCount":2,'
        b'"cachedMsgMaxOffset":41,"cachedMsgMinOffset":40,"cachedMsgSizeInMiB":0,'
        b'"commitOffset":40,"droped":false,"lastConsumeTimestamp":1700000000500,'
        b'"lastLockTimestamp":1700000000100,"lastPullTimestamp":1700000000400,"locked":true,'
        b'"transactionMsgCount":1,"transactionMsgMaxOffset":39,"transactionMsgMinOffset":39,'
        b'"tryUnlockTimes":0},{"brokerName":"broker-a","queueId":3,"topic":"T"}:'
        b'{"commitOffset":7}},"properties":{"messageModel":"CLUSTERING","pullBatchSize":"32",'
        b'"PROP_CONSUMEORDERLY":"true","PROP_CLIENT_VERSION":"V4_9_8",'
        b'"PROP_CONSUMER_START_TIMESTAMP":"1700000000000","PROP_CONSUME_TYPE":'
        b'"CONSUME_PASSIVELY","PROP_NAMESERVER_ADDR":"10.0.0.1:9876;"},"statusTable":{'
        b'"%RETRY%cg":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":0.0,'
        b'"consumeRT":0.0,"pullRT":0.0,"pullTPS":0.0},"T":{"consumeFailedMsgs":3,'
        b'"consumeFailedTPS":0.05,"consumeOKTPS":12.5,"consumeRT":3.25,"pullRT":1.5,'
        b'"pullTPS":12.55}},"subscriptionSet":[{"classFilterMode":false,"codeSet":[],'
        b'"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],'
        b'"topic":"%RETRY%cg"},{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92",'
        b'"subString":"a > 1","subVersion":1700000000001,"tagsSet":[],"topic":"T"}]}'
    )
    info = aw.parse_consumer_running_info(answer(body=body))
    assert info.jstack == '"main" Id=1 RUNNABLE\n'
    assert info.consume_type == "CONSUME_PASSIVELY" and info.orderly
    assert info.properties["PROP_NAMESERVER_ADDR"] == "10.0.0.1:9876;"
    assert list(info.mq_table) == [
        MessageQueue("T", "broker-a", 3),
        MessageQueue("T", "broker-b", 0),
    ]
    b = info.mq_table[MessageQueue("T", "broker-b", 0)]
    assert (b.cached_msg_count, b.cached_msg_min_offset, b.cached_msg_max_offset) == (2, 40, 41)
    assert (b.transaction_msg_count, b.locked, b.dropped) == (1, True, False)
    assert b.last_consume_timestamp == 1700000000500
    assert info.mq_table[MessageQueue("T", "broker-a", 3)] == ProcessQueueInfo(commit_offset=7)
    assert info.status_table["T"] == ConsumeStatus(1.5, 12.55, 3.25, 12.5, 0.05, 3)
    assert info.subscriptions == (
        SubscriptionData("%RETRY%cg", "*", "TAG", 1700000000000),
        SubscriptionData("T", "a > 1", "SQL92", 1700000000001),
    )


def test_direct_results_as_fastjson_writes_them() -> None:
    ok = ConsumeMessageDirectlyResult(consume_result=CR_SUCCESS, spent_time_mills=3)
    assert direct_result_body(ok) == (
        b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":3}'
    )
    thrown = aw.parse_consume_message_directly(
        answer(
            body=b'{"autoCommit":false,"consumeResult":"CR_THROW_EXCEPTION","order":true,'
            b'"remark":"java.lang.RuntimeException: boom","spentTimeMills":12}'
        )
    )
    assert thrown == ConsumeMessageDirectlyResult(
        True, False, CR_THROW_EXCEPTION, "java.lang.RuntimeException: boom", 12
    )
    # A concurrent listener's status outside the two it knows: consumeResult null.
    null = aw.parse_consume_message_directly(answer(body=b'{"autoCommit":true,"order":false}'))
    assert null.consume_result is None and null.spent_time_mills == 0
    assert direct_result_body(null) == b'{"autoCommit":true,"order":false,"spentTimeMills":0}'


def test_bad_answers_name_what_is_wrong() -> None:
    with pytest.raises(RocketqSystemError, match="consumeResult='CR_WHAT'"):
        aw.parse_consume_message_directly(answer(body=b'{"consumeResult":"CR_WHAT"}'))
    with pytest.raises(RocketqSystemError, match="not by a MessageQueue"):
        aw.parse_consumer_running_info(answer(body=b'{"mqTable":{"T":{}}}'))
    with pytest.raises(RocketqSystemError, match="pullRT='fast'"):
        aw.parse_consumer_running_info(answer(body=b'{"statusTable":{"T":{"pullRT":"fast"}}}'))
    with pytest.raises(ConsumerNotOnlineError, match="why"):
        aw.parse_consumer_running_info(answer(ResponseCode.CONSUMER_NOT_ONLINE))


def test_the_admins_requests() -> None:
    info = aw.consumer_running_info_request("cg", "10.0.0.2@8#0", jstack=True)
    assert (info.code, info.ext) == (
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        {"consumerGroup": "cg", "clientId": "10.0.0.2@8#0", "jstackEnable": "true"},
    )
    assert aw.consumer_running_info_request("cg", "c").ext == {
        "consumerGroup": "cg", "clientId": "c", "jstackEnable": "false"
    }  # fmt: skip
    direct = aw.consume_message_directly_request("cg", "c", "0A00000100002A9F0000000000000064")
    assert (direct.code, direct.ext, direct.body) == (
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        {"consumerGroup": "cg", "clientId": "c", "msgId": "0A00000100002A9F0000000000000064"},
        None,
    )


def test_what_a_broker_asks_a_consumer_and_the_answers() -> None:
    asked = RemotingCommand(
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        {"consumerGroup": "cg", "clientId": "c", "jstackEnable": "true"},
        opaque=9,
    )
    assert parse_consumer_request(asked) == RunningInfoRequest("cg", "c", True)
    answered = running_info_answer(asked, INFO)
    assert (answered.code, answered.opaque, answered.is_response) == (0, 9, True)
    assert answered.body == INFO_BODY
    direct = RemotingCommand(
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        {"consumerGroup": "cg", "clientId": "c", "msgId": "ID", "brokerName": "broker-a"},
        b"RECORD",
    )
    assert parse_consumer_request(direct) == DirectConsumeRequest(
        "cg", "c", "ID", "broker-a", b"RECORD"
    )
    result = ConsumeMessageDirectlyResult(consume_result=CR_LATER)
    assert direct_result_answer(direct, result).body == direct_result_body(result)
    other = group_not_here_answer(asked, "cg", "c")
    assert other.code == ResponseCode.SYSTEM_ERROR
    assert "The Consumer Group <cg> not exist in this consumer" in str(other.remark)
    producer = no_consumer_answer(asked, "p@1")
    assert producer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "client p@1 has no consumer (of group cg)" in str(producer.remark)
    assert "GET_CONSUMER_RUNNING_INFO" in str(producer.remark)
    with pytest.raises(RocketqSystemError, match="no message in its body"):
        parse_consumer_request(RemotingCommand(RequestCode.CONSUME_MESSAGE_DIRECTLY, direct.ext))
    with pytest.raises(RocketqSystemError, match="no consumerGroup"):
        parse_consumer_request(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, {}))


async def test_a_consumer_answers_only_for_its_group_and_with_its_listener() -> None:
    asked = RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "cg"})
    wanted: list[bool] = []

    def running_info(jstack: bool) -> ConsumerRunningInfo:
        wanted.append(jstack)
        return INFO

    got = await diagnostics.answer(
        asked, group="cg", client_id="c", running_info=running_info, consume_directly=None
    )
    assert got.body == INFO_BODY and wanted == [False]
    other = await diagnostics.answer(
        asked, group="other", client_id="c", running_info=running_info, consume_directly=None
    )
    assert other.code == ResponseCode.SYSTEM_ERROR and "<cg>" in str(other.remark)
    direct = RemotingCommand(
        RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "cg", "msgId": "ID"}, b"R"
    )
    with pytest.raises(RequestCodeNotSupportedError, match="pull consumer"):
        await diagnostics.answer(
            direct, group="cg", client_id="c", running_info=running_info, consume_directly=None
        )


@pytest.mark.parametrize(
    ("outcome", "orderly", "expected", "remark"),
    [
        (ConsumeResult.SUCCESS, False, CR_SUCCESS, None),
        (ConsumeResult.RECONSUME_LATER, False, CR_LATER, None),
        (ConsumeResult.SUSPEND, True, CR_LATER, None),
        (None, False, CR_RETURN_NULL, None),
        ("yes", False, CR_LATER, "the listener returned 'yes', not a ConsumeResult"),
        (ValueError("bad body"), True, CR_THROW_EXCEPTION, "ValueError: bad body"),
    ],
)
async def test_consume_directly_says_how_the_listener_took_it(
    outcome: object, orderly: bool, expected: str, remark: str | None
) -> None:
    seen: list[list[MessageExt]] = []

    async def listener(msgs: list[MessageExt]) -> object:
        seen.append(msgs)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    (msg,) = decode_records(
        encode_record(topic=b"T", body=b"x", properties=b"", born_timestamp=1, born_host=bytes(8))
    )
    result = await diagnostics.consume_directly(listener, [msg], orderly=orderly)
    assert seen == [[msg]]
    assert (result.consume_result, result.order, result.auto_commit) == (expected, orderly, True)
    assert (result.remark or "").startswith(remark or "") and (remark is None) == (
        result.remark is None
    )
    assert result.spent_time_mills >= 0


def test_stats_measure_the_last_minute_and_hour() -> None:
    now = [1000.0]
    stats = ConsumerStats(clock=lambda: now[0])
    other = MessageQueue("T", "broker-a", 2)
    now[0] = 1030.0  # 30 s after the start: rates over 30 s
    stats.pulling(MQ)
    stats.pulled(MQ, 10.0, 32)
    stats.pulling(other)
    stats.pulled(other, 20.0, 28)
    stats.pulled(MQ, 400.0, 0)  # a long poll that found nothing: no pull time, no rate
    stats.consumed(MQ, 4.0, 30, True)
    stats.consumed(other, 8.0, 3, False)
    status = stats.status("T")
    assert status == ConsumeStatus(15.0, 2.0, 6.0, 1.0, 0.1, 3)
    assert stats.last_pull(MQ) == 1_030_000 and stats.last_consume(other) == 1_030_000
    assert stats.status("Unknown") == ConsumeStatus()
    now[0] = 1200.0  # the minute has passed; the failures stay for the hour
    assert stats.status("T") == ConsumeStatus(consume_failed_msgs=3)
    now[0] = 1030.0 + 3600.0 + 60.0
    assert stats.status("T").consume_failed_msgs == 0
    stats.forget(MQ)
    assert stats.last_pull(MQ) == 0


def test_properties_name_rocketmqs_settings_and_figures() -> None:
    props = diagnostics.consumer_properties(
        ConsumerConfig(pull_batch_size=16),
        group="cg",
        message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_type="CONSUME_PASSIVELY",
        namesrv_addrs=["10.0.0.1:9876", "10.0.0.2:9876"],
        client_id="10.0.0.3@77#0",
        started_ms=1700000000000,
    )
    assert props["pullBatchSize"] == "16" and props["consumeThreadMax"] == "20"
    assert props["allocateMessageQueueStrategy"] == "AVG" and props["enableMsgTrace"] == "false"
    assert props["consumerGroup"] == "cg" and props["messageModel"] == "CLUSTERING"
    assert props["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    assert props[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
    assert props[PROP_CONSUMER_START_TIMESTAMP] == "1700000000000"
    assert props[PROP_NAMESERVER_ADDR] == "10.0.0.1:9876;10.0.0.2:9876;"
    assert props[PROP_CLIENT_VERSION] == RocketqVersion.describe(RocketqVersion.CURRENT)
    assert props["clientIP"] == "10.0.0.3" and props["language"] == "PYTHON"
    assert list(props) == sorted(props)
    subs = diagnostics.subscription_set({"T": MessageSelector.sql("a > 1")})
    assert subs == (SubscriptionData("T", "a > 1", "SQL92"),)


async def test_the_thread_dump_shows_threads_and_tasks() -> None:
    started = threading.Event()
    stop = threading.Event()

    def parked() -> None:
        started.set()
        stop.wait(10)

    thread = threading.Thread(target=parked, name="parked-thread", daemon=True)
    thread.start()
    started.wait(5)

    async def sleeper() -> None:
        await asyncio.sleep(10)

    task = asyncio.ensure_future(sleeper())
    task.set_name("sleeping-task")
    await asyncio.sleep(0)
    try:
        dump = diagnostics.thread_dump()
    finally:
        stop.set()
        task.cancel()
    assert '"parked-thread" daemon tid=' in dump and "in parked" in dump
    assert '"MainThread"' in dump
    assert 'task "sleeping-task"' in dump and "in sleeper" in dump
