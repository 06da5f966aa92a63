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


async def run_client(endpoint: str, home: Path, topic: str, group: str) -> dict[str, object]:
    import os
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CLIENT), endpoint, topic, group, "send_receive_ack",
        env={**os.environ, "HOME": str(home)},
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
