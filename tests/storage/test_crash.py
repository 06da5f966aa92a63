"""Crash consistency of the message store, on real files.

A child process appends under SYNC_FLUSH and reports each acknowledged message; the test
SIGKILLs it and reopens the store (abnormal recovery, the abort file is left behind). Other
tests corrupt a record or tear the tail by hand, drop what a power loss would (unflushed
ConsumeQueue bytes), and check that a clean restart skips the recovery scan. The helpers
that check a whole store against itself are shared with ``test_store_model``.

Abnormal recovery checks the CommitLog from the checkpoint's flushed offsets on: what was
fsynced before the last checkpoint is trusted (RocketMQ likewise re-checks only from the
segment it picks by the checkpoint's times). So the tests that damage records write some
after a checkpoint and damage those, and they run three ways: after a crash, after a clean
shutdown whose abort file came back, and with a checkpoint as an older rocketq wrote it
(no offsets: recovery picks a segment by the times, and the damage lies in the last one).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import struct
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from rocketq.common.message import MessageExt
from rocketq.common.record import BLANK_MAGIC_CODE, POS_BODY, SIZE_MAGIC, decode_records
from rocketq.storage.mapped_file import offset_name
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import GetStatus, PutStatus
from tests.storage.crash_writer import (
    COMMIT_LOG_SIZE,
    QUEUES,
    TOPICS,
    encode_batch,
    random_body_size,
    store_config,
)

WRITER: Final = Path(__file__).with_name("crash_writer.py")
SEEDS: Final = (11, 23, 37, 41)
DEADLINE_S: Final = 30.0

QueueKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Acked:
    """A message the store acknowledged, and where it said the message went."""

    topic: str
    queue_id: int
    queue_offset: int
    phy: int
    size: int
    key: str
    digest: str

    @classmethod
    def parse(cls, line: str) -> Acked:
        topic, qid, qoff, phy, size, key, digest = line.split()
        return cls(topic, int(qid), int(qoff), int(phy), int(size), key, digest)


class SteppingClock:
    """A clock that moves ``step`` seconds per reading, so store times differ per batch
    and the checkpoint's times make abnormal recovery start at a late segment."""

    def __init__(self, start: float = 1_700_000_000.0, step: float = 0.25) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


# -- helpers shared with test_store_model -------------------------------------------------


async def wait_until(cond: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Let the event loop run until ``cond()`` holds; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.001)


async def wait_dispatched(store: MessageStore, timeout: float = 5.0) -> None:
    """Wait for dispatch to reach the committed offset; a dead dispatch task fails at once
    with its exception."""

    def caught_up() -> bool:
        for task in store._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise AssertionError(f"store task {task.get_name()} died") from task.exception()
        return store.dispatch_behind_bytes == 0

    await wait_until(caught_up, "dispatch to catch up", timeout)


async def crash_store(store: MessageStore) -> None:
    """What the process's death does, minus losing the page cache: the store's tasks and
    threads stop and its files close, nothing flushed, the abort file left behind."""
    await store.crash()
    for thread in (store.flusher._thread, store.logics_flusher._thread, store.warmer._thread):
        assert thread is None or not thread.is_alive(), f"{thread.name} did not stop"


def read_record(store: MessageStore, phy: int) -> MessageExt | None:
    view = store.message_by_offset(phy)
    if view is None:
        return None
    try:
        msgs = decode_records(bytes(view))
    finally:
        view.release()
    assert len(msgs) == 1, f"message_by_offset({phy}) returned {len(msgs)} records"
    return msgs[0]


def pull_all(store: MessageStore, topic: str, queue_id: int) -> list[MessageExt]:
    """Every message of one queue through ``get_messages``, from its min offset to its end."""
    out: list[MessageExt] = []
    offset = store.min_offset_in_queue(topic, queue_id)
    end = store.max_offset_in_queue(topic, queue_id)
    while offset < end:
        result = store.get_messages(topic, queue_id, offset, max_count=16)
        try:
            assert result.status is GetStatus.FOUND, (topic, queue_id, offset, result.status)
            got = decode_records(result.to_bytes())
        finally:
            result.release()
        assert len(got) == result.message_count > 0
        assert result.next_begin_offset == offset + len(got)
        out.extend(got)
        offset = result.next_begin_offset
    if end:
        after = store.get_messages(topic, queue_id, end)
        assert after.status is GetStatus.OFFSET_OVERFLOW_ONE, (topic, queue_id, after.status)
    return out


def walk_commitlog(store: MessageStore) -> list[MessageExt]:
    """Every record between the CommitLog's min and max offset, checking the blank records
    that end segments."""
    clog = store.commitlog
    out: list[MessageExt] = []
    if not clog.files.files:
        return out
    offset, end = clog.min_offset, clog.max_offset
    while offset < end:
        size = clog.record_size_at(offset)
        if size == 0:
            head = clog.read(offset, 8)
            assert head is not None, f"nothing readable at CommitLog offset {offset} < {end}"
            _, magic = SIZE_MAGIC.unpack_from(head)
            head.release()
            assert magic == BLANK_MAGIC_CODE, f"no record at CommitLog offset {offset} < {end}"
            offset = clog.next_segment_offset(offset)
            continue
        view = clog.read(offset, size)
        assert view is not None, f"record at {offset} (size {size}) runs past the end {end}"
        try:
            (msg,) = decode_records(bytes(view))
        finally:
            view.release()
        assert msg.commit_log_offset == offset
        out.append(msg)
        offset += size
    assert offset == end, f"the last record ends at {offset}, past the CommitLog end {end}"
    return out


def check_store(store: MessageStore) -> dict[QueueKey, list[MessageExt]]:
    """Check CommitLog, ConsumeQueues and reads agree; -> each queue's messages in order.

    Every record in the CommitLog has queue offset n for the n-th record of its queue;
    each ConsumeQueue holds exactly those records (position, size, queue) and nothing
    else; ``get_messages`` and ``message_by_offset`` return them; nothing past the
    CommitLog's end can be read.
    """
    assert store.committed_offset == store.max_phy_offset
    assert store.dispatch_behind_bytes == 0
    by_queue: dict[QueueKey, list[MessageExt]] = defaultdict(list)
    for msg in walk_commitlog(store):
        records = by_queue[(msg.topic, msg.queue_id)]
        assert msg.queue_offset == len(records), (
            f"{msg.topic}-{msg.queue_id}: record at {msg.commit_log_offset} has queue offset "
            f"{msg.queue_offset}, expected {len(records)}"
        )
        records.append(msg)
    for (topic_raw, queue_id), cq in store.queues.queues.items():
        topic = topic_raw.decode()
        records = by_queue.get((topic, queue_id), [])
        assert cq.min_offset == 0
        assert cq.max_offset == len(records), (
            f"ConsumeQueue {topic}-{queue_id} ends at {cq.max_offset}; the CommitLog holds "
            f"{len(records)} records of it"
        )
        for i, msg in enumerate(records):
            entry = cq.entry(i)
            assert entry is not None, f"ConsumeQueue {topic}-{queue_id} has no entry {i}"
            assert entry[:2] == (msg.commit_log_offset, msg.store_size), (topic, queue_id, i)
    for (topic, queue_id), records in by_queue.items():
        assert store.queues.get(topic.encode(), queue_id) is not None, (topic, queue_id)
        pulled = pull_all(store, topic, queue_id)
        assert [m.commit_log_offset for m in pulled] == [m.commit_log_offset for m in records]
        assert [m.body for m in pulled] == [m.body for m in records]
    end = store.max_phy_offset
    assert store.message_by_offset(end) is None
    last = store.commitlog.files.last
    if last is not None and end < last.end_offset:
        pos = end - last.file_from_offset
        assert not any(last.buf[pos : pos + 4096]), f"bytes written past the end {end}"
    return dict(by_queue)


def segment_path(root: Path, offset: int) -> Path:
    return root / "commitlog" / offset_name(offset - offset % COMMIT_LOG_SIZE)


# -- SIGKILL of a SYNC_FLUSH writer ---------------------------------------------------------


async def run_writer_until(root: Path, seed: int, k: int, stderr_path: Path) -> list[Acked]:
    """Start the writer, SIGKILL it once it has acknowledged ``k`` messages; -> every
    message it acknowledged (the lines already in the pipe count too)."""
    with stderr_path.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WRITER),
            str(root),
            str(seed),
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
        )
    acked: list[Acked] = []
    loop = asyncio.get_running_loop()
    try:
        assert proc.stdout is not None
        deadline = loop.time() + DEADLINE_S
        while len(acked) < k:
            remaining = deadline - loop.time()
            if remaining <= 0:
                pytest.fail(f"writer acknowledged only {len(acked)} of {k} messages in time")
            line = await asyncio.wait_for(proc.stdout.readline(), remaining)
            if not line.endswith(b"\n"):
                pytest.fail(f"writer exited early: {stderr_path.read_text()[-2000:]}")
            acked.append(Acked.parse(line.decode()))
        os.kill(proc.pid, signal.SIGKILL)
        rest = await asyncio.wait_for(proc.stdout.read(), DEADLINE_S)
        assert await asyncio.wait_for(proc.wait(), DEADLINE_S) == -signal.SIGKILL
    finally:
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
    complete = rest[: rest.rfind(b"\n") + 1].decode()
    acked.extend(Acked.parse(line) for line in complete.splitlines())
    return acked


@pytest.mark.parametrize("seed", SEEDS)
async def test_sigkill_keeps_every_acknowledged_message(tmp_path: Path, seed: int) -> None:
    k = random.Random(seed).randint(50, 2000)
    root = tmp_path / "store"
    acked = await run_writer_until(root, seed, k, tmp_path / "writer.err")
    assert len(acked) >= k
    assert (root / "abort").exists()

    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert store.recovery is not None and not store.recovery.fast
        await wait_dispatched(store)
        queues = check_store(store)
        end = store.max_phy_offset
        assert end >= max(a.phy + a.size for a in acked)
        for a in acked:
            msg = read_record(store, a.phy)
            assert msg is not None, f"acknowledged message {a.key} at {a.phy} is gone"
            assert hashlib.sha256(msg.body).hexdigest() == a.digest, a
            assert (msg.topic, msg.queue_id, msg.queue_offset) == (
                a.topic,
                a.queue_id,
                a.queue_offset,
            )
            assert (msg.store_size, msg.keys) == (a.size, [a.key])
            assert queues[(a.topic, a.queue_id)][a.queue_offset].commit_log_offset == a.phy
        # The index survived too: each acknowledged key finds its message.
        for a in acked[:: max(1, len(acked) // 50)] + acked[-5:]:
            found = store.messages_by_key(a.topic, a.key)
            offsets = [decode_records(bytes(v))[0].commit_log_offset for v in found]
            for v in found:
                v.release()
            assert offsets == [a.phy], f"key {a.key}: index gives {offsets}, expected {a.phy}"

        # New appends continue every queue's offsets with no gap or duplicate.
        rng = random.Random(seed + 1)
        before = {key: len(msgs) for key, msgs in queues.items()}
        for topic in TOPICS:
            for queue_id in range(QUEUES):
                batch = encode_batch(
                    topic,
                    [rng.randbytes(random_body_size(rng)) for _ in range(3)],
                    [f"after-{topic}-{queue_id}-{i}" for i in range(3)],
                )
                result = await store.put(batch.blob, topic, queue_id)
                assert result.status is PutStatus.PUT_OK
                assert result.append.wrote_offset >= end
                assert result.append.queue_offset == before.get((topic, queue_id), 0)
        await wait_dispatched(store)
        after = check_store(store)
        for key, msgs in after.items():
            assert len(msgs) == before.get(key, 0) + 3
            assert [m.body for m in msgs[: before.get(key, 0)]] == [
                m.body for m in queues.get(key, [])
            ]
    finally:
        await store.shutdown()

    # And a clean restart after all that finds the same.
    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert store.recovery is not None and store.recovery.fast
        await wait_dispatched(store)
        again = check_store(store)
        assert {k: [m.body for m in v] for k, v in again.items()} == {
            k: [m.body for m in v] for k, v in after.items()
        }
    finally:
        await store.shutdown()


# -- corruption, torn tail, clean restart -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Written:
    topic: str
    queue_id: int
    queue_offset: int
    phy: int
    size: int
    key: str
    body: bytes


async def write_messages(
    store: MessageStore, rng: random.Random, count: int, *, first_key: int = 0
) -> list[Written]:
    """Append about ``count`` messages in batches of 1..8 to every queue; nonempty bodies."""
    out: list[Written] = []
    while len(out) < count:
        topic, queue_id = rng.choice(TOPICS), rng.randrange(QUEUES)
        n = rng.randint(1, 8)
        bodies = [rng.randbytes(max(1, random_body_size(rng))) for _ in range(n)]
        keys = [f"w{first_key + len(out) + i}" for i in range(n)]
        batch = encode_batch(topic, bodies, keys)
        result = await store.put(batch.blob, topic, queue_id)
        assert result.status is PutStatus.PUT_OK
        phy = result.append.wrote_offset
        for i, (size, key, body) in enumerate(
            zip(batch.sizes, batch.keys, batch.bodies, strict=True)
        ):
            out.append(
                Written(topic, queue_id, result.append.queue_offset + i, phy, size, key, body)
            )
            phy += size
    return out


CHECKPOINT_OFFSETS: Final = struct.Struct(">qqq")  # after the six longs of older files
STOP_MODES: Final = ("crash", "shutdown", "old-checkpoint")


@dataclass(frozen=True, slots=True)
class Written2:
    """Messages written before and after a checkpoint, and that checkpoint's bytes."""

    before: list[Written]
    after: list[Written]
    checkpoint: bytes

    @property
    def all(self) -> list[Written]:
        return self.before + self.after

    @property
    def scan_from(self) -> int:
        """Where recovery with this checkpoint starts checking: the lower of the
        CommitLog's and the ConsumeQueues' flushed offsets."""
        physic, logics, _ = CHECKPOINT_OFFSETS.unpack_from(self.checkpoint, 48)
        return min(physic, logics)


async def write_past_checkpoint(
    store: MessageStore, rng: random.Random, before: int, after: int
) -> Written2:
    """Write about ``before`` messages, flush them and write the checkpoint, keep its bytes,
    then write about ``after`` more (the records a crash's recovery must check)."""
    first = await write_messages(store, rng, before)
    await wait_dispatched(store)
    store.flush_logics(thorough=True)
    raw = Path(store.config.checkpoint_path).read_bytes()
    assert min(CHECKPOINT_OFFSETS.unpack_from(raw, 48)[:2]) == first[-1].phy + first[-1].size
    rest = await write_messages(store, rng, after, first_key=len(first))
    await wait_dispatched(store)
    return Written2(first, rest, raw)


async def stop(store: MessageStore, how: str, checkpoint: bytes | None = None) -> None:
    """Stop the store so that the next start runs the abnormal (scanning) recovery.

    ``crash``: as a killed process, with ``checkpoint`` as the last one it wrote (the flush
    thread may have written a later one meanwhile). ``shutdown``: a clean stop, every file
    flushed, then the abort file comes back and the checkpoint is ``checkpoint`` again.
    ``old-checkpoint``: a clean stop, the abort file back, and the checkpoint as an older
    rocketq wrote it (the six longs, no flushed offsets).
    """
    path = Path(store.config.checkpoint_path)
    if how == "crash":
        await crash_store(store)
    else:
        await store.shutdown()
        Path(store.config.abort_path).touch()
    if how == "old-checkpoint":
        raw = path.read_bytes()
        path.write_bytes(raw[:48].ljust(len(raw), b"\0"))
    elif checkpoint is not None:
        path.write_bytes(checkpoint)


def check_scan_start(store: MessageStore, how: str, written: Written2) -> None:
    """The recovery checked from the checkpoint's offsets, or (older checkpoint) from the
    start of a segment chosen by its times."""
    recovery = store.recovery
    assert recovery is not None
    if how == "old-checkpoint":
        assert not recovery.from_checkpoint
        assert recovery.scan_from % COMMIT_LOG_SIZE == 0
        assert recovery.dispatch_from == recovery.scan_from
    else:
        assert recovery.from_checkpoint
        assert recovery.scan_from == written.scan_from
        assert recovery.scanned_records == sum(
            1 for w in written.all if w.phy >= written.scan_from and w.phy < recovery.max_offset
        )


def expected_queues(written: list[Written]) -> dict[QueueKey, list[bytes]]:
    out: dict[QueueKey, list[bytes]] = defaultdict(list)
    for w in written:
        assert w.queue_offset == len(out[(w.topic, w.queue_id)])
        out[(w.topic, w.queue_id)].append(w.body)
    return dict(out)


def bodies(queues: dict[QueueKey, list[MessageExt]]) -> dict[QueueKey, list[bytes]]:
    return {key: [m.body for m in msgs] for key, msgs in queues.items() if msgs}


async def check_appends_continue(store: MessageStore, survivors: list[Written]) -> None:
    """One more message per queue lands right after the survivors, and its key finds it."""
    expected = expected_queues(survivors)
    for topic in TOPICS:
        for queue_id in range(QUEUES):
            body = f"after recovery {topic}-{queue_id}".encode()
            key = f"new-{topic}-{queue_id}"
            batch = encode_batch(topic, [body], [key])
            result = await store.put(batch.blob, topic, queue_id)
            assert result.status is PutStatus.PUT_OK
            assert result.append.queue_offset == len(expected.get((topic, queue_id), []))
            expected.setdefault((topic, queue_id), []).append(body)
    await wait_dispatched(store)
    assert bodies(check_store(store)) == expected
    for topic in TOPICS:
        for queue_id in range(QUEUES):
            found = store.messages_by_key(topic, f"new-{topic}-{queue_id}")
            got = [decode_records(bytes(v))[0].body for v in found]
            for v in found:
                v.release()
            assert got == [f"after recovery {topic}-{queue_id}".encode()], (
                f"messages_by_key after recovery: new message of {topic}-{queue_id} not found"
            )


async def recover_after(
    root: Path, written: list[Written], cut_at: int
) -> tuple[MessageStore, list[Written]]:
    """Reopen the store; it must end exactly at ``cut_at`` with every record before it."""
    store = MessageStore(store_config(root), clock=SteppingClock(start=1_800_000_000.0))
    await store.start()
    assert store.recovery is not None
    assert not store.recovery.fast
    assert store.max_phy_offset == cut_at, (
        f"recovery ended the CommitLog at {store.max_phy_offset}, not at the damaged record "
        f"at {cut_at} ({store.recovery.scanned_records} records passed the check)"
    )
    assert store.recovery.torn_tail
    await wait_dispatched(store)
    survivors = [w for w in written if w.phy < cut_at]
    assert bodies(check_store(store)) == expected_queues(survivors)
    for w in survivors[-20:]:
        msg = read_record(store, w.phy)
        assert msg is not None and msg.body == w.body and msg.queue_offset == w.queue_offset
    for w in written[len(survivors) :]:
        assert read_record(store, w.phy) is None
    return store, survivors


@pytest.mark.parametrize("how", STOP_MODES)
async def test_corrupt_body_cuts_the_log_before_the_bad_record(tmp_path: Path, how: str) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root), clock=SteppingClock())
    await store.start()
    two = await write_past_checkpoint(store, random.Random(f"corrupt-{how}"), 300, 150)
    written = two.all
    await stop(store, how, two.checkpoint)

    # A record written after the checkpoint, in the last segment (where a recovery by the
    # times of an older checkpoint starts).
    last_segment = written[-1].phy - written[-1].phy % COMMIT_LOG_SIZE
    in_last = [w for w in two.after if w.phy >= last_segment]
    assert len(in_last) >= 5, "write more: the last segment should hold several records"
    victim = in_last[len(in_last) // 2]
    path = segment_path(root, victim.phy)
    at = victim.phy % COMMIT_LOG_SIZE + POS_BODY + len(victim.body) // 2
    with path.open("r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x5A]))

    store, survivors = await recover_after(root, written, victim.phy)
    try:
        check_scan_start(store, how, two)
        assert survivors == written[: written.index(victim)]
        await check_appends_continue(store, survivors)
    finally:
        await store.shutdown()


@pytest.mark.parametrize("how", STOP_MODES)
async def test_torn_tail_is_cut_at_the_last_whole_record(tmp_path: Path, how: str) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root), clock=SteppingClock())
    await store.start()
    two = await write_past_checkpoint(store, random.Random(f"torn-{how}"), 200, 100)
    written = two.all
    await stop(store, how, two.checkpoint)

    victim = written[-1]
    half = victim.size // 2
    with segment_path(root, victim.phy).open("r+b") as f:
        f.seek(victim.phy % COMMIT_LOG_SIZE + half)
        f.write(bytes(victim.size - half))

    store, survivors = await recover_after(root, written, victim.phy)
    try:
        check_scan_start(store, how, two)
        assert survivors == written[:-1]
        await check_appends_continue(store, survivors)
    finally:
        await store.shutdown()


async def test_clean_restart_does_not_scan(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    written = await write_messages(store, random.Random("clean"), 300)
    await store.shutdown()
    assert not (root / "abort").exists()

    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert store.recovery is not None
        assert store.recovery.fast
        assert store.recovery.scanned_records == 0
        assert not store.recovery.torn_tail
        assert store.max_phy_offset == written[-1].phy + written[-1].size
        await wait_dispatched(store)
        assert bodies(check_store(store)) == expected_queues(written)
        await check_appends_continue(store, written)
    finally:
        await store.shutdown()


# -- a segment that ends in a blank record shorter than a record header ----------------------


async def fill_segment_leaving(store: MessageStore, free: int) -> int:
    """Append one message that leaves exactly ``free`` bytes at the end of segment 0, then
    a small one that no longer fits (so a ``free``-byte blank record ends the segment);
    -> the second message's offset."""
    topic, key = TOPICS[0], "filler"
    overhead = len(encode_batch(topic, [b""], [key]).blob)
    filler = encode_batch(topic, [bytes(COMMIT_LOG_SIZE - free - overhead)], [key])
    assert len(filler.blob) == COMMIT_LOG_SIZE - free
    assert (await store.put(filler.blob, topic, 0)).status is PutStatus.PUT_OK
    small = encode_batch(topic, [b"next segment"], ["small"])
    result = await store.put(small.blob, topic, 0)
    assert result.status is PutStatus.PUT_OK
    assert result.append.wrote_offset == COMMIT_LOG_SIZE
    return result.append.wrote_offset


@pytest.mark.parametrize("free", [8, 40, 87])
async def test_short_end_of_file_blank_is_dispatched(tmp_path: Path, free: int) -> None:
    store = MessageStore(store_config(tmp_path / "store"))
    await store.start()
    try:
        await fill_segment_leaving(store, free)
        await wait_dispatched(store)
        queues = check_store(store)
        assert [m.queue_offset for m in queues[(TOPICS[0], 0)]] == [0, 1]
    finally:
        await crash_store(store)


@pytest.mark.parametrize("free", [8, 40, 87])
async def test_short_end_of_file_blank_survives_recovery(tmp_path: Path, free: int) -> None:
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    second = await fill_segment_leaving(store, free)
    await crash_store(store)

    store = MessageStore(store_config(root))
    await store.start()
    try:
        assert store.max_phy_offset > second
        await wait_dispatched(store)
        queues = check_store(store)
        assert [m.commit_log_offset for m in queues[(TOPICS[0], 0)]] == [0, second]
    finally:
        await store.shutdown()


# -- what a power loss leaves behind ----------------------------------------------------------


def zero_from(path: Path, start: int) -> None:
    """Overwrite ``path`` with zeros from ``start`` to its end (what never reached disk)."""
    size = path.stat().st_size
    if start >= size:
        return
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(size - start), start)
    finally:
        os.close(fd)


@pytest.mark.parametrize("part", ["topic", "properties"])
async def test_torn_tail_in_topic_or_properties_is_cut(tmp_path: Path, part: str) -> None:
    """A record whose last bytes (topic, properties) never reached the disk is torn even
    though its body, the only part with a CRC, is whole."""
    root = tmp_path / "store"
    store = MessageStore(store_config(root), clock=SteppingClock())
    await store.start()
    written = await write_messages(store, random.Random(f"tail-{part}"), 20)
    await wait_dispatched(store)
    await crash_store(store)

    victim = written[-1]
    topic_at = POS_BODY + len(victim.body) + 1
    start = topic_at + 2 if part == "topic" else topic_at + len(victim.topic) + 2
    zero_from(segment_path(root, victim.phy), victim.phy % COMMIT_LOG_SIZE + start)

    store, survivors = await recover_after(root, written, victim.phy)
    try:
        assert survivors == written[:-1]
        await check_appends_continue(store, survivors)
    finally:
        await store.shutdown()


async def test_consume_queue_tail_lost_across_two_files_is_rebuilt(tmp_path: Path) -> None:
    """Power loss before any ConsumeQueue flush: the full first file and the second file
    of a queue are both zeros on disk, the CommitLog (SYNC_FLUSH) is whole. Recovery must
    rebuild every entry, not count 64 zero entries as written."""
    root = tmp_path / "store"
    config = store_config(root, flush_interval_consume_queue=3_600_000)
    store = MessageStore(config)
    await store.start()
    written: list[Written] = []
    for i in range(70):
        batch = encode_batch(TOPICS[0], [f"body {i}".encode()], [f"k{i}"])
        result = await store.put(batch.blob, TOPICS[0], 0)
        assert result.status is PutStatus.PUT_OK
        phy = result.append.wrote_offset
        written.append(Written(TOPICS[0], 0, i, phy, len(batch.blob), f"k{i}", batch.bodies[0]))
    await wait_dispatched(store)
    await crash_store(store)
    cq = store.queues.get(TOPICS[0].encode(), 0)
    assert cq is not None and len(cq.files.files) == 2
    for qf in cq.files.files:
        assert qf.flushed_position == 0
        zero_from(qf.path, qf.flushed_position)

    store = MessageStore(config)
    await store.start()
    try:
        await wait_dispatched(store)
        assert bodies(check_store(store)) == expected_queues(written)
    finally:
        await store.shutdown()


def offsets_by_key(store: MessageStore, topic: str, key: str) -> list[int]:
    views = store.messages_by_key(topic, key)
    try:
        return [decode_records(bytes(v))[0].commit_log_offset for v in views]
    finally:
        for v in views:
            v.release()


@pytest.mark.parametrize("how", ["crash", "shutdown"])
async def test_abnormal_restart_indexes_each_message_once(tmp_path: Path, how: str) -> None:
    """Recovery dispatches again from a segment start; the index must skip every message
    it already holds, including the newest one."""
    root = tmp_path / "store"
    store = MessageStore(store_config(root))
    await store.start()
    written = await write_messages(store, random.Random(f"index-{how}"), 100)
    await wait_dispatched(store)
    store.flush_logics(thorough=True)  # the checkpoint covers the index: recovery keeps it
    await stop(store, how)

    store = MessageStore(store_config(root))
    await store.start()
    try:
        await wait_dispatched(store)
        for w in written:
            assert offsets_by_key(store, w.topic, w.key) == [w.phy], w.key
    finally:
        await store.shutdown()
