"""What the console shows of the brokers' apache.rocketmq.v2 endpoint: each broker's gRPC
endpoint on the cluster page, a RocketMQ 5 consumer among its group's connections (a pop
consumer over gRPC, with its own language) beside a remoting one, and a group's FIFO
switch (``consume_message_orderly``). Against a real cluster (one broker group serving the
endpoint on a free port, started by the launcher once for the module), through Starlette's
TestClient; the v5 consumer is registered by a Heartbeat through rocketq's own stubs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from starlette.testclient import TestClient

from rocketq import ConsumeResult, MessageExt, PushConsumer
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as sv
from rocketq.broker.grpc_v2 import service_pb2_grpc
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.cluster.pids import wait_until
from rocketq.console.app import create_app
from rocketq.console.cluster_view import grpc_endpoint
from rocketq.console.groups_view import connection_row, fifo_state
from rocketq.remoting.broker_tables import SubscriptionGroupConfig
from rocketq.sdk.admin import Admin
from rocketq.sdk.admin_wire import ConsumerConnection
from rocketq.sdk.background_loop import run_blocking
from tests.console.test_api import LOCAL
from tests.integration.conftest import SMALL_STORE

V5_GROUP = "cg-console-v5"
V5_CLIENT = "go-console-consumer-1"
REMOTING_GROUP = "cg-console-remoting"
TOPIC = "ConsoleV5"
WAIT = 20.0  # seconds a condition may take


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("console-v5"),
        brokers=1,
        broker_settings=SMALL_STORE,
        grpc=True,  # grpc_listen_port=0: the endpoint on a free port
    )
    with LocalCluster(spec) as started:
        yield started


@pytest.fixture(scope="module")
def client(cluster: LocalCluster) -> Iterator[TestClient]:
    with TestClient(create_app(cluster.namesrv_addr), base_url=LOCAL) as c:
        yield c


def v5_heartbeat(endpoint: str, group: str, client_id: str, language: str) -> None:
    """What a RocketMQ 5 push consumer sends every 10 s: its group, its client id and its
    language in the call's metadata. The broker lists it in the group from then on."""
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        beat = stub.Heartbeat(
            sv.HeartbeatRequest(
                group=d.Resource(name=group), client_type=d.ClientType.PUSH_CONSUMER
            ),
            metadata=[("x-mq-client-id", client_id), ("x-mq-language", language)],
            timeout=10,
        )
    assert beat.status.code == d.Code.OK, beat.status


def v5_terminate(endpoint: str, group: str, client_id: str) -> None:
    """The v5 consumer leaves (NotifyClientTermination)."""
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        stub.NotifyClientTermination(
            sv.NotifyClientTerminationRequest(group=d.Resource(name=group)),
            metadata=[("x-mq-client-id", client_id)],
            timeout=10,
        )


async def prepare_groups(ns: str) -> None:
    """The topic, a FIFO group for the v5 consumer and a plain one for the remoting one."""
    async with Admin(ns) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
        await admin.update_sub_group(V5_GROUP, consume_message_orderly=True)
        await admin.update_sub_group(REMOTING_GROUP, consume_message_orderly=False)


async def start_remoting_consumer(ns: str) -> PushConsumer:
    consumer = PushConsumer(REMOTING_GROUP, ns)
    consumer.subscribe(TOPIC, "*")

    async def consumed(msgs: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.SUCCESS

    consumer.on_message(consumed)
    await consumer.start()
    return consumer


def connections(client: TestClient, group: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = (
        client.get(f"/api/groups/{group}").json().get("connections", [])
    )
    return found


# -- against the cluster -------------------------------------------------------------------


def test_the_cluster_page_shows_each_brokers_grpc_endpoint(
    cluster: LocalCluster, client: TestClient
) -> None:
    (node,) = cluster.brokers
    assert node.grpc_port > 0
    (row,) = client.get("/api/cluster").json()["brokers"]
    expected = f"{node.host}:{node.grpc_port}"
    assert row["grpc_port"] == node.grpc_port and row["grpc_endpoint"] == expected
    page = client.get("/")
    assert page.status_code == 200
    assert f'<td class="grpc">{expected}</td>' in page.text and "gRPC endpoint" in page.text
    broker_page = client.get("/brokers/broker-a/0")
    assert broker_page.status_code == 200
    assert f"<strong>{expected}</strong>" in broker_page.text
    # The address is the endpoint's: a v2 call there is answered.
    v5_heartbeat(row["grpc_endpoint"], "cg-console-probe", "probe-1", "JAVA")
    v5_terminate(row["grpc_endpoint"], "cg-console-probe", "probe-1")


def test_a_v5_consumer_shows_as_pop_over_grpc_with_its_language(
    cluster: LocalCluster, client: TestClient
) -> None:
    ns = cluster.namesrv_addr
    run_blocking(prepare_groups(ns))
    endpoint = client.get("/api/cluster").json()["brokers"][0]["grpc_endpoint"]
    consumer = run_blocking(start_remoting_consumer(ns))
    try:
        v5_heartbeat(endpoint, V5_GROUP, V5_CLIENT, "GOLANG")
        deadline = time.monotonic() + WAIT
        assert wait_until(lambda: bool(connections(client, REMOTING_GROUP)), deadline), (
            "the remoting consumer is not listed"
        )

        v5 = client.get(f"/api/groups/{V5_GROUP}").json()
        (conn,) = v5["connections"]
        assert {
            "client_id": V5_CLIENT,
            "client_addr": "127.0.0.1",
            "language": "GOLANG",
            "version": None,  # a v5 client names no remoting release
            "protocol": "grpc",
            "consume_mode": "pop",
            "consume_type": "CONSUME_POP",
        }.items() <= conn.items()
        assert v5["fifo"] == "on"
        assert v5["config"]["broker-a"]["consume_message_orderly"] is True
        page = client.get(f"/groups/{V5_GROUP}")
        assert page.status_code == 200
        assert '<td class="consumes-by">pop (v5 gRPC)</td>' in page.text
        assert "<td>GOLANG</td>" in page.text and V5_CLIENT in page.text
        assert '<strong class="fifo-on">on</strong>' in page.text

        # The remoting consumer of the other group: push, its language and release.
        plain = client.get(f"/api/groups/{REMOTING_GROUP}").json()
        (other,) = plain["connections"]
        assert other["protocol"] == "remoting" and other["consume_mode"] == "push"
        assert other["language"] == "PYTHON" and str(other["version"]).startswith("rocketq ")
        assert plain["fifo"] == "off"
        page = client.get(f"/groups/{REMOTING_GROUP}")
        assert '<td class="consumes-by">push (remoting)</td>' in page.text
        assert '<strong class="fifo-off">off</strong>' in page.text
    finally:
        run_blocking(consumer.shutdown())
        v5_terminate(endpoint, V5_GROUP, V5_CLIENT)
    assert connections(client, V5_GROUP) == []


def test_a_broker_without_the_endpoint_says_off() -> None:
    assert grpc_endpoint("10.0.0.7:10911", {"grpcListenPort": "8081"}) == "10.0.0.7:8081"
    assert grpc_endpoint("[::1]:10911", {"grpcListenPort": "8081"}) == "[::1]:8081"
    assert grpc_endpoint("10.0.0.7:10911", {"grpcListenPort": "-1"}) == "off"
    assert grpc_endpoint("10.0.0.7:10911", {}) is None  # a broker that does not say


def test_the_fifo_switch_over_the_masters() -> None:
    def config(orderly: bool) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig("g", consume_message_orderly=orderly)

    assert fifo_state({}) is None
    assert fifo_state({"broker-a": config(True), "broker-b": config(True)}) == "on"
    assert fifo_state({"broker-a": config(False)}) == "off"
    assert fifo_state({"broker-a": config(True), "broker-b": config(False)}) == "mixed"


@pytest.mark.parametrize(
    ("consume_type", "version", "mode", "protocol", "release"),
    [
        ("CONSUME_POP", 0, "pop", "grpc", None),
        ("CONSUME_PASSIVELY", 407, "push", "remoting", "V4_9_7"),
        ("CONSUME_ACTIVELY", 10010, "pull", "remoting", "rocketq 0.1.0"),
        ("", 0, None, "remoting", None),
    ],
)
def test_a_connection_row_names_its_consume_mode_and_protocol(
    consume_type: str, version: int, mode: str | None, protocol: str, release: str | None
) -> None:
    conn = ConsumerConnection(
        client_id="c",
        client_addr="10.0.0.9",
        consume_type=consume_type,
        message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_LAST_OFFSET",
        subscriptions=(),
        language="JAVA",
        version=version,
    )
    row = connection_row(conn)
    assert (row["consume_mode"], row["protocol"], row["version"]) == (mode, protocol, release)
