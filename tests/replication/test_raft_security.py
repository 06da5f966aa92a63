"""Raft frames bound to the member their link proved to come from: with inner credentials a
vote or an append naming another member, or sent on a link that did not prove itself (no
handshake, a wrong secret, a handshake meant for another member or played again), is
refused with the link and changes nothing; a three-member group elects, replicates and
survives a leader kill with credentials on, over TLS and with client certificates."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rocketq.auth.credentials import Credentials
from rocketq.remoting.tls import ServerTls, client_context
from rocketq.replication.raft.node import (
    AppendRequest,
    Entry,
    Message,
    RaftConfig,
    Role,
    VoteRequest,
)
from rocketq.replication.raft.server import RaftServer
from rocketq.replication.raft.wire import encode, encode_handshake, sign_handshake
from tests.integration.waiting import wait_until
from tests.remoting.tls_certs import make_certs
from tests.replication.raft_sim import MemoryHardState, MemoryLog
from tests.replication.test_raft_server import free_ports

FAST = RaftConfig(heartbeat_interval=0.2, min_vote_interval=0.1, max_vote_interval=0.3)
INNER = Credentials("rocketq-inner", "inner-secret")
WRONG = Credentials("rocketq-inner", "not-the-secret")

VOTE_FROM_N2 = VoteRequest(term=5, candidate="n2", last_index=100, last_term=4)
APPEND_FROM_N2 = AppendRequest(7, "n2", 0, 0, (Entry(7, b"forged"),), 1)


async def lone_member(**kw: Any) -> tuple[RaftServer, int]:
    """Member n0 of a group whose other members (n1, n2) are not running: it stays a
    follower of term 0 unless a frame it takes says otherwise."""
    port, p1, p2 = free_ports(3)
    server = RaftServer(
        "n0",
        f"127.0.0.1:{port}",
        {"n1": f"127.0.0.1:{p1}", "n2": f"127.0.0.1:{p2}"},
        MemoryLog(),
        MemoryHardState(),
        config=FAST,
        **kw,
    )
    await server.start()
    return server, port


async def send(port: int, *frames: bytes, ssl: Any = None) -> bool:
    """Send ``frames`` on a new link; True if the member closed it."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ssl, server_hostname="127.0.0.1" if ssl else None
    )
    try:
        writer.write(b"".join(frames))
        await writer.drain()
        try:
            return await asyncio.wait_for(reader.read(), 1.0) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    finally:
        writer.close()


def untouched(server: RaftServer) -> bool:
    node = server.node
    return node.term == 0 and node.voted_for is None and node.leader is None


def hello(member: str, creds: Credentials = INNER, to: str = "n0", **kw: Any) -> bytes:
    return encode_handshake(sign_handshake(member, to, creds, **kw))


def frame(sender: str, msg: Message) -> bytes:
    return encode(sender, msg)


async def test_spoofed_frames_are_refused() -> None:
    server, port = await lone_member(inner=INNER)
    rejected = server.guard.rejected
    try:
        # Linked as n1, naming n2: the vote and the append are refused.
        assert await send(port, hello("n1"), frame("n2", VOTE_FROM_N2))
        assert await send(port, hello("n1"), frame("n2", APPEND_FROM_N2))
        assert rejected["raft_forged_sender"] == 2
        # No handshake, a wrong secret, one meant for another member, a stale one, one of
        # a non-member: the link has not proved itself; the frames are refused.
        unproved = [
            b"",
            hello("n2", WRONG),
            hello("n2", to="n1"),
            hello("n2", timestamp_ms=0),
            hello("n9"),
        ]
        for n, first in enumerate(unproved, 1):
            assert await send(port, first, frame("n2", VOTE_FROM_N2))
            assert rejected["raft_unauthenticated"] == n
        assert untouched(server)
        # A handshake played again on a new link is refused too.
        copied = hello("n2")
        assert not await send(port, copied)
        assert await send(port, copied, frame("n2", VOTE_FROM_N2))
        assert rejected["raft_unauthenticated"] == len(unproved) + 1
        assert untouched(server)
        # The control: n2's own link, its own vote: taken.
        await send(port, hello("n2"), frame("n2", VOTE_FROM_N2))
        await wait_until(lambda: server.node.voted_for == "n2", "the vote to be granted")
        assert server.node.term == 5
    finally:
        await server.stop()


async def test_without_credentials_frames_are_taken_as_before() -> None:
    server, port = await lone_member()
    try:
        await send(port, frame("n2", APPEND_FROM_N2))
        await wait_until(lambda: server.node.term == 7, "the append to be taken")
        assert server.node.log.last_index() == 1
    finally:
        await server.stop()


async def test_a_client_certificate_binds_its_member(tmp_path: Path) -> None:
    """With client certificates required, a node's certificate whose common name is a
    member's id speaks for that member only; a plaintext link (permissive port) without a
    handshake is refused, and so is a link showing a certificate of the same CA that names
    no node (a user's), even one whose name is a member's id."""
    certs = make_certs(tmp_path)
    tls = ServerTls(
        "permissive",
        certs.server.cert,
        certs.server.key,
        certs.ca,
        client_auth="require",
        node_pattern="n[0-9]",
    )
    server, port = await lone_member(tls=tls)
    n1 = certs.issue("n1", common_name="n1")
    as_n1 = client_context(certs.ca, n1.cert, n1.key)
    try:
        assert await send(port, frame("n2", VOTE_FROM_N2), ssl=as_n1)
        assert server.guard.rejected["raft_forged_sender"] == 1
        assert await send(port, frame("n2", APPEND_FROM_N2))  # plaintext, unproved
        assert server.guard.rejected["raft_unauthenticated"] == 1
        alice = certs.issue("alice", common_name="alice")
        assert await send(
            port, frame("n2", VOTE_FROM_N2), ssl=client_context(certs.ca, alice.cert, alice.key)
        )
        assert server.guard.rejected["raft_unauthenticated"] == 2
        # A user's certificate naming a member in a DNS name: still no node (no name matches).
        posing = certs.issue("posing", "n2.users.test", common_name="bob")
        assert await send(
            port, frame("n2", VOTE_FROM_N2), ssl=client_context(certs.ca, posing.cert, posing.key)
        )
        assert server.guard.rejected["raft_unauthenticated"] == 3
        assert untouched(server)
        n2 = certs.issue("n2", common_name="n2")
        await send(port, frame("n2", VOTE_FROM_N2), ssl=client_context(certs.ca, n2.cert, n2.key))
        await wait_until(lambda: server.node.voted_for == "n2", "the vote to be granted")
    finally:
        await server.stop()


@pytest.mark.parametrize("kind", ["inner", "tls", "mtls"])
async def test_three_members_elect_replicate_and_fail_over(tmp_path: Path, kind: str) -> None:
    ids = ["n0", "n1", "n2"]
    addrs = {i: f"127.0.0.1:{p}" for i, p in zip(ids, free_ports(3), strict=True)}
    logs = {i: MemoryLog() for i in ids}
    commits: dict[str, int] = dict.fromkeys(ids, 0)
    servers: dict[str, RaftServer] = {}
    certs = make_certs(tmp_path / "certs")
    for i in ids:

        def on_commit(index: int, i: str = i) -> None:
            commits[i] = index

        kw: dict[str, Any] = {}
        if kind in ("inner", "tls"):
            kw["inner"] = INNER
        if kind == "tls":
            kw["tls"] = ServerTls("enforcing", certs.server.cert, certs.server.key)
            kw["ssl"] = client_context(certs.ca)
        if kind == "mtls":
            mine = certs.issue(i, "127.0.0.1", common_name=i)
            kw["tls"] = ServerTls(
                "enforcing", mine.cert, mine.key, certs.ca, client_auth="require", node_pattern="n*"
            )
            kw["ssl"] = client_context(certs.ca, mine.cert, mine.key)
        servers[i] = RaftServer(
            i,
            addrs[i],
            {p: a for p, a in addrs.items() if p != i},
            logs[i],
            MemoryHardState(),
            config=FAST,
            on_commit=on_commit,
            **kw,
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
        for s in servers.values():  # nothing honest was refused
            assert not any(n for r, n in s.guard.rejected.items() if "forged" in r or "auth" in r)
            assert not s.guard.rejected["raft_tls_handshake"]
    finally:
        for s in servers.values():
            await s.stop()
