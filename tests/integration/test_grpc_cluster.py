"""`rocketq cluster up --grpc` (ClusterSpec.grpc): every broker serves the v2 endpoint on a
port it reports in its ready line; the launcher records it in cluster.json and a restarted
broker serves it again on the same port; RocketMQ 5's official client sends and receives
through it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rocketq.sdk.admin import Admin
from tests.grpc_v2.test_official_client import CLIENT
from tests.integration.conftest import MakeCluster


async def run_client(
    endpoint: str,
    home: Path,
    topic: str,
    group: str,
    scenario: str = "send_receive_ack",
    env: dict[str, str] | None = None,
) -> dict[str, object]:
    import os
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CLIENT), endpoint, topic, group, scenario,
        env={**os.environ, "HOME": str(home), **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()[-3000:]
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


async def test_a_cluster_with_grpc_serves_rocketmq_5_clients(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster = make_cluster(grpc=True)
    [broker] = cluster.brokers
    assert broker.grpc_port > 0
    saved = json.loads(cluster.cluster_file.read_text())
    assert saved["brokers"][0]["grpc_port"] == broker.grpc_port and saved["spec"]["grpc"]
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.update_topic("LaunchV5", read_queue_nums=2, write_queue_nums=2)
    endpoint = f"{broker.host}:{broker.grpc_port}"
    result = await run_client(endpoint, tmp_path, "LaunchV5", "launch-v5")
    assert sorted(m["body"] for m in result["got"]) == ["v5-0", "v5-1", "v5-2"]  # type: ignore[attr-defined, index]
    port = broker.grpc_port
    cluster.restart(broker.name)
    assert broker.grpc_port == port  # asked for the recorded port, and got it
    again = await run_client(endpoint, tmp_path, "LaunchV5", "launch-v5-again")
    assert len(again["got"]) >= 3  # type: ignore[arg-type]


async def test_every_endpoint_answers_the_routes_of_every_group(
    make_cluster: MakeCluster,
) -> None:
    """Two broker groups: whichever endpoint a v5 client asks, QueryRoute lists the queues
    of both groups, each with its own broker's endpoint, and QueryAssignment gives one
    assignment per group. (The official clients, given one endpoint, send to both groups
    and receive everything: tests/conformance/test_v5_matrix.py, two_brokers.)"""
    import grpc

    from rocketq.broker.grpc_v2 import definition_pb2 as d
    from rocketq.broker.grpc_v2 import service_pb2 as sv
    from rocketq.broker.grpc_v2 import service_pb2_grpc
    from rocketq.common.exceptions import RocketqError
    from tests.integration.waiting import wait_until

    cluster = make_cluster(grpc=True, brokers=2)
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.update_topic("RouteV5", read_queue_nums=2, write_queue_nums=2)

        async def both_registered() -> bool:
            try:
                return len((await admin.topic_route("RouteV5")).broker_datas) == 2
            except RocketqError:
                return False

        await wait_until(both_registered, "the topic on both groups")
    ports = [b.grpc_port for b in cluster.brokers]
    assert len(set(ports)) == 2 and all(p > 0 for p in ports)
    for b in cluster.brokers:
        async with grpc.aio.insecure_channel(f"{b.host}:{b.grpc_port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            route = await stub.QueryRoute(sv.QueryRouteRequest(topic=d.Resource(name="RouteV5")))
            assert route.status.code == d.Code.OK, route.status
            seen = sorted(
                (q.broker.name, q.id, q.broker.endpoints.addresses[0].port)
                for q in route.message_queues
            )
            assert len(seen) == 4 and {s[2] for s in seen} == set(ports), seen
            assignment = await stub.QueryAssignment(
                sv.QueryAssignmentRequest(
                    topic=d.Resource(name="RouteV5"), group=d.Resource(name="route-v5")
                )
            )
            assert assignment.status.code == d.Code.OK, assignment.status
            assert sorted(a.message_queue.broker.endpoints.addresses[0].port
                          for a in assignment.assignments) == sorted(ports)  # fmt: skip


async def test_a_broker_restart_in_the_middle_of_a_v5_run_loses_nothing(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    """The official client sends and receives steadily while its broker restarts: every
    send it was told succeeded is delivered (the pop state in the revive topic outlives
    the restart: what was received and not acknowledged comes back)."""
    from tests.integration.waiting import wait_until

    cluster = make_cluster(grpc=True)
    [broker] = cluster.brokers
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.update_topic("RestartV5", read_queue_nums=2, write_queue_nums=2)
    progress = tmp_path / "progress"
    env = {"V5_PROGRESS": str(progress), "V5_SECONDS": "16"}
    endpoint = f"{broker.host}:{broker.grpc_port}"
    client = asyncio.ensure_future(
        run_client(endpoint, tmp_path, "RestartV5", "restart-v5", "steady", env)
    )

    def received(at_least: int) -> bool:
        text = progress.read_text() if progress.exists() else "0"
        return text.isdigit() and int(text) >= at_least

    await wait_until(lambda: received(40), "deliveries before the restart", timeout=60)
    await asyncio.to_thread(cluster.restart, broker.name)
    before = int(progress.read_text())
    await wait_until(lambda: received(before + 40), "deliveries after the restart", 60)
    result = await asyncio.wait_for(client, 120)
    sent = set(result["sent"])  # type: ignore[arg-type]
    got = {body for body, _ in result["got"]}  # type: ignore[attr-defined]
    assert len(sent) > 100 and not sent - got, sorted(sent - got)[:20]


async def test_the_first_endpoint_takes_the_port_asked_for_or_another(
    make_cluster: MakeCluster, held_port: int
) -> None:
    """`rocketq cluster up --grpc` asks for 8081 first (ClusterSpec.grpc_port); a port
    another program holds gives way to a free one."""
    from rocketq.cluster.launcher import free_ports

    (wanted,) = free_ports(1)
    cluster = make_cluster(grpc=True, grpc_port=wanted)
    assert cluster.brokers[0].grpc_port == wanted
    busy = make_cluster(grpc=True, grpc_port=held_port)
    assert busy.brokers[0].grpc_port not in (0, held_port)
