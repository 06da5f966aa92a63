"""Registration with the nameservers.

The REGISTER_BROKER body (``remoting/register_body.py``): golden bytes of the inflated
table, written out by hand from the layout documented there; RocketMQ's own five-field
topic lines and compact DataVersion read back; the CRC; damaged, cut and junk bodies refused
with messages that say so. Then over real TCP against an in-process nameserver (port 0):
which kind of registration goes when (full on a new connection, deltas for topic changes,
heartbeats while the nameserver holds the version, the full table again when the
nameserver asks for it or restarts) and the unregistration on stop.
"""

from __future__ import annotations

import asyncio
import struct
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import pytest

from rocketq.broker import registration
from rocketq.broker.registration import NameServerRegistration, full_body
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.common.message import TopicConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.register_body import (
    RegisterBody,
    RegisterBodyError,
    crc32,
    decode_body,
    encode_body,
)
from rocketq.remoting.transport import request_once

BROKER_ADDR: Final = "127.0.0.1:10911"
TOPIC_A: Final = TopicConfig("A", 4, 4, 6)
TOPIC_B: Final = TopicConfig("B", 1, 1, 2, 1, True)

# The inflated full body of {B 1/1 perm 2 sysflag 1 order, A 4/4 perm 6} at version 7, by
# hand: int32 length + DataVersion JSON, int32 topic count, each topic as int32 length +
# its line (in name order), int32 length + the filter server list.
GOLDEN_TABLE: Final = (
    b"\x00\x00\x00\x1b" + b'{"counter":7,"timestamp":0}'
    b"\x00\x00\x00\x02"
    b"\x00\x00\x00\x1a" + b"A 4 4 6 SINGLE_TAG 0 false"
    b"\x00\x00\x00\x19" + b"B 1 1 2 SINGLE_TAG 1 true"
    b"\x00\x00\x00\x02" + b"[]"
)
# A delta to version 12: topic C put, A and Old deleted; the deleted list follows the filter
# server list as int32 count + each int32 length + name.
GOLDEN_DELTA: Final = (
    b"\x00\x00\x00\x1c" + b'{"counter":12,"timestamp":0}'
    b"\x00\x00\x00\x01"
    b"\x00\x00\x00\x1a" + b"C 2 2 6 SINGLE_TAG 0 false"
    b"\x00\x00\x00\x02" + b"[]"
    b"\x00\x00\x00\x02"
    b"\x00\x00\x00\x01" + b"A"
    b"\x00\x00\x00\x03" + b"Old"
)


def test_full_body_is_zlib_of_the_table_in_name_order() -> None:
    body, crc = full_body([TOPIC_B, TOPIC_A], 7)

    assert body[:2] == b"\x78\x9c"  # a zlib stream (RFC 1950), not raw deflate
    assert zlib.decompress(body) == GOLDEN_TABLE
    assert crc == crc32(body) == zlib.crc32(body) & 0x7FFFFFFF
    # encode_body keeps the order it is given; full_body sorts, so one table, one body.
    assert zlib.decompress(encode_body([TOPIC_A, TOPIC_B], 7)) == GOLDEN_TABLE
    assert full_body([TOPIC_A, TOPIC_B], 7) == (body, crc)
    unsorted = zlib.decompress(encode_body([TOPIC_B, TOPIC_A], 7))
    assert unsorted.index(b"B 1 1") < unsorted.index(b"A 4 4")


def test_delta_body_carries_the_deleted_topics() -> None:
    body = encode_body([TopicConfig("C", 2, 2, 6)], 12, ["A", "Old"])

    assert zlib.decompress(body) == GOLDEN_DELTA
    # A delta that deletes nothing still says so: a count of 0 after the filter list.
    empty = zlib.decompress(encode_body([], 12, []))
    assert empty.endswith(b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02[]" + b"\x00\x00\x00\x00")


def test_bodies_read_back() -> None:
    body, crc = full_body([TOPIC_B, TOPIC_A], 7)
    assert decode_body(body, compressed=True, crc=crc) == RegisterBody([TOPIC_A, TOPIC_B], 7)

    delta = encode_body([TopicConfig("C", 2, 2, 6)], 12, ["A", "Old"])
    assert decode_body(delta, compressed=True, crc=crc32(delta)) == RegisterBody(
        [TopicConfig("C", 2, 2, 6)], 12, ["A", "Old"]
    )
    # CRC 0: not checked, as RocketMQ; no body: an empty table at version 0.
    assert decode_body(body, compressed=True, crc=0).data_version == 7
    assert decode_body(None, compressed=True, crc=0) == RegisterBody()


def chunk(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


# What a stock RocketMQ broker compresses (Deflater(9)): fastjson's compact DataVersion with
# a real timestamp, and topic lines of five fields (no sys flag, no order flag).
ROCKETMQ_TABLE: Final = (
    chunk(b'{"counter":12,"timestamp":1700000000000}')
    + struct.pack(">i", 2)
    + chunk(b"T 8 8 6 SINGLE_TAG")
    + chunk(b"%RETRY%G 1 1 6 SINGLE_TAG")
    + chunk(b"[]")
)


def test_rocketmqs_five_field_topic_lines_are_read() -> None:
    body = zlib.compress(ROCKETMQ_TABLE, 9)

    got = decode_body(body, compressed=True, crc=zlib.crc32(body) & 0x7FFFFFFF)

    assert got == RegisterBody(
        [TopicConfig("T", 8, 8, 6, 0, False), TopicConfig("%RETRY%G", 1, 1, 6, 0, False)], 12
    )


def test_crc_is_crc32_with_the_sign_bit_cleared() -> None:
    # The CRC-32 check value of "123456789" is 0xCBF43926: its top bit goes.
    assert zlib.crc32(b"123456789") == 0xCBF43926
    assert crc32(b"123456789") == 0x4BF43926
    assert crc32(memoryview(b"123456789")) == 0x4BF43926
    assert crc32(b"") == 0


def refused(body: bytes, *, compressed: bool = True) -> str:
    with pytest.raises(RegisterBodyError) as info:
        decode_body(body, compressed=compressed, crc=crc32(body))
    return str(info.value)


def test_damaged_cut_and_junk_bodies_are_refused() -> None:
    body, crc = full_body([TOPIC_A, TOPIC_B], 7)

    with pytest.raises(RegisterBodyError, match=r"CRC32 is \d+, the request says \d+.*damaged"):
        decode_body(body, compressed=True, crc=crc ^ 1)
    assert "ends early" in refused(body[:-6])
    assert "not zlib" in refused(b"not zlib")
    # Whole zlib streams of tables that stop short.
    assert "cut short" in refused(zlib.compress(GOLDEN_TABLE[:-5]))
    assert "runs past" in refused(zlib.compress(GOLDEN_TABLE[:-1]))
    # Topic lines that are not RocketMQ's.
    three = chunk(b"{}") + struct.pack(">i", 1) + chunk(b"T 8 8") + chunk(b"[]")
    assert "not 5 or 7" in refused(zlib.compress(three))
    words = chunk(b"{}") + struct.pack(">i", 1) + chunk(b"T x 8 6 SINGLE_TAG") + chunk(b"[]")
    assert "not a number" in refused(zlib.compress(words))
    negative = chunk(b"{}") + struct.pack(">i", -1)
    assert "count of -1" in refused(zlib.compress(negative))


def test_uncompressed_json_bodies_and_their_refusals() -> None:
    stock = (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
        b'"timestamp":0},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,'
        b'"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}}'
    )
    assert decode_body(stock, compressed=False, crc=crc32(stock)) == RegisterBody(
        [TopicConfig("T", 4, 4, 6)], 3
    )

    assert "not JSON" in refused(b"{not json", compressed=False)
    assert "no topicConfigSerializeWrapper" in refused(b"[]", compressed=False)
    table = b'{"topicConfigSerializeWrapper":{"topicConfigTable":["T"]}}'
    assert "topicConfigTable is not an object" in refused(table, compressed=False)
    bad = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"rw"}}}}'
    assert "topic T has a bad number" in refused(bad, compressed=False)


# ---------------------------------------------------------------- over the wire


async def wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


def identity() -> dict[str, str]:
    return {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerAddr": BROKER_ADDR,
        "haServerAddr": "",
        "maxPhyOffset": "0",
    }


UNREGISTER: Final = {
    "clusterName": "DefaultCluster",
    "brokerName": "broker-a",
    "brokerId": "0",
    "brokerAddr": BROKER_ADDR,
}


async def start_nameserver(tmp_path: Path, port: int = 0) -> NameServer:
    ns = NameServer(
        NameServerConfig(listen_port=port, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    return ns


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.ns: NameServer | None = None
        self.port = 0
        self.topics = TopicConfigManager(
            tmp_path / "topics.json", auto_create=True, default_queue_nums=4
        )
        self.topics.load()
        for i in range(100):  # a table whose full registration is clearly bigger than a delta
            self.topics.update(TopicConfig(f"Topic{i}", 4, 4))
        self.reg: NameServerRegistration | None = None

    async def start_nameserver(self) -> NameServer:
        ns = await start_nameserver(self.tmp_path, self.port)
        self.ns, self.port = ns, ns.port
        return ns

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def held(self) -> dict[str, TopicConfig] | None:
        assert self.ns is not None
        return self.ns.routes.held_table(BROKER_ADDR)

    def kinds(self) -> tuple[int, int, int]:
        assert self.reg is not None
        s = self.reg.stats
        return s.full_count, s.delta_count, s.heartbeat_count


@pytest.fixture(autouse=True)
def quick_reconnect(monkeypatch: pytest.MonkeyPatch) -> None:
    """A closed connection is opened again after 50 ms, not a second."""
    monkeypatch.setattr(registration, "RECONNECT_DELAY", 0.05)


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    s = Setup(tmp_path)
    await s.start_nameserver()
    s.reg = NameServerRegistration([s.addr], identity=identity, topics=s.topics, period_ms=60_000)
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
    assert s.reg.stats.last_bytes < 600 < full_bytes  # the header and one topic
    assert s.ns is not None and s.ns.routes.route("New") is not None

    s.topics.delete("New")
    await wait_until(lambda: "New" not in (s.held() or {}), "the delete")
    assert s.ns.routes.route("New") is None

    s.reg.register_now()  # what the period does: nothing changed, a heartbeat
    await wait_until(lambda: s.kinds()[2] == 1, "the heartbeat")
    assert s.kinds() == (1, 2, 1)
    assert s.reg.stats.last_bytes < 400  # a header without a body
    await wait_until(
        lambda: s.reg is not None and s.reg.held_versions() == {s.addr: s.topics.data_version},
        "the heartbeat's answer",
    )
    info = s.reg.runtime_info()
    assert info["registerFullCount"] == "1" and info["registerDeltaCount"] == "2"
    assert info["registerFullBytes"] == str(full_bytes)
    assert info["registerNameServersHolding"] == "1"
    assert s.reg.registered == {s.addr: True}


async def test_wait_held_returns_once_the_nameserver_has_the_new_topic(setup: Setup) -> None:
    """What a topic's creation awaits before it is answered: the route exists then."""
    s = setup
    assert s.reg is not None and s.ns is not None
    await wait_until(lambda: s.held() == s.topics.topics, "the full registration")
    s.topics.update(TopicConfig("Fresh", 4, 4))
    assert await s.reg.wait_held(s.topics.data_version, 5.0)
    assert s.ns.routes.route("Fresh") is not None  # no polling: it is there on return
    # A version no nameserver will ever hold: False after the timeout, not a hang.
    started = time.monotonic()
    assert not await s.reg.wait_held(s.topics.data_version + 1000, 0.2)
    assert time.monotonic() - started < 2.0


async def test_a_nameserver_that_lost_the_broker_asks_for_the_full_table(setup: Setup) -> None:
    s = setup
    assert s.reg is not None and s.ns is not None
    await wait_until(lambda: s.held() is not None, "the full registration")
    answer = await request_once(
        s.addr, RemotingCommand(RequestCode.UNREGISTER_BROKER, dict(UNREGISTER)), 5.0
    )
    assert answer.code == ResponseCode.SUCCESS
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

    await wait_until(lambda: s.held() == s.topics.topics, "the full table on the new connection")
    assert s.kinds()[0] == 2


async def test_a_connection_the_nameserver_closes_is_reopened_at_once(setup: Setup) -> None:
    """As the nameserver closes an expired broker's connection: the broker registers its
    full table again on a new one now, not at its next period (60 s here)."""
    s = setup
    assert s.reg is not None and s.ns is not None and s.ns.server is not None
    await wait_until(lambda: s.held() is not None, "the full registration")

    for conn in list(s.ns.server.connections):
        conn.close()

    await wait_until(lambda: s.kinds()[0] == 2, "the full table on a new connection")
    await wait_until(lambda: s.held() == s.topics.topics, "the table held again")
    assert s.reg.registered == {s.addr: True}


async def test_stop_unregisters_from_every_nameserver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics = TopicConfigManager(tmp_path / "topics.json", auto_create=True, default_queue_nums=4)
    topics.load()
    servers = [
        await start_nameserver(tmp_path / "ns1"),
        await start_nameserver(tmp_path / "ns2"),
    ]
    addrs = [f"127.0.0.1:{ns.port}" for ns in servers]
    unregistered: list[dict[str, Any]] = []
    for ns in servers:
        real = ns.routes.unregister_broker

        def recording(real: Callable[..., bool] = real, **who: Any) -> bool:
            unregistered.append(who)
            return real(**who)

        monkeypatch.setattr(ns.routes, "unregister_broker", recording)
    reg = NameServerRegistration(addrs, identity=identity, topics=topics, period_ms=60_000)
    reg.start()
    try:
        await wait_until(lambda: all(reg.registered.values()), "both registrations")

        await reg.stop(dict(UNREGISTER))

        who = {
            "cluster": "DefaultCluster",
            "broker_addr": BROKER_ADDR,
            "broker_name": "broker-a",
            "broker_id": 0,
        }
        assert unregistered == [who, who]  # one UNREGISTER_BROKER each
        for ns in servers:
            assert ns.routes.held_table(BROKER_ADDR) is None
            assert ns.routes.broker_addr_table == {}
        assert reg.registered == {a: False for a in addrs}
    finally:
        await reg.stop(None)
        for ns in servers:
            await ns.stop()
        await topics.close()


async def test_stop_without_unregistering_closes_the_connection(setup: Setup) -> None:
    s = setup
    assert s.reg is not None and s.ns is not None
    await wait_until(lambda: s.held() is not None, "the full registration")

    await s.reg.stop(None)

    # The closed connection alone removes the broker.
    await wait_until(lambda: s.held() is None, "the broker to go with its connection")
    assert s.ns.routes.broker_addr_table == {}


async def test_ten_thousand_topics_then_a_new_one_within_a_second(tmp_path: Path) -> None:
    """A broker with 10,000 topics: the nameserver holds every one after the full
    registration, and a topic created next is routed within a second by a delta that carries
    it alone (its size does not grow with the table, and no full registration follows)."""
    topics = TopicConfigManager(tmp_path / "topics.json", auto_create=True, default_queue_nums=4)
    topics.load()
    for i in range(10_000):
        topics.update(TopicConfig(f"Many-{i:05d}", 4, 4))
    ns = await start_nameserver(tmp_path)
    addr = f"127.0.0.1:{ns.port}"
    reg = NameServerRegistration([addr], identity=identity, topics=topics, period_ms=60_000)
    topics.on_change = reg.register_now
    reg.start()
    try:
        # The broker counts a registration when its answer arrives, after the nameserver
        # holds the table.
        await wait_until(
            lambda: (
                ns.routes.held_table(BROKER_ADDR) == topics.topics and reg.stats.full_count >= 1
            ),
            "the full registration and its answer",
        )
        held = ns.routes.held_table(BROKER_ADDR)
        assert held is not None and len(held) >= 10_000
        assert all(ns.routes.route(f"Many-{i:05d}") is not None for i in range(0, 10_000, 997))
        full = (reg.stats.full_count, reg.stats.full_bytes)
        assert full[0] == 1

        started = time.monotonic()
        topics.update(TopicConfig("Many-new", 4, 4))
        await wait_until(lambda: ns.routes.route("Many-new") is not None, "the new topic", 1.0)
        assert time.monotonic() - started < 1.0
        await wait_until(lambda: reg.stats.delta_count >= 1, "the delta's answer")
        assert (reg.stats.full_count, reg.stats.full_bytes) == full  # nothing resent
        assert reg.stats.delta_count == 1
        assert reg.stats.last_bytes < 600 < full[1]  # the header and one topic
        assert len(ns.routes.held_table(BROKER_ADDR) or {}) == len(topics.topics)
    finally:
        await reg.stop(None)
        await ns.stop()
        await topics.close()
