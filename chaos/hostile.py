"""The ``hostile`` fault: a neighbour that sends every port of every node what no client
should, from a bounded number of threads in the harness process, until it is healed.

One thread a kind of traffic (:data:`TRAFFIC`; ``big`` has
:attr:`HostileLimits.big_connections`), each over the targets it fits:

- ``frames`` (remoting ports): valid RocketMQ frames - SEND_MESSAGE_V2, SEND_MESSAGE,
  PULL_MESSAGE, HEART_BEAT, GET_ROUTEINFO_BY_TOPIC, REGISTER_BROKER, with JSON and binary
  headers - mostly with bytes flipped and lengths changed, on one connection until the
  server closes it; every tenth connection :data:`KNOWN_BAD_FRAME` alone.
- ``lengths`` (remoting ports): length words past the frame limit, negative, zero, short,
  and a header length past the frame.
- ``bombs`` (remoting ports): a REGISTER_BROKER whose compressed table inflates to
  :attr:`HostileLimits.bomb_inflated` bytes (to nameservers), a SEND_MESSAGE_V2 flagged
  compressed whose body is such a bomb (to brokers).
- ``big`` (remoting ports): :attr:`HostileLimits.big_in_flight` whole frames just under
  the 16 MiB frame limit sent back to back on a connection before their answers are
  read, on :attr:`HostileLimits.big_connections` connections at once - REGISTER_BROKER
  with an uncompressed body that is not JSON (to nameservers), SEND_MESSAGE_V2 with a
  body past max_message_size (to brokers).
- ``slow`` (every port): frames sent a byte at a time, a few bytes a second, on up to
  :attr:`HostileLimits.slow_sockets` connections.
- ``flood`` (every port): up to :attr:`HostileLimits.flood_sockets` idle connections, held
  open and made again when a server closes them.
- ``garbage`` (HA, Raft and other ports): random bytes and length words past any limit.
- ``slowloris`` (metrics and console HTTP ports): requests whose headers never end, a byte
  a second, on up to :attr:`HostileLimits.slowloris_sockets` connections, and requests
  with a header line past any limit.

Against a cluster serving TLS (a :class:`Target` with ``tls``: the remoting, HA and Raft
ports of a cluster started with TLS), half of the connections of ``frames``, ``lengths``,
``bombs``, ``big`` and ``garbage`` complete a TLS handshake first (trusting any
certificate, as a neighbour would) so that their bytes reach the decoders behind it, where
a cluster with auth on refuses what they ask (they are never signed); the other half and
every ``slow`` and ``flood`` connection stay plaintext and meet the port's TLS refusal.
:attr:`TrafficStats.tls_handshakes` counts the handshakes that completed.

What it sends never reaches the workload: its topics, groups, broker and cluster names
are its own (``Hostile...``), and a mutated frame that still decodes as a request of
another code than its original (an admin request a flip made) is not sent. :meth:`stop`
(the heal) closes every socket and joins every thread.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.chaos.hostile_payloads import (
    HUGE_HEADER,
    KNOWN_BAD_FRAME,
    MIB,
    SLOWLORIS_HEAD,
    StoppedError,
    base_frames,
    big_frames,
    bomb_frames,
    garbage,
    harmless,
    length_frames,
    mutate,
)
from rocketq.remoting.command import decode

TRAFFIC: Final = ("frames", "lengths", "bombs", "big", "slow", "flood", "garbage", "slowloris")
# Which traffic goes to which kind of port.
PORT_KINDS: Final = ("remoting", "ha", "raft", "metrics", "console", "other")
TRAFFIC_PORTS: Final[dict[str, frozenset[str]]] = {
    "frames": frozenset({"remoting"}),
    "lengths": frozenset({"remoting"}),
    "bombs": frozenset({"remoting"}),
    "big": frozenset({"remoting"}),
    "slow": frozenset({"remoting", "ha", "raft", "other"}),
    "flood": frozenset(PORT_KINDS),
    "garbage": frozenset({"ha", "raft", "other"}),
    "slowloris": frozenset({"metrics", "console"}),
}
# The kinds that send over TLS to a port serving it, and on what share of connections.
TLS_TRAFFIC: Final = frozenset({"frames", "lengths", "bombs", "big", "garbage"})
TLS_SHARE: Final = 0.5


@dataclass(frozen=True)
class Target:
    """One listening port of a node."""

    node: str
    role: str  # "nameserver", "broker" or "console"
    host: str
    port: int
    kind: str  # one of PORT_KINDS
    tls: bool = False  # the port serves TLS (plaintext is refused)

    def __str__(self) -> str:
        return f"{self.node} {self.kind} {self.host}:{self.port}" + (" tls" if self.tls else "")


@dataclass(frozen=True)
class HostileLimits:
    """How much the neighbour may do at once (every figure is a ceiling)."""

    flood_sockets: int = 300
    slow_sockets: int = 24
    slowloris_sockets: int = 24
    slow_bytes_per_s: float = 4.0  # per slow connection
    frames_per_s: float = 200.0  # mutated frames, all targets together
    connects_per_s: float = 100.0  # new connections a second, per thread
    bombs_per_s: float = 1.0
    bomb_inflated: int = 256 * MIB
    big_frame_bytes: int = 16 * MIB - 4096  # a big frame's body
    big_in_flight: int = 32  # big frames sent on a connection before reading answers
    big_connections: int = 4  # connections (threads) sending big frames at once
    connect_timeout_s: float = 1.0
    io_timeout_s: float = 1.0
    join_timeout_s: float = 10.0


@dataclass
class TrafficStats:
    """What one kind of traffic did."""

    connects: int = 0
    connect_errors: int = 0
    sends: int = 0  # frames, requests or bursts written
    bytes_sent: int = 0
    answers: int = 0  # reads that brought bytes back
    closed_by_peer: int = 0
    skipped: int = 0  # mutated frames not sent (they decoded as another request)
    tls_handshakes: int = 0  # connections that completed a TLS handshake
    tls_failures: int = 0  # TLS handshakes the server broke off or let time out

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


# ---------------------------------------------------------------- the neighbour


class Hostile:
    """Starts the traffic in threads of this process; :meth:`stop` ends it and closes every
    socket it opened."""

    def __init__(
        self,
        targets: Iterable[Target],
        *,
        seed: int = 0,
        limits: HostileLimits | None = None,
        traffic: Iterable[str] = TRAFFIC,
    ) -> None:
        self.targets = list(targets)
        self.limits = limits or HostileLimits()
        self.traffic = tuple(traffic)
        unknown = [t for t in self.traffic if t not in TRAFFIC]
        if unknown:
            raise ValueError(f"unknown hostile traffic {unknown}; choose from {TRAFFIC}")
        self.seed = seed
        self.stats: dict[str, TrafficStats] = {t: TrafficStats() for t in self.traffic}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self.peak_sockets = 0
        # Trusts any certificate: the neighbour wants its bytes read, not the server proved.
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE

    # ------------------------------------------------------------ sockets

    def _tls_for(self, target: Target, rng: random.Random) -> bool:
        """Whether this connection to ``target`` handshakes TLS first."""
        return target.tls and rng.random() < TLS_SHARE

    def open_sockets(self) -> int:
        with self._lock:
            return len(self._sockets)

    def _connect(
        self, target: Target, stats: TrafficStats, *, tls: bool = False
    ) -> socket.socket | None:
        """A connection to ``target`` (with ``tls``, over a completed TLS handshake), or
        None when it could not be made."""
        if self._stop.is_set():
            return None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with self._lock:
            self._sockets.add(sock)
            self.peak_sockets = max(self.peak_sockets, len(self._sockets))
        try:
            sock.settimeout(self.limits.connect_timeout_s)
            sock.connect((target.host, target.port))
            sock.settimeout(self.limits.io_timeout_s)
        except OSError:
            stats.connect_errors += 1
            self._close(sock)
            return None
        stats.connects += 1
        return self._handshake(sock, stats) if tls else sock

    def _handshake(self, sock: socket.socket, stats: TrafficStats) -> socket.socket | None:
        """``sock`` wrapped in TLS (it replaces ``sock`` among the open sockets), or None
        when the handshake failed (``sock`` is closed)."""
        try:
            wrapped = self._tls.wrap_socket(sock, do_handshake_on_connect=False)
        except (OSError, ValueError):
            stats.tls_failures += 1
            self._close(sock)
            return None
        with self._lock:
            self._sockets.discard(sock)
            self._sockets.add(wrapped)
        try:
            wrapped.do_handshake()
        except (OSError, ValueError):
            if not self._stop.is_set():  # not one the stop cut short
                stats.tls_failures += 1
            self._close(wrapped)
            return None
        stats.tls_handshakes += 1
        return wrapped

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _send(self, sock: socket.socket, data: bytes, stats: TrafficStats) -> bool:
        try:
            sock.sendall(data)
        except OSError:
            stats.closed_by_peer += 1
            return False
        stats.sends += 1
        stats.bytes_sent += len(data)
        return True

    def _drain(self, sock: socket.socket, stats: TrafficStats, wait_s: float) -> bool:
        """Read and drop what came back within ``wait_s``; False when the peer closed."""
        deadline = time.monotonic() + wait_s
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            try:
                sock.settimeout(min(left, 0.2))
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                stats.closed_by_peer += 1
                return False
            if not data:
                stats.closed_by_peer += 1
                return False
            stats.answers += 1
        return False

    def _pause(self, seconds: float) -> bool:
        """Wait; False once stopped."""
        return not self._stop.wait(seconds)

    # ------------------------------------------------------------ start / stop

    def start(self) -> None:
        for n, kind in enumerate(self.traffic):
            targets = [t for t in self.targets if t.kind in TRAFFIC_PORTS[kind]]
            if not targets:
                continue
            run: Callable[[list[Target], random.Random, TrafficStats], None] = getattr(
                self, f"_{kind}"
            )
            copies = self.limits.big_connections if kind == "big" else 1
            for copy in range(copies):
                rng = random.Random(self.seed * 100 + n * 10 + copy)
                thread = threading.Thread(
                    target=self._guarded,
                    args=(kind, run, targets, rng),
                    name=f"hostile-{kind}-{copy}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()

    def _guarded(
        self,
        kind: str,
        run: Callable[[list[Target], random.Random, TrafficStats], None],
        targets: list[Target],
        rng: random.Random,
    ) -> None:
        try:
            run(targets, rng, self.stats[kind])
        except Exception as exc:  # a bug of the neighbour must not end the run
            self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")

    def stop(self) -> dict[str, Any]:
        """End every kind of traffic, close every socket, join every thread; -> a summary."""
        self._stop.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:  # wakes a thread blocked on it (a TLS one's socket below it)
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        deadline = time.monotonic() + self.limits.join_timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        with self._lock:
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()
        if stuck:
            self.errors.append(f"threads still running after the stop: {stuck}")
        return self.summary()

    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def summary(self) -> dict[str, Any]:
        return {
            "targets": len(self.targets),
            "ports": sorted({f"{t.node}:{t.kind}:{t.port}" for t in self.targets}),
            "peak_sockets": self.peak_sockets,
            "traffic": {k: s.to_dict() for k, s in self.stats.items()},
            "errors": self.errors[:10],
        }

    # ------------------------------------------------------------ the traffic

    def _cycle(self, targets: list[Target]) -> Iterator[Target]:
        while not self._stop.is_set():
            yield from targets

    def _frames(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        bases = base_frames()
        codes = [decode(f[4:]).code for f in bases]
        interval = 1.0 / self.limits.frames_per_s
        for number, target in enumerate(self._cycle(targets)):
            sock = self._connect(target, stats, tls=self._tls_for(target, rng))
            if sock is None:
                if not self._pause(0.2):
                    return
                continue
            try:
                if number % 10 == 0:  # now and then the known bad frame
                    self._send(sock, KNOWN_BAD_FRAME, stats)
                    self._drain(sock, stats, 0.05)
                    continue
                # Frames until the server closes the connection (at the first it cannot
                # read), a valid one now and then so that it has something to answer.
                for _ in range(20):
                    i = rng.randrange(len(bases))
                    frame = bases[i] if rng.random() < 0.1 else mutate(bases[i], rng)
                    if not harmless(frame, codes[i]):
                        stats.skipped += 1
                        continue
                    if not self._send(sock, frame, stats) or not self._pause(interval):
                        break
                    if not self._drain(sock, stats, 0.002):
                        break
            finally:
                self._close(sock)

    def _lengths(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        frames = length_frames()
        for target in self._cycle(targets):
            sock = self._connect(target, stats, tls=self._tls_for(target, rng))
            if sock is not None:
                try:
                    if self._send(sock, rng.choice(frames), stats):
                        self._drain(sock, stats, 0.1)
                finally:
                    self._close(sock)
            if not self._pause(1.0 / self.limits.connects_per_s * 4):
                return

    def _bombs(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        try:
            register, send = bomb_frames(self.limits.bomb_inflated, self._stop.is_set)
        except StoppedError:
            return
        for target in self._cycle(targets):
            frame = register if target.role == "nameserver" else send
            sock = self._connect(target, stats, tls=self._tls_for(target, rng))
            if sock is not None:
                try:
                    if self._send(sock, frame, stats):
                        self._drain(sock, stats, 2.0)
                finally:
                    self._close(sock)
            if not self._pause(1.0 / self.limits.bombs_per_s):
                return

    def _big(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        register, send = big_frames(self.limits.big_frame_bytes)
        for target in self._cycle(targets):
            frame = register if target.role == "nameserver" else send
            sock = self._connect(target, stats, tls=self._tls_for(target, rng))
            if sock is not None:
                try:
                    sock.settimeout(5.0)
                    for _ in range(self.limits.big_in_flight):
                        if self._stop.is_set() or not self._send(sock, frame, stats):
                            break
                    self._drain(sock, stats, 1.0)
                finally:
                    self._close(sock)
            if not self._pause(0.5):
                return

    def _held(
        self,
        targets: list[Target],
        rng: random.Random,
        stats: TrafficStats,
        limit: int,
        tick_s: float,
        first: Callable[[Target], bytes],
        dribble: Callable[[Target, int], bytes],
    ) -> None:
        """Up to ``limit`` connections spread over ``targets``: each sends ``first`` at
        once and then ``dribble`` every ``tick_s``; one the peer closes is made again."""
        sel = selectors.DefaultSelector()
        held: dict[socket.socket, tuple[Target, int]] = {}
        cycle = self._cycle(targets)
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                made = 0
                while len(held) < limit and made < max(1, int(self.limits.connects_per_s * tick_s)):
                    target = next(cycle, None)
                    if target is None:
                        return
                    made += 1
                    sock = self._connect(target, stats)
                    if sock is None:
                        continue
                    data = first(target)
                    if data and not self._send(sock, data, stats):
                        self._close(sock)
                        continue
                    sock.setblocking(False)
                    held[sock] = (target, 0)
                    sel.register(sock, selectors.EVENT_READ)
                for sock, (target, n) in list(held.items()):
                    chunk = dribble(target, n)
                    if not chunk:
                        continue
                    try:
                        sock.send(chunk)
                        stats.bytes_sent += len(chunk)
                        held[sock] = (target, n + 1)
                    except BlockingIOError:
                        pass
                    except OSError:
                        self._forget(sel, held, sock, stats)
                left = tick_s - (time.monotonic() - started)
                for key, _ in sel.select(max(0.0, left)):
                    ready = key.fileobj
                    assert isinstance(ready, socket.socket)
                    try:
                        data = ready.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if data:
                        stats.answers += 1
                    else:
                        self._forget(sel, held, ready, stats)
                rest = tick_s - (time.monotonic() - started)
                if rest > 0 and not self._pause(rest):
                    return
        finally:
            for sock in list(held):
                with contextlib.suppress(KeyError, ValueError):
                    sel.unregister(sock)
                self._close(sock)
            sel.close()

    def _forget(
        self,
        sel: selectors.BaseSelector,
        held: dict[socket.socket, tuple[Target, int]],
        sock: socket.socket,
        stats: TrafficStats,
    ) -> None:
        stats.closed_by_peer += 1
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(sock)
        held.pop(sock, None)
        self._close(sock)

    def _slow(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        bases = base_frames()
        frames: dict[Target, bytes] = {}

        def dribble(target: Target, n: int) -> bytes:
            if target.kind != "remoting":
                return rng.randbytes(1)
            frame = frames.setdefault(target, rng.choice(bases))
            return frame[n % len(frame) : n % len(frame) + 1]

        self._held(
            targets,
            rng,
            stats,
            self.limits.slow_sockets,
            1.0 / self.limits.slow_bytes_per_s,
            lambda _t: b"",
            dribble,
        )

    def _flood(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        self._held(
            targets, rng, stats, self.limits.flood_sockets, 0.25, lambda _t: b"", lambda _t, _n: b""
        )

    def _garbage(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        for target in self._cycle(targets):
            sock = self._connect(target, stats, tls=self._tls_for(target, rng))
            if sock is not None:
                try:
                    for _ in range(rng.randint(1, 4)):
                        if not self._send(sock, garbage(rng), stats):
                            break
                    self._drain(sock, stats, 0.05)
                finally:
                    self._close(sock)
            if not self._pause(1.0 / self.limits.connects_per_s * 4):
                return

    def _slowloris(self, targets: list[Target], rng: random.Random, stats: TrafficStats) -> None:
        for target in targets:  # first a request with a header line past any limit
            sock = self._connect(target, stats)
            if sock is not None:
                try:
                    if self._send(sock, HUGE_HEADER, stats):
                        self._drain(sock, stats, 0.5)
                finally:
                    self._close(sock)
        self._held(
            targets,
            rng,
            stats,
            self.limits.slowloris_sockets,
            1.0,
            lambda _t: SLOWLORIS_HEAD,
            lambda _t, n: b"X-a: b\r\n"[n % 8 : n % 8 + 1],
        )


# ---------------------------------------------------------------- finding the ports

_LISTEN: Final = "0A"
_SOCKET_LINK: Final = re.compile(r"socket:\[(\d+)\]")


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (from /proc; empty if it is gone)."""
    inodes: set[str] = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                match = _SOCKET_LINK.fullmatch(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if match:
                    inodes.add(match.group(1))
    except OSError:
        return set()
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == _LISTEN and fields[9] in inodes:
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports


@dataclass
class NodePorts:
    """What the launcher knows of a node's ports (the rest are found in /proc)."""

    name: str
    role: str
    host: str
    pid: int
    known: dict[int, str] = field(default_factory=dict)  # port -> kind


def targets_of(nodes: Iterable[NodePorts], *, tls_kinds: Iterable[str] = ()) -> list[Target]:
    """Every port each node listens on: its known ones, and those /proc shows (a broker's
    other ports are its HA port; any more are ``other``); the ports of ``tls_kinds`` serve
    TLS."""
    secure = frozenset(tls_kinds)
    found: list[Target] = []
    for node in nodes:
        ports = dict(node.known)
        for port in sorted(listening_ports(node.pid) if node.pid else ()):
            if port not in ports:
                has_ha = "ha" in ports.values()
                ports[port] = "ha" if node.role == "broker" and not has_ha else "other"
        found += [
            Target(node.name, node.role, node.host, p, k, tls=k in secure)
            for p, k in ports.items()
            if p
        ]
    return found
