"""A server's access check before its handlers and a client's signing hook, over real
loopback TCP: refusals are answered (oneway ones are not), refused requests never reach
their handler, codes without a handler are still answered as unsupported, the sign hook
runs on requests only, and a verified client certificate names the connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import ONEWAY_FLAG, RemotingCommand, decode, encode
from rocketq.remoting.tls import ClientSecurity, ServerTls, client_context
from rocketq.remoting.transport import (
    Connection,
    RemotingClient,
    RemotingServer,
    connect,
    request_blocking,
    request_once,
)
from tests.remoting.tls_certs import make_certs

OPEN = 1100  # the access check lets it through
SHUT = 1101  # the access check refuses it
RAISES = 1102  # the access check raises
ASK_CLIENT = 1103  # the handler asks the client something back
UNHANDLED = 1199  # no handler


class Seen:
    """What the server's handlers and its access check saw."""

    def __init__(self) -> None:
        self.handled: list[tuple[int, dict[str, str]]] = []
        self.checked: list[tuple[int, str, str | None]] = []
        self.client_answers: list[RemotingCommand] = []
        self.connections: list[Connection] = []


def make_server(seen: Seen, tls: ServerTls | None = None) -> RemotingServer:
    def record(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        seen.handled.append((cmd.code, dict(cmd.ext or {})))
        seen.connections.append(conn)
        return cmd.response(ResponseCode.SUCCESS, {"ok": "1"})

    async def ask_client(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        seen.handled.append((cmd.code, dict(cmd.ext or {})))
        answer = await conn.invoke(RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE), 2.0)
        seen.client_answers.append(answer)
        return cmd.response(ResponseCode.SUCCESS)

    def access(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        seen.checked.append((cmd.code, conn.peer_ip, conn.tls_identity))
        if cmd.code == SHUT:
            return cmd.response(ResponseCode.NO_PERMISSION, remark="no permission for SHUT")
        if cmd.code == RAISES:
            raise RuntimeError("the access check broke")
        return None

    handlers = {OPEN: record, SHUT: record, RAISES: record, ASK_CLIENT: ask_client}
    return RemotingServer(handlers, access=access, tls=tls)


@pytest.fixture
async def served() -> AsyncIterator[tuple[RemotingServer, Seen]]:
    seen = Seen()
    srv = make_server(seen)
    await srv.start("127.0.0.1", 0)
    try:
        yield srv, seen
    finally:
        await srv.stop()


def addr(srv: RemotingServer) -> str:
    return f"127.0.0.1:{srv.port}"


async def test_a_refusal_is_answered_and_the_handler_not_called(
    served: tuple[RemotingServer, Seen],
) -> None:
    srv, seen = served
    conn = await connect(addr(srv), {})
    try:
        refused = await conn.invoke(RemotingCommand(SHUT, {"a": "1"}), 2.0)
        assert refused.code == ResponseCode.NO_PERMISSION
        assert refused.remark == "no permission for SHUT"
        allowed = await conn.invoke(RemotingCommand(OPEN, {"a": "2"}), 2.0)
        assert allowed.code == ResponseCode.SUCCESS
    finally:
        conn.close()
    assert seen.handled == [(OPEN, {"a": "2"})]
    assert [(code, ip) for code, ip, _ in seen.checked] == [
        (SHUT, "127.0.0.1"),
        (OPEN, "127.0.0.1"),
    ]
    # Refused requests were never in flight on the server's side.
    assert all(c.in_flight == 0 for c in srv.connections)


async def test_an_access_check_that_raises_answers_system_error(
    served: tuple[RemotingServer, Seen],
) -> None:
    srv, seen = served
    conn = await connect(addr(srv), {})
    try:
        answer = await conn.invoke(RemotingCommand(RAISES), 2.0)
    finally:
        conn.close()
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "the access check broke" not in (answer.remark or "")
    assert "ref" in (answer.remark or "")
    assert seen.handled == []


async def test_codes_without_a_handler_are_unsupported_without_asking(
    served: tuple[RemotingServer, Seen],
) -> None:
    srv, seen = served
    conn = await connect(addr(srv), {})
    try:
        answer = await conn.invoke(RemotingCommand(UNHANDLED), 2.0)
    finally:
        conn.close()
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert seen.checked == []


async def read_frame(reader: asyncio.StreamReader) -> RemotingCommand:
    size = int.from_bytes(await reader.readexactly(4), "big")
    return decode(await reader.readexactly(size))


async def test_a_refused_oneway_request_is_not_answered(
    served: tuple[RemotingServer, Seen],
) -> None:
    srv, seen = served
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    try:
        oneway = RemotingCommand(SHUT, {"n": "1"}, opaque=7, flag=ONEWAY_FLAG)
        asked = RemotingCommand(OPEN, {"n": "2"}, opaque=8)
        writer.write(encode(oneway) + encode(asked))
        # Frames come back in order: a refusal of the oneway one would come first.
        first = await asyncio.wait_for(read_frame(reader), 2.0)
    finally:
        writer.close()
    assert first.opaque == 8
    assert first.code == ResponseCode.SUCCESS
    assert [code for code, _, _ in seen.checked] == [SHUT, OPEN]
    assert seen.handled == [(OPEN, {"n": "2"})]


async def test_a_refused_oneway_request_through_invoke_oneway_reaches_no_handler(
    served: tuple[RemotingServer, Seen],
) -> None:
    srv, seen = served
    conn = await connect(addr(srv), {})
    try:
        conn.invoke_oneway(RemotingCommand(SHUT))
        conn.invoke_oneway(RemotingCommand(OPEN, {"last": "1"}))
        deadline = asyncio.get_running_loop().time() + 2.0
        while not seen.handled and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
    finally:
        conn.close()
    assert seen.handled == [(OPEN, {"last": "1"})]


def signer(calls: list[int]) -> ClientSecurity:
    def sign(cmd: RemotingCommand) -> None:
        assert not cmd.is_response
        calls.append(cmd.code)
        ext = cmd.ext if cmd.ext is not None else {}
        ext["Signature"] = f"signed-{cmd.code}"
        cmd.ext = ext

    return ClientSecurity(sign=sign)


async def test_the_sign_hook_runs_on_requests_only(
    served: tuple[RemotingServer, Seen],
) -> None:
    srv, seen = served
    calls: list[int] = []

    def state(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, {"state": "commit"})

    client = RemotingClient({RequestCode.CHECK_TRANSACTION_STATE: state}, security=signer(calls))
    try:
        answer = await client.invoke(addr(srv), RemotingCommand(OPEN, {"k": "v"}), 2.0)
        assert answer.code == ResponseCode.SUCCESS
        await client.invoke_oneway(addr(srv), RemotingCommand(OPEN))
        # The server asks the client back; the client's answer is a response: not signed.
        answer = await client.invoke(addr(srv), RemotingCommand(ASK_CLIENT), 2.0)
        assert answer.code == ResponseCode.SUCCESS
    finally:
        await client.close()
    assert calls == [OPEN, OPEN, ASK_CLIENT]
    assert seen.handled[0] == (OPEN, {"k": "v", "Signature": f"signed-{OPEN}"})
    assert seen.handled[1] == (OPEN, {"Signature": f"signed-{OPEN}"})
    assert seen.handled[2] == (ASK_CLIENT, {"Signature": f"signed-{ASK_CLIENT}"})
    [back] = seen.client_answers
    assert back.ext == {"state": "commit"}


async def test_one_shot_requests_are_signed(served: tuple[RemotingServer, Seen]) -> None:
    srv, seen = served
    calls: list[int] = []
    answer = await request_once(addr(srv), RemotingCommand(OPEN), 2.0, security=signer(calls))
    assert answer.code == ResponseCode.SUCCESS
    answer = await asyncio.to_thread(
        request_blocking, addr(srv), RemotingCommand(OPEN, {"b": "1"}), 2.0, security=signer(calls)
    )
    assert answer.code == ResponseCode.SUCCESS
    assert calls == [OPEN, OPEN]
    assert seen.handled == [
        (OPEN, {"Signature": f"signed-{OPEN}"}),
        (OPEN, {"b": "1", "Signature": f"signed-{OPEN}"}),
    ]


async def test_a_verified_client_certificate_names_the_connection(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    client_pem = certs.issue("client", common_name="producer-7")
    tls = ServerTls(
        "enforcing", certs.server.cert, certs.server.key, certs.ca, client_auth="require"
    )
    seen = Seen()
    srv = make_server(seen, tls)
    await srv.start("127.0.0.1", 0)
    try:
        ctx = client_context(certs.ca, client_pem.cert, client_pem.key)
        conn = await connect(addr(srv), {}, security=ClientSecurity(ssl=ctx))
        try:
            answer = await conn.invoke(RemotingCommand(OPEN), 2.0)
        finally:
            conn.close()
        assert answer.code == ResponseCode.SUCCESS
        assert seen.checked == [(OPEN, "127.0.0.1", "producer-7")]
        assert seen.connections[0].tls_identity == "producer-7"
        assert conn.tls_identity == "server"  # a client sees the server's verified name
    finally:
        await srv.stop()


async def test_no_identity_without_a_client_certificate(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    tls = ServerTls("permissive", certs.server.cert, certs.server.key, certs.ca, "optional")
    seen = Seen()
    srv = make_server(seen, tls)
    await srv.start("127.0.0.1", 0)
    try:
        ctx = client_context(certs.ca)
        conn = await connect(addr(srv), {}, security=ClientSecurity(ssl=ctx))
        plain = await connect(addr(srv), {})
        try:
            assert (await conn.invoke(RemotingCommand(OPEN), 2.0)).code == ResponseCode.SUCCESS
            assert (await plain.invoke(RemotingCommand(OPEN), 2.0)).code == ResponseCode.SUCCESS
        finally:
            conn.close()
            plain.close()
        assert [identity for _, _, identity in seen.checked] == [None, None]
    finally:
        await srv.stop()
