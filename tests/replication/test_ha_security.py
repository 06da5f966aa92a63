"""Who may replicate from a master: with inner credentials the master takes only a hello
signed with them (no signature, a wrong secret, a stale timestamp or a hello played again
are closed at once, with no CommitLog byte sent) while a real slave replicates; a report
past what was sent closes the link and never completes a SYNC_MASTER send; the HA port
over TLS (enforcing, permissive, client certificates)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.auth.credentials import Credentials
from rocketq.remoting.tls import ServerTls, client_context
from rocketq.replication.ha.master import HAMaster, listen_socket
from rocketq.replication.ha.secure import MAX_SKEW_MS, now_ms
from rocketq.replication.ha.slave import HASlave
from rocketq.replication.ha.wire import (
    REPORT,
    TRANSFER,
    Hello,
    decode_transfer_head,
    encode_hello,
    sign_hello,
)
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus
from tests.integration.waiting import wait_until
from tests.remoting.tls_certs import make_certs
from tests.storage.conftest import batch
from tests.storage.test_replica import log_bytes

INNER = Credentials("rocketq-inner", "inner-secret")
WRONG = Credentials("rocketq-inner", "not-the-secret")


async def start_master(store: MessageStore, **kw: Any) -> tuple[HAMaster, int]:
    master = HAMaster(store, max_gap=1 << 30, **kw)
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    await master.start(sock)
    return master, port


def slave_of(store: MessageStore, port: int, **kw: Any) -> HASlave:
    return HASlave(
        store,
        lambda: f"127.0.0.1:{port}",
        broker_addr="127.0.0.1:10911",
        broker_id=1,
        report_interval=0.2,
        **kw,
    )


async def replicates(master: HAMaster, store: MessageStore, n: int = 20) -> None:
    """SYNC sends are acknowledged by the slave."""
    ends = [store.append(batch("T", [b"x" * 100]), "T", 0).end_offset for _ in range(n)]
    statuses = await asyncio.gather(*(master.wait_slave(e, 5.0) for e in ends))
    assert set(statuses) == {PutStatus.PUT_OK}


async def refused(port: int, raw: bytes) -> bytes:
    """Send ``raw`` to the HA port; what the master sent back before it closed (a reset:
    nothing)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


async def test_forged_hellos_are_refused_while_a_real_slave_replicates(
    tmp_path: Path, store_factory: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    master_store: MessageStore = await store_factory(tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    master_store.append(batch("T", [b"secret body" * 10]), "T", 0)
    master, port = await start_master(master_store, inner=INNER)
    slave = slave_of(slave_store, port, inner=INNER)
    slave.start()
    try:
        await wait_until(lambda: len(master.slaves) == 1, "the real slave to connect")
        (real,) = master.slaves.values()
        assert real.authenticated and real.broker_addr == "127.0.0.1:10911"
        rejected = master.guard.rejected
        forged = [
            encode_hello(Hello(2, 0, "6.6.6.6:10911")),  # no signature (version 1)
            encode_hello(sign_hello(Hello(2, 0, "6.6.6.6:10911"), WRONG)),
            encode_hello(
                sign_hello(
                    Hello(2, 0, "6.6.6.6:10911"),
                    INNER,
                    timestamp_ms=now_ms() - MAX_SKEW_MS - 60_000,
                )
            ),
            encode_hello(
                sign_hello(
                    Hello(2, 0, "6.6.6.6:10911"), Credentials("someone-else", "inner-secret")
                )
            ),
        ]
        for n, raw in enumerate(forged, 1):
            assert await refused(port, raw) == b""  # not one byte of the CommitLog
            assert rejected["ha_unauthenticated"] == n
        # A signed hello copied off the network and played again.
        copied = encode_hello(
            sign_hello(Hello(3, master_store.max_phy_offset, "10.0.0.3:1"), INNER)
        )
        _, first = await asyncio.open_connection("127.0.0.1", port)
        first.write(copied)
        await first.drain()
        await wait_until(lambda: len(master.slaves) == 2, "the first use to be taken")
        first.close()
        await wait_until(lambda: len(master.slaves) == 1, "it to leave")
        assert await refused(port, copied) == b""
        assert rejected["ha_unauthenticated"] == len(forged) + 1
        # The real slave replicated throughout, and goes on.
        await replicates(master, master_store)
        await wait_until(
            lambda: slave_store.max_phy_offset == master_store.max_phy_offset, "the same end"
        )
        assert log_bytes(slave_store) == log_bytes(master_store)
        assert list(master.slaves.values()) == [real]
        # Logged once for the address within the minute, however many were refused.
        lines = [r for r in caplog.records if "[ha_unauthenticated]" in r.getMessage()]
        assert len(lines) == 1, [r.getMessage() for r in lines]
    finally:
        await slave.stop()
        await master.stop()


async def test_without_credentials_old_and_signed_hellos_are_taken(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    """Auth off is the old behaviour: a version 1 hello replicates; a signed one too (a
    slave configured before its master), not marked authenticated."""
    master_store: MessageStore = await store_factory(tmp_path / "m")
    master, port = await start_master(master_store)
    slaves = [
        slave_of(await store_factory(tmp_path / "s1"), port),
        slave_of(await store_factory(tmp_path / "s2"), port, inner=INNER),
    ]
    for s in slaves:
        s.start()
    try:
        await wait_until(lambda: len(master.slaves) == 2, "both slaves to connect")
        assert [c.authenticated for c in master.slaves.values()] == [False, False]
        await replicates(master, master_store)
    finally:
        for s in slaves:
            await s.stop()
        await master.stop()


async def read_transfers(reader: asyncio.StreamReader, until: int) -> int:
    """Read transfers until one ends at ``until``; -> that end."""
    end = 0
    while end < until:
        offset, _, size, _ = decode_transfer_head(await reader.readexactly(TRANSFER.size))
        await reader.readexactly(size)
        end = offset + size
    return end


async def test_an_ack_past_what_was_sent_closes_the_link(
    store_factory: Callable[..., Any],
) -> None:
    """A slave that reports 2^60 (past what it was sent): the connection is closed, counted,
    and the SYNC send waiting for a slave is not completed by it (it times out)."""
    store: MessageStore = await store_factory()
    master, port = await start_master(store)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_hello(Hello(1, 0, "127.0.0.1:2")))
        await writer.drain()
        await wait_until(lambda: master.best_ack == 0, "the slave to connect")
        end = store.append(batch("T", [b"x" * 64]), "T", 0).end_offset
        store.settle()
        assert await read_transfers(reader, end) == end
        waiting = asyncio.ensure_future(master.wait_slave(end + 1000, 0.5))
        later = store.append(batch("T", [b"y" * 64]), "T", 0).end_offset  # not read yet
        assert later > end
        writer.write(REPORT.pack(1 << 60))
        await writer.drain()
        await wait_until(lambda: not master.slaves, "the master to drop the link")
        assert master.guard.rejected["ha_ack_past_sent"] == 1
        assert master.best_ack == -1
        assert await waiting is PutStatus.FLUSH_SLAVE_TIMEOUT
    finally:
        writer.close()
        await master.stop()


async def test_a_report_within_what_was_sent_is_taken(store_factory: Callable[..., Any]) -> None:
    """The control: the same link reporting what it was sent completes the wait; a slave
    that was ahead of the master may report its old end once (it had not cut back yet)."""
    store: MessageStore = await store_factory()
    store.append(batch("T", [b"x" * 64]), "T", 0)
    master, port = await start_master(store)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        ahead = store.max_phy_offset + 500
        writer.write(encode_hello(Hello(1, ahead, "127.0.0.1:2")))
        writer.write(REPORT.pack(ahead))  # its old end, before the TRUNCATE arrived
        await writer.drain()
        await wait_until(lambda: master.best_ack == store.max_phy_offset, "the slave to connect")
        end = store.append(batch("T", [b"y" * 64]), "T", 0).end_offset
        store.settle()
        waiting = asyncio.ensure_future(master.wait_slave(end, 5.0))
        await read_transfers(reader, end)
        writer.write(REPORT.pack(end))
        await writer.drain()
        assert await waiting is PutStatus.PUT_OK
        assert len(master.slaves) == 1
        assert master.guard.rejected["ha_ack_past_sent"] == 0
    finally:
        writer.close()
        await master.stop()


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
async def test_ha_over_tls_replicates(
    tmp_path: Path, store_factory: Callable[..., Any], mode: str
) -> None:
    """A slave over TLS replicates byte for byte; plaintext is closed by an enforcing port
    and taken by a permissive one."""
    certs = make_certs(tmp_path / "certs")
    tls = ServerTls(mode, certs.server.cert, certs.server.key)  # type: ignore[arg-type]
    master_store: MessageStore = await store_factory(tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    master, port = await start_master(master_store, tls=tls, inner=INNER)
    slave = slave_of(slave_store, port, inner=INNER, ssl=client_context(certs.ca))
    slave.start()
    try:
        await wait_until(lambda: len(master.slaves) == 1, "the slave to connect over TLS")
        await replicates(master, master_store, 50)
        await wait_until(
            lambda: slave_store.max_phy_offset == master_store.max_phy_offset, "the same end"
        )
        assert log_bytes(slave_store) == log_bytes(master_store)
        plain = encode_hello(sign_hello(Hello(2, 0, "127.0.0.1:3"), INNER))
        if mode == "enforcing":
            assert await refused(port, plain) == b""
            assert master.guard.rejected["ha_tls_required"] == 1
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(plain)
            await writer.drain()
            await wait_until(lambda: len(master.slaves) == 2, "the plaintext slave")
            assert len(await reader.readexactly(TRANSFER.size)) == TRANSFER.size
            writer.close()
    finally:
        await slave.stop()
        await master.stop()


async def test_a_client_certificate_proves_the_slave(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    """With client certificates required, a slave showing a node's certificate is
    authenticated without inner credentials; one without cannot connect; a wrong CA's is
    refused, and so is a user's certificate from the same CA (it names no node)."""
    certs = make_certs(tmp_path / "certs")
    other = make_certs(tmp_path / "other")
    tls = ServerTls(
        "enforcing",
        certs.server.cert,
        certs.server.key,
        certs.ca,
        client_auth="require",
        node_pattern="broker-*",
    )
    mine = certs.issue("slave", common_name="broker-a-1")
    master_store: MessageStore = await store_factory(tmp_path / "m")
    master, port = await start_master(master_store, tls=tls)
    slave = slave_of(
        await store_factory(tmp_path / "s"),
        port,
        ssl=client_context(certs.ca, mine.cert, mine.key),
    )
    slave.start()
    try:
        await wait_until(lambda: len(master.slaves) == 1, "the slave to connect")
        (conn,) = master.slaves.values()
        assert conn.authenticated and conn.tls_identity == "broker-a-1"
        await replicates(master, master_store)
        stranger = other.issue("stranger", common_name="broker-a-1")
        alice = certs.issue("alice", common_name="alice")
        for ctx in (
            client_context(certs.ca),
            client_context(certs.ca, stranger.cert, stranger.key),
            client_context(certs.ca, alice.cert, alice.key),
        ):
            with pytest.raises((ConnectionError, OSError, asyncio.IncompleteReadError)):
                reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
                try:
                    writer.write(encode_hello(Hello(2, 0, "6.6.6.6:1")))
                    await writer.drain()
                    await reader.readexactly(1)
                finally:
                    writer.close()
        assert len(master.slaves) == 1
        assert master.guard.rejected["ha_tls_handshake"] >= 1
        assert master.guard.rejected["ha_unauthenticated"] == 1  # alice's
    finally:
        await slave.stop()
        await master.stop()


async def test_a_silent_connection_to_a_tls_port_is_closed(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    """A connection that never begins its handshake is closed after the hello timeout and
    counted; the port goes on serving."""
    certs = make_certs(tmp_path / "certs")
    tls = ServerTls("enforcing", certs.server.cert, certs.server.key)
    master, port = await start_master(
        await store_factory(tmp_path / "m"), tls=tls, hello_timeout=0.3
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        assert await asyncio.wait_for(reader.read(), 5) == b""
        assert master.guard.rejected["ha_tls_handshake"] == 1
        slave = slave_of(await store_factory(tmp_path / "s"), port, ssl=client_context(certs.ca))
        slave.start()
        try:
            await wait_until(lambda: len(master.slaves) == 1, "a slave over TLS")
        finally:
            await slave.stop()
    finally:
        writer.close()
        await master.stop()


async def test_a_rotated_certificate_serves_new_links_and_keeps_the_open_one(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    """The master's certificate files replaced by another CA's: the slave connected before
    goes on replicating; a new connection gets the new certificate."""
    old, new = make_certs(tmp_path / "old"), make_certs(tmp_path / "new")
    cert, key = tmp_path / "ha.crt", tmp_path / "ha.key"
    cert.write_bytes(Path(old.server.cert).read_bytes())
    key.write_bytes(Path(old.server.key).read_bytes())
    tls = ServerTls("enforcing", str(cert), str(key), reload_interval=0.05)
    master_store: MessageStore = await store_factory(tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    master, port = await start_master(master_store, tls=tls)
    slave = slave_of(slave_store, port, ssl=client_context(old.ca))
    slave.start()
    try:
        await wait_until(lambda: len(master.slaves) == 1, "the slave to connect")
        await replicates(master, master_store)
        link = list(master.slaves)
        cert.write_bytes(Path(new.server.cert).read_bytes() + b"\n")
        key.write_bytes(Path(new.server.key).read_bytes())

        async def new_certificate_served() -> bool:
            try:
                _, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=client_context(new.ca)
                )
            except (ssl.SSLError, ConnectionError):
                return False
            writer.close()
            return True

        await wait_until(new_certificate_served, "the new certificate to be served")
        with pytest.raises(ssl.SSLError):
            await asyncio.open_connection("127.0.0.1", port, ssl=client_context(old.ca))
        assert tls.reloads == 1
        await replicates(master, master_store)  # over the link opened before
        assert list(master.slaves) == link
        assert await _caught_up(slave_store, master_store)
    finally:
        await slave.stop()
        await master.stop()


async def _caught_up(slave_store: MessageStore, master_store: MessageStore) -> bool:
    await wait_until(
        lambda: slave_store.max_phy_offset == master_store.max_phy_offset, "the same end"
    )
    return log_bytes(slave_store) == log_bytes(master_store)
