"""``rocketq bench transport``: what one request in flight costs before any broker work,
measured in one run on this machine: the floor a loopback round trip has (blocking sockets
between two processes), the remoting transport in one process, and the remoting transport
between two processes (an echo server answering every request the way a broker answers a
send, but without storing anything).

The last line is the ceiling of rocketq's one-at-a-time sends (``rocketq bench peers
--scenarios sync_send``): a send also does the broker's work, so it can only be slower.
Each side runs on uvloop when it is installed, as the broker and the benchmarks do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from rocketq.bench.report import LatencySummary, rate, summarize_ns
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, RemotingClient, RemotingServer
from rocketq.sdk.wire import send_request

# What the echo answers: a send's answer header, as a broker writes it.
_ANSWER: Final = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "0"}
_SERVER_READY_TIMEOUT: Final = 10.0


@dataclass(frozen=True, slots=True)
class TransportResult:
    case: str
    round_trips: int
    elapsed_s: float
    latency: LatencySummary

    @property
    def per_s(self) -> float:
        return rate(self.round_trips, self.elapsed_s)


def _request(size: int) -> RemotingCommand:
    """A send of ``size`` bytes as the SDK writes it (its request, with the binary header
    its broker connections use)."""
    cmd = send_request(
        b"x" * size,
        "UNIQ_KEY\x017F0000010001000000000000\x02",
        group="bench_pg",
        topic="BenchTransport",
        queue_id=0,
        born_timestamp=int(time.time() * 1000),
    )
    cmd.serialize_type = SerializeType.ROCKETMQ
    return cmd


def _echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, dict(_ANSWER))


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _run(coro: Awaitable[TransportResult]) -> TransportResult:
    with asyncio.Runner(loop_factory=_new_loop) as runner:
        return runner.run(coro)  # type: ignore[arg-type]


async def _timed(
    call: Callable[[], Awaitable[object]], case: str, duration: float
) -> TransportResult:
    await call()  # the connection opened, the first frame parsed
    lat: list[int] = []
    start = time.perf_counter()
    stop_at = start + duration
    while time.perf_counter() < stop_at:
        t0 = time.perf_counter_ns()
        await call()
        lat.append(time.perf_counter_ns() - t0)
    return TransportResult(case, len(lat), time.perf_counter() - start, summarize_ns(lat))


# -- the cases ------------------------------------------------------------------------------


def socket_floor(size: int, duration: float) -> TransportResult:
    """Blocking sockets, a child process answering: the loopback round trip alone."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        child = os.fork()
        if child == 0:  # pragma: no cover - the child answers until the parent hangs up
            try:
                conn, _ = listener.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                answer = b"a" * 64
                while conn.recv(65536):
                    conn.sendall(answer)
            finally:
                os._exit(0)
        try:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                request = b"x" * (size + 100)
                lat: list[int] = []
                sock.sendall(request)
                sock.recv(65536)
                start = time.perf_counter()
                stop_at = start + duration
                while time.perf_counter() < stop_at:
                    t0 = time.perf_counter_ns()
                    sock.sendall(request)
                    sock.recv(65536)
                    lat.append(time.perf_counter_ns() - t0)
                elapsed = time.perf_counter() - start
        finally:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)
    return TransportResult("socket", len(lat), elapsed, summarize_ns(lat))


async def _in_process(size: int, duration: float) -> TransportResult:
    server = RemotingServer({RequestCode.SEND_MESSAGE_V2: _echo})
    port = await server.start("127.0.0.1", 0)
    client = RemotingClient()
    addr = f"127.0.0.1:{port}"
    try:
        return await _timed(
            lambda: client.invoke(addr, _request(size), 5.0), "remoting-in-process", duration
        )
    finally:
        await client.close()
        await server.stop()


def in_process(size: int, duration: float) -> TransportResult:
    """The remoting transport, client and server on one event loop."""
    return _run(_in_process(size, duration))


async def _across(port: int, size: int, duration: float) -> TransportResult:
    client = RemotingClient()
    addr = f"127.0.0.1:{port}"
    try:
        return await _timed(lambda: client.invoke(addr, _request(size), 5.0), "remoting", duration)
    finally:
        await client.close()


def across_processes(size: int, duration: float) -> TransportResult:
    """The remoting transport, the echo server in a process of its own."""
    server = subprocess.Popen(
        [sys.executable, "-c", "from rocketq.bench.transport_bench import serve; serve()"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # the port, once it listens
        if not line.strip().isdigit():
            raise RuntimeError(f"the echo server did not start (it said {line!r})")
        return _run(_across(int(line), size, duration))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGTERM)
        try:
            server.wait(_SERVER_READY_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def serve() -> None:
    """The echo server of ``across_processes``: prints its port, answers until SIGTERM."""

    async def main() -> None:
        server = RemotingServer({RequestCode.SEND_MESSAGE_V2: _echo})
        port = await server.start("127.0.0.1", 0)
        print(port, flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.stop()

    with asyncio.Runner(loop_factory=_new_loop) as runner:
        runner.run(main())


def run(size: int, duration: float) -> list[TransportResult]:
    """The three cases, one after another."""
    return [
        socket_floor(size, duration),
        in_process(size, duration),
        across_processes(size, duration),
    ]


def report(results: list[TransportResult]) -> dict[str, object]:
    """The JSON object: each case's rate and latency, and the ratios to the socket floor."""
    floor = results[0].per_s or 1.0
    return {
        "bench": "transport",
        "cases": {
            r.case: {"round_trips_per_s": round(r.per_s, 1), **r.latency.fields()} for r in results
        },
        "of_socket_floor": {r.case: round(r.per_s / floor, 3) for r in results},
    }
