"""Batch reads and writes through the ``rocketq`` data source on a real Spark (local[2])
against two broker groups."""

from __future__ import annotations

import asyncio
import json

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from rocketq import Message, Producer
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin
from rocketq.sdk.spark import SCHEMA

N = 400


async def _fill(namesrv: str, topic: str, n: int = N) -> dict[str, dict[str, object]]:
    """``n`` messages over both groups (4 queues each); by key: what was sent."""
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=4, write_queue_nums=4)
    sent: dict[str, dict[str, object]] = {}
    async with Producer("pg-spark", namesrv) as producer:
        for i in range(n):
            key = f"k{i}"
            tags = "even" if i % 2 == 0 else "odd"
            msg = Message(
                topic,
                f"body-{i}".encode(),
                tags=tags,
                keys=[key],
                properties={"n": str(i), "colour": "red" if i % 3 == 0 else "blue"},
            )
            result = await producer.send(msg)
            assert result.ok
            sent[key] = {
                "body": msg.body,
                "tags": tags,
                "n": str(i),
                "broker": result.queue.broker_name,
            }
    return sent


def fill(cluster: LocalCluster, topic: str, n: int = N) -> dict[str, dict[str, object]]:
    return asyncio.run(_fill(cluster.namesrv_addr, topic, n))


def read(spark: SparkSession, cluster: LocalCluster, topic: str, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("rocketq").option("namesrv", cluster.namesrv_addr)
    reader = reader.option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_returns_every_message_of_both_groups(
    spark: SparkSession, two_groups: LocalCluster
) -> None:
    sent = fill(two_groups, "SparkRead")
    assert {s["broker"] for s in sent.values()} == {"broker-a", "broker-b"}
    df = read(spark, two_groups, "SparkRead")
    assert df.schema.simpleString() == "struct<" + SCHEMA.replace(" ", ":").replace(
        ",:", ","
    ) + ">" or df.columns == [c.split()[0] for c in SCHEMA.split(", ")]
    assert df.rdd.getNumPartitions() == 8  # one per queue
    rows = df.collect()
    assert len(rows) == N
    by_key = {r.keys[0]: r for r in rows}
    assert set(by_key) == set(sent)
    for key, row in by_key.items():
        want = sent[key]
        assert row.topic == "SparkRead"
        assert bytes(row.body) == want["body"]
        assert row.tags == want["tags"]
        assert row.broker == want["broker"]
        assert row.properties["n"] == want["n"]
        assert row.msg_id and row.store_host and row.born_host
        assert row.store_timestamp >= row.born_timestamp
        assert row.reconsume_times == 0
    # Offsets are each queue's 0..count-1.
    counts = (
        df.groupBy("broker", "queue_id")
        .agg(F.count("*").alias("n"), F.max("queue_offset").alias("mx"))
        .collect()
    )
    assert all(r.mx == r.n - 1 for r in counts)


def test_starting_and_ending_offsets_as_json(spark: SparkSession, two_groups: LocalCluster) -> None:
    fill(two_groups, "SparkRange", 200)
    full = read(spark, two_groups, "SparkRange")
    per_queue = {
        (r.broker, r.queue_id): r.n
        for r in full.groupBy("broker", "queue_id").agg(F.count("*").alias("n")).collect()
    }
    starting = {"SparkRange": {f"{b}:{q}": 5 for (b, q) in per_queue}}
    starting["SparkRange"]["broker-a:0"] = -2  # earliest
    ending = {"SparkRange": {f"{b}:{q}": 15 for (b, q) in per_queue}}
    ending["SparkRange"]["broker-b:3"] = -1  # latest
    df = read(
        spark,
        two_groups,
        "SparkRange",
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )
    got = {
        (r.broker, r.queue_id): (r.lo, r.hi, r.n)
        for r in df.groupBy("broker", "queue_id")
        .agg(
            F.min("queue_offset").alias("lo"),
            F.max("queue_offset").alias("hi"),
            F.count("*").alias("n"),
        )
        .collect()
    }
    for (b, q), n in per_queue.items():
        lo = 0 if (b, q) == ("broker-a", 0) else 5
        hi = n if (b, q) == ("broker-b", 3) else 15
        assert got[(b, q)] == (lo, hi - 1, hi - lo)


def test_tag_and_sql_filters_run_on_the_broker(
    spark: SparkSession, two_groups: LocalCluster
) -> None:
    sent = fill(two_groups, "SparkFilter", 120)
    even = read(spark, two_groups, "SparkFilter", **{"filter.tags": "even"}).collect()
    assert sorted(r.keys[0] for r in even) == sorted(
        k for k, s in sent.items() if s["tags"] == "even"
    )
    red = read(
        spark, two_groups, "SparkFilter", **{"filter.sql": "colour = 'red' AND n > 60"}
    ).collect()
    assert sorted(r.keys[0] for r in red) == sorted(
        k for k, s in sent.items() if int(str(s["n"])) % 3 == 0 and int(str(s["n"])) > 60
    )


def test_bad_options_name_what_is_wrong(spark: SparkSession, two_groups: LocalCluster) -> None:
    with pytest.raises(PySparkException, match="option topic is required"):
        spark.read.format("rocketq").option("namesrv", two_groups.namesrv_addr).load().collect()
    with pytest.raises(PySparkException, match=r"is not .broker:queue"):
        read(spark, two_groups, "SparkRead", startingOffsets='{"SparkRead": {"a": 1}}').collect()
    with pytest.raises(PySparkException, match="does not exist"):
        read(spark, two_groups, "NoSuchTopic").collect()


def test_write_then_read_back(spark: SparkSession, two_groups: LocalCluster) -> None:
    async def make() -> None:
        async with Admin(two_groups.namesrv_addr) as admin:
            await admin.update_topic("SparkWritten", read_queue_nums=4, write_queue_nums=4)

    asyncio.run(make())
    rows = [
        (f"payload-{i}", [f"w{i}"], "TagW" if i % 2 else None, {"i": str(i)}, f"shard-{i % 5}")
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows,
        "body string, keys array<string>, tags string, properties map<string,string>, "
        "sharding_key string",
    )
    # One task: a sharding key's rows keep their order within a task.
    df.coalesce(1).write.format("rocketq").option("namesrv", two_groups.namesrv_addr).option(
        "topic", "SparkWritten"
    ).mode("append").save()
    back = read(spark, two_groups, "SparkWritten").collect()
    assert len(back) == 300
    got = {r.keys[0]: r for r in back}
    for i in range(300):
        r = got[f"w{i}"]
        assert bytes(r.body) == f"payload-{i}".encode()
        assert r.tags == ("TagW" if i % 2 else None)
        assert r.properties["i"] == str(i)
        assert r.properties["SPARK_ROW_KEY"]
    # One sharding key, one queue, in row order.
    for shard in range(5):
        mine = sorted(
            (r for r in back if int(r.properties["i"]) % 5 == shard),
            key=lambda r: int(r.properties["i"]),
        )
        assert len({(r.broker, r.queue_id) for r in mine}) == 1
        assert [r.queue_offset for r in mine] == sorted(r.queue_offset for r in mine)
