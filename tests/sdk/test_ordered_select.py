"""Sharding keys pick queues as RocketMQ's SelectMessageQueueByHash does."""

from __future__ import annotations

from rocketq.common.message import Message, MessageQueue
from rocketq.sdk.producer import java_string_hash, select_by_hash


def test_java_string_hash_matches_java() -> None:
    # Values of String.hashCode() in Java.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("order-123456789") == -1902235530
    assert java_string_hash("é日本") == 1058960


def test_one_key_one_queue() -> None:
    mqs = [MessageQueue("T", "b", i) for i in range(8)]
    msg = Message("T", b"x")
    picked = {select_by_hash(mqs, msg, "order-42") for _ in range(5)}
    assert len(picked) == 1
    assert select_by_hash(mqs, msg, "hello") == mqs[99162322 % 8]
