"""No input stops a server: hostile remoting frames sent to a real nameserver and a real
broker close that connection, and the server answers the next client within a second and
keeps its /healthz at 200.

The frames: the 37-byte binary header whose negative key length once sent the decoder
round the same bytes for ever, a JSON header nested 100,000 levels deep, lengths that are
negative or past the frame, non-UTF-8 and lone surrogates, numbers no Java int holds.
"""

from __future__ import annotations

import socket
import struct
import time
import urllib.request
from collections.abc import Iterator
from typing import Final

import pytest

from rocketq.cluster.launcher import ClusterSpec, LocalCluster, Node
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, encode
from rocketq.remoting.transport import request_blocking
from tests.integration.conftest import SMALL_STORE

HANG_37: Final = bytes.fromhex(
    "000000210100001d006a00000000000001000000000000000000000008000000000000fffa"
)


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def binary_frame(header: bytes) -> bytes:
    return struct.pack(">II", 4 + len(header), (1 << 24) | len(header)) + header


FIXED: Final = struct.pack(">hbhii", RequestCode.HEART_BEAT, 0, 399, 7, 0)

HOSTILE: Final = {
    "37-byte hang": HANG_37,
    "nested json": json_frame(
        b'{"code":105,"extFields":{"topic":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    ),
    "value length -6 on the ascii path": binary_frame(
        FIXED + struct.pack(">ii", 0, 6) + struct.pack(">hi", 0, -6)
    ),
    "remark length -1": binary_frame(FIXED + struct.pack(">i", -1) + b"x" + bytes(4)),
    "ext length past the header": binary_frame(FIXED + struct.pack(">ii", 0, 0x7FFFFFFF)),
    "header length past the frame": struct.pack(">II", 8, 0xFFFFFF) + b"{}{}",
    "unknown serialize type": struct.pack(">II", 6, (9 << 24) | 2) + b"{}",
    "frame length -1": struct.pack(">i", -1) + bytes(8),
    "frame length 0": bytes(8),
    "json opaque infinity": json_frame(b'{"code":105,"opaque":1e999}'),
    "json code past int": json_frame(b'{"code":99999999999}'),
    "json lone surrogate": json_frame(b'{"code":105,"extFields":{"topic":"\\ud800"}}'),
    "json not utf-8": json_frame(b'{"code":105,"remark":"\xff\xfe"}'),
    "binary not utf-8": binary_frame(FIXED + struct.pack(">i", 2) + b"\xc3\x28" + bytes(4)),
}


def send_raw(addr: str, frame: bytes, timeout: float = 5.0) -> bytes:
    """Send ``frame`` on a connection of its own; what the server wrote back before it
    closed the connection (or before ``timeout``: a server that keeps a connection open
    after a frame it cannot read fails the caller's checks, not this helper)."""
    host, _, port = addr.rpartition(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(frame)
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            got += chunk
    return got


def answers_within(node: Node, seconds: float = 1.0) -> RemotingCommand:
    """A request from another client, answered within ``seconds``."""
    if node.role == "nameserver":
        request = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)
    else:
        request = RemotingCommand(
            RequestCode.GET_BROKER_RUNTIME_INFO, serialize_type=SerializeType.ROCKETMQ
        )
    started = time.monotonic()
    answer = request_blocking(node.addr, request, timeout=seconds)
    assert time.monotonic() - started < seconds
    assert answer.code == ResponseCode.SUCCESS, answer
    return answer


def healthz(node: Node) -> int:
    url = f"http://{node.host}:{node.metrics_port}/healthz"
    with urllib.request.urlopen(url, timeout=2.0) as response:
        return int(response.status)


@pytest.fixture(scope="module")
def hostile_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One nameserver and one broker for the whole module (each test leaves them as it
    found them, or fails)."""
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("hostile"), broker_settings=dict(SMALL_STORE)
    )
    cluster = LocalCluster(spec)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.parametrize("role", ["nameserver", "broker"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_frame_stops_no_server(
    hostile_cluster: LocalCluster, role: str, name: str
) -> None:
    node = next(n for n in hostile_cluster.nodes if n.role == role)
    assert node.metrics_port, "the launcher gives every node a metrics port"
    send_raw(node.addr, HOSTILE[name])
    answers_within(node)
    assert healthz(node) == 200
    assert hostile_cluster.is_alive(node.name)


def test_many_hang_frames_at_once_leave_both_servers_answering(
    hostile_cluster: LocalCluster,
) -> None:
    for node in hostile_cluster.nodes:
        host, _, port = node.addr.rpartition(":")
        socks = [socket.create_connection((host, int(port)), timeout=5.0) for _ in range(20)]
        try:
            for sock in socks:
                sock.sendall(HANG_37 + encode(RemotingCommand(RequestCode.HEART_BEAT)))
            answers_within(node)
            assert healthz(node) == 200
        finally:
            for sock in socks:
                sock.close()
