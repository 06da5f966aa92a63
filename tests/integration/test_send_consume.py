"""The core message path on real processes: send, consume, groups, tags, broadcasting,
retries and dead letters, and bad input."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import pytest

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    Producer,
    PushConsumer,
    SendStatus,
)
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import MessageIllegalError, TopicNotExistError
from rocketq.common.record import decode_records
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import connect, request_once
from rocketq.sdk.admin import Admin
from rocketq.sdk.pull_consumer import PullConsumer
from rocketq.sdk.wire import PullOutcome, batch_body, parse_pull, pull_request, send_request
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until


async def make_topic(namesrv: str, topic: str, queues: int = 4) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def collector(store: list[MessageExt], result: ConsumeResult = ConsumeResult.SUCCESS):  # type: ignore[no-untyped-def]
    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        store.extend(msgs)
        return result

    return handler


async def test_send_and_consume_every_message(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Orders")
    got: list[MessageExt] = []
    consumer = PushConsumer("cg-orders", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("Orders", "*")
    consumer.on_message(collector(got))
    async with Producer("pg", ns) as producer:
        results = [
            await producer.send(
                Message(
                    "Orders",
                    f"order-{i}".encode(),
                    tags="TagA",
                    keys=[f"k{i}"],
                    properties={"region": "eu"},
                )
            )
            for i in range(40)
        ]
        batch = await producer.send_batch([Message("Orders", b"b%d" % i) for i in range(10)])
        big = await producer.send(Message("Orders", b"z" * 10_000))  # compressed on the wire
    assert big.status is SendStatus.SEND_OK
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == 40
    assert len(batch.msg_ids) == 10 and len(set(batch.offset_msg_ids)) == 10
    await consumer.start()
    try:
        await wait_until(lambda: len(got) >= 51, "51 messages consumed")
    finally:
        await consumer.shutdown()
    bodies = collections.Counter(m.body for m in got)
    assert all(bodies[f"order-{i}".encode()] >= 1 for i in range(40))
    assert bodies[b"z" * 10_000] == 1
    first = next(m for m in got if m.body == b"order-0")
    assert first.tags == "TagA" and first.keys == ["k0"]
    assert first.user_properties() == {"region": "eu"} and first.msg_id == results[0].msg_id
    async with Admin(ns) as admin:
        by_key = await admin.query_msg_by_key("Orders", "k7")
        assert [m.body for m in by_key] == [b"order-7"]
        by_id = await admin.query_msg_by_id(results[3].offset_msg_id)
        assert by_id.body == b"order-3"


async def test_unknown_topic_is_auto_created_through_tbw102(cluster: LocalCluster) -> None:
    async with Producer("pg", cluster.namesrv_addr) as producer:
        r = await producer.send(Message("BrandNew", b"hello"))
    assert r.status is SendStatus.SEND_OK
    async with Admin(cluster.namesrv_addr) as admin:
        await wait_until_route(admin, "BrandNew")
        route = await admin.topic_route("BrandNew")
        assert route.queue_datas[0].write_queue_nums == 4


async def wait_until_route(admin: Admin, topic: str) -> None:
    for _ in range(200):
        try:
            await admin.topic_route(topic)
            return
        except TopicNotExistError:
            import asyncio

            await asyncio.sleep(0.05)
    raise AssertionError(f"no route for {topic}")


async def test_unknown_topic_without_auto_create_is_a_clear_error(
    make_cluster: MakeCluster,
) -> None:
    c = make_cluster(broker_settings={"auto_create_topic_enable": "false"})
    async with Producer("pg", c.namesrv_addr, send_timeout=3.0) as producer:
        with pytest.raises(TopicNotExistError, match=r"NoSuchTopic|TBW102"):
            await producer.send(Message("NoSuchTopic", b"x"))


async def test_tags_filter_and_two_groups_each_get_everything(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Tagged")
    a: list[MessageExt] = []
    b: list[MessageExt] = []
    ca = PushConsumer("group-a", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    ca.subscribe("Tagged", "TagA || TagB")
    ca.on_message(collector(a))
    cb = PushConsumer("group-b", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    cb.subscribe("Tagged", "*")
    cb.on_message(collector(b))
    async with Producer("pg", ns) as producer:
        for i in range(30):
            await producer.send(
                Message(
                    "Tagged",
                    b"%d" % i,
                    tags="TagABC"[0:4] if i % 3 == 0 else ("TagB" if i % 3 == 1 else "TagC"),
                )
            )
    await ca.start()
    await cb.start()
    try:
        await wait_until(lambda: len(b) >= 30 and len(a) >= 20, "both groups")
    finally:
        await ca.shutdown()
        await cb.shutdown()
    assert {m.tags for m in a} == {"TagA", "TagB"}
    assert len({m.body for m in a}) == 20
    assert len({m.body for m in b}) == 30


async def test_broadcasting_gives_every_consumer_every_message(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "News")
    seen: list[list[MessageExt]] = [[], []]
    consumers = []
    for i in range(2):
        c = PushConsumer(
            "bc",
            ns,
            model=MessageModel.BROADCASTING,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            offset_store_dir=str(tmp_path / f"offsets-{i}"),
        )
        c.subscribe("News", "*")
        c.on_message(collector(seen[i]))
        await c.start()
        consumers.append(c)
    try:
        async with Producer("pg", ns) as producer:
            for i in range(20):
                await producer.send(Message("News", b"n%d" % i))
        await wait_until(
            lambda: all(len({m.body for m in s}) >= 20 for s in seen), "both consumers got all 20"
        )
    finally:
        for c in consumers:
            await c.shutdown()
    assert (tmp_path / "offsets-0" / "bc" / "offsets.json").exists()


async def test_retry_counts_up_then_dead_letter_queue(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Flaky")
    deliveries: list[MessageExt] = []
    consumer = PushConsumer("cg-flaky", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("Flaky", "*")
    consumer.on_message(collector(deliveries, ConsumeResult.RECONSUME_LATER))
    await consumer.start()
    try:
        async with Producer("pg", ns) as producer:
            sent = await producer.send(Message("Flaky", b"always fails", keys=["flaky-1"]))
        # The original delivery + 16 retries (max_reconsume_times), then the DLQ.
        await wait_until(
            lambda: len(deliveries) >= 17,
            lambda: f"17 deliveries (have {len(deliveries)})",
            timeout=60,
        )
        async with Admin(ns) as admin:

            async def in_dlq() -> bool:
                try:
                    stats = await admin.topic_status("%DLQ%cg-flaky")
                except TopicNotExistError:
                    return False
                return sum(q.max_offset for q in stats) >= 1

            await wait_until(in_dlq, "the message to reach %DLQ%cg-flaky")
    finally:
        await consumer.shutdown()
    assert [m.reconsume_times for m in deliveries] == list(range(17))
    assert all(m.topic == "Flaky" and m.msg_id == sent.msg_id for m in deliveries)
    # Retries carry the level the delay service will use: 3 + reconsume times.
    assert [m.delay_level for m in deliveries[1:]] == [3 + i for i in range(16)]


async def test_pull_consumer_poll_commit_seek(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Pulled", queues=2)
    async with Producer("pg", ns) as producer:
        for i in range(10):
            await producer.send(Message("Pulled", b"p%d" % i))
    pc = PullConsumer("cg-pull", ns, consume_from=ConsumeFrom.FIRST_OFFSET, auto_commit=False)
    pc.subscribe("Pulled", "*")
    await pc.start()
    try:
        got: list[MessageExt] = []
        while len(got) < 10:
            batch = await pc.poll(timeout=5)
            assert batch, "poll returned nothing"
            got += batch
        assert sorted(m.body for m in got) == sorted(b"p%d" % i for i in range(10))
        await pc.commit()
        mq = pc.assignment()[0]
        await pc.seek(mq, 0)
        again = await pc.poll(timeout=5)
        assert again and again[0].queue_offset == 0
    finally:
        await pc.shutdown()
    async with Admin(ns) as admin:
        progress = await admin.consumer_progress("cg-pull", "Pulled")
        assert sum(p.consumer_offset for p in progress) == 10


async def test_bad_input_gets_clear_errors_and_changes_nothing(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "Strict")
    async with Producer("pg", ns) as producer:
        with pytest.raises(MessageIllegalError, match="max_message_size"):
            await producer.send(Message("Strict", b"x" * (5 * 1024 * 1024)))
        with pytest.raises(MessageIllegalError, match="illegal characters"):
            await producer.send(Message("bad topic!", b"x"))
    addr = cluster.brokers[0].addr
    # A batch body that is not RocketMQ's batch encoding (zeros), and one whose properties
    # run past the end of their message.
    for body, says in [
        (b"\x00" * 300, "says it is 0 bytes, but its body and properties make it 22"),
        (batch_body([(b"m", b"", 0)])[:-2] + b"\x00\x10", "properties of 16 bytes, past the end"),
    ]:
        garbage = send_request(
            body, "", group="pg", topic="Strict", queue_id=0, born_timestamp=0, batch=True
        )
        answer = await request_once(addr, garbage, 5.0)
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL and says in str(answer.remark), answer
        assert "body is not RocketMQ's batch encoding" in str(answer.remark)
    bad_group = await request_once(
        addr, pull_request(group="bad group!", topic="Strict", queue_id=0, offset=0), 5.0
    )
    assert bad_group.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "not valid" in str(bad_group.remark)
    bad_queue = await request_once(
        addr, pull_request(group="g", topic="Strict", queue_id=99, offset=0), 5.0
    )
    assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queue id 99" in str(bad_queue.remark)
    async with Admin(ns) as admin:
        stats = await admin.topic_status("Strict")
        assert sum(q.max_offset for q in stats) == 0


async def test_pulls_on_one_connection_are_each_answered_when_ready(
    cluster: LocalCluster,
) -> None:
    """On one connection a pull held by long polling does not hold up a pull that can be
    answered at once, and is itself answered when a message arrives for its queue."""
    ns = cluster.namesrv_addr
    await make_topic(ns, "Streamed", queues=2)
    async with Producer("pg", ns) as producer:
        await producer.send(
            Message("Streamed", b"ready"), queue=MessageQueue("Streamed", "broker-a", 1)
        )

        def pull(queue_id: int) -> asyncio.Task[RemotingCommand]:
            request = pull_request(
                group="cg-stream",
                topic="Streamed",
                queue_id=queue_id,
                offset=0,
                max_msg_nums=32,
                suspend_timeout_ms=20_000,
                subscription="*",
            )
            return asyncio.ensure_future(conn.invoke(request, 30))

        conn = await connect(cluster.brokers[0].addr, {})
        try:
            held = pull(0)  # empty queue: held
            ready = pull(1)  # one message: answered at once
            first = parse_pull(await asyncio.wait_for(ready, 10))
            assert not held.done()
            assert first.outcome is PullOutcome.FOUND
            assert [m.body for m in decode_records(first.records)] == [b"ready"]
            await producer.send(
                Message("Streamed", b"late"), queue=MessageQueue("Streamed", "broker-a", 0)
            )
            second = parse_pull(await asyncio.wait_for(held, 10))
            assert second.outcome is PullOutcome.FOUND
            assert [m.body for m in decode_records(second.records)] == [b"late"]
        finally:
            conn.close()
