"""Which error a send meets when its topic has no queue to send to: an unknown topic with
no template to create it from is TopicNotExistError; a topic that exists while the masters
of its brokers are down is ServiceNotAvailableError (retriable), not TopicNotExistError."""

from __future__ import annotations

import pytest

from rocketq.common.exceptions import (
    NoPermissionError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from rocketq.common.message import AUTO_CREATE_TOPIC_KEY_TOPIC, PERM_READ, Message
from rocketq.remoting.route_data import BrokerData, QueueData, TopicRouteData
from rocketq.sdk.producer import Producer


def route(*, master: bool, perm: int = 6) -> TopicRouteData:
    addrs = {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"} if master else {1: "10.0.0.2:10911"}
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, perm)],
        broker_datas=[BrokerData("c", "broker-a", addrs)],
    )


class Routes:
    """A nameserver that knows the routes of a table and no other topic."""

    def __init__(self, table: dict[str, TopicRouteData]) -> None:
        self.table = table

    async def route(self, topic: str) -> TopicRouteData:
        if topic not in self.table:
            raise TopicNotExistError(f"no route for topic {topic!r}")
        return self.table[topic]


async def send_with(table: dict[str, TopicRouteData]) -> None:
    producer = Producer("pg", "127.0.0.1:1", retry_times_when_send_failed=0)
    producer.client.nameserver = Routes(table)  # type: ignore[assignment]
    producer._running = True
    await producer.send(Message("T", b"x"), timeout=1.0)


async def test_a_topic_whose_master_is_down_is_not_a_missing_topic() -> None:
    with pytest.raises(ServiceNotAvailableError, match=r"topic 'T' exists.*broker-a") as caught:
        await send_with({"T": route(master=False)})
    assert not isinstance(caught.value, TopicNotExistError)
    assert caught.value.retriable


async def test_an_unknown_topic_without_a_template_is_a_missing_topic() -> None:
    with pytest.raises(TopicNotExistError, match=r"topic 'T' does not exist.*update-topic"):
        await send_with({})


async def test_an_unknown_topic_whose_template_has_no_master_is_unavailable() -> None:
    with pytest.raises(ServiceNotAvailableError, match=AUTO_CREATE_TOPIC_KEY_TOPIC):
        await send_with({AUTO_CREATE_TOPIC_KEY_TOPIC: route(master=False)})


async def test_a_topic_with_no_writable_queue_is_refused_for_permission() -> None:
    with pytest.raises(NoPermissionError, match="no writable queue"):
        await send_with({"T": route(master=True, perm=PERM_READ)})
