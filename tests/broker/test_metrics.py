"""The broker's metrics: every family once with its documented labels, and each kind of
request moving the right series by the right amount.

A nameserver and a broker run in this process (the broker with a free metrics port), so a
test reads the broker's registry directly after driving it through its remoting handlers
(with the SDK, or with the SDK's requests sent as they are)."""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from rocketq import Message, Producer
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.broker.metrics import FIFO, NORMAL, BrokerCounters
from rocketq.cluster.launcher import free_ports
from rocketq.common.config import StoreConfig
from rocketq.common.metrics import MESSAGE_SIZE_BUCKETS
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.transport import request_once
from rocketq.sdk.admin import Admin
from rocketq.sdk.client_wire import parse_ok, send_back_request, update_offset_request
from rocketq.sdk.transaction import TransactionProducer, TransactionState
from rocketq.sdk.wire import PullOutcome, parse_pull, pull_request
from tests.integration.waiting import wait_until

BASE = ("cluster", "node_type", "node_id")
GROUP = ("topic", "consumer_group", "is_retry", "is_system")
# Every family a lone ASYNC_MASTER exports, with its type and labels (besides BASE).
DOCUMENTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "rocketmq_messages_in": ("counter", ("topic", "message_type", "is_system")),
    "rocketmq_throughput_in": ("counter", ("topic", "message_type", "is_system")),
    "rocketmq_message_size": ("histogram", ("topic", "message_type", "is_system")),
    "rocketmq_messages_out": ("counter", GROUP),
    "rocketmq_throughput_out": ("counter", GROUP),
    "rocketmq_send_to_dlq_messages": ("counter", ("topic", "consumer_group", "is_system")),
    "rocketmq_rpc_latency": (
        "histogram",
        ("protocol_type", "request_code", "response_code", "is_long_polling"),
    ),
    "rocketmq_consumer_lag_messages": ("gauge", GROUP),
    "rocketmq_consumer_lag_latency": ("gauge", GROUP),
    "rocketmq_consumer_inflight_messages": ("gauge", GROUP),
    "rocketmq_consumer_queueing_latency": ("gauge", GROUP),
    "rocketmq_consumer_ready_messages": ("gauge", GROUP),
    "rocketmq_producer_connections": ("gauge", ("language", "protocol_type")),
    "rocketmq_consumer_connections": (
        "gauge",
        ("consumer_group", "language", "consume_mode", "protocol_type", "is_system"),
    ),
    "rocketmq_topic_number": ("gauge", ()),
    "rocketmq_consumer_group_number": ("gauge", ()),
    "rocketmq_storage_size": ("gauge", ("storage_type",)),
    "rocketmq_storage_flush_behind_bytes": ("gauge", ("storage_type",)),
    "rocketmq_storage_dispatch_behind_bytes": ("gauge", ("storage_type",)),
    "rocketmq_storage_message_reserve_time": ("gauge", ("storage_type",)),
    "rocketq_storage_disk_total_bytes": ("gauge", ()),
    "rocketq_storage_disk_free_bytes": ("gauge", ()),
    "rocketq_storage_disk_used_ratio": ("gauge", ()),
    "rocketq_store_write_state": ("gauge", ()),
    "rocketmq_commit_messages": ("counter", ("topic",)),
    "rocketmq_rollback_messages": ("counter", ("topic",)),
    "rocketmq_half_messages": ("gauge", ("topic",)),
    "rocketmq_broker_permission": ("gauge", ()),
    "rocketmq_processor_watermark": ("gauge", ("processor",)),
    "rocketq_broker_ready": ("gauge", ()),
    "rocketq_broker_info": ("gauge", ("broker_id", "role", "version")),
    "rocketq_ha_slave_lag_bytes": ("gauge", ("slave",)),
    "rocketq_ha_sync_wait_seconds": ("histogram", ()),
    "rocketq_delay_backlog_messages": ("gauge", ("delay_level",)),
    "rocketq_timer_backlog_messages": ("gauge", ()),
    # The bounds of the remoting and metrics ports (remoting/bounds.py).
    "rocketq_remoting_rejected": ("counter", ("reason",)),
    "rocketq_remoting_connections": ("gauge", ()),
    "rocketq_remoting_buffered_bytes": ("gauge", ()),
    "rocketq_metrics_http_rejected": ("counter", ("reason",)),
}


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[str, Broker]]:
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    b = Broker(
        BrokerConfig(
            listen_port=0,
            ha_listen_port=0,
            metrics_port=free_ports(1)[0],
            namesrv_addr=f"127.0.0.1:{ns.port}",
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
        ),
    )
    await b.start()
    try:
        await wait_until(lambda: all(b.registration.registered.values()), "registration")
        yield f"127.0.0.1:{ns.port}", b
    finally:
        await b.stop()
        await ns.stop()


def registry(b: Broker) -> CollectorRegistry:
    assert b.metrics_server is not None
    return b.metrics_server.registry


def value(b: Broker, name: str, **labels: str) -> float:
    """A sample's value (0 when the series does not exist yet)."""
    base = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
    found = registry(b).get_sample_value(name, {**base, **labels})
    return found or 0.0


def rpc_count(b: Broker, request: str, response: str = "success", held: str = "false") -> float:
    return value(
        b,
        "rocketmq_rpc_latency_count",
        protocol_type="remoting",
        request_code=request,
        response_code=response,
        is_long_polling=held,
    )


async def test_every_family_once_with_its_documented_labels(broker: tuple[str, Broker]) -> None:
    namesrv, b = broker
    async with Producer("pg-labels", namesrv) as producer:
        await producer.send(Message("Labels", b"x"))
    families = [m for m in registry(b).collect() if not m.name.startswith(("process_", "python_"))]
    names = [m.name for m in families]
    assert len(names) == len(set(names)), "a family is exported twice"
    assert set(names) == set(DOCUMENTED)
    for m in families:
        kind, labels = DOCUMENTED[m.name]
        assert m.type == kind, m.name
        for sample in m.samples:
            extra = {"le"} if kind == "histogram" else set()
            assert set(sample.labels) - extra == {*BASE, *labels}, (m.name, sample.labels)


async def test_a_send_moves_messages_bytes_size_and_latency(broker: tuple[str, Broker]) -> None:
    namesrv, b = broker
    labels = {"topic": "Sent", "message_type": "normal", "is_system": "false"}
    async with Producer("pg-sent", namesrv) as producer:
        await producer.send(Message("Sent", b"a" * 100))
        before = value(b, "rocketmq_messages_in_total", **labels)
        bytes_before = value(b, "rocketmq_throughput_in_total", **labels)
        sends_before = rpc_count(b, "send_message")
        await producer.send(Message("Sent", b"b" * 2000))
        assert value(b, "rocketmq_messages_in_total", **labels) == before + 1
        grew = value(b, "rocketmq_throughput_in_total", **labels) - bytes_before
        assert 2000 < grew < 2300  # the stored record: body plus header and properties
        assert rpc_count(b, "send_message") == sends_before + 1
        batches_before = rpc_count(b, "send_batch_message")
        await producer.send_batch([Message("Sent", b"c" * 10) for _ in range(3)])
    assert value(b, "rocketmq_messages_in_total", **labels) == before + 4
    assert rpc_count(b, "send_batch_message") == batches_before + 1
    # The batch went into the 1 KiB bucket, the 2000-byte message above it.
    assert value(b, "rocketmq_message_size_bucket", **labels, le="1024") == before + 3
    assert value(b, "rocketmq_message_size_count", **labels) == before + 4


async def test_delayed_and_transactional_sends_have_their_message_type(
    broker: tuple[str, Broker],
) -> None:
    namesrv, b = broker

    class Commit:
        async def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
            return TransactionState.COMMIT

        def check_local_transaction(self, msg: object) -> TransactionState:
            return TransactionState.COMMIT

    async with Producer("pg-delay", namesrv) as producer:
        await producer.send(Message("Typed", b"later", delay_level=1))
    assert (
        value(
            b, "rocketmq_messages_in_total", topic="Typed", message_type="delay", is_system="false"
        )
        == 1
    )
    async with TransactionProducer("tpg-metrics", namesrv, listener=Commit()) as tp:
        await tp.send_message_in_transaction(Message("Typed", b"paid"))
    assert (
        value(
            b,
            "rocketmq_messages_in_total",
            topic="Typed",
            message_type="transaction",
            is_system="false",
        )
        == 1
    )
    await wait_until(
        lambda: value(b, "rocketmq_commit_messages_total", topic="Typed") == 1, "the commit"
    )
    assert value(b, "rocketmq_half_messages", topic="Typed") == 0
    assert rpc_count(b, "end_transaction") == 1


async def test_a_pull_moves_messages_out_and_the_lag_gauges(broker: tuple[str, Broker]) -> None:
    namesrv, b = broker
    async with Admin(namesrv) as admin:
        await admin.update_topic("Pulled", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-pull", namesrv) as producer:
        for i in range(5):
            await producer.send(Message("Pulled", b"m%d" % i))
    group = {
        "topic": "Pulled",
        "consumer_group": "cg-pull",
        "is_retry": "false",
        "is_system": "false",
    }
    addr = b.config.broker_addr
    # The group committed offset 1 and pulls 3 from there: 1 consumed, 3 in flight, 1 ready.
    parse_ok(await request_once(addr, update_offset_request("cg-pull", "Pulled", 0, 1), 5.0))
    pull = pull_request(group="cg-pull", topic="Pulled", queue_id=0, offset=1, max_msg_nums=3)
    got = parse_pull(await request_once(addr, pull, 5.0))
    assert got.outcome is PullOutcome.FOUND and got.next_begin_offset == 4
    assert value(b, "rocketmq_messages_out_total", **group) == 3
    assert value(b, "rocketmq_throughput_out_total", **group) == len(got.records)
    assert rpc_count(b, "pull_message") == 1
    assert value(b, "rocketmq_consumer_lag_messages", **group) == 4
    assert value(b, "rocketmq_consumer_inflight_messages", **group) == 3
    assert value(b, "rocketmq_consumer_ready_messages", **group) == 1
    assert value(b, "rocketmq_consumer_lag_latency", **group) >= 0
    # The broker's offset table persists what consumers commit; lag follows it.
    b.offsets.commit("cg-pull", "Pulled", 0, 5)
    assert value(b, "rocketmq_consumer_lag_messages", **group) == 0
    assert value(b, "rocketmq_consumer_lag_latency", **group) == 0


async def test_a_retry_and_a_dlq_move_count_as_send_backs(broker: tuple[str, Broker]) -> None:
    namesrv, b = broker
    async with Producer("pg-back", namesrv) as producer:
        first = await producer.send(Message("Back", b"retry me"))
        second = await producer.send(Message("Back", b"give up"))
    dlq = {"topic": "Back", "consumer_group": "cg-back", "is_system": "false"}
    addr = b.config.broker_addr

    async def send_back(offset: int, max_reconsume_times: int) -> int:
        request = send_back_request(
            "cg-back",
            offset,
            delay_level=0,
            origin_msg_id="",
            origin_topic="Back",
            max_reconsume_times=max_reconsume_times,
        )
        return (await request_once(addr, request, 5.0)).code

    assert await send_back(int(first.offset_msg_id[16:], 16), 16) == ResponseCode.SUCCESS
    assert rpc_count(b, "consumer_send_msg_back") == 1
    assert value(b, "rocketmq_send_to_dlq_messages_total", **dlq) == 0
    assert await send_back(int(second.offset_msg_id[16:], 16), 0) == ResponseCode.SUCCESS
    assert value(b, "rocketmq_send_to_dlq_messages_total", **dlq) == 1
    assert rpc_count(b, "consumer_send_msg_back") == 2
    # A refused request is counted under its response code.
    assert await send_back(1 << 40, 0) == ResponseCode.QUERY_NOT_FOUND
    assert rpc_count(b, "consumer_send_msg_back", "query_not_found") == 1


async def test_the_http_endpoints(broker: tuple[str, Broker]) -> None:
    _, b = broker
    assert b.metrics_server is not None
    root = f"http://127.0.0.1:{b.metrics_server.port}"

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(root + path, timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    import asyncio

    status, text = await asyncio.to_thread(get, "/metrics")
    assert status == 200 and "rocketmq_topic_number{" in text
    assert await asyncio.to_thread(get, "/healthz") == (200, "ok\n")
    assert await asyncio.to_thread(get, "/readyz") == (200, "ready\n")
    assert (await asyncio.to_thread(get, "/nothing"))[0] == 404
    b.stopping = True
    status, text = await asyncio.to_thread(get, "/readyz")
    b.stopping = False
    assert status == 503 and "stopping" in text


async def test_queue_level_lag_has_a_series_per_queue(broker: tuple[str, Broker]) -> None:
    namesrv, b = broker
    async with Admin(namesrv) as admin:
        await admin.update_topic("PerQueue", read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg-queues", namesrv) as producer:
        for i in range(6):
            await producer.send(Message("PerQueue", b"q%d" % i))
    ends = [b.store.max_offset_in_queue("PerQueue", q) for q in (0, 1)]
    b.offsets.commit("cg-queues", "PerQueue", 0, 0)
    b.offsets.commit("cg-queues", "PerQueue", 1, ends[1])
    group = {"topic": "PerQueue", "consumer_group": "cg-queues", "is_retry": "false"}
    labels = {**group, "is_system": "false"}
    assert value(b, "rocketmq_consumer_lag_messages", **labels) == ends[0]
    b.config = replace(b.config, metrics_queue_level=True)
    assert value(b, "rocketmq_consumer_lag_messages", **labels, queue_id="0") == ends[0]
    assert value(b, "rocketmq_consumer_lag_messages", **labels, queue_id="1") == 0
    # Per queue only: no series without the queue_id label then.
    assert (
        registry(b).get_sample_value(
            "rocketmq_consumer_lag_messages",
            {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", **labels},
        )
        is None
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["A", "B"]),
            st.sampled_from([NORMAL, FIFO]),
            st.integers(min_value=0, max_value=64),
            st.integers(min_value=0, max_value=9 * 1024**2),
        ),
        max_size=20,
    )
)
def test_stored_counts_each_topic_and_type_in_its_size_bucket(
    sends: list[tuple[str, str, int, int]],
) -> None:
    """Each (topic, message type) row holds its messages, bytes and, per size bucket (the
    first bound at least the mean message size, else the last), its messages."""
    counters = BrokerCounters()
    expected: dict[tuple[str, str], list[int]] = {}
    for topic, kind, count, size in sends:
        counters.stored(topic, kind, count, size)
        row = expected.setdefault((topic, kind), [0] * (3 + len(MESSAGE_SIZE_BUCKETS)))
        row[0] += count
        row[1] += size
        mean = size // count if count else size
        slot = next(
            (i for i, bound in enumerate(MESSAGE_SIZE_BUCKETS) if mean <= bound),
            len(MESSAGE_SIZE_BUCKETS),
        )
        row[2 + slot] += count
    assert counters.messages_in == expected
