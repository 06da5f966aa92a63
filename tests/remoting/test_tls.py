"""TLS on the remoting port and the metrics port, over real loopback TCP with certificates
made by trustme: RocketMQ's three modes, client certificates, host name checks, certificate
rotation without dropping open connections, and the bounds on sockets that never begin."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from rocketq.common.config import ServerBoundsConfig
from rocketq.common.exceptions import ConnectBrokerError
from rocketq.common.metrics_server import MetricsServer
from rocketq.remoting import bounds
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.tls import (
    ClientSecurity,
    ServerTls,
    client_context,
    client_tls_from,
    server_tls_from,
)
from rocketq.remoting.transport import (
    Connection,
    RemotingClient,
    RemotingServer,
    connect,
    request_blocking,
)
from tests.remoting.tls_certs import Certs, make_certs, write_leaf

ECHO = 1200


async def wait_until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.01)


def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, {"tls": "1" if conn.tls_identity else "0"})


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


async def serve(tls: ServerTls | None, config: ServerBoundsConfig | None = None) -> RemotingServer:
    srv = RemotingServer({ECHO: echo}, tls=tls, bounds=config)
    await srv.start("127.0.0.1", 0)
    return srv


@pytest.fixture
async def servers() -> AsyncIterator[list[RemotingServer]]:
    started: list[RemotingServer] = []
    try:
        yield started
    finally:
        for srv in started:
            await srv.stop()


def addr(srv: RemotingServer) -> str:
    return f"127.0.0.1:{srv.port}"


def tls_client(certs: Certs, *, cert: str = "", key: str = "", **kw: Any) -> ClientSecurity:
    return ClientSecurity(ssl=client_context(certs.ca, cert, key, **kw))


async def ask(srv: RemotingServer, security: ClientSecurity | None = None) -> int:
    """One request on a new connection: its answer's code (ConnectBrokerError if the
    connection is refused or closed)."""
    conn = await connect(addr(srv), {}, timeout=3.0, security=security)
    try:
        return (await conn.invoke(RemotingCommand(ECHO), 3.0)).code
    finally:
        conn.close()


def serial(conn: Connection) -> str:
    assert conn.transport is not None
    ssl_object = conn.transport.get_extra_info("ssl_object")
    assert ssl_object is not None, "not a TLS connection"
    return str(ssl_object.getpeercert()["serialNumber"])


async def closed_by_server(port: int, send: bytes, within: float) -> float:
    """Connect, send ``send``, and wait for the server to close: seconds it took."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    try:
        if send:
            writer.write(send)
        while True:
            try:
                data = await asyncio.wait_for(reader.read(4096), within)
            except ConnectionResetError:
                break
            if not data:
                break
        return time.monotonic() - started
    finally:
        writer.close()


# -- modes -------------------------------------------------------------------------------


async def test_permissive_answers_tls_and_plaintext_on_one_port(
    certs: Certs, servers: list[RemotingServer]
) -> None:
    srv = await serve(ServerTls("permissive", certs.server.cert, certs.server.key))
    servers.append(srv)
    tls_conn = await connect(addr(srv), {}, security=tls_client(certs))
    plain_conn = await connect(addr(srv), {})
    try:
        for _ in range(3):  # several requests on each, in turns
            assert (await tls_conn.invoke(RemotingCommand(ECHO), 3.0)).code == 0
            assert (await plain_conn.invoke(RemotingCommand(ECHO), 3.0)).code == 0
        assert tls_conn.transport is not None and plain_conn.transport is not None
        assert tls_conn.transport.get_extra_info("ssl_object") is not None
        assert plain_conn.transport.get_extra_info("ssl_object") is None
        assert len(srv.connections) == 2
        # A blocking one-shot request over TLS too.
        answer = await asyncio.to_thread(
            request_blocking, addr(srv), RemotingCommand(ECHO), 3.0, security=tls_client(certs)
        )
        assert answer.code == ResponseCode.SUCCESS
    finally:
        tls_conn.close()
        plain_conn.close()


async def test_enforcing_closes_plaintext_and_answers_tls(
    certs: Certs, servers: list[RemotingServer], caplog: pytest.LogCaptureFixture
) -> None:
    srv = await serve(ServerTls("enforcing", certs.server.cert, certs.server.key))
    servers.append(srv)
    assert await ask(srv, tls_client(certs)) == ResponseCode.SUCCESS
    caplog.set_level(logging.WARNING)
    for _ in range(3):
        with pytest.raises(ConnectBrokerError):
            await ask(srv)
    assert srv.guard.rejected[bounds.BAD_FRAME] == 3
    # Logged once a minute per address, not once per connection.
    lines = [r for r in caplog.records if "takes TLS only" in r.getMessage()]
    assert len(lines) == 1
    assert await ask(srv, tls_client(certs)) == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    "first", [b"\x00\x00\x00\x10garbage-garbage!", b"GET / HTTP/1.1\r\n\r\n", b"\xff"]
)
async def test_enforcing_closes_a_socket_whose_first_byte_is_not_tls(
    certs: Certs, servers: list[RemotingServer], first: bytes
) -> None:
    srv = await serve(ServerTls("enforcing", certs.server.cert, certs.server.key))
    servers.append(srv)
    await closed_by_server(srv.port, first, 3.0)
    assert srv.guard.rejected[bounds.BAD_FRAME] == 1
    assert not srv.connections


async def test_a_handshake_of_garbage_after_0x16_is_closed(
    certs: Certs, servers: list[RemotingServer]
) -> None:
    srv = await serve(ServerTls("permissive", certs.server.cert, certs.server.key))
    servers.append(srv)
    await closed_by_server(srv.port, b"\x16" + b"\x00" * 64, 3.0)
    await wait_until(lambda: srv.guard.rejected[bounds.BAD_FRAME] == 1, "the count")
    assert not srv.connections
    assert await ask(srv) == ResponseCode.SUCCESS  # the port still answers


async def test_disabled_serves_plaintext_only(certs: Certs, servers: list[RemotingServer]) -> None:
    assert server_tls_from(SimpleNamespace()) is None
    assert server_tls_from(SimpleNamespace(tls_server_mode="disabled")) is None
    srv = await serve(ServerTls("disabled", "", ""))
    servers.append(srv)
    assert await ask(srv) == ResponseCode.SUCCESS
    with pytest.raises(ConnectBrokerError, match=r"cannot connect|closed"):
        await ask(srv, tls_client(certs))


# -- client certificates -----------------------------------------------------------------


async def test_a_required_client_certificate(
    certs: Certs, servers: list[RemotingServer], tmp_path: Path
) -> None:
    tls = ServerTls("enforcing", certs.server.cert, certs.server.key, certs.ca, "require")
    srv = await serve(tls)
    servers.append(srv)
    client = certs.issue("client", common_name="app-1")
    assert await ask(srv, tls_client(certs, cert=client.cert, key=client.key)) == 0
    # None shown: refused.
    with pytest.raises(ConnectBrokerError):
        await ask(srv, tls_client(certs))
    # One from a CA the server does not trust: refused.
    other = make_certs(tmp_path / "other", "other")
    stranger = other.issue("stranger", common_name="app-1")
    with pytest.raises(ConnectBrokerError):
        await ask(srv, tls_client(certs, cert=stranger.cert, key=stranger.key))
    await wait_until(lambda: srv.guard.rejected[bounds.BAD_FRAME] == 2, "both counted")
    assert not srv.connections


async def test_an_optional_client_certificate(certs: Certs, servers: list[RemotingServer]) -> None:
    tls = ServerTls("permissive", certs.server.cert, certs.server.key, certs.ca, "optional")
    srv = await serve(tls)
    servers.append(srv)
    client = certs.issue("client", common_name="app-2")
    with_cert = await connect(
        addr(srv), {}, security=tls_client(certs, cert=client.cert, key=client.key)
    )
    without = await connect(addr(srv), {}, security=tls_client(certs))
    try:
        assert (await with_cert.invoke(RemotingCommand(ECHO), 3.0)).field("tls") == "1"
        assert (await without.invoke(RemotingCommand(ECHO), 3.0)).field("tls") == "0"
        identities = sorted(str(c.tls_identity) for c in srv.connections)
        assert identities == ["None", "app-2"]
    finally:
        with_cert.close()
        without.close()


def test_client_auth_needs_a_trust_file(certs: Certs) -> None:
    with pytest.raises(ValueError, match="trust file"):
        ServerTls("enforcing", certs.server.cert, certs.server.key, "", "require")
    with pytest.raises(ValueError, match="mode"):
        ServerTls("sometimes", certs.server.cert, certs.server.key)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="certificate and a key"):
        ServerTls("enforcing", "", "")


# -- the server's certificate, as a client checks it -----------------------------------------


async def test_a_certificate_for_another_host_is_refused_clearly(
    certs: Certs, servers: list[RemotingServer]
) -> None:
    wrong = certs.issue("wrong", "wrong.example")
    srv = await serve(ServerTls("enforcing", wrong.cert, wrong.key))
    servers.append(srv)
    with pytest.raises(ConnectBrokerError) as err:
        await ask(srv, tls_client(certs))
    text = str(err.value)
    assert f"cannot connect to {addr(srv)}" in text
    assert "TLS certificate is not accepted" in text
    assert "mismatch" in text and "127.0.0.1" in text
    # Without the host name check, the CA alone decides.
    assert await ask(srv, tls_client(certs, verify_hostname=False)) == ResponseCode.SUCCESS
    # A CA the client does not trust is refused even then.
    stranger = make_certs(certs.directory / "x", "x")
    with pytest.raises(ConnectBrokerError, match="TLS certificate is not accepted"):
        await ask(srv, ClientSecurity(ssl=client_context(stranger.ca, verify_hostname=False)))


def test_config_keys_build_the_contexts(certs: Certs) -> None:
    config = SimpleNamespace(
        tls_server_mode="permissive",
        tls_server_cert_path=certs.server.cert,
        tls_server_key_path=certs.server.key,
        tls_server_trust_cert_path=certs.ca,
        tls_server_need_client_auth="optional",
        tls_cert_reload_interval_seconds=2.5,
        tls_client_enable=True,
        tls_client_trust_cert_path=certs.ca,
        tls_client_verify_hostname=False,
    )
    server = server_tls_from(config)
    assert server is not None
    assert (server.mode, server.client_auth, server.reload_interval) == (
        "permissive",
        "optional",
        2.5,
    )
    assert server.context.verify_mode == ssl.CERT_OPTIONAL
    assert server.context.minimum_version == ssl.TLSVersion.TLSv1_2
    client = client_tls_from(config)
    assert client is not None
    assert client.check_hostname is False and client.verify_mode == ssl.CERT_REQUIRED
    assert client_tls_from(SimpleNamespace()) is None
    assert client_tls_from(SimpleNamespace(tls_client_enable=False)) is None


# -- rotation ----------------------------------------------------------------------------


async def test_a_rotated_certificate_serves_new_connections_and_open_ones_keep_going(
    certs: Certs, servers: list[RemotingServer], caplog: pytest.LogCaptureFixture
) -> None:
    tls = ServerTls("enforcing", certs.server.cert, certs.server.key, reload_interval=0.05)
    srv = await serve(tls)
    servers.append(srv)
    client = RemotingClient(security=tls_client(certs))
    old = await connect(addr(srv), {}, security=tls_client(certs))
    try:
        assert (await old.invoke(RemotingCommand(ECHO), 3.0)).code == 0
        assert (await client.invoke(addr(srv), RemotingCommand(ECHO), 3.0)).code == 0
        first = serial(old)
        # A new leaf from the same CA is written over the files (not atomically: the
        # certificate first, then its key).
        write_leaf(
            certs.authority.issue_cert("127.0.0.1", common_name="server-2"),
            certs.directory,
            Path(certs.server.cert).stem,
        )
        seen: list[str] = []

        async def new_serial() -> str:
            conn = await connect(addr(srv), {}, security=tls_client(certs))
            try:
                assert (await conn.invoke(RemotingCommand(ECHO), 3.0)).code == 0
                return serial(conn)
            finally:
                conn.close()

        deadline = time.monotonic() + 5.0
        while not seen or seen[-1] == first:
            assert time.monotonic() < deadline, "the new certificate was never served"
            seen.append(await new_serial())
        second = seen[-1]
        # The open connections keep their session and are answered.
        assert serial(old) == first
        for _ in range(3):
            assert (await old.invoke(RemotingCommand(ECHO), 3.0)).code == 0
            assert (await client.invoke(addr(srv), RemotingCommand(ECHO), 3.0)).code == 0
        assert tls.reloads >= 1

        # A key that does not load: logged, and the current certificate stays in use.
        caplog.set_level(logging.ERROR)
        Path(certs.server.key).write_text("not a key\n")
        await wait_until(
            lambda: any("do not load" in r.getMessage() for r in caplog.records),
            "the error to be logged",
        )
        assert await new_serial() == second
        assert (await old.invoke(RemotingCommand(ECHO), 3.0)).code == 0
    finally:
        old.close()
        await client.close()


# -- bounds on sockets that do not begin -------------------------------------------------------


async def test_a_silent_socket_is_closed_within_the_frame_read_timeout(
    certs: Certs, servers: list[RemotingServer]
) -> None:
    config = ServerBoundsConfig(server_frame_read_timeout_seconds=0.3)
    srv = await serve(ServerTls("permissive", certs.server.cert, certs.server.key), config)
    servers.append(srv)
    took = await closed_by_server(srv.port, b"", 5.0)
    assert 0.25 <= took < 3.0
    assert srv.guard.rejected[bounds.FRAME_READ_TIMEOUT] == 1
    # A handshake that stops half-way is bounded by the same time.
    took = await closed_by_server(srv.port, b"\x16\x03\x01", 5.0)
    assert took < 3.0
    assert not srv.connections


async def test_the_connection_caps_hold_over_tls(
    certs: Certs, servers: list[RemotingServer]
) -> None:
    config = ServerBoundsConfig(server_max_connections=1)
    srv = await serve(ServerTls("permissive", certs.server.cert, certs.server.key), config)
    servers.append(srv)
    first = await connect(addr(srv), {}, security=tls_client(certs))
    try:
        assert (await first.invoke(RemotingCommand(ECHO), 3.0)).code == 0
        with pytest.raises(ConnectBrokerError):
            await ask(srv, tls_client(certs))
        with pytest.raises(ConnectBrokerError):
            await ask(srv)
        assert srv.guard.rejected[bounds.MAX_CONNECTIONS] == 2
        assert (await first.invoke(RemotingCommand(ECHO), 3.0)).code == 0
    finally:
        first.close()


async def test_stop_closes_sockets_still_being_told_apart(
    certs: Certs, servers: list[RemotingServer]
) -> None:
    srv = await serve(ServerTls("permissive", certs.server.cert, certs.server.key))
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    try:
        await wait_until(lambda: bool(srv._sniffing), "the socket to be accepted")
        await srv.stop()
        assert await asyncio.wait_for(reader.read(), 3.0) == b""
    finally:
        writer.close()


# -- the metrics port --------------------------------------------------------------------


async def test_metrics_over_https(certs: Certs) -> None:
    registry = CollectorRegistry(auto_describe=False)
    Counter("rocketq_test_scrapes", "A counter the scrape must show.", registry=registry).inc()
    tls = ServerTls("enforcing", certs.server.cert, certs.server.key, reload_interval=0.05)
    server = MetricsServer(
        "127.0.0.1", 0, registry, lambda: (True, ""), what="test", workers=2, timeout=10.0, tls=tls
    )
    await server.start()
    context = client_context(certs.ca)

    def get(scheme: str, path: str) -> tuple[int, bytes]:
        url = f"{scheme}://127.0.0.1:{server.port}{path}"
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:
            return answer.status, answer.read()

    def peer_serial() -> str:
        with (
            socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
        ):
            return str(sock.getpeercert()["serialNumber"])

    def serial_or_none() -> str | None:
        """The served certificate's serial; None when the handshake did not finish (the
        server gives up on one after its 10 s timeout, as it may on a loaded machine)."""
        try:
            return peer_serial()
        except (ssl.SSLError, ConnectionError, TimeoutError):
            return None

    try:
        status, body = await asyncio.to_thread(get, "https", "/metrics")
        assert status == 200
        assert b"rocketq_test_scrapes_total 1.0" in body
        assert await asyncio.to_thread(get, "https", "/healthz") == (200, b"ok\n")
        # Plain HTTP to the HTTPS port: closed without an answer.
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            await asyncio.to_thread(get, "http", "/metrics")
        await wait_until(lambda: server.rejected["tls_handshake"] == 1, "the refusal counted")
        # A rotated certificate serves the next scrape.
        first = await asyncio.to_thread(peer_serial)
        write_leaf(
            certs.authority.issue_cert("127.0.0.1", common_name="server-2"),
            certs.directory,
            Path(certs.server.cert).stem,
        )
        deadline = time.monotonic() + 10.0
        while await asyncio.to_thread(serial_or_none) in (first, None):
            assert time.monotonic() < deadline, "the new certificate was never served"
        assert await asyncio.to_thread(get, "https", "/healthz") == (200, b"ok\n")
    finally:
        await server.stop()


def test_a_rotation_half_written_is_not_an_error_and_a_bad_file_is_logged_once(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    tls = ServerTls("enforcing", certs.server.cert, certs.server.key, reload_interval=3600)
    first = tls.context
    caplog.set_level(logging.ERROR)
    # Rewritten with the same bytes: nothing to reload.
    Path(certs.server.cert).write_bytes(Path(certs.server.cert).read_bytes())
    assert tls.check() is False and tls.context is first
    # The new certificate is written, its key not yet: the old context stays, quietly.
    leaf = certs.authority.issue_cert("127.0.0.1", common_name="server-2")
    Path(certs.server.cert).write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
    assert tls.check() is False
    assert tls.context is first
    assert not caplog.records
    # Then the key: the next check loads both.
    Path(certs.server.key).write_bytes(leaf.private_key_pem.bytes())
    assert tls.check() is True
    second = tls.context
    assert second is not first and tls.reloads == 1
    # A key that stays bad: logged once, however many checks see it.
    Path(certs.server.key).write_text("not a key\n")
    for _ in range(4):
        assert tls.check() is False
    assert tls.context is second
    assert len([r for r in caplog.records if "do not load" in r.getMessage()]) == 1
