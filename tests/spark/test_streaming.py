"""Streaming reads through the ``rocketq`` data source on a real Spark (local[2]): exactly
once into a file sink across a broker's SIGKILL and the query's own restart, new queues,
group progress, and ``failOnDataLoss`` both ways when retention removes what the stream
had not read."""

from __future__ import annotations

import asyncio
import collections
import signal
import threading
import time
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from rocketq import Message, Producer
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin
from tests.integration.conftest import MakeCluster
from tests.spark.conftest import wait_for


async def _topic(namesrv: str, topic: str, queues: int = 4) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def start_stream(
    spark: SparkSession, namesrv: str, topic: str, sink: Path, checkpoint: Path, **options: str
) -> StreamingQuery:
    reader = spark.readStream.format("rocketq").option("namesrv", namesrv).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return (
        reader.load()
        .selectExpr("topic", "broker", "queue_id", "queue_offset", "keys[0] AS key")
        .writeStream.format("json")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="1 second")
        .start()
    )


async def _send_one(namesrv: str, topic: str, key: str) -> None:
    async with Producer("pg-stream-last", namesrv) as producer:
        result = await producer.send(Message(topic, key.encode(), keys=[key]))
        assert result.ok


class Sender(threading.Thread):
    """Sends ``count`` keyed messages at a steady pace; keeps the keys acknowledged."""

    def __init__(self, namesrv: str, topic: str, count: int, pace: float) -> None:
        super().__init__(daemon=True)
        self.namesrv, self.topic, self.count, self.pace = namesrv, topic, count, pace
        self.acked: set[str] = set()
        self.sent = 0

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        async with Producer("pg-stream", self.namesrv, send_timeout=3.0) as producer:
            for i in range(self.count):
                key = f"s{i}"
                try:
                    result = await producer.send(Message(self.topic, key.encode(), keys=[key]))
                    if result.ok:
                        self.acked.add(key)
                except Exception:
                    pass  # the broker was down: not acknowledged, may or may not be stored
                self.sent = i + 1
                await asyncio.sleep(self.pace)


def test_stream_is_exactly_once_across_a_broker_sigkill_and_a_query_restart(
    spark: SparkSession, make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster = make_cluster(brokers=2)
    ns = cluster.namesrv_addr
    asyncio.run(_topic(ns, "StreamT"))
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    sender = Sender(ns, "StreamT", 1500, 0.004)
    sender.start()
    query = start_stream(spark, ns, "StreamT", sink, checkpoint, group="cg-stream")
    try:
        wait_for(lambda: sender.sent >= 300, "300 sends", 60)
        cluster.kill("broker-b-0", signal.SIGKILL)
        wait_for(lambda: sender.sent >= 600, "600 sends", 60)
        cluster.restart("broker-b-0")
        wait_for(lambda: sender.sent >= 900, "900 sends", 60)
        query.stop()
        query = start_stream(spark, ns, "StreamT", sink, checkpoint, group="cg-stream")
        sender.join(120)
        assert not sender.is_alive()
        query.processAllAvailable()
        # One more message makes one more micro-batch, so the batch before it is done
        # (however few batches a slow machine ran): its offsets are committed.
        asyncio.run(_send_one(ns, "StreamT", "last"))
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.read.json(str(sink)).collect()
    places = collections.Counter((r.broker, r.queue_id, r.queue_offset) for r in rows)
    assert [p for p, n in places.items() if n > 1] == []  # nothing twice
    stored = spark.read.format("rocketq").option("namesrv", ns).option("topic", "StreamT").load()
    assert set(places) == {(r.broker, r.queue_id, r.queue_offset) for r in stored.collect()}
    keys = {r.key for r in rows}
    assert sender.acked <= keys, sorted(sender.acked - keys)[:10]
    assert len(sender.acked) > 1000

    async def lag() -> int:
        async with Admin(ns) as admin:
            return sum(p.lag for p in await admin.consumer_progress("cg-stream", "StreamT"))

    # The group's offsets trail the stream by the last micro-batch: Spark tells a source a
    # batch is done when it plans the next one.
    assert 0 < asyncio.run(lag()) < 1500


def test_queues_that_appear_later_are_read_from_their_start(
    spark: SparkSession, two_groups: LocalCluster, tmp_path: Path
) -> None:
    ns = two_groups.namesrv_addr
    asyncio.run(_topic(ns, "StreamGrow", 2))
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    async def send(n: int, first: int) -> None:
        async with Producer("pg-grow", ns) as producer:
            for i in range(first, first + n):
                assert (await producer.send(Message("StreamGrow", b"x", keys=[f"g{i}"]))).ok

    asyncio.run(send(50, 0))
    query = start_stream(spark, ns, "StreamGrow", sink, checkpoint, maxOffsetsPerTrigger="50")
    try:
        query.processAllAvailable()
        asyncio.run(_topic(ns, "StreamGrow", 8))  # 6 more queues per group
        asyncio.run(send(200, 50))
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.read.json(str(sink)).collect()
    assert sorted(r.key for r in rows) == sorted(f"g{i}" for i in range(250))
    assert max(r.queue_id for r in rows) >= 2
    # maxOffsetsPerTrigger bounded each batch (Spark's admission control).
    progress = [p["numInputRows"] for p in query.recentProgress]
    assert max(progress) <= 50 and sum(progress) == 250


@pytest.mark.parametrize("fail", [True, False])
def test_fail_on_data_loss(
    spark: SparkSession, make_cluster: MakeCluster, tmp_path: Path, fail: bool
) -> None:
    """Retention removes CommitLog segments the stream had not read yet."""
    cluster = make_cluster(
        broker_settings={
            "mapped_file_size_commit_log": "65536",
            "file_reserved_time": "0",
            "delete_when": ";".join(f"{h:02d}" for h in range(24)),
            "clean_resource_interval": "200",
        }
    )
    ns = cluster.namesrv_addr
    asyncio.run(_topic(ns, "StreamLoss", 1))
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    async def send(first: int, n: int) -> None:
        async with Producer("pg-loss", ns) as producer:
            for i in range(first, first + n):
                assert (await producer.send(Message("StreamLoss", b"y" * 1000, keys=[f"l{i}"]))).ok

    async def min_offset() -> int:
        async with Admin(ns) as admin:
            return min(q.min_offset for q in await admin.topic_status("StreamLoss"))

    asyncio.run(send(0, 20))  # within the first 64 KiB segment
    query = start_stream(
        spark, ns, "StreamLoss", sink, checkpoint, failOnDataLoss=str(fail).lower()
    )
    query.processAllAvailable()
    query.stop()
    asyncio.run(send(20, 300))  # about five segments: the first ones are deleted
    wait_for(lambda: asyncio.run(min_offset()) > 20, "retention", 30)
    seen = [asyncio.run(min_offset())]

    def settled() -> bool:  # retention is done: the min offset stays put for a second
        time.sleep(1.0)
        seen.append(asyncio.run(min_offset()))
        return seen[-1] == seen[-2]

    wait_for(settled, "the min offset to settle", 30)
    low = seen[-1]
    query = start_stream(
        spark, ns, "StreamLoss", sink, checkpoint, failOnDataLoss=str(fail).lower()
    )
    if fail:
        with pytest.raises(
            PySparkException, match=rf"StreamLoss broker-a:0: offsets \[20, {low}\) were removed"
        ):
            query.processAllAvailable()
        query.stop()
        return
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    keys = {r.key for r in spark.read.json(str(sink)).collect()}
    got = sorted(int(k[1:]) for k in keys)
    assert keys == {f"l{i}" for i in (*range(20), *range(low, 320))}, (low, got[:25], seen)
