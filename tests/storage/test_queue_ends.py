"""The queue ends file: a clean stop records where every ConsumeQueue ends, and the next
clean start takes the ends from it instead of searching each queue's files; a damaged,
stale or missing file, or a crash, falls back to the search."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path

import pytest

from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import StoreCorruptError
from rocketq.storage.commitlog import QueueKey
from rocketq.storage.consume_queue import ConsumeQueue
from rocketq.storage.message_store import MessageStore
from rocketq.storage.queue_ends import FILE_NAME, QueueEnd, StoreEnds, decode, encode
from tests.storage.crash_writer import QUEUES, TOPICS, encode_batch, store_config
from tests.storage.test_crash import (
    bodies,
    check_appends_continue,
    check_store,
    expected_queues,
    wait_dispatched,
    write_messages,
)


def searched_ends(cfg: StoreConfig, commit_log_min_offset: int = 0) -> dict[QueueKey, QueueEnd]:
    """Every queue's end as the search at load finds it (files read, nothing kept)."""
    found: dict[QueueKey, QueueEnd] = {}
    for queue_dir in sorted(Path(cfg.consume_queue_dir).glob("*/*")):
        cq = ConsumeQueue(
            queue_dir.parent.name,
            int(queue_dir.name),
            queue_dir,
            cfg.mapped_file_size_consume_queue,
        )
        cq.load(None, commit_log_min_offset)
        found[(queue_dir.parent.name.encode(), cq.queue_id)] = cq.end_record()
        cq.close()
    return found


def ends_of(store: MessageStore) -> dict[QueueKey, QueueEnd]:
    return {key: cq.end_record() for key, cq in store.queues.queues.items()}


def any_mapped(store: MessageStore) -> bool:
    return any(mf.mapped for cq in store.queues.queues.values() for mf in cq.files.files)


def warnings_naming(caplog: pytest.LogCaptureFixture, path: Path) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and str(path) in r.getMessage()
    ]


async def test_a_clean_restart_takes_every_queue_end_from_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    written = await write_messages(store, random.Random("ends"), 400)
    await wait_dispatched(store)
    await store.shutdown()
    assert (root / FILE_NAME).is_file() and not (root / "abort").exists()
    searched = searched_ends(store.config)
    assert len(searched) == len(TOPICS) * QUEUES
    assert any(end.files > 1 for end in searched.values()), "queues of several files"

    caplog.set_level(logging.INFO, "rocketq.storage")
    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert f"{len(searched)} consume queues took their end from" in caplog.text
        assert not warnings_naming(caplog, root / FILE_NAME)
        assert not (root / FILE_NAME).exists(), "it vouches for the start after its stop only"
        # The same files, ends, min offsets and newest records as the search finds...
        assert ends_of(store) == searched
        # ...and not one queue file opened for it.
        assert not any_mapped(store)
        assert bodies(check_store(store)) == expected_queues(written)
        await check_appends_continue(store, written)
    finally:
        await store.shutdown()
    assert (root / FILE_NAME).is_file()


async def test_min_offsets_moved_by_retention_come_back_from_the_record(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ratio = {"value": 0.10}
    store = MessageStore(store_config(root), disk_ratio=lambda _: ratio["value"])
    await store.start()
    await write_messages(store, random.Random("retention"), 600)
    await wait_dispatched(store)
    ratio["value"] = 0.87  # over the clean-forcibly ratio: the oldest segments go
    assert store.clean().commit_log_files > 0
    ratio["value"] = 0.10
    mins = {key: cq.min_offset for key, cq in store.queues.queues.items()}
    assert any(mins.values()), "retention moved some queue's min offset"
    commit_log_min = store.min_phy_offset
    await store.shutdown()
    searched = searched_ends(store.config, commit_log_min)

    store = MessageStore(store_config(root), disk_ratio=lambda _: ratio["value"])
    await store.start()
    try:
        assert ends_of(store) == searched
        assert {key: cq.min_offset for key, cq in store.queues.queues.items()} == mins
        store.clean()  # checks min offsets against the same CommitLog min: reads nothing
        assert not any_mapped(store)
        assert {key: cq.min_offset for key, cq in store.queues.queues.items()} == mins
    finally:
        await store.shutdown()


async def test_queues_prepared_up_to_the_stop_come_back_with_their_files(tmp_path: Path) -> None:
    """The preparing thread stops before the queues are recorded: a prepared (empty) file
    is in the record, and the queue's first write after the restart uses it."""
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    await write_messages(store, random.Random("prepared"), 10)
    store.prepare_queues("Fresh", 64)
    fresh = Path(store.config.consume_queue_dir) / "Fresh"
    deadline = time.monotonic() + 5
    while not fresh.exists():  # stopped while the thread is at it
        assert time.monotonic() < deadline, "no queue was prepared"
        await asyncio.sleep(0.001)
    await store.shutdown()
    searched = searched_ends(store.config)
    prepared = [key for key in searched if key[0] == b"Fresh"]
    assert prepared, "some queue was prepared before the stop"

    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert ends_of(store) == searched
        for _, queue_id in prepared:
            blob = encode_batch("Fresh", [b"first"], ["k"]).blob
            assert (await store.put(blob, "Fresh", queue_id)).append.queue_offset == 0
        await wait_dispatched(store)
        assert all(store.max_offset_in_queue("Fresh", q) == 1 for _, q in prepared)
    finally:
        await store.shutdown()


@pytest.mark.parametrize("how", ["damaged", "cut", "stale", "missing"])
async def test_a_bad_record_falls_back_to_the_search_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    root = tmp_path / "store"
    path = root / FILE_NAME
    store = MessageStore(store_config(root))
    await store.start()
    rng = random.Random(how)
    written = await write_messages(store, rng, 300)
    await store.shutdown()
    if how == "stale":
        # Written for the CommitLog as it was before more messages came.
        old = path.read_bytes()
        store = MessageStore(store_config(root))
        await store.start()
        written += await write_messages(store, rng, 50, first_key=len(written))
        await store.shutdown()
        path.write_bytes(old)
    elif how == "damaged":
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x10
        path.write_bytes(bytes(raw))
    elif how == "cut":
        path.write_bytes(path.read_bytes()[:100])
    else:
        path.unlink()
    searched = searched_ends(store.config)

    caplog.set_level(logging.INFO, "rocketq.storage")
    store = MessageStore(store_config(root))
    await store.start()
    try:
        (warning,) = warnings_naming(caplog, path)
        assert "searching every consume queue's end" in warning
        assert "took their end from" not in caplog.text
        assert store.recovery is not None and store.recovery.fast
        assert not path.exists()
        assert ends_of(store) == searched
        assert bodies(check_store(store)) == expected_queues(written)
    finally:
        await store.shutdown()


async def test_a_crash_ignores_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the record was written but before the abort file went: the start is
    a crash's, and every queue is searched."""
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    written = await write_messages(store, random.Random("crash"), 300)
    await store.shutdown()
    (root / "abort").touch()
    assert (root / FILE_NAME).is_file()

    def refuse(self: ConsumeQueue, end: QueueEnd, commit_log_min_offset: int) -> bool:
        raise AssertionError("a recorded end was used after a crash")

    monkeypatch.setattr(ConsumeQueue, "restore", refuse)
    caplog.set_level(logging.INFO, "rocketq.storage")
    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert store.recovery is not None and not store.recovery.fast
        assert f"ignoring {root / FILE_NAME}: the store did not stop cleanly" in caplog.text
        assert not (root / FILE_NAME).exists()
        await wait_dispatched(store)
        assert bodies(check_store(store)) == expected_queues(written)
    finally:
        await store.shutdown()


async def test_a_record_that_cannot_be_written_does_not_fail_the_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    written = await write_messages(store, random.Random("unwritable"), 100)
    (root / f"{FILE_NAME}.tmp").mkdir()  # where the record is written first
    caplog.set_level(logging.INFO, "rocketq.storage")
    await store.shutdown()
    assert not (root / "abort").exists() and not (root / FILE_NAME).exists()
    (warning,) = warnings_naming(caplog, root / FILE_NAME)
    assert warning.startswith(f"cannot write {root / FILE_NAME}")
    (root / f"{FILE_NAME}.tmp").rmdir()

    caplog.clear()
    store = MessageStore(store_config(root))
    await store.start()
    try:
        (warning,) = warnings_naming(caplog, root / FILE_NAME)
        assert warning.startswith(f"no {root / FILE_NAME} after a clean stop")
        assert bodies(check_store(store)) == expected_queues(written)
    finally:
        await store.shutdown()


async def test_an_empty_store_restarts_without_a_record_or_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    await store.shutdown()
    assert not (root / FILE_NAME).exists()
    caplog.set_level(logging.INFO, "rocketq.storage")
    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    finally:
        await store.shutdown()


def test_the_file_round_trips_and_any_flipped_bit_is_found() -> None:
    stamp = StoreEnds(1280, 0, 123_456, 123_456)
    queues = {
        (b"TopicA", 0): QueueEnd(0, 1, 400, 0, 9_000),
        (b"TopicA", 3): QueueEnd(-1, 0, 0, 0, -1),
        (b"%RETRY%group", 1): QueueEnd(2560, 3, 6_400, 2_600, 123_456),
    }
    raw = encode(stamp, queues.items())
    assert decode(raw) == (stamp, queues)
    for i in range(len(raw)):
        for bit in (0x01, 0x80):
            damaged = bytearray(raw)
            damaged[i] ^= bit
            with pytest.raises(ValueError):
                decode(bytes(damaged))
    with pytest.raises(ValueError):
        decode(raw[:-1])


def test_a_recorded_end_that_does_not_fit_the_files_is_refused(tmp_path: Path) -> None:
    size = 20 * 64
    cq = ConsumeQueue("T", 0, tmp_path / "q", size)
    for bad in (
        QueueEnd(0, 1, size + 20, 0, 100),  # past its last file
        QueueEnd(10, 1, 20, 10, 100),  # a file not at a multiple of the size
        QueueEnd(0, 2, 20, 0, 100),  # the end not in the last file
        QueueEnd(0, 1, 30, 0, 100),  # not at an entry boundary
        QueueEnd(0, 1, 40, 60, 100),  # the min offset past the end
        QueueEnd(-1, 0, 20, 0, -1),  # entries without a file
    ):
        assert not cq.restore(bad, 0), bad
        assert cq.files.files == []


def test_a_recorded_file_that_is_gone_is_named_on_first_use(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path / "q", 20 * 64)
    assert cq.restore(QueueEnd(0, 1, 40, 0, 200), 0)
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 2, 200)
    with pytest.raises(StoreCorruptError, match=r"q/00000000000000000000 is missing"):
        cq.entry(0)
    cq.close()
