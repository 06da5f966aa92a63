from __future__ import annotations

import os
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import StoreCorruptError
from rocketq.storage import index_file
from rocketq.storage.index_file import IndexFile, IndexService, index_file_size, key_hash, time_name
from tests.pure import ran_pure

SLOTS = 8
ENTRIES = 32
T0 = 1_700_000_000_000  # ms
ENTRIES_POS = 40 + SLOTS * 4


class FakeClock:
    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def entry_pos(n: int) -> int:
    return ENTRIES_POS + n * 20


def make(tmp_path: Path, slots: int = SLOTS, entries: int = ENTRIES) -> IndexFile:
    return IndexFile(tmp_path / "20240101000000000", slots, entries, create=True)


# IndexFile


def test_new_file_is_sized_and_has_an_empty_header(tmp_path: Path) -> None:
    f = make(tmp_path)
    assert f.path.stat().st_size == 40 + 8 * 4 + 32 * 20 == index_file_size(SLOTS, ENTRIES)
    assert f.path.read_bytes()[:40] == struct.pack(">qqqqii", 0, 0, 0, 0, 0, 1)
    assert (f.index_count, f.is_full) == (1, False)
    f.close()


def test_golden_bytes_after_three_puts(tmp_path: Path) -> None:
    f = make(tmp_path)
    assert f.put(5, 100, T0)  # slot 5
    assert f.put(13, 200, T0 + 2_500)  # slot 5 too: chains to entry 1
    assert f.put(2, 300, T0 + 3_000)  # slot 2
    f.flush()
    data = f.path.read_bytes()
    # header: begin/end timestamp, begin/end offset, 2 slots used, next entry is 4
    assert data[:40] == bytes.fromhex(
        "0000018bcfe56800 0000018bcfe573b8 0000000000000064 000000000000012c 00000002 00000004"
    )
    assert struct.unpack_from(">qqqqii", data, 0) == (T0, T0 + 3_000, 100, 300, 2, 4)
    slots = struct.unpack_from(">8i", data, 40)
    assert slots == (0, 0, 3, 0, 0, 2, 0, 0)
    assert data[entry_pos(0) : entry_pos(1)] == bytes(20)  # entry 0 is never used
    assert data[entry_pos(1) : entry_pos(2)] == bytes.fromhex(
        "00000005 0000000000000064 00000000 00000000"
    )
    assert struct.unpack_from(">iqii", data, entry_pos(2)) == (13, 200, 2, 1)
    assert struct.unpack_from(">iqii", data, entry_pos(3)) == (2, 300, 3, 0)
    assert data[entry_pos(4) :] == bytes(len(data) - entry_pos(4))
    assert (f.begin_timestamp, f.end_timestamp) == (T0, T0 + 3_000)
    assert (f.begin_phy_offset, f.end_phy_offset, f.index_count) == (100, 300, 4)
    f.close()


def test_time_diff_is_clamped(tmp_path: Path) -> None:
    f = make(tmp_path)
    f.put(1, 0, T0)
    f.put(1, 1, T0 - 5_000)  # clock went back: 0
    f.put(1, 2, T0 + 2**31 * 1000 + 5_000)  # too far ahead: 2**31 - 1
    diffs = [struct.unpack_from(">iqii", f.path.read_bytes(), entry_pos(n))[2] for n in (1, 2, 3)]
    assert diffs == [0, 0, 2**31 - 1]
    f.close()


def test_chain_with_collisions_returns_only_matching_hash_newest_first(tmp_path: Path) -> None:
    f = make(tmp_path)
    for off in range(12):
        f.put((1, 9, 17)[off % 3], off, T0 + off)  # one slot, three hashes
    assert f.select(9, 100, 0, 2**62) == [10, 7, 4, 1]
    assert f.select(1, 100, 0, 2**62) == [9, 6, 3, 0]
    assert f.select(25, 100, 0, 2**62) == []  # same slot, no entry
    assert f.select(2, 100, 0, 2**62) == []  # empty slot
    f.close()


def test_select_filters_by_time_at_second_granularity(tmp_path: Path) -> None:
    f = make(tmp_path)
    f.put(7, 0, T0)
    for sec in range(1, 6):
        f.put(7, sec, T0 + sec * 1000 + 999)  # stored as T0 + sec s
    assert f.select(7, 100, T0 + 2_000, T0 + 4_000) == [4, 3, 2]
    assert f.select(7, 100, T0 + 2_001, T0 + 2_999) == []
    assert f.select(7, 100, T0 + 10_000, T0 + 20_000) == []
    f.close()


def test_select_keeps_walking_past_older_entries(tmp_path: Path) -> None:
    f = make(tmp_path)
    f.put(3, 0, T0)
    f.put(3, 1, T0 + 9_000)
    f.put(3, 2, T0 + 1_000)  # older than begin_ms below (the clock stepped back)
    f.put(3, 3, T0 + 9_000)
    # RocketMQ stops at entry 2 and misses offset 1.
    assert f.select(3, 100, T0 + 8_000, T0 + 10_000) == [3, 1]
    f.close()


def test_select_stops_at_max_num(tmp_path: Path) -> None:
    f = make(tmp_path)
    for off in range(10):
        f.put(4, off, T0)
    assert f.select(4, 3, 0, 2**62) == [9, 8, 7]
    assert f.select(4, 0, 0, 2**62) == []
    f.close()


def test_full_file_refuses_puts(tmp_path: Path) -> None:
    f = make(tmp_path, entries=4)
    assert [f.put(1, off, T0) for off in range(4)] == [True, True, True, False]
    assert f.is_full and f.index_count == 4
    assert f.select(1, 100, 0, 2**62) == [2, 1, 0]
    f.close()


def test_damaged_slot_and_chain_do_not_loop(tmp_path: Path) -> None:
    f = make(tmp_path)
    f.put(6, 10, T0)
    f.put(6, 11, T0)
    with open(f.path, "r+b") as raw:  # slot 6 points past the last entry (torn write)
        raw.seek(40 + 6 * 4)
        raw.write(struct.pack(">i", 99))
    assert f.select(6, 100, 0, 2**62) == []
    f.put(6, 12, T0)  # the bad slot value is not chained to
    assert struct.unpack_from(">iqii", f.path.read_bytes(), entry_pos(3))[3] == 0
    assert f.select(6, 100, 0, 2**62) == [12]
    with open(f.path, "r+b") as raw:  # entry 2 chains to itself
        raw.seek(40 + 6 * 4)
        raw.write(struct.pack(">i", 2))
        raw.seek(entry_pos(2) + 16)
        raw.write(struct.pack(">i", 2))
    assert f.select(6, 100, 0, 2**62) == [11]
    f.close()


def test_reopen_gives_the_same_answers(tmp_path: Path) -> None:
    f = make(tmp_path)
    for off in range(20):
        f.put(off % 5, off * 10, T0 + off * 700)
    before = [f.select(h, 100, T0 + 2_000, T0 + 9_000) for h in range(5)]
    header = (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset)
    f.close()
    f.close()  # idempotent
    g = IndexFile(f.path, SLOTS, ENTRIES, create=False)
    assert (g.begin_timestamp, g.end_timestamp, g.begin_phy_offset, g.end_phy_offset) == header
    assert g.index_count == 21
    assert [g.select(h, 100, T0 + 2_000, T0 + 9_000) for h in range(5)] == before
    assert g.put(0, 999, T0 + 20_000)
    g.destroy()
    assert not f.path.exists()


def test_wrong_size_raises_store_corrupt_naming_the_config_keys(tmp_path: Path) -> None:
    make(tmp_path).close()
    path = tmp_path / "20240101000000000"
    with pytest.raises(StoreCorruptError) as err:
        IndexFile(path, SLOTS, 64, create=False)
    msg = str(err.value)
    for part in (str(path), "712 bytes", "1352 bytes", "max_hash_slot_num=8", "max_index_num=64"):
        assert part in msg


def test_impossible_entry_count_raises_store_corrupt(tmp_path: Path) -> None:
    f = make(tmp_path)
    f.close()
    path = f.path
    with open(path, "r+b") as raw:
        raw.seek(36)
        raw.write(struct.pack(">i", ENTRIES + 1))
    with pytest.raises(StoreCorruptError, match="holds 33 entries but max_index_num=32"):
        IndexFile(path, SLOTS, ENTRIES, create=False)


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    make(tmp_path).close()
    with pytest.raises(FileExistsError):
        make(tmp_path)


def test_bad_sizes_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_index_num"):
        IndexFile(tmp_path / "x", SLOTS, 1, create=True)
    with pytest.raises(ValueError, match="max_hash_slot_num"):
        IndexService(tmp_path, 0, ENTRIES)


# IndexService


def test_key_hash_is_crc32_of_topic_hash_key() -> None:
    assert key_hash(b"T", b"k") == zlib.crc32(b"T#k") & 0x7FFFFFFF
    assert key_hash(b"T", b"k") != key_hash(b"U", b"k")


def test_time_name_is_local_yyyymmddhhmmsssss() -> None:
    secs = time.mktime((2024, 3, 5, 6, 7, 8, 0, 0, -1))
    assert time_name(int(secs) * 1000 + 9) == "20240305060708009"


def service(tmp_path: Path, clock: FakeClock, entries: int = 4) -> IndexService:
    s = IndexService(tmp_path / "index", SLOTS, entries, clock=clock)
    s.load(True, 0)
    return s


def test_rolls_to_new_files_and_queries_span_them(tmp_path: Path) -> None:
    clock = FakeClock()
    s = service(tmp_path, clock)  # 3 entries per file
    for off in range(10):
        s.build(b"T", [b"k", b"other"] if off % 2 else [b"k"], off * 100, T0 + off)
    assert len(s.files) == 5  # 15 entries
    names = [f.path.name for f in s.files]
    assert names == sorted(names) and len(set(names)) == 5  # same clock: +1 ms each
    assert names[0] == time_name(T0) and names[1] == time_name(T0 + 1)
    assert s.query(b"T", b"k", 100, 0, 2**62) == [off * 100 for off in range(9, -1, -1)]
    assert s.query(b"T", b"k", 4, 0, 2**62) == [900, 800, 700, 600]
    assert s.query(b"T", b"other", 100, 0, 2**62) == [900, 700, 500, 300, 100]
    assert s.query(b"U", b"k", 100, 0, 2**62) == []
    assert s.end_phy_offset == 900
    # A new file starts from the previous file's ends.
    assert s.files[1].begin_phy_offset == 200
    s.close()


def test_query_skips_files_outside_the_time_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if ran_pure(request, index_file):
        return
    s = service(tmp_path, FakeClock())
    for off in range(9):
        s.build(b"T", [b"k"], off, T0 + off * 10_000)  # files: 0-20 s, 30-50 s, 60-80 s
    searched: list[int] = []
    for i, f in enumerate(s.files):

        def spy(*args: int, i: int = i, real: Callable[..., list[int]] = f.select) -> list[int]:
            searched.append(i)
            return real(*args)

        monkeypatch.setattr(f, "select", spy)
    assert s.query(b"T", b"k", 100, T0 + 30_000, T0 + 40_000) == [4, 3]
    assert searched == [2, 1]  # the newest file is always searched
    s.close()


def test_build_skips_messages_below_the_end_offset_and_empty_keys(tmp_path: Path) -> None:
    s = service(tmp_path, FakeClock(), entries=32)
    s.build(b"T", [b"", b""], 10, T0)
    assert s.files == []
    s.build(b"T", [b"a"], 100, T0)
    s.build(b"T", [b"a"], 50, T0)  # re-dispatch of an indexed message
    s.build(b"T", [b"", b"a"], 100, T0)  # the newest indexed message again: skipped too
    assert s.query(b"T", b"a", 100, 0, 2**62) == [100]
    assert s.files[0].index_count == 2
    s.close()


def test_reopen_service_and_continue(tmp_path: Path) -> None:
    clock = FakeClock()
    s = service(tmp_path, clock)
    for off in range(7):
        s.build(b"T", [b"k%d" % (off % 2)], off, T0 + off * 1000)
    expected = [s.query(b"T", b"k%d" % k, 100, 0, 2**62) for k in range(2)]
    names = [f.path.name for f in s.files]
    s.close()
    (tmp_path / "index" / "not-an-index").write_bytes(b"x")  # ignored
    s = service(tmp_path, clock)
    assert [f.path.name for f in s.files] == names
    assert [s.query(b"T", b"k%d" % k, 100, 0, 2**62) for k in range(2)] == expected
    assert s.end_phy_offset == 6
    s.build(b"T", [b"k0"], 7, T0 + 7_000)  # goes into the newest file
    assert len(s.files) == len(names)
    assert s.query(b"T", b"k0", 1, 0, 2**62) == [7]
    s.close()


def test_abnormal_load_destroys_files_begun_after_the_checkpoint(tmp_path: Path) -> None:
    clock = FakeClock()
    s = service(tmp_path, clock)
    for off in range(9):
        clock.ms = T0 + off * 1000
        s.build(b"T", [b"k"], off, T0 + off * 1000)
    ends = [f.end_timestamp for f in s.files]
    assert ends == [T0 + 2_000, T0 + 5_000, T0 + 8_000]
    paths = [f.path for f in s.files]
    s.close()

    s = IndexService(tmp_path / "index", SLOTS, 4)
    s.load(False, T0 + 5_500)  # the second file ends after it but began before: kept
    assert [f.path for f in s.files] == paths[:2]
    assert not paths[2].exists()
    assert s.end_phy_offset == 5
    s.build(b"T", [b"k"], 3, T0)  # already indexed: skipped
    s.build(b"T", [b"k"], 6, T0 + 6_000)  # re-dispatch rebuilds the rest
    assert s.query(b"T", b"k", 100, 0, 2**62) == [6, 5, 4, 3, 2, 1, 0]
    s.close()

    s = IndexService(tmp_path / "index", SLOTS, 4)
    s.load(True, 0)  # a normal exit keeps everything
    assert len(s.files) == 3
    s.destroy()
    assert list((tmp_path / "index").iterdir()) == []


def test_delete_below_never_deletes_the_newest(tmp_path: Path) -> None:
    s = service(tmp_path, FakeClock())
    for off in range(9):
        s.build(b"T", [b"k"], off * 10, T0 + off)  # file ends 20, 50, 80
    paths = [f.path for f in s.files]
    assert s.delete_below(20) == 0
    assert s.delete_below(21) == 1
    assert not paths[0].exists() and paths[1].exists()
    assert s.delete_below(10**9) == 1
    assert [f.path for f in s.files] == paths[2:]
    assert s.query(b"T", b"k", 100, 0, 2**62) == [80, 70, 60]
    s.close()


def test_flush_fsyncs_dirty_files_and_returns_the_newest_timestamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = IndexService(tmp_path / "index", SLOTS, 4, clock=FakeClock())
    s.load(True, T0 - 1)
    assert s.flush() == T0 - 1  # nothing written yet: the checkpoint's value
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    for off in range(4):  # rolls into a second file
        s.build(b"T", [b"k"], off, T0 + off)
    assert s.flush() == T0 + 3
    assert len(synced) == 2  # the full file and the new one
    assert s.flush() == T0 + 3 and len(synced) == 2  # nothing new
    s.build(b"T", [b"k"], 4, T0 + 4)
    assert s.flush() == T0 + 4 and len(synced) == 3
    s.close()


def test_flush_on_another_thread_while_building(tmp_path: Path) -> None:
    s = IndexService(tmp_path / "index", SLOTS, 16, clock=FakeClock())
    s.load(True, 0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                s.flush()
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for off in range(300):
            s.build(b"T", [b"k%d" % (off % 7), b"x"], off, T0 + off)
            if off % 50 == 49:
                s.delete_below(off - 20)
    finally:
        stop.set()
        t.join()
    assert errors == []
    assert s.flush() == T0 + 299
    assert s.query(b"T", b"k3", 2, 0, 2**62) == [297, 290]
    s.close()


# Property: the service answers like a dict of lists.

KEYS = [b"k%d" % i for i in range(6)]


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.lists(st.sampled_from(KEYS), max_size=3),
            st.integers(min_value=0, max_value=3_000),  # ms since the previous message
        ),
        max_size=60,
    ),
    max_num=st.integers(min_value=1, max_value=80),
    reopen_at=st.integers(min_value=0, max_value=60),
)
def test_query_matches_an_in_memory_model(
    ops: list[tuple[list[bytes], int]], max_num: int, reopen_at: int
) -> None:
    assert len({key_hash(b"T", k) for k in KEYS}) == len(KEYS)
    model: dict[bytes, list[int]] = {k: [] for k in KEYS}
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as d:
        s = IndexService(d, 4, 6, clock=clock)
        s.load(True, 0)
        for n, (keys, delta) in enumerate(ops):
            if n == reopen_at:
                s.close()
                s = IndexService(d, 4, 6, clock=clock)
                s.load(True, 0)
            clock.ms += delta
            offset = n * 100
            s.build(b"T", keys, offset, clock.ms)
            for k in keys:
                model[k].append(offset)
        for k in KEYS:
            assert s.query(b"T", k, max_num, 0, 2**62) == model[k][::-1][:max_num]
            assert s.query(b"T", k, 1000, T0, clock.ms) == model[k][::-1]
        s.close()


def test_build_many_matches_one_build_per_message(tmp_path: Path) -> None:
    """A dispatch run indexes its messages in one call; the files (rolled over mid-run)
    hold the same entries as one build per message, every key of a message included."""
    messages = [(off * 100, [b"k", b"m%d" % (off % 3)] if off % 2 else [b"k"]) for off in range(9)]
    one = service(tmp_path / "one", FakeClock())
    for off, keys in messages:
        one.build(b"T", keys, off, T0 + off)
    many = service(tmp_path / "many", FakeClock())
    many.build_many([(b"T", k, off, T0 + off) for off, keys in messages[:4] for k in keys])
    many.build_many([(b"T", k, off, T0 + off) for off, keys in messages[3:] for k in keys])
    assert len(many.files) == len(one.files) == 5  # 13 entries, 3 a file
    for a, b in zip(one.files, many.files, strict=True):
        assert a.path.read_bytes() == b.path.read_bytes()
    for key in (b"k", b"m0", b"m1", b"m2"):
        assert many.query(b"T", key, 100, 0, 2**62) == one.query(b"T", key, 100, 0, 2**62)
    one.close()
    many.close()
