"""A slave with an empty store (new, or its disk wiped) whose master's retention already
deleted its oldest segments: it starts at the master's min offset, its CommitLog from
there is the master's byte for byte, its ConsumeQueues serve every message the master
still holds, and all of that survives a restart of the slave. A slave whose end the master
no longer holds says why it cannot go on, once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.replication.ha import slave as slave_module
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import GetStatus, PutStatus
from tests.integration.waiting import wait_until
from tests.replication import ha_pair
from tests.storage.conftest import batch
from tests.storage.test_replica import log_bytes

ALL_HOURS = ";".join(str(h) for h in range(24))
QUEUES = 4


def fill(store: MessageStore, start: int, count: int) -> None:
    """``count`` batches of three messages over QUEUES queues of topic T (16 KiB
    segments: 50 batches fill about two)."""
    for i in range(start, start + count):
        store.append(batch("T", [b"%06d-" % i + b"x" * 100] * 3), "T", i % QUEUES)
    store.settle()


async def retained_master(factory: Callable[..., Any], root: Path) -> MessageStore:
    """A master whose retention deleted its oldest segments and that holds several
    segments past them (its min offset is not the start of its newest segment)."""
    store: MessageStore = await factory(root, file_reserved_time=0, delete_when=ALL_HOURS)
    fill(store, 0, 120)
    assert store.clean().commit_log_files >= 3  # every segment but the newest
    fill(store, 120, 120)
    assert store.min_phy_offset > 0
    assert store.commitlog.files.files[-1].file_from_offset > store.min_phy_offset
    return store


def replicating(master_store: MessageStore, slave_store: MessageStore) -> Any:
    """A master and its slave; the master's window far below its min offset: it counts
    from where the transfers begin, not from the 0 a new slave reports."""
    return ha_pair.replicating(master_store, slave_store, master={"window": 8192})


async def caught_up(master: MessageStore, slave: MessageStore) -> None:
    await wait_until(
        lambda: slave.max_phy_offset == master.max_phy_offset and slave.dispatch_behind_bytes == 0,
        lambda: f"the slave at {slave.max_phy_offset} to reach {master.max_phy_offset}",
        timeout=10,
    )


def queue_messages(store: MessageStore, queue_id: int) -> tuple[int, int, list[bytes]]:
    """(min offset, max offset, every record from the min) of queue ``queue_id`` of T."""
    lo, hi = store.min_offset_in_queue("T", queue_id), store.max_offset_in_queue("T", queue_id)
    records: list[bytes] = []
    offset = lo
    while offset < hi:
        got = store.get_messages("T", queue_id, offset, max_count=32)
        assert got.status is GetStatus.FOUND, (queue_id, offset, got.status)
        records.append(got.to_bytes())
        got.release()
        offset = got.next_begin_offset
    return lo, hi, records


def assert_same_messages(master: MessageStore, slave: MessageStore) -> None:
    for q in range(QUEUES):
        mine = queue_messages(master, q)
        assert mine[0] > 0  # the queue lost its first entries with the segments
        assert queue_messages(slave, q) == mine


async def test_an_empty_slave_starts_at_the_masters_min_offset(
    tmp_path: Path, store_factory: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rocketq")
    master_store = await retained_master(store_factory, tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    async with replicating(master_store, slave_store) as (master, _):
        await caught_up(master_store, slave_store)
        assert slave_store.min_phy_offset == master_store.min_phy_offset
        assert log_bytes(slave_store) == log_bytes(master_store)
        assert_same_messages(master_store, slave_store)
        # Replication goes on from there: a SYNC wait completes on the slave's ack.
        end = master_store.append(batch("T", [b"after"]), "T", 0).end_offset
        assert await master.wait_slave(end, 5.0) is PutStatus.PUT_OK
    said = [r.getMessage() for r in caplog.records if r.name.startswith("rocketq")]
    assert any(
        f"its CommitLog starts at the master's offset {master_store.min_phy_offset}" in m
        for m in said
    )
    assert not any("dispatch behind too much" in m for m in said)


async def test_a_rebuilt_slave_keeps_its_start_across_a_restart(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    master_store = await retained_master(store_factory, tmp_path / "m")
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    async with replicating(master_store, slave_store):
        await caught_up(master_store, slave_store)
    await slave_store.shutdown()
    fill(master_store, 240, 40)  # more while the slave is down
    reopened: MessageStore = await store_factory(tmp_path / "s")
    assert reopened.min_phy_offset == master_store.min_phy_offset
    async with replicating(master_store, reopened):
        await caught_up(master_store, reopened)
    assert log_bytes(reopened) == log_bytes(master_store)
    assert_same_messages(master_store, reopened)


async def test_a_slave_whose_end_the_master_deleted_says_so_once(
    tmp_path: Path,
    store_factory: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The slave copied the first segments, then stopped; the master's retention deleted
    what followed them: the slave's CommitLog cannot go on (no hole in it), the slave says
    why and what to do, once however often it reconnects, and stores nothing."""
    caplog.set_level(logging.INFO, logger="rocketq")
    monkeypatch.setattr(slave_module, "GAP_RETRY_DELAY", 0.2)
    master_store: MessageStore = await store_factory(
        tmp_path / "m", file_reserved_time=0, delete_when=ALL_HOURS
    )
    slave_store: MessageStore = await store_factory(tmp_path / "s")
    fill(master_store, 0, 40)
    async with replicating(master_store, slave_store):
        await caught_up(master_store, slave_store)
    behind = slave_store.max_phy_offset
    fill(master_store, 40, 120)
    master_store.clean()
    assert master_store.min_phy_offset > behind

    def hellos() -> int:
        return sum("connected at CommitLog offset" in r.getMessage() for r in caplog.records)

    async with replicating(master_store, slave_store):
        await wait_until(
            lambda: any("cannot go on" in r.getMessage() for r in caplog.records),
            "the slave to say it cannot go on",
        )
        # It tries again now and then; the same gap is not said again.
        seen = hellos()
        await wait_until(lambda: hellos() >= seen + 2, "two more reconnects", timeout=10)
    said = [r.getMessage() for r in caplog.records if "cannot go on" in r.getMessage()]
    assert len(said) == 1
    assert "remove its store directory" in said[0]
    assert f"[{behind}, {master_store.min_phy_offset})" in said[0]
    assert slave_store.max_phy_offset == behind
    assert any("below this master's oldest segment" in r.getMessage() for r in caplog.records)
