"""The HA and Raft ports of real brokers, started by the launcher that ``rocketq cluster
up`` uses, under a hostile neighbour on the same address as the members: a flood of
silent connections, frames announcing 64 MiB and trickled a byte at a time, frames of
tens of MiB sent most of the way, and garbage. Replication goes on (sends are answered
SEND_OK, so acknowledged by the SYNC_MASTER's slave or the Raft quorum), each broker's
memory stays within its budget, and the refusals show in
``rocketq_remoting_rejected_total`` under ``ha_``/``raft_`` reasons."""

from __future__ import annotations

import asyncio
import contextlib
import struct

from rocketq import Message, Producer, SendStatus
from rocketq.chaos.hostile import listening_ports
from rocketq.cluster.launcher import Node
from rocketq.sdk.admin import Admin
from tests.integration.conftest import MakeCluster
from tests.integration.test_raft import FAST_RAFT, wait_leader
from tests.integration.test_server_bounds import rejected
from tests.integration.waiting import wait_until

MIB = 1024 * 1024
FLOOD = 200  # silent connections per port
BULK = 3  # connections per port sending BULK_MIB of a 64 MiB frame at once
BULK_MIB = 30
# What the hostile traffic may add to a broker's resident memory: the Raft port's budget
# of partial frames (64 MiB, one whole frame) and the allocator's slack; far below the
# FLOOD x 64 MiB announced.
RSS_GROWTH_LIMIT = 192 * MIB


def rss(node: Node) -> int:
    """The process's resident bytes (VmRSS)."""
    with open(f"/proc/{node.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {node.name}")


def replication_port(node: Node) -> int:
    """The HA or Raft port: the one the broker listens on besides remoting and metrics."""
    known = {node.port, node.metrics_port}
    if node.raft_port:
        return node.raft_port
    (port,) = listening_ports(node.pid) - known
    return port


class Neighbour:
    """Hostile connections to a set of ports, from this process; ``stop`` closes them."""

    def __init__(self, host: str, ports: list[int]) -> None:
        self.host, self.ports = host, ports
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.flooded = asyncio.Event()

    async def _open(self, port: int) -> asyncio.StreamWriter | None:
        try:
            _, writer = await asyncio.open_connection(self.host, port)
        except OSError:
            return None
        self.writers.append(writer)
        return writer

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> bool:
        try:
            writer.write(data)
            await writer.drain()
        except (OSError, RuntimeError):
            return False
        return True

    async def flood(self) -> None:
        for _ in range(FLOOD):
            for port in self.ports:
                await self._open(port)
        self.flooded.set()

    async def trickle(self) -> None:
        """Frames announcing 64 MiB, then a byte every 50 ms; a closed one is made again."""
        while True:
            for port in self.ports:
                writer = await self._open(port)
                if writer is None:
                    continue
                if await self._send(writer, struct.pack(">IB", 64 * MIB, 0)):
                    for _ in range(40):
                        if not await self._send(writer, b"\x00"):
                            break
                        await asyncio.sleep(0.05)  # the neighbour's pace, not a wait
                writer.close()

    async def bulk(self) -> None:
        """Once the flood is sent: frames announcing 64 MiB with BULK_MIB of it sent at
        once, BULK per port (more than the port's budget of partial frames)."""
        await self.flooded.wait()
        chunk = b"\x00" * MIB
        for port in self.ports:
            for _ in range(BULK):
                writer = await self._open(port)
                if writer is None or not await self._send(writer, struct.pack(">IB", 64 * MIB, 0)):
                    continue
                for _ in range(BULK_MIB):
                    if not await self._send(writer, chunk):
                        break

    async def garbage(self) -> None:
        for n in range(50):
            for port in self.ports:
                writer = await self._open(port)
                if writer is not None:
                    await self._send(writer, bytes([n]) * 4096)
                    writer.close()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.tasks = [
            loop.create_task(job()) for job in (self.flood, self.trickle, self.bulk, self.garbage)
        ]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for writer in self.writers:
            writer.close()


async def make_topic(ns: str, topic: str) -> None:
    async with Admin(ns) as admin:
        await admin.update_topic(topic, read_queue_nums=4, write_queue_nums=4)


async def sends_acknowledged(ns: str, topic: str, n: int) -> None:
    async with Producer(group="pg-port-bounds", namesrv=ns) as producer:
        for i in range(n):
            result = await producer.send(Message(topic, b"under fire %d" % i))
            assert result.status is SendStatus.SEND_OK, result


def counts(node: Node, prefix: str) -> dict[str, float]:
    return {r: n for r, n in rejected(node).items() if r.startswith(prefix)}


async def under_fire(ns: str, topic: str, brokers: list[Node], prefix: str) -> None:
    """Replication goes on while the neighbour sends to every broker's replication port,
    and each broker's memory stays within RSS_GROWTH_LIMIT of what it was."""
    await make_topic(ns, topic)
    await sends_acknowledged(ns, topic, 20)
    before = {b.name: rss(b) for b in brokers}
    peak = dict(before)

    async def sample() -> None:
        while True:
            for b in brokers:
                peak[b.name] = max(peak[b.name], rss(b))
            await asyncio.sleep(0.02)  # the sampling period, not a wait

    sampler = asyncio.get_running_loop().create_task(sample())
    neighbour = Neighbour(brokers[0].host, [replication_port(b) for b in brokers])
    neighbour.start()
    try:
        for _ in range(4):
            await sends_acknowledged(ns, topic, 25)
        await wait_until(
            lambda: all(t.done() for t in neighbour.tasks[:1] + neighbour.tasks[2:]),
            "the flood, the bulk frames and the garbage to be sent",
            timeout=60,
        )
        for _ in range(4):
            await sends_acknowledged(ns, topic, 25)
    finally:
        await neighbour.stop()
        sampler.cancel()
    growth = {name: (peak[name] - before[name]) // MIB for name in before}
    assert all(g * MIB <= RSS_GROWTH_LIMIT for g in growth.values()), growth
    await sends_acknowledged(ns, topic, 20)
    # Every broker under fire counted what it cut off.
    for b in brokers:
        seen = counts(b, prefix)
        assert seen.get(f"{prefix}bad_frame", 0) >= 1, (b.name, seen)
        assert sum(seen.values()) >= FLOOD // 2, (b.name, seen)
        if prefix == "raft_":  # (the HA port closes these frames at their first bytes)
            assert seen[f"{prefix}buffered_bytes"] >= 1, (b.name, seen)
    print(f"{prefix[:-1]}: RSS growth {growth} MiB; refused {[counts(b, prefix) for b in brokers]}")


async def test_ha_port_under_fire_keeps_sync_replication(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(replication="ha", broker_settings={"broker_role": "SYNC_MASTER"})
    master, slave = cluster.brokers[0], cluster.brokers[1]

    async def slave_connected() -> bool:
        async with Admin(cluster.namesrv_addr) as admin:
            info = {(b.broker_name, b.broker_id): b.runtime for b in await admin.cluster_list()}
        return info.get((master.broker_name, 0), {}).get("haSlaves") == "1"

    await wait_until(slave_connected, "the slave to connect to its master")
    assert not any(counts(master, "ha_").values())
    await under_fire(cluster.namesrv_addr, "HAPortBounds", [master], "ha_")
    assert await slave_connected()
    assert slave.pid  # (the one the master replicates to, SEND_OK meaning it acknowledged)


async def test_raft_ports_under_fire_keep_the_quorum(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(replication="raft", broker_settings=FAST_RAFT)
    await wait_leader(cluster)
    await under_fire(cluster.namesrv_addr, "RaftPortBounds", cluster.brokers, "raft_")
    await wait_leader(cluster)
