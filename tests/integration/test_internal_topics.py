"""Clients cannot send into the broker's internal topics: the delay and timer topics, the
transaction topics and the groups' retry and dead-letter topics are refused by the SDK and,
for clients that skip its check, by the broker, with NO_PERMISSION naming the topic;
nothing is stored. The trace topic takes sends from trace writers only."""

from __future__ import annotations

import pytest

from rocketq import Message, Producer
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.message import (
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRACE_PRODUCER_GROUP,
    TRACE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    dlq_topic,
    retry_topic,
    send_forbidden_reason,
)
from rocketq.errors import NoPermissionError, TopicNotExistError
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.transport import request_once
from rocketq.sdk.admin import Admin
from rocketq.sdk.wire import send_request

# Each internal topic and the hint its refusal gives.
INTERNAL = {
    SCHEDULE_TOPIC: "delay_level",
    TRANS_HALF_TOPIC: "TransactionProducer",
    TRANS_OP_HALF_TOPIC: "TransactionProducer",
    TRANS_CHECK_MAX_TIME_TOPIC: "TransactionProducer",
    TIMER_TOPIC: "deliver_at",
    retry_topic("cg-orders"): "RECONSUME_LATER",
    dlq_topic("cg-orders"): "max_reconsume_times",
    TRACE_TOPIC: "enable_trace",
}


def test_the_rule() -> None:
    for topic, hint in INTERNAL.items():
        reason = send_forbidden_reason(topic, "pg")
        assert reason is not None and hint in reason, topic
    assert send_forbidden_reason(TRACE_TOPIC, TRACE_PRODUCER_GROUP) is None
    for topic in ("Orders", "RETRY", "my%RETRY%", "rmq_sys_other", "SCHEDULE_TOPIC"):
        assert send_forbidden_reason(topic, "pg") is None, topic


async def stored(ns: str, topic: str) -> int:
    async with Admin(ns) as admin:
        try:
            return sum(q.max_offset for q in await admin.topic_status(topic))
        except TopicNotExistError:  # nobody wrote it: it has no route
            return 0


async def test_the_sdk_and_the_broker_refuse_internal_topics(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    before = {topic: await stored(ns, topic) for topic in INTERNAL}
    async with Producer("pg-internal", ns) as producer:
        for topic, hint in INTERNAL.items():
            with pytest.raises(NoPermissionError, match=f"topic {topic} is forbidden.*{hint}"):
                await producer.send(Message(topic, b"x"))
        with pytest.raises(NoPermissionError, match="retry topic"):
            await producer.send_batch([Message(retry_topic("cg-orders"), b"a")] * 2)
    # A client that skips the SDK's check gets the same answer from the broker.
    for topic, hint in INTERNAL.items():
        request = send_request(b"x", "", group="pg-raw", topic=topic, queue_id=0, born_timestamp=0)
        answer = await request_once(cluster.brokers[0].addr, request, 5.0)
        assert answer.code == ResponseCode.NO_PERMISSION, (topic, answer.code, answer.remark)
        assert f"topic {topic} is forbidden" in str(answer.remark)
        assert hint in str(answer.remark)
    assert {topic: await stored(ns, topic) for topic in INTERNAL} == before


async def test_trace_writers_may_write_the_trace_topic(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    async with Producer(TRACE_PRODUCER_GROUP, ns) as writer:
        result = await writer.send(Message(TRACE_TOPIC, b'{"type": "Pub"}'))
    assert result.ok
