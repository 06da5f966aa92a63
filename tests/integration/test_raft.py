"""Raft replication on real processes (three members per group, fast timers): the leader
SIGKILLed under load several times in a row loses nothing acknowledged and a new one
serves within the failover goal; a paused follower catches up; transfer-leader moves the
leadership and the routes; leadership goes back to the preferred member; a member whose
store was wiped rejoins and catches up byte for byte; consumers read from a follower when
no leader is left."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from pathlib import Path

from typer.testing import CliRunner

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
)
from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster, Node
from rocketq.sdk.admin import Admin
from rocketq.sdk.admin_types import MessageTrack
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until

# Heartbeats every 200 ms, an election after 3 missed ones (DLedger's shape, 10x faster).
FAST_RAFT = {
    "dledger_heartbeat_interval": "200",
    "dledger_max_heartbeat_leak": "3",
    "dledger_min_vote_interval": "100",
    "dledger_max_vote_interval": "300",
    "dledger_sync_interval": "500",
}
# A new leader must serve within this (a deadline, not the goal: `rocketq bench failover`
# measures failover times).
FAILOVER_DEADLINE = 15.0


def raft_cluster(make_cluster: MakeCluster, **settings: str) -> LocalCluster:
    return make_cluster(replication="raft", broker_settings={**FAST_RAFT, **settings})


async def members(ns: str) -> dict[str, dict[str, str]]:
    """Runtime info of every registered broker, by address (with its registered id)."""
    async with Admin(ns) as admin:
        return {
            b.addr: {**b.runtime, "registeredId": str(b.broker_id)}
            for b in await admin.cluster_list()
        }


async def leader_node(cluster: LocalCluster) -> Node | None:
    """The member registered as broker id 0 that says it serves as the leader."""
    info = await members(cluster.namesrv_addr)
    for node in cluster.brokers:
        rt = info.get(node.addr, {})
        if rt.get("registeredId") == "0" and rt.get("raftServing") == "true":
            return node
    return None


async def wait_leader(cluster: LocalCluster, *, not_: Node | None = None) -> Node:
    found: list[Node] = []

    async def serving() -> bool:
        node = await leader_node(cluster)
        if node is None or node is not_:
            return False
        found.append(node)
        return True

    await wait_until(serving, "a serving leader registered as broker id 0", timeout=15)
    return found[-1]


async def make_topic(ns: str, topic: str, queues: int = 4) -> None:
    async with Admin(ns) as admin:
        await admin.update_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


async def consume_all(ns: str, group: str, topic: str, want: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    c = PushConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval=1.0)
    c.subscribe(topic, "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        got.update(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    await c.start()
    try:
        await wait_until(
            lambda: got >= want,
            lambda: f"{len(want - got)} of {len(want)} acknowledged messages to be consumed",
            timeout=30,
        )
    finally:
        await c.shutdown()
    return got


class Load:
    """Senders that run until stopped; every body answered SEND_OK is kept with the times
    its send started and was answered."""

    def __init__(self, ns: str, topic: str, senders: int = 4) -> None:
        self.ns, self.topic, self.senders = ns, topic, senders
        self.acked: list[tuple[float, float, bytes]] = []
        self.failed = 0
        self._stop = asyncio.Event()
        self._counter = iter(range(10**9))
        self._task: asyncio.Task[None] | None = None

    async def _sender(self, producer: Producer) -> None:
        while not self._stop.is_set():
            body = b"m%07d" % next(self._counter)
            started = time.monotonic()
            try:
                result = await producer.send(Message(self.topic, body), timeout=3)
            except Exception:  # not acknowledged: whatever happened to it is allowed
                self.failed += 1
                await asyncio.sleep(0.02)
                continue
            if result.status is SendStatus.SEND_OK:
                self.acked.append((started, time.monotonic(), body))

    async def _run(self) -> None:
        async with Producer("pg-raft", self.ns) as producer:
            await asyncio.gather(*(self._sender(producer) for _ in range(self.senders)))

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 15)

    def acked_after(self, t: float) -> float | None:
        """When the first send started after ``t`` was acknowledged."""
        times = [done for started, done, _ in self.acked if started > t]
        return min(times) if times else None


async def test_leader_killed_under_load_loses_nothing(make_cluster: MakeCluster) -> None:
    cluster = raft_cluster(make_cluster)
    ns = cluster.namesrv_addr
    await make_topic(ns, "RaftLoad")
    load = Load(ns, "RaftLoad")
    load.start()
    failovers: list[float] = []
    try:
        for _ in range(3):
            leader = await wait_leader(cluster)
            before = len(load.acked)
            await wait_until(lambda b=before: len(load.acked) >= b + 150, "sends to go through")
            killed_at = time.monotonic()
            cluster.kill(leader.name, signal.SIGKILL)
            await wait_until(
                lambda t=killed_at: load.acked_after(t) is not None,
                "a send acknowledged by the new leader",
                timeout=FAILOVER_DEADLINE,
            )
            first = load.acked_after(killed_at)
            assert first is not None
            failovers.append(first - killed_at)
            new = await wait_leader(cluster, not_=leader)
            assert new is not leader
            print(f"kill of {leader.name}: {new.name} leads; {load.failed} failed sends so far")
            # Back as a follower, caught up with what the group had when it came back: the
            # next round's quorum is the new leader and a member as healthy as it was.
            await asyncio.to_thread(cluster.restart, leader.name)
            target = int((await members(ns))[new.addr]["commitLogMaxOffset"])

            async def caught_up(node: Node = leader, end: int = target) -> bool:
                info = (await members(ns)).get(node.addr, {})
                return int(info.get("commitLogMaxOffset", "-1")) >= end

            await wait_until(caught_up, f"{leader.name} to catch up after its restart")
    finally:
        await load.stop()
    print(f"failover (kill -> first SEND_OK): {', '.join(f'{f:.2f} s' for f in failovers)}")
    acked = {body for _, _, body in load.acked}
    assert len(acked) >= 450
    await consume_all(ns, "cg-raft-load", "RaftLoad", acked)


async def test_paused_follower_catches_up(make_cluster: MakeCluster) -> None:
    cluster = raft_cluster(make_cluster)
    ns = cluster.namesrv_addr
    await make_topic(ns, "RaftPause")
    leader = await wait_leader(cluster)
    follower = next(n for n in cluster.brokers if n is not leader)
    cluster.pause(follower.name)
    try:
        async with Producer("pg-pause", ns) as producer:
            for i in range(200):
                result = await producer.send(Message("RaftPause", b"p%d" % i))
                assert result.status is SendStatus.SEND_OK  # the other follower is a quorum
    finally:
        cluster.resume(follower.name)

    async def caught_up() -> bool:
        info = await members(ns)
        lead, f = info.get(leader.addr, {}), info.get(follower.addr, {})
        return (
            f.get("commitLogMaxOffset") == lead.get("commitLogMaxOffset")
            and f.get("raftCommittedOffset") == lead.get("raftCommittedOffset")
            and f.get("dispatchBehindBytes") == "0"
        )

    await wait_until(caught_up, "the resumed follower to catch up", timeout=15)
    assert await leader_node(cluster) is leader  # pre-vote: the pause deposed nobody


async def test_transfer_leader_moves_leadership_and_routes(make_cluster: MakeCluster) -> None:
    cluster = raft_cluster(make_cluster)
    ns = cluster.namesrv_addr
    await make_topic(ns, "RaftMove")
    leader = await wait_leader(cluster)
    # A message stored by this leader and consumed by a group before the move.
    async with Producer("pg-move", ns) as producer:
        before = await producer.send(Message("RaftMove", b"before the move"))
    reader = PullConsumer("cg-move", ns, consume_from=ConsumeFrom.FIRST_OFFSET, auto_commit=False)
    reader.subscribe("RaftMove")
    async with reader, asyncio.timeout(15):
        while not [m for m in await reader.poll(timeout=1) if m.body == b"before the move"]:
            pass
        await reader.commit()
    target = next(n for n in cluster.brokers if n is not leader)
    target_id = f"n{target.broker_id}"
    runner = CliRunner()
    result = await asyncio.to_thread(
        runner.invoke,
        app,
        ["admin", "transfer-leader", "-n", ns, "--group", "broker-a", "--to", target_id],
    )
    assert result.exit_code == 0, result.output
    assert target_id in result.output
    assert await leader_node(cluster) is target
    async with Producer("pg-move", ns) as producer:
        sent = await producer.send(Message("RaftMove", b"after the move"))
    assert sent.status is SendStatus.SEND_OK
    # The member that stored the message is a follower now: its message is still tracked
    # to the group's offset on the same broker name.
    async with Admin(ns) as admin:
        stored = await admin.query_msg_by_id(before.offset_msg_id)
        assert stored.store_host == leader.addr
        # The new leader takes the group's offset back from its followers once it serves
        # (RaftMember._take_back_offsets), a moment after the move.
        tracks: list[MessageTrack] = []

        async def consumed() -> bool:
            tracks[:] = await admin.message_track(stored)
            return [(t.group, t.state) for t in tracks] == [("cg-move", "CONSUMED")]

        await wait_until(consumed, "the group's offset on the new leader", timeout=10.0)
    listed = await asyncio.to_thread(runner.invoke, app, ["admin", "cluster-list", "-n", ns])
    assert f"{target_id} LEADER" in listed.output, listed.output
    bad = await asyncio.to_thread(
        runner.invoke,
        app,
        ["admin", "transfer-leader", "-n", ns, "--group", "broker-a", "--to", "n7"],
    )
    assert bad.exit_code == 1 and "no live member 'n7'" in bad.output


def commitlog_bytes(node: Node, length: int) -> bytes:
    """The first ``length`` bytes of a member's CommitLog (segments in order)."""
    out = bytearray()
    for seg in sorted((node.store / "commitlog").iterdir()):
        with seg.open("rb") as f:
            out += f.read(length - len(out))
        if len(out) >= length:
            break
    return bytes(out)


async def test_wiped_member_rejoins_and_catches_up_byte_for_byte(
    make_cluster: MakeCluster,
) -> None:
    cluster = raft_cluster(make_cluster)
    ns = cluster.namesrv_addr
    await make_topic(ns, "RaftWipe")
    leader = await wait_leader(cluster)
    victim = next(n for n in cluster.brokers if n is not leader)
    async with Producer("pg-wipe", ns) as producer:
        for i in range(100):
            assert (await producer.send(Message("RaftWipe", b"w%d" % i))).ok
        cluster.kill(victim.name, signal.SIGKILL)
        shutil.rmtree(victim.store)  # the disk is lost
        for i in range(100, 200):
            assert (await producer.send(Message("RaftWipe", b"w%d" % i))).ok
    await asyncio.to_thread(cluster.restart, victim.name)

    async def caught_up() -> bool:
        info = await members(ns)
        lead, v = info.get(leader.addr, {}), info.get(victim.addr, {})
        return v.get("commitLogMaxOffset") == lead.get("commitLogMaxOffset") and v.get(
            "raftCommittedOffset"
        ) == lead.get("raftCommittedOffset")

    await wait_until(caught_up, "the wiped member to catch up", timeout=20)
    end = int((await members(ns))[leader.addr]["commitLogMaxOffset"])
    assert end > 0
    assert commitlog_bytes(victim, end) == commitlog_bytes(leader, end)


async def test_leadership_goes_back_to_the_preferred_member(make_cluster: MakeCluster) -> None:
    cluster = raft_cluster(make_cluster, dledger_preferred_leader_id="n2")
    preferred = cluster.brokers[2]

    async def preferred_leads() -> bool:
        return await leader_node(cluster) is preferred

    await wait_until(preferred_leads, "n2 to lead", timeout=15)
    cluster.kill(preferred.name, signal.SIGKILL)
    await wait_leader(cluster, not_=preferred)
    await asyncio.to_thread(cluster.restart, preferred.name)
    await wait_until(preferred_leads, "n2 to lead again once caught up", timeout=15)


async def test_consumers_read_from_a_follower_when_no_leader_is_left(
    make_cluster: MakeCluster,
) -> None:
    cluster = raft_cluster(make_cluster)
    ns = cluster.namesrv_addr
    await make_topic(ns, "RaftRead")
    leader = await wait_leader(cluster)
    acked: set[bytes] = set()
    async with Producer("pg-read", ns) as producer:
        for i in range(100):
            body = b"r%d" % i
            assert (await producer.send(Message("RaftRead", body))).ok
            acked.add(body)
    follower, other = [n for n in cluster.brokers if n is not leader]

    async def committed_everywhere() -> bool:
        info = await members(ns)
        return info[follower.addr]["raftCommittedOffset"] == info[leader.addr]["commitLogMaxOffset"]

    await wait_until(committed_everywhere, "the follower to learn the commit point")
    cluster.kill(leader.name, signal.SIGKILL)
    cluster.kill(other.name, signal.SIGKILL)  # no majority: no new leader
    await consume_all(ns, "cg-raft-read", "RaftRead", acked)


async def test_failover_benchmark_kills_and_measures(tmp_path: Path) -> None:
    """`rocketq bench failover` end to end, briefly: each kill is measured, and the killed
    member is back and caught up before the next."""
    from rocketq.bench.failover_bench import failover

    lines: list[str] = []
    result = await failover(
        kills=2,
        concurrency=4,
        size=256,
        data_dir=str(tmp_path),
        settings=FAST_RAFT,
        echo=lines.append,
    )
    assert len(result["failover_ms"]) == 2  # type: ignore[arg-type]
    assert int(result["send_ok"]) > 0  # type: ignore[call-overload]
    assert sum(line.startswith("kill ") for line in lines) == 2
    assert list(tmp_path.iterdir()) == []  # its cluster's data is gone
