"""SQL92 filters on real processes: the broker runs the condition on each message's
properties during pulls; brokers that do not filter by SQL92 make the consumer's start
fail with the reason; a bad expression is refused at subscribe time with its position."""

from __future__ import annotations

import pytest

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    MessageSelector,
    Producer,
    PushConsumer,
)
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import SubscriptionParseFailedError
from rocketq.sdk.admin import Admin
from rocketq.sdk.pull_consumer import PullConsumer
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until

SQL_ON = {"enable_property_filter": "true"}


async def fill(ns: str) -> None:
    async with Admin(ns) as admin:
        await admin.update_topic("Priced", read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg-sql", ns) as producer:
        for i in range(20):
            tags = "big" if i % 2 else "small"
            props = {"price": str(i)} if i != 7 else {}  # one without a price
            await producer.send(Message("Priced", b"item %d" % i, tags=tags, properties=props))


async def test_sql92_subscription_gets_only_matching_messages(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(broker_settings=SQL_ON)
    ns = cluster.namesrv_addr
    await fill(ns)
    got: list[MessageExt] = []
    c = PushConsumer("cg-sql", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    c.subscribe("Priced", MessageSelector.sql("price >= 10 AND TAGS = 'big' OR price IS NULL"))

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    await c.start()
    expected = [b"item 7", b"item 11", b"item 13", b"item 15", b"item 17", b"item 19"]
    try:
        await wait_until(lambda: len(got) >= len(expected), "the matching messages")
    finally:
        await c.shutdown()
    assert sorted(m.body for m in got) == sorted(expected)
    puller = PullConsumer("cg-sql-pull", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    puller.subscribe("Priced", MessageSelector.sql("price BETWEEN 3 AND 4"))
    await puller.start()
    polled: list[MessageExt] = []
    try:
        for _ in range(20):
            polled += await puller.poll(timeout=0.5)
            if len(polled) >= 2:
                break
    finally:
        await puller.shutdown()
    assert sorted(m.body for m in polled) == [b"item 3", b"item 4"]


async def test_broker_without_sql92_fails_the_start(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await fill(ns)
    c = PushConsumer("cg-nosql", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    c.subscribe("Priced", MessageSelector.sql("price > 1"))
    c.on_message(lambda msgs: ConsumeResult.SUCCESS)
    with pytest.raises(SubscriptionParseFailedError, match="enable_property_filter"):
        await c.start()


def test_bad_expression_is_refused_at_subscribe_time() -> None:
    with pytest.raises(SubscriptionParseFailedError, match="position 9"):
        MessageSelector.sql("price > ")
    c = PushConsumer("g", "127.0.0.1:9876")
    with pytest.raises(SubscriptionParseFailedError, match="position"):
        c.subscribe("T", MessageSelector("price >> 1", "SQL92"))
