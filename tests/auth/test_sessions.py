"""Authentication sessions: a server with stateful authentication remembers the sender a
connection's signed request verified, says so (AUTH_SESSION, ``keyless``), and the SDK's
connections then send no AccessKey at all (the access key alone to a server that does not
say ``keyless``); a request the server refuses for that (it forgot: time, changed users) is
signed and sent again. Servers that remember nothing (stateless, a stock RocketMQ)
get every request signed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.auth.credentials import Credentials
from rocketq.auth.model import User
from rocketq.auth.server_security import ServerSecurity
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.common.config import StoreConfig
from rocketq.common.message import TopicConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import Connection, RemotingServer, connect
from rocketq.sdk.auth_wire import create_user_request, user_doc
from tests.broker.test_wire import v2
from tests.integration.waiting import wait_until

ROOT = Credentials("root", "root-secret")
ALICE = Credentials("alice", "alice-secret")


async def _servers(tmp_path: Path, strategy: str) -> tuple[NameServer, Broker]:
    keys: dict[str, Any] = {
        "authentication_enabled": True,
        "authorization_enabled": True,
        "authentication_strategy": strategy,
        "init_authentication_user": json.dumps({"username": "root", "password": "root-secret"}),
        "inner_client_authentication_credentials": json.dumps(
            {"accessKey": "inner", "secretKey": "inner-secret"}
        ),
    }
    ns = NameServer(
        NameServerConfig(
            listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"), **keys
        )
    )
    await ns.start()
    b = Broker(
        BrokerConfig(
            listen_port=0,
            ha_listen_port=0,
            metrics_port=0,
            namesrv_addr=f"127.0.0.1:{ns.port}",
            **keys,
        ),
        StoreConfig(store_path_root_dir=str(tmp_path / "store")),
    )
    await b.start()
    await wait_until(lambda: all(b.registration.registered.values()), "registration")
    b.topics.update(TopicConfig("Orders", 1, 1))
    b.auth_metadata.create_user(User(ALICE.access_key, ALICE.secret_key))
    return ns, b


@pytest.fixture
async def stateful(tmp_path: Path) -> AsyncIterator[Broker]:
    ns, b = await _servers(tmp_path, "stateful")
    try:
        yield b
    finally:
        await b.stop()
        await ns.stop()


def _spy(b: Broker, keys: list[bool] | None = None) -> list[bool]:
    """Whether each request the broker checks carries a Signature (and into ``keys``,
    whether it carries an AccessKey)."""
    seen: list[bool] = []
    check = ServerSecurity.check

    def spying(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        seen.append("Signature" in (cmd.ext or {}))
        if keys is not None:
            keys.append("AccessKey" in (cmd.ext or {}))
        return check(b.security, conn, cmd)

    b.remoting.access = spying  # type: ignore[assignment]
    for conn in b.remoting.connections:
        conn.access = spying
    return seen


def _security(credentials: Credentials) -> ClientSecurity:
    return ClientSecurity(sign=credentials.sign, access_key=credentials.access_key, sessions=True)


def _send() -> RemotingCommand:
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2("Orders", 0, ""), b"hello")


async def test_after_the_first_signed_request_no_access_key_goes(
    stateful: Broker,
) -> None:
    b = stateful
    keys: list[bool] = []
    seen = _spy(b, keys)
    conn = await connect(f"127.0.0.1:{b.remoting.port}", {}, security=_security(ROOT))
    try:
        assert conn.session_ttl == 60
        assert conn.keyless
        for _ in range(5):
            assert (await conn.invoke(_send(), 3.0)).code == ResponseCode.SUCCESS
        assert seen == [True, False, False, False, False, False]  # AUTH_SESSION, then sends
        assert keys == [True, False, False, False, False, False]
        # The users change: the server forgets every sender; the next request is refused
        # unsigned, signed and sent again, and then goes unsigned once more.
        b.auth_metadata.create_user(User("carol", "carol-secret"))
        seen.clear()
        assert (await conn.invoke(_send(), 3.0)).code == ResponseCode.SUCCESS
        assert (await conn.invoke(_send(), 3.0)).code == ResponseCode.SUCCESS
        assert seen == [False, True, False]
        # An unsigned request from a connection the server never verified is refused.
        other = await connect(f"127.0.0.1:{b.remoting.port}", {})
        try:
            forged = _send()
            forged.ext = {**(forged.ext or {}), "AccessKey": "root"}
            answer = await other.invoke(forged, 3.0)
            assert answer.code == ResponseCode.NO_PERMISSION
            assert "carries no Signature" in (answer.remark or "")
        finally:
            other.close()
    finally:
        conn.close()


async def test_a_session_holds_only_for_its_access_key(stateful: Broker) -> None:
    b = stateful
    conn = await connect(f"127.0.0.1:{b.remoting.port}", {}, security=_security(ALICE))
    try:
        assert conn.session_ttl == 60
        # Claiming another access key on the remembered connection is verified, and fails.
        claim = _send()
        claim.ext = {**(claim.ext or {}), "AccessKey": "root"}
        conn.sign, conn.session_ttl = None, 0.0  # sent as it is
        answer = await conn.invoke(claim, 3.0)
        assert answer.code == ResponseCode.NO_PERMISSION
    finally:
        conn.close()


async def test_a_stateless_server_gets_every_request_signed(tmp_path: Path) -> None:
    ns, b = await _servers(tmp_path, "stateless")
    try:
        seen = _spy(b)
        conn = await connect(f"127.0.0.1:{b.remoting.port}", {}, security=_security(ROOT))
        try:
            assert conn.session_ttl == 0
            for _ in range(3):
                assert (await conn.invoke(_send(), 3.0)).code == ResponseCode.SUCCESS
            assert seen == [True, True, True, True]
        finally:
            conn.close()
    finally:
        await b.stop()
        await ns.stop()


async def test_a_server_that_does_not_know_sessions_gets_every_request_signed() -> None:
    signed: list[bool] = []

    def handler(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        signed.append("Signature" in (cmd.ext or {}))
        return cmd.response(ResponseCode.SUCCESS)

    server = RemotingServer({RequestCode.SEND_MESSAGE_V2: handler})
    await server.start("127.0.0.1", 0)
    try:
        conn = await connect(f"127.0.0.1:{server.port}", {}, security=_security(ROOT))
        try:
            assert conn.session_ttl == 0  # REQUEST_CODE_NOT_SUPPORTED: no session
            for _ in range(3):
                await conn.invoke(_send(), 3.0)
            assert signed == [True, True, True]
        finally:
            conn.close()
    finally:
        await server.stop()


async def test_a_server_that_is_not_keyless_gets_the_access_key_alone(stateful: Broker) -> None:
    b = stateful
    keys: list[bool] = []
    seen = _spy(b, keys)
    conn = await connect(f"127.0.0.1:{b.remoting.port}", {}, security=_security(ROOT))
    try:
        conn.keyless = False  # as a server that only takes the access key alone answers
        for _ in range(2):
            assert (await conn.invoke(_send(), 3.0)).code == ResponseCode.SUCCESS
        assert seen == [True, False, False]
        assert keys == [True, True, True]
    finally:
        conn.close()


async def test_a_keyless_request_is_the_remembered_senders_and_held_to_its_policy(
    stateful: Broker,
) -> None:
    b = stateful
    conn = await connect(f"127.0.0.1:{b.remoting.port}", {}, security=_security(ALICE))
    try:
        assert conn.keyless
        conn.sign, conn.session_ttl = None, 0.0  # sent as it is: no AccessKey
        # Alice has no policy: her keyless send is refused as hers, not as nobody's.
        answer = await conn.invoke(_send(), 3.0)
        assert answer.code == ResponseCode.NO_PERMISSION
        assert "User:alice" in (answer.remark or "")
    finally:
        conn.close()
    # A keyless request on a connection nobody signed on is nobody's.
    other = await connect(f"127.0.0.1:{b.remoting.port}", {})
    try:
        answer = await other.invoke(_send(), 3.0)
        assert answer.code == ResponseCode.NO_PERMISSION
        assert "carries no AccessKey" in (answer.remark or "")
    finally:
        other.close()


async def test_a_keyless_request_of_a_super_users_session_may_manage_super_users(
    stateful: Broker,
) -> None:
    b = stateful
    conn = await connect(f"127.0.0.1:{b.remoting.port}", {}, security=_security(ROOT))
    try:
        conn.sign, conn.session_ttl = None, 0.0  # sent as it is: no AccessKey
        user = user_doc("dave", "dave-secret", "Super")
        answer = await conn.invoke(create_user_request(user), 3.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        dave = b.auth_metadata.get_user("dave")
        assert dave is not None and dave.is_super
    finally:
        conn.close()
    # Alice's session may not.
    conn = await connect(f"127.0.0.1:{b.remoting.port}", {}, security=_security(ALICE))
    try:
        conn.sign, conn.session_ttl = None, 0.0
        answer = await conn.invoke(create_user_request(user_doc("eve", "x", "Super")), 3.0)
        assert answer.code == ResponseCode.NO_PERMISSION
        assert b.auth_metadata.get_user("eve") is None
    finally:
        conn.close()
