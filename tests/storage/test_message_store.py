from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.exceptions import ServiceNotAvailableError
from rocketq.common.record import decode_record, decode_records, tags_hash_code
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import GetStatus, PutStatus
from tests.storage.conftest import FakeClock, batch, small_config


async def caught_up(store: MessageStore) -> None:
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes:
        assert time.monotonic() < deadline, "dispatch did not catch up"
        await asyncio.sleep(0.001)


async def test_get_messages_statuses_and_corrections(store_factory: Any) -> None:
    store: MessageStore = await store_factory()
    assert store.get_messages("T", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    for i in range(10):
        store.append(batch("T", [f"m{i}".encode()]), "T", 0)
    await caught_up(store)
    got = store.get_messages("T", 0, 3, max_count=4)
    assert got.status is GetStatus.FOUND
    assert [m.body for m in decode_records(got.to_bytes())] == [b"m3", b"m4", b"m5", b"m6"]
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (7, 0, 10)
    assert len(got.buffers) == 1  # contiguous records come back as one view
    one = store.get_messages("T", 0, 10)
    assert (one.status, one.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 10)
    bad = store.get_messages("T", 0, 50)
    assert (bad.status, bad.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 0)
    got.release()


async def test_max_bytes_and_filters(store_factory: Any) -> None:
    store: MessageStore = await store_factory()
    for i in range(12):
        store.append(batch("T", [b"x" * 100 + bytes([i])], tags="A" if i % 3 == 0 else "B"), "T", 1)
    await caught_up(store)
    size = len(batch("T", [b"x" * 101], tags="A"))
    limited = store.get_messages("T", 1, 0, max_bytes=size * 2)
    assert limited.message_count == 2 and limited.next_begin_offset == 2
    code_a = tags_hash_code("A")
    tagged = store.get_messages("T", 1, 0, tag_filter=lambda c: c == code_a)
    assert [m.body[-1] for m in decode_records(tagged.to_bytes())] == [0, 3, 6, 9]
    assert tagged.next_begin_offset == 12
    none = store.get_messages("T", 1, 0, tag_filter=lambda c: False)
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 12
    odd = store.get_messages("T", 1, 0, record_filter=lambda v: decode_record(v).body[-1] % 2 == 1)
    assert [m.body[-1] for m in decode_records(odd.to_bytes())] == [1, 3, 5, 7, 9, 11]


async def test_offsets_by_time_and_store_time(store_factory: Any, clock: FakeClock) -> None:
    store: MessageStore = await store_factory(clock=clock)
    stamps = []
    for i in range(20):
        clock.now += 1.0
        stamps.append(int(clock.now * 1000))
        store.append(batch("T", [bytes([i])]), "T", 0)
    await caught_up(store)
    assert store.offset_by_time("T", 0, stamps[0] - 5000) == 0
    assert store.offset_by_time("T", 0, stamps[7]) == 7
    assert store.offset_by_time("T", 0, stamps[7] + 1) == 8
    assert store.offset_by_time("T", 0, stamps[-1] + 1) == 20
    assert store.store_time_in_queue("T", 0, 5) == stamps[5]
    assert store.offset_by_time("Nope", 0, 0) == 0
    assert (store.min_offset_in_queue("T", 0), store.max_offset_in_queue("T", 0)) == (0, 20)


async def test_lookup_by_offset_id_and_key(store_factory: Any, clock: FakeClock) -> None:
    store: MessageStore = await store_factory(clock=clock)
    r1 = store.append(batch("T", [b"first"], keys=["order-1", "shared"]), "T", 0)
    clock.now += 100
    store.append(batch("T", [b"second"], keys=["order-2", "shared"]), "T", 0)
    store.append(batch("U", [b"other topic"], keys=["order-1"]), "U", 0)
    await caught_up(store)
    view = store.message_by_offset(r1.wrote_offset)
    assert view is not None
    msg = decode_record(view)
    assert msg.body == b"first"
    by_id = store.message_by_id(msg.offset_msg_id)
    assert by_id is not None and decode_record(by_id).body == b"first"
    assert [decode_record(v).body for v in store.messages_by_key("T", "order-1")] == [b"first"]
    shared = [decode_record(v).body for v in store.messages_by_key("T", "shared")]
    assert shared == [b"second", b"first"]  # newest first
    t0 = int((clock.now - 50) * 1000)
    recent = store.messages_by_key("T", "shared", begin_ms=t0)
    assert [decode_record(v).body for v in recent] == [b"second"]
    assert len(store.messages_by_key("T", "shared", max_num=1)) == 1
    assert store.messages_by_key("T", "missing") == []
    assert store.message_by_offset(10**9) is None


async def test_unique_id_is_indexed(store_factory: Any) -> None:
    from rocketq.common.message import Message
    from rocketq.common.record import encode_message
    from tests.storage.conftest import BORN_HOST

    store: MessageStore = await store_factory()
    rec = encode_message(
        Message("T", b"u"),
        born_timestamp=1,
        born_host=BORN_HOST,
        uniq_id="7F00000175CC18B4AAC259C3E2040000",
    )
    store.append(rec, "T", 0)
    await caught_up(store)
    (view,) = store.messages_by_key("T", "7F00000175CC18B4AAC259C3E2040000")
    assert decode_record(view).msg_id == "7F00000175CC18B4AAC259C3E2040000"


async def test_dispatch_stops_at_the_committed_offset(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path), auto_commit=False)
    await store.start()
    seen: list[tuple[bytes, int, int]] = []
    store.add_arrival_listener(lambda t, q, nxt, code: seen.append((t, q, nxt)))
    try:
        r1 = store.append(batch("T", [b"a"]), "T", 0)
        store.append(batch("T", [b"b"]), "T", 0)
        await asyncio.sleep(0.01)
        assert store.max_offset_in_queue("T", 0) == 0  # nothing committed yet
        store.commit(r1.end_offset)
        await caught_up(store)
        assert store.max_offset_in_queue("T", 0) == 1
        assert seen == [(b"T", 0, 1)]
        store.commit(store.max_phy_offset)
        await caught_up(store)
        assert store.max_offset_in_queue("T", 0) == 2
    finally:
        await store.shutdown()


async def test_sync_flush_group_commit_shares_fsyncs(store_factory: Any) -> None:
    store: MessageStore = await store_factory(
        flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=1 << 20
    )
    before = store.flusher.fsync_count
    results = await asyncio.gather(
        *(store.put(batch("T", [bytes([i]) * 100]), "T", i % 4) for i in range(64))
    )
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert store.flusher.flushed[0] >= max(r.append.end_offset for r in results)
    # 64 writers waited for far fewer fsyncs than one each.
    assert store.flusher.fsync_count - before < 64


async def test_sync_flush_timeout(store_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store: MessageStore = await store_factory(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=50)
    real = os.fdatasync

    def slow(fd: int) -> None:
        time.sleep(0.3)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow)
    result = await store.put(batch("T", [b"slow"]), "T", 0)
    assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
    # The message is stored all the same (RocketMQ keeps it; only the wait timed out).
    await caught_up(store)
    assert store.max_offset_in_queue("T", 0) == 1


async def test_clean_restart_keeps_everything_without_a_scan(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    store = MessageStore(cfg)
    await store.start()
    for i in range(50):
        store.append(batch("T", [bytes([i]) * 300], keys=[f"k{i}"]), "T", i % 3)
    await store.shutdown()
    assert not Path(cfg.abort_path).exists()
    again = MessageStore(cfg)
    await again.start()
    try:
        assert again.recovery is not None and again.recovery.fast
        assert again.recovery.scanned_records == 0
        assert sum(again.max_offset_in_queue("T", q) for q in range(3)) == 50
        r = again.append(batch("T", [b"next"]), "T", 0)
        assert r.queue_offset == 17
        (view,) = again.messages_by_key("T", "k49")
        assert decode_record(view).body == bytes([49]) * 300
    finally:
        await again.shutdown()


async def test_retention_deletes_expired_segments_at_the_delete_hour(tmp_path: Path) -> None:
    hour = time.localtime().tm_hour
    clock = FakeClock(time.time())
    cfg = small_config(tmp_path, delete_when=f"{(hour + 1) % 24:02d}", file_reserved_time=72)
    store = MessageStore(cfg, clock=clock, disk_ratio=lambda _: 0.10)
    await store.start()
    try:
        for i in range(60):
            store.append(batch("T", [bytes([i]) * 1000]), "T", 0)
            clock.now += 60
        await caught_up(store)
        segments = len(store.commitlog.files.files)
        assert segments >= 4
        # Old enough, but not the delete hour: nothing goes.
        clock.now += 73 * 3600
        assert store.clean().commit_log_files == 0
        # At the delete hour every expired segment but the newest goes, at most 10 a run.
        clock.now += 3600
        while time.localtime(clock.now).tm_hour != (hour + 1) % 24:
            clock.now += 600
        report = store.clean()
        assert report.commit_log_files == min(10, segments - 1)
        assert len(store.commitlog.files.files) == segments - report.commit_log_files
        min_offset = store.min_phy_offset
        assert min_offset == store.commitlog.files.files[0].file_from_offset > 0
        lo = store.min_offset_in_queue("T", 0)
        assert lo > 0
        first = store.get_messages("T", 0, lo)
        assert first.status is GetStatus.FOUND
        assert decode_records(first.to_bytes())[0].commit_log_offset >= min_offset
        old = store.get_messages("T", 0, 0)
        assert (old.status, old.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, lo)
    finally:
        await store.shutdown()


async def test_retention_when_the_disk_fills(tmp_path: Path) -> None:
    clock = FakeClock(time.time())
    ratio = {"value": 0.5}
    hour = time.localtime().tm_hour
    cfg = small_config(tmp_path, delete_when=f"{(hour + 2) % 24:02d}")
    store = MessageStore(cfg, clock=clock, disk_ratio=lambda _: ratio["value"])
    await store.start()
    try:
        for i in range(40):
            store.append(batch("T", [bytes([i]) * 1000]), "T", 0)
        segments = len(store.commitlog.files.files)
        # Over disk_max_used_space_ratio (75 %): only expired files go, none are.
        ratio["value"] = 0.80
        assert store.clean().commit_log_files == 0
        # Over the clean-forcibly ratio (85 %): the oldest go even though they are young.
        ratio["value"] = 0.87
        assert store.clean().commit_log_files == min(10, segments - 1)
        # Over the warning level (90 %): writes are refused until space is freed.
        ratio["value"] = 0.95
        store.clean()
        with pytest.raises(ServiceNotAvailableError, match="disk is full"):
            store.append(batch("T", [b"x"]), "T", 0)
        ratio["value"] = 0.5
        store.clean()
        store.append(batch("T", [b"x"]), "T", 0)
    finally:
        await store.shutdown()


async def test_tag_code_override_per_topic(tmp_path: Path) -> None:
    """A topic may keep something other than the tags' hash in the tag code (delay topics
    keep the delivery time); the store calls the hook without knowing what it means."""

    def delivery_time(topic: bytes, props: bytes, store_ts: int) -> int:
        return store_ts + 5000

    clock = FakeClock(1_700_000_000.0)
    store = MessageStore(
        small_config(tmp_path),
        clock=clock,
        tags_code_overrides={b"SCHEDULE_TOPIC_XXXX": delivery_time},
    )
    await store.start()
    try:
        store.append(batch("SCHEDULE_TOPIC_XXXX", [b"later"], tags="A"), "SCHEDULE_TOPIC_XXXX", 0)
        store.append(batch("T", [b"now"], tags="A"), "T", 0)
        await caught_up(store)
        due = 1_700_000_000_000 + 5000
        assert (
            store.get_messages(
                "SCHEDULE_TOPIC_XXXX", 0, 0, tag_filter=lambda c: c == due
            ).message_count
            == 1
        )
        assert (
            store.get_messages(
                "T", 0, 0, tag_filter=lambda c: c == tags_hash_code("A")
            ).message_count
            == 1
        )
    finally:
        await store.shutdown()


async def test_index_is_fsynced_on_its_own_period(store_factory: Callable[..., Any]) -> None:
    """ConsumeQueues flush each round (by their dirty pages); the index only every
    flush_interval_index (each fsync makes the next write to every hash-slot page fault)
    and at a clean stop."""
    store: MessageStore = await store_factory(flush_interval_index=3_600_000)
    store.append(batch("T", [b"x"], keys=["k1"]), "T", 0)
    while store.dispatcher.run(1 << 20):
        pass
    assert store.index is not None
    newest = store.index._files[-1]
    assert newest.needs_flush
    store.flush_logics()
    assert newest.needs_flush  # not due yet
    store.flush_logics(clean=True)
    assert not newest.needs_flush


async def test_an_arrival_listener_added_twice_is_told_once(
    store_factory: Callable[..., Any],
) -> None:
    store: MessageStore = await store_factory()
    seen: list[int] = []

    def listener(topic: bytes, queue_id: int, max_offset: int, code: int) -> None:
        seen.append(max_offset)

    store.add_arrival_listener(listener)
    store.add_arrival_listener(listener)  # a service started again
    store.append(batch("T", [b"x"]), "T", 0)
    while store.dispatcher.run(1 << 20):
        pass
    assert seen == [1]


async def test_an_idle_arrival_listener_is_told_only_while_it_waits(
    store_factory: Callable[..., Any],
) -> None:
    """A listener that says it waits for nothing (the held pulls, none held) is not told
    of that run's arrivals; once it waits, it is told of each queue's, and a topic's own
    listener of its topic's whatever the others do."""
    store: MessageStore = await store_factory()
    seen: list[tuple[bytes, int, int]] = []
    timer_seen: list[tuple[bytes, int, int]] = []
    waiting = False
    store.add_arrival_listener(
        lambda t, q, nxt, code: seen.append((t, q, nxt)), idle=lambda: not waiting
    )
    store.add_arrival_listener(lambda t, q, nxt, code: timer_seen.append((t, q, nxt)), topic=b"W")

    def run() -> None:
        while store.dispatcher.run(1 << 20):
            pass

    store.append(batch("T", [b"a"]), "T", 0)
    store.append(batch("W", [b"w"]), "W", 1)
    run()
    assert seen == []  # idle: not told
    assert timer_seen == [(b"W", 1, 1)]
    waiting = True
    store.append(batch("T", [b"b", b"c"]), "T", 0)
    store.append(batch("U", [b"d"]), "U", 2)
    store.append(batch("T", [b"e"]), "T", 0)
    run()
    # Each queue once, with its last offset, in the order the queues were first written.
    assert seen == [(b"T", 0, 4), (b"U", 2, 1)]
    assert timer_seen == [(b"W", 1, 1)]


async def test_settle_runs_the_after_append_work_once_per_run_of_appends(
    store_factory: Callable[..., Any],
) -> None:
    store: MessageStore = await store_factory()
    settled: list[int] = []
    store.settle_listeners.append(lambda: settled.append(store.max_phy_offset))
    store.settle()
    assert settled == []  # nothing appended: nothing to do
    for i in range(3):
        store.append(batch("T", [f"m{i}".encode()]), "T", 0)
    assert settled == []
    store.settle()  # the caller appended all it had: the work runs now, once
    assert settled == [store.max_phy_offset]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(settled) == 1  # and not again at the loop's next turn

    store.append(batch("T", [b"late"]), "T", 0)  # nobody settles this one
    deadline = time.monotonic() + 5
    while len(settled) < 2:
        assert time.monotonic() < deadline, "the loop never settled the append"
        await asyncio.sleep(0)
    assert settled[-1] == store.max_phy_offset


async def test_new_queues_are_prepared_on_a_thread(store_factory: Any) -> None:
    """A new topic's queue files are made ahead of its messages (not on the event loop);
    a queue already written is left alone, and a queue written before its turn works."""
    store: MessageStore = await store_factory()
    store.append(batch("Old", [b"x"]), "Old", 0)
    await caught_up(store)
    old = store.queues.get(b"Old", 0)
    assert old is not None
    old_files = list(old.files.files)
    store.prepare_queues("Old", 2)  # queue 0 was written: only queue 1 is new
    store.prepare_queues("New", 4)
    store.append(batch("New", [b"first"]), "New", 2)  # may race its preparation
    deadline = time.monotonic() + 5
    while True:
        queues = [store.queues.get(b"New", q) for q in range(4)]
        if all(cq is not None and cq.files.files for cq in queues):
            break
        assert time.monotonic() < deadline, "the queues were not prepared"
        await asyncio.sleep(0.005)
    assert old.files.files == old_files
    for q in range(4):
        path = Path(store.config.consume_queue_dir) / "New" / str(q) / ("0" * 20)
        assert path.is_file(), path
    await caught_up(store)
    got = store.get_messages("New", 2, 0)
    assert [m.body for m in decode_records(got.to_bytes())] == [b"first"]
    got.release()
    for q in (0, 1, 3):
        assert store.get_messages("New", q, 0).status is not GetStatus.FOUND
        store.append(batch("New", [b"q%d" % q]), "New", q)
    await caught_up(store)
    for q in (0, 1, 3):
        got = store.get_messages("New", q, 0)
        assert [m.body for m in decode_records(got.to_bytes())] == [b"q%d" % q]
        got.release()
