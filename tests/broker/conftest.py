"""Fixtures of the broker tests: ``wire``, a broker running in this process behind a
remoting server with every request handler, and a connection to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.broker.wire.admin import AdminRequests
from rocketq.broker.wire.client import ClientRequests
from rocketq.broker.wire.pull import PullRequests
from rocketq.broker.wire.send import SendRequests
from rocketq.common.config import StoreConfig
from rocketq.common.message import TopicConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.transport import Connection, RemotingServer, connect
from tests.integration.waiting import wait_until

WIRE_TOPIC = "WireTopic"  # made with 2 queues by the fixture


@pytest.fixture
async def wire(tmp_path: Path) -> AsyncIterator[tuple[Broker, Connection]]:
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    b = Broker(
        BrokerConfig(
            listen_port=0, ha_listen_port=0, metrics_port=0, namesrv_addr=f"127.0.0.1:{ns.port}"
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
        ),
    )
    await b.start()
    clients = ClientRequests(b)
    server = RemotingServer(
        {
            **SendRequests(b).handlers(),
            **PullRequests(b).handlers(),
            **clients.handlers(),
            **AdminRequests(b).handlers(),
        },
        on_close=clients.connection_closed,
    )
    await server.start("127.0.0.1", 0)
    conn = await connect(f"127.0.0.1:{server.port}", {})
    try:
        await wait_until(lambda: all(b.registration.registered.values()), "registration")
        b.topics.update(TopicConfig(WIRE_TOPIC, 2, 2))
        yield b, conn
    finally:
        conn.close()
        await server.stop()
        await b.stop()
        await ns.stop()
