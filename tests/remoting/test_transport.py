"""RemotingCommand over real loopback TCP: many requests in flight on one connection,
answers out of order, oneway requests, the server calling the client, errors as codes."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import pytest

from rocketq.common.exceptions import (
    ConnectBrokerError,
    RequestTimeoutError,
    TopicNotExistError,
)
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, encode
from rocketq.remoting.transport import (
    Connection,
    RemotingClient,
    RemotingServer,
    connect,
)

ECHO = 1000
SLOW = 1001
FAIL = 1002
BOOM = 1003
ONEWAY = 1004
CALL_BACK = 1005
# What each server's ONEWAY handler received, by the server's id.
ONEWAYS: dict[int, list[str]] = {}


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    got: list[str] = []

    def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, cmd.ext, cmd.body)

    async def slow(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float(cmd.field("delay")))
        return cmd.response(ResponseCode.SUCCESS, {"n": cmd.field("n")})

    def fail(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        raise TopicNotExistError("topic T does not exist")

    async def boom(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("kaput")

    def oneway(conn: Connection, cmd: RemotingCommand) -> None:
        got.append(cmd.field("v"))

    async def call_back(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        # The server asks the client something over the client's own connection.
        answer = await conn.invoke(
            RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, {"q": "state?"}), 2.0
        )
        return cmd.response(ResponseCode.SUCCESS, {"client said": answer.field("state")})

    srv = RemotingServer(
        {ECHO: echo, SLOW: slow, FAIL: fail, BOOM: boom, ONEWAY: oneway, CALL_BACK: call_back}
    )
    await srv.start("127.0.0.1", 0)
    ONEWAYS[id(srv)] = got
    try:
        yield srv
    finally:
        del ONEWAYS[id(srv)]
        await srv.stop()


def addr(srv: RemotingServer) -> str:
    return f"127.0.0.1:{srv.port}"


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_many_in_flight_answered_out_of_order(server: RemotingServer, kind: int) -> None:
    conn = await connect(addr(server), {})
    try:
        # The first waits longest: responses come back in the other order and still match.
        calls = [
            conn.invoke(
                RemotingCommand(
                    SLOW, {"n": str(i), "delay": str(0.2 - i * 0.002)}, serialize_type=kind
                ),
                5.0,
            )
            for i in range(64)
        ]
        answers = await asyncio.gather(*calls)
        assert [a.field("n") for a in answers] == [str(i) for i in range(64)]
        assert all(a.serialize_type == kind for a in answers)
        big = bytes(range(256)) * 4096  # 1 MiB in one frame
        echoed = await conn.invoke(RemotingCommand(ECHO, {"k": "v"}, big, serialize_type=kind), 5)
        assert bytes(echoed.body or b"") == big and echoed.ext == {"k": "v"}
        assert not conn.pending
    finally:
        conn.close()


async def test_errors_come_back_as_response_codes(server: RemotingServer) -> None:
    conn = await connect(addr(server), {})
    try:
        failed = await conn.invoke(RemotingCommand(FAIL), 2.0)
        assert failed.code == ResponseCode.TOPIC_NOT_EXIST and "does not exist" in str(
            failed.remark
        )
        boom = await conn.invoke(RemotingCommand(BOOM), 2.0)
        # An unexpected error: a generic remark and a reference to the server's log line;
        # the exception's type and text stay in the log.
        assert boom.code == ResponseCode.SYSTEM_ERROR
        assert "kaput" not in str(boom.remark) and "RuntimeError" not in str(boom.remark)
        assert "see the server's log (ref " in str(boom.remark)
        unknown = await conn.invoke(RemotingCommand(4242), 2.0)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "4242" in str(unknown.remark)
        # The connection still works after each of them.
        assert (await conn.invoke(RemotingCommand(ECHO, {"x": "1"}), 2.0)).ext == {"x": "1"}
    finally:
        conn.close()


async def test_oneway_requests_get_no_answer(server: RemotingServer) -> None:
    conn = await connect(addr(server), {})
    try:
        for v in "abc":
            conn.invoke_oneway(RemotingCommand(ONEWAY, {"v": v}))
        conn.invoke_oneway(RemotingCommand(FAIL))  # an error is not answered either
        await conn.invoke(RemotingCommand(ECHO), 2.0)  # after the oneways, in order
        assert ONEWAYS[id(server)] == ["a", "b", "c"]
        assert not conn.pending
    finally:
        conn.close()


async def test_the_server_calls_the_client(server: RemotingServer) -> None:
    def check_state(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, {"state": "COMMIT"})

    client = RemotingClient({RequestCode.CHECK_TRANSACTION_STATE: check_state})
    try:
        answer = await client.invoke(addr(server), RemotingCommand(CALL_BACK), 3.0)
        assert answer.ext == {"client said": "COMMIT"}
        assert len(server.connections) == 1
    finally:
        await client.close()


async def test_timeouts_and_closed_connections(server: RemotingServer) -> None:
    client = RemotingClient()
    try:
        with pytest.raises(RequestTimeoutError, match="within 50 ms"):
            await client.invoke(addr(server), RemotingCommand(SLOW, {"n": "1", "delay": "1"}), 0.05)
        conn = await client.connection(addr(server))
        waiting = asyncio.ensure_future(
            conn.invoke(RemotingCommand(SLOW, {"n": "2", "delay": "5"}), 10.0)
        )
        await asyncio.sleep(0)
        await server.stop()  # the server goes away with a request in flight
        with pytest.raises(ConnectBrokerError, match="closed"):
            await waiting
        with pytest.raises(ConnectBrokerError, match="cannot connect"):
            await client.invoke(addr(server), RemotingCommand(ECHO), 1.0)
    finally:
        await client.close()


async def test_a_bad_frame_closes_the_connection(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">I", 64 * 1024 * 1024))  # over the 16 MiB frame limit
    assert await asyncio.wait_for(reader.read(), 2.0) == b""  # closed by the server
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">II", 6, (9 << 24) | 2) + b"{}")  # unknown header type
    assert await asyncio.wait_for(reader.read(), 2.0) == b""
    writer.close()
    # Others are not disturbed.
    conn = await connect(addr(server), {})
    assert (await conn.invoke(RemotingCommand(ECHO), 2.0)).code == ResponseCode.SUCCESS
    conn.close()


async def test_frames_split_anywhere_are_put_back_together(server: RemotingServer) -> None:
    from rocketq.remoting.command import decode, encode

    frames = b"".join(
        encode(RemotingCommand(ECHO, {"i": str(i)}, b"x" * i, opaque=i + 1)) for i in range(20)
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    for i in range(0, len(frames), 7):  # 7-byte pieces: lengths and headers split
        writer.write(frames[i : i + 7])
        await writer.drain()
    got = []
    for _ in range(20):
        size = struct.unpack(">I", await reader.readexactly(4))[0]
        got.append(decode(await reader.readexactly(size)))
    assert [c.field("i") for c in got] == [str(i) for i in range(20)]
    assert [len(c.body or b"") for c in got] == list(range(20))
    writer.close()


async def test_a_read_is_framed_by_the_read_hooks_and_a_failing_end_drops_its_answers() -> None:
    """``before_read`` runs before the frames of one read are handled and ``after_read``
    once they are, before their answers leave; when ``after_read`` raises (a broker could
    not write the read's sends), the connection closes without those answers."""
    events: list[str] = []
    fail = False

    def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        events.append(f"handle {cmd.field('n')}")
        return cmd.response(ResponseCode.SUCCESS, cmd.ext)

    def after() -> None:
        events.append("after")
        if fail:
            raise OSError(5, "Input/output error")

    srv = RemotingServer(
        {ECHO: echo}, before_read=lambda: events.append("before"), after_read=after
    )
    await srv.start("127.0.0.1", 0)
    try:
        frames = b"".join(encode(RemotingCommand(ECHO, {"n": str(i)}, opaque=i)) for i in (1, 2))
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(frames)
        for _ in (1, 2):
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5.0), "big")
            await asyncio.wait_for(reader.readexactly(size), 5.0)
        assert events == ["before", "handle 1", "handle 2", "after"]
        fail = True
        writer.write(frames)
        assert await asyncio.wait_for(reader.read(), 5.0) == b""  # closed, nothing answered
        assert events[-1] == "after" and events.count("handle 2") == 2
        writer.close()
    finally:
        await srv.stop()
