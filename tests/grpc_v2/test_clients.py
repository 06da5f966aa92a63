"""v5 clients as the broker lists them: a consumer's heartbeat puts it in its group's
client list (consume type CONSUME_POP), the metrics count producers and consumers by their
own language and protocol grpc, and NotifyClientTermination takes a consumer out."""

from __future__ import annotations

from pathlib import Path

import grpc

from rocketq.broker.broker import Broker
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
