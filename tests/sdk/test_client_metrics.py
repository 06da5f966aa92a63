"""Client metrics (sdk/metrics.py): the four RocketMQ 5 client histograms with their names,
labels and buckets, one registry shared by several clients; then, on one real cluster for
the module, what a send, a failed send, a push consumer (concurrent and orderly, listener
succeeding and failing) and a pull consumer record."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from rocketq import (
    ClientMetrics,
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.common.exceptions import ClientStateError, MessageIllegalError
from rocketq.sdk.admin import Admin
from tests.integration.conftest import SMALL_STORE
from tests.integration.waiting import wait_until

EXPECTED = {
    "rocketmq_send_cost_time": (
        ["topic", "client_id", "invocation_status"],
        [1, 5, 10, 20, 50, 200, 500],
    ),
    "rocketmq_delivery_latency": (
        ["topic", "consumer_group", "client_id"],
        [1, 5, 10, 20, 50, 200, 500],
    ),
    "rocketmq_await_time": (
        ["topic", "consumer_group", "client_id"],
        [1, 5, 20, 100, 1000, 5000, 10000],
    ),
    "rocketmq_process_time": (
        ["topic", "consumer_group", "client_id", "invocation_status"],
        [1, 5, 10, 100, 10000, 60000],
    ),
}


def stored(topic: str, store_timestamp: int) -> MessageExt:
    return MessageExt(topic, b"x", b"", 0, 0, 0, 0, 0, 0, 0, 0, b"", store_timestamp, b"", 0, 0)


def observe_each(metrics: ClientMetrics, client_id: str = "c1") -> None:
    msg = stored("T", 0)
    metrics.observe_send("T", client_id, True, 3.0)
    metrics.observe_delivery("g", client_id, [msg])
    metrics.observe_await("g", client_id, [msg], 7.0)
    metrics.observe_process("T", "g", client_id, False, 70.0)


# -- ClientMetrics alone -------------------------------------------------------------------


def test_names_types_labels_and_buckets_are_rocketmq_5s() -> None:
    metrics = ClientMetrics()
    observe_each(metrics)
    families = {f.name: f for f in metrics.registry.collect()}
    assert set(families) == set(EXPECTED)
    for name, (labels, buckets) in EXPECTED.items():
        family = families[name]
        assert family.type == "histogram", name
        bucket_samples = [s for s in family.samples if s.name == f"{name}_bucket"]
        assert [s.labels["le"] for s in bucket_samples] == [
            *(str(float(b)) for b in buckets),
            "+Inf",
        ], name
        assert [k for k in bucket_samples[0].labels if k != "le"] == labels, name
    text = generate_latest(metrics.registry).decode()
    assert "# TYPE rocketmq_send_cost_time histogram" in text
    assert (
        'rocketmq_send_cost_time_bucket{client_id="c1",invocation_status="success",'
        'le="5.0",topic="T"} 1.0'
    ) in text
    assert (
        'rocketmq_process_time_count{client_id="c1",consumer_group="g",'
        'invocation_status="failure",topic="T"} 1.0'
    ) in text


def test_values_land_in_their_buckets() -> None:
    metrics = ClientMetrics()
    observe_each(metrics)
    get = metrics.registry.get_sample_value
    send = {"topic": "T", "client_id": "c1", "invocation_status": "success"}
    assert get("rocketmq_send_cost_time_bucket", {**send, "le": "1.0"}) == 0
    assert get("rocketmq_send_cost_time_bucket", {**send, "le": "5.0"}) == 1
    assert get("rocketmq_send_cost_time_sum", send) == 3.0
    consumer = {"topic": "T", "consumer_group": "g", "client_id": "c1"}
    # Stored at the epoch: a latency of decades lands above the last bucket only.
    assert get("rocketmq_delivery_latency_bucket", {**consumer, "le": "500.0"}) == 0
    assert get("rocketmq_delivery_latency_count", consumer) == 1
    assert get("rocketmq_await_time_bucket", {**consumer, "le": "20.0"}) == 1
    assert get("rocketmq_await_time_bucket", {**consumer, "le": "5.0"}) == 0
    failed = {**consumer, "invocation_status": "failure"}
    assert get("rocketmq_process_time_bucket", {**failed, "le": "100.0"}) == 1
    assert get("rocketmq_process_time_bucket", {**failed, "le": "10.0"}) == 0


def test_a_message_stored_after_now_has_no_negative_latency() -> None:
    metrics = ClientMetrics()
    future = stored("T", 2**62)
    metrics.observe_delivery("g", "c1", [future])
    labels = {"topic": "T", "consumer_group": "g", "client_id": "c1"}
    assert metrics.registry.get_sample_value("rocketmq_delivery_latency_sum", labels) == 0


def test_two_clients_share_one_registry() -> None:
    registry = CollectorRegistry()
    first, second = ClientMetrics(registry), ClientMetrics(registry)
    assert second.send_cost_time is first.send_cost_time
    assert second.process_time is first.process_time
    observe_each(first, "c1")
    observe_each(second, "c2")
    for cid in ("c1", "c2"):
        labels = {"topic": "T", "client_id": cid, "invocation_status": "success"}
        assert registry.get_sample_value("rocketmq_send_cost_time_count", labels) == 1


def test_labelled_children_are_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = ClientMetrics()
    calls: list[tuple[str, ...]] = []
    for histogram in (metrics.send_cost_time, metrics.delivery_latency, metrics.await_time):
        real = histogram.labels

        def counting(*values: str, real: Any = real) -> Histogram:
            calls.append(values)
            return real(*values)  # type: ignore[no-any-return]

        monkeypatch.setattr(histogram, "labels", counting)
    msgs = [stored("T", 0) for _ in range(32)]
    for _ in range(100):
        metrics.observe_send("T", "c1", True, 1.0)
        metrics.observe_delivery("g", "c1", msgs)
        metrics.observe_await("g", "c1", msgs, 1.0)
    assert len(calls) == 3


def test_a_registry_with_a_foreign_collector_of_that_name_is_refused() -> None:
    registry = CollectorRegistry()
    Histogram("rocketmq_await_time", "someone else's", registry=registry)
    with pytest.raises(ClientStateError, match="registry of its own"):
        ClientMetrics(registry)
    # Nothing half-registered is left behind.
    assert {f.name for f in registry.collect()} == {"rocketmq_await_time"}


async def test_clients_take_metrics_true_a_registry_or_nothing() -> None:
    shared = CollectorRegistry()
    off = Producer("pg-off", "127.0.0.1:1")
    assert off.metrics_registry is None and off._metrics is None
    own_a = Producer("pg-a", "127.0.0.1:1", metrics=True)
    own_b = PushConsumer("cg-b", "127.0.0.1:1", metrics=True)
    assert isinstance(own_a.metrics_registry, CollectorRegistry)
    assert isinstance(own_b.metrics_registry, CollectorRegistry)
    assert own_a.metrics_registry is not own_b.metrics_registry
    clients = [
        Producer("pg-s", "127.0.0.1:1", metrics=shared),
        Producer("pg-s2", "127.0.0.1:1", metrics=shared),
        PushConsumer("cg-s", "127.0.0.1:1", metrics=shared),
        PullConsumer("cg-s", "127.0.0.1:1", metrics=shared),
    ]
    assert all(c.metrics_registry is shared for c in clients)
    assert PullConsumer("cg-off", "127.0.0.1:1").metrics_registry is None
    with pytest.raises(ClientStateError, match="CollectorRegistry"):
        Producer("pg", "127.0.0.1:1", metrics="yes")  # type: ignore[arg-type]


# -- on a real cluster ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One nameserver and one broker for the module: each test uses topics of its own."""
    spec = ClusterSpec(data_dir=tmp_path_factory.mktemp("cluster"), broker_settings=SMALL_STORE)
    cluster = LocalCluster(spec)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


async def make_topic(namesrv: str, topic: str, queues: int = 2) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_a_send_and_a_batch_count_once_each(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "MetricsSend")
    async with Producer("pg-metrics", ns, metrics=True) as producer:
        registry = producer.metrics_registry
        assert registry is not None
        labels = {
            "topic": "MetricsSend",
            "client_id": producer.client.client_id,
            "invocation_status": "success",
        }
        await producer.send(Message("MetricsSend", b"one"))
        assert sample(registry, "rocketmq_send_cost_time_count", **labels) == 1
        await producer.send_batch([Message("MetricsSend", b"b%d" % i) for i in range(5)])
        assert sample(registry, "rocketmq_send_cost_time_count", **labels) == 2
        assert sample(registry, "rocketmq_send_cost_time_sum", **labels) > 0
        failed = {**labels, "invocation_status": "failure"}
        assert sample(registry, "rocketmq_send_cost_time_count", **failed) == 0


async def test_a_send_the_broker_refuses_counts_as_failure(cluster: LocalCluster) -> None:
    async with Producer("pg-metrics-fail", cluster.namesrv_addr, metrics=True) as producer:
        registry = producer.metrics_registry
        assert registry is not None
        # The auto-create template topic takes no messages: the broker refuses the send.
        with pytest.raises(MessageIllegalError, match="AUTO_CREATE_TOPIC_KEY_TOPIC"):
            await producer.send(Message("TBW102", b"x"))
        cid = producer.client.client_id
        for status, count in (("failure", 1), ("success", 0)):
            assert (
                sample(
                    registry,
                    "rocketmq_send_cost_time_count",
                    topic="TBW102",
                    client_id=cid,
                    invocation_status=status,
                )
                == count
            )


async def consume(
    ns: str, topic: str, group: str, n: int, registry: CollectorRegistry, **kwargs: Any
) -> tuple[PushConsumer, dict[str, int]]:
    """Send ``n`` messages to ``topic``, then consume them with a push consumer whose
    listener raises on a message's first delivery when ``fail_first`` is set; -> the
    (stopped) consumer and the listener's outcomes: calls that succeeded and failed, and
    messages consumed."""
    fail_first = kwargs.pop("fail_first", False)
    outcomes = {"success": 0, "failure": 0, "messages": 0}
    consumer = PushConsumer(
        group, ns, consume_from=ConsumeFrom.FIRST_OFFSET, metrics=registry, **kwargs
    )
    consumer.subscribe(topic, "*")

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        if fail_first and msgs[0].reconsume_times == 0:
            outcomes["failure"] += 1
            raise RuntimeError("first delivery fails")
        outcomes["success"] += 1
        outcomes["messages"] += len(msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(listener)
    async with Producer(f"pg-{group}", ns, metrics=registry) as producer:
        for i in range(n):
            await producer.send(Message(topic, b"m%d" % i), sharding_key=f"k{i % 3}")
    cid = consumer.client.client_id
    done = {"topic": topic, "consumer_group": group, "client_id": cid}
    await consumer.start()
    try:
        await wait_until(
            lambda: (
                outcomes["messages"] >= n
                and sample(
                    registry, "rocketmq_process_time_count", **done, invocation_status="success"
                )
                == outcomes["success"]
            ),
            lambda: f"{n} messages consumed and timed; the listener saw {outcomes}",
        )
    finally:
        await consumer.shutdown()
    return consumer, outcomes


async def test_a_push_consumer_records_delivery_await_and_process(
    cluster: LocalCluster,
) -> None:
    ns, topic, group, n = cluster.namesrv_addr, "MetricsPush", "cg-metrics-push", 10
    await make_topic(ns, topic)
    registry = CollectorRegistry()  # shared by the producer and the consumer
    consumer, outcomes = await consume(ns, topic, group, n, registry)
    labels = {"topic": topic, "consumer_group": group, "client_id": consumer.client.client_id}
    assert outcomes == {"success": n, "failure": 0, "messages": n}
    assert sample(registry, "rocketmq_delivery_latency_count", **labels) == n
    assert sample(registry, "rocketmq_await_time_count", **labels) == n
    for status, count in (("success", n), ("failure", 0)):
        assert (
            sample(registry, "rocketmq_process_time_count", **labels, invocation_status=status)
            == count
        )
    # The producer recorded into the same registry.
    sends = [
        s
        for f in registry.collect()
        if f.name == "rocketmq_send_cost_time"
        for s in f.samples
        if s.name.endswith("_count") and s.labels["topic"] == topic
    ]
    assert [s.value for s in sends] == [n]


async def test_a_failing_listener_is_timed_as_failure(cluster: LocalCluster) -> None:
    ns, topic, group, n = cluster.namesrv_addr, "MetricsRetry", "cg-metrics-retry", 4
    await make_topic(ns, topic)
    registry = CollectorRegistry()
    consumer, outcomes = await consume(ns, topic, group, n, registry, fail_first=True)
    labels = {"topic": topic, "consumer_group": group, "client_id": consumer.client.client_id}
    assert outcomes["failure"] == n
    assert (
        sample(registry, "rocketmq_process_time_count", **labels, invocation_status="failure") == n
    )
    # First deliveries and retries (restored to their topic) were all delivered and awaited.
    calls = outcomes["success"] + outcomes["failure"]
    assert sample(registry, "rocketmq_await_time_count", **labels) == calls
    assert sample(registry, "rocketmq_delivery_latency_count", **labels) >= calls


async def test_an_orderly_consumer_records_await_and_process(cluster: LocalCluster) -> None:
    ns, topic, group, n = cluster.namesrv_addr, "MetricsOrderly", "cg-metrics-orderly", 9
    await make_topic(ns, topic)
    registry = CollectorRegistry()
    consumer, outcomes = await consume(
        ns, topic, group, n, registry, orderly=True, consume_message_batch_max_size=2
    )
    labels = {"topic": topic, "consumer_group": group, "client_id": consumer.client.client_id}
    calls = outcomes["success"]
    assert n // 2 <= calls <= n  # batches of up to 2: one observation per listener call
    assert (
        sample(registry, "rocketmq_process_time_count", **labels, invocation_status="success")
        == calls
    )
    assert sample(registry, "rocketmq_await_time_count", **labels) == n
    assert sample(registry, "rocketmq_delivery_latency_count", **labels) == n


async def test_a_pull_consumer_records_delivery_latency(cluster: LocalCluster) -> None:
    ns, topic, group, n = cluster.namesrv_addr, "MetricsPull", "cg-metrics-pull", 6
    await make_topic(ns, topic)
    async with Producer("pg-metrics-pull", ns) as producer:
        await producer.send_batch([Message(topic, b"p%d" % i) for i in range(n)])
    consumer = PullConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET, metrics=True)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        got: list[MessageExt] = []
        async with asyncio.timeout(20):
            while len(got) < n:
                got += await consumer.poll(timeout=5)
    finally:
        await consumer.shutdown()
    registry = consumer.metrics_registry
    assert registry is not None
    labels = {"topic": topic, "consumer_group": group, "client_id": consumer.client.client_id}
    assert sample(registry, "rocketmq_delivery_latency_count", **labels) == n
    assert sample(registry, "rocketmq_await_time_count", **labels) == 0
