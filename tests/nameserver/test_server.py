"""The nameserver over RocketMQ's remoting protocol on real TCP (127.0.0.1, port 0):
registration through a broker's connection, the three removal triggers (closed connection,
silence, unregister), the read requests and the JSON forms of their bodies, KV config,
persistence across a restart, independence of nameservers, a SIGKILLed broker process, and
requests that are refused (unknown code, damaged body, missing header field).

Removal tests that must prove the *connection* removed a broker run a nameserver whose
expiry is a minute, so the silent-broker scan cannot be what removed it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Final

import pytest

from rocketq.common.exceptions import ConfigError
from rocketq.common.message import PERM_READ, PERM_WRITE, TopicConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import ORDER_TOPIC_CONFIG, NameServer
from rocketq.remoting import fastjson
from rocketq.remoting.codes import (
    LanguageCode,
    MQVersion,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rocketq.remoting.command import VERSION, RemotingCommand
from rocketq.remoting.register_body import crc32, encode_body
from rocketq.remoting.route_data import (
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
    parse_cluster_info,
    parse_route,
)
from rocketq.remoting.transport import Connection, connect, request_once

RW: Final = PERM_READ | PERM_WRITE
SUCCESS: Final = ResponseCode.SUCCESS
TOPIC_NOT_EXIST: Final = ResponseCode.TOPIC_NOT_EXIST
QUERY_NOT_FOUND: Final = ResponseCode.QUERY_NOT_FOUND
TIMEOUT: Final = 5.0  # seconds, each request
# Long enough that the silent-broker scan never fires during a test.
NO_EXPIRY: Final = {"broker_channel_expired_time": 60_000}
REPO: Final = Path(__file__).resolve().parents[2]
BROKER_A: Final = "127.0.0.1:10911"


def ns_config(tmp_path: Path, **overrides: Any) -> NameServerConfig:
    settings: dict[str, Any] = {
        "listen_port": 0,
        "metrics_port": 0,
        "kv_config_path": str(tmp_path / "kv.json"),
        "scan_not_active_broker_interval": 100,
        "broker_channel_expired_time": 500,
        **overrides,
    }
    return NameServerConfig(**settings)


def ns_addr(ns: NameServer) -> str:
    return f"127.0.0.1:{ns.port}"


def register_request(
    name: str = "broker-a",
    addr: str = BROKER_A,
    *,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    topics: Iterable[str] = ("TopicA",),
    queues: int = 4,
    data_version: int = 1,
    ha: str = "",
    max_phy_offset: int = 0,
    kind: str = "FULL",
    base_version: int | None = None,
    deleted: Iterable[str] = (),
) -> RemotingCommand:
    """A REGISTER_BROKER as rocketq's brokers send it: the RocketMQ header fields, rocketq's
    ``registerKind``/``dataVersion``/``maxPhyOffset``, and (FULL, DELTA) the compressed
    table with its CRC. ``topics`` are the table (FULL) or the topics put (DELTA)."""
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": cluster,
        "haServerAddr": ha,
        "brokerId": str(broker_id),
        "maxPhyOffset": str(max_phy_offset),
        "registerKind": kind,
        "dataVersion": str(data_version),
    }
    body = None
    if kind != "HEARTBEAT":
        configs = [TopicConfig(t, queues, queues, RW) for t in topics]
        body = encode_body(configs, data_version, list(deleted) if kind == "DELTA" else None)
        ext["compressed"] = "true"
        ext["bodyCrc32"] = str(crc32(body))
    if base_version is not None:
        ext["baseVersion"] = str(base_version)
    return RemotingCommand(RequestCode.REGISTER_BROKER, ext, body)


def unregister_request(register: RemotingCommand) -> RemotingCommand:
    """The UNREGISTER_BROKER of the broker that ``register`` registers."""
    ext = register.ext or {}
    fields = ("clusterName", "brokerName", "brokerId", "brokerAddr")
    return RemotingCommand(RequestCode.UNREGISTER_BROKER, {k: ext[k] for k in fields})


class BrokerConnection:
    """A broker's channel to one nameserver: one connection carrying its REGISTER_BROKER and
    UNREGISTER_BROKER requests. Closing it is what the broker's end looks like."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def register(self, req: RemotingCommand) -> RemotingCommand:
        return await self.conn.invoke(req, TIMEOUT)

    async def unregister(self, req: RemotingCommand) -> RemotingCommand:
        return await self.conn.invoke(unregister_request(req), TIMEOUT)

    def close(self) -> None:
        """A clean end (FIN), as a broker that stops."""
        self.conn.close()

    def abort(self) -> None:
        """An abrupt end (RST), as a broker that dies."""
        assert self.conn.transport is not None
        self.conn.transport.abort()


class Client:
    """A client's or admin's connection to one nameserver."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def call(
        self,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes | None = None,
        **options: Any,
    ) -> RemotingCommand:
        return await self.conn.invoke(RemotingCommand(code, ext, body, **options), TIMEOUT)

    async def ok(
        self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        answer = await self.call(code, ext, body)
        assert answer.code == SUCCESS, f"{RequestCode.NAMES[code]}: {answer!r}"
        return answer

    async def route_code(self, topic: str) -> int:
        return (await self.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code

    async def route(self, topic: str) -> TopicRouteData:
        answer = await self.ok(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return parse_route(answer.body or b"")

    async def cluster_info(self) -> ClusterInfo:
        answer = await self.ok(RequestCode.GET_BROKER_CLUSTER_INFO)
        return parse_cluster_info(answer.body or b"")

    async def topic_list(self) -> list[str]:
        answer = await self.ok(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return list(json.loads(bytes(answer.body or b""))["topicList"])

    async def put_kv(self, namespace: str, key: str, value: str) -> RemotingCommand:
        ext = {"namespace": namespace, "key": key, "value": value}
        return await self.call(RequestCode.PUT_KV_CONFIG, ext)

    async def get_kv(self, namespace: str, key: str) -> RemotingCommand:
        return await self.call(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})


class Harness:
    """Nameservers and connections of one test; ``close`` ends them all, connections
    first."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.servers: list[NameServer] = []
        self.connections: list[Connection] = []

    async def start(self, **overrides: Any) -> NameServer:
        ns = NameServer(ns_config(self.tmp_path, **overrides))
        await ns.start()
        self.servers.append(ns)
        return ns

    async def stop(self, ns: NameServer) -> None:
        self.servers.remove(ns)
        await ns.stop()

    async def connect(self, ns: NameServer) -> Connection:
        conn = await connect(ns_addr(ns), {})
        self.connections.append(conn)
        return conn

    async def broker(self, ns: NameServer) -> BrokerConnection:
        return BrokerConnection(await self.connect(ns))

    async def client(self, ns: NameServer) -> Client:
        return Client(await self.connect(ns))

    async def close(self) -> None:
        for conn in reversed(self.connections):
            conn.close()
        for conn in self.connections:
            await asyncio.wait_for(asyncio.shield(conn.closed), TIMEOUT)
        errors: list[BaseException] = []
        for ns in reversed(self.servers):
            try:
                await ns.stop()
            except Exception as exc:  # stop the others, then report
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def ns(harness: Harness) -> NameServer:
    """A nameserver with the short test expiry (500 ms, scanned every 100 ms)."""
    return await harness.start()


@pytest.fixture
async def client(harness: Harness, ns: NameServer) -> Client:
    return await harness.client(ns)


@pytest.fixture
async def broker(harness: Harness, ns: NameServer) -> BrokerConnection:
    return await harness.broker(ns)


async def wait_until(
    check: Callable[[], Awaitable[bool]], what: str, timeout: float = 5.0
) -> float:
    """Poll ``check`` every 20 ms until it holds; the seconds it took."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


def route_gone(client: Client, topic: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await client.route_code(topic) == TOPIC_NOT_EXIST

    return check


# ---------------------------------------------------------------- registration and routes


async def test_broker_registers_through_its_connection(
    harness: Harness, ns: NameServer, client: Client
) -> None:
    master = await harness.broker(ns)
    req = register_request(topics=("TopicA", "TopicB"), queues=8, ha="127.0.0.1:10912")

    answer = await master.register(req)

    assert answer.code == SUCCESS
    assert answer.ext == {"dataVersion": "1"}  # no masterAddr/haServerAddr for a master
    assert answer.body is None  # no ORDER_TOPIC_CONFIG to hand back

    route = await client.route("TopicA")
    assert route.queue_datas == [QueueData("broker-a", 8, 8, RW, 0)]
    assert route.broker_datas == [BrokerData("DefaultCluster", "broker-a", {0: BROKER_A})]
    assert route.order_topic_conf == ""

    slave = await harness.broker(ns)
    answer = await slave.register(register_request(addr="127.0.0.1:10921", broker_id=1))
    assert answer.code == SUCCESS
    assert answer.ext is not None
    assert answer.ext["masterAddr"] == BROKER_A
    assert answer.ext["haServerAddr"] == "127.0.0.1:10912"
    route = await client.route("TopicB")
    assert route.broker_datas[0].broker_addrs == {0: BROKER_A, 1: "127.0.0.1:10921"}


async def test_registration_without_name_or_address_is_refused(
    broker: BrokerConnection, client: Client
) -> None:
    answer = await broker.register(register_request(name=""))

    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert "brokerName" in str(answer.remark)
    assert await client.route_code("TopicA") == TOPIC_NOT_EXIST
    # The connection stays usable.
    assert (await broker.register(register_request())).code == SUCCESS


async def test_unknown_topic_is_topic_not_exist(broker: BrokerConnection, client: Client) -> None:
    await broker.register(register_request())

    answer = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})

    assert answer.code == TOPIC_NOT_EXIST
    assert "NoSuchTopic" in str(answer.remark)
    assert answer.body is None


async def test_order_topic_conf_comes_from_kv_when_enabled(harness: Harness) -> None:
    ns = await harness.start(order_message_enable=True)
    client = await harness.client(ns)
    broker = await harness.broker(ns)
    await broker.register(register_request())
    assert (await client.put_kv(ORDER_TOPIC_CONFIG, "TopicA", "broker-a:4")).code == SUCCESS

    route = await client.route("TopicA")

    assert route.order_topic_conf == "broker-a:4"
    # A registration's answer hands the namespace back to the broker (a KVTable).
    answer = await broker.register(register_request())
    assert json.loads(bytes(answer.body or b"")) == {"table": {"TopicA": "broker-a:4"}}


ROUTE_STANDARD: Final = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":'
    b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
# What a 4.9 nameserver writes for an older client: fastjson's bare broker ids.
ROUTE_BARE: Final = ROUTE_STANDARD.replace(b'{"0":', b"{0:")


@pytest.mark.parametrize(
    ("version", "accept_standard", "expected"),
    [
        pytest.param(VERSION, None, ROUTE_STANDARD, id="ours"),
        pytest.param(MQVersion.V4_9_4, None, ROUTE_STANDARD, id="4.9.4"),
        pytest.param(MQVersion.V4_9_0, None, ROUTE_BARE, id="4.9.0"),
        pytest.param(MQVersion.V3_4_9, None, ROUTE_BARE, id="ali-ons"),
        pytest.param(MQVersion.V3_4_9, "true", ROUTE_STANDARD, id="ali-ons-accept-standard"),
        pytest.param(MQVersion.V4_9_0, "false", ROUTE_BARE, id="4.9.0-accept-bare"),
    ],
)
async def test_route_body_json_form_follows_the_client_version(
    broker: BrokerConnection,
    client: Client,
    version: int,
    accept_standard: str | None,
    expected: bytes,
) -> None:
    await broker.register(register_request())
    ext = {"topic": "TopicA"}
    if accept_standard is not None:
        ext["acceptStandardJsonOnly"] = accept_standard

    answer = await client.call(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=version, language=LanguageCode.JAVA
    )

    assert answer.code == SUCCESS
    body = bytes(answer.body or b"")
    assert body == expected
    if expected == ROUTE_STANDARD:
        assert json.loads(body)["brokerDatas"][0]["brokerAddrs"] == {"0": BROKER_A}
    else:
        with pytest.raises(json.JSONDecodeError):
            json.loads(body)  # only fastjson's dialect reads it
    assert parse_route(body) == TopicRouteData(
        [QueueData("broker-a", 4, 4, RW, 0)],
        [BrokerData("DefaultCluster", "broker-a", {0: BROKER_A})],
    )


async def test_requests_in_rocketmq_binary_headers_are_answered_alike(
    broker: BrokerConnection, client: Client
) -> None:
    await broker.register(register_request())

    answer = await client.call(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": "TopicA"},
        serialize_type=SerializeType.ROCKETMQ,
    )

    assert answer.code == SUCCESS and answer.serialize_type == SerializeType.ROCKETMQ
    assert bytes(answer.body or b"") == ROUTE_STANDARD


async def test_cluster_info_and_topic_list(
    harness: Harness, ns: NameServer, client: Client
) -> None:
    a = register_request(
        "broker-a", "127.0.0.1:1001", cluster="C1", topics=("T1", "T2"), ha="127.0.0.1:1002"
    )
    brokers = [await harness.broker(ns) for _ in range(3)]
    await brokers[0].register(a)
    await brokers[1].register(
        register_request("broker-a", "127.0.0.1:1011", broker_id=1, cluster="C1", topics=())
    )
    await brokers[2].register(
        register_request(
            "broker-b", "127.0.0.1:2001", cluster="C2", topics=("T2", "T3"), max_phy_offset=77
        )
    )

    answer = await client.ok(RequestCode.GET_BROKER_CLUSTER_INFO)
    info = parse_cluster_info(answer.body or b"")

    assert set(info.broker_addr_table) == {"broker-a", "broker-b"}
    assert info.broker_addr_table["broker-a"].broker_addrs == {
        0: "127.0.0.1:1001",
        1: "127.0.0.1:1011",
    }
    assert info.broker_addr_table["broker-b"].cluster == "C2"
    assert info.cluster_addr_table == {"C1": ["broker-a"], "C2": ["broker-b"]}
    # Cluster info goes in fastjson's default form whatever the client's version.
    assert b'"brokerAddrs":{0:"127.0.0.1:1001",1:"127.0.0.1:1011"}' in bytes(answer.body or b"")
    # What RocketMQ's cluster info leaves out, the nameserver still keeps of each broker.
    live = ns.routes.broker_live_table
    assert set(live) == {"127.0.0.1:1001", "127.0.0.1:1011", "127.0.0.1:2001"}
    assert live["127.0.0.1:1001"].ha_server_addr == "127.0.0.1:1002"
    assert live["127.0.0.1:2001"].max_phy_offset == 77

    assert await client.topic_list() == ["T1", "T2", "T3"]


async def test_topics_by_cluster(harness: Harness, ns: NameServer, client: Client) -> None:
    a, b = await harness.broker(ns), await harness.broker(ns)
    await a.register(register_request("broker-a", cluster="C1", topics=("T1", "T2")))
    await b.register(register_request("broker-b", "127.0.0.1:2", cluster="C2", topics=("T2", "T3")))

    async def topics(cluster: str) -> list[str]:
        answer = await client.ok(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
        return list(json.loads(bytes(answer.body or b""))["topicList"])

    assert await topics("C1") == ["T1", "T2"]
    assert await topics("C2") == ["T2", "T3"]
    assert await topics("NoSuchCluster") == []


async def test_delete_topic_in_namesrv(harness: Harness, ns: NameServer, client: Client) -> None:
    a, b = await harness.broker(ns), await harness.broker(ns)
    await a.register(register_request("broker-a", cluster="C1", topics=("T",)))
    await b.register(register_request("broker-b", "127.0.0.1:2", cluster="C2", topics=("T", "U")))

    await client.ok(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": "C1"})
    route = await client.route("T")
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]

    await client.ok(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    assert await client.route_code("T") == TOPIC_NOT_EXIST
    assert await client.topic_list() == ["U"]


async def test_full_registration_with_a_compressed_body(
    broker: BrokerConnection, client: Client
) -> None:
    names = tuple(f"T{i}" for i in range(2000))

    answer = await broker.register(register_request(topics=names, data_version=3))

    assert answer.code == SUCCESS
    assert answer.ext == {"dataVersion": "3"}  # and no needFull
    assert await client.topic_list() == sorted(names)


# A stock 4.9 broker's registration (compressedRegister=false): RegisterBrokerBody as JSON.
STOCK_BODY: Final = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,'
    b'"timestamp":0},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,'
    b'"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4},'
    b'"Ordered":{"order":true,"perm":4,"readQueueNums":2,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"Ordered","topicSysFlag":1,"writeQueueNums":8}}}}'
)


async def test_a_stock_brokers_uncompressed_json_registration(
    ns: NameServer, broker: BrokerConnection, client: Client
) -> None:
    stock = RemotingCommand(
        RequestCode.REGISTER_BROKER,
        {
            "brokerName": "broker-a",
            "brokerAddr": BROKER_A,
            "clusterName": "DefaultCluster",
            "haServerAddr": "127.0.0.1:10912",
            "brokerId": "0",
            "compressed": "false",
            "bodyCrc32": str(crc32(STOCK_BODY)),
        },
        STOCK_BODY,
        language=LanguageCode.JAVA,
        version=MQVersion.V4_9_4,
    )

    answer = await broker.register(stock)

    assert answer.code == SUCCESS, answer.remark
    assert answer.ext == {"dataVersion": "1"}  # the body's DataVersion counter
    assert ns.routes.held_table(BROKER_A) == {
        "T": TopicConfig("T", 4, 4, 6),
        "Ordered": TopicConfig("Ordered", 2, 8, 4, 1, True),
    }
    route = await client.route("Ordered")
    assert route.queue_datas == [QueueData("broker-a", 2, 8, 4, 1)]
    # A stock broker sends the whole table every 30 s: the same again is taken.
    assert (await broker.register(stock)).code == SUCCESS


async def test_damaged_body_is_refused_and_changes_nothing(
    harness: Harness, ns: NameServer, broker: BrokerConnection, client: Client
) -> None:
    await broker.register(register_request(topics=("T",), data_version=1))
    damaged = register_request(topics=("T", "U"), data_version=2)
    assert damaged.ext is not None
    damaged.ext["bodyCrc32"] = str(int(damaged.ext["bodyCrc32"]) ^ 1)

    answer = await broker.register(damaged)

    assert answer.code != SUCCESS
    remark = str(answer.remark)
    assert "CRC32" in remark and "broker-a" in remark and "damaged" in remark
    assert await client.route_code("U") == TOPIC_NOT_EXIST
    assert ns.routes.held_table(BROKER_A) == {"T": TopicConfig("T", 4, 4, RW)}
    heartbeat = register_request(topics=(), data_version=1, kind="HEARTBEAT")
    assert (await broker.register(heartbeat)).ext == {"dataVersion": "1"}  # version 1 held

    # A broker whose first registration is damaged is not registered at all.
    other = await harness.broker(ns)
    damaged = register_request("broker-b", "127.0.0.1:2", topics=("B",))
    assert damaged.ext is not None
    damaged.ext["bodyCrc32"] = str(int(damaged.ext["bodyCrc32"]) ^ 1)
    assert (await other.register(damaged)).code != SUCCESS
    assert set((await client.cluster_info()).broker_addr_table) == {"broker-a"}


async def test_deltas_and_heartbeats_on_the_connection(
    broker: BrokerConnection, client: Client
) -> None:
    heartbeat = register_request(topics=(), data_version=1, kind="HEARTBEAT")

    # Unknown here: the full table is asked for, nothing is registered.
    refused = await broker.register(heartbeat)
    assert refused.code == SUCCESS
    assert refused.ext == {"dataVersion": "-1", "needFull": "true"}
    assert (await client.cluster_info()).broker_addr_table == {}

    await broker.register(register_request(topics=("A", "B"), data_version=1))
    assert (await broker.register(heartbeat)).ext == {"dataVersion": "1"}

    change = register_request(
        topics=("C",), queues=2, data_version=3, kind="DELTA", base_version=1, deleted=("A",)
    )
    answer = await broker.register(change)

    assert answer.ext == {"dataVersion": "3"}
    assert await client.topic_list() == ["B", "C"]
    assert (await client.route("C")).queue_datas[0].write_queue_nums == 2

    # The same delta again does not apply to version 3: the full table is asked for.
    again = await broker.register(change)
    assert again.ext == {"dataVersion": "3", "needFull": "true"}
    assert (await broker.register(heartbeat)).ext == {  # version 1 is no longer held
        "dataVersion": "3",
        "needFull": "true",
    }
    assert await client.topic_list() == ["B", "C"]


async def test_query_data_version_says_whether_the_table_changed(
    ns: NameServer, broker: BrokerConnection
) -> None:
    await broker.register(register_request(data_version=5))

    async def query(counter: int, addr: str = BROKER_A) -> RemotingCommand:
        header = {
            "brokerName": "broker-a",
            "brokerAddr": addr,
            "clusterName": "DefaultCluster",
            "brokerId": "0",
        }
        body = fastjson.dumps({"counter": counter, "timestamp": 1700000000000})
        cmd = RemotingCommand(RequestCode.QUERY_DATA_VERSION, header, body)
        return await broker.conn.invoke(cmd, TIMEOUT)

    before = ns.routes.broker_live_table[BROKER_A].last_update_timestamp
    same = await query(5)
    assert (same.code, same.ext) == (SUCCESS, {"changed": "false"})
    assert json.loads(bytes(same.body or b""))["counter"] == 5
    # Unchanged: the query counts as a sign of life.
    assert ns.routes.broker_live_table[BROKER_A].last_update_timestamp > before

    changed = await query(6)
    assert changed.ext == {"changed": "true"}
    assert json.loads(bytes(changed.body or b""))["counter"] == 5  # what is held here

    unknown = await query(5, "127.0.0.1:9")
    assert unknown.ext == {"changed": "true"} and unknown.body is None


# ---------------------------------------------------------------- refused requests


async def test_an_unknown_request_code_is_not_supported(client: Client) -> None:
    # A broker's request sent to the nameserver, then a code nobody has.
    answer = await client.call(RequestCode.SEND_MESSAGE, {"topic": "T"})
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "SEND_MESSAGE" in str(answer.remark)
    answer = await client.call(9999)
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "9999" in str(answer.remark)
    # The connection still works.
    assert await client.topic_list() == []


def without(cmd: RemotingCommand, field: str) -> RemotingCommand:
    assert cmd.ext is not None
    del cmd.ext[field]
    return cmd


_BROKER_FIELDS: Final = {
    "clusterName": "DefaultCluster",
    "brokerName": "broker-a",
    "brokerId": "0",
    "brokerAddr": BROKER_A,
}


@pytest.mark.parametrize(
    ("request_", "missing"),
    [
        (without(register_request(), "clusterName"), "clusterName"),
        (without(register_request(), "brokerAddr"), "brokerAddr"),
        (without(register_request(), "brokerId"), "brokerId"),
        (without(register_request(kind="HEARTBEAT"), "dataVersion"), "dataVersion"),
        (register_request(kind="DELTA", data_version=2), "baseVersion"),
        (
            without(
                RemotingCommand(RequestCode.UNREGISTER_BROKER, dict(_BROKER_FIELDS)), "brokerAddr"
            ),
            "brokerAddr",
        ),
        (RemotingCommand(RequestCode.QUERY_DATA_VERSION, {}), "brokerAddr"),
        (RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC), "topic"),
        (RemotingCommand(RequestCode.GET_TOPICS_BY_CLUSTER, {}), "cluster"),
        (RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"clusterName": "C"}), "topic"),
        (RemotingCommand(RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k"}), "value"),
        (RemotingCommand(RequestCode.GET_KV_CONFIG, {"namespace": "NS"}), "key"),
        (RemotingCommand(RequestCode.DELETE_KV_CONFIG, {"key": "k"}), "namespace"),
        (RemotingCommand(RequestCode.GET_KVLIST_BY_NAMESPACE, {}), "namespace"),
    ],
    ids=lambda p: RequestCode.NAMES[p.code] if isinstance(p, RemotingCommand) else str(p),
)
async def test_a_missing_header_field_is_answered_with_its_name(
    ns: NameServer, broker: BrokerConnection, request_: RemotingCommand, missing: str
) -> None:
    answer = await broker.conn.invoke(request_, TIMEOUT)

    assert answer.code != SUCCESS
    assert f"no field {missing!r}" in str(answer.remark)
    assert ns.routes.broker_live_table == {} and ns.kv.table == {}
    # The connection stays usable.
    assert (await broker.register(register_request())).code == SUCCESS


# ---------------------------------------------------------------- removal triggers


async def test_aborted_connection_removes_routes_at_once(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    client = await harness.client(ns)
    dying, staying = await harness.broker(ns), await harness.broker(ns)
    await dying.register(register_request("broker-a", topics=("A", "SHARED")))
    await staying.register(register_request("broker-b", "127.0.0.1:2", topics=("B", "SHARED")))

    dying.abort()  # what the broker's death looks like to the nameserver

    took = await wait_until(route_gone(client, "A"), "broker-a's routes to go")
    assert took < 2.0
    route = await client.route("SHARED")
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert await client.route_code("B") == SUCCESS
    assert set((await client.cluster_info()).broker_addr_table) == {"broker-b"}


async def test_cleanly_closed_connection_removes_routes(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    client = await harness.client(ns)
    broker = await harness.broker(ns)
    await broker.register(register_request())

    broker.close()

    await wait_until(route_gone(client, "TopicA"), "the routes of a closed connection to go")


async def test_old_connection_closing_does_not_remove_a_reconnected_broker(
    harness: Harness,
) -> None:
    ns = await harness.start(**NO_EXPIRY)
    client = await harness.client(ns)
    old, new = await harness.broker(ns), await harness.broker(ns)
    await old.register(register_request())
    # A marker broker on the old connection: once it is gone, its clean-up has run.
    await old.register(register_request("broker-m", "127.0.0.1:9", topics=("M",)))
    await new.register(register_request())  # broker-a reconnected on a new connection

    old.abort()

    await wait_until(route_gone(client, "M"), "the old connection's clean-up")
    assert await client.route_code("TopicA") == SUCCESS


async def test_silent_broker_expires_and_its_connection_is_closed(
    harness: Harness, ns: NameServer, client: Client
) -> None:
    """A broker silent past the expiry loses its routes, and the nameserver closes its
    connection (as RocketMQ closes the channel) so a live-but-stuck broker reconnects and
    registers anew."""
    silent, alive = await harness.broker(ns), await harness.broker(ns)
    alive_req = register_request("broker-b", "127.0.0.1:2", topics=("B",))
    await alive.register(alive_req)
    registered_at = time.monotonic()
    await silent.register(register_request("broker-a", topics=("A",)))

    async def heartbeat() -> None:
        while True:
            await alive.register(alive_req)
            await asyncio.sleep(0.1)  # pacing, not synchronisation

    beating = asyncio.create_task(heartbeat())
    try:
        await wait_until(route_gone(client, "A"), "the silent broker to expire")
        # Not before the 500 ms expiry.
        assert time.monotonic() - registered_at >= 0.5
        assert await client.route_code("B") == SUCCESS
        await asyncio.wait_for(silent.conn.closed, TIMEOUT)  # the nameserver closed it
        assert alive.conn.is_open and client.conn.is_open

        # The broker notices, reconnects and registers anew.
        again = await harness.broker(ns)
        assert (await again.register(register_request("broker-a", topics=("A",)))).code == SUCCESS
        assert await client.route_code("A") == SUCCESS
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)


async def test_unregister_on_the_connection_removes_at_once(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    client = await harness.client(ns)
    broker = await harness.broker(ns)
    req = register_request()
    await broker.register(req)

    answer = await broker.unregister(req)

    assert answer.code == SUCCESS
    assert await client.route_code("TopicA") == TOPIC_NOT_EXIST
    assert (await client.cluster_info()) == ClusterInfo()
    assert ns.routes.broker_live_table == {}
    # The connection is still open: the broker may register again on it.
    assert (await broker.register(req)).code == SUCCESS
    assert await client.route_code("TopicA") == SUCCESS


async def test_unregister_from_another_connection_removes_at_once(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    client = await harness.client(ns)
    broker = await harness.broker(ns)
    req = register_request()
    await broker.register(req)

    answer = await request_once(ns_addr(ns), unregister_request(req), TIMEOUT)

    assert answer.code == SUCCESS
    assert await client.route_code("TopicA") == TOPIC_NOT_EXIST


CHILD_BROKER: Final = textwrap.dedent(
    """
    import asyncio, sys

    from rocketq.common.message import TopicConfig
    from rocketq.remoting.register_body import crc32, encode_body
    from rocketq.remoting.codes import RequestCode
    from rocketq.remoting.command import RemotingCommand
    from rocketq.remoting.transport import connect


    async def main(port: int) -> None:
        conn = await connect(f"127.0.0.1:{port}", {})
        body = encode_body([TopicConfig("KillTopic", 4, 4, 6)], 1)
        header = {
            "clusterName": "DefaultCluster", "brokerName": "broker-k", "brokerId": "0",
            "brokerAddr": "127.0.0.1:30911", "haServerAddr": "", "dataVersion": "1",
            "registerKind": "FULL", "compressed": "true", "bodyCrc32": str(crc32(body)),
        }
        answer = await conn.invoke(RemotingCommand(RequestCode.REGISTER_BROKER, header, body), 5)
        print("registered" if answer.code == 0 else answer, flush=True)
        await asyncio.sleep(3600)


    asyncio.run(main(int(sys.argv[1])))
    """
)


async def test_sigkilled_broker_process_is_removed(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    client = await harness.client(ns)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD_BROKER,
        str(ns.port),
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 15)
        if line != b"registered\n":
            proc.kill()
            err = await proc.stderr.read()
            raise AssertionError(f"child broker did not register: {line!r} {err.decode()}")
        assert await client.route_code("KillTopic") == SUCCESS

        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()

        took = await wait_until(route_gone(client, "KillTopic"), "the killed broker's routes to go")
        assert took < 2.0
    finally:
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()


# ---------------------------------------------------------------- KV config


async def test_kv_round_trip_and_persistence_across_restart(
    harness: Harness, tmp_path: Path
) -> None:
    ns = await harness.start()
    client = await harness.client(ns)

    assert (await client.put_kv("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")).code == SUCCESS
    got = await client.get_kv("ORDER_TOPIC_CONFIG", "TopicA")
    assert (got.code, got.ext) == (SUCCESS, {"value": "broker-a:4"})

    delete = {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA"}
    assert (await client.call(RequestCode.DELETE_KV_CONFIG, delete)).code == SUCCESS
    got = await client.get_kv("ORDER_TOPIC_CONFIG", "TopicA")
    assert got.code == QUERY_NOT_FOUND
    assert "TopicA" in str(got.remark)
    # Deleting what is not there is no error (as RocketMQ).
    assert (await client.call(RequestCode.DELETE_KV_CONFIG, delete)).code == SUCCESS

    refused = await client.put_kv("", "k", "v")
    assert refused.code != SUCCESS and "namespace" in str(refused.remark)

    await client.put_kv("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")
    await client.put_kv("NS", "k", "v")
    await harness.stop(ns)
    assert (tmp_path / "kv.json").is_file()

    restarted = await harness.start()
    client = await harness.client(restarted)
    assert (await client.get_kv("ORDER_TOPIC_CONFIG", "TopicA")).ext == {"value": "broker-a:4"}
    assert (await client.get_kv("NS", "k")).ext == {"value": "v"}


async def test_kv_list_by_namespace(client: Client) -> None:
    await client.put_kv("NS", "k1", "v1")
    await client.put_kv("NS", "k2", "v2")
    await client.put_kv("OTHER", "k", "x")

    answer = await client.ok(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})

    assert json.loads(bytes(answer.body or b"")) == {"table": {"k1": "v1", "k2": "v2"}}
    empty = await client.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NONE"})
    assert empty.code == QUERY_NOT_FOUND and "NONE" in str(empty.remark)


async def test_concurrent_kv_puts_all_succeed_and_persist(harness: Harness, tmp_path: Path) -> None:
    ns = await harness.start()
    client = await harness.client(ns)

    answers = await asyncio.gather(
        *(client.put_kv("NS", f"k{i}", str(i)) for i in range(50)),
        return_exceptions=True,
    )

    failures = [a for a in answers if not isinstance(a, RemotingCommand) or a.code != SUCCESS]
    assert failures == []
    await harness.stop(ns)
    restarted = await harness.start()
    assert restarted.kv.table == {"NS": {f"k{i}": str(i) for i in range(50)}}


async def test_corrupt_kv_file_stops_start(harness: Harness, tmp_path: Path) -> None:
    (tmp_path / "kv.json").write_text("{not json")

    with pytest.raises(ConfigError, match=re.escape(str(tmp_path / "kv.json"))):
        await harness.start()


# ---------------------------------------------------------------- independence and ports


async def test_nameservers_are_independent(harness: Harness) -> None:
    ns1, ns2 = await harness.start(**NO_EXPIRY), await harness.start(**NO_EXPIRY)
    client1, client2 = await harness.client(ns1), await harness.client(ns2)
    assert ns1.port != ns2.port

    broker1, broker2 = await harness.broker(ns1), await harness.broker(ns2)
    await broker1.register(register_request("broker-a", topics=("A",)))
    await broker2.register(register_request("broker-b", "127.0.0.1:2", topics=("B",)))

    assert await client1.route_code("A") == SUCCESS
    assert await client1.route_code("B") == TOPIC_NOT_EXIST
    assert await client2.route_code("B") == SUCCESS
    assert await client2.route_code("A") == TOPIC_NOT_EXIST
    assert await client1.topic_list() == ["A"]
    assert await client2.topic_list() == ["B"]

    # Losing a broker, then the whole nameserver, changes nothing for the other.
    broker1.abort()
    await wait_until(route_gone(client1, "A"), "broker-a to leave the first nameserver")
    await harness.stop(ns1)
    assert await client2.route_code("B") == SUCCESS
    assert broker2.conn.is_open


async def test_port_in_use_is_an_os_error_saying_so(harness: Harness, tmp_path: Path) -> None:
    ns = await harness.start()
    second = NameServer(ns_config(tmp_path, listen_port=ns.port))
    try:
        with pytest.raises(OSError, match=rf"127\.0\.0\.1:{ns.port}") as info:
            await second.start()
        assert "cannot listen" in str(info.value)
    finally:
        await second.stop()
