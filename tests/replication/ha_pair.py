"""An HA master serving on a loopback port of its own and a slave of it, as the
replication tests run them in one process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from rocketq.replication.ha.master import HAMaster, listen_socket
from rocketq.replication.ha.slave import HASlave
from rocketq.storage.message_store import MessageStore


async def master_on_loopback(store: MessageStore, **kw: Any) -> tuple[HAMaster, int]:
    """A started master of ``store`` (``max_gap`` 1 GiB unless ``kw`` says) and its port."""
    master = HAMaster(store, **{"max_gap": 1 << 30, **kw})
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    await master.start(sock)
    return master, port


def slave_of(store: MessageStore, port: int, **kw: Any) -> HASlave:
    """A slave of ``store`` for the master on ``port`` (not started), reporting every
    0.2 s unless ``kw`` says."""
    return HASlave(
        store,
        lambda: f"127.0.0.1:{port}",
        broker_addr="127.0.0.1:1",
        broker_id=1,
        **{"report_interval": 0.2, **kw},
    )


@asynccontextmanager
async def replicating(
    master_store: MessageStore,
    slave_store: MessageStore,
    *,
    master: dict[str, Any] | None = None,
    slave: dict[str, Any] | None = None,
    start_slave: bool = True,
) -> AsyncIterator[tuple[HAMaster, HASlave]]:
    """A master and its slave (started unless ``start_slave`` is False), both stopped on
    the way out; ``master`` and ``slave`` are their keyword arguments."""
    ha_master, port = await master_on_loopback(master_store, **(master or {}))
    ha_slave = slave_of(slave_store, port, **(slave or {}))
    if start_slave:
        ha_slave.start()
    try:
        yield ha_master, ha_slave
    finally:
        await ha_slave.stop()
        await ha_master.stop()
