"""Registration with the nameservers: the full body's bytes, and over real gRPC against an
in-process nameserver (port 0) which kind of registration goes when: full on a new channel,
deltas for topic changes, heartbeats while the nameserver holds the version, and the full
table again when the nameserver asks for it or restarts."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest

from rocketq.broker.registration import NameServerRegistration, full_body
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.cluster.message import TopicConfig
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.register_body import RegisterBodyError, full_table
from rocketq.nameserver.server import NameServer

BROKER_ADDR = "127.0.0.1:10911"

# zlib (RFC 1950, default level) of TopicConfigList{A 4/4 perm 6; B 1/1 perm 2 sysflag 1 order}.
GOLDEN_BODY = bytes.fromhex("789ce3e2e46274146091605160e3e2e56274126094605460d2603460040016ba01c0")
GOLDEN_CRC = 0x068409BA


def test_full_body_is_zlib_of_the_sorted_topic_config_list() -> None:
    body, crc = full_body([TopicConfig("B", 1, 1, 2, 1, True), TopicConfig("A", 4, 4, 6)])

    assert body == GOLDEN_BODY
    assert crc == GOLDEN_CRC == zlib.crc32(body)
    assert pb.TopicConfigList.FromString(zlib.decompress(body)) == pb.TopicConfigList(
        topics=[
            pb.TopicConfigData(topic_name="A", read_queue_nums=4, write_queue_nums=4, perm=6),
            pb.TopicConfigData(
                topic_name="B",
                read_queue_nums=1,
                write_queue_nums=1,
                perm=2,
                topic_sys_flag=1,
                order=True,
            ),
        ]
    )


def test_the_nameserver_reads_the_body_back_and_refuses_a_damaged_one() -> None:
    req = pb.RegisterBrokerRequest(topic_body=GOLDEN_BODY, body_crc32=GOLDEN_CRC)
    assert full_table(req) == [TopicConfig("A", 4, 4, 6), TopicConfig("B", 1, 1, 2, 1, True)]

    with pytest.raises(RegisterBodyError, match="CRC32"):
        full_table(pb.RegisterBrokerRequest(topic_body=GOLDEN_BODY, body_crc32=GOLDEN_CRC + 1))
    cut = GOLDEN_BODY[:-6]
    with pytest.raises(RegisterBodyError, match="ends early"):
        full_table(pb.RegisterBrokerRequest(topic_body=cut, body_crc32=zlib.crc32(cut)))
    junk = b"not zlib"
    with pytest.raises(RegisterBodyError, match="not zlib"):
        full_table(pb.RegisterBrokerRequest(topic_body=junk, body_crc32=zlib.crc32(junk)))


# ---------------------------------------------------------------- over the wire


async def wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


def identity() -> pb.RegisterBrokerRequest:
    return pb.RegisterBrokerRequest(
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        broker_id=0,
        broker_addr=BROKER_ADDR,
    )


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.ns: NameServer | None = None
        self.port = 0
        self.topics = TopicConfigManager(
            tmp_path / "topics.json", auto_create=True, default_queue_nums=4
        )
        self.topics.load()
        self.reg: NameServerRegistration | None = None

    async def start_nameserver(self) -> NameServer:
        ns = NameServer(
            NameServerConfig(
                listen_port=self.port, metrics_port=0, kv_config_path=str(self.tmp_path / "kv.json")
            )
        )
        await ns.start()
        self.ns, self.port = ns, ns.port
        return ns

    def held(self) -> dict[str, TopicConfig] | None:
        assert self.ns is not None
        return self.ns.routes.held_table(BROKER_ADDR)

    def kinds(self) -> tuple[int, int, int]:
        assert self.reg is not None
        s = self.reg.stats
        return s.full_count, s.delta_count, s.heartbeat_count


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    s = Setup(tmp_path)
    await s.start_nameserver()
    s.reg = NameServerRegistration(
        [f"127.0.0.1:{s.port}"], identity=identity, topics=s.topics, period_ms=60_000
    )
    s.topics.on_change = s.reg.register_now
    s.reg.start()
    try:
        yield s
    finally:
        await s.reg.stop(None)
        if s.ns is not None:
            await s.ns.stop()
        await s.topics.close()


async def test_full_first_then_deltas_then_heartbeats(setup: Setup) -> None:
    s = setup
    assert s.reg is not None
    await wait_until(lambda: s.held() == s.topics.topics, "the full registration")
    assert s.kinds() == (1, 0, 0)
    full_bytes = s.reg.stats.full_bytes
    assert full_bytes > 0

    s.topics.update(TopicConfig("New", 2, 2))
    await wait_until(lambda: "New" in (s.held() or {}), "the delta")
    assert s.kinds() == (1, 1, 0)
    assert s.reg.stats.last_bytes < 200  # the one topic, not the table
    assert s.ns is not None and s.ns.routes.route("New") is not None

    s.topics.delete("New")
    await wait_until(lambda: "New" not in (s.held() or {}), "the delete")
    assert s.ns.routes.route("New") is None

    s.reg.register_now()  # what the period does: nothing changed, a heartbeat
    await wait_until(lambda: s.kinds()[2] == 1, "the heartbeat")
    assert s.kinds() == (1, 2, 1)
    assert s.reg.stats.last_bytes < 100
    await wait_until(
        lambda: s.reg is not None and s.reg.held_versions() == {f"127.0.0.1:{s.port}": 2},
        "the heartbeat's answer",
    )
    info = s.reg.runtime_info()
    assert info["registerFullCount"] == "1" and info["registerDeltaCount"] == "2"
    assert info["registerFullBytes"] == str(full_bytes)


async def test_a_nameserver_that_lost_the_broker_asks_for_the_full_table(setup: Setup) -> None:
    s = setup
    assert s.reg is not None and s.ns is not None
    await wait_until(lambda: s.held() is not None, "the full registration")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{s.port}") as channel:
        stub = pb_grpc.NameServerStub(channel)  # type: ignore[no-untyped-call]
        await stub.UnregisterBroker(
            pb.UnregisterBrokerRequest(
                cluster_name="DefaultCluster",
                broker_name="broker-a",
                broker_id=0,
                broker_addr=BROKER_ADDR,
            )
        )
    assert s.held() is None

    s.topics.update(TopicConfig("AfterLoss", 1, 1))

    await wait_until(lambda: "AfterLoss" in (s.held() or {}), "the full table again")
    assert s.held() == s.topics.topics
    assert s.reg.stats.need_full_count == 1
    assert s.kinds()[:2] == (2, 1)  # the delta refused, then the table


async def test_a_restarted_nameserver_gets_the_full_table(setup: Setup) -> None:
    s = setup
    assert s.reg is not None and s.ns is not None
    await wait_until(lambda: s.held() is not None, "the full registration")
    old = s.ns
    s.ns = None
    await old.stop()
    s.topics.update(TopicConfig("WhileDown", 1, 1))

    await s.start_nameserver()

    await wait_until(lambda: s.held() == s.topics.topics, "the full table on the new channel")
    assert s.kinds()[0] == 2
