"""How nodes report their ports and their bind failures, and how the launcher and its
sidecars read them: the ready line, the failure line, PortBindError, a sidecar that binds
its own port started again when its chosen port is taken; the listening sockets the
launcher binds and a server takes over (``--listen-fd NAME=FD``)."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import pickle
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import rocketq.cluster.launcher as launcher
from rocketq.cli.main import _announce, _announce_bind_failure
from rocketq.cluster.launcher import BindFailure, LauncherError, bind_failure, ready_ports
from rocketq.cluster.sidecar import start_sidecar
from rocketq.common.metrics_server import MetricsServer
from rocketq.common.ports import PortBindError, parse_listen_fds
from rocketq.replication.ha.master import listen_socket


def test_the_ready_line_names_every_port_it_serves(capsys: pytest.CaptureFixture[str]) -> None:
    _announce("broker", {"client": 4000, "ha": 4001, "raft": 0, "metrics": 4002})
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "ready": "broker",
        "port": 4000,
        "ports": {"client": 4000, "ha": 4001, "metrics": 4002},
    }
    assert ready_ports(doc) == {"client": 4000, "ha": 4001, "metrics": 4002}


@pytest.mark.parametrize(
    ("doc", "ports"),
    [
        ({"ready": "nameserver", "port": 9876}, {"client": 9876}),  # the client port alone
        (
            {"ready": "broker", "port": 1, "ports": {"raft": 2, "gossip": 3}},
            {"client": 1, "raft": 2},
        ),
        ({"ready": "broker"}, None),
        ({"ready": "broker", "port": "x"}, None),
        ({"ready": "broker", "port": 1, "ports": [1, 2]}, None),
    ],
)
def test_ready_lines_are_read_or_refused(doc: dict[str, object], ports: object) -> None:
    assert ready_ports(doc) == ports


def test_a_bind_failure_line_says_which_port_and_why(
    held_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(PortBindError) as err:
        listen_socket("127.0.0.1", held_port)
    assert (err.value.name, err.value.port, err.value.in_use) == ("ha", held_port, True)
    assert f"cannot listen on 127.0.0.1:{held_port} for HA" in str(err.value)
    _announce_bind_failure("broker", err.value)
    _announce_bind_failure("broker", OSError("not about a port"))  # writes nothing
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"failed": "broker", "port_name": "ha", "port": held_port, "in_use": True}
    assert bind_failure(doc) == BindFailure("ha", held_port, True)


@pytest.mark.parametrize(
    "doc",
    [
        {"failed": "broker", "port_name": "gossip", "port": 1, "in_use": True},
        {"failed": "broker", "port_name": "raft", "port": 1, "in_use": "yes"},
        {"failed": "broker", "port_name": "raft", "in_use": True},
    ],
)
def test_bad_bind_failure_lines_are_refused(doc: dict[str, object]) -> None:
    assert bind_failure(doc) is None


def test_a_taken_metrics_port_is_a_port_bind_error(held_port: int) -> None:
    with pytest.raises(PortBindError) as err:
        MetricsServer(
            "127.0.0.1", held_port, CollectorRegistry(), lambda: (True, ""), what="broker"
        )
    assert (err.value.name, err.value.port, err.value.errno) == (
        "metrics",
        held_port,
        errno.EADDRINUSE,
    )
    assert "(it is in use)" in str(err.value)
    again = pickle.loads(pickle.dumps(err.value))
    assert (str(again), again.name, again.port, again.in_use) == (
        str(err.value),
        "metrics",
        held_port,
        True,
    )


def _http_server(port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def test_a_sidecar_whose_port_is_taken_starts_again_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Bound without listening: a bind there fails, a connection is refused at once.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        held = taken.getsockname()[1]
        real = launcher.free_ports
        handed: list[int] = []

        def choose(count: int) -> list[int]:
            ports = [held] if not handed else real(count)
            handed.extend(ports)
            return ports

        monkeypatch.setattr(launcher, "free_ports", choose)
        caplog.set_level(logging.WARNING, "rocketq.cluster.sidecar")
        side = start_sidecar(
            "web", tmp_path, _http_server, ready_path="/", marker=b"http.server", ready_timeout=20
        )
        try:
            assert side.alive() and side.port == handed[1] != held
            assert f"another process took port {held}" in caplog.text
            assert json.loads((tmp_path / "web.json").read_text())["port"] == side.port
            # A port the user fixed is not changed: taken, it is an error.
            with pytest.raises(LauncherError, match="did not get ready"):
                start_sidecar(
                    "web2", tmp_path, _http_server, port=held, ready_path="/",
                    marker=b"http.server", ready_timeout=20,
                )  # fmt: skip
        finally:
            side.stop()


def test_a_sidecar_is_waited_for_while_it_has_not_yet_become_itself(tmp_path: Path) -> None:
    """Until the child execs, /proc shows another command line than the sidecar's (without
    its marker): that is a process still starting, not one that exited. Here a shell
    waits before it execs the server, and the marker is in no argument of the shell."""

    def argv(port: int) -> list[str]:
        script = 'sleep 1; exec "$0" -m http."$1" "$2" --bind 127.0.0.1'
        return ["sh", "-c", script, sys.executable, "server", str(port)]

    side = start_sidecar(
        "late", tmp_path, argv, ready_path="/", marker=b"http.server", ready_timeout=20
    )
    try:
        assert side.alive()
    finally:
        side.stop()


def test_a_sidecar_that_never_gets_ready_does_not_outlive_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not ready in time (and not recognizable by its marker): the launcher still kills the
    process it started, through its own handle."""
    import rocketq.cluster.sidecar as sidecar

    spawned: list[subprocess.Popen[bytes]] = []
    real = sidecar._spawn

    def spawn(*args: Any) -> Any:
        found = real(*args)
        spawned.append(found[2])
        return found

    monkeypatch.setattr(sidecar, "_spawn", spawn)

    def argv(port: int) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(120)"]

    with pytest.raises(LauncherError, match="did not get ready"):
        start_sidecar(
            "mute", tmp_path, argv, port=1, ready_path="/", marker=b"no-such-marker",
            ready_timeout=1,
        )  # fmt: skip
    [proc] = spawned
    assert proc.returncode is not None  # killed and reaped


def test_listen_fds_are_taken_over_as_listening_sockets() -> None:
    with socket.socket() as listening, socket.socket() as bound:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        bound.bind(("127.0.0.1", 0))  # not listening
        fd = os.dup(listening.fileno())
        sockets = parse_listen_fds([f"raft={fd}"], ("client", "raft"))
        try:
            assert list(sockets) == ["raft"]
            assert sockets["raft"].getsockname() == listening.getsockname()
            assert not sockets["raft"].get_inheritable()  # not passed on further
        finally:
            sockets["raft"].close()
        for specs, message in [
            (["raft"], "expected NAME=FD"),
            (["raft=x"], "expected NAME=FD"),
            (["gossip=3"], "no port 'gossip' here; expected one of client, raft"),
            ([f"raft={listening.fileno()}", f"raft={listening.fileno()}"], "given twice"),
            ([f"client={bound.fileno()}"], "not a listening TCP socket"),
            (["client=9999"], "not an open socket"),
        ]:
            with pytest.raises(ValueError, match=message):
                parse_listen_fds(specs, ("client", "raft"))
        # A refused fd is left as it was: still open, still the caller's.
        assert bound.getsockname()[1] > 0 and listening.fileno() >= 0


def test_a_metrics_server_serves_a_socket_it_is_handed() -> None:
    sock = launcher.listen_on("127.0.0.1", 0)
    port = sock.getsockname()[1]

    async def serve() -> bytes:
        server = MetricsServer(
            "127.0.0.1", 1, CollectorRegistry(), lambda: (True, ""), what="test", sock=sock
        )
        assert server.port == port
        await server.start()
        try:
            url = f"http://127.0.0.1:{port}/healthz"
            return await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
        finally:
            await server.stop()

    assert asyncio.run(serve()) == b"ok\n"


def test_a_port_taken_first_gives_way_to_a_free_one(held_port: int) -> None:
    sock, fallback = launcher.hold_port("127.0.0.1", held_port, "the test's port")
    with sock:
        got = sock.getsockname()[1]
        assert got != held_port
        assert fallback == launcher.PortFallback("the test's port", held_port, got)
        assert str(fallback) == f"port {held_port} is taken, so the test's port is {got} instead"
    sock, fallback = launcher.hold_port("127.0.0.1", got, "the test's port")
    with sock:
        assert sock.getsockname()[1] == got and fallback is None


def test_a_node_on_an_address_of_another_namespace_binds_its_own_ports_on_restart_too(
    tmp_path: Path,
) -> None:
    """A broker run in a network namespace of its own (chaos/netns.py) has an address this
    process cannot bind: at its first start and at a restart (the ports cluster.json
    records) the launcher leaves its ports to it, instead of failing on the address."""
    spec = launcher.ClusterSpec(data_dir=tmp_path, replication="raft", metrics=False)
    cluster = launcher.LocalCluster(spec)
    node = cluster.brokers[0]
    node.host = "192.0.2.7"  # TEST-NET-1: no address of this host
    for recorded in (False, True):
        node.port, node.raft_port = 41001, 41002
        cluster._hold_ports(node, recorded=recorded)
        assert node.binds_own_ports and not node.sockets
