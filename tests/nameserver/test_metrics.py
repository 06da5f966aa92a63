"""The nameserver's metrics: registrations by kind, expiries, live brokers and topics, and
its /readyz."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from rocketq.cluster.launcher import free_ports
from rocketq.nameserver.server import NameServer
from tests.nameserver.test_server import (
    Harness,
    harness,
    register_request,
    route_gone,
    wait_until,
)

__all__ = ["harness"]  # the fixture, shared with test_server


def sample(ns: NameServer, name: str, **labels: str) -> float:
    assert ns.metrics_server is not None
    base = {"node_type": "nameserver", "node_id": f"127.0.0.1:{ns.port}"}
    return ns.metrics_server.registry.get_sample_value(name, {**base, **labels}) or 0.0


async def test_registrations_expiries_and_live_brokers(harness: Harness) -> None:
    ns = await harness.start(metrics_port=free_ports(1)[0])
    client = await harness.client(ns)
    assert sample(ns, "rocketq_nameserver_ready") == 1
    silent, alive = await harness.broker(ns), await harness.broker(ns)
    req = register_request("broker-b", "127.0.0.1:2", topics=("B", "C"))
    await alive.register(req)
    await silent.register(register_request("broker-a", topics=("A",)))
    assert sample(ns, "rocketq_nameserver_broker_registrations_total", kind="full") == 2
    assert sample(ns, "rocketq_nameserver_brokers", cluster="DefaultCluster") == 2
    assert sample(ns, "rocketq_nameserver_topics") == 3

    delta = register_request(
        "broker-b", "127.0.0.1:2", topics=("D",), kind="DELTA", base_version=1, data_version=2
    )
    assert (await alive.register(delta)).ext == {"dataVersion": "2"}
    assert sample(ns, "rocketq_nameserver_broker_registrations_total", kind="delta") == 1
    assert sample(ns, "rocketq_nameserver_topics") == 4
    heartbeat = register_request(
        "broker-b", "127.0.0.1:2", topics=(), kind="HEARTBEAT", data_version=2
    )

    async def beat() -> None:
        while True:
            await alive.register(heartbeat)
            await asyncio.sleep(0.1)  # pacing, not synchronisation

    beating = asyncio.create_task(beat())
    try:
        await wait_until(route_gone(client, "A"), "the silent broker to expire")
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)
    assert sample(ns, "rocketq_nameserver_broker_expiries_total") == 1
    assert sample(ns, "rocketq_nameserver_broker_registrations_total", kind="heartbeat") >= 1
    assert sample(ns, "rocketq_nameserver_brokers", cluster="DefaultCluster") == 1
    assert sample(ns, "rocketq_nameserver_topics") == 3  # B, C, D
    assert sample(ns, "rocketq_nameserver_broker_registrations_total", kind="full") == 2


async def test_readyz_and_healthz(harness: Harness) -> None:
    port = free_ports(1)[0]
    ns = await harness.start(metrics_port=port)

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    assert await asyncio.to_thread(get, "/readyz") == (200, "ready\n")
    assert await asyncio.to_thread(get, "/healthz") == (200, "ok\n")
    status, text = await asyncio.to_thread(get, "/metrics")
    assert status == 200 and "rocketq_nameserver_brokers" in text
    ns.serving = False  # as while it stops
    assert (await asyncio.to_thread(get, "/readyz"))[0] == 503
    ns.serving = True
