"""Recovery bounded by the tail: after a crash the store checks the CommitLog from the
checkpoint's flushed offsets only, takes appends as soon as that check is done, and
re-dispatches in the background; the checkpoint claims only what is on disk."""

from __future__ import annotations

import random
from pathlib import Path

from rocketq.common.record import BLANK, BLANK_MAGIC_CODE, encode_host
from rocketq.storage.checkpoint import Checkpoint, CheckpointFile
from rocketq.storage.commitlog import BLANK_RECORD, CommitLog, QueueKey, RecordInfo, check_record
from rocketq.storage.message_store import MessageStore
from rocketq.storage.recovery import check_segment
from rocketq.storage.results import GetStatus
from tests.storage.conftest import batch, small_config
from tests.storage.crash_writer import COMMIT_LOG_SIZE, TOPICS, encode_batch, store_config
from tests.storage.test_crash import (
    bodies,
    check_store,
    crash_store,
    expected_queues,
    segment_path,
    wait_dispatched,
    write_past_checkpoint,
    zero_from,
)


async def test_crash_recovery_checks_only_what_the_checkpoint_does_not_cover(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    two = await write_past_checkpoint(store, random.Random("bounded"), 600, 40)
    end = store.max_phy_offset
    await crash_store(store)
    Path(store.config.checkpoint_path).write_bytes(two.checkpoint)
    assert two.scan_from >= 4 * COMMIT_LOG_SIZE, "several segments lie before the checkpoint"

    store = MessageStore(store_config(root))
    await store.start()
    try:
        recovery = store.recovery
        assert recovery is not None and not recovery.fast and recovery.from_checkpoint
        assert recovery.scan_from == two.scan_from
        assert recovery.scanned_records == len(two.after)
        assert recovery.scanned_bytes == end - two.scan_from
        # Queues and index were flushed up to the same offset: re-dispatch starts there.
        assert recovery.dispatch_from == two.scan_from
        assert recovery.max_offset == end and not recovery.torn_tail
        await wait_dispatched(store)
        assert bodies(check_store(store)) == expected_queues(two.all)
    finally:
        await store.shutdown()


async def test_a_record_torn_at_the_checkpoint_offset_is_cut_there(tmp_path: Path) -> None:
    """The first record past the checkpoint's offset is garbage (a write torn right
    there): no record begins at the offset, so its segment is checked from the start, and
    the log ends at the offset."""
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    two = await write_past_checkpoint(store, random.Random("torn-at-f"), 300, 30)
    await crash_store(store)
    Path(store.config.checkpoint_path).write_bytes(two.checkpoint)
    victim = two.after[0]
    assert victim.phy == two.scan_from
    with segment_path(root, victim.phy).open("r+b") as f:
        f.seek(victim.phy % COMMIT_LOG_SIZE + 4)  # the magic code
        f.write(b"\x5a\x5a")

    store = MessageStore(store_config(root))
    await store.start()
    try:
        recovery = store.recovery
        assert recovery is not None and not recovery.from_checkpoint
        assert recovery.scan_from == two.scan_from - two.scan_from % COMMIT_LOG_SIZE
        assert recovery.max_offset == two.scan_from and recovery.torn_tail
        await wait_dispatched(store)
        assert bodies(check_store(store)) == expected_queues(two.before)
    finally:
        await store.shutdown()


async def test_appends_go_on_while_redispatch_catches_up(tmp_path: Path) -> None:
    """A power loss took every ConsumeQueue byte written since the checkpoint. The store
    starts before re-dispatch rebuilt them: appends continue each queue's offsets (learned
    from the records checked), and a pull at an offset stored but not dispatched yet is
    told to wait (OFFSET_OVERFLOW_ONE), not that its offset is bad."""
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    two = await write_past_checkpoint(store, random.Random("background"), 300, 200)
    await crash_store(store)
    Path(store.config.checkpoint_path).write_bytes(two.checkpoint)
    for cq in store.queues.queues.values():
        for qf in cq.files.files:
            zero_from(qf.path, qf.flushed_position)

    store = MessageStore(store_config(root))
    await store.start()
    try:
        # Nothing has run on the loop since start() returned: no re-dispatch yet.
        assert store.dispatch_behind_bytes == store.max_phy_offset - two.scan_from > 0
        expected = expected_queues(two.all)
        lagging = 0
        for (topic, queue_id), queue in expected.items():
            stored = len(queue)
            if store.max_offset_in_queue(topic, queue_id) < stored:
                lagging += 1
                got = store.get_messages(topic, queue_id, stored)
                assert got.status is GetStatus.OFFSET_OVERFLOW_ONE, (topic, queue_id, got)
            body = f"new {topic}-{queue_id}".encode()
            result = store.append(encode_batch(topic, [body], ["k"]).blob, topic, queue_id)
            assert result.queue_offset == stored
            queue.append(body)
        assert lagging, "some queue must still lack entries when start() returns"
        await wait_dispatched(store)
        assert bodies(check_store(store)) == expected
    finally:
        await store.shutdown()


def test_an_older_checkpoint_file_reads_its_new_fields_as_zero(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    old = b"".join(v.to_bytes(8, "big", signed=True) for v in (11, 22, 33, 44, -1, -1))
    path.write_bytes(old.ljust(4096, b"\0"))
    f = CheckpointFile(path)
    cp = f.read()
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
        11,
        22,
        33,
    )
    assert (cp.physic_flushed_offset, cp.logics_flushed_offset, cp.index_flushed_offset) == (
        0,
        0,
        0,
    )
    assert not cp.has_offsets
    cp.physic_flushed_offset, cp.logics_flushed_offset, cp.index_flushed_offset = (7, 5, 3)
    f.write(cp)
    again = f.read()
    assert again == cp and again.has_offsets
    f.close()
    assert path.stat().st_size == 4096


async def test_the_checkpoint_claims_only_flushed_consume_queue_entries(
    tmp_path: Path,
) -> None:
    """A periodic round flushes a queue with 2 dirty pages but not one with a single
    entry: the checkpoint's logics offset stops at that entry and its logics timestamp
    does not move; a thorough round flushes both and moves them to what was built."""
    store = MessageStore(
        small_config(
            tmp_path / "store",
            mapped_file_size_commit_log=1 << 20,
            mapped_file_size_consume_queue=20 * 1000,
            flush_consume_queue_thorough_interval=3_600_000,
            flush_interval_consume_queue=3_600_000,
        )
    )
    await store.start()
    try:
        path = Path(store.config.checkpoint_path)
        store.append(batch(TOPICS[1], [b"lonely"]), TOPICS[1], 0)
        lonely = 0
        for _ in range(25):  # 25 x 20 entries: 10,000 bytes, 2 dirty pages
            store.append(batch(TOPICS[0], [b"x"] * 20), TOPICS[0], 0)
        await wait_dispatched(store)
        before = CheckpointFile(path).read()
        store.flush_logics()
        cp = CheckpointFile(path).read()
        busy = store.queues.get(TOPICS[0].encode(), 0)
        assert busy is not None and busy.first_unflushed_offset() is None
        assert cp.logics_flushed_offset == lonely
        assert cp.logics_msg_timestamp == before.logics_msg_timestamp
        assert cp.physic_flushed_offset == store.flusher.flushed[0]
        store.flush_logics(thorough=True)
        cp = CheckpointFile(path).read()
        assert cp.logics_flushed_offset == store.max_phy_offset
        assert cp.index_flushed_offset == store.max_phy_offset
        assert cp.logics_msg_timestamp > 0
        assert store.queues.dirty_count == 0
    finally:
        await store.shutdown()


async def test_every_round_is_thorough_with_a_zero_interval(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path / "store", flush_consume_queue_thorough_interval=0))
    await store.start()
    try:
        store.append(batch("T", [b"one"]), "T", 0)
        await wait_dispatched(store)
        store.flush_logics()
        cq = store.queues.get(b"T", 0)
        assert cq is not None and cq.first_unflushed_offset() is None
        assert CheckpointFile(Path(store.config.checkpoint_path)).read().logics_flushed_offset == (
            store.max_phy_offset
        )
    finally:
        await store.shutdown()


def test_checkpoint_offsets_are_known_only_once_recorded() -> None:
    assert not Checkpoint().has_offsets
    assert Checkpoint(physic_flushed_offset=1).has_offsets


def _segment(rng: random.Random, size: int) -> bytes:
    """A segment of stamped records of random bodies and keys, closed by a blank record."""
    log = CommitLog(
        Path("/nonexistent"),
        file_size=size,
        max_message_size=1 << 20,
        store_host=encode_host("10.0.0.1:10911"),
        clock_ms=lambda: 1_700_000_000_000,
    )
    out = bytearray()
    qoffs: dict[tuple[str, int], int] = {}
    while True:
        topic, queue_id = rng.choice(TOPICS), rng.randrange(3)
        bodies = [rng.randbytes(rng.randint(0, 300)) for _ in range(rng.randint(1, 4))]
        blob = bytearray(encode_batch(topic, bodies, [f"k{len(out)}"] * len(bodies)).blob)
        if len(out) + len(blob) + 8 > size:
            break
        first = qoffs.get((topic, queue_id), 0)
        _, qoffs[(topic, queue_id)] = log.stamp(
            blob, topic.encode(), queue_id, len(out), first, 1_700_000_000_000
        )
        out += blob
    out += BLANK.pack(size - len(out), BLANK_MAGIC_CODE)
    return bytes(out.ljust(size, b"\0"))


def _check_one_by_one(buf: bytes, size: int) -> tuple[int, int, bool, dict[QueueKey, int]]:
    pos, records, offsets = 0, 0, {}
    while pos < size:
        info = check_record(buf, pos, size, 0, check_crc=True)
        if info == BLANK_RECORD:
            return pos, records, True, offsets
        if not isinstance(info, RecordInfo):
            break
        if info.sys_flag & 0xC not in (0x4, 0xC):
            key = (info.topic, info.queue_id)
            offsets[key] = max(offsets.get(key, 0), info.queue_offset + 1)
        records += 1
        pos += info.size
    return pos, records, False, offsets


def test_the_segment_check_finds_what_the_record_check_finds() -> None:
    """recovery.check_segment (one header unpack per record) stops where check_record,
    applied record by record, finds the first bad one: after flipped bytes anywhere and
    zeroed tails, with the same queue offsets."""
    rng = random.Random("segment-check")
    size = 16 * 1024
    clean = _segment(rng, size)
    _, whole, closed, _ = _check_one_by_one(clean, size)
    assert whole > 20 and closed
    for trial in range(400):
        buf = bytearray(clean)
        if trial % 2:
            at = rng.randrange(size)
            buf[at] ^= 1 << rng.randrange(8)
        else:
            at = rng.randrange(size)
            buf[at:] = bytes(size - at)
        offsets: dict[QueueKey, int] = {}
        pos, records, end = check_segment(
            bytes(buf), 0, size, 0, check_crc=True, queue_offsets=offsets
        )
        assert (pos, records, end, offsets) == _check_one_by_one(bytes(buf), size), trial
