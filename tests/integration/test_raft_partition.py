"""A Raft leader cut off from its group: it stops acknowledging, the majority elects a new
leader that serves, and when the link heals the old leader's unacknowledged tail is cut
and its CommitLog is byte for byte the new leader's. Nothing it did not acknowledge is
ever consumed.

The cut is made twice over: with nftables, each member in a network namespace of its own
(as root; without root it fails when ``CI`` is set and is skipped otherwise), and through
a small asyncio TCP proxy on every link between members (anywhere)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from rocketq import Message, Producer, SendStatus
from rocketq.cluster.launcher import HOST, ClusterSpec, LocalCluster, Node, raft_member_id
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from rocketq.cluster.record import encode_host, encode_record
from tests.integration.conftest import SMALL_STORE
from tests.integration.netns import NetnsLab, netns_unavailable_reason
from tests.integration.test_raft import (
    FAST_RAFT,
    commitlog_bytes,
    consume_all,
    make_topic,
    members,
    wait_leader,
)
from tests.integration.waiting import wait_until


class Link:
    """One direction of one member pair: a listening port that forwards to a member's
    Raft port, or, while cut, closes every connection at once."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.cut = False
        self.port = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(HOST, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            for w in list(self._writers):
                w.transport.abort()

    async def close(self) -> None:
        self.set_cut(True)
        if self._server is not None:
            self._server.close()


class ProxyNet:
    """The links, served by an event loop of their own (the launcher blocks the test's)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.links: dict[tuple[str, str], Link] = {}

    def link(self, src: str, dst: str, target_port: int) -> int:
        key = (src, dst)
        if key not in self.links:
            link = Link(target_port)
            asyncio.run_coroutine_threadsafe(link.start(), self.loop).result(5)
            self.links[key] = link
        return self.links[key].port

    def isolate(self, member: str) -> None:
        for (src, dst), link in self.links.items():
            if member in (src, dst):
                self.loop.call_soon_threadsafe(link.set_cut, True)

    def heal(self) -> None:
        for link in self.links.values():
            self.loop.call_soon_threadsafe(link.set_cut, False)

    def close(self) -> None:
        for link in self.links.values():
            asyncio.run_coroutine_threadsafe(link.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class ProxiedCluster(LocalCluster):
    """Each member reaches each other member through its own link."""

    def __init__(self, spec: ClusterSpec, net: ProxyNet) -> None:
        super().__init__(spec)
        self.net = net

    def raft_peers(self, node: Node) -> str:
        parts = []
        for m in self.group_members(node.broker_name):
            port = m.raft_port if m is node else self.net.link(node.name, m.name, m.raft_port)
            parts.append(f"{raft_member_id(m)}-{HOST}:{port}")
        return ";".join(parts)


class NetnsCluster(LocalCluster):
    """Each member runs in its own network namespace of ``lab``; the nameserver and the
    test's clients stay here, on the bridge's address."""

    def __init__(self, spec: ClusterSpec, lab: NetnsLab) -> None:
        super().__init__(spec)
        self.lab = lab
        for ns in self.nameservers:
            ns.host = lab.gateway
        for broker, host in zip(self.brokers, lab.hosts, strict=True):
            broker.host = host.ip

    def host_of(self, node: Node) -> int:
        return [h.ip for h in self.lab.hosts].index(node.host)

    def _command(self, node: Node) -> list[str]:
        cmd = super()._command(node)
        if node.role == "broker":
            cmd = [*self.lab.hosts[self.host_of(node)].exec_prefix(), *cmd]
        return cmd


def split_spec(tmp_path: Path) -> ClusterSpec:
    return ClusterSpec(
        data_dir=tmp_path / "cluster",
        replication="raft",
        broker_settings={**SMALL_STORE, **FAST_RAFT, "sync_flush_timeout": "3000"},
    )


@pytest.fixture
def namespaced(tmp_path: Path) -> Iterator[NetnsCluster]:
    reason = netns_unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the nftables partition test cannot run: {reason}")
        pytest.skip(reason)
    with NetnsLab(3) as lab:
        cluster = NetnsCluster(split_spec(tmp_path), lab)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[ProxiedCluster]:
    net = ProxyNet()
    cluster = ProxiedCluster(split_spec(tmp_path), net)
    try:
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            net.close()


async def send_direct(addr: str, topic: str, bodies: list[bytes]) -> list[int]:
    """Send each body to one broker, bypassing routes; -> the answers' status codes."""
    born = encode_host("127.0.0.1:1")

    async with grpc.aio.insecure_channel(addr) as channel:
        stub = pb_grpc.BrokerStub(channel)  # type: ignore[no-untyped-call]

        async def one(body: bytes) -> int:
            rec = encode_record(
                topic=topic.encode(),
                body=body,
                properties=b"",
                born_timestamp=int(time.time() * 1000),
                born_host=born,
            )
            req = pb.SendRequest(producer_group="pg-direct", topic=topic, queue_id=0, records=rec)
            resp = await stub.SendMessage(req, timeout=10)
            return int(resp.status.code)

        return list(await asyncio.gather(*(one(b) for b in bodies)))


async def minority_leader_scenario(
    cluster: LocalCluster,
    isolate: Callable[[Node], None],
    heal: Callable[[Node], None],
) -> None:
    ns = cluster.namesrv_addr
    await make_topic(ns, "RaftSplit")
    old = await wait_leader(cluster)
    acked: set[bytes] = set()
    async with Producer("pg-split", ns) as producer:
        for i in range(50):
            body = b"before %d" % i
            assert (await producer.send(Message("RaftSplit", body))).status is SendStatus.SEND_OK
            acked.add(body)
        info = await members(ns)
        committed_before = int(info[old.addr]["raftCommittedOffset"])

        isolate(old)
        tail = [b"unacknowledged %d" % i for i in range(20)]
        codes = await send_direct(old.addr, "RaftSplit", tail)
        assert 0 not in codes, codes  # no quorum: nothing acknowledged
        assert set(codes) <= {1001, 12}, codes  # NOT_LEADER or FLUSH_SLAVE_TIMEOUT

        new = await wait_leader(cluster, not_=old)
        for i in range(50):
            body = b"after %d" % i
            assert (await producer.send(Message("RaftSplit", body))).status is SendStatus.SEND_OK
            acked.add(body)

    info = await members(ns)
    assert info[old.addr]["raftRole"] != "LEADER"  # stepped down without a majority
    assert int(info[old.addr]["commitLogMaxOffset"]) > committed_before  # the tail is there
    assert int(info[old.addr]["raftCommittedOffset"]) == committed_before  # never served

    heal(old)

    async def rejoined() -> bool:
        now = await members(ns)
        o, n = now.get(old.addr, {}), now.get(new.addr, {})
        return (
            o.get("commitLogMaxOffset") == n.get("commitLogMaxOffset")
            and o.get("raftCommittedOffset") == n.get("raftCommittedOffset")
            and o.get("raftLeader") == n.get("raftSelfId")
        )

    # Generous: after a drop-everything cut, TCP's backed-off retransmit timer decides
    # when the first packet crosses again.
    await wait_until(rejoined, "the old leader to rejoin as a follower", timeout=40)
    end = int((await members(ns))[new.addr]["commitLogMaxOffset"])
    assert commitlog_bytes(old, end) == commitlog_bytes(new, end)
    got = await consume_all(ns, "cg-split", "RaftSplit", acked)
    assert not got & set(tail)


async def test_minority_leader_behind_nftables_stops_acknowledging_and_its_tail_is_cut(
    namespaced: NetnsCluster,
) -> None:
    lab = namespaced.lab

    def isolate(node: Node) -> None:
        host = lab.hosts[namespaced.host_of(node)]
        lab.cut(host, [h for h in lab.hosts if h != host])

    def heal(node: Node) -> None:
        lab.heal(lab.hosts[namespaced.host_of(node)])

    await minority_leader_scenario(namespaced, isolate, heal)


async def test_minority_leader_behind_the_proxy_stops_acknowledging_and_its_tail_is_cut(
    proxied: ProxiedCluster,
) -> None:
    await minority_leader_scenario(
        proxied, lambda node: proxied.net.isolate(node.name), lambda _node: proxied.net.heal()
    )
