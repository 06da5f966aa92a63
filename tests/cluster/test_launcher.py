"""The local launcher against real nameserver and broker processes on free ports."""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import rocketq.cluster.launcher as launcher
from rocketq.cluster.launcher import (
    ClusterSpec,
    LauncherError,
    LocalCluster,
    PortFallback,
    broker_group_name,
    free_ports,
)
from rocketq.common.exceptions import ConfigError
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import parse_cluster_info
from rocketq.remoting.transport import request_blocking

SMALL_STORE = {"mapped_file_size_commit_log": "67108864"}


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.05)


def gone(pid: int) -> bool:
    """No such process, or only its zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


def registered(namesrv: str) -> dict[str, dict[int, str]]:
    """broker name -> {broker id: address}, from the nameserver's GET_BROKER_CLUSTER_INFO."""
    answer = request_blocking(namesrv, RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    info = parse_cluster_info(answer.body or b"")
    return {n: dict(d.broker_addrs) for n, d in info.broker_addr_table.items()}


def rocketq(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "rocketq.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_broker_group_names() -> None:
    names = [broker_group_name(i) for i in (0, 1, 25, 26, 27)]
    assert names == ["broker-a", "broker-b", "broker-z", "broker-aa", "broker-ab"]


def test_raft_replication_gives_each_group_three_members_with_known_peers(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(ClusterSpec(data_dir=tmp_path, brokers=2, replication="raft"))
    assert [(b.name, b.broker_name, b.broker_id) for b in cluster.brokers] == [
        ("broker-a-0", "broker-a", 0),
        ("broker-a-1", "broker-a", 1),
        ("broker-a-2", "broker-a", 2),
        ("broker-b-0", "broker-b", 0),
        ("broker-b-1", "broker-b", 1),
        ("broker-b-2", "broker-b", 2),
    ]
    for b, port in zip(cluster.brokers, (41001, 41002, 41003, 41004, 41005, 41006), strict=True):
        b.raft_port = port
    member = cluster.brokers[4]
    cmd = cluster._command(member)
    assert "dledger_peers=n0-127.0.0.1:41004;n1-127.0.0.1:41005;n2-127.0.0.1:41006" in cmd
    assert "dledger_self_id=n1" in cmd and "dledger_group=broker-b" in cmd
    assert "broker_role=SLAVE" not in cmd  # the election decides
    assert member.to_dict()["raft_port"] == 41005


def test_ha_replication_gives_each_group_a_master_and_a_slave(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterSpec(data_dir=tmp_path, brokers=2, replication="ha"))
    assert [(b.name, b.broker_name, b.broker_id) for b in cluster.brokers] == [
        ("broker-a-0", "broker-a", 0),
        ("broker-a-1", "broker-a", 1),
        ("broker-b-0", "broker-b", 0),
        ("broker-b-1", "broker-b", 1),
    ]
    slave_cmd = cluster._command(cluster.brokers[1])
    assert slave_cmd[-2:] == ["--set", "broker_role=SLAVE"]


def test_up_kill_restart_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ClusterSpec(data_dir=tmp_path, brokers=2, broker_settings=SMALL_STORE)
    with LocalCluster(spec) as c:
        # cluster.json says where everything is.
        doc = json.loads((tmp_path / "cluster.json").read_text())
        (ns,) = doc["nameservers"]
        assert doc["namesrv_addr"] == ns["addr"] == c.namesrv_addr == f"127.0.0.1:{ns['port']}"
        assert ns["name"] == "namesrv-0" and ns["pid"] > 0
        assert Path(ns["log"]) == tmp_path / "logs" / "namesrv-0.log"
        assert [b["broker_name"] for b in doc["brokers"]] == ["broker-a", "broker-b"]
        for b in doc["brokers"]:
            assert b["name"] == f"{b['broker_name']}-0" and b["broker_id"] == 0
            assert b["addr"] == f"127.0.0.1:{b['port']}" and b["pid"] > 0
            assert Path(b["store"]) == tmp_path / b["name"] / "store"
            assert Path(b["store"], "checkpoint").exists()
            # Every port it serves, as bound (any free port), is in its ready line and
            # in cluster.json.
            ports = {"client": b["port"], "ha": b["ha_port"], "metrics": b["metrics_port"]}
            assert json.loads(Path(tmp_path, "logs", f"{b['name']}.out").read_text()) == {
                "ready": "broker",
                "port": b["port"],
                "ports": ports,
            }
            assert len(set(ports.values())) == 3
        assert doc["spec"]["brokers"] == 2 and doc["spec"]["broker_settings"] == SMALL_STORE
        addrs = {b["broker_name"]: b["addr"] for b in doc["brokers"]}

        # Both brokers are registered, every node is alive.
        assert registered(c.namesrv_addr) == {name: {0: a} for name, a in addrs.items()}
        status = c.status()
        assert status.all_alive and not any(n.paused for n in status.nodes)
        assert [n.name for n in status.nodes] == ["namesrv-0", "broker-a-0", "broker-b-0"]
        assert status.registered == registered(c.namesrv_addr)

        # A second launcher on the same data dir refuses to start.
        with pytest.raises(LauncherError, match="already running") as err:
            LocalCluster(spec).start()
        assert "rocketq cluster down --data-dir" in str(err.value)

        # SIGSTOP / SIGCONT.
        c.pause("broker-a-0")
        wait_for(
            lambda: [n.paused for n in c.status().nodes] == [False, True, False],
            5,
            "broker-a paused",
        )
        c.resume("broker-a-0")
        wait_for(lambda: not any(n.paused for n in c.status().nodes), 5, "broker-a resumed")

        # SIGKILL: the broken channel removes the broker from the nameserver at once.
        old_pid = c.node("broker-b-0").pid
        c.kill("broker-b-0")
        assert gone(old_pid)
        wait_for(lambda: "broker-b" not in registered(c.namesrv_addr), 5, "broker-b is gone")
        alive = {n.name: n.alive for n in c.status().nodes}
        assert alive == {"namesrv-0": True, "broker-a-0": True, "broker-b-0": False}

        # A restart asks for the recorded ports: one another program holds is an error
        # that names it (after PORT_RETRY_SECONDS).
        monkeypatch.setattr(launcher, "PORT_RETRY_SECONDS", 0.2)
        metrics_port = c.node("broker-b-0").metrics_port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
            other.bind(("127.0.0.1", metrics_port))
            other.listen()
            with pytest.raises(LauncherError, match=f"its metrics port 127.0.0.1:{metrics_port}"):
                c.restart("broker-b-0")

        # restart: same ports and store, registered again.
        c.restart("broker-b-0")
        node = c.node("broker-b-0")
        assert node.addr == addrs["broker-b"] and node.pid != old_pid
        assert node.metrics_port == metrics_port
        assert registered(c.namesrv_addr)["broker-b"] == {0: addrs["broker-b"]}
        assert c.status().all_alive
        saved = json.loads((tmp_path / "cluster.json").read_text())["brokers"][1]
        assert (saved["pid"], saved["addr"]) == (node.pid, addrs["broker-b"])

        pids = [n.pid for n in c.nodes]
    # Leaving the block stopped every process.
    assert all(gone(pid) for pid in pids)
    assert not any(n.alive for n in c.status().nodes)
    # The brokers stopped gracefully: unregistered, flushed, abort file removed.
    for name in ("broker-a-0", "broker-b-0"):
        assert not (tmp_path / name / "store" / "abort").exists()


def test_restart_nameserver_brokers_register_again(tmp_path: Path) -> None:
    spec = ClusterSpec(data_dir=tmp_path, broker_settings=SMALL_STORE)
    with LocalCluster(spec) as c:
        addr = c.namesrv_addr
        c.kill("namesrv-0")
        c.restart("namesrv-0")  # waits until the broker is registered with it again
        assert c.namesrv_addr == addr
        assert registered(addr) == {"broker-a": {0: c.node("broker-a-0").addr}}


def test_stop_on_error_inside_the_block(tmp_path: Path) -> None:
    spec = ClusterSpec(data_dir=tmp_path, broker_settings=SMALL_STORE)
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"), LocalCluster(spec) as c:
        pids = [n.pid for n in c.nodes]
        raise RuntimeError("boom")
    assert len(pids) == 2 and all(gone(pid) for pid in pids)


def test_the_first_nameserver_takes_the_preferred_port_when_it_is_free(tmp_path: Path) -> None:
    (port,) = free_ports(1)  # stands in for 9876, which this machine may be using
    spec = ClusterSpec(data_dir=tmp_path, nameservers=2, broker_settings=SMALL_STORE,
                       namesrv_port=port)  # fmt: skip
    with LocalCluster(spec) as c:
        assert c.nameservers[0].addr == f"127.0.0.1:{port}" and not c.namesrv_port_busy
        assert c.nameservers[1].port != port  # only the first one
        assert c.namesrv_addr.startswith(f"127.0.0.1:{port};")
        assert registered(f"127.0.0.1:{port}") == {"broker-a": {0: c.node("broker-a-0").addr}}
        doc = json.loads((tmp_path / "cluster.json").read_text())
        assert doc["spec"]["namesrv_port"] == port
        assert not LocalCluster.load(tmp_path).namesrv_port_busy


def test_a_taken_preferred_port_gives_the_nameserver_another(
    tmp_path: Path, held_port: int
) -> None:
    spec = ClusterSpec(data_dir=tmp_path, broker_settings=SMALL_STORE, namesrv_port=held_port)
    with LocalCluster(spec) as c:
        assert c.namesrv_port_busy
        assert c.nameservers[0].port not in (0, held_port)
        assert registered(c.namesrv_addr) == {"broker-a": {0: c.node("broker-a-0").addr}}
        assert LocalCluster.load(tmp_path).namesrv_port_busy  # cluster.json says so too


def test_the_launcher_binds_the_ports_and_says_which_preferred_one_was_taken(
    tmp_path: Path, held_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # The launcher binds the preferred port itself: taken, it binds another at once, and
    # the node is handed that socket: no node is started twice.
    caplog.set_level(logging.WARNING, "rocketq.cluster.launcher")
    spec = ClusterSpec(data_dir=tmp_path, broker_settings=SMALL_STORE, namesrv_port=held_port)
    with LocalCluster(spec) as c:
        got = c.nameservers[0].port
        assert c.namesrv_port_busy and got not in (0, held_port)
        assert c.port_fallbacks == [PortFallback("namesrv-0's client port", held_port, got)]
        assert f"port {held_port} is taken, so namesrv-0's client port is {got} instead" in (
            caplog.text
        )
        assert c.spawns == len(c.nodes)  # each node started once
        assert "cannot listen" not in c.nameservers[0].log.read_text()
        # Its metrics port is not derived from a port it did not get: any free one.
        assert c.nameservers[0].metrics_port not in (0, held_port + 1)


def test_without_a_preferred_port_the_nameserver_takes_a_free_one(tmp_path: Path) -> None:
    cluster = LocalCluster(ClusterSpec(data_dir=tmp_path))
    assert cluster.spec.namesrv_port is None and not cluster.namesrv_port_busy
    cmd = cluster._command(cluster.nameservers[0])
    assert cmd[cmd.index("--port") + 1] == "0"


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_a_preferred_port_must_be_a_port(tmp_path: Path, port: int) -> None:
    with pytest.raises(ConfigError, match="namesrv_port"):
        ClusterSpec(data_dir=tmp_path, namesrv_port=port)


def test_a_node_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    spec = ClusterSpec(data_dir=tmp_path, broker_settings={"no_such_key": "1"})
    cluster = LocalCluster(spec)
    with pytest.raises(LauncherError, match="broker-a-0 exited before it was ready") as err:
        cluster.start()
    assert "no_such_key" in str(err.value)  # the tail of the broker's log
    assert all(gone(n.pid) for n in cluster.nodes if n.pid)  # the nameserver was stopped


def test_cli_up_status_down(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "c")
    up = rocketq(
        "cluster", "up", "--data-dir", data_dir, "--brokers", "2",
        "--set", "mapped_file_size_commit_log=67108864",
    )  # fmt: skip
    try:
        doc = json.loads(Path(data_dir, "cluster.json").read_text())
        assert doc["namesrv_addr"] in up.stdout
        for b in doc["brokers"]:
            assert b["addr"] in up.stdout and b["name"] in up.stdout
        assert f"rocketq cluster down --data-dir {data_dir}" in up.stdout

        status = json.loads(rocketq("cluster", "status", "--data-dir", data_dir, "--json").stdout)
        assert status["namesrv_addr"] == doc["namesrv_addr"]
        assert [(n["name"], n["alive"]) for n in status["nodes"]] == [
            ("namesrv-0", True),
            ("broker-a-0", True),
            ("broker-b-0", True),
        ]
        assert status["registered"] == {b["broker_name"]: {"0": b["addr"]} for b in doc["brokers"]}
        assert "broker-b" in rocketq("cluster", "status", "--data-dir", data_dir).stdout

        again = rocketq("cluster", "up", "--data-dir", data_dir, check=False)
        assert again.returncode != 0
        assert "already running" in again.stderr and "Traceback" not in again.stderr
    finally:
        down = rocketq("cluster", "down", "--data-dir", data_dir, check=False)
    assert down.returncode == 0, down.stderr
    pids = [n["pid"] for n in [*doc["nameservers"], *doc["brokers"]]]
    assert all(gone(pid) for pid in pids)
    status = json.loads(rocketq("cluster", "status", "--data-dir", data_dir, "--json").stdout)
    assert not any(n["alive"] for n in status["nodes"]) and status["registered"] is None
    assert "not running" in rocketq("cluster", "down", "--data-dir", data_dir).stdout


def test_cli_up_says_when_the_nameserver_port_is_taken(tmp_path: Path, held_port: int) -> None:
    data_dir = str(tmp_path / "c")
    up = rocketq(
        "cluster", "up", "--data-dir", data_dir, "--namesrv-port", str(held_port),
        "--set", "mapped_file_size_commit_log=67108864",
    )  # fmt: skip
    try:
        addr = json.loads(Path(data_dir, "cluster.json").read_text())["namesrv_addr"]
        assert addr != f"127.0.0.1:{held_port}"
        assert (
            f"port {held_port} is taken, so the nameserver listens on {addr} instead: "
            f"give clients -n {addr} or export NAMESRV_ADDR={addr}"
        ) in up.stdout
    finally:
        rocketq("cluster", "down", "--data-dir", data_dir, check=False)


def test_cli_up_uses_a_free_nameserver_port(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    data_dir = str(tmp_path / "c")
    up = rocketq(
        "cluster", "up", "--data-dir", data_dir, "--namesrv-port", str(port),
        "--set", "mapped_file_size_commit_log=67108864",
    )  # fmt: skip
    try:
        assert f"namesrv addr: 127.0.0.1:{port}\n" in up.stdout
        # The port asked for is the one served (other ports, such as the metrics port next
        # to it, may have been taken meanwhile by another process and fall back, as they may).
        assert f"port {port} is taken" not in up.stdout
    finally:
        rocketq("cluster", "down", "--data-dir", data_dir, check=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up", "--replication", "paxos"], "'paxos' is not one of"),
        (["status"], "no cluster.json"),
        (["down"], "no cluster.json"),
    ],
)
def test_cli_errors_are_clear(tmp_path: Path, args: list[str], message: str) -> None:
    result = rocketq("cluster", *args, "--data-dir", str(tmp_path), check=False)
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not os.path.exists(tmp_path / "cluster.json")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_up_foreground_stops_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketq.cli.main", "cluster", "up", "--data-dir", str(tmp_path),
         "--foreground", "--set", "mapped_file_size_commit_log=67108864"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        out = ""
        deadline = time.monotonic() + 60
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while "Ctrl-C" not in out:
                assert time.monotonic() < deadline, f"no 'Ctrl-C' line in 60 s: {out!r}"
                if not sel.select(timeout=1.0):
                    continue
                chunk = os.read(fd, 65536)
                assert chunk, f"cluster up exited: {proc.stderr.read() if proc.stderr else ''}"
                out += chunk.decode()
        doc = json.loads((tmp_path / "cluster.json").read_text())
        pids = [n["pid"] for n in [*doc["nameservers"], *doc["brokers"]]]
        assert not any(gone(pid) for pid in pids)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
        assert all(gone(pid) for pid in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            LocalCluster.load(tmp_path).stop()
