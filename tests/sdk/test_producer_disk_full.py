"""A broker that refuses a send for a full disk answers code 14 (SERVICE_NOT_AVAILABLE):
the producer counts it retriable and sends again on another broker."""

from __future__ import annotations

from typing import Any

from rocketq.common.exceptions import ServiceNotAvailableError, for_code
from rocketq.common.message import Message, MessageQueue
from rocketq.remoting.route_data import BrokerData, QueueData, TopicRouteData
from rocketq.sdk.producer import Producer, SendResult, SendStatus

REMARK = (
    "service not available now. It may be caused by one of the following reasons: the "
    "broker's disk is full [CL:  0.93 CQ:  0.93 INDEX:  0.93], messages are put to the "
    "slave, message store has been shut down, etc."
)


class Routes:
    async def route(self, topic: str) -> TopicRouteData:
        return TopicRouteData(
            queue_datas=[QueueData("broker-a", 1, 1, 6), QueueData("broker-b", 1, 1, 6)],
            broker_datas=[
                BrokerData("c", "broker-a", {0: "10.0.0.1:10911"}),
                BrokerData("c", "broker-b", {0: "10.0.0.2:10911"}),
            ],
        )


async def test_a_full_broker_s_refusal_is_sent_again_to_another_broker() -> None:
    refusal = for_code(14)(REMARK)  # what the client makes of the broker's answer
    assert isinstance(refusal, ServiceNotAvailableError) and refusal.retriable
    producer = Producer("pg", "127.0.0.1:1", retry_times_when_send_failed=2)
    producer.client.nameserver = Routes()  # type: ignore[assignment]
    producer._running = True
    tried: list[str] = []

    async def send_to(enc: Any, mq: MessageQueue, timeout: float) -> SendResult:
        tried.append(mq.broker_name)
        if len(tried) == 1:
            raise for_code(14)(REMARK)
        return SendResult(SendStatus.SEND_OK, "id", "oid", mq, 0, ["id"], ["oid"])

    producer._send_to = send_to  # type: ignore[method-assign]
    result = await producer.send(Message("T", b"x"), timeout=5.0)
    assert result.status is SendStatus.SEND_OK
    assert len(tried) == 2 and tried[1] != tried[0]
