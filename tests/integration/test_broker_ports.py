"""Two brokers on one host as RocketMQ's docs set them up: their broker.toml files differ
only in listen_port, broker_name and the store directory (no ha_listen_port, no
metrics_port), and each takes listen_port + 1 for HA and listen_port + 2 for metrics. Real
processes, started by the launcher that ``rocketq cluster up`` uses. And the ports
``rocketq cluster up`` asks for first: RocketMQ's 10911 (HA and metrics derived from it)
for the first broker and the dashboard's 8080 for the console, free ports when taken."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import random
import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq import Message, MessageQueue, Producer, SendStatus
from rocketq.cluster.console_launch import start_console
from rocketq.cluster.launcher import ClusterSpec, LocalCluster, Node, PortFallback, port_free
from rocketq.sdk.admin import Admin
from tests.integration.conftest import SMALL_STORE

HOST = "127.0.0.1"
# Below Linux's ephemeral range (32768-60999 by default), where outgoing connections do
# not take ports between the check and the brokers' binds.
PORT_RANGE = range(20_000, 32_000)


def port_runs(count: int, length: int) -> list[int]:
    """``count`` first ports of runs of ``length`` consecutive ports free now, no two runs
    overlapping."""
    rng = random.Random()
    found: list[int] = []
    for _ in range(500):
        base = rng.choice(PORT_RANGE)
        clear = all(abs(base - other) >= length for other in found)
        if clear and all(port_free(p) for p in range(base, base + length)):
            found.append(base)
            if len(found) == count:
                return found
    pytest.fail(f"found no {count} runs of {length} free ports in {PORT_RANGE}")


class OneHostCluster(LocalCluster):
    """The launcher's cluster, each broker started as ``rocketq broker --config
    broker.toml`` from a file of its own that sets no port but listen_port (and binds its
    ports itself: the launcher hands it none)."""

    def holds_ports(self, node: Node) -> bool:
        return node.role != "broker"

    def __init__(self, spec: ClusterSpec, listen_ports: dict[str, int]) -> None:
        super().__init__(spec)
        self.listen_ports = listen_ports

    def broker_toml(self, node: Node) -> str:
        values = {
            # What both brokers share...
            "namesrv_addr": self.namesrv_addr,
            "mapped_file_size_commit_log": int(SMALL_STORE["mapped_file_size_commit_log"]),
            "message_delay_level": SMALL_STORE["message_delay_level"],
            # ...and the three keys that tell them apart.
            "listen_port": self.listen_ports[node.broker_name],
            "broker_name": node.broker_name,
            "store_path_root_dir": str(node.store),
        }
        return "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())

    def _command(self, node: Node) -> list[str]:
        if node.role != "broker":
            return super()._command(node)
        path = node.home / "broker.toml"
        path.write_text(self.broker_toml(node))
        return [sys.executable, "-m", "rocketq.cli.main", "broker", "--config", str(path)]


@pytest.fixture
def one_host(tmp_path: Path) -> Iterator[OneHostCluster]:
    a, b = port_runs(2, 3)
    spec = ClusterSpec(data_dir=tmp_path / "c", brokers=2, metrics=False)
    cluster = OneHostCluster(spec, {"broker-a": a, "broker-b": b})
    try:
        cluster.start()  # returns once both brokers are registered
        yield cluster
    finally:
        cluster.stop()


def status_of(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return int(resp.status)


async def test_two_brokers_differing_only_in_listen_port_name_and_store(
    one_host: OneHostCluster,
) -> None:
    cluster = one_host
    tomls = [(b.home / "broker.toml").read_text().splitlines() for b in cluster.brokers]
    differing = {line.split(" = ")[0] for line in set(tomls[0]) ^ set(tomls[1])}
    assert differing == {"listen_port", "broker_name", "store_path_root_dir"}
    ports = cluster.listen_ports
    assert {b.broker_name: b.port for b in cluster.brokers} == ports

    async with Admin(cluster.namesrv_addr) as admin:
        for name, port in ports.items():
            config = await admin.broker_config(f"{HOST}:{port}")
            assert config["listen_port"] == str(port)
            assert config["ha_listen_port"] == str(port + 1)
            assert config["metrics_port"] == str(port + 2)
            assert not port_free(port + 1), f"{name}: nothing listens on its HA port"
            url = f"http://{HOST}:{port + 2}/healthz"
            assert await asyncio.to_thread(status_of, url) == 200

        await admin.update_topic("OneHost", read_queue_nums=2, write_queue_nums=2)
        route = await admin.topic_route("OneHost")
        assert {d.broker_name: d.broker_addrs for d in route.broker_datas} == {
            name: {0: f"{HOST}:{port}"} for name, port in ports.items()
        }
        assert {q.broker_name for q in route.queue_datas} == set(ports)

    def on_broker(queues: list[MessageQueue], msg: Message, arg: object) -> MessageQueue:
        return next(q for q in queues if q.broker_name == arg)

    async with Producer("pg-one-host", cluster.namesrv_addr) as producer:
        for name in ports:
            result = await producer.send(
                Message("OneHost", body=name.encode()), selector=on_broker, arg=name
            )
            assert result.status is SendStatus.SEND_OK
            assert result.queue.broker_name == name
            assert result.offset_msg_id  # stored by that broker


# -- the ports `rocketq cluster up` asks for first -----------------------------------------


def test_cluster_up_asks_for_rocketmqs_ports_first() -> None:
    """10911 for the first broker, 8080 for the console, as RocketMQ and its dashboard."""
    from rocketq.cli.main import cluster_up
    from rocketq.cli.options import DEFAULT_BROKER_PORT, DEFAULT_CONSOLE_PORT

    defaults = {
        name: param.default
        for name, param in inspect.signature(cluster_up).parameters.items()
        if name in ("broker_port", "console_port", "namesrv_port", "grpc_port")
    }
    assert defaults == {
        "broker_port": DEFAULT_BROKER_PORT,
        "console_port": DEFAULT_CONSOLE_PORT,
        "namesrv_port": 9876,
        "grpc_port": 8081,
    }
    assert (DEFAULT_BROKER_PORT, DEFAULT_CONSOLE_PORT) == (10911, 8080)


def test_the_first_broker_and_the_console_take_the_preferred_ports_or_say_why_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Stand-ins for 10911 (and 10912, 10913) and 8080, which this machine may be using.
    free_base, taken_base = port_runs(2, 3)
    console_port, taken_console = port_runs(2, 1)
    caplog.set_level(logging.WARNING, "rocketq.cluster.launcher")
    free = ClusterSpec(data_dir=tmp_path / "free", broker_port=free_base, brokers=2)
    with LocalCluster(free) as cluster:
        first, second = cluster.brokers
        ports = (first.port, first.ha_port, first.metrics_port)
        assert ports == (free_base, free_base + 1, free_base + 2)
        assert second.port not in range(free_base, free_base + 3)  # only the first one
        assert cluster.port_fallbacks == [] and cluster.spawns == len(cluster.nodes)
        web = start_console(cluster, port=console_port)
        try:
            assert web.port == console_port
            assert status_of(f"{web.url}/login") == 200
        finally:
            web.stop()

    with (
        socket.socket() as other,  # another program on the broker's port...
        socket.socket() as other_web,  # ...and on the console's
    ):
        other.bind((HOST, taken_base))
        other.listen()
        other_web.bind((HOST, taken_console))
        other_web.listen()
        taken = ClusterSpec(data_dir=tmp_path / "taken", broker_port=taken_base)
        with LocalCluster(taken) as cluster:
            (broker,) = cluster.brokers
            assert broker.port != taken_base and broker.ha_port and broker.metrics_port
            fallback = PortFallback("broker-a-0's client port", taken_base, broker.port)
            assert cluster.port_fallbacks == [fallback]
            assert f"port {taken_base} is taken, so broker-a-0's client port is " in caplog.text
            assert cluster.spawns == len(cluster.nodes)  # started once all the same
            web = start_console(cluster, port=taken_console)
            try:
                assert web.port != taken_console
                assert f"port {taken_console} is taken, so the console's port is {web.port}" in (
                    caplog.text
                )
                assert status_of(f"{web.url}/login") == 200
            finally:
                web.stop()
