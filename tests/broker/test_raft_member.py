"""A broker in Raft mode, in this process, as the only member of its group (a quorum of
one): the role follows the election, sends wait in one heap for the commit point, a
leader that steps down fails its waiting sends at once and refuses writes with a
retriable NOT_LEADER, and its writing services stop and start again with the role.
Plus the DLedger keys' validation."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketq import Message, Producer, SendStatus
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig, parse_dledger_peers
from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import ConfigError, NotLeaderError
from rocketq.common.record import encode_host, encode_record
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.replication.raft.node import Role
from rocketq.sdk.admin import Admin
from rocketq.storage.results import PutStatus
from tests.integration.waiting import wait_until

FAST = {
    "dledger_heartbeat_interval": 100,
    "dledger_min_vote_interval": 50,
    "dledger_max_vote_interval": 100,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def record(body: bytes) -> bytes:
    return encode_record(
        topic=b"Solo",
        body=body,
        properties=b"",
        born_timestamp=1,
        born_host=encode_host("1.2.3.4:5"),
    )


@pytest.fixture
async def solo(tmp_path: Path) -> AsyncIterator[tuple[str, Broker]]:
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    broker = Broker(
        BrokerConfig(
            listen_port=0,
            ha_listen_port=0,
            metrics_port=0,
            namesrv_addr=f"127.0.0.1:{ns.port}",
            enable_dledger_commit_log=True,
            dledger_peers=f"n0-127.0.0.1:{free_port()}",
            dledger_self_id="n0",
            **FAST,  # type: ignore[arg-type]
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=4 * 1024 * 1024,
        ),
    )
    await broker.start()
    try:
        yield f"127.0.0.1:{ns.port}", broker
    finally:
        await broker.stop()
        await ns.stop()


async def serving(broker: Broker) -> None:
    raft = broker.raft
    assert raft is not None
    await wait_until(lambda: raft.serving, "the member to lead and serve", timeout=10)


async def test_the_leader_is_the_master_and_sends_wait_for_the_commit(
    solo: tuple[str, Broker],
) -> None:
    namesrv, broker = solo
    assert broker.config.broker_role == "SLAVE" and broker.config.broker_id == 1  # at start
    await serving(broker)
    assert broker.config.broker_role == "SYNC_MASTER" and broker.config.broker_id == 0
    async with Admin(namesrv) as admin:
        await admin.update_topic("Solo", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-solo", namesrv) as producer:
        result = await producer.send(Message("Solo", b"committed"))
    assert result.status is SendStatus.SEND_OK
    assert broker.store.committed_offset == broker.store.max_phy_offset
    raft = broker.raft
    assert raft is not None
    assert raft.index.last_index() >= 2  # this term's empty entry, then the batch


async def test_waiting_sends_complete_from_one_heap_and_time_out(
    solo: tuple[str, Broker],
) -> None:
    _, broker = solo
    await serving(broker)
    raft = broker.raft
    assert raft is not None
    ends = [broker.store.append(record(b"r%d" % i), "Solo", 0).end_offset for i in range(5)]
    # Appended in one loop turn: one kick replicates (here: commits) them all.
    waits = [asyncio.ensure_future(raft.wait_committed(e, 5)) for e in reversed(ends)]
    assert [await w for w in waits] == [PutStatus.PUT_OK] * 5
    assert not raft._waiting
    beyond = broker.store.max_phy_offset + 1000  # nothing will ever end there
    assert await raft.wait_committed(beyond, 0.05) is PutStatus.FLUSH_SLAVE_TIMEOUT


async def test_stepping_down_fails_waiting_sends_and_refuses_writes(
    solo: tuple[str, Broker],
) -> None:
    _, broker = solo
    await serving(broker)
    raft = broker.raft
    assert raft is not None
    beyond = broker.store.max_phy_offset + 1000
    waiting = [asyncio.ensure_future(raft.wait_committed(beyond + i, 10)) for i in range(3)]
    await asyncio.sleep(0)
    raft.node._become_follower(raft.node.term, None)  # as when a higher term shows up
    for w in waiting:
        with pytest.raises(NotLeaderError):
            await asyncio.wait_for(w, 1)
    assert broker.config.broker_role == "SLAVE" and broker.config.broker_id == 1
    with pytest.raises(NotLeaderError) as refused:
        broker.send.append(record(b"x"), "Solo", 0)
    assert refused.value.retriable and refused.value.code == 1001
    assert "refresh the route" in str(refused.value)
    # Alone in its group it is elected again: the writers start again with the role.
    await serving(broker)
    await wait_until(lambda: len(broker.schedule._tasks) > 0, "the delay service to restart")
    assert broker.config.broker_id == 0
    assert broker.raft is not None and broker.raft.node.role is Role.LEADER


def test_dledger_keys_are_checked_by_name() -> None:
    base = {"enable_dledger_commit_log": True}
    with pytest.raises(ConfigError, match="dledger_peers: required"):
        BrokerConfig(**base)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"dledger_peers.*not a member as id-host:port"):
        BrokerConfig(dledger_peers="n0:127.0.0.1:1")
    with pytest.raises(ConfigError, match="listed twice"):
        BrokerConfig(dledger_peers="n0-a:1;n0-b:2")
    peers = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"
    with pytest.raises(ConfigError, match="dledger_self_id: 'n5' is not one of"):
        BrokerConfig(**base, dledger_peers=peers, dledger_self_id="n5")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="dledger_preferred_leader_id"):
        BrokerConfig(
            **base,  # type: ignore[arg-type]
            dledger_peers=peers,
            dledger_self_id="n0",
            dledger_preferred_leader_id="n9",
        )
    with pytest.raises(ConfigError, match="dledger_min_vote_interval"):
        BrokerConfig(
            **base,  # type: ignore[arg-type]
            dledger_peers=peers,
            dledger_self_id="n0",
            dledger_min_vote_interval=2000,
        )
    with pytest.raises(ConfigError, match="dledger_heartbeat_interval"):
        BrokerConfig(dledger_heartbeat_interval=0)
    ok = BrokerConfig(**base, dledger_peers=peers, dledger_self_id="n2")  # type: ignore[arg-type]
    assert ok.raft_peers == parse_dledger_peers(peers)
    assert list(ok.raft_peers) == ["n0", "n1", "n2"]
    assert ok.raft_peers["n1"] == "127.0.0.1:40912"
