"""The periodic route refresh: every topic a client uses (a producer's topics first sent
through the auto-create template too), a bounded number of lookups in flight, changed
routes handed on, topics gone forgotten, a nameserver failure ending the round."""

from __future__ import annotations

import asyncio

import pytest

from rocketq.common.exceptions import NoNameServerError, TopicNotExistError
from rocketq.common.message import MessageQueue
from rocketq.remoting.route_data import BrokerData, QueueData, TopicRouteData
from rocketq.sdk.client import ROUTE_REFRESH_IN_FLIGHT
from rocketq.sdk.fault_tolerance import TopicPublishInfo
from rocketq.sdk.producer import Producer


def route(*brokers: str, queues: int = 2) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(b, queues, queues, 6) for b in brokers],
        broker_datas=[BrokerData("c", b, {0: f"{b}:1"}) for b in brokers],
    )


class FakeNameServer:
    """Answers routes from a table after a short wait, counting lookups in flight."""

    def __init__(self, table: dict[str, TopicRouteData]) -> None:
        self.table = table
        self.in_flight = 0
        self.most_in_flight = 0
        self.asked: list[str] = []
        self.down = False

    async def route(self, topic: str) -> TopicRouteData:
        self.asked.append(topic)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if self.down:
                raise NoNameServerError("no nameserver answered")
            if topic not in self.table:
                raise TopicNotExistError(f"no route for topic {topic!r}")
            return self.table[topic]
        finally:
            self.in_flight -= 1


def producer_with(table: dict[str, TopicRouteData]) -> tuple[Producer, FakeNameServer]:
    producer = Producer("pg", "127.0.0.1:1")
    fake = FakeNameServer(table)
    producer.client.nameserver = fake  # type: ignore[assignment]
    return producer, fake


async def test_every_topic_is_refreshed_with_bounded_lookups() -> None:
    table = {f"T{i}": route("a") for i in range(500)}
    producer, fake = producer_with(table)
    for topic in table:
        await producer.client.update_route(topic)
    fake.asked.clear()
    await producer.client.refresh_routes()
    assert sorted(fake.asked) == sorted(table)
    assert 1 < fake.most_in_flight <= ROUTE_REFRESH_IN_FLIGHT


async def test_a_topic_sent_through_the_template_moves_to_its_own_route() -> None:
    producer, fake = producer_with({})
    template_queues = [MessageQueue("New", "a", i) for i in range(4)]
    producer.publish["New"] = TopicPublishInfo(message_queues=list(template_queues))
    await producer.client.refresh_routes()  # not created yet: nothing changes
    assert producer.publish["New"].message_queues == template_queues
    fake.table["New"] = route("a", "b", queues=2)
    await producer.client.refresh_routes()
    assert producer.publish["New"].message_queues == [
        MessageQueue("New", "a", 0),
        MessageQueue("New", "a", 1),
        MessageQueue("New", "b", 0),
        MessageQueue("New", "b", 1),
    ]
    assert producer.client.routes["New"] == fake.table["New"]


async def test_gone_topics_are_forgotten_and_a_failure_ends_the_round() -> None:
    table = {f"T{i}": route("a") for i in range(100)}
    producer, fake = producer_with(table)
    for topic in table:
        await producer.client.update_route(topic)
    del fake.table["T5"]
    await producer.client.refresh_routes()
    assert "T5" not in producer.client.routes
    fake.down = True
    fake.asked.clear()
    with pytest.raises(NoNameServerError):
        await producer.client.refresh_routes()
    assert len(fake.asked) <= ROUTE_REFRESH_IN_FLIGHT  # one failed lookup per worker at most
