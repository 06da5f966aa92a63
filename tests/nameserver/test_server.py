"""The nameserver over real gRPC on 127.0.0.1 (port 0): registration through a broker's
channel, the three removal triggers (broken channel, silence, unregister), the read RPCs,
KV config, independence of nameservers, and a SIGKILLed broker process.

Removal tests that must prove the *channel* removed a broker run a nameserver whose expiry
is a minute, so the silent-broker scan cannot be what removed it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import textwrap
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import grpc
import pytest

from rocketq.cluster.errors import ConfigError, TopicNotExistError
from rocketq.cluster.message import PERM_READ, PERM_WRITE
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import ORDER_TOPIC_CONFIG, NameServer

RW: Final = PERM_READ | PERM_WRITE
SUCCESS: Final = 0
TOPIC_NOT_EXIST: Final = 17
QUERY_NOT_FOUND: Final = 22
# Long enough that the silent-broker scan never fires during a test.
NO_EXPIRY: Final = {"broker_channel_expired_time": 60_000}
REPO: Final = Path(__file__).resolve().parents[2]


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


def register_request(
    name: str = "broker-a",
    addr: str = "127.0.0.1:10911",
    *,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    topics: tuple[str, ...] = ("TopicA",),
    queues: int = 4,
    data_version: int = 1,
    ha: str = "",
    max_phy_offset: int = 0,
) -> pb.RegisterBrokerRequest:
    return pb.RegisterBrokerRequest(
        cluster_name=cluster,
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr,
        ha_server_addr=ha,
        topics=[
            pb.TopicConfigData(
                topic_name=t, read_queue_nums=queues, write_queue_nums=queues, perm=RW
            )
            for t in topics
        ],
        data_version=data_version,
        max_phy_offset=max_phy_offset,
    )


class BrokerStream:
    """A broker's channel: requests go through a queue into the stream's request iterator.

    Keep a reference while the broker should stay registered: grpc cancels a call that is
    garbage-collected, and the nameserver then drops the broker.
    """

    def __init__(self, stub: pb_grpc.NameServerStub) -> None:
        self._requests: asyncio.Queue[pb.BrokerChannelRequest | None] = asyncio.Queue()
        self.call = stub.BrokerChannel(self._iterate())

    async def _iterate(self) -> AsyncIterator[pb.BrokerChannelRequest]:
        while (req := await self._requests.get()) is not None:
            yield req

    async def _send(self, req: pb.BrokerChannelRequest) -> pb.RegisterBrokerResult:
        await self._requests.put(req)
        result = await asyncio.wait_for(self.call.read(), 5)
        assert result is not grpc.aio.EOF, "the nameserver ended the broker's stream"
        assert isinstance(result, pb.RegisterBrokerResult)
        return result

    async def register(self, req: pb.RegisterBrokerRequest) -> pb.RegisterBrokerResult:
        return await self._send(pb.BrokerChannelRequest(register=req))

    def close(self) -> None:
        """End the stream's requests (the request iterator returns)."""
        self._requests.put_nowait(None)

    async def unregister(self, req: pb.RegisterBrokerRequest) -> pb.RegisterBrokerResult:
        return await self._send(
            pb.BrokerChannelRequest(
                unregister=pb.UnregisterBrokerRequest(
                    cluster_name=req.cluster_name,
                    broker_name=req.broker_name,
                    broker_id=req.broker_id,
                    broker_addr=req.broker_addr,
                )
            )
        )

    async def half_close(self) -> None:
        """A clean end of the stream (the broker closes its side)."""
        await self._requests.put(None)

    def cancel(self) -> None:
        self.call.cancel()


class Harness:
    """Nameservers and client channels of one test; ``close`` ends them all, channels first."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.servers: list[NameServer] = []
        self.channels: list[grpc.aio.Channel] = []

    async def start(self, **overrides: Any) -> NameServer:
        ns = NameServer(ns_config(self.tmp_path, **overrides))
        await ns.start()
        self.servers.append(ns)
        return ns

    async def stop(self, ns: NameServer) -> None:
        self.servers.remove(ns)
        await ns.stop()

    def stub(self, ns: NameServer) -> pb_grpc.NameServerStub:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{ns.port}")
        self.channels.append(channel)
        return pb_grpc.NameServerStub(channel)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        for channel in reversed(self.channels):
            await channel.close()  # cancels the streams still open
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
def stub(harness: Harness, ns: NameServer) -> pb_grpc.NameServerStub:
    return harness.stub(ns)


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


async def route_code(stub: pb_grpc.NameServerStub, topic: str) -> int:
    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic=topic), timeout=5)
    return int(resp.status.code)


def route_gone(stub: pb_grpc.NameServerStub, topic: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await route_code(stub, topic) == TOPIC_NOT_EXIST

    return check


# ---------------------------------------------------------------- registration and routes


async def test_broker_registers_through_its_channel(stub: pb_grpc.NameServerStub) -> None:
    master = BrokerStream(stub)
    req = register_request(topics=("TopicA", "TopicB"), queues=8, ha="127.0.0.1:10912")

    result = await master.register(req)

    assert result.status.code == SUCCESS
    assert result.master_addr == "" and result.ha_server_addr == ""

    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic="TopicA"))
    assert resp.status.code == SUCCESS
    assert list(resp.route.queue_datas) == [
        pb.QueueData(broker_name="broker-a", read_queue_nums=8, write_queue_nums=8, perm=RW)
    ]
    assert len(resp.route.broker_datas) == 1
    broker = resp.route.broker_datas[0]
    assert (broker.cluster, broker.broker_name) == ("DefaultCluster", "broker-a")
    assert dict(broker.broker_addrs) == {0: "127.0.0.1:10911"}
    assert resp.route.order_topic_conf == ""

    slave = BrokerStream(stub)
    result = await slave.register(register_request(addr="127.0.0.1:10921", broker_id=1))
    assert result.status.code == SUCCESS
    assert result.master_addr == "127.0.0.1:10911"
    assert result.ha_server_addr == "127.0.0.1:10912"
    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic="TopicB"))
    assert dict(resp.route.broker_datas[0].broker_addrs) == {
        0: "127.0.0.1:10911",
        1: "127.0.0.1:10921",
    }


async def test_registration_without_name_or_address_is_refused(
    stub: pb_grpc.NameServerStub,
) -> None:
    stream = BrokerStream(stub)

    result = await stream.register(register_request(name=""))

    assert result.status.code != SUCCESS
    assert "broker_name" in result.status.message
    assert await route_code(stub, "TopicA") == TOPIC_NOT_EXIST
    # The stream stays usable.
    assert (await stream.register(register_request())).status.code == SUCCESS


async def test_unknown_topic_is_topic_not_exist(stub: pb_grpc.NameServerStub) -> None:
    broker = BrokerStream(stub)
    await broker.register(register_request())

    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic="NoSuchTopic"))

    assert resp.status.code == TOPIC_NOT_EXIST == TopicNotExistError.code
    assert "NoSuchTopic" in resp.status.message
    assert not resp.HasField("route")


async def test_order_topic_conf_comes_from_kv_when_enabled(harness: Harness) -> None:
    ns = await harness.start(order_message_enable=True)
    stub = harness.stub(ns)
    broker = BrokerStream(stub)
    await broker.register(register_request())
    await stub.PutKVConfig(
        pb.KVConfigRequest(namespace=ORDER_TOPIC_CONFIG, key="TopicA", value="broker-a:4")
    )

    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic="TopicA"))

    assert resp.route.order_topic_conf == "broker-a:4"


async def test_cluster_info_and_topic_list(stub: pb_grpc.NameServerStub) -> None:
    a = register_request(
        "broker-a", "127.0.0.1:1001", cluster="C1", topics=("T1", "T2"), ha="127.0.0.1:1002"
    )
    # Streams are kept referenced: a garbage-collected call is cancelled.
    brokers = [BrokerStream(stub) for _ in range(3)]
    await brokers[0].register(a)
    await brokers[1].register(
        register_request("broker-a", "127.0.0.1:1011", broker_id=1, cluster="C1", topics=())
    )
    await brokers[2].register(
        register_request(
            "broker-b", "127.0.0.1:2001", cluster="C2", topics=("T2", "T3"), max_phy_offset=77
        )
    )

    info = await stub.GetBrokerClusterInfo(pb.Empty())

    assert set(info.broker_addr_table) == {"broker-a", "broker-b"}
    assert dict(info.broker_addr_table["broker-a"].broker_addrs) == {
        0: "127.0.0.1:1001",
        1: "127.0.0.1:1011",
    }
    assert info.broker_addr_table["broker-b"].cluster == "C2"
    assert {c: list(n.names) for c, n in info.cluster_addr_table.items()} == {
        "C1": ["broker-a"],
        "C2": ["broker-b"],
    }
    live = {entry.broker_addr: entry for entry in info.live}
    assert set(live) == {"127.0.0.1:1001", "127.0.0.1:1011", "127.0.0.1:2001"}
    assert live["127.0.0.1:1001"].ha_server_addr == "127.0.0.1:1002"
    assert live["127.0.0.1:2001"].max_phy_offset == 77

    topics = await stub.GetAllTopicList(pb.Empty())
    assert list(topics.topics) == ["T1", "T2", "T3"]


async def test_delete_topic_in_namesrv(stub: pb_grpc.NameServerStub) -> None:
    a, b = BrokerStream(stub), BrokerStream(stub)
    await a.register(register_request("broker-a", cluster="C1", topics=("T",)))
    await b.register(register_request("broker-b", "127.0.0.1:2", cluster="C2", topics=("T", "U")))

    status = await stub.DeleteTopicInNamesrv(pb.DeleteTopicRequest(topic="T", cluster_name="C1"))
    assert status.code == SUCCESS
    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic="T"))
    assert [q.broker_name for q in resp.route.queue_datas] == ["broker-b"]

    await stub.DeleteTopicInNamesrv(pb.DeleteTopicRequest(topic="T"))
    assert await route_code(stub, "T") == TOPIC_NOT_EXIST
    assert list((await stub.GetAllTopicList(pb.Empty())).topics) == ["U"]


def compressed(req: pb.RegisterBrokerRequest) -> pb.RegisterBrokerRequest:
    """The same full registration with its table as a zlib body, as brokers send it."""
    out = pb.RegisterBrokerRequest()
    out.CopyFrom(req)
    del out.topics[:]
    out.topic_body = zlib.compress(pb.TopicConfigList(topics=req.topics).SerializeToString())
    out.body_crc32 = zlib.crc32(out.topic_body)
    return out


async def test_full_registration_with_a_compressed_body(stub: pb_grpc.NameServerStub) -> None:
    broker = BrokerStream(stub)
    names = tuple(f"T{i}" for i in range(2000))

    result = await broker.register(compressed(register_request(topics=names, data_version=3)))

    assert result.status.code == SUCCESS and not result.need_full
    assert result.data_version == 3
    assert list((await stub.GetAllTopicList(pb.Empty())).topics) == sorted(names)


async def test_damaged_body_is_refused_and_changes_nothing(stub: pb_grpc.NameServerStub) -> None:
    broker = BrokerStream(stub)
    req = compressed(register_request(topics=("T",)))
    req.body_crc32 ^= 1

    result = await broker.register(req)

    assert result.status.code != SUCCESS
    assert "CRC32" in result.status.message and "broker-a" in result.status.message
    assert await route_code(stub, "T") == TOPIC_NOT_EXIST


async def test_deltas_and_heartbeats_on_the_channel(stub: pb_grpc.NameServerStub) -> None:
    broker = BrokerStream(stub)
    heartbeat = register_request(topics=(), data_version=1)
    heartbeat.kind = pb.REGISTER_HEARTBEAT

    # Unknown here: the full table is asked for, nothing is registered.
    refused = await broker.register(heartbeat)
    assert refused.status.code == SUCCESS and refused.need_full
    assert len((await stub.GetBrokerClusterInfo(pb.Empty())).live) == 0

    await broker.register(compressed(register_request(topics=("A", "B"), data_version=1)))
    assert not (await broker.register(heartbeat)).need_full

    change = register_request(topics=("C",), queues=2, data_version=3)
    change.kind = pb.REGISTER_DELTA
    change.base_version = 1
    change.deleted_topics.append("A")
    result = await broker.register(change)

    assert not result.need_full and result.data_version == 3
    assert list((await stub.GetAllTopicList(pb.Empty())).topics) == ["B", "C"]
    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic="C"))
    assert resp.route.queue_datas[0].write_queue_nums == 2

    # The same delta again does not apply to version 3: the full table is asked for.
    again = await broker.register(change)
    assert again.need_full and again.data_version == 3
    assert (await broker.register(heartbeat)).need_full  # version 1 is no longer held


# ---------------------------------------------------------------- removal triggers


async def test_cancelled_stream_removes_routes_at_once(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    stub = harness.stub(ns)
    dying, staying = BrokerStream(stub), BrokerStream(stub)
    await dying.register(register_request("broker-a", topics=("A", "SHARED")))
    await staying.register(register_request("broker-b", "127.0.0.1:2", topics=("B", "SHARED")))

    dying.cancel()  # what the broker's death looks like to the nameserver

    took = await wait_until(route_gone(stub, "A"), "broker-a's routes to go")
    assert took < 2.0
    resp = await stub.GetRouteInfoByTopic(pb.GetRouteRequest(topic="SHARED"))
    assert [b.broker_name for b in resp.route.broker_datas] == ["broker-b"]
    assert await route_code(stub, "B") == SUCCESS
    info = await stub.GetBrokerClusterInfo(pb.Empty())
    assert set(info.broker_addr_table) == {"broker-b"}


async def test_cleanly_closed_stream_removes_routes(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    stub = harness.stub(ns)
    stream = BrokerStream(stub)
    await stream.register(register_request())

    await stream.half_close()

    await wait_until(route_gone(stub, "TopicA"), "the routes of a closed channel to go")


async def test_old_channel_closing_does_not_remove_a_reconnected_broker(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    stub = harness.stub(ns)
    old, new = BrokerStream(stub), BrokerStream(stub)
    await old.register(register_request())
    # A marker broker on the old channel: once it is gone, that channel's clean-up has run.
    await old.register(register_request("broker-m", "127.0.0.1:9", topics=("M",)))
    await new.register(register_request())  # broker-a reconnected on a new channel

    old.cancel()

    await wait_until(route_gone(stub, "M"), "the old channel's clean-up")
    assert await route_code(stub, "TopicA") == SUCCESS


async def test_silent_broker_expires_and_its_stream_is_closed(
    stub: pb_grpc.NameServerStub,
) -> None:
    """A broker silent past the expiry loses its routes, and the nameserver ends its stream
    (RocketMQ closes the channel) so a live-but-stuck broker reconnects and registers anew."""
    silent, alive = BrokerStream(stub), BrokerStream(stub)
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
        await wait_until(route_gone(stub, "A"), "the silent broker to expire")
        # Not before the 500 ms expiry.
        assert time.monotonic() - registered_at >= 0.5
        assert await route_code(stub, "B") == SUCCESS
        assert await asyncio.wait_for(silent.call.read(), 5) is grpc.aio.EOF
        silent.close()  # the broker's side ends too, as a real broker's reconnect does
        assert await asyncio.wait_for(silent.call.code(), 5) is grpc.StatusCode.OK
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)


async def test_unregister_on_the_stream_removes_at_once(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    stub = harness.stub(ns)
    stream = BrokerStream(stub)
    req = register_request()
    await stream.register(req)

    result = await stream.unregister(req)

    assert result.status.code == SUCCESS
    assert await route_code(stub, "TopicA") == TOPIC_NOT_EXIST
    info = await stub.GetBrokerClusterInfo(pb.Empty())
    assert len(info.broker_addr_table) == 0 and len(info.live) == 0
    # The channel is still open: the broker may register again on it.
    assert (await stream.register(req)).status.code == SUCCESS
    assert await route_code(stub, "TopicA") == SUCCESS


async def test_unregister_rpc_removes_at_once(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    stub = harness.stub(ns)
    stream = BrokerStream(stub)
    await stream.register(register_request())

    status = await stub.UnregisterBroker(
        pb.UnregisterBrokerRequest(
            cluster_name="DefaultCluster",
            broker_name="broker-a",
            broker_id=0,
            broker_addr="127.0.0.1:10911",
        )
    )

    assert status.code == SUCCESS
    assert await route_code(stub, "TopicA") == TOPIC_NOT_EXIST


CHILD_BROKER: Final = textwrap.dedent(
    """
    import asyncio, sys

    import grpc

    from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
    from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc


    async def main(port: int) -> None:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        requests = asyncio.Queue()

        async def iterate():
            while True:
                yield await requests.get()

        call = pb_grpc.NameServerStub(channel).BrokerChannel(iterate())
        await requests.put(pb.BrokerChannelRequest(register=pb.RegisterBrokerRequest(
            cluster_name="DefaultCluster", broker_name="broker-k", broker_id=0,
            broker_addr="127.0.0.1:30911", data_version=1,
            topics=[pb.TopicConfigData(topic_name="KillTopic", read_queue_nums=4,
                                       write_queue_nums=4, perm=6)],
        )))
        result = await call.read()
        print("registered" if result.status.code == 0 else result, flush=True)
        await asyncio.sleep(3600)


    asyncio.run(main(int(sys.argv[1])))
    """
)


async def test_sigkilled_broker_process_is_removed(harness: Harness) -> None:
    ns = await harness.start(**NO_EXPIRY)
    stub = harness.stub(ns)
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
        assert await route_code(stub, "KillTopic") == SUCCESS

        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()

        took = await wait_until(route_gone(stub, "KillTopic"), "the killed broker's routes to go")
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
    stub = harness.stub(ns)
    put = pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicA", value="broker-a:4")

    assert (await stub.PutKVConfig(put)).code == SUCCESS
    got = await stub.GetKVConfig(pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicA"))
    assert got.status.code == SUCCESS and got.value == "broker-a:4"

    assert (await stub.DeleteKVConfig(put)).code == SUCCESS
    got = await stub.GetKVConfig(pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicA"))
    assert got.status.code == QUERY_NOT_FOUND
    assert "TopicA" in got.status.message

    refused = await stub.PutKVConfig(pb.KVConfigRequest(namespace="", key="k", value="v"))
    assert refused.code != SUCCESS

    await stub.PutKVConfig(put)
    await stub.PutKVConfig(pb.KVConfigRequest(namespace="NS", key="k", value="v"))
    await harness.stop(ns)
    assert (tmp_path / "kv.json").is_file()

    restarted = await harness.start()
    stub = harness.stub(restarted)
    got = await stub.GetKVConfig(pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="TopicA"))
    assert got.value == "broker-a:4"
    got = await stub.GetKVConfig(pb.KVConfigRequest(namespace="NS", key="k"))
    assert got.value == "v"


async def test_concurrent_kv_puts_all_succeed_and_persist(harness: Harness, tmp_path: Path) -> None:
    ns = await harness.start()
    stub = harness.stub(ns)

    statuses = await asyncio.gather(
        *(
            stub.PutKVConfig(pb.KVConfigRequest(namespace="NS", key=f"k{i}", value=str(i)))
            for i in range(50)
        ),
        return_exceptions=True,
    )

    failures = [s for s in statuses if not isinstance(s, pb.Status) or s.code != SUCCESS]
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
    stub1, stub2 = harness.stub(ns1), harness.stub(ns2)
    assert ns1.port != ns2.port

    stream1, stream2 = BrokerStream(stub1), BrokerStream(stub2)
    await stream1.register(register_request("broker-a", topics=("A",)))
    await stream2.register(register_request("broker-b", "127.0.0.1:2", topics=("B",)))

    assert await route_code(stub1, "A") == SUCCESS
    assert await route_code(stub1, "B") == TOPIC_NOT_EXIST
    assert await route_code(stub2, "B") == SUCCESS
    assert await route_code(stub2, "A") == TOPIC_NOT_EXIST
    assert list((await stub1.GetAllTopicList(pb.Empty())).topics) == ["A"]
    assert list((await stub2.GetAllTopicList(pb.Empty())).topics) == ["B"]

    # Losing a broker, then the whole nameserver, changes nothing for the other.
    stream1.cancel()
    await wait_until(route_gone(stub1, "A"), "broker-a to leave the first nameserver")
    await harness.stop(ns1)
    assert await route_code(stub2, "B") == SUCCESS


async def test_port_in_use_is_an_os_error_saying_so(harness: Harness, tmp_path: Path) -> None:
    ns = await harness.start()
    second = NameServer(ns_config(tmp_path, listen_port=ns.port))
    try:
        with pytest.raises(OSError, match=rf"127\.0\.0\.1:{ns.port}") as info:
            await second.start()
        assert "cannot listen" in str(info.value)
    finally:
        await second.stop()
