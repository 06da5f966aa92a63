"""The classic HA channel in one process: the frames byte for byte, a master and a slave
over loopback TCP (the slave's CommitLog ends byte-identical, SYNC waits complete on its
acks), and a connection that does not speak the protocol is dropped without harm."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.replication.ha.master import HAMaster, listen_socket
from rocketq.replication.ha.wire import (
    HELLO,
    TRANSFER,
    HAProtocolError,
    Hello,
    decode_hello_head,
    decode_transfer_head,
    encode_hello,
    encode_transfer_head,
)
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus
from tests.integration.waiting import wait_until
from tests.replication.ha_pair import master_on_loopback, slave_of
from tests.storage.conftest import batch
from tests.storage.test_replica import log_bytes


def test_hello_golden_bytes() -> None:
    raw = encode_hello(Hello(broker_id=1, max_offset=0x1234, broker_addr="127.0.0.1:10911"))
    assert raw == (
        b"RQHA"  # magic
        + b"\x00\x01"  # version
        + b"\x00" * 7
        + b"\x01"  # broker id
        + b"\x00" * 6
        + b"\x12\x34"  # CommitLog end
        + b"\x00\x0f"  # address length
        + b"127.0.0.1:10911"
    )
    assert decode_hello_head(raw[: HELLO.size]) == (1, 0x1234, 15)


def test_transfer_golden_bytes() -> None:
    raw = encode_transfer_head(offset=1024, master_max=2048, size=16, flags=1)
    assert raw == (
        b"\x00" * 6 + b"\x04\x00" + b"\x00" * 6 + b"\x08\x00" + b"\x00\x00\x00\x10" + b"\x01"
    )
    assert len(raw) == TRANSFER.size
    assert decode_transfer_head(raw) == (1024, 2048, 16, 1)


@pytest.mark.parametrize(
    ("head", "message"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n"[: HELLO.size], "not an HA hello"),
        (HELLO.pack(0x52514841, 9, 1, 0, 0), "version 9"),
        (HELLO.pack(0x52514841, 1, 1, 0, 5000), "5000 bytes"),
    ],
)
def test_bad_hellos_are_named(head: bytes, message: str) -> None:
    with pytest.raises(HAProtocolError, match=message):
        decode_hello_head(head)


def test_bad_transfer_sizes_are_named() -> None:
    with pytest.raises(HAProtocolError, match="bytes"):
        decode_transfer_head(TRANSFER.pack(0, 0, 1 << 30, 0))
    with pytest.raises(HAProtocolError, match="negative"):
        decode_transfer_head(TRANSFER.pack(-5, 0, 10, 0))


async def test_master_and_slave_over_loopback(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    master_store: MessageStore = await store_factory(tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    master, port = await master_on_loopback(master_store)
    slave = slave_of(slave_store, port)
    try:
        # No slave yet: a SYNC wait answers at once.
        first = master_store.append(batch("T", [b"a" * 100]), "T", 0)
        assert await master.wait_slave(first.end_offset, 1.0) is PutStatus.SLAVE_NOT_AVAILABLE

        # Garbage on the HA port is dropped; the master keeps serving.
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\xff" * 64)
        await writer.drain()
        writer.close()

        slave.start()
        await wait_until(lambda: master.best_ack >= first.end_offset, "the slave to catch up")
        ends = []
        for i in range(200):  # across several 16 KiB segments
            r = master_store.append(batch("T", [b"%d" % i * 50] * 3), "T", i % 4)
            ends.append(r.end_offset)
        statuses = await asyncio.gather(*(master.wait_slave(e, 5.0) for e in ends))
        assert set(statuses) == {PutStatus.PUT_OK}
        await wait_until(
            lambda: slave_store.max_phy_offset == master_store.max_phy_offset, "the same end"
        )
        assert log_bytes(slave_store) == log_bytes(master_store)
        assert slave.lag_bytes() == 0
        assert len(master.slaves) == 1
    finally:
        await slave.stop()
        await master.stop()


async def test_a_silent_slave_times_sync_sends_out(store_factory: Callable[..., Any]) -> None:
    """A slave that says hello and then acknowledges nothing: SYNC sends answer
    FLUSH_SLAVE_TIMEOUT after their timeout, each one, and none before it."""
    store: MessageStore = await store_factory()
    master = HAMaster(store, max_gap=1 << 30)
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    await master.start(sock)
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_hello(Hello(1, 0, "127.0.0.1:2")))
        await writer.drain()
        await wait_until(lambda: master.best_ack == 0, "the silent slave to connect")
        ends = [store.append(batch("T", [b"x" * 64]), "T", 0).end_offset for _ in range(5)]
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        statuses = await asyncio.gather(*(master.wait_slave(e, 0.3) for e in ends))
        assert set(statuses) == {PutStatus.FLUSH_SLAVE_TIMEOUT}
        assert 0.3 <= loop.time() - t0 < 3.0
    finally:
        writer.close()
        await master.stop()
