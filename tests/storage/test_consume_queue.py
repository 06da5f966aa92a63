"""ConsumeQueue writes: a run of entries is written in one pass when it continues the queue
within its last file, and otherwise entry by entry, with the same bytes either way; the
files keep no descriptor and are mapped for random access; the flush policy of the logics
flush thread (least pages, thorough rounds, only the queues written since)."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from rocketq.storage import consume_queue, dispatch, mapped_file
from rocketq.storage.consume_queue import CQ_UNIT_SIZE, ENTRY, ConsumeQueue, CQEntry
from rocketq.storage.dispatch import ConsumeQueueTable
from rocketq.storage.mapped_file import MappedFileQueue, offset_name
from tests.pure import ran_pure

UNITS = 4  # entries per file


def queue(path: Path) -> ConsumeQueue:
    cq = ConsumeQueue("T", 0, path, UNITS * 20)
    cq.load()
    return cq


def entries(first: int, n: int) -> list[CQEntry]:
    return [(q * 100, 100, q % 7, q) for q in range(first, first + n)]


def test_put_many_matches_put_across_files_and_repeats(tmp_path: Path) -> None:
    runs = [entries(0, 3), entries(3, 3), entries(6, 1), entries(2, 5), entries(7, 4)]
    one, many = queue(tmp_path / "one"), queue(tmp_path / "many")
    new_one = [sum(one.put(*e) for e in run) for run in runs]
    new_many = [many.put_many(run) for run in runs]
    # Entries 2-6 again (re-dispatch): nothing new; 3-5 straddles a file boundary.
    assert new_many == new_one == [3, 3, 1, 0, 4]
    assert many.max_offset == one.max_offset == 11
    assert [many.entry(i) for i in range(11)] == [one.entry(i) for i in range(11)]
    assert many.entry(5) == (500, 100, 5)
    one_files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert sorted(p.name for p in (tmp_path / "many").iterdir()) == one_files
    for name in one_files:
        assert (tmp_path / "many" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    one.close()
    many.close()


def test_put_many_after_a_gap_fills_it_as_put_does(tmp_path: Path) -> None:
    cq = queue(tmp_path / "q")
    assert cq.put_many(entries(0, 2)) == 2
    assert cq.put_many(entries(3, 2)) == 2  # entry 2 never came: a blank fills it
    assert cq.entry(1) == (100, 100, 1) and cq.entry(3) == (300, 100, 3)
    assert cq.max_offset == 5
    cq.close()


# -- files without descriptors, mapped for random access ----------------------------------


def reference_bytes(runs: list[list[CQEntry]], units: int) -> dict[str, bytes]:
    """What the files must hold, written the plain way: every entry packed at n * 20 into
    zeroed files of ``units`` entries, named by their first entry's byte offset."""
    files: dict[int, bytearray] = {}
    size = units * CQ_UNIT_SIZE
    done: set[int] = set()
    for run in runs:
        for offset, size_, code, q in run:
            if q in done:
                continue
            done.add(q)
            at = q * CQ_UNIT_SIZE
            buf = files.setdefault(at - at % size, bytearray(size))
            ENTRY.pack_into(buf, at % size, offset, size_, code)
    return {offset_name(start): bytes(buf) for start, buf in files.items()}


def test_files_written_through_the_mapping_match_plain_writes(tmp_path: Path) -> None:
    """The dispatch path (runs of entries into fd-less mappings, flushed by page-range
    msync as the flush thread does, with repeats from a re-dispatch) leaves the same bytes
    on disk as packing each entry at n * 20 into plain files; after a reload too."""
    dirty: list[ConsumeQueue] = []
    runs = [entries(0, 3), entries(3, 3), entries(6, 1), entries(2, 5), entries(7, 4)]
    many = ConsumeQueue(
        "T", 0, tmp_path / "q", UNITS * 20, on_dirty=lambda cq, since, due: dirty.append(cq)
    )
    many.load()
    for run in runs:
        many.put_many(run)
        many.flush()  # msync of the dirty page range, between runs
    assert dirty, "writes tell the owner the queue is dirty"
    many.close()
    expected = reference_bytes(runs, UNITS)
    on_disk = {p.name: p.read_bytes() for p in (tmp_path / "q").iterdir()}
    assert on_disk == expected
    again = queue(tmp_path / "q")
    assert again.max_offset == 11
    assert [again.entry(i) for i in range(11)] == [(q * 100, 100, q % 7) for q in range(11)]
    again.close()


def test_a_store_sized_queue_matches_plain_writes_across_pages(tmp_path: Path) -> None:
    """Entries crossing page boundaries, flushed partway through a page (msync from the
    flushed position's page on), are on disk as written."""
    units = 1000  # 20,000 bytes: five pages
    cq = ConsumeQueue("T", 1, tmp_path / "q", units * CQ_UNIT_SIZE)
    cq.load()
    runs = [entries(first, 7) for first in range(0, 1400, 7)]
    for i, run in enumerate(runs):
        cq.put_many(run)
        if i % 9 == 0:
            cq.flush()
    cq.flush()
    assert all(mf.flushed_position == mf.wrote_position for mf in cq.files.files)
    cq.close()
    expected = reference_bytes(runs, units)
    assert {p.name: p.read_bytes() for p in (tmp_path / "q").iterdir()} == expected


def _maps_of(path: Path) -> list[str]:
    """The /proc/self/smaps blocks (header and fields) of the mappings of ``path``."""
    blocks: list[list[str]] = []
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    return ["\n".join(b) for b in blocks if b[0].endswith(str(path))]


def _vm_flags(block: str) -> set[str]:
    for line in block.splitlines():
        if line.startswith("VmFlags:"):
            return set(line.split()[1:])
    return set()


def _fds_on(path: Path) -> int:
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if Path(os.readlink(fd)) == path:
                count += 1
        except OSError:
            continue
    return count


def test_queue_files_hold_no_descriptor_and_are_advised_random(tmp_path: Path) -> None:
    """ConsumeQueue mappings keep no file descriptor and carry MADV_RANDOM (smaps flag
    "rr") from the start; CommitLog segments keep theirs and no advice. A loaded queue
    whose data is small is searched without a mapping and mapped on first use."""
    cq = queue(tmp_path / "q")
    cq.put_many(entries(0, 2))
    path = cq.files.files[0].path
    assert _fds_on(path) == 0
    (block,) = _maps_of(path)
    assert "rr" in _vm_flags(block)
    cq.close()
    reopened = queue(tmp_path / "q")
    assert reopened.max_offset == 2
    assert _maps_of(path) == [] and _fds_on(path) == 0
    assert reopened.entry(1) == (100, 100, 1)  # the first read maps the file, advised
    (block,) = _maps_of(path)
    assert "rr" in _vm_flags(block) and _fds_on(path) == 0
    reopened.close()

    log = MappedFileQueue(tmp_path / "commitlog", 64 * 1024)
    segment = log.create(0)
    assert _fds_on(segment.path) >= 1  # ours for pwrite (and the mmap object's copy)
    (block,) = _maps_of(segment.path)
    assert "rr" not in _vm_flags(block)
    log.close()


def test_load_marks_entries_past_the_durable_offset_unflushed(tmp_path: Path) -> None:
    """After a crash, entries pointing at or past the checkpoint's logics offset may not be
    on disk: load counts them unflushed and reports the queue dirty."""
    cq = queue(tmp_path / "q")
    cq.put_many(entries(0, 10))  # CommitLog offsets 0, 100, ..., 900
    cq.flush()
    cq.close()
    dirty: list[ConsumeQueue] = []
    again = ConsumeQueue(
        "T", 0, tmp_path / "q", UNITS * 20, on_dirty=lambda cq, since, due: dirty.append(cq)
    )
    again.load(durable_below=650)
    assert dirty == [again]
    assert again.first_unflushed_offset() == 700
    # Files wholly below stay flushed; the file holding 700 is flushed up to it.
    assert [(mf.flushed_position, mf.wrote_position) for mf in again.files.files] == [
        (80, 80),
        (60, 80),
        (0, 40),
    ]
    again.flush()
    assert again.first_unflushed_offset() is None
    again.close()
    clean = ConsumeQueue(
        "T", 0, tmp_path / "q", UNITS * 20, on_dirty=lambda cq, since, due: dirty.append(cq)
    )
    clean.load()  # a clean shutdown: everything was flushed
    assert clean.first_unflushed_offset() is None
    clean.close()


# -- the flush policy (RocketMQ's FlushConsumeQueueService) --------------------------------


def table_with(tmp_path: Path, queues: int, units: int = 1000) -> ConsumeQueueTable:
    table = ConsumeQueueTable(tmp_path / "cq", units * CQ_UNIT_SIZE)
    for q in range(queues):
        table.get_or_create(b"T", q)
    return table


def test_a_round_flushes_queues_with_least_pages_and_keeps_the_rest_dirty(
    tmp_path: Path,
) -> None:
    table = table_with(tmp_path, 3)
    big, small, idle = (table.get_or_create(b"T", q) for q in range(3))
    # big: 500 entries (10,000 bytes, 2 dirty pages); small: 10 entries (0 full pages).
    big.put_many([(1000 + i * 10, 10, 0, i) for i in range(500)])
    small.put_many([(50 + i * 10, 10, 0, i) for i in range(10)])
    assert table.dirty_count == 2  # idle was never written
    durable = table.flush(least_pages=2, built_offset=9000)
    assert big.first_unflushed_offset() is None
    assert small.first_unflushed_offset() == 50  # under 2 pages: waits
    assert durable == 50  # below the oldest entry still unflushed
    assert table.dirty_count == 1
    # A thorough round flushes every dirty queue: all is durable up to what was built.
    assert table.flush(least_pages=0, built_offset=9000) == 9000
    assert small.first_unflushed_offset() is None
    assert table.dirty_count == 0
    assert idle.files.files == []  # never written, never created
    table.close()


def test_a_full_file_is_flushed_whatever_its_pages(tmp_path: Path) -> None:
    table = table_with(tmp_path, 2, units=4)  # 80-byte files: never 2 dirty pages
    full, part = table.get_or_create(b"T", 0), table.get_or_create(b"T", 1)
    full.put_many(entries(0, 4))  # fills its first file
    part.put_many([(1000 + q, 1, 0, q) for q in range(3)])
    assert table.flush(least_pages=2, built_offset=10_000) == 1000
    assert full.first_unflushed_offset() is None
    assert part.first_unflushed_offset() == 1000
    table.close()


def test_a_round_visits_only_the_queues_written_since_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """O(queues flushed): with 2,000 queues and 3 written, a thorough round flushes 3 and
    looks at no other; a periodic round with none due flushes and reads none, and still
    knows the oldest unflushed entry (from what the writes reported)."""
    if ran_pure(request, consume_queue):
        return
    table = table_with(tmp_path, 2000)
    for q in (5, 700, 1999):
        table.get_or_create(b"T", q).put_many([(q * 10, 10, 0, 0)])
    seen: list[tuple[str, int]] = []
    flush, first = ConsumeQueue.flush, ConsumeQueue.first_unflushed_offset

    def counting_flush(self: ConsumeQueue) -> None:
        seen.append(("flush", self.queue_id))
        flush(self)

    def counting_first(self: ConsumeQueue) -> int | None:
        seen.append(("first", self.queue_id))
        return first(self)

    monkeypatch.setattr(ConsumeQueue, "flush", counting_flush)
    monkeypatch.setattr(ConsumeQueue, "first_unflushed_offset", counting_first)
    assert table.flush(least_pages=2, built_offset=100_000) == 50  # none due: queue 5's entry
    assert seen == []
    table.flush(least_pages=0, built_offset=100_000)
    assert sorted(q for what, q in seen if what == "flush") == [5, 700, 1999]
    seen.clear()
    assert table.flush(least_pages=0, built_offset=100_000) == 100_000
    assert seen == []  # nothing written since
    table.get_or_create(b"T", 5).put_many([(60, 10, 0, 1)])
    table.flush(least_pages=0, built_offset=100_000)
    assert {q for _, q in seen} == {5}
    table.close()


def test_the_writes_say_when_a_queue_is_due(tmp_path: Path) -> None:
    """A write reports the first CommitLog offset it left unflushed and whether the queue
    has ``flush_least_pages`` dirty pages (or a full file) now."""
    calls: list[tuple[int, bool]] = []
    cq = ConsumeQueue(
        "T",
        0,
        tmp_path / "q",
        1000 * CQ_UNIT_SIZE,
        on_dirty=lambda _, since, due: calls.append((since, due)),
        flush_least_pages=2,
    )
    cq.load()
    cq.put_many([(i * 10, 10, 0, i) for i in range(300)])  # 6,000 bytes: one full page
    cq.put_many([(3000 + i * 10, 10, 0, 300 + i) for i in range(150)])  # 9,000: two
    cq.put(5000, 10, 0, 450)
    assert calls == [(0, False), (3000, True), (5000, True)]
    cq.flush()
    calls.clear()
    cq.put_many([(6000, 10, 0, 451)])  # one entry after a flush: not due
    assert calls == [(6000, False)]
    cq.close()


def test_a_cut_lowers_what_the_dirty_queues_claim(tmp_path: Path) -> None:
    """After the CommitLog is cut back, entries written anew point below what a dirty
    queue first reported; the durable offset must not pass the cut."""
    table = table_with(tmp_path, 1)
    cq = table.get_or_create(b"T", 0)
    cq.put_many([(1000, 10, 0, 0), (1010, 10, 0, 1)])
    assert table.flush(least_pages=2, built_offset=5000) == 1000
    cq.truncate_dirty(500)
    table.cut(500)
    cq.put_many([(600, 10, 0, 0)])  # the queue is already marked dirty
    assert table.flush(least_pages=2, built_offset=5000) == 500
    table.close()


def test_a_thorough_round_of_many_queues_is_one_syncfs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Past SYNCFS_MIN_QUEUES dirty queues a thorough round makes them durable with one
    syncfs, no msync; it claims what was written before it, as msync would. A periodic
    round (least pages) keeps one msync per queue that needs it."""
    if ran_pure(request, mapped_file):
        return
    table = table_with(tmp_path, 8, units=4)
    queues = [table.get_or_create(b"T", q) for q in range(8)]
    for q, cq in enumerate(queues):
        cq.put_many([(100 * q + i, 1, 0, i) for i in range(6)])  # a full file and 2 more
    syncs: list[Path] = []

    def counting_syncfs(directory: Path) -> None:
        syncs.append(directory)
        mapped_file.syncfs(directory)

    def no_msync(address: int, length: int) -> None:
        raise AssertionError("msync in a round done by syncfs")

    monkeypatch.setattr(dispatch, "SYNCFS_MIN_QUEUES", 4)
    monkeypatch.setattr(dispatch, "syncfs", counting_syncfs)
    # A full file unflushed: each queue is flushed, by msync.
    assert table.flush(least_pages=2, built_offset=10_000) == 10_000
    for q, cq in enumerate(queues):
        cq.put_many([(100 * q + 6, 1, 0, 6)])
    # Under 2 dirty pages: nothing is flushed, the oldest unflushed entry bounds the offset.
    assert table.flush(least_pages=2, built_offset=10_000) == 6
    assert syncs == [] and table.dirty_count == 8
    monkeypatch.setattr(mapped_file, "msync", no_msync)
    assert table.flush(least_pages=0, built_offset=10_000) == 10_000
    assert syncs == [tmp_path / "cq"]
    assert table.dirty_count == 0
    for cq in queues:
        assert [(mf.flushed_position, mf.wrote_position) for mf in cq.files.files] == [
            (80, 80),
            (60, 60),
        ]
    table.close()


@pytest.mark.parametrize("flushed", [True, False])
def test_the_search_for_a_queue_end_reads_only_the_data_of_a_sparse_file(
    tmp_path: Path, flushed: bool
) -> None:
    """In a store-sized (sparse) queue file the search is bounded by the file's first hole
    and, when the data is small, reads it without mapping the file; it finds the end the
    whole-file search finds, whether the pages reached the disk or are still dirty."""
    units = 300_000  # 6,000,000 bytes, as mapped_file_size_consume_queue
    for n in (1, 204, 205, 206, 3276, 3300):  # around a page; below and past the read limit
        path = tmp_path / f"q{n}"
        cq = ConsumeQueue("T", 0, path, units * CQ_UNIT_SIZE)
        cq.load()
        cq.put_many(entries(0, n))
        if flushed:
            cq.flush()
        cq.close()
        again = queue_of(path, units)
        assert again.max_offset == n and again.max_physic_offset == n * 100
        (mf,) = again.files.files
        assert mf.mapped == (n * CQ_UNIT_SIZE > 64 * 1024)
        assert again.entry(n - 1) == ((n - 1) * 100, 100, (n - 1) % 7)
        again.close()


@pytest.mark.parametrize(
    ("layout", "expected_end"),
    [
        ("data, then a hole to the end", 4096),  # the search stops at the hole
        ("data past the hole", 300_000 * CQ_UNIT_SIZE),  # a stray entry: the whole file
        ("no SEEK_HOLE", 300_000 * CQ_UNIT_SIZE),  # the file system cannot tell
    ],
)
def test_the_data_end_follows_what_the_file_system_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, expected_end: int
) -> None:
    """``read_data`` bounds the search by the first hole only when no data follows it;
    the file system's answers are simulated, so every case runs on any file system."""
    size = 300_000 * CQ_UNIT_SIZE
    cq = ConsumeQueue("T", 0, tmp_path / "q", size)
    cq.load()
    cq.put_many(entries(0, 10))
    cq.flush()
    (mf,) = cq.files.files

    def lseek(fd: int, pos: int, how: int) -> int:
        if layout == "no SEEK_HOLE":
            raise OSError(errno.EINVAL, "not supported")
        if how == os.SEEK_HOLE:
            return 4096
        if how == os.SEEK_DATA and layout == "data past the hole":
            return 200_000 * CQ_UNIT_SIZE
        raise OSError(errno.ENXIO, "no data past the offset")

    monkeypatch.setattr(mapped_file.os, "lseek", lseek)
    end, data = mf.read_data(64 * 1024, tail=CQ_UNIT_SIZE)
    assert end == expected_end
    if expected_end == 4096:
        assert data is not None and len(data) == 4096 + CQ_UNIT_SIZE
        assert data[: 10 * CQ_UNIT_SIZE] == bytes(mf.buf[: 10 * CQ_UNIT_SIZE])
    else:
        assert data is None  # too much to read: the file is mapped instead
    cq.close()


def queue_of(path: Path, units: int) -> ConsumeQueue:
    cq = ConsumeQueue("T", 0, path, units * CQ_UNIT_SIZE)
    cq.load()
    return cq


def test_entries_an_earlier_process_left_unflushed_are_msynced(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Loaded after a crash, a file is searched without being mapped; its entries past
    the durable offset are still written to disk by the next flush (mapped for it)."""
    if ran_pure(request, mapped_file):
        return
    cq = queue(tmp_path / "q")
    cq.put_many(entries(0, 3))  # CommitLog offsets 0, 100, 200; never flushed
    cq.close()
    again = ConsumeQueue("T", 0, tmp_path / "q", UNITS * 20)
    again.load(durable_below=100)
    (mf,) = again.files.files
    assert not mf.mapped and (mf.flushed_position, mf.wrote_position) == (20, 60)
    synced: list[int] = []
    real = mapped_file.msync

    def counting(address: int, length: int) -> None:
        synced.append(length)
        real(address, length)

    monkeypatch.setattr(mapped_file, "msync", counting)
    again.flush()
    assert synced == [60] and mf.flushed_position == 60
    again.close()
