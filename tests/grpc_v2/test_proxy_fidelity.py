"""The v2 endpoint answers as RocketMQ 5's proxy does, field by field: the settings each
client type gets back (GrpcClientSettingsManager), each system property of a received
message (GrpcConverter.buildMessage), and a receive that takes from every queue of the
broker whichever queue the client named (ReceiveMessageActivity, queue -1)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from rocketq.broker.broker import Broker
from rocketq.broker.grpc_v2 import convert as v2
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as sv
from rocketq.broker.grpc_v2 import service_pb2_grpc
from rocketq.broker.subscription_group import SubscriptionGroupConfig
from rocketq.common.message import TopicConfig
from rocketq.common.record import decode_record, encode_host, encode_properties, encode_record
from tests.grpc_v2.test_official_client import running_broker
from tests.integration.waiting import wait_until

TOPIC = "FidelityV5"
META = [("x-mq-client-id", "fidelity-client-1"), ("x-mq-language", "JAVA")]


@pytest.fixture
async def stub(
    tmp_path: Path,
) -> AsyncIterator[tuple[Broker, service_pb2_grpc.MessagingServiceStub]]:
    async with running_broker(tmp_path) as b:
        assert b.grpc is not None
        b.topics.update(TopicConfig(TOPIC, 4, 4))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.grpc.port}") as channel:
            yield b, service_pb2_grpc.MessagingServiceStub(channel)


async def _settings(stub: service_pb2_grpc.MessagingServiceStub, asked: d.Settings) -> d.Settings:
    call = stub.Telemetry(metadata=META)
    await call.write(sv.TelemetryCommand(settings=asked))
    reply = await call.read()
    call.cancel()
    assert reply.status.code == d.Code.OK, reply.status
    return reply.settings


async def test_each_client_type_gets_the_proxys_settings(
    stub: tuple[Broker, service_pb2_grpc.MessagingServiceStub],
) -> None:
    b, s = stub
    timeout = d.Settings().request_timeout
    timeout.FromSeconds(3)
    producer = await _settings(
        s,
        d.Settings(
            client_type=d.ClientType.PRODUCER,
            request_timeout=timeout,
            publishing=d.Publishing(topics=[d.Resource(name=TOPIC)], max_body_size=1 << 27),
            metric=d.Metric(on=True),
        ),
    )
    # The producer's retry policy (ProxyConfig: 3 attempts, 10 ms doubling to 1 s), the
    # broker's size limit, type validation on, metrics off; its own timeout kept.
    policy = producer.backoff_policy
    assert policy.max_attempts == 3 and policy.WhichOneof("strategy") == "exponential_backoff"
    assert policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert policy.exponential_backoff.max.ToMilliseconds() == 1000
    assert policy.exponential_backoff.multiplier == 2.0
    assert producer.publishing.max_body_size == b.store_config.max_message_size == 4 << 20
    assert producer.publishing.validate_message_type is True
    assert producer.request_timeout.ToSeconds() == 3
    assert producer.metric.on is False and not producer.metric.HasField("endpoints")

    b.groups.update(SubscriptionGroupConfig("fidelity-fifo", retry_max_times=4,
                                            consume_message_orderly=True))  # fmt: skip
    for kind, group, fifo, attempts in (
        (d.ClientType.PUSH_CONSUMER, "fidelity-push", False, 17),
        (d.ClientType.SIMPLE_CONSUMER, "fidelity-simple", False, 17),
        (d.ClientType.PUSH_CONSUMER, "fidelity-fifo", True, 5),
    ):
        asked = d.Settings(
            client_type=kind,
            subscription=d.Subscription(
                group=d.Resource(name=group),
                subscriptions=[
                    d.SubscriptionEntry(
                        topic=d.Resource(name=TOPIC),
                        expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
                    )
                ],
            ),
        )
        asked.subscription.long_polling_timeout.FromSeconds(30)
        got = await _settings(s, asked)
        sub = got.subscription
        assert (sub.fifo, sub.receive_batch_size) == (fifo, 32)
        assert sub.long_polling_timeout.ToMilliseconds() == 20_000  # the proxy's longest
        assert got.backoff_policy.max_attempts == attempts  # retry_max_times + 1
        delays = [x.ToMilliseconds() for x in got.backoff_policy.customized_backoff.next]
        assert delays[:5] == [1000, 5000, 10_000, 30_000, 60_000] and delays[-1] == 7_200_000
        assert len(delays) == 18 and got.metric.on is False


async def _send(
    s: service_pb2_grpc.MessagingServiceStub, message: d.Message
) -> sv.SendMessageResponse:
    return await s.SendMessage(sv.SendMessageRequest(messages=[message]), metadata=META)


def _message(body: bytes, **system: object) -> d.Message:
    sp = d.SystemProperties(
        message_id=f"01{hashlib.md5(body).hexdigest()[:32].upper()}",
        message_type=d.MessageType.NORMAL,
        body_encoding=d.Encoding.IDENTITY,
        **system,  # type: ignore[arg-type]
    )
    sp.born_timestamp.FromMilliseconds(1_700_000_000_123)
    return d.Message(
        topic=d.Resource(name=TOPIC), body=body, system_properties=sp,
        user_properties={"origin": "v5", "__SHARDINGKEY_NOT": "x"},
    )  # fmt: skip


async def _receive(
    s: service_pb2_grpc.MessagingServiceStub, group: str, queue: int, want: int, wait_s: float = 5
) -> list[d.Message]:
    """Receive (naming ``queue``) until ``want`` messages came or ``wait_s`` passed."""
    got: list[d.Message] = []
    deadline = time.monotonic() + wait_s
    while len(got) < want and time.monotonic() < deadline:
        request = sv.ReceiveMessageRequest(
            group=d.Resource(name=group),
            message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=queue),
            filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
            batch_size=32,
        )
        request.invisible_duration.FromSeconds(30)
        request.long_polling_timeout.FromSeconds(1)
        async for answer in s.ReceiveMessage(request, metadata=META, timeout=10):
            if answer.HasField("message"):
                got.append(answer.message)
    return got


async def test_each_system_property_is_written_as_the_proxy_writes_it(
    stub: tuple[Broker, service_pb2_grpc.MessagingServiceStub],
) -> None:
    b, s = stub
    plain = _message(b"plain", tag="TagA", keys=["k1", "k2"], born_host="10.1.2.3",
                     trace_context="00-trace-01")  # fmt: skip
    fifo = _message(b"fifo", message_group="orders-1")
    fifo.system_properties.message_type = d.MessageType.FIFO
    delayed = _message(b"delayed")
    delayed.system_properties.message_type = d.MessageType.DELAY
    due_ms = int(time.time() * 1000) + 1500
    delayed.system_properties.delivery_timestamp.FromMilliseconds(due_ms)
    for m in (plain, fifo, delayed):
        answer = await _send(s, m)
        assert answer.status.code == d.Code.OK, answer.status
    got = {m.body: m for m in await _receive(s, "fidelity-fields", 0, 3)}
    assert set(got) == {b"plain", b"fifo", b"delayed"}
    one = got[b"plain"].system_properties
    assert one.message_id == plain.system_properties.message_id
    assert one.tag == "TagA" and list(one.keys) == ["k1", "k2"]
    assert one.body_digest.type == d.DigestType.MD5
    assert one.body_digest.checksum == hashlib.md5(b"plain").hexdigest().upper()
    assert one.body_encoding == d.Encoding.IDENTITY
    assert one.message_type == d.MessageType.NORMAL
    assert one.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert one.born_host == "10.1.2.3"  # as the producer named it
    assert abs(one.store_timestamp.ToMilliseconds() - time.time() * 1000) < 30_000
    assert one.store_host.endswith(f":{b.port}")
    assert one.HasField("queue_offset") and 0 <= one.queue_id < 4
    assert one.delivery_attempt == 1 and one.invisible_duration.ToSeconds() == 30
    assert one.receipt_handle and one.trace_context == "00-trace-01"
    assert not one.HasField("message_group") and not one.HasField("delivery_timestamp")
    assert not one.HasField("dead_letter_queue")
    # User properties: what RocketMQ does not keep for itself (MessageConst.STRING_HASH_SET).
    assert dict(got[b"plain"].user_properties) == {
        "origin": "v5", "__SHARDINGKEY_NOT": "x", "TRACE_CONTEXT": "00-trace-01",
    }  # fmt: skip
    two = got[b"fifo"].system_properties
    assert two.message_type == d.MessageType.FIFO and two.message_group == "orders-1"
    three = got[b"delayed"].system_properties
    assert three.message_type == d.MessageType.DELAY
    assert three.delivery_timestamp.ToMilliseconds() == due_ms
    # A user property named as one of RocketMQ's own is refused.
    bad = _message(b"bad")
    bad.user_properties["UNIQ_KEY"] = "mine"
    answer = await _send(s, bad)
    assert answer.status.code == d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, answer.status


def test_a_half_message_and_a_dead_letter_read_as_the_proxy_writes_them() -> None:
    def stored(props: dict[str, str], sys_flag: int = 0) -> d.Message:
        record = encode_record(
            topic=b"T", body=b"b", properties=encode_properties(props),
            born_timestamp=1, born_host=encode_host("10.9.8.7:4321"), sys_flag=sys_flag,
        )  # fmt: skip
        return v2.message(decode_record(record), 0)

    # A compressed body (sys flag 1) is sent as stored, marked GZIP for the client.
    assert stored({}, sys_flag=1).system_properties.body_encoding == d.Encoding.GZIP
    assert stored({}).system_properties.body_encoding == d.Encoding.IDENTITY

    half = stored({"TRAN_MSG": "true", "__SHARDINGKEY": "g", "UNIQ_KEY": "ID1"})
    assert half.system_properties.message_type == d.MessageType.TRANSACTION
    assert half.system_properties.message_group == "g"
    # Delay wins over FIFO, as in the proxy; the born host without its port.
    timed = stored({"TIMER_DELAY_SEC": "10", "__SHARDINGKEY": "g"})
    assert timed.system_properties.message_type == d.MessageType.DELAY
    due = timed.system_properties.delivery_timestamp.ToMilliseconds()
    assert abs(due - (time.time() * 1000 + 10_000)) < 5_000
    assert timed.system_properties.born_host == "10.9.8.7"
    dead = stored({"DLQ_ORIGIN_TOPIC": "Orders", "DLQ_ORIGIN_MESSAGE_ID": "ID2"})
    assert dead.system_properties.dead_letter_queue.topic == "Orders"
    assert dead.system_properties.dead_letter_queue.message_id == "ID2"
    assert dict(dead.user_properties) == {}
    only_topic = stored({"DLQ_ORIGIN_TOPIC": "Orders"})
    assert not only_topic.system_properties.HasField("dead_letter_queue")


async def test_a_receive_takes_from_every_queue_whichever_it_names(
    stub: tuple[Broker, service_pb2_grpc.MessagingServiceStub],
) -> None:
    b, s = stub
    for i in range(40):  # spread over the 4 queues
        answer = await _send(s, _message(f"m-{i}".encode()))
        assert answer.status.code == d.Code.OK
    assert all(b.store.max_offset_in_queue(TOPIC, q) == 10 for q in range(4))
    # One receive naming queue 2 takes a whole batch, from every queue.
    first = await _receive(s, "fidelity-all", 2, 1)
    assert len(first) == 32 and {m.system_properties.queue_id for m in first} == {0, 1, 2, 3}
    rest = await _receive(s, "fidelity-all", 0, 8)
    assert sorted(m.body for m in first + rest) == sorted(f"m-{i}".encode() for i in range(40))
    # The long poll watches every queue: a message sent to queue 3 ends a receive naming 0.
    waiting = asyncio.ensure_future(_receive(s, "fidelity-all", 0, 1, wait_s=8))
    await wait_until(lambda: b.holds.held_count >= 4, "the receive holding every queue")
    for _ in range(4):
        await _send(s, _message(b"late"))
    assert [m.body for m in await waiting][:1] == [b"late"]


async def test_a_receive_polls_as_long_as_the_proxy_and_refuses_a_bad_invisible_time(
    tmp_path: Path,
) -> None:
    # The pull's longest suspension is short here: a v2 receive still polls for as long as
    # it asks, up to the proxy's 20 s.
    async with running_broker(tmp_path, long_polling_max_suspend_millis=200) as b:
        assert b.grpc is not None
        b.topics.update(TopicConfig(TOPIC, 2, 2))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.grpc.port}") as channel:
            s = service_pb2_grpc.MessagingServiceStub(channel)

            def request(invisible_ms: int) -> sv.ReceiveMessageRequest:
                r = sv.ReceiveMessageRequest(
                    group=d.Resource(name="fidelity-poll"),
                    message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=0),
                    filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
                    batch_size=8,
                )
                r.invisible_duration.FromMilliseconds(invisible_ms)
                r.long_polling_timeout.FromMilliseconds(1500)
                return r

            started = time.monotonic()
            answers = [a async for a in s.ReceiveMessage(request(30_000), metadata=META)]
            assert answers[0].status.code == d.Code.MESSAGE_NOT_FOUND
            assert time.monotonic() - started >= 1.4
            for bad in (0, 12 * 3600 * 1000 + 1):
                answers = [a async for a in s.ReceiveMessage(request(bad), metadata=META)]
                assert answers[0].status.code == d.Code.ILLEGAL_INVISIBLE_TIME, answers[0]
                assert answers[-1].HasField("delivery_timestamp")
