"""SYNC_FLUSH with a disk slower than ``sync_flush_timeout``: the producer gets
FLUSH_DISK_TIMEOUT (the message is stored, not lost), as RocketMQ answers.

A nameserver and a broker run in this process so the disk can be made slow: the flush
thread's fdatasync is wrapped to take 300 ms while the timeout is 50 ms.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketq import Message, Producer, SendStatus
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.common.config import StoreConfig
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.sdk.admin import Admin
from rocketq.storage import mapped_file
from tests.integration.waiting import wait_until


@pytest.fixture
async def slow_disk_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, Broker]]:
    real_fdatasync = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        time.sleep(0.3)
        real_fdatasync(fd)

    monkeypatch.setattr(mapped_file.os, "fdatasync", slow_fdatasync)
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    broker = Broker(
        BrokerConfig(
            listen_port=0, ha_listen_port=0, metrics_port=0, namesrv_addr=f"127.0.0.1:{ns.port}"
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=4 * 1024 * 1024,
            flush_disk_type="SYNC_FLUSH",
            sync_flush_timeout=50,
        ),
    )
    await broker.start()
    try:
        yield f"127.0.0.1:{ns.port}", broker
    finally:
        await broker.stop()
        await ns.stop()


async def test_slow_disk_answers_flush_disk_timeout_and_keeps_the_message(
    slow_disk_broker: tuple[str, Broker],
) -> None:
    namesrv, broker = slow_disk_broker
    await wait_until(lambda: all(broker.registration.registered.values()), "registration")
    async with Admin(namesrv) as admin:
        await admin.update_topic("Slow", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-slow", namesrv) as producer:
        result = await producer.send(Message("Slow", b"late but kept"))
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT and not result.ok
    # Stored all the same: the flush catches up and the message is there.
    flusher = broker.store.flusher
    await wait_until(
        lambda: flusher.flushed[0] >= broker.store.commitlog.max_offset, "the flush to catch up"
    )
    async with Admin(namesrv) as admin:
        found = await admin.query_msg_by_id(result.offset_msg_id)
    assert found.body == b"late but kept"
