"""Rebalancing, restarts and broker loss on real processes."""

from __future__ import annotations

import asyncio
import collections
import signal

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
)
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until


async def make_topic(namesrv: str, topic: str, queues: int) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def consumer(ns: str, group: str, topic: str, sink: list[MessageExt]) -> PushConsumer:
    c = PushConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval=1.0)
    c.subscribe(topic, "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        sink.extend(msgs)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    return c


async def test_two_consumers_split_eight_queues_and_resplit(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Split", 8)
    got: list[MessageExt] = []
    c1, c2 = consumer(ns, "cg-split", "Split", got), consumer(ns, "cg-split", "Split", got)
    await c1.start()
    await c2.start()
    try:

        def owned(c: PushConsumer) -> int:
            return len([m for m in c.process_queues if m.topic == "Split"])

        await wait_until(lambda: owned(c1) == 4 and owned(c2) == 4, "a 4/4 split")
        assert not set(c1.process_queues) & set(c2.process_queues)
        async with Producer("pg", ns) as producer:
            for i in range(80):
                await producer.send(Message("Split", b"s%d" % i))
            await wait_until(lambda: len({m.body for m in got}) >= 80, "80 consumed")
            await c2.shutdown()
            await wait_until(lambda: owned(c1) == 8, "c1 taking all 8 queues")
            for i in range(80, 160):
                await producer.send(Message("Split", b"s%d" % i))
        await wait_until(lambda: len({m.body for m in got}) >= 160, "160 consumed")
    finally:
        await c1.shutdown()
        await c2.shutdown()
    counts = collections.Counter(m.body for m in got)
    assert set(counts) == {b"s%d" % i for i in range(160)}  # nothing lost


async def test_offsets_survive_consumer_and_broker_restarts(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Durable", 4)
    got: list[MessageExt] = []
    async with Producer("pg", ns) as producer:
        for i in range(30):
            await producer.send(Message("Durable", b"d%d" % i))
    c = consumer(ns, "cg-durable", "Durable", got)
    await c.start()
    await wait_until(lambda: len({m.body for m in got}) >= 30, "30 consumed")
    await c.shutdown()  # commits offsets
    broker = cluster.brokers[0].name
    cluster.restart(broker)  # SIGTERM + start: offsets persisted at stop
    async with Producer("pg", ns) as producer:
        for i in range(30, 40):
            await producer.send(Message("Durable", b"d%d" % i))
    later: list[MessageExt] = []
    c = consumer(ns, "cg-durable", "Durable", later)
    await c.start()
    try:
        await wait_until(lambda: len({m.body for m in later}) >= 10, "10 new consumed")
        await asyncio.sleep(0.5)  # room for a wrong redelivery to show up
    finally:
        await c.shutdown()
    assert {m.body for m in later} == {b"d%d" % i for i in range(30, 40)}


async def test_sigkilled_sync_flush_broker_loses_no_acknowledged_message(
    make_cluster: MakeCluster,
) -> None:
    c = make_cluster(broker_settings={"flush_disk_type": "SYNC_FLUSH"})
    ns = c.namesrv_addr
    await make_topic(ns, "Safe", 4)
    acked: list[bytes] = []
    async with Producer("pg", ns, send_timeout=3.0) as producer:

        async def sender(w: int) -> None:
            for i in range(10_000):
                try:
                    r = await producer.send(Message("Safe", b"w%d-%d" % (w, i)))
                except Exception:
                    return
                if r.status is SendStatus.SEND_OK:
                    acked.append(b"w%d-%d" % (w, i))

        tasks = [asyncio.ensure_future(sender(w)) for w in range(4)]
        await wait_until(lambda: len(acked) >= 300, "300 acknowledged sends")
        c.kill(c.brokers[0].name, signal.SIGKILL)
        await asyncio.gather(*tasks)
    c.restart(c.brokers[0].name)
    got: list[MessageExt] = []
    cons = consumer(ns, "cg-safe", "Safe", got)
    await cons.start()
    try:
        await wait_until(
            lambda: set(acked) <= {m.body for m in got},
            lambda: (
                f"every acked message: {len(set(acked) - {m.body for m in got})} of "
                f"{len(acked)} missing; consuming {sorted(cons.process_queues)}"
            ),
            timeout=30,
        )
    finally:
        await cons.shutdown()


async def test_producer_moves_to_the_other_broker_when_one_dies(
    make_cluster: MakeCluster,
) -> None:
    c = make_cluster(brokers=2)
    ns = c.namesrv_addr
    await make_topic(ns, "TwoBrokers", 4)
    async with Admin(ns) as admin:
        brokers: set[str] = set()

        async def refresh() -> None:
            route = await admin.topic_route("TwoBrokers")
            brokers.update(q.broker_name for q in route.queue_datas)

        for _ in range(100):  # both brokers register the new topic within moments
            await refresh()
            if len(brokers) == 2:
                break
            await asyncio.sleep(0.05)
    async with Producer("pg", ns, send_timeout=10.0) as producer:
        first = {
            (await producer.send(Message("TwoBrokers", b"x"))).queue.broker_name for _ in range(16)
        }
        assert first == {"broker-a", "broker-b"}
        c.kill("broker-a-0", signal.SIGKILL)
        results = []
        for i in range(20):
            start = asyncio.get_running_loop().time()
            r = await producer.send(Message("TwoBrokers", b"after %d" % i))
            assert asyncio.get_running_loop().time() - start < 10
            results.append(r)
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert all(r.queue.broker_name == "broker-b" for r in results[-10:])
