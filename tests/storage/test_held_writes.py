"""Held writes: the sends of one network read are stamped at reserved positions and
written to the CommitLog with one pwrite when the store settles; nothing reads, ships or
dispatches them before, and a failed write gives their queue offsets back."""

from __future__ import annotations

import errno
import os
from typing import Any

import pytest

from rocketq.common.exceptions import DiskFullError
from rocketq.common.record import BLANK_MAGIC_CODE, SIZE_MAGIC, decode_records
from rocketq.storage import mapped_file
from rocketq.storage.mapped_file import MappedFile
from rocketq.storage.message_store import MessageStore
from tests.pure import ran_pure
from tests.storage.conftest import batch
from tests.storage.test_commitlog import _dispatched


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of every MappedFile write, in order."""
    sizes: list[int] = []
    real = MappedFile.append_bytes

    def counted(self: MappedFile, data: Any, *, fill: bool = False) -> None:
        sizes.append(len(data))
        real(self, data, fill=fill)

    monkeypatch.setattr(MappedFile, "append_bytes", counted)
    return sizes


def _fail_writes(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every MappedFile write fails as a full disk does (ENOSPC); -> the real write."""

    def broken(self: MappedFile, data: Any, *, fill: bool = False) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real = MappedFile.append_bytes
    monkeypatch.setattr(MappedFile, "append_bytes", broken)
    return real


async def test_held_sends_are_written_in_one_pwrite_at_settle(
    store_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, mapped_file):
        return
    store: MessageStore = await store_factory(mapped_file_size_commit_log=64 * 1024)
    store.append(batch("T", [b"first"]), "T", 0)
    start = store.max_phy_offset
    writes = _count_writes(monkeypatch)
    store.hold_writes()
    a = store.append(batch("T", [b"a1", b"a2"]), "T", 0)
    b = store.append(batch("T", [b"b1"]), "T", 1)
    c = store.append(batch("T", [b"c1"]), "T", 0)
    # Reserved one after the other, queue offsets taken, nothing written or visible yet.
    assert (a.wrote_offset, b.wrote_offset, c.wrote_offset) == (
        start,
        a.end_offset,
        b.end_offset,
    )
    assert (a.queue_offset, b.queue_offset, c.queue_offset) == (1, 0, 3)
    assert writes == [] and store.max_phy_offset == start
    assert store.commitlog.read_record(a.wrote_offset) is None
    assert store.committed_offset == start
    store.settle()
    assert writes == [c.end_offset - start]
    assert store.max_phy_offset == c.end_offset
    assert store.committed_offset == c.end_offset
    assert not store.commitlog.holding and store.commitlog.held_bytes == 0
    await _dispatched(store)
    got = decode_records(store.get_messages("T", 0, 0, max_count=10).to_bytes())
    assert [(m.body, m.queue_offset) for m in got] == [
        (b"first", 0),
        (b"a1", 1),
        (b"a2", 2),
        (b"c1", 3),
    ]
    assert [m.commit_log_offset for m in got[1:]] == [
        a.wrote_offset,
        a.wrote_offset + a.wrote_bytes // 2,
        c.wrote_offset,
    ]
    # After the settle, appends are written at once again.
    store.append(batch("T", [b"d"]), "T", 0)
    assert len(writes) == 2


async def test_nobody_settling_writes_at_the_next_loop_turn(store_factory: Any) -> None:
    import asyncio

    store: MessageStore = await store_factory()
    store.hold_writes()
    r = store.append(batch("T", [b"x"]), "T", 0)
    assert store.max_phy_offset == r.wrote_offset
    await asyncio.sleep(0)
    assert store.max_phy_offset == r.end_offset


async def test_a_batch_that_does_not_fit_writes_what_is_held_before_the_blank(
    store_factory: Any,
) -> None:
    store: MessageStore = await store_factory()  # 16 KiB segments
    size = store.config.mapped_file_size_commit_log
    store.hold_writes()
    results = [store.append(batch("T", [b"z" * 1000]), "T", 0) for _ in range(20)]
    store.settle()
    rolled = [r for r in results if r.wrote_offset >= size]
    assert rolled and rolled[0].wrote_offset == size
    last_in_first = max((r for r in results if r.wrote_offset < size), key=lambda r: r.wrote_offset)
    first = store.commitlog.files.files[0]
    blank_size, magic = SIZE_MAGIC.unpack_from(first.buf, last_in_first.end_offset)
    assert magic == BLANK_MAGIC_CODE and last_in_first.end_offset + blank_size == size
    await _dispatched(store)
    offsets = [
        m.queue_offset
        for start in (0, 16)
        for m in decode_records(store.get_messages("T", 0, start, max_count=16).to_bytes())
    ]
    assert offsets == list(range(20))[: len(offsets)] and len(offsets) == 20


async def test_a_failed_write_stores_nothing_and_gives_the_queue_offsets_back(
    store_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, mapped_file):
        return
    store: MessageStore = await store_factory(mapped_file_size_commit_log=64 * 1024)
    store.append(batch("T", [b"kept"]), "T", 0)
    start = store.max_phy_offset

    real = _fail_writes(monkeypatch)
    store.hold_writes()
    store.append(batch("T", [b"lost"]), "T", 0)
    store.append(batch("New", [b"lost"]), "New", 2)
    with pytest.raises(DiskFullError, match="No space left on device"):
        store.settle()
    assert store.max_phy_offset == start and store.commitlog.held_bytes == 0
    assert store.commitlog.queue_table[(b"T", 0)] == 1
    assert (b"New", 2) not in store.commitlog.queue_table
    monkeypatch.setattr(MappedFile, "append_bytes", real)
    assert store.write_refusal() is not None
    store.disk.check_space()  # the real disk has room: writes are taken again
    assert store.write_refusal() is None
    again = store.append(batch("T", [b"again"]), "T", 0)
    assert (again.wrote_offset, again.queue_offset) == (start, 1)
    await _dispatched(store)
    got = decode_records(store.get_messages("T", 0, 0, max_count=10).to_bytes())
    assert [m.body for m in got] == [b"kept", b"again"]


async def test_truncating_writes_what_is_held_first(store_factory: Any) -> None:
    store: MessageStore = await store_factory(mapped_file_size_commit_log=64 * 1024)
    kept = store.append(batch("T", [b"kept"]), "T", 0)
    store.hold_writes()
    store.append(batch("T", [b"cut"]), "T", 0)
    store.truncate_to(kept.end_offset)
    assert store.max_phy_offset == kept.end_offset
    assert store.commitlog.held_bytes == 0
    assert store.commitlog.queue_table[(b"T", 0)] == 1
