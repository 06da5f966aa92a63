"""/readyz says "not ready" while the store recovers and while a Raft member knows no
leader; /healthz answers all along (the event loop is free: recovery runs on a thread)."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.cluster.launcher import free_ports
from rocketq.common import metrics_server
from rocketq.common.config import StoreConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.storage.message_store import MessageStore
from tests.integration.waiting import wait_until


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except urllib.error.URLError:
        return 0, ""  # not listening (yet)


async def probe(port: int, path: str) -> tuple[int, str]:
    return await asyncio.to_thread(get, port, path)


def store(tmp_path: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
    )


async def test_not_ready_while_the_store_recovers(tmp_path: Path, monkeypatch: object) -> None:
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    # The store's load (recovery) holds until the test lets it go, as a large store would.
    release = threading.Event()
    real_load = MessageStore.load

    def slow_load(self: MessageStore) -> object:
        assert release.wait(30), "the test never released the recovery"
        return real_load(self)

    setattr(MessageStore, "load", slow_load)  # noqa: B010 - undone in finally
    port = free_ports(1)[0]
    broker = Broker(
        BrokerConfig(
            listen_port=0, ha_listen_port=0, metrics_port=port, namesrv_addr=f"127.0.0.1:{ns.port}"
        ),
        store(tmp_path),
    )
    start = asyncio.ensure_future(broker.start())
    try:

        async def answers() -> bool:
            return (await probe(port, "/healthz"))[0] == 200

        await wait_until(answers, "the metrics server")
        assert await probe(port, "/healthz") == (200, "ok\n")
        status, text = await probe(port, "/readyz")
        assert status == 503 and "recovering" in text
        assert (await probe(port, "/healthz"))[0] == 200  # still, recovery going on
        release.set()
        await start

        async def ready() -> bool:
            return (await probe(port, "/readyz"))[0] == 200

        await wait_until(ready, "ready after recovery")
    finally:
        setattr(MessageStore, "load", real_load)  # noqa: B010
        release.set()
        if not start.done():
            await start
        await broker.stop()
        await ns.stop()


async def test_a_raft_member_without_a_leader_is_not_ready(tmp_path: Path) -> None:
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    metrics, own, gone1, gone2 = free_ports(4)
    # Three members, two of which never start: no quorum, no leader.
    peers = f"n0-127.0.0.1:{own};n1-127.0.0.1:{gone1};n2-127.0.0.1:{gone2}"
    broker = Broker(
        BrokerConfig(
            listen_port=0,
            ha_listen_port=0,
            metrics_port=metrics,
            namesrv_addr=f"127.0.0.1:{ns.port}",
            enable_dledger_commit_log=True,
            dledger_peers=peers,
            dledger_self_id="n0",
            dledger_heartbeat_interval=100,
            dledger_min_vote_interval=50,
            dledger_max_vote_interval=100,
        ),
        store(tmp_path),
    )
    await broker.start()
    try:
        assert broker.raft is not None
        raft = broker.raft
        # It stands for election and cannot win.
        await wait_until(
            lambda: raft.elections > 0 or raft.node.role.value != "FOLLOWER", "an election"
        )
        status, text = await probe(metrics, "/readyz")
        assert status == 503 and "no leader" in text
        assert await probe(metrics, "/healthz") == (200, "ok\n")
        _, body = await probe(metrics, "/metrics")
        assert 'rocketq_raft_leader{cluster="DefaultCluster",member="n0"' in body
        assert "rocketq_broker_ready{" in body and "rocketq_broker_ready{cluster" in body
    finally:
        await broker.stop()
        await ns.stop()


async def test_healthz_fails_when_the_event_loop_is_stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_server, "LOOP_TIMEOUT", 0.3)
    port = free_ports(1)[0]
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=port, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    try:
        assert await probe(port, "/healthz") == (200, "ok\n")
        # A thread asks while the loop is held by a blocking call.
        answers: list[tuple[int, str]] = []
        asking = threading.Thread(target=lambda: answers.append(get(port, "/healthz")))
        asking.start()
        time.sleep(1.0)  # the stuck loop itself, on purpose
        asking.join()
        status, text = answers[0]
        assert status == 503 and "did not answer within 0.3 s" in text
        assert await probe(port, "/healthz") == (200, "ok\n")
    finally:
        await ns.stop()
