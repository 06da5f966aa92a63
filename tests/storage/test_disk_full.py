"""A full disk and failing writes, through an injected ``os`` layer: segments get their
blocks when they are made; no space refuses writes with code 14 and RocketMQ's text and
ends by itself; a failed write or fsync refuses writes for good, never counted as done."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.exceptions import (
    DiskFullError,
    ServiceNotAvailableError,
    StoreFailedError,
)
from rocketq.common.record import decode_records
from rocketq.storage import allocation, mapped_file
from rocketq.storage.consume_queue import ALLOCATE_STEP
from rocketq.storage.disk_state import DISK_FULL, FAILED, REFUSAL_TEXT, WRITABLE
from rocketq.storage.message_store import MessageStore
from tests.pure import ran_pure
from tests.storage.conftest import batch, small_config

SEGMENT = 64 * 1024
RATIO_PREFIX = REFUSAL_TEXT.split("[")[0]


class Disk:
    """The disk as the store measures it: a used ratio and free bytes set by the test."""

    def __init__(self) -> None:
        self.ratio = 0.10
        self.free = 1 << 40

    def used(self, _path: Path) -> float:
        return self.ratio

    def free_space(self, _path: Path) -> int:
        return self.free


@pytest.fixture
def disk() -> Disk:
    return Disk()


@pytest.fixture
async def make_store(tmp_path: Path, disk: Disk) -> AsyncIterator[Callable[..., Any]]:
    opened: list[MessageStore] = []

    async def make(**overrides: Any) -> MessageStore:
        values: dict[str, Any] = {"mapped_file_size_commit_log": SEGMENT}
        values.update(overrides)
        store = MessageStore(small_config(tmp_path / "store", **values), disk_ratio=disk.used)
        store.disk.free_space = disk.free_space
        await store.start()
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.shutdown()


async def dispatched(store: MessageStore) -> None:
    for _ in range(2000):
        if store.dispatch_behind_bytes == 0:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("dispatch did not catch up")


def bodies(store: MessageStore, topic: str, queue_id: int = 0) -> list[bytes]:
    got = store.get_messages(topic, queue_id, 0, max_count=1000)
    return [m.body for m in decode_records(got.to_bytes())]


def fill_segment(store: MessageStore, topic: str = "T") -> list[bytes]:
    """Append until the next append needs a new CommitLog segment; -> the bodies stored."""
    stored = []
    body = b"x" * 2000
    last = store.commitlog.files.last
    end = last.end_offset if last is not None else SEGMENT
    while store.commitlog.next_position_for(len(batch(topic, [body]))) < end:
        store.append(batch(topic, [body]), topic, 0)
        stored.append(body)
    return stored


def big(tag: bytes) -> bytes:
    """A body as large as fill_segment's: the first one after it starts a new segment."""
    return tag.ljust(2000, b".")


def blocks(path: Path) -> int:
    return os.stat(path).st_blocks * 512


# -- allocation --------------------------------------------------------------------------


async def test_segments_get_their_blocks_when_made(make_store: Any) -> None:
    store: MessageStore = await make_store(mapped_file_size_consume_queue=20 * 4096)
    store.append(batch("T", [b"one"]), "T", 0)
    await dispatched(store)
    segment = store.commitlog.files.files[0].path
    assert blocks(segment) >= SEGMENT  # whole, before anything reached its end
    cq = store.queues.get(b"T", 0)
    assert cq is not None
    cq_file = cq.files.files[0]
    # A ConsumeQueue a step ahead of its writer, not its whole file.
    assert ALLOCATE_STEP <= blocks(cq_file.path) < cq_file.file_size
    assert cq_file.allocated_position == ALLOCATE_STEP


async def test_a_file_system_without_fallocate_keeps_sparse_files_and_says_so_once(
    make_store: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    monkeypatch.setattr(allocation, "_said_unsupported", False)
    caplog.set_level(logging.WARNING, "rocketq.storage.allocation")
    store: MessageStore = await make_store()
    for _ in range(3):
        fill_segment(store)
        store.append(batch("T", [big(b"next")]), "T", 0)
    assert len(store.commitlog.files.files) >= 3
    said = [r for r in caplog.records if "cannot allocate blocks ahead" in r.message]
    assert len(said) == 1
    assert store.write_refusal() is None


async def test_a_segment_without_space_is_removed_and_its_append_refused(
    make_store: Any, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: MessageStore = await make_store()
    kept = fill_segment(store)
    await dispatched(store)
    before = dict(store.commitlog.queue_table)
    real = os.posix_fallocate

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(DiskFullError) as refused:
        store.append(batch("T", [big(b"refused")]), "T", 0)
    assert str(refused.value).startswith(RATIO_PREFIX)
    assert refused.value.code == 14 and refused.value.retriable
    assert len(store.commitlog.files.files) == 1  # the new segment was removed again
    assert sorted(os.listdir(store.commitlog.files.directory)) == ["0" * 20]
    assert store.commitlog.queue_table == before
    assert store.disk.state == DISK_FULL
    # Refused from now on, without trying the disk again; reads go on.
    with pytest.raises(DiskFullError):
        store.append(batch("T", [big(b"again")]), "T", 0)
    assert bodies(store, "T") == kept
    # Space comes back: the timer's check takes writes again, by itself.
    monkeypatch.setattr(os, "posix_fallocate", real)
    store.clean()
    assert store.write_refusal() is None
    store.append(batch("T", [big(b"after")]), "T", 0)
    await dispatched(store)
    assert bodies(store, "T") == [*kept, big(b"after")]


async def test_free_space_is_checked_before_a_segment_not_only_on_the_timer(
    make_store: Any, disk: Disk
) -> None:
    store: MessageStore = await make_store()
    kept = fill_segment(store)
    changes: list[str | None] = []
    store.add_refusal_listener(changes.append)
    disk.ratio = 0.95  # the timer has not run since
    with pytest.raises(DiskFullError, match=r"CL:  0\.95 CQ:  0\.95 INDEX:  0\.95"):
        store.append(batch("T", [big(b"refused")]), "T", 0)
    assert store.disk.state == DISK_FULL and store.disk.ratio == 0.95
    disk.ratio = 0.50
    store.clean()
    store.append(batch("T", [big(b"later")]), "T", 0)
    await asyncio.sleep(0)  # listeners are told on the loop
    assert len(changes) == 2 and changes[0] and "disk_space_warning_level_ratio" in changes[0]
    assert changes[1] is None
    await dispatched(store)
    assert bodies(store, "T") == [*kept, big(b"later")]


async def test_too_little_free_space_for_the_next_segment_is_full(
    make_store: Any, disk: Disk
) -> None:
    store: MessageStore = await make_store()
    fill_segment(store)
    disk.free = SEGMENT - 1
    with pytest.raises(DiskFullError, match="less than the 65536 a new segment takes"):
        store.append(batch("T", [big(b"refused")]), "T", 0)
    store.clean()  # the ratio is fine, but the segment still does not fit
    assert store.disk.state == DISK_FULL
    disk.free = 10 * SEGMENT
    store.clean()
    assert store.disk.state == WRITABLE


# -- ENOSPC and EIO in a write -----------------------------------------------------------


async def test_a_short_write_then_no_space_stores_nothing_of_the_batch(
    make_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: MessageStore = await make_store()
    first = store.append(batch("T", [b"kept"]), "T", 0)
    segment_fd = store.commitlog.files.files[0]._fd
    real = os.pwrite
    calls: list[int] = []

    def short_then_full(fd: int, data: Any, offset: int) -> int:
        if fd != segment_fd:
            return real(fd, data, offset)
        calls.append(len(data))
        if len(calls) == 1:
            return int(real(fd, bytes(memoryview(data)[:100]), offset))
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return int(real(fd, data, offset))

    monkeypatch.setattr(os, "pwrite", short_then_full)
    store.hold_writes()
    store.append(batch("T", [b"lost-1", b"lost-2"]), "T", 0)
    store.append(batch("U", [b"lost-3"]), "U", 1)
    with pytest.raises(DiskFullError, match="No space left on device"):
        store.settle()
    assert store.max_phy_offset == first.end_offset
    assert store.commitlog.queue_table[(b"T", 0)] == 1
    assert (b"U", 1) not in store.commitlog.queue_table
    # The 100 bytes that went in past the write position were zeroed again.
    assert bytes(store.commitlog.files.files[0].buf[first.end_offset : first.end_offset + 100]) == (
        bytes(100)
    )
    monkeypatch.setattr(os, "pwrite", real)
    store.clean()
    again = store.append(batch("T", [b"again"]), "T", 0)
    assert (again.wrote_offset, again.queue_offset) == (first.end_offset, 1)
    await dispatched(store)
    assert bodies(store, "T") == [b"kept", b"again"]


async def test_a_write_error_refuses_writes_until_restart(
    make_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: MessageStore = await make_store()
    store.append(batch("T", [b"kept"]), "T", 0)
    real = os.pwrite

    def eio(fd: int, data: Any, offset: int) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "pwrite", eio)
    with pytest.raises(StoreFailedError, match="Input/output error") as refused:
        store.append(batch("T", [b"lost"]), "T", 0)
    assert str(refused.value).startswith(RATIO_PREFIX)
    monkeypatch.setattr(os, "pwrite", real)
    store.clean()  # plenty of space: no matter
    assert store.disk.state == FAILED
    with pytest.raises(StoreFailedError):
        store.append(batch("T", [b"still"]), "T", 0)
    await dispatched(store)
    assert bodies(store, "T") == [b"kept"]


async def test_an_fsync_error_fails_the_waiting_sends_and_the_flushed_offset_stays(
    make_store: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store: MessageStore = await make_store(flush_disk_type="SYNC_FLUSH")
    ok = await store.put(batch("T", [b"durable"]), "T", 0)
    flushed = store.flusher.flushed[0]
    assert flushed == ok.append.end_offset
    real = os.fdatasync
    calls = []

    def eio(fd: int) -> None:
        calls.append(fd)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", eio)
    with pytest.raises(StoreFailedError, match="flushing the CommitLog failed"):
        await store.put(batch("T", [b"not durable"]), "T", 0)
    monkeypatch.setattr(os, "fdatasync", real)
    assert store.flusher.flushed[0] == flushed
    assert store.disk.state == FAILED
    assert len(calls) == 1  # never tried again as if it could succeed now
    with pytest.raises(ServiceNotAvailableError):
        await store.put(batch("T", [b"refused"]), "T", 0)
    await store.shutdown()
    # No clean stop is claimed: the next start recovers from what is on disk.
    assert Path(store.config.abort_path).exists()


async def test_a_consume_queue_msync_error_fails_the_store(
    make_store: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, mapped_file):
        return
    store: MessageStore = await make_store()
    store.append(batch("T", [b"one"]), "T", 0)
    await dispatched(store)

    def eio(address: int, length: int) -> None:
        raise OSError(errno.EIO, "msync failed: Input/output error")

    monkeypatch.setattr(mapped_file, "msync", eio)
    monkeypatch.setattr(mapped_file, "HAS_SYNCFS", False)
    monkeypatch.setattr("rocketq.storage.dispatch.HAS_SYNCFS", False)
    before = store.logics_flusher.logics_flushed_offset
    with pytest.raises(OSError):
        store.flush_logics(thorough=True)
    store.logics_flusher.fail(OSError(errno.EIO, "msync failed"))
    assert store.disk.state == FAILED
    assert store.logics_flusher.logics_flushed_offset == before
    store.flush_logics(thorough=True)  # not tried again
    with pytest.raises(StoreFailedError):
        store.append(batch("T", [b"two"]), "T", 0)


async def test_the_warmer_out_of_space_counts_the_disk_full(
    make_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: MessageStore = await make_store(warm_mapped_file_ahead=32 * 1024)
    store.append(batch("T", [b"one"]), "T", 0)

    def no_space(self: mapped_file.MappedFile, position: int, zeros: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(mapped_file.MappedFile, "warm", no_space)
    store.warmer.halt()
    store.warmer._given_up = None
    store.commitlog.files.files[-1].warmed_position = 0
    store.warmer.start()
    for _ in range(500):
        if store.disk.state == DISK_FULL:
            break
        await asyncio.sleep(0.01)
    assert store.disk.state == DISK_FULL
    assert store.warmer._thread is not None and store.warmer._thread.is_alive()


async def test_dispatch_without_space_waits_and_loses_no_entry(
    make_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: MessageStore = await make_store(
        mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 4096
    )
    store.append(batch("T", [b"first"]), "T", 0)
    await dispatched(store)
    real = os.posix_fallocate

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    # Past what the queue's first step allocated: its next entry needs blocks.
    count = ALLOCATE_STEP // 20
    store.append(batch("T", [b"m%d" % i for i in range(count)]), "T", 0)
    for _ in range(500):
        if store.disk.state == DISK_FULL:
            break
        await asyncio.sleep(0.01)
    assert store.disk.state == DISK_FULL
    assert store.dispatch_behind_bytes > 0
    monkeypatch.setattr(os, "posix_fallocate", real)
    store.clean()
    assert store.write_refusal() is None
    for _ in range(500):
        if store.dispatch_behind_bytes == 0:
            break
        await asyncio.sleep(0.01)
    assert bodies(store, "T")[:2] == [b"first", b"m0"]
    assert store.max_offset_in_queue("T", 0) == count + 1
