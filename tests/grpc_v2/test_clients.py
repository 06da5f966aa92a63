"""v5 clients as the broker lists them: a consumer's heartbeat puts it in its group's
client list (consume type CONSUME_POP), the metrics count producers and consumers by their
own language and protocol grpc, and NotifyClientTermination takes a consumer out."""

from __future__ import annotations

from pathlib import Path

import grpc

from rocketq.broker.broker import Broker
from rocketq.broker.client_channels import client_channels
from rocketq.broker.consumer_manager import CONSUME_POP
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as sv
from rocketq.broker.grpc_v2 import service_pb2_grpc
from tests.grpc_v2.test_official_client import running_broker
from tests.integration.waiting import wait_until


def _gauge(b: Broker, name: str, **labels: str) -> float:
    assert b.metrics_server is not None
    base = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
    return b.metrics_server.registry.get_sample_value(name, {**base, **labels}) or 0.0


async def test_v5_clients_are_listed_and_counted_by_language(tmp_path: Path) -> None:
    async with running_broker(tmp_path, metrics_port=None) as b:  # a free port
        assert b.grpc is not None and b.metrics_server is not None
        meta = [("x-mq-client-id", "go-consumer-1"), ("x-mq-language", "GOLANG")]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.grpc.port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            beat = await stub.Heartbeat(
                sv.HeartbeatRequest(
                    group=d.Resource(name="v5-listed"), client_type=d.ClientType.SIMPLE_CONSUMER
                ),
                metadata=meta,
            )
            assert beat.status.code == d.Code.OK
            info = b.consumers.groups["v5-listed"]
            assert list(info.clients) == ["go-consumer-1"] and info.consume_type == CONSUME_POP
            assert info.client_addrs["go-consumer-1"] == "127.0.0.1"
            consumers = {
                "consumer_group": "v5-listed", "language": "golang", "consume_mode": "pop",
                "protocol_type": "grpc", "is_system": "false",
            }  # fmt: skip
            assert _gauge(b, "rocketmq_consumer_connections", **consumers) == 1

            # A producer's Telemetry settings register it for its topics.
            settings = d.Settings(
                client_type=d.ClientType.PRODUCER,
                publishing=d.Publishing(topics=[d.Resource(name="V5Listed")]),
            )
            producer_meta = [("x-mq-client-id", "java-producer-1"), ("x-mq-language", "JAVA")]
            call = stub.Telemetry(metadata=producer_meta)
            await call.write(sv.TelemetryCommand(settings=settings))
            reply = await call.read()
            assert reply.status.code == d.Code.OK
            producers = {"language": "java", "protocol_type": "grpc"}
            assert _gauge(b, "rocketmq_producer_connections", **producers) == 1
            await call.done_writing()
            assert await call.read() == grpc.aio.EOF  # the stream ends: the producer is gone
            await wait_until(
                lambda: _gauge(b, "rocketmq_producer_connections", **producers) == 0,
                "the producer gone",
            )

            gone = await stub.NotifyClientTermination(
                sv.NotifyClientTerminationRequest(group=d.Resource(name="v5-listed")),
                metadata=meta,
            )
            assert gone.status.code == d.Code.OK
            assert "v5-listed" not in b.consumers.groups
            assert _gauge(b, "rocketmq_consumer_connections", **consumers) == 0


async def test_admin_calls_reach_a_v5_consumer_over_its_telemetry_stream(tmp_path: Path) -> None:
    """`rocketq admin consumer-running-info --jstack` and consume-message-directly of a
    v5 consumer: the broker asks it over its Telemetry stream (PrintThreadStackTrace,
    VerifyMessage) and answers the admin with what it said; its connection is listed with
    its language."""
    import asyncio

    from rocketq import Message, Producer
    from rocketq.common.message import TopicConfig
    from rocketq.sdk.admin import Admin

    async with running_broker(tmp_path) as b:
        assert b.grpc is not None
        b.topics.update(TopicConfig("V5Calls", 1, 1))
        namesrv = b.config.namesrv_addr
        meta = [
            ("x-mq-client-id", "go-push-1"), ("x-mq-language", "GOLANG"),
            ("x-mq-client-version", "5.0.9"),
        ]  # fmt: skip
        settings = d.Settings(
            client_type=d.ClientType.PUSH_CONSUMER,
            subscription=d.Subscription(
                group=d.Resource(name="v5-calls"),
                subscriptions=[
                    d.SubscriptionEntry(
                        topic=d.Resource(name="V5Calls"),
                        expression=d.FilterExpression(type=d.FilterType.TAG, expression="TagA"),
                    )
                ],
            ),
        )
        verified: list[bytes] = []
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.grpc.port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            call = stub.Telemetry(metadata=meta)
            await call.write(sv.TelemetryCommand(settings=settings))
            assert (await call.read()).status.code == d.Code.OK

            async def answer_calls() -> None:  # what a Java or Go client does
                while True:
                    command = await call.read()
                    if command == grpc.aio.EOF:
                        return
                    if command.HasField("print_thread_stack_trace_command"):
                        nonce = command.print_thread_stack_trace_command.nonce
                        trace = sv.ThreadStackTrace(nonce=nonce, thread_stack_trace="main: run")
                        await call.write(
                            sv.TelemetryCommand(status=d.Status(code=d.Code.OK),
                                                thread_stack_trace=trace)
                        )  # fmt: skip
                    elif command.HasField("verify_message_command"):
                        verify = command.verify_message_command
                        verified.append(verify.message.body)
                        await call.write(
                            sv.TelemetryCommand(
                                status=d.Status(code=d.Code.OK),
                                verify_message_result=sv.VerifyMessageResult(nonce=verify.nonce),
                            )
                        )

            answering = asyncio.ensure_future(answer_calls())
            try:
                async with Producer("pg-calls", namesrv) as producer:
                    sent = await producer.send(Message("V5Calls", b"check me", tags="TagA"))
                async with Admin(namesrv) as admin:
                    [conn] = await admin.consumer_connections("v5-calls")
                    assert conn.client_id == "go-push-1" and conn.consume_type == "CONSUME_POP"
                    info = await admin.consumer_running_info("v5-calls", "go-push-1", jstack=True)
                    assert info.jstack == "main: run"
                    assert info.properties["PROP_CLIENT_LANGUAGE"] == "GOLANG"
                    assert info.properties["PROP_CLIENT_VERSION"] == "5.0.9"
                    assert [(s.topic, s.expression) for s in info.subscriptions] == [
                        ("V5Calls", "TagA")
                    ]
                    result = await admin.consume_message_directly(
                        "v5-calls", "go-push-1", sent.offset_msg_id
                    )
                    assert result.consume_result == "CR_SUCCESS"
                    assert verified == [b"check me"]
            finally:
                await call.done_writing()
                await asyncio.wait_for(answering, 10)
        await wait_until(lambda: "go-push-1" not in client_channels(b.consumers).remote, "gone")


async def test_a_v5_client_that_does_not_answer_times_out_and_a_closed_one_fails() -> None:
    import pytest

    from rocketq.broker.grpc_v2.client_calls import ClientCalls
    from rocketq.common.exceptions import RequestTimeoutError
    from rocketq.remoting.codes import RequestCode, ResponseCode
    from rocketq.remoting.command import RemotingCommand

    written: list[sv.TelemetryCommand] = []

    async def write(command: sv.TelemetryCommand) -> None:
        written.append(command)

    calls = ClientCalls("py-1", write, lambda m: d.Message(), lambda: ("python", "5.1.2"))
    ask = RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, {"jstackEnable": "true"})
    with pytest.raises(RequestTimeoutError, match=r"did not answer within 0\.2 s"):
        await calls.call(ask, 0.2)
    assert written[0].HasField("print_thread_stack_trace_command")
    plain = await calls.call(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, {}), 0.2)
    assert plain.code == ResponseCode.SUCCESS and b'"PROP_CONSUME_TYPE":"CONSUME_POP"' in (
        plain.body or b""
    )
    other = await calls.call(RemotingCommand(RequestCode.PULL_MESSAGE, {}), 0.2)
    assert other.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert not calls.answered(sv.TelemetryCommand(settings=d.Settings()))
