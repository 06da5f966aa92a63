"""A slave whose store refuses the master's bytes (its disk is full) keeps its connection:
it acknowledges nothing more, so SYNC_MASTER waits answer FLUSH_SLAVE_TIMEOUT (or
SLAVE_NOT_AVAILABLE past ha_max_gap_not_in_sync), says so once, holds what arrives (and
stops reading past STALLED_BUFFER), and once the store takes writes again appends it all
and acknowledges by itself."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.exceptions import ServiceNotAvailableError
from rocketq.replication.ha import slave as slave_module
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus
from tests.integration.waiting import wait_until
from tests.replication.ha_pair import replicating
from tests.storage.conftest import batch
from tests.storage.test_replica import log_bytes


class Refusing:
    """Stands in for a store's append_raw: refuses with ``error`` while ``on``."""

    def __init__(self, store: MessageStore, error: Exception) -> None:
        self.append_raw = store.append_raw
        self.error = error
        self.on = False
        self.refused = 0

    def __call__(self, offset: int, data: Any, *, wake_dispatch: bool = True) -> None:
        if self.on:
            self.refused += 1
            raise self.error
        self.append_raw(offset, data, wake_dispatch=wake_dispatch)


@pytest.mark.parametrize(
    "error",
    [
        ServiceNotAvailableError("the broker's disk is full"),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
    ids=["refused", "enospc"],
)
async def test_a_full_slave_stops_acknowledging_and_resumes_by_itself(
    tmp_path: Path,
    store_factory: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:
    caplog.set_level(logging.INFO, logger="rocketq")
    monkeypatch.setattr(slave_module, "RETRY_INTERVAL", 0.2)
    monkeypatch.setattr(slave_module, "STALLED_BUFFER", 4096)
    master_store: MessageStore = await store_factory(tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    refusing = Refusing(slave_store, error)
    monkeypatch.setattr(slave_store, "append_raw", refusing)
    pair = replicating(
        master_store,
        slave_store,
        # A stalled slave that stopped reading must not count the read timeout.
        slave={"read_timeout": 1.0},
    )
    async with pair as (master, slave):
        first = master_store.append(batch("T", [b"before"]), "T", 0).end_offset
        await wait_until(lambda: master.best_ack >= first, "the slave to connect")
        (conn_id,) = master.slaves

        refusing.on = True
        ends = [
            master_store.append(batch("T", [b"%d" % i + b"." * 400] * 4), "T", i % 4).end_offset
            for i in range(40)  # past STALLED_BUFFER: the slave stops reading
        ]
        master_store.settle()
        timed_out = await master.wait_slave(ends[-1], 0.5)
        assert timed_out is PutStatus.FLUSH_SLAVE_TIMEOUT
        # Refused for a while, by retries (and past the read timeout): same connection,
        # nothing acknowledged past the first send, said once.
        await wait_until(lambda: refusing.refused >= 8, "the slave to try again")
        assert list(master.slaves) == [conn_id]
        assert master.best_ack == first
        assert slave.refused is not None
        assert slave.reading_paused
        master.max_gap = 1024  # past ha_max_gap_not_in_sync: the slave counts as gone
        assert await master.wait_slave(ends[-1], 0.5) is PutStatus.SLAVE_NOT_AVAILABLE
        master.max_gap = 1 << 30

        refusing.on = False  # space is back
        assert await master.wait_slave(ends[-1], 5.0) is PutStatus.PUT_OK
        await wait_until(
            lambda: slave_store.max_phy_offset == master_store.max_phy_offset, "the same end"
        )
        assert log_bytes(slave_store) == log_bytes(master_store)
        assert list(master.slaves) == [conn_id]
        assert slave.refused is None
        assert not slave.reading_paused
        last = master_store.append(batch("T", [b"after"]), "T", 1).end_offset
        assert await master.wait_slave(last, 5.0) is PutStatus.PUT_OK
        said = [r.getMessage() for r in caplog.records if r.name.startswith("rocketq")]
    assert sum("refuses the master's bytes" in m for m in said) == 1
    assert sum("takes the master's bytes again" in m for m in said) == 1
    assert sum("connected at CommitLog offset" in m for m in said) == 1  # no reconnect
    assert not any("reconnecting" in m or "disconnected" in m for m in said)
