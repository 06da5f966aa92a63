"""Three Raft members over loopback TCP: they elect a leader, replicate and
commit what it is given, and elect another when it stops; the logs agree."""

from __future__ import annotations

import asyncio
import socket

from rocketq.replication.raft.node import RaftConfig, Role
from rocketq.replication.raft.server import RaftServer
from tests.integration.waiting import wait_until
from tests.replication.raft_sim import MemoryHardState, MemoryLog

FAST = RaftConfig(heartbeat_interval=0.2, min_vote_interval=0.1, max_vote_interval=0.3)


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


async def test_three_members_elect_replicate_and_fail_over() -> None:
    ids = ["n0", "n1", "n2"]
    addrs = {i: f"127.0.0.1:{p}" for i, p in zip(ids, free_ports(3), strict=True)}
    logs = {i: MemoryLog() for i in ids}
    commits: dict[str, int] = {i: 0 for i in ids}
    servers: dict[str, RaftServer] = {}
    for i in ids:

        def on_commit(index: int, i: str = i) -> None:
            commits[i] = index

        servers[i] = RaftServer(
            i,
            addrs[i],
            {p: a for p, a in addrs.items() if p != i},
            logs[i],
            MemoryHardState(),
            config=FAST,
            on_commit=on_commit,
        )
        await servers[i].start()
    try:

        def leader() -> RaftServer | None:
            live = [s for s in servers.values() if s.node.role is Role.LEADER]
            return live[0] if len(live) == 1 else None

        await wait_until(lambda: leader() is not None, "a leader", timeout=10)
        first = leader()
        assert first is not None
        indexes = [first.node.propose(b"entry %d" % i) for i in range(20)]
        await wait_until(
            lambda: all(c >= indexes[-1] for c in commits.values()), "all to commit", timeout=10
        )
        first_term = first.node.term
        await first.stop()
        rest = {i: s for i, s in servers.items() if s is not first}

        def new_leader() -> RaftServer | None:
            live = [s for s in rest.values() if s.node.role is Role.LEADER]
            return live[0] if live else None

        await wait_until(lambda: new_leader() is not None, "a new leader", timeout=10)
        second = new_leader()
        assert second is not None and second.node.term > first_term
        last = second.node.propose(b"after the failover")
        await wait_until(
            lambda: all(commits[i] >= last for i in rest), "the survivors to commit", timeout=10
        )
        survivors = [logs[i].items[:last] for i in rest]
        assert survivors[0] == survivors[1]
        assert [e.data for e in survivors[0] if e.data][:20] == [b"entry %d" % i for i in range(20)]
    finally:
        for s in servers.values():
            await s.stop()


async def test_garbage_on_the_raft_port_is_dropped() -> None:
    """Bytes that are not Raft frames end that connection only."""
    (port,) = free_ports(1)
    commits = [0]
    server = RaftServer(
        "n0",
        f"127.0.0.1:{port}",
        {},
        MemoryLog(),
        MemoryHardState(),
        config=FAST,
        on_commit=lambda i: commits.__setitem__(0, i),
    )
    await server.start()
    try:
        await wait_until(lambda: server.node.role is Role.LEADER, "a lone member to lead")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\xff" * 16)  # a frame of 4 GiB
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the member
        writer.close()
        _, writer2 = await asyncio.open_connection("127.0.0.1", port)
        writer2.write(b"\x00\x00\x00\x03abc")  # framed, but of no known kind
        await writer2.drain()
        writer2.close()
        index = server.node.propose(b"still serving")
        await wait_until(lambda: commits[0] >= index, "the entry to commit")
    finally:
        await server.stop()


async def test_links_to_peers_give_up_on_unacknowledged_data() -> None:
    """Each link to a peer carries TCP_USER_TIMEOUT (1.5 heartbeats, at least 1 s): after a
    partition it breaks and is made again instead of retransmitting with a doubling
    back-off once the network is back."""
    from rocketq.replication.raft.server import TCP_USER_TIMEOUT

    ids = ["n0", "n1"]
    addrs = {i: f"127.0.0.1:{p}" for i, p in zip(ids, free_ports(2), strict=True)}
    slow = RaftConfig(heartbeat_interval=2.0)
    servers = [
        RaftServer(
            i,
            addrs[i],
            {p: a for p, a in addrs.items() if p != i},
            MemoryLog(),
            MemoryHardState(),
            config=FAST if i == "n0" else slow,
        )
        for i in ids
    ]
    for s in servers:
        await s.start()
    try:
        await wait_until(lambda: all(s._links for s in servers), "both links", timeout=10)
        timeouts = []
        for s in servers:
            (link,) = s._links.values()
            sock = link.get_extra_info("socket")
            timeouts.append(sock.getsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT))
        assert timeouts == [1000, 3000]
    finally:
        for s in servers:
            await s.stop()
