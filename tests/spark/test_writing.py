"""A write task's rows -> batches of messages (sdk/spark/writing.py), without a cluster:
batches cut by count and bytes, one open batch per topic and sharding key, row keys that
count across record batches, a sharding key's batches sent in order, and a batch the
brokers refuse for a while sent again."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import Row

from rocketq.common.exceptions import RocketqError, SystemBusyError, TopicNotExistError
from rocketq.common.message import Message
from rocketq.sdk.spark.options import parse_write_options
from rocketq.sdk.spark.writing import (
    BATCH_BYTES,
    ROW_KEY,
    Batcher,
    _pieces,
    _Sender,
)

OPTS = parse_write_options({"namesrv": "127.0.0.1:1", "topic": "T", "batchSize": "4"}, ["body"])


def record_batch(**columns: list[Any]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns)


def test_body_only_rows_are_cut_into_batches_of_batch_size_with_counted_row_keys() -> None:
    batcher = Batcher(OPTS, "w1-0")
    ready = []
    bodies = [b"a", b"b", b"c", b"d", b"e", *(f"f{i}".encode() for i in range(9))]
    pieces = [
        record_batch(body=["a", "b", "c"]),
        record_batch(body=[b"d", b"e"]),
        record_batch(body=bodies[5:]),
    ]
    for piece in _pieces(["body"], pieces):
        ready += batcher.add(piece)
    rest = batcher.rest()
    assert [len(b) for b, _ in ready] == [4, 4, 4] and [len(b) for b, _ in rest] == [2]
    msgs = [m for b, _ in ready + rest for m in b]
    assert [m.body for m in msgs] == bodies
    assert [m.properties[ROW_KEY] for m in msgs] == [f"w1-0-{i}" for i in range(14)]
    assert all(m.topic == "T" for m in msgs)
    with pytest.raises(RocketqError, match="no body"):
        batcher.add({"body": [b"x", None]})


def test_a_batch_is_cut_at_batch_bytes() -> None:
    batcher = Batcher(replace(OPTS, batch_size=1000), "w")
    body = b"x" * (BATCH_BYTES // 3)
    ready = batcher.add({"body": [body] * 7})
    assert [len(b) for b, _ in ready] == [2, 2, 2] and [len(b) for b, _ in batcher.rest()] == [1]
    # Small rows cut by count leave their open batch's bytes counted for big rows after.
    batcher = Batcher(replace(OPTS, batch_size=1000), "w")
    assert [len(b) for b, _ in batcher.add({"body": [b"s" * 100] * 1500})] == [1000]
    ready = batcher.add({"body": [body] * 3}) + batcher.rest()
    assert [len(b) for b, _ in ready] == [502, 1]
    assert all(sum(len(m.body) for m in b) <= BATCH_BYTES for b, _ in ready)


def test_rows_with_columns_go_by_topic_and_sharding_key() -> None:
    opts = parse_write_options({"namesrv": "127.0.0.1:1", "batchSize": "2"}, ["body", "topic"])
    batcher = Batcher(opts, "w")
    piece = next(
        _pieces(
            [],
            [
                record_batch(
                    body=["1", "2", "3", "4", "5"],
                    topic=["A", "B", "A", "A", "B"],
                    sharding_key=["k", None, "k", "j", None],
                    tags=["t", None, None, None, None],
                    keys=[["x", "y"], None, None, None, None],
                    msg_id=[None, "ORIGIN", None, None, None],
                )
            ],
        )
    )
    ready = batcher.add(piece) + batcher.rest()
    groups = {(b[0].topic, key): [m.body for m in b] for b, key in ready}
    assert groups == {("A", "k"): [b"1", b"3"], ("B", None): [b"2", b"5"], ("A", "j"): [b"4"]}
    first = ready[0][0][0]
    assert first.tags == "t" and first.keys == ["x", "y"]
    by_body = {m.body: m for b, _ in ready for m in b}
    assert by_body[b"2"].properties[ROW_KEY] == "ORIGIN"
    assert by_body[b"3"].properties[ROW_KEY] == "w-2"


def test_stream_rows_become_pieces_too() -> None:
    rows = [Row(body=f"r{i}", tags="t") for i in range(3)]
    (piece,) = list(_pieces(["body", "tags"], rows))
    assert piece == {"body": ["r0", "r1", "r2"], "tags": ["t", "t", "t"]}
    with pytest.raises(TypeError, match="rows or Arrow batches"):
        list(_pieces(["body"], [42]))


class FakeProducer:
    """Records the order batches are sent in; refuses as told."""

    def __init__(self, refusals: list[Exception] | None = None) -> None:
        self.sent: list[list[bytes]] = []
        self.refusals = refusals or []

    async def send_batch(self, msgs: list[Message], *, sharding_key: str | None = None) -> Any:
        await asyncio.sleep(0.01 if msgs[0].body == b"slow" else 0)
        if self.refusals:
            raise self.refusals.pop(0)
        self.sent.append([m.body for m in msgs])
        return type("Result", (), {"ok": True})()

    send = send_batch

    async def shutdown(self) -> None:
        pass


async def test_a_sharding_keys_batches_are_sent_in_order() -> None:
    producer = FakeProducer()
    sender = _Sender(replace(OPTS, in_flight=8), producer)  # type: ignore[arg-type]
    first = [Message("T", b"slow"), Message("T", b"slow")]
    second = [Message("T", b"fast"), Message("T", b"fast")]
    other = [Message("T", b"other"), Message("T", b"other")]
    await sender.submit_all([(first, "k"), (other, None), (second, "k")])
    assert await sender.drain() == 6
    order = [b[0] for b in producer.sent]
    assert order.index(b"slow") < order.index(b"fast")


async def test_a_refused_batch_is_sent_again_but_a_missing_topic_fails_at_once() -> None:
    busy = SystemBusyError("broker busy, start flow control for a while")
    producer = FakeProducer([busy, busy])
    sender = _Sender(OPTS, producer)  # type: ignore[arg-type]
    await sender.submit_all([([Message("T", b"a"), Message("T", b"b")], None)])
    assert await sender.drain() == 2 and producer.sent == [[b"a", b"b"]]

    producer = FakeProducer([TopicNotExistError("topic T does not exist")])
    sender = _Sender(OPTS, producer)  # type: ignore[arg-type]
    await sender.submit_all([([Message("T", b"a"), Message("T", b"b")], None)])
    with pytest.raises(TopicNotExistError):
        await sender.drain()

    producer = FakeProducer([busy] * 100)
    sender = _Sender(replace(OPTS, write_timeout=0.2), producer)  # type: ignore[arg-type]
    await sender.submit_all([([Message("T", b"a"), Message("T", b"b")], None)])
    with pytest.raises(SystemBusyError):
        await sender.drain()
