"""A Raft leader cut off from its group: it stops acknowledging, the majority elects a new
leader that serves, and when the link heals the old leader's unacknowledged tail is cut
and its CommitLog is byte for byte the new leader's. Nothing it did not acknowledge is
ever consumed.

The cut is made twice over: with nftables, each member in a network namespace of its own
(as root; without root it fails when ``CI`` is set and is skipped otherwise), and through
the TCP proxy on every link between members (anywhere); both are the chaos harness's
(rocketq.chaos.netns, rocketq.chaos.proxy)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketq import Message, Producer, SendStatus
from rocketq.chaos.netns import NetnsCluster, NetnsLab, netns_unavailable_reason
from rocketq.chaos.proxy import ProxiedCluster, ProxyNet
from rocketq.cluster.launcher import ClusterSpec, LocalCluster, Node
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.transport import connect
from rocketq.sdk.wire import send_request
from tests.integration.conftest import SMALL_STORE
from tests.integration.test_raft import (
    FAST_RAFT,
    commitlog_bytes,
    consume_all,
    make_topic,
    members,
    wait_leader,
)
from tests.integration.waiting import wait_until


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


async def send_direct(addr: str, topic: str, bodies: list[bytes]) -> list[tuple[int, str]]:
    """Send each body to one broker, bypassing routes, all in flight on one connection;
    -> each answer's response code and remark."""
    conn = await connect(addr, {}, timeout=5)
    try:

        async def one(body: bytes) -> tuple[int, str]:
            request = send_request(
                body,
                "",
                group="pg-direct",
                topic=topic,
                queue_id=0,
                born_timestamp=int(time.time() * 1000),
            )
            answer = await conn.invoke(request, 10)
            return answer.code, answer.remark or ""

        return list(await asyncio.gather(*(one(b) for b in bodies)))
    finally:
        conn.close()


def unacknowledged(code: int, remark: str) -> bool:
    """A send a member without a quorum answers: it is not the leader (any more), or its
    followers did not take the entry in time."""
    if code == ResponseCode.SERVICE_NOT_AVAILABLE:
        return "of raft group" in remark  # NOT_LEADER, as RocketMQ's nearest code
    return code == ResponseCode.FLUSH_SLAVE_TIMEOUT


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
        answers = await send_direct(old.addr, "RaftSplit", tail)
        # No quorum: nothing acknowledged, every send told why.
        assert all(unacknowledged(code, remark) for code, remark in answers), answers

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
    await minority_leader_scenario(namespaced, namespaced.isolate, namespaced.heal)


async def test_minority_leader_behind_the_proxy_stops_acknowledging_and_its_tail_is_cut(
    proxied: ProxiedCluster,
) -> None:
    await minority_leader_scenario(proxied, proxied.isolate, proxied.heal)
