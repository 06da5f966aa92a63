"""The bounds of real nameserver and broker processes, started by the launcher that
``rocketq cluster up`` uses, with short timeouts set through their config keys: peers that
send half a frame, say nothing, or announce a frame past the limit are cut off, clients go
on sending and looking up routes, and each crossing shows in the process's
``rocketq_remoting_rejected_total{reason}``."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time

from rocketq import Message, Producer, SendStatus
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, encode
from rocketq.remoting.transport import request_once
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until
from tests.server_probe import connect, cut_off, rejected, vm_hwm_kib


async def send_one(namesrv: str, topic: str) -> None:
    async with Producer(group="pg-bounds", namesrv=namesrv) as producer:
        result = await producer.send(Message(topic, b"still served"))
        assert result.status is SendStatus.SEND_OK


async def test_real_servers_cut_off_slow_idle_and_oversized_peers(
    make_cluster: MakeCluster,
) -> None:
    bounds = {
        "server_frame_read_timeout_seconds": "0.5",
        "server_channel_max_idle_time_seconds": "2",
    }
    # (The nameserver keeps its idle timeout: the broker registers every 30 s.)
    cluster = make_cluster(
        broker_settings=bounds,
        nameserver_settings={"server_frame_read_timeout_seconds": "0.5"},
    )
    broker, namesrv = cluster.brokers[0], cluster.nameservers[0]
    before = rejected(broker)
    assert before["frame_read_timeout"] == 0 and before["idle"] == 0

    # Half a frame to the broker, and nothing more: cut off after the read timeout.
    slow_reader, slow_writer = await connect(broker.port, broker.host)
    slow_writer.write(encode(RemotingCommand(10, body=b"x" * 4000))[:1000])
    await slow_writer.drain()
    # A peer that says nothing at all: cut off after the idle timeout.
    idle_reader, idle_writer = await connect(broker.port, broker.host)
    # A frame announced past the nameserver's limit (16 MiB): cut off at its length.
    big_reader, big_writer = await connect(namesrv.port, namesrv.host)
    big_writer.write(struct.pack(">I", 64 * 1024 * 1024) + b"\0" * 64)
    await big_writer.drain()

    assert 0.4 <= await cut_off(slow_reader, 10) < 10
    assert await cut_off(big_reader, 10) < 10
    # Meanwhile clients are served: a route from the nameserver, a send to the broker.
    await send_one(cluster.namesrv_addr, "BoundsTopic")
    await cut_off(idle_reader, 15)
    for writer in (slow_writer, idle_writer, big_writer):
        writer.close()

    await wait_until(
        lambda: rejected(broker)["frame_read_timeout"] >= 1 and rejected(broker)["idle"] >= 1,
        lambda: f"the broker's counters to move: {rejected(broker)}",
    )
    await wait_until(
        lambda: rejected(namesrv)["frame_too_large"] == 1,
        lambda: f"the nameserver's counter to move: {rejected(namesrv)}",
    )
    await send_one(cluster.namesrv_addr, "BoundsTopic")  # and still served after


# -- requests held in flight ----------------------------------------------------------------

MIB = 1024 * 1024


def hostile_register_frame() -> bytes:
    """REGISTER_BROKER with a JSON header and an uncompressed body of 16,773,120 zero bytes
    (not JSON: decoded in a thread, refused), just under the 16 MiB frame limit."""
    fields = {
        "brokerName": "hostile-broker", "brokerAddr": "127.0.0.1:1",
        "clusterName": "HostileCluster", "haServerAddr": "", "brokerId": "0",
        "compressed": "false",
    }  # fmt: skip
    head = {"code": RequestCode.REGISTER_BROKER, "language": "PYTHON", "version": 0}
    header = json.dumps({**head, "opaque": 1, "flag": 0, "extFields": fields}).encode()
    body = bytes(16 * MIB - 4096)
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def flood(host: str, port: int, frame: bytes, frames: int) -> None:
    """Send ``frames`` frames back to back without reading an answer, then read until the
    server closes or goes quiet."""
    with socket.create_connection((host, port), timeout=60) as sock:
        try:
            for _ in range(frames):
                sock.sendall(frame)
            sock.settimeout(5)
            while sock.recv(1 << 20):
                pass
        except OSError:
            pass  # cut off or reset: the server may close a peer over its bounds


async def test_a_nameserver_holds_queued_register_frames_within_its_in_flight_budget(
    make_cluster: MakeCluster,
) -> None:
    # The nameserver's in-flight budgets (32 MiB a connection, 64 MiB in all), set here as
    # the test's premise, and room for four whole frames in partial-frame buffers (the
    # default, 32 MiB, would cut some of these connections off before their frames are
    # whole: another bound than the one this test crosses); the bound checked is theirs
    # plus what a nameserver holds besides (decodes, the heap).
    cluster = make_cluster(
        nameserver_settings={
            "server_max_in_flight_bytes_per_connection": str(32 * MIB),
            "server_max_in_flight_bytes": str(64 * MIB),
            "server_max_buffered_bytes": str(64 * MIB),
        }
    )
    namesrv = cluster.nameservers[0]
    started_hwm = vm_hwm_kib(namesrv.pid)
    frame = hostile_register_frame()
    floods = [
        asyncio.ensure_future(asyncio.to_thread(flood, namesrv.host, namesrv.port, frame, 16))
        for _ in range(4)
    ]
    slowest = 0.0
    routes = 0
    while not all(f.done() for f in floods):
        asked = time.monotonic()
        answer = await request_once(
            namesrv.addr,
            RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}),
            timeout=1.0,  # RequestTimeoutError past a second
        )
        slowest = max(slowest, time.monotonic() - asked)
        assert answer.code in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)
        routes += 1
        await asyncio.wait(floods, timeout=0.2)  # the client's pace
    for f in floods:
        await f
    peak = vm_hwm_kib(namesrv.pid) // 1024
    assert routes >= 3 and slowest < 1.0
    assert peak < 400, f"the nameserver peaked at {peak} MiB (from {started_hwm // 1024})"
    await wait_until(
        lambda: rejected(namesrv)["in_flight_bytes"] >= 1,
        lambda: f"the nameserver's counter to move: {rejected(namesrv)}",
    )
    assert cluster.is_alive(namesrv.name)
