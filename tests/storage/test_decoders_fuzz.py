"""The store's readers of its own files are total: CommitLog records as recovery checks
them and as dispatch reads them (bytes a replica was sent, or a segment damaged on disk),
the checkpoint file and the queue ends file. Valid inputs round-trip; damaged ones are
refused or recovered as the store's rules say, within a time and memory bound, and a store
with a damaged file starts (or says clearly which file is damaged) and serves what is whole.
"""

from __future__ import annotations

import asyncio
import shutil
import string
import struct
import zlib
from pathlib import Path
from typing import Any, Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import MessageIllegalError, StoreCorruptError
from rocketq.common.record import BLANK, BLANK_MAGIC_CODE, decode_records
from rocketq.storage.checkpoint import Checkpoint, CheckpointFile
from rocketq.storage.commitlog import BAD_RECORD, BLANK_RECORD, RecordInfo, check_record
from rocketq.storage.message_store import MessageStore
from rocketq.storage.queue_ends import (
    QueueEnd,
    QueueEndsError,
    StoreEnds,
)
from rocketq.storage.queue_ends import (
    decode as decode_queue_ends,
)
from rocketq.storage.queue_ends import (
    encode as encode_queue_ends,
)
from rocketq.storage.recovery import check_segment
from tests.fuzz_mutations import mutated, total
from tests.storage.conftest import batch, small_config

FUZZ: Final = settings(max_examples=150, deadline=2000)
INT64: Final = st.integers(-(1 << 63), (1 << 63) - 1)
TOPICS: Final = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)


@st.composite
def segments(draw: st.DrawFn) -> tuple[bytes, int]:
    """(a segment's bytes as a store writes them, how many records): stamped records,
    then the blank record that ends the segment."""
    pos, parts, count = 0, [], 0
    for qid in draw(st.lists(st.integers(0, 3), min_size=1, max_size=4)):
        raw = bytearray(
            batch(
                draw(TOPICS),
                draw(st.lists(st.binary(max_size=40), min_size=1, max_size=3)),
                keys=[draw(TOPICS)],
                tags=draw(TOPICS),
            )
        )
        for p, _size in _records(raw):
            struct.pack_into(">i", raw, p + 12, qid)  # queue id
            struct.pack_into(">qq", raw, p + 20, count, pos + p)  # queue and physical offsets
            struct.pack_into(">I", raw, p + 8, zlib.crc32(_body(raw, p)) & 0x7FFFFFFF)
            count += 1
        parts.append(bytes(raw))
        pos += len(raw)
    blank = draw(st.integers(8, 64))
    parts.append(BLANK.pack(blank, BLANK_MAGIC_CODE) + b"\0" * (blank - 8))
    return b"".join(parts), count


def _records(raw: bytes | bytearray) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos : pos + 4], "big")
        out.append((pos, size))
        pos += size
    return out


def _body(raw: bytes | bytearray, pos: int) -> bytes:
    body_len = int.from_bytes(raw[pos + 84 : pos + 88], "big")
    return bytes(raw[pos + 88 : pos + 88 + body_len])


# -- CommitLog records as recovery checks them -------------------------------------------


@given(segments())
@FUZZ
def test_a_whole_segment_checks_whole(segment: tuple[bytes, int]) -> None:
    data, count = segment
    offsets: dict[tuple[bytes, int], int] = {}
    end, records, blank = check_segment(
        data, 0, len(data), 0, check_crc=True, queue_offsets=offsets
    )
    assert (records, blank) == (count, True)
    assert max(offsets.values()) == count  # the last record has queue offset count - 1
    pos = 0
    for _ in range(count):
        info = check_record(data, pos, len(data), 0, check_crc=True)
        assert isinstance(info, RecordInfo)
        pos += info.size
    assert pos == end
    assert check_record(data, pos, len(data), 0, check_crc=True) == BLANK_RECORD
    assert len(decode_records(data[:end])) == count


@given(st.data(), segments(), st.booleans())
@settings(max_examples=300, deadline=2000)
def test_a_damaged_segment_checks_up_to_the_damage(
    data: st.DataObject, segment: tuple[bytes, int], crc: bool
) -> None:
    valid, _ = segment
    bad = data.draw(mutated(valid))
    offsets: dict[tuple[bytes, int], int] = {}
    got = total(
        lambda: check_segment(bad, 0, len(bad), 0, check_crc=crc, queue_offsets=offsets), ()
    )
    assert isinstance(got, tuple)
    end, _, _ = got
    assert 0 <= end <= len(bad)
    pos = 0
    while True:  # record by record, check_record agrees with the segment's check
        info = total(lambda: check_record(bad, pos, len(bad), 0, check_crc=crc), ())  # noqa: B023
        if not isinstance(info, RecordInfo):
            assert info in (BLANK_RECORD, BAD_RECORD)
            break
        pos += info.size
    assert pos == end


# -- the checkpoint file ------------------------------------------------------------------

CHECKPOINTS: Final = st.builds(Checkpoint, *([INT64] * 9))


@given(CHECKPOINTS)
@FUZZ
def test_checkpoints_round_trip(tmp_path_factory: Any, cp: Checkpoint) -> None:
    path = tmp_path_factory.mktemp("cp") / "checkpoint"
    f = CheckpointFile(path)
    try:
        f.write(cp, sync=False)
        # All zeros is no checkpoint yet: a new store's.
        assert f.read() == (cp if any(vars_of(cp)) else Checkpoint())
    finally:
        f.close()


def vars_of(cp: Checkpoint) -> list[int]:
    return [getattr(cp, name) for name in Checkpoint.__slots__]


@given(st.binary(max_size=200))
@FUZZ
def test_any_checkpoint_file_reads(tmp_path_factory: Any, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("cp") / "checkpoint"
    path.write_bytes(raw)
    f = CheckpointFile(path)
    try:
        assert isinstance(total(f.read, ()), Checkpoint)
    finally:
        f.close()


# -- the queue ends file ------------------------------------------------------------------

ENDS: Final = st.builds(QueueEnd, INT64, st.integers(-(1 << 31), (1 << 31) - 1), *[INT64] * 3)
STAMPS: Final = st.builds(StoreEnds, INT64, INT64, INT64, INT64)
QUEUES: Final = st.dictionaries(
    st.tuples(TOPICS.map(str.encode), st.integers(-(1 << 31), (1 << 31) - 1)), ENDS, max_size=5
)


@given(STAMPS, QUEUES)
@FUZZ
def test_queue_ends_round_trip(stamp: StoreEnds, queues: dict[Any, QueueEnd]) -> None:
    assert decode_queue_ends(encode_queue_ends(stamp, queues.items())) == (stamp, queues)


def with_crc(data: bytes) -> bytes:
    """``data`` (a damaged file without its last 4 bytes) with a CRC that matches it, so the
    damage gets past the checksum to the parser."""
    return data + struct.pack(">I", zlib.crc32(data))


@given(st.data(), STAMPS, QUEUES)
@settings(max_examples=300, deadline=2000)
def test_a_damaged_queue_ends_file_is_refused(
    data: st.DataObject, stamp: StoreEnds, queues: dict[Any, QueueEnd]
) -> None:
    valid = encode_queue_ends(stamp, queues.items())
    bad = data.draw(st.one_of(mutated(valid), mutated(valid[:-4]).map(with_crc)))
    got = total(lambda: decode_queue_ends(bad), QueueEndsError)
    if bad != valid and not isinstance(got, QueueEndsError):
        assert bad[-4:] == struct.pack(">I", zlib.crc32(bad[:-4]))


# -- a store started on damaged files ----------------------------------------------------


def _segment_paths(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


async def _fill(root: Path) -> list[int]:
    """A store with messages in two queues, stopped cleanly; the queue offsets each queue
    reached."""
    store = MessageStore(small_config(root))
    await store.start()
    try:
        for i in range(40):
            store.append(batch("T", [b"m%d" % i * 20], keys=[f"k{i}"]), "T", i % 2)
        store.settle()
        while store.dispatcher.run(1 << 20):
            pass
        return [store.max_offset_in_queue("T", q) for q in (0, 1)]
    finally:
        await store.shutdown()


async def _serve(root: Path) -> None:
    """Start a store on ``root``: it must start or name a damaged file; started, it must
    serve its queues. A record damaged where no recovery checks it (before a clean stop's
    end, or before a crash's flushed offsets) is served as it lies: decoding it raises
    MessageIllegalError, nothing else."""
    store = MessageStore(small_config(root))
    try:
        await asyncio.wait_for(store.start(), 20)
    except StoreCorruptError:
        return
    try:
        while store.dispatcher.run(1 << 20):
            pass
        for q in (0, 1):
            # A queue file found damaged when first mapped: StoreCorruptError naming it.
            lo = total(lambda: store.min_offset_in_queue("T", q), StoreCorruptError)  # noqa: B023
            hi = total(lambda: store.max_offset_in_queue("T", q), StoreCorruptError)  # noqa: B023
            if not isinstance(lo, int) or not isinstance(hi, int):
                continue
            got = total(
                lambda: store.get_messages("T", q, lo, max_count=hi - lo + 1),  # noqa: B023
                StoreCorruptError,
            )
            for view in getattr(got, "buffers", []):
                total(lambda: decode_records(view), MessageIllegalError)  # noqa: B023
                view.release()
        total(lambda: store.messages_by_key("T", "k1"), StoreCorruptError)
    finally:
        await store.shutdown()


async def test_a_store_starts_on_a_damaged_checkpoint(tmp_path: Path) -> None:
    template = tmp_path / "template"
    await _fill(template)
    checkpoint = (template / "checkpoint").read_bytes()
    runs = iter(range(1_000_000))

    @given(st.data())
    @settings(
        max_examples=25,
        deadline=None,
        # A store start per example (files written, mapped, recovered, dispatched).
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    def check(data: st.DataObject) -> None:
        root = tmp_path / f"run{next(runs)}"
        shutil.copytree(template, root)
        bad = data.draw(mutated(checkpoint[:72]))
        (root / "checkpoint").write_bytes(bad.ljust(len(checkpoint), b"\0")[: len(checkpoint)])
        if data.draw(st.booleans()):
            (root / "abort").touch()  # as after a crash
        asyncio.run(_serve(root))

    await asyncio.to_thread(check)


async def test_a_store_starts_on_a_damaged_file(tmp_path: Path) -> None:
    """Any of its files (CommitLog segments, ConsumeQueue and index files, the checkpoint,
    the queue ends record) damaged in one place, after a clean stop or a crash."""
    template = tmp_path / "template"
    await _fill(template)
    files = sorted(p.relative_to(template) for p in template.rglob("*") if p.is_file())
    runs = iter(range(1_000_000))

    @given(st.data())
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    def check(data: st.DataObject) -> None:
        root = tmp_path / f"run{next(runs)}"
        shutil.copytree(template, root)
        path = root / data.draw(st.sampled_from(files))
        raw = path.read_bytes()
        at = data.draw(st.integers(0, max(0, min(len(raw), 4096) - 1)))
        window = data.draw(mutated(raw[at : at + 256], max_steps=3))
        if data.draw(st.booleans()):  # in place, the file's size kept
            window = window[:256].ljust(min(256, len(raw) - at), b"\0")
        path.write_bytes(raw[:at] + window + raw[at + 256 :])
        if data.draw(st.booleans()):
            (root / "abort").touch()
        asyncio.run(_serve(root))

    await asyncio.to_thread(check)


async def test_replicated_garbage_is_dispatched_without_harm(tmp_path: Path) -> None:
    """A replica appends what it is sent as it is; dispatch then reads records whose
    lengths may lie, and neither raises nor loops."""
    src_root = tmp_path / "src"
    await _fill(src_root)
    raw = _segment_paths(src_root)[0].read_bytes()
    valid = raw[: raw.index(b"\0" * 200)]  # the records, up to the unwritten rest
    runs = iter(range(1_000_000))

    @given(st.data())
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    def check(data: st.DataObject) -> None:
        bad = data.draw(mutated(valid[:2000]))

        async def run() -> None:
            store = MessageStore(small_config(tmp_path / f"r{next(runs)}"))
            await store.start()
            try:
                store.append_raw(0, bad)
                for _ in range(100):
                    if not total(lambda: store.dispatcher.run(1 << 16), ()):
                        break
                else:
                    raise AssertionError("dispatch never finished")
                for q in range(4):
                    got = store.get_messages("T", q, 0)
                    for view in got.buffers:
                        view.release()
            finally:
                await store.shutdown()

        asyncio.run(run())

    await asyncio.to_thread(check)


async def test_a_checkpoint_end_inside_a_record_is_not_trusted(tmp_path: Path) -> None:
    """A clean stop's end offset damaged to a place inside the last record where zeros
    follow (its queue offset field): the start checks the last segments instead of cutting
    the log there, so the next append does not overwrite the record."""
    store = MessageStore(small_config(tmp_path))
    await store.start()
    store.append(batch("T", [b"hello"]), "T", 0)
    store.settle()
    while store.dispatcher.run(1 << 20):
        pass
    end = store.max_phy_offset
    await store.shutdown()
    raw = bytearray((tmp_path / "checkpoint").read_bytes())
    assert struct.unpack_from(">qq", raw, 32) == (end, end)  # clean end and dispatched
    struct.pack_into(">q", raw, 32, 20)  # the end: inside record 0, at its queue offset
    (tmp_path / "checkpoint").write_bytes(raw)
    store = MessageStore(small_config(tmp_path))
    await store.start()
    try:
        assert store.max_phy_offset == end
        store.append(batch("T", [b"world"]), "T", 0)
        store.settle()
        while store.dispatcher.run(1 << 20):
            pass
        got = store.get_messages("T", 0, 0)
        bodies = [m.body for view in got.buffers for m in decode_records(bytes(view))]
        for view in got.buffers:
            view.release()
        assert bodies == [b"hello", b"world"]
    finally:
        await store.shutdown()
