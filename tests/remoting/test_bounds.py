"""Every bound of a remoting server, crossed against a real server on loopback TCP: the
offending connection is closed (or its request refused with SYSTEM_BUSY), the server keeps
answering other clients, the crossing is counted by reason and logged once a minute per
address. Timeouts are short, set through the bounds' config keys; waits have deadlines."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from rocketq.common.config import ServerBoundsConfig, load_config
from rocketq.common.exceptions import ConfigError, TopicNotExistError
from rocketq.common.metrics import Base, bounds_collector
from rocketq.common.metrics_server import MetricsServer
from rocketq.nameserver.config import NameServerConfig
from rocketq.remoting import bounds, transport
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand, decode, encode
from rocketq.remoting.transport import SMALL_FRAME, Connection, RemotingServer, connect
from tests.pure import ran_pure
from tests.server_probe import cut_off

ECHO = 1000
HOLD = 1001  # answered when the test releases it
LATER = 1002  # answered later through conn.send (as a send waiting for a slave)
BIG_LATER = 1003  # a big answer, once released
BOOM = 1004
FAIL = 1005
BAD_ANSWER = 1006  # an answer that cannot be encoded (a handler's bug)

# Short bounds; each test overrides what it crosses.
FAST = ServerBoundsConfig(
    server_channel_max_idle_time_seconds=0,
    server_frame_read_timeout_seconds=0,
)


async def wait_until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.01)


class Harness:
    def __init__(self, srv: RemotingServer, release: asyncio.Event) -> None:
        self.srv = srv
        self.release = release
        self.later: list[tuple[Connection, RemotingCommand]] = []
        # What the server's connection and the server held in flight (bytes) as each held
        # request's handler began.
        self.seen: list[tuple[int, int]] = []

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.srv.port}"

    @property
    def rejected(self) -> dict[str, int]:
        return self.srv.guard.rejected

    async def serves(self) -> None:
        """A new client still gets an answer."""
        conn = await connect(self.addr, {})
        try:
            answer = await conn.invoke(RemotingCommand(ECHO, {"k": "v"}), 3.0)
            assert answer.code == ResponseCode.SUCCESS and answer.ext == {"k": "v"}
        finally:
            conn.close()

    async def raw(self, **sockopts: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        sock = socket.socket()
        for opt, value in sockopts.items():
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, opt), value)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", self.srv.port))
        return await asyncio.open_connection(sock=sock)


MakeServer = Callable[..., Awaitable[Harness]]


@pytest.fixture
async def make_server() -> AsyncIterator[MakeServer]:
    started: list[RemotingServer] = []

    async def make(**changes: Any) -> Harness:
        release = asyncio.Event()

        def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS, cmd.ext, cmd.body)

        async def hold(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            harness.seen.append((conn.in_flight_bytes, srv.guard.in_flight_bytes))
            await release.wait()
            return cmd.response(ResponseCode.SUCCESS)

        def later(conn: Connection, cmd: RemotingCommand) -> None:
            harness.later.append((conn, cmd))

        async def big_later(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            await release.wait()
            return cmd.response(ResponseCode.SUCCESS, body=b"x" * int(cmd.field("size")))

        async def boom(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            raise RuntimeError("secret detail: /etc/passwd")

        def fail(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            raise TopicNotExistError("topic T does not exist; create it")

        def bad_answer(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS, {"k": "\ud800"})  # a lone surrogate

        srv = RemotingServer(
            {
                ECHO: echo,
                HOLD: hold,
                LATER: later,
                BIG_LATER: big_later,
                BOOM: boom,
                FAIL: fail,
                BAD_ANSWER: bad_answer,
            },
            bounds=replace(FAST, **changes),
        )
        await srv.start("127.0.0.1", 0)
        started.append(srv)
        harness = Harness(srv, release)
        return harness

    try:
        yield make
    finally:
        for srv in started:
            await srv.stop()


# -- connections ----------------------------------------------------------------------------


async def test_connections_over_the_server_cap_are_closed(make_server: MakeServer) -> None:
    h = await make_server(server_max_connections=3)
    conns = [await connect(h.addr, {}) for _ in range(3)]
    for conn in conns:
        assert (await conn.invoke(RemotingCommand(ECHO), 3.0)).code == ResponseCode.SUCCESS
    reader, writer = await h.raw()
    await cut_off(reader, 5.0)
    assert h.rejected[bounds.MAX_CONNECTIONS] == 1
    assert len(h.srv.guard.open) == 3
    conns.pop().close()
    await wait_until(lambda: len(h.srv.guard.open) == 2, "a connection to close")
    await h.serves()  # room again
    for conn in conns:
        assert (await conn.invoke(RemotingCommand(ECHO), 3.0)).code == ResponseCode.SUCCESS
        conn.close()
    writer.close()


async def test_connections_over_the_per_address_cap_are_closed_and_logged_once(
    make_server: MakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    h = await make_server(server_max_connections_per_address=2)
    kept = [await connect(h.addr, {}) for _ in range(2)]
    for conn in kept:
        assert (await conn.invoke(RemotingCommand(ECHO), 3.0)).code == ResponseCode.SUCCESS
    caplog.set_level(logging.WARNING, logger="rocketq.remoting.bounds")
    for _ in range(5):
        reader, writer = await h.raw()
        await cut_off(reader, 5.0)
        writer.close()
    assert h.rejected[bounds.MAX_CONNECTIONS_PER_ADDRESS] == 5
    lines = [r for r in caplog.records if "max_connections_per_address" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]  # once a minute, not per event
    assert "server_max_connections_per_address 2" in lines[0].getMessage()
    kept.pop().close()
    await wait_until(lambda: h.srv.guard.per_address.get("127.0.0.1") == 1, "a slot")
    await h.serves()
    kept[0].close()


# -- idle channels --------------------------------------------------------------------------


async def test_idle_connections_are_closed_but_not_busy_or_waiting_ones(
    make_server: MakeServer,
) -> None:
    h = await make_server(server_channel_max_idle_time_seconds=0.3)
    started = time.monotonic()
    idle_reader, idle_writer = await h.raw()
    # One sends a frame more often than the timeout, one waits on a held request (as a
    # consumer's suspended pull).
    busy = await connect(h.addr, {})
    waiting = await connect(h.addr, {})
    held = asyncio.ensure_future(waiting.invoke(RemotingCommand(HOLD), 10.0))

    async def ping(until: float) -> None:
        while time.monotonic() < until:
            answer = await busy.invoke(RemotingCommand(ECHO), 3.0)
            assert answer.code == ResponseCode.SUCCESS
            await asyncio.sleep(0.05)  # the client's pace, not synchronisation

    pinging = asyncio.ensure_future(ping(time.monotonic() + 1.5))  # five idle timeouts
    await cut_off(idle_reader, 5.0)
    assert time.monotonic() - started >= 0.3
    assert h.rejected[bounds.IDLE] == 1
    await pinging
    assert waiting.is_open and busy.is_open and not held.done()
    assert h.rejected[bounds.IDLE] == 1
    h.release.set()
    assert (await held).code == ResponseCode.SUCCESS
    # Answered, it is idle again: closed in turn, as the busy one once it stops.
    await asyncio.wait_for(asyncio.shield(waiting.closed), 5.0)
    await asyncio.wait_for(asyncio.shield(busy.closed), 5.0)
    assert h.rejected[bounds.IDLE] == 3
    await h.serves()
    idle_writer.close()


# -- partial frames -------------------------------------------------------------------------


async def test_a_frame_longer_than_the_limit_closes_at_its_length(
    make_server: MakeServer,
) -> None:
    h = await make_server(server_frame_max_length=4096, server_max_buffered_bytes=8192)
    reader, writer = await h.raw()
    writer.write(struct.pack(">I", 4097) + b"\0" * 100)  # a length past the limit
    await cut_off(reader, 5.0)
    assert h.rejected[bounds.FRAME_TOO_LARGE] == 1
    assert h.srv.guard.buffered == 0  # nothing of it was kept
    await h.serves()
    # A whole frame up to the limit still passes.
    conn = await connect(h.addr, {})
    body = b"b" * 3000
    assert (await conn.invoke(RemotingCommand(ECHO, body=body), 3.0)).body == body
    conn.close()
    writer.close()


async def test_a_header_longer_than_the_limit_closes_before_it_is_decoded(
    make_server: MakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await make_server(server_header_max_length=1024)
    decoded: list[int] = []
    real_decode = transport.decode

    def counting_decode(frame: Any) -> RemotingCommand:
        decoded.append(len(frame))
        return real_decode(frame)

    monkeypatch.setattr(transport, "decode", counting_decode)
    reader, writer = await h.raw()
    frame = encode(RemotingCommand(ECHO, {"k": "v" * 2000}))
    writer.write(frame)
    await cut_off(reader, 5.0)
    assert h.rejected[bounds.HEADER_TOO_LARGE] == 1
    assert all(n < 2000 for n in decoded)  # the long header was never decoded
    await h.serves()
    conn = await connect(h.addr, {})  # a header within the limit passes
    answer = await conn.invoke(RemotingCommand(ECHO, {"k": "v" * 500}), 3.0)
    assert answer.ext == {"k": "v" * 500}
    conn.close()
    writer.close()


async def test_a_frame_a_decoder_bug_fails_on_closes_that_connection_alone(
    make_server: MakeServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, transport):
        return
    h = await make_server()
    real_decode = transport.decode

    def buggy_decode(frame: Any) -> RemotingCommand:
        if b"KABOOM" in bytes(frame):
            raise IndexError("a decoder bug")
        return real_decode(frame)

    monkeypatch.setattr(transport, "decode", buggy_decode)
    reader, writer = await h.raw()
    with caplog.at_level(logging.ERROR, logger="rocketq.remoting.transport"):
        writer.write(encode(RemotingCommand(ECHO, {"k": "KABOOM"})))
        await cut_off(reader, 5.0)
    assert h.rejected[bounds.BAD_FRAME] == 1
    assert any("does not decode" in r.getMessage() for r in caplog.records)
    await h.serves()
    writer.close()


async def test_an_answer_that_does_not_encode_goes_out_as_a_system_error(
    make_server: MakeServer,
) -> None:
    h = await make_server()
    conn = await connect(h.addr, {})
    answer = await conn.invoke(RemotingCommand(BAD_ANSWER), 3.0)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "see the server's log" in str(answer.remark)
    echo = await conn.invoke(RemotingCommand(ECHO), 3.0)  # the connection still serves
    assert echo.code == ResponseCode.SUCCESS
    conn.close()


async def test_a_slow_partial_frame_is_closed_after_the_read_timeout(
    make_server: MakeServer,
) -> None:
    h = await make_server(server_frame_read_timeout_seconds=0.3)
    reader, writer = await h.raw()
    frame = encode(RemotingCommand(ECHO, body=b"z" * 1000))
    started = time.monotonic()
    writer.write(frame[:500])  # half a frame, and no more
    await writer.drain()
    await wait_until(lambda: h.srv.guard.buffered == 500, "the partial frame to arrive")
    # Meanwhile a client that sends whole frames is served.
    await h.serves()
    await cut_off(reader, 5.0)
    assert time.monotonic() - started >= 0.3
    assert h.rejected[bounds.FRAME_READ_TIMEOUT] == 1
    assert h.srv.guard.buffered == 0 and not h.srv.guard.partial
    await h.serves()
    writer.close()


async def test_frames_arriving_in_pieces_within_the_timeout_are_whole(
    make_server: MakeServer,
) -> None:
    h = await make_server(server_frame_read_timeout_seconds=2.0)
    reader, writer = await h.raw()
    frames = b"".join(encode(RemotingCommand(ECHO, {"n": str(i)}, b"p" * 5000)) for i in range(3))
    for at in range(0, len(frames), 777):  # pieces cutting frames and length prefixes
        writer.write(frames[at : at + 777])
        await writer.drain()
        await asyncio.sleep(0.005)
    answers = b""
    async with asyncio.timeout(5):
        while answers.count(b'"n"') < 3:
            answers += await reader.read(65536)
    assert h.srv.guard.buffered == 0 and not h.srv.guard.partial
    assert sum(h.rejected.values()) == 0
    writer.close()


async def test_partial_frames_over_the_server_budget_close_the_oldest(
    make_server: MakeServer,
) -> None:
    h = await make_server(server_frame_max_length=8192, server_max_buffered_bytes=16384)
    frame = encode(RemotingCommand(ECHO, body=b"q" * 7000))
    peers = []
    for i in range(3):  # 3 x 6000 bytes of partial frames: over 16384 with the third
        reader, writer = await h.raw()
        writer.write(frame[:6000])
        await writer.drain()
        peers.append((reader, writer))
        if i < 2:
            await wait_until(lambda i=i: h.srv.guard.buffered == 6000 * (i + 1), "buffered")
    await cut_off(peers[0][0], 5.0)  # the oldest frame's connection
    assert h.rejected[bounds.BUFFERED_BYTES] == 1
    await wait_until(lambda: h.srv.guard.buffered == 12000, "the budget to hold")
    # The others finish their frames and get their answers.
    for reader, writer in peers[1:]:
        writer.write(frame[6000:])
        await writer.drain()
        async with asyncio.timeout(5):
            assert await reader.read(65536)
    assert h.srv.guard.buffered == 0
    await h.serves()
    for _, writer in peers:
        writer.close()


# -- requests in flight ----------------------------------------------------------------------


async def test_requests_over_the_in_flight_bound_are_refused_system_busy(
    make_server: MakeServer,
) -> None:
    h = await make_server(server_max_requests_in_flight_per_connection=4)
    conn = await connect(h.addr, {})
    held = [asyncio.ensure_future(conn.invoke(RemotingCommand(HOLD), 10.0)) for _ in range(2)]
    later = [asyncio.ensure_future(conn.invoke(RemotingCommand(LATER), 10.0)) for _ in range(2)]
    await wait_until(lambda: len(h.later) == 2, "the deferred requests")
    refused = await conn.invoke(RemotingCommand(ECHO), 3.0)
    assert refused.code == ResponseCode.SYSTEM_BUSY
    assert "[REQUESTS_IN_FLIGHT]" in str(refused.remark)
    assert "server_max_requests_in_flight_per_connection 4" in str(refused.remark)
    assert h.rejected[bounds.REQUESTS_IN_FLIGHT] == 1
    await h.serves()  # another connection is not affected
    # Answers end their requests' time in flight, whichever way they go out.
    for c, cmd in h.later:
        c.send(cmd.response(ResponseCode.SUCCESS))
    h.release.set()
    assert all(a.code == ResponseCode.SUCCESS for a in await asyncio.gather(*held, *later))
    for _ in range(20):  # answered at once: none stays in flight
        assert (await conn.invoke(RemotingCommand(ECHO), 3.0)).code == ResponseCode.SUCCESS
    assert [c.in_flight for c in h.srv.guard.open] == [0]
    conn.close()


# -- bytes of requests in flight -------------------------------------------------------------

# Frames of held requests past SMALL_FRAME, and budgets of a few of them.
HELD_BODY = 200_000
IN_FLIGHT = {
    "server_frame_max_length": 256 * 1024,
    "server_max_buffered_bytes": 1024 * 1024,
    "server_max_in_flight_bytes_per_connection": 1024 * 1024,
    "server_max_in_flight_bytes": 2 * 1024 * 1024,
}


def held_frames(n: int, first: int = 1) -> bytes:
    """``n`` HOLD requests with bodies of HELD_BODY bytes, opaques from ``first``."""
    return b"".join(
        encode(RemotingCommand(HOLD, body=b"h" * HELD_BODY, opaque=first + i)) for i in range(n)
    )


async def read_answers(reader: asyncio.StreamReader, n: int) -> list[RemotingCommand]:
    """The next ``n`` frames the server sends."""
    answers: list[RemotingCommand] = []
    async with asyncio.timeout(10):
        while len(answers) < n:
            size = int.from_bytes(await reader.readexactly(4), "big")
            answers.append(decode(await reader.readexactly(size)))
    return answers


async def test_a_connection_over_its_in_flight_bytes_is_paused_until_they_are_answered(
    make_server: MakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    h = await make_server(**IN_FLIGHT)
    guard = h.srv.guard
    frame = len(held_frames(1))
    budget = IN_FLIGHT["server_max_in_flight_bytes_per_connection"]
    caplog.set_level(logging.WARNING, logger="rocketq.remoting.bounds")
    reader, writer = await h.raw()
    writer.write(held_frames(40))  # 8 MB of held requests, no answer read
    sending = asyncio.ensure_future(writer.drain())
    await wait_until(lambda: h.rejected[bounds.IN_FLIGHT_BYTES] == 1, "the pause")
    (conn,) = guard.open
    handed = conn.in_flight
    assert conn.holding and handed < 40
    # Paused after the frame that crossed the budget: at most the budget and that frame.
    assert budget < conn.in_flight_bytes <= budget + frame
    assert max(own for own, _ in h.seen) <= budget + frame
    assert guard.in_flight_bytes == conn.in_flight_bytes
    # Meanwhile another client is served, held requests of its own too.
    await h.serves()
    other = await connect(h.addr, {})
    other_held = asyncio.ensure_future(
        other.invoke(RemotingCommand(HOLD, body=b"o" * HELD_BODY), 10.0)
    )
    await wait_until(lambda: guard.in_flight_bytes > conn.in_flight_bytes, "the other's")
    assert conn.holding and conn.in_flight == handed  # nothing more read from it
    assert h.rejected[bounds.IN_FLIGHT_BYTES] == 1  # one pause, counted once
    assert guard.in_flight_bytes <= budget + 2 * frame
    # Released, everything is answered; the paused peer was read again.
    h.release.set()
    answers = await read_answers(reader, 40)
    assert [a.opaque for a in answers] == list(range(1, 41))
    assert all(a.code == ResponseCode.SUCCESS for a in answers)
    assert (await other_held).code == ResponseCode.SUCCESS
    await sending
    assert guard.in_flight_bytes == 0 and not guard.waiting
    assert not conn.holding and conn.in_flight_bytes == 0 and conn.in_flight == 0
    lines = [r for r in caplog.records if "in_flight_bytes" in r.getMessage()]
    assert len(lines) == 1 and "stopped reading from" in lines[0].getMessage()
    assert "server_max_in_flight_bytes_per_connection 1048576" in lines[0].getMessage()
    assert sum(h.rejected.values()) == h.rejected[bounds.IN_FLIGHT_BYTES]
    other.close()
    writer.close()


async def test_connections_over_the_server_in_flight_bytes_are_paused_small_requests_served(
    make_server: MakeServer,
) -> None:
    h = await make_server(**IN_FLIGHT)
    guard = h.srv.guard
    frame = len(held_frames(1))
    total = IN_FLIGHT["server_max_in_flight_bytes"]
    peers = []
    for i in range(4):  # 4 x 4 MB of held requests: over 2 MiB in all, 1 MiB each
        reader, writer = await h.raw()
        writer.write(held_frames(20, first=100 * i))
        peers.append((reader, writer, asyncio.ensure_future(writer.drain())))
    await wait_until(
        lambda: len(guard.open) == 4 and all(c.holding for c in guard.open), "all paused"
    )
    # A frame is handed to a handler only while the total is within the budget.
    assert max(server for _, server in h.seen) <= total + frame
    assert total < guard.in_flight_bytes <= total + frame
    # A client with small requests is still answered, held ones too (then it pauses).
    await h.serves()
    small = await connect(h.addr, {})
    small_held = asyncio.ensure_future(small.invoke(RemotingCommand(HOLD, body=b"s" * 100), 10))
    await wait_until(lambda: len(guard.open) == 5 and len(h.seen) > 0, "the small request")
    await wait_until(lambda: h.rejected[bounds.IN_FLIGHT_BYTES] >= 5, "its pause")
    assert guard.in_flight_bytes <= total + frame + SMALL_FRAME
    h.release.set()
    for i, (reader, writer, sending) in enumerate(peers):
        answers = await read_answers(reader, 20)
        assert sorted(a.opaque for a in answers) == [100 * i + k for k in range(20)]
        await sending
        writer.close()
    assert (await small_held).code == ResponseCode.SUCCESS
    await h.serves()
    assert guard.in_flight_bytes == 0 and not guard.waiting
    assert not any(c.holding for c in guard.open)
    small.close()


async def test_a_paused_connection_is_not_cut_off_for_the_frame_it_is_not_read(
    make_server: MakeServer,
) -> None:
    h = await make_server(
        **IN_FLIGHT,
        server_frame_read_timeout_seconds=0.2,
        server_channel_max_idle_time_seconds=0.3,
    )
    reader, writer = await h.raw()
    started = time.monotonic()
    rest = held_frames(1, first=7)
    writer.write(held_frames(6) + rest[: len(rest) // 2])  # paused after 6, half a 7th
    await writer.drain()
    await wait_until(lambda: h.rejected[bounds.IN_FLIGHT_BYTES] == 1, "the pause")
    # Many read timeouts and idle timeouts pass while the server does not read it.
    while time.monotonic() - started < 1.5:
        await h.serves()  # the client's pace, not synchronisation
        await asyncio.sleep(0.1)
    assert h.rejected[bounds.FRAME_READ_TIMEOUT] == 0 and h.rejected[bounds.IDLE] == 0
    h.release.set()
    assert len(await read_answers(reader, 6)) == 6
    writer.write(rest[len(rest) // 2 :])  # read again, the frame is completed in time
    assert [a.opaque for a in await read_answers(reader, 1)] == [7]
    assert h.rejected[bounds.FRAME_READ_TIMEOUT] == 0
    # Half a frame now, read: cut off after the read timeout as usual.
    writer.write(rest[:100])
    await cut_off(reader, 5.0)
    assert h.rejected[bounds.FRAME_READ_TIMEOUT] == 1
    writer.close()


async def test_requests_answered_later_count_until_their_answer_goes_out(
    make_server: MakeServer,
) -> None:
    h = await make_server(**IN_FLIGHT)
    guard = h.srv.guard
    conn = await connect(h.addr, {})
    body = b"l" * HELD_BODY
    later = [
        asyncio.ensure_future(conn.invoke(RemotingCommand(LATER, body=body), 10.0))
        for _ in range(3)
    ]
    await wait_until(lambda: len(h.later) == 3, "the deferred requests")
    (server_conn,) = guard.open
    # Each request's frame (its header's opaque may have more digits than another's).
    sizes = {cmd.opaque: server_conn._deferred[cmd.opaque][0] for _, cmd in h.later}
    total = guard.in_flight_bytes
    assert all(size > HELD_BODY for size in sizes.values()) and total == sum(sizes.values())
    # An answer for no held request (a reused or unknown opaque) ends none of them.
    c, cmd = h.later[0]
    stray = cmd.response(ResponseCode.SUCCESS)
    stray.opaque = 0x7FFFFFF0
    c.send(stray)
    assert guard.in_flight_bytes == total
    for c, cmd in h.later:
        c.send(cmd.response(ResponseCode.SUCCESS))
        total -= sizes[cmd.opaque]
        assert guard.in_flight_bytes == total == server_conn.in_flight_bytes
    assert all(a.code == ResponseCode.SUCCESS for a in await asyncio.gather(*later))
    conn.close()


async def test_the_bytes_of_a_closed_connection_leave_the_server_total_once(
    make_server: MakeServer,
) -> None:
    h = await make_server(**IN_FLIGHT)
    guard = h.srv.guard
    # A peer that leaves with requests held, under the budget: noticed at once, its
    # handlers cancelled, its bytes gone from the total.
    _reader, writer = await h.raw()
    writer.write(held_frames(2))
    await wait_until(lambda: len(h.seen) == 2, "the held requests")
    assert guard.in_flight_bytes > 2 * HELD_BODY
    writer.transport.abort()
    await wait_until(lambda: not guard.open, "the close")
    assert guard.in_flight_bytes == 0
    # A peer that leaves while paused: a connection not read does not see the close, its
    # handlers still hold its requests, and their bytes count until they are answered.
    _reader, writer = await h.raw()
    writer.write(held_frames(40))
    await wait_until(lambda: h.rejected[bounds.IN_FLIGHT_BYTES] == 1, "the pause")
    held = guard.in_flight_bytes
    writer.transport.abort()
    await h.serves()
    assert guard.in_flight_bytes == held
    h.release.set()  # the answers go out, the close is seen: nothing counted twice
    await wait_until(lambda: not guard.open, "the close")
    assert guard.in_flight_bytes == 0 and not guard.waiting
    await h.serves()
    assert guard.in_flight_bytes == 0


# -- answers a peer does not read ------------------------------------------------------------


async def test_a_peer_not_reading_its_answers_is_paused_then_closed(
    make_server: MakeServer,
) -> None:
    h = await make_server(
        write_buffer_high_water_mark=64 * 1024,
        write_buffer_low_water_mark=16 * 1024,
        server_max_write_buffer_bytes=1024 * 1024,
    )
    _reader, writer = await h.raw(SO_RCVBUF=4096)
    size = 512 * 1024
    for _ in range(24):  # 12 MiB of answers, more than the kernel's buffers take
        writer.write(encode(RemotingCommand(BIG_LATER, {"size": str(size)})))
    await writer.drain()
    await wait_until(
        lambda: sum(c.in_flight for c in h.srv.guard.open) == 24, "the requests in flight"
    )
    h.release.set()  # the answers come, and the peer reads none of them
    await wait_until(lambda: h.rejected[bounds.WRITE_BUFFER_FULL] == 1, "the close")
    assert h.rejected[bounds.WRITE_BUFFER_HIGH] >= 1
    assert not h.srv.guard.open  # that peer's connection is gone
    await h.serves()
    writer.close()


# -- error answers --------------------------------------------------------------------------


async def test_unexpected_errors_answer_a_reference_not_their_text(
    make_server: MakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    h = await make_server()
    conn = await connect(h.addr, {})
    with caplog.at_level(logging.ERROR, logger="rocketq.remoting.transport"):
        boom = await conn.invoke(RemotingCommand(BOOM), 3.0)
    remark = str(boom.remark)
    assert boom.code == ResponseCode.SYSTEM_ERROR
    assert "secret" not in remark and "RuntimeError" not in remark
    ref = remark.rsplit("(ref ", 1)[1].rstrip(")")
    logged = [r for r in caplog.records if f"(ref {ref})" in r.getMessage()]
    assert logged and "secret detail" in str(logged[0].exc_info[1])  # type: ignore[index]
    failed = await conn.invoke(RemotingCommand(FAIL), 3.0)  # a project error keeps its text
    assert failed.code == ResponseCode.TOPIC_NOT_EXIST
    assert failed.remark == "topic T does not exist; create it"
    conn.close()


# -- the counters as Prometheus shows them ---------------------------------------------------


async def test_the_counters_are_exported_by_reason(make_server: MakeServer) -> None:
    h = await make_server(server_max_connections=1)
    kept = await connect(h.addr, {})
    assert (await kept.invoke(RemotingCommand(ECHO), 3.0)).code == ResponseCode.SUCCESS
    reader, writer = await h.raw()
    await cut_off(reader, 5.0)
    registry = CollectorRegistry(auto_describe=False)
    base = Base(("node_type", "node_id"), ("test", "t"))
    registry.register(bounds_collector(lambda: base, lambda: h.srv.guard, dict))
    labels = {"node_type": "test", "node_id": "t"}

    def sample(name: str, **more: str) -> float | None:
        return registry.get_sample_value(name, {**labels, **more})

    assert sample("rocketq_remoting_rejected_total", reason="max_connections") == 1
    assert sample("rocketq_remoting_rejected_total", reason="idle") == 0  # present at 0
    assert sample("rocketq_remoting_connections") == 1
    assert sample("rocketq_remoting_buffered_bytes") == 0
    kept.close()
    writer.close()


# -- the metrics HTTP port -------------------------------------------------------------------


async def test_a_slowloris_on_the_metrics_port_holds_a_worker_only_until_the_timeout() -> None:
    registry = CollectorRegistry(auto_describe=False)
    server = MetricsServer(
        "127.0.0.1", 0, registry, lambda: (True, ""), what="test", workers=1, timeout=0.5
    )
    await server.start()
    url = f"http://127.0.0.1:{server.port}/healthz"

    def get() -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (ConnectionError, urllib.error.URLError):
            return 0, b""

    try:
        assert await asyncio.to_thread(get) == (200, b"ok\n")
        await wait_until(lambda: server.busy_workers == 0, "the worker to be free")
        # A slowloris takes the one worker: headers that never end.
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        await wait_until(lambda: server.busy_workers == 1, "the slowloris to take it")
        # Refused at once, not queued behind the slowloris.
        status, body = await asyncio.to_thread(get)
        assert (status, body) == (503, b"busy: every worker is answering\n")
        assert server.rejected["workers_busy"] == 1
        # Within the timeout it is cut off, and the port answers again.
        await wait_until(lambda: server.rejected["timeout"] == 1, "the cut-off", 5.0)
        assert time.monotonic() - started >= 0.4
        await wait_until(lambda: server.busy_workers == 0, "the worker to be free")
        assert await asyncio.to_thread(get) == (200, b"ok\n")
        await wait_until(lambda: server.busy_workers == 0, "the worker to be free")
        # Headers past the limit are cut off as well.
        big = socket.create_connection(("127.0.0.1", server.port))
        big.sendall(b"GET / HTTP/1.1\r\nX: " + b"a" * 20000)
        await wait_until(lambda: server.rejected["too_large"] == 1, "the too-large cut-off")
        big.close()
        slow.close()
        await wait_until(lambda: server.busy_workers == 0, "the worker to be free")
        assert await asyncio.to_thread(get) == (200, b"ok\n")
    finally:
        await server.stop()


# -- config ---------------------------------------------------------------------------------


def test_bounds_are_keys_of_both_servers_with_checks_between_them(tmp_path: Any) -> None:
    path = tmp_path / "ns.toml"
    path.write_text("server_max_connections = 7\nserver_channel_max_idle_time_seconds = 1\n")
    cfg = load_config(
        NameServerConfig,
        path,
        env={"ROCKETQ_SERVER_MAX_CONNECTIONS_PER_ADDRESS": "3"},
    )
    assert cfg.server_max_connections == 7 and cfg.server_max_connections_per_address == 3
    assert cfg.server_channel_max_idle_time_seconds == 1.0
    defaults = ServerBoundsConfig()
    assert defaults.server_channel_max_idle_time_seconds == 120  # RocketMQ's
    with pytest.raises(ConfigError, match="write_buffer_low_water_mark"):
        NameServerConfig(write_buffer_low_water_mark=2, write_buffer_high_water_mark=1)
    with pytest.raises(ConfigError, match="server_max_buffered_bytes"):
        NameServerConfig(server_max_buffered_bytes=4096, server_frame_max_length=8192)
    with pytest.raises(ConfigError, match="server_max_in_flight_bytes_per_connection"):
        NameServerConfig(
            server_max_in_flight_bytes_per_connection=4096, server_frame_max_length=8192
        )
    with pytest.raises(ConfigError, match="server_max_in_flight_bytes = 4096"):
        ServerBoundsConfig(
            server_max_in_flight_bytes=4096,
            server_max_in_flight_bytes_per_connection=8192,
            server_frame_max_length=4096,
            server_max_buffered_bytes=4096,
        )
    assert defaults.server_max_in_flight_bytes_per_connection == 64 * 1024 * 1024
    assert defaults.server_max_in_flight_bytes == 256 * 1024 * 1024
    with pytest.raises(ConfigError, match="server_max_write_buffer_bytes"):
        ServerBoundsConfig(
            server_max_write_buffer_bytes=10,
            write_buffer_high_water_mark=20,
            write_buffer_low_water_mark=5,
        )
