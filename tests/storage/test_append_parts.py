"""Several batches of different topics and queues stored in one go (MessageStore and
CommitLog ``append_parts``, what a SEND_TOPICS_BATCH stores): one after the other in one
write, each with its own queue offsets, a refused one taking no place, the rest stored."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rocketq.common.exceptions import DiskFullError, MessageIllegalError
from rocketq.common.record import BLANK_MAGIC_CODE, SIZE_MAGIC, decode_records
from rocketq.storage import mapped_file
from rocketq.storage.commitlog import AppendResult
from rocketq.storage.message_store import MessageStore
from tests.pure import ran_pure
from tests.storage.conftest import batch
from tests.storage.test_commitlog import _dispatched
from tests.storage.test_held_writes import _count_writes, _fail_writes


def _part(topic: str, queue_id: int, *bodies: bytes) -> tuple[bytes, bytes, int]:
    return batch(topic, list(bodies)), topic.encode(), queue_id


def _stored(store: MessageStore, topic: str, queue_id: int) -> list[tuple[int, bytes]]:
    got = decode_records(store.get_messages(topic, queue_id, 0, max_count=100).to_bytes())
    return [(m.queue_offset, m.body) for m in got]


async def test_parts_are_stored_one_after_another_in_one_write(
    store_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, mapped_file):
        return
    store: MessageStore = await store_factory(mapped_file_size_commit_log=64 * 1024)
    store.append(batch("A", [b"before"]), "A", 0)
    start = store.max_phy_offset
    writes = _count_writes(monkeypatch)
    parts = [
        _part("A", 0, b"a1", b"a2"),
        _part("B", 3, b"b1"),
        _part("A", 1, b"a-q1"),
        _part("A", 0, b"a3"),  # the same queue twice in one go: offsets continue
    ]
    results = store.append_parts(parts)
    assert all(isinstance(r, AppendResult) for r in results)
    ok = [r for r in results if isinstance(r, AppendResult)]
    assert writes == [sum(len(p[0]) for p in parts)]  # one write
    assert ok[0].wrote_offset == start
    for before, after in itertools.pairwise(ok):
        assert after.wrote_offset == before.end_offset
    assert [(r.msg_count, r.queue_offset) for r in ok] == [(2, 1), (1, 0), (1, 0), (1, 3)]
    assert store.max_phy_offset == ok[-1].end_offset
    await _dispatched(store)
    assert _stored(store, "A", 0) == [(0, b"before"), (1, b"a1"), (2, b"a2"), (3, b"a3")]
    assert _stored(store, "B", 3) == [(0, b"b1")]
    assert _stored(store, "A", 1) == [(0, b"a-q1")]


async def test_a_refused_part_takes_no_place_and_the_others_are_stored(
    store_factory: Any,
) -> None:
    store: MessageStore = await store_factory(
        mapped_file_size_commit_log=64 * 1024, max_message_size=64
    )
    start = store.max_phy_offset
    parts = [
        _part("A", 0, b"a1"),
        _part("A", 0, b"x" * 65),  # over max_message_size
        _part("B", 0, b"b1"),
        (batch("C", [b"c1"]), b"D", 0),  # records of another topic than the part's
        _part("A", 0, b"a2"),
    ]
    results = store.append_parts(parts)
    refused = [i for i, r in enumerate(results) if not isinstance(r, AppendResult)]
    assert refused == [1, 3]
    assert "max_message_size" in str(results[1])
    assert "the batch's topic 'D'" in str(results[3])
    ok = [r for r in results if isinstance(r, AppendResult)]
    assert ok[0].wrote_offset == start
    for before, after in itertools.pairwise(ok):
        assert after.wrote_offset == before.end_offset
    # A's queue offsets skip nothing: the refused part took none.
    assert [r.queue_offset for r in ok] == [0, 0, 1]
    await _dispatched(store)
    assert _stored(store, "A", 0) == [(0, b"a1"), (1, b"a2")]
    assert _stored(store, "B", 0) == [(0, b"b1")]
    assert (b"D", 0) not in store.commitlog.queue_table
    assert store.append_parts([_part("A", 0, b"y" * 65)])[0].__class__ is MessageIllegalError


async def test_held_parts_are_written_at_settle(
    store_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, mapped_file):
        return
    store: MessageStore = await store_factory(mapped_file_size_commit_log=64 * 1024)
    writes = _count_writes(monkeypatch)
    store.hold_writes()
    single = store.append(batch("A", [b"single"]), "A", 0)
    results = store.append_parts([_part("A", 0, b"p1"), _part("B", 0, b"p2")])
    ok = [r for r in results if isinstance(r, AppendResult)]
    assert ok[0].wrote_offset == single.end_offset and ok[0].queue_offset == 1
    assert writes == [] and store.max_phy_offset == 0
    store.settle()
    assert writes == [ok[-1].end_offset]
    await _dispatched(store)
    assert _stored(store, "A", 0) == [(0, b"single"), (1, b"p1")]


async def test_parts_that_do_not_fit_roll_to_the_next_segment(store_factory: Any) -> None:
    store: MessageStore = await store_factory()  # 16 KiB segments
    size = 16 * 1024
    first_end = store.append(batch("A", [b"x" * 9000]), "A", 0).end_offset
    # Two parts of ~5 KB do not fit the ~7 KB left: both go to the next segment, and a
    # blank record ends the first.
    results = store.append_parts([_part("A", 0, b"y" * 5000), _part("B", 0, b"z" * 5000)])
    ok = [r for r in results if isinstance(r, AppendResult)]
    assert [r.wrote_offset for r in ok] == [size, ok[0].end_offset]
    first = store.commitlog.files.files[0]
    blank_size, magic = SIZE_MAGIC.unpack_from(first.buf, first_end)
    assert magic == BLANK_MAGIC_CODE and first_end + blank_size == size
    # More than a segment in all: stored in pieces, each part whole in one segment.
    big = [_part("C", q, b"w" * 6000) for q in range(4)]
    results = store.append_parts(big)
    ok = [r for r in results if isinstance(r, AppendResult)]
    assert len(ok) == 4
    for r in ok:
        assert r.wrote_offset // size == (r.end_offset - 1) // size
    await _dispatched(store)
    assert [b for _, b in _stored(store, "C", 2)] == [b"w" * 6000]
    # One part larger than a segment is refused, as append refuses it; the others stored.
    results = store.append_parts([_part("D", 0, b"v" * 17000), _part("D", 1, b"ok")])
    assert isinstance(results[0], MessageIllegalError)
    assert "larger than a CommitLog segment" in str(results[0])
    assert isinstance(results[1], AppendResult) and results[1].queue_offset == 0


async def test_a_failed_write_refuses_every_part_and_gives_the_offsets_back(
    store_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, mapped_file):
        return
    store: MessageStore = await store_factory(mapped_file_size_commit_log=64 * 1024)
    store.append(batch("A", [b"kept"]), "A", 0)
    start = store.max_phy_offset

    _fail_writes(monkeypatch)
    with pytest.raises(DiskFullError, match="No space left on device"):
        store.append_parts([_part("A", 0, b"lost"), _part("New", 1, b"lost")])
    assert store.max_phy_offset == start
    assert store.commitlog.queue_table[(b"A", 0)] == 1
    assert (b"New", 1) not in store.commitlog.queue_table
