"""Natural batching on real processes: concurrent single sends leave as batches, every
caller gets its own message id, CommitLog id and queue offset, a sharding key's messages
keep their order, metrics and traces count every message, and sends whose broker died
move to the other broker."""

from __future__ import annotations

import asyncio
import collections
import json
import signal

from prometheus_client import CollectorRegistry

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import TopicNotExistError
from rocketq.sdk.admin import Admin
from rocketq.sdk.producer import SendResult, SendStatus
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until


async def _topic(namesrv: str, topic: str, queues: int, brokers: int = 1) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)

        async def routed() -> bool:
            route = await admin.topic_route(topic)
            return len({q.broker_name for q in route.queue_datas}) == brokers

        await wait_until(routed, f"{topic} routed on {brokers} broker(s)")


async def test_concurrent_sends_leave_in_batches_each_with_its_own_result(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    await _topic(ns, "Natural", 4)
    n = 300
    async with Producer("pg-natural", ns) as producer:
        results: list[SendResult] = await asyncio.gather(
            *(
                producer.send(Message("Natural", b"body-%d" % i, tags=f"t{i % 3}", keys=[f"k{i}"]))
                for i in range(n)
            )
        )
        assert producer.batcher is not None and producer.batcher.batches_sent > 0
        assert producer.batcher.batched_messages > n // 2
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == n
    assert len({r.offset_msg_id for r in results}) == n
    assert len({(r.queue.queue_id, r.queue_offset) for r in results}) == n
    assert all(r.msg_ids == (r.msg_id,) for r in results)
    sent = {r.msg_id: (i, r) for i, r in enumerate(results)}

    received: dict[str, MessageExt] = {}
    consumer = PushConsumer("cg-natural", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("Natural", "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        for m in msgs:
            received[m.msg_id] = m
        return ConsumeResult.SUCCESS

    consumer.on_message(handler)
    await consumer.start()
    try:
        await wait_until(lambda: len(received) >= n, lambda: f"{len(received)} of {n} consumed")
    finally:
        await consumer.shutdown()
    assert set(received) == set(sent)
    for msg_id, m in received.items():
        i, r = sent[msg_id]
        # The message stored under each caller's id is that caller's, where its result says.
        assert m.body == b"body-%d" % i and m.tags == f"t{i % 3}" and m.keys == [f"k{i}"]
        assert (m.queue_id, m.queue_offset) == (r.queue.queue_id, r.queue_offset)
        assert m.offset_msg_id == r.offset_msg_id


async def test_a_sharding_keys_messages_keep_their_order(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await _topic(ns, "NaturalOrdered", 4)
    keys, per_key = 6, 40
    async with Producer("pg-natural-ordered", ns) as producer:
        # Every send started at once, each key's in its order.
        def send(key: int, seq: int) -> asyncio.Future[SendResult]:
            msg = Message("NaturalOrdered", b"%d:%d" % (key, seq))
            return asyncio.ensure_future(producer.send(msg, sharding_key=f"key-{key}"))

        tasks = [(key, seq, send(key, seq)) for seq in range(per_key) for key in range(keys)]
        await asyncio.gather(*(t for _, _, t in tasks))
        assert producer.batcher is not None and producer.batcher.batches_sent > 0
    placed: dict[int, list[tuple[int, int, int]]] = collections.defaultdict(list)
    for key, seq, task in tasks:
        r = task.result()
        placed[key].append((seq, r.queue.queue_id, r.queue_offset))
    for key, rows in placed.items():
        assert len({q for _, q, _ in rows}) == 1, f"key {key} went to several queues"
        offsets = [off for _, _, off in sorted(rows)]
        assert offsets == sorted(offsets), f"key {key} stored out of order"


async def test_metrics_and_traces_count_every_message(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await _topic(ns, "NaturalTraced", 2)
    registry = CollectorRegistry()
    n = 60
    async with Producer("pg-natural-traced", ns, enable_trace=True, metrics=registry) as producer:
        results = await asyncio.gather(
            *(producer.send(Message("NaturalTraced", b"m%d" % i)) for i in range(n))
        )
        assert producer.batcher is not None and producer.batcher.batches_sent > 0
        assert producer.tracer is not None
        traced = producer.tracer
    labels = {
        "topic": "NaturalTraced",
        "client_id": producer.client.client_id,
        "invocation_status": "success",
    }
    count = registry.get_sample_value("rocketmq_send_cost_time_count", labels)
    assert count == n
    assert traced.dropped == 0
    async with Admin(ns) as admin:
        for r in results[:: n // 6]:
            events: list[object] = []

            async def found(msg_id: str = r.msg_id, out: list[object] = events) -> bool:
                try:
                    out[:] = await admin.trace(msg_id)
                except TopicNotExistError:  # the trace topic is not in the route yet
                    return False
                return bool(out)

            await wait_until(found, f"the Pub event of {r.msg_id}")
            pub = events[0]
            assert getattr(pub, "msg_id", None) == r.msg_id
            assert getattr(pub, "status", None) == "SEND_OK"


async def _announced(producer: Producer) -> None:
    """The broker said in its HEART_BEAT answer that it takes SEND_TOPICS_BATCH (the
    producer's first heartbeat goes with its first connection)."""

    async def said() -> bool:
        return bool(producer.client.topics_batch)

    await wait_until(said, "the broker to announce topics batches")


async def test_sends_to_many_topics_leave_together_each_in_its_own_topic(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    topics = [f"Mixed{i}" for i in range(12)]
    for t in topics:
        await _topic(ns, t, 4)
    n = 600
    async with Producer("pg-mixed", ns) as producer:
        await producer.send(Message(topics[0], b"first"))
        await _announced(producer)
        results: list[SendResult] = await asyncio.gather(
            *(
                producer.send(Message(topics[i % 12], b"body-%d" % i, keys=[f"k{i}"]))
                for i in range(n)
            )
        )
        assert producer.batcher is not None and producer.batcher.topics_batches_sent > 0
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == n
    assert len({r.offset_msg_id for r in results}) == n
    assert len({(r.queue.topic, r.queue.queue_id, r.queue_offset) for r in results}) == n
    assert all(r.queue.topic == topics[i % 12] for i, r in enumerate(results))
    async with Admin(ns) as admin:
        for i in (0, 1, 13, 250, n - 1):
            stored = await admin.query_msg_by_id(results[i].offset_msg_id)
            assert (stored.topic, stored.body, stored.msg_id) == (
                topics[i % 12],
                b"body-%d" % i,
                results[i].msg_id,
            )
            assert (stored.queue_id, stored.queue_offset) == (
                results[i].queue.queue_id,
                results[i].queue_offset,
            )
        for k, t in enumerate(topics):
            total = sum(q.max_offset for q in await admin.topic_status(t))
            assert total == n // 12 + (k == 0), t


async def test_a_segment_the_broker_refuses_is_sent_again_alone(cluster: LocalCluster) -> None:
    """The producer's route still lists 8 queues of a topic the broker now writes 2 of:
    the segments for the other queues are refused (SYSTEM_ERROR, as RocketMQ answers an
    illegal queue), the others stored, and the refused messages are sent again one by
    one, with a fresh route, and stored."""
    ns = cluster.namesrv_addr
    await _topic(ns, "Shrunk", 8)
    await _topic(ns, "Steady", 4)
    async with Producer("pg-shrunk", ns) as producer:
        await producer.send(Message("Shrunk", b"first"))
        await producer.send(Message("Steady", b"first"))
        await _announced(producer)
        async with Admin(ns) as admin:
            await admin.update_topic("Shrunk", read_queue_nums=8, write_queue_nums=2)
        assert len(producer.publish["Shrunk"].message_queues) == 8
        results: list[SendResult] = await asyncio.gather(
            *(
                producer.send(Message("Shrunk" if i % 2 else "Steady", b"m-%d" % i))
                for i in range(200)
            )
        )
        assert producer.batcher is not None and producer.batcher.topics_batches_sent > 0
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert all(r.queue.queue_id < 2 for r in results if r.queue.topic == "Shrunk")
    assert len({r.offset_msg_id for r in results}) == 200


async def test_sends_to_a_dead_broker_move_to_the_other_one(make_cluster: MakeCluster) -> None:
    c = make_cluster(brokers=2)
    ns = c.namesrv_addr
    await _topic(ns, "NaturalTwo", 4, brokers=2)
    async with Producer("pg-natural-two", ns, send_timeout=10.0) as producer:
        first = await asyncio.gather(
            *(producer.send(Message("NaturalTwo", b"x")) for _ in range(32))
        )
        assert {r.queue.broker_name for r in first} == {"broker-a", "broker-b"}
        c.kill("broker-a-0", signal.SIGKILL)
        results = await asyncio.gather(
            *(producer.send(Message("NaturalTwo", b"after %d" % i)) for i in range(64))
        )
        assert producer.batcher is not None and producer.batcher.batches_sent > 0
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    assert len({r.msg_id for r in results}) == 64


def test_bench_produce_batches_unless_told_not_to(cluster: LocalCluster) -> None:
    from typer.testing import CliRunner

    from rocketq.cli.main import app

    base = ["bench", "produce", "-n", cluster.namesrv_addr, "--messages", "400", "-c", "16"]
    docs = {}
    for flag in ("--auto-batch", "--no-auto-batch"):
        result = CliRunner().invoke(app, [*base, flag, "--json"])
        assert result.exit_code == 0, result.output
        docs[flag] = json.loads(result.output.strip().splitlines()[-1])
        assert docs[flag]["msgs"] == 400 and docs[flag]["failed"] == 0
    assert docs["--auto-batch"]["natural_batches"] > 0
    assert docs["--auto-batch"]["naturally_batched_msgs"] > docs["--auto-batch"]["natural_batches"]
    assert docs["--no-auto-batch"]["natural_batches"] == 0


async def test_a_topics_batch_answers_each_segment_and_refuses_bytes_that_are_not_one(
    cluster: LocalCluster,
) -> None:
    from rocketq.common.record import encode_batch_entry as batch_entry
    from rocketq.remoting.codes import ResponseCode, RocketqRequestCode
    from rocketq.remoting.command import RemotingCommand
    from rocketq.remoting.transport import connect
    from rocketq.sdk.wire import parse_topics_batch, topics_batch_request

    await _topic(cluster.namesrv_addr, "Segments", 4)
    addr = cluster.brokers[0].addr
    conn = await connect(addr, {}, timeout=5.0)
    try:
        good = batch_entry(b"kept", b"KEYS\x01k\x02")
        request = topics_batch_request(
            [
                ("Segments", 1, good + batch_entry(b"kept too", b"")),
                ("Segments", 2, b"\x00\x00\x00\x05 not entries"),
                ("bad topic", 0, good),
                ("Segments", 99, good),
                ("Segments", 3, batch_entry(b"delayed", b"DELAY\x012\x02")),
            ],
            group="pg-segments",
            born_timestamp=0,
        )
        answer = await conn.invoke(request, 5.0)
        results = parse_topics_batch(answer, 5)
        assert [r.code for r in results] == [
            ResponseCode.SUCCESS,
            ResponseCode.MESSAGE_ILLEGAL,
            ResponseCode.MESSAGE_ILLEGAL,
            ResponseCode.SYSTEM_ERROR,
            ResponseCode.MESSAGE_ILLEGAL,
        ], [r.text for r in results]
        assert len(results[0].text.split(",")) == 2 and results[0].queue_id == 1
        assert "batch encoding" in results[1].text and "delayed" in results[4].text
        garbage = RemotingCommand(RocketqRequestCode.SEND_TOPICS_BATCH, {}, b"\x00\x05Seg")
        refused = await conn.invoke(garbage, 5.0)
        assert refused.code == ResponseCode.MESSAGE_ILLEGAL and not refused.body
    finally:
        conn.close()
    async with Admin(cluster.namesrv_addr) as admin:
        offsets = {q.queue_id: q.max_offset for q in await admin.topic_status("Segments")}
    assert offsets == {0: 0, 1: 2, 2: 0, 3: 0}
