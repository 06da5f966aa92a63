"""The blocking twins (``rocketq.sync``) on a real cluster, from plain threads of the test
(no event loop of their own): ``with`` and ``close()``, ``send_async`` as a
``concurrent.futures.Future``, and ``for`` loops over the consumers with the ``async for``
semantics: a message is consumed when the loop asks for the next one, and an exception
leaving the consumer's ``with`` block sends the message it was on back for retry."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from rocketq.cluster.launcher import LocalCluster
from rocketq.sync import (
    Admin,
    ConsumeFrom,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
    SendResult,
)


class LoopBodyError(Exception):
    """Raised in a loop's body on purpose."""


def make_topic(namesrv: str, topic: str) -> None:
    with Admin(namesrv) as admin:
        admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)


def test_producer_twin_sends_and_send_async_is_a_concurrent_future(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    make_topic(ns, "SyncSend")
    heard: list[tuple[SendResult | None, BaseException | None]] = []
    called = threading.Event()

    def callback(result: SendResult | None, exc: BaseException | None) -> None:
        heard.append((result, exc))
        called.set()

    with Producer("sync-send-pg", ns) as producer:
        assert producer.send(Message("SyncSend", b"one")).ok
        assert producer.send_batch([Message("SyncSend", b"b1"), Message("SyncSend", b"b2")]).ok
        future = producer.send_async(Message("SyncSend", b"async"), callback)
        assert isinstance(future, concurrent.futures.Future)
        assert future.result(timeout=10).ok
        assert called.wait(10) and heard[0][1] is None and heard[0][0] == future.result()
    stopped = Producer("sync-close-pg", ns)
    stopped.start()
    assert stopped.send(Message("SyncSend", b"before close")).ok
    stopped.close()
    with pytest.raises(Exception, match="not started"):
        stopped.send(Message("SyncSend", b"after close"))


def test_for_loop_over_a_push_consumer_has_async_for_semantics(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    make_topic(ns, "SyncIter")
    with Producer("sync-iter-pg", ns) as producer:
        for i in range(4):
            assert producer.send(Message("SyncIter", b"m%d" % i)).ok

    consumer = PushConsumer("sync-iter-cg", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("SyncIter")
    failed_on: MessageExt | None = None
    with pytest.raises(LoopBodyError), consumer:
        for msg in consumer:
            failed_on = msg
            raise LoopBodyError  # leaves the with block: the message goes back for retry
    assert failed_on is not None

    # The group gets every message, the one the failed loop was on again.
    again = PushConsumer("sync-iter-cg", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    again.subscribe("SyncIter")
    seen: set[bytes] = set()
    # A loop waits for the next message; a consumer shut down from another thread ends it.
    stopper = threading.Timer(20, again.shutdown)
    stopper.start()
    try:
        with again:
            for msg in again:
                seen.add(msg.body)
                if seen >= {b"m0", b"m1", b"m2", b"m3"}:
                    break
    finally:
        stopper.cancel()
    assert seen >= {b"m0", b"m1", b"m2", b"m3"}, seen
    assert failed_on.body in seen


def test_for_loop_over_a_pull_consumer_yields_batches(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    make_topic(ns, "SyncPull")
    with Producer("sync-pull-pg", ns) as producer:
        for i in range(5):
            assert producer.send(Message("SyncPull", b"p%d" % i)).ok
    puller = PullConsumer("sync-pull-cg", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    puller.subscribe("SyncPull")
    got: list[bytes] = []
    stopper = threading.Timer(20, puller.shutdown)
    stopper.start()
    try:
        with puller:
            for batch in puller:
                got += [m.body for m in batch]
                if len(got) >= 5:
                    break
            assert puller.poll(timeout=0.1) == []
    finally:
        stopper.cancel()
    assert sorted(got) == [b"p%d" % i for i in range(5)]
