"""The bounds of the HA master's port and the Raft port, against real servers in this
process: floods of connections, silent peers, garbage, slow frames and frames announcing
64 MiB are cut off (each counted under its ``ha_``/``raft_`` reason), the bytes held stay
within the budget, and the real slave or members go on replicating throughout."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketq.common.config import ServerBoundsConfig
from rocketq.replication.ha.master import HAMaster
from rocketq.replication.ha.slave import HASlave
from rocketq.replication.ha.wire import Hello, encode_hello
from rocketq.replication.raft.node import RaftConfig, Role
from rocketq.replication.raft.server import RaftServer
from rocketq.replication.raft.wire import FRAME, MAX_FRAME, PB
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus
from tests.integration.waiting import wait_until
from tests.replication.ha_pair import master_on_loopback, slave_of
from tests.replication.raft_sim import MemoryHardState, MemoryLog
from tests.replication.test_raft_server import free_ports
from tests.server_probe import Conn, close_all, closed_by_server, connect
from tests.storage.conftest import batch

MIB = 1024 * 1024
FAST = RaftConfig(heartbeat_interval=0.2, min_vote_interval=0.1, max_vote_interval=0.3)

# -- HA ------------------------------------------------------------------------------------


class HAPair:
    def __init__(self, master: HAMaster, slave: HASlave, store: MessageStore, port: int):
        self.master, self.slave, self.store, self.port = master, slave, store, port

    async def replicates(self, n: int = 20) -> None:
        """SYNC sends are acknowledged by the real slave."""
        ends = [self.store.append(batch("T", [b"x" * 100]), "T", 0).end_offset for _ in range(n)]
        statuses = await asyncio.gather(*(self.master.wait_slave(e, 5.0) for e in ends))
        assert set(statuses) == {PutStatus.PUT_OK}


async def ha_pair(
    tmp_path: Path, store_factory: Callable[..., Any], bounds: ServerBoundsConfig, **kw: Any
) -> HAPair:
    master_store: MessageStore = await store_factory(tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    master, port = await master_on_loopback(master_store, bounds=bounds, **kw)
    slave = slave_of(slave_store, port)
    slave.start()
    await wait_until(lambda: len(master.slaves) == 1, "the slave to connect")
    return HAPair(master, slave, master_store, port)


async def test_ha_flood_cannot_keep_the_slave_out(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    """Past the caps, silent connections give way to new ones; the slave, reconnecting
    through the flood, is served, and never more connections than the cap are held."""
    bounds = ServerBoundsConfig(server_max_connections=10, server_max_connections_per_address=6)
    pair = await ha_pair(tmp_path, store_factory, bounds)
    master, guard = pair.master, pair.master.guard
    assert (guard.max_connections, guard.max_per_address) == (10, 6)
    flood: list[Conn] = []
    try:
        for _ in range(40):
            flood.append(await connect(pair.port))
            assert len(guard.open) <= 6
        await wait_until(
            lambda: guard.rejected["ha_max_connections_per_address"] >= 30,
            lambda: f"the flood to give way: {guard.rejected}",
        )
        assert len(master.slaves) == 1  # the slave said who it is: it never gives way
        await pair.replicates()
        # The slave's connection breaks; it comes back through a flood that fills the
        # cap (its connection takes the place of the oldest silent one).
        for conn in list(master.slaves.values()):
            conn.close()
        await wait_until(lambda: not master.slaves, "the slave's connection to close")
        for _ in range(10):
            flood.append(await connect(pair.port))
        await wait_until(lambda: len(master.slaves) == 1, "the slave to connect again")
        await pair.replicates()
        assert len(guard.open) <= 6
    finally:
        close_all(flood)
        await pair.slave.stop()
        await pair.master.stop()


async def test_ha_garbage_silence_and_slow_hellos_are_cut_off(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    bounds = ServerBoundsConfig(server_frame_read_timeout_seconds=0.3)
    pair = await ha_pair(tmp_path, store_factory, bounds, hello_timeout=1.0)
    guard = pair.master.guard
    try:
        # Garbage: closed at once.
        garbage = await connect(pair.port)
        garbage[1].write(b"\xff\xff\xff\xff" + b"\x00" * 64)
        # A frame "length" of 64 MiB: not a hello, closed at once.
        big = await connect(pair.port)
        big[1].write(struct.pack(">I", 64 * MIB) + b"\x00" * 60)
        # Half a hello, then nothing: the frame read timeout.
        slow = await connect(pair.port)
        slow[1].write(encode_hello(Hello(7, 0, "127.0.0.1:7"))[:10])
        # Nothing at all: the hello timeout.
        silent = await connect(pair.port)
        # A hello, then no report: idle once the idle bound passes.
        mute = await connect(pair.port)
        mute[1].write(encode_hello(Hello(8, 0, "127.0.0.1:8")))
        guard.idle_timeout = 1.0  # (60 s by default: 12 reports of ha_send_heartbeat_interval)
        await guard.stop()
        guard.start()
        for conn in (garbage, big):
            await closed_by_server(conn, 2.0)
        await closed_by_server(slow, 3.0)
        await closed_by_server(silent, 5.0)
        await closed_by_server(mute, 5.0)
        counts = guard.rejected
        assert counts["ha_bad_frame"] == 2, counts
        assert counts["ha_frame_read_timeout"] == 1, counts
        assert counts["ha_idle"] == 2, counts  # the silent one and the mute one
        await wait_until(lambda: len(guard.open) == 1, lambda: f"{len(guard.open)} open")
        assert guard.buffered == 0
        assert len(pair.master.slaves) == 1  # the real slave reports: never idle
        await pair.replicates()
    finally:
        await pair.slave.stop()
        await pair.master.stop()


# -- Raft ----------------------------------------------------------------------------------


async def raft_group(bounds: ServerBoundsConfig, **kw: Any) -> tuple[list[RaftServer], list[int]]:
    ids = ["n0", "n1", "n2"]
    ports = free_ports(3)
    addrs = {i: f"127.0.0.1:{p}" for i, p in zip(ids, ports, strict=True)}
    servers = []
    for i in ids:
        server = RaftServer(
            i,
            addrs[i],
            {p: a for p, a in addrs.items() if p != i},
            MemoryLog(),
            MemoryHardState(),
            config=FAST,
            bounds=bounds,
            **kw,
        )
        await server.start()
        servers.append(server)
    return servers, ports


def leader_of(servers: list[RaftServer]) -> RaftServer | None:
    live = [s for s in servers if s.node.role is Role.LEADER]
    return live[0] if len(live) == 1 else None


async def commits(servers: list[RaftServer], n: int = 10) -> None:
    """Entries proposed now are committed by every member."""
    await wait_until(lambda: leader_of(servers) is not None, "a leader", timeout=10)
    leader = leader_of(servers)
    assert leader is not None
    last = [leader.node.propose(b"entry %d" % i) for i in range(n)][-1]
    await wait_until(
        lambda: all(s.node.commit_index >= last for s in servers), "all to commit", timeout=10
    )


def frame_of(sender: str) -> bytes:
    """A Raft frame of no kind from ``sender`` (what a keepalive is)."""
    from rocketq.common.proto.rocketq.v1 import rocketq_pb2 as pb

    body = pb.RaftMessage(sender=sender).SerializeToString()
    return FRAME.pack(1 + len(body), PB) + body


async def test_raft_partial_frames_stay_within_the_budget() -> None:
    """Connections announcing 64 MiB frames and sending most of them: the bytes held never
    pass the budget (the frames that began longest ago are dropped), and the group commits."""
    servers, ports = await raft_group(ServerBoundsConfig())
    target = servers[0]
    guard = target.guard
    assert guard.max_buffered == MAX_FRAME + 4  # one whole frame fits
    conns: list[Conn] = []
    try:
        await commits(servers)
        chunk = b"\x00" * MIB
        peak = 0
        for _ in range(4):
            conn = await connect(ports[0])
            conns.append(conn)
            conn[1].write(struct.pack(">IB", MAX_FRAME, PB))
            for _ in range(24):
                conn[1].write(chunk)
                await conn[1].drain()
                peak = max(peak, guard.buffered)
                assert guard.buffered <= guard.max_buffered
        await wait_until(
            lambda: guard.rejected["raft_buffered_bytes"] >= 1,
            lambda: f"a partial frame to be dropped: {guard.rejected}",
        )
        await commits(servers)
        assert guard.buffered <= guard.max_buffered and peak <= guard.max_buffered
    finally:
        close_all(conns)
        for s in servers:
            await s.stop()


async def test_raft_garbage_slow_frames_floods_and_idle_links() -> None:
    """Garbage, frames past the limit or from no member, slow frames, silent connections
    and a flood are cut off; the members' own links, idle or not, are kept."""
    bounds = ServerBoundsConfig(
        server_frame_read_timeout_seconds=0.5,
        server_max_connections_per_address=12,
    )
    servers, ports = await raft_group(bounds, hello_timeout=1.0)
    for s in servers:  # (30 s by default; the links carry a frame every 0.2 s)
        s.guard.idle_timeout = 1.5
        await s.guard.stop()
        s.guard.start()
    target = servers[0]
    guard = target.guard
    flood: list[Conn] = []
    try:
        await commits(servers)
        links = [set(s._inbound) for s in servers]  # each member's links from the others
        assert [len(x) for x in links] == [2, 2, 2]
        garbage = await connect(ports[0])
        garbage[1].write(b"\xff" * 16)  # a frame of 4 GiB
        stranger = await connect(ports[0])
        stranger[1].write(frame_of("mallory"))
        unknown = await connect(ports[0])
        unknown[1].write(b"\x00\x00\x00\x03abc")
        slow = await connect(ports[0])
        slow[1].write(struct.pack(">IB", MAX_FRAME, PB) + b"\x00" * 100)
        mute = await connect(ports[0])
        mute[1].write(frame_of("n1"))  # says it is a member, then nothing: idle
        for conn in (garbage, stranger, unknown):
            await closed_by_server(conn, 2.0)
        await closed_by_server(slow, 3.0)
        for _ in range(30):
            flood.append(await connect(ports[0]))
        await closed_by_server(mute, 6.0)
        await wait_until(lambda: len(guard.fresh) == 0, "the silent flood to be cut off", 5)
        counts = guard.rejected
        assert counts["raft_frame_too_large"] == 1, counts
        assert counts["raft_bad_frame"] == 2, counts
        assert counts["raft_frame_read_timeout"] == 1, counts
        assert counts["raft_max_connections_per_address"] >= 15, counts
        assert counts["raft_idle"] >= 2, counts
        # The members' links, idle or not, never went idle or gave way.
        await commits(servers)
        await wait_until(lambda: set(target._inbound) == links[0], "the hostile ones to go")
        for s, before in zip(servers[1:], links[1:], strict=True):
            assert set(s._inbound) == before
            assert sum(s.guard.rejected.values()) == 0, s.guard.rejected
        assert guard.buffered == 0
    finally:
        close_all(flood)
        for s in servers:
            await s.stop()
