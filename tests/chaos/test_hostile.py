"""The hostile neighbour's traffic against a plain local TCP listener that records what
each connection sent: each kind sends what it should, to the ports it fits, within its
bounds, and the stop ends every thread and closes every socket. The fault's names and
options, and the report's hostile section from a made-up history."""

from __future__ import annotations

import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from rocketq.chaos.faults import FAULT_KINDS, parse_faults
from rocketq.chaos.history import History
from rocketq.chaos.hostile import (
    Hostile,
    HostileLimits,
    NodePorts,
    Target,
    listening_ports,
    targets_of,
)
from rocketq.chaos.hostile_payloads import (
    HOSTILE_TOPIC,
    HUGE_HEADER,
    KNOWN_BAD_FRAME,
    MIB,
    SLOWLORIS_HEAD,
    base_frames,
    big_frames,
    bomb_frames,
    mutate,
)
from rocketq.chaos.report import hostile_broken, hostile_json, render_hostile
from rocketq.chaos.server_memory import read_status
from rocketq.remoting.codes import RequestCode, SerializeType
from rocketq.remoting.command import RemotingError, decode
from tests.chaos.test_checker import T0, Run

SMALL = HostileLimits(
    flood_sockets=40,
    slow_sockets=6,
    slowloris_sockets=6,
    slow_bytes_per_s=20,
    bomb_inflated=4 * MIB,
    big_frame_bytes=64 * 1024,
    big_in_flight=4,
    join_timeout_s=5,
)


@dataclass
class Conn:
    data: bytearray = field(default_factory=bytearray)
    closed: bool = False
    tls: bool = False  # the bytes came over a TLS handshake (TlsListener)


class Listener:
    """A TCP server on a free port keeping every connection's bytes."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.port = self.sock.getsockname()[1]
        self.conns: list[Conn] = []
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                peer, _ = self.sock.accept()
            except OSError:
                return
            conn = Conn()
            with self.lock:
                self.conns.append(conn)
            thread = threading.Thread(target=self._read, args=(peer, conn), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _read(self, peer: socket.socket, conn: Conn) -> None:
        with peer:
            while True:
                try:
                    data = peer.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    conn.closed = True
                    return
                with self.lock:
                    conn.data += data

    def open_count(self) -> int:
        with self.lock:
            return sum(1 for c in self.conns if not c.closed)

    def received(self) -> int:
        """Bytes read so far over every connection (one still waiting to be accepted has
        none yet: its sender may have closed it already)."""
        with self.lock:
            return sum(len(c.data) for c in self.conns)

    def close(self) -> None:
        self.sock.close()


class TlsListener(Listener):
    """A listener enforcing TLS as the servers do: a connection whose first byte does not
    begin a handshake is closed at once; the others' bytes are kept decrypted."""

    def __init__(self) -> None:
        import ssl

        import trustme

        ca = trustme.CA()
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(self.context)
        self.plaintext = 0
        super().__init__()

    def _read(self, peer: socket.socket, conn: Conn) -> None:
        try:
            peer.settimeout(5.0)
            first = peer.recv(1, socket.MSG_PEEK)
        except OSError:
            first = b""
        if first != b"\x16":
            with self.lock:
                self.plaintext += 1
            conn.closed = True
            peer.close()
            return
        try:
            secured = self.context.wrap_socket(peer, server_side=True)
        except OSError:
            conn.closed = True
            peer.close()
            return
        conn.tls = True
        secured.settimeout(None)
        super()._read(secured, conn)


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.close()


def wait_for(condition: object, timeout: float = 10.0) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def run_traffic(
    listener: Listener,
    kind: str,
    targets_kinds: tuple[str, ...],
    seconds: float,
    role: str,
    *,
    tls: bool = False,
) -> tuple[Hostile, dict[str, object]]:
    targets = [Target("n", role, "127.0.0.1", listener.port, k, tls=tls) for k in targets_kinds]
    neighbour = Hostile(targets, seed=1, limits=SMALL, traffic=[kind])
    neighbour.start()
    time.sleep(seconds)
    summary = neighbour.stop()
    assert not neighbour.alive()
    assert neighbour.open_sockets() == 0
    # Every connection it made is closed: the listener sees each end.
    assert wait_for(lambda: listener.open_count() == 0), f"{listener.open_count()} left open"
    assert summary["errors"] == []
    return neighbour, summary


def frames_in(data: bytes) -> list[bytes]:
    """Whole frames (length word included) from the start of ``data`` while they parse."""
    out = []
    while len(data) >= 4:
        size = struct.unpack(">I", data[:4])[0]
        if len(data) < 4 + size:
            break
        out.append(data[: 4 + size])
        data = data[4 + size :]
    return out


# ---------------------------------------------------------------- what it sends


def test_base_frames_are_valid_requests_with_both_headers_and_its_own_names() -> None:
    frames = base_frames()
    decoded = [decode(f[4:]) for f in frames]
    kinds = {(c.code, c.serialize_type) for c in decoded}
    for code in (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.PULL_MESSAGE,
        RequestCode.HEART_BEAT,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.REGISTER_BROKER,
    ):
        assert (code, SerializeType.JSON) in kinds and (code, SerializeType.ROCKETMQ) in kinds
    text = b"".join(frames)
    assert b"Chaos" not in text and b"chaos" not in text  # never the workload's names
    assert HOSTILE_TOPIC.encode() in text


def test_the_known_bad_frame_announces_an_ext_value_past_its_end() -> None:
    assert len(KNOWN_BAD_FRAME) == 37
    with pytest.raises(RemotingError):
        decode(KNOWN_BAD_FRAME[4:])


def test_mutations_change_frames() -> None:
    import random

    rng = random.Random(3)
    base = base_frames()[0]
    mutated = [mutate(base, rng) for _ in range(200)]
    assert sum(m != base for m in mutated) >= 190
    assert any(len(m) < len(base) for m in mutated) and any(len(m) > len(base) for m in mutated)


def test_bombs_inflate_to_the_limit_and_say_so() -> None:
    register, send = bomb_frames(8 * MIB)
    reg, msg = decode(register[4:]), decode(send[4:])
    assert reg.code == RequestCode.REGISTER_BROKER and reg.ext is not None
    assert reg.ext["compressed"] == "true" and reg.ext["brokerName"] == "hostile-broker"
    assert msg.code == RequestCode.SEND_MESSAGE_V2 and msg.ext is not None
    assert int(msg.ext["f"]) & 1  # the compressed flag
    assert msg.ext["b"] == HOSTILE_TOPIC
    for cmd in (reg, msg):
        assert cmd.body is not None and len(cmd.body) < MIB // 8
        assert len(zlib.decompress(bytes(cmd.body))) == 8 * MIB


# ---------------------------------------------------------------- against a listener


def test_frames_send_mutated_frames_and_the_known_bad_frame(listener: Listener) -> None:
    neighbour, _ = run_traffic(listener, "frames", ("remoting", "ha"), 1.5, "broker")
    stats = neighbour.stats["frames"]
    assert stats.connects >= 1 and stats.sends > 20
    # A connection the neighbour made and closed last may still wait in the backlog.
    assert wait_for(lambda: listener.received() == stats.bytes_sent), (
        listener.received(),
        stats.bytes_sent,
    )
    sent = b"".join(bytes(c.data) for c in listener.conns)
    alone = [c for c in listener.conns if bytes(c.data) == KNOWN_BAD_FRAME]
    assert alone and len(alone) < len(listener.conns)
    assert stats.bytes_sent == len(sent)


def test_lengths_send_length_words_past_any_limit(listener: Listener) -> None:
    neighbour, _ = run_traffic(listener, "lengths", ("remoting",), 1.0, "nameserver")
    heads = {bytes(c.data[:4]) for c in listener.conns}
    assert neighbour.stats["lengths"].connects >= 3
    assert heads & {b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", struct.pack(">I", 16 * MIB + 1)}


@pytest.mark.parametrize(("role", "code"), [("nameserver", 103), ("broker", 310)])
def test_bombs_go_to_the_right_servers(listener: Listener, role: str, code: int) -> None:
    run_traffic(listener, "bombs", ("remoting", "metrics"), 1.5, role)
    frames = [f for c in listener.conns for f in frames_in(bytes(c.data))]
    assert frames and {decode(f[4:]).code for f in frames} == {code}


@pytest.mark.parametrize(("role", "code"), [("nameserver", 103), ("broker", 310)])
def test_big_frames_are_whole_frames_near_the_limit_sent_back_to_back(
    listener: Listener, role: str, code: int
) -> None:
    neighbour, summary = run_traffic(listener, "big", ("remoting", "ha"), 1.0, role)
    assert summary["peak_sockets"] <= SMALL.big_connections
    big = neighbour.stats["big"]
    assert wait_for(lambda: listener.received() == big.bytes_sent), (
        listener.received(),
        big.bytes_sent,
    )
    per_conn = [frames_in(bytes(c.data)) for c in listener.conns]
    assert per_conn and all(len(frames) <= SMALL.big_in_flight for frames in per_conn)
    assert max(len(frames) for frames in per_conn) == SMALL.big_in_flight
    for frame in (f for frames in per_conn for f in frames):
        cmd = decode(frame[4:])
        assert cmd.code == code and cmd.body is not None
        assert len(cmd.body) == SMALL.big_frame_bytes and not any(cmd.body)
    assert neighbour.stats["big"].sends == sum(len(f) for f in per_conn)


def test_big_frames_default_to_the_frame_limit() -> None:
    register, send = big_frames(HostileLimits().big_frame_bytes)
    for frame in (register, send):
        assert 16 * MIB - 4096 < len(frame) <= 16 * MIB
    reg = decode(register[4:])
    assert reg.ext is not None and reg.ext["compressed"] == "false"


def test_slow_sends_a_few_bytes_a_second_on_at_most_its_sockets(listener: Listener) -> None:
    _, summary = run_traffic(listener, "slow", ("remoting", "raft"), 2.0, "broker")
    assert summary["peak_sockets"] <= SMALL.slow_sockets
    assert len(listener.conns) == SMALL.slow_sockets
    most = max(len(c.data) for c in listener.conns)
    # 20 bytes a second for 2 s: about 40, never the whole frame at once.
    assert 5 <= most <= 2.5 * SMALL.slow_bytes_per_s + 2


def test_flood_holds_up_to_its_bound_and_sends_nothing(listener: Listener) -> None:
    targets = [Target("n", "broker", "127.0.0.1", listener.port, k) for k in ("remoting", "ha")]
    neighbour = Hostile(targets, limits=SMALL, traffic=["flood"])
    neighbour.start()
    assert wait_for(lambda: listener.open_count() == SMALL.flood_sockets)
    time.sleep(0.5)
    assert neighbour.open_sockets() == SMALL.flood_sockets == listener.open_count()
    neighbour.stop()
    assert neighbour.open_sockets() == 0 and not neighbour.alive()
    assert wait_for(lambda: listener.open_count() == 0)
    assert all(not c.data for c in listener.conns)


def test_garbage_goes_to_replication_ports_only(listener: Listener) -> None:
    other = Listener()
    try:
        targets = [
            Target("b", "broker", "127.0.0.1", listener.port, "ha"),
            Target("b", "broker", "127.0.0.1", other.port, "remoting"),
        ]
        neighbour = Hostile(targets, limits=SMALL, traffic=["garbage"])
        neighbour.start()
        time.sleep(1.0)
        neighbour.stop()
        assert neighbour.stats["garbage"].bytes_sent > 0
        assert sum(len(c.data) for c in listener.conns) == neighbour.stats["garbage"].bytes_sent
        assert other.conns == []
    finally:
        other.close()


def test_slowloris_never_ends_its_headers(listener: Listener) -> None:
    run_traffic(listener, "slowloris", ("metrics",), 2.5, "broker")
    data = [bytes(c.data) for c in listener.conns]
    assert HUGE_HEADER in data  # once, a header line past any limit
    slow = [d for d in data if d != HUGE_HEADER]
    assert slow and all(d.startswith(SLOWLORIS_HEAD) and b"\r\n\r\n" not in d for d in slow)
    assert any(len(d) > len(SLOWLORIS_HEAD) for d in slow)  # a byte a second since


def test_every_kind_at_once_stops_within_bounds(listener: Listener) -> None:
    kinds = ("remoting", "ha", "raft", "metrics")
    targets = [Target("b", "broker", "127.0.0.1", listener.port, k) for k in kinds]
    neighbour = Hostile(targets, seed=2, limits=SMALL)
    neighbour.start()
    time.sleep(2.0)
    started = time.monotonic()
    summary = neighbour.stop()
    assert time.monotonic() - started < SMALL.join_timeout_s
    assert not neighbour.alive() and neighbour.open_sockets() == 0
    # The held connections, and one at a time for frames, lengths, bombs and garbage.
    held = SMALL.flood_sockets + SMALL.slow_sockets + SMALL.slowloris_sockets
    bound = held + SMALL.big_connections + 4
    assert summary["peak_sockets"] <= bound
    assert wait_for(lambda: listener.open_count() == 0)
    assert set(summary["traffic"]) == {
        "frames",
        "lengths",
        "bombs",
        "big",
        "slow",
        "flood",
        "garbage",
        "slowloris",
    }


@pytest.mark.parametrize(
    ("kind", "port_kind"),
    [("frames", "remoting"), ("lengths", "remoting"), ("garbage", "raft")],
)
def test_a_tls_port_gets_half_its_traffic_over_tls_and_half_in_plaintext(
    kind: str, port_kind: str
) -> None:
    """Against a port enforcing TLS, the bytes of half the connections reach what is behind
    the handshake (a frame traffic's frames whole), the others meet the refusal; the stop
    still closes every socket, TLS ones included."""
    server = TlsListener()
    try:
        neighbour, summary = run_traffic(server, kind, (port_kind,), 1.5, "broker", tls=True)
        stats = neighbour.stats[kind]
        over_tls = [c for c in server.conns if c.tls]
        assert stats.tls_handshakes == len(over_tls) > 0 and stats.tls_failures == 0
        assert server.plaintext > 0
        assert 0.2 < len(over_tls) / len(server.conns) < 0.8
        # One connection at a time: only the last may be cut by the stop between its
        # handshake and its first bytes.
        assert sum(1 for c in over_tls if not c.data) <= 1
        if kind == "frames":
            assert any(frames_in(bytes(c.data)) for c in over_tls)
        assert summary["traffic"][kind]["tls_handshakes"] == stats.tls_handshakes  # type: ignore[index]
    finally:
        server.close()


def test_flood_and_slow_stay_plaintext_on_a_tls_port() -> None:
    server = TlsListener()
    try:
        for kind in ("flood", "slow"):
            neighbour, _ = run_traffic(server, kind, ("remoting",), 0.5, "broker", tls=True)
            assert neighbour.stats[kind].connects > 0 and neighbour.stats[kind].tls_handshakes == 0
        assert not any(c.tls for c in server.conns)
    finally:
        server.close()


def test_a_plain_port_gets_no_tls(listener: Listener) -> None:
    neighbour, _ = run_traffic(listener, "frames", ("remoting",), 0.5, "broker")
    assert neighbour.stats["frames"].tls_handshakes == 0
    assert all(not bytes(c.data).startswith(b"\x16\x03") for c in listener.conns)


def test_a_closed_port_is_counted_not_fatal() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    neighbour = Hostile([Target("n", "broker", "127.0.0.1", port, "ha")], traffic=["garbage"])
    neighbour.start()
    time.sleep(0.3)
    summary = neighbour.stop()
    assert summary["traffic"]["garbage"]["connect_errors"] >= 1 and summary["errors"] == []


def test_targets_are_found_in_proc(listener: Listener) -> None:
    import os

    extra = socket.create_server(("127.0.0.1", 0))
    try:
        port = extra.getsockname()[1]
        assert {listener.port, port} <= listening_ports(os.getpid())
        found = targets_of(
            [NodePorts("b", "broker", "127.0.0.1", os.getpid(), {listener.port: "remoting"})]
        )
        kinds = {t.port: t.kind for t in found}
        assert kinds[listener.port] == "remoting"
        assert kinds[port] in ("ha", "other") and "ha" in kinds.values()
        assert not any(t.tls for t in found)
        secured = targets_of(
            [NodePorts("b", "broker", "127.0.0.1", os.getpid(), {listener.port: "remoting"})],
            tls_kinds=("remoting", "ha"),
        )
        assert {t.port: t.tls for t in secured}[listener.port] is True
        assert all(t.tls == (t.kind in ("remoting", "ha")) for t in secured)
    finally:
        extra.close()
    rss = read_status(os.getpid())
    assert rss is not None and rss[1] >= rss[0] > 0


# ---------------------------------------------------------------- the fault and the report


def test_hostile_is_a_fault_kind() -> None:
    assert "hostile" in FAULT_KINDS
    assert parse_faults("hostile,kill-master") == ("hostile", "kill-master")


def timed_send(run: Run, at: float, op: int, ms: float) -> None:
    keys = [f"p1-{op}"]
    run.add("send", at, process="p1", op=op, keys=keys, mode="single", shard=None)
    run.add("send_ok", at + ms / 1000, process="p1", op=op, keys=keys, msg_ids=[], group="g1")


def hostile_history() -> History:
    run = Run()
    for i in range(20):  # outside: 10 ms each
        timed_send(run, i * 0.1, i, 10)
    run.fault(3.0, "hostile", "every-node", None)
    for i in range(20, 40):  # inside: 50 ms each
        timed_send(run, 3.0 + (i - 20) * 0.1, i, 50)
    run.add(
        "fault_end",
        6.0,
        fault="hostile",
        target="every-node",
        group=None,
        error=None,
        detail={"peak_sockets": 123, "traffic": {"flood": {"connects": 300}}, "errors": []},
    )
    run.add("server_memory", 7.0, node="broker-a-0", pid=1, rss_kib=90_000, hwm_kib=102_400)
    run.add("server_memory", 7.0, node="namesrv-0", pid=2, rss_kib=50_000, hwm_kib=51_200)
    return run.history()


def test_the_report_compares_latency_inside_and_outside_hostile_windows() -> None:
    summary = hostile_json(hostile_history())
    assert summary is not None
    assert summary["windows"] == 1 and summary["window_s"] == pytest.approx(3.0)
    assert summary["send_ms"]["inside"]["p99"] == pytest.approx(50, abs=1)
    assert summary["send_ms"]["outside"]["p99"] == pytest.approx(10, abs=1)
    assert summary["send_ms"]["inside"]["count"] == 20
    assert summary["peak_rss_mib"] == {"broker-a-0": 100.0, "namesrv-0": 50.0}
    assert summary["traffic"] == {"flood": {"connects": 300}}
    assert summary["peak_sockets"] == 123
    assert hostile_broken(summary) == []
    text = render_hostile(summary)
    assert "## Hostile traffic" in text and "| broker-a-0 | 100.0 |" in text


def test_a_server_exit_during_hostile_traffic_breaks_a_promise() -> None:
    history = hostile_history()
    history.records.append({"t": T0 + 4.0, "type": "server_exit", "node": "broker-a-0", "pid": 1})
    summary = hostile_json(history)
    assert summary is not None and summary["unexpected_exits"] == 1
    assert hostile_broken(summary) == [
        "1 server process exited with no fault stopping it: broker-a-0"
    ]
    assert "exited outside a fault" in render_hostile(summary)


def test_no_hostile_fault_no_section() -> None:
    run = Run()
    run.send(0.0, "p1-0").sent_ok(0.1, "p1-0")
    assert hostile_json(run.history()) is None
