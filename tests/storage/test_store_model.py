"""A model-based (stateful) test of the message store across restarts and crashes.

The model is, per (topic, queue), the list of messages the store must hold. Appends add to
it; a clean restart keeps everything; a crash keeps what was flushed and, of the unflushed
rest, what lies before a random cut point (a power loss drops unflushed CommitLog bytes and,
optionally, unflushed ConsumeQueue bytes). After every step, once dispatch has caught up,
the ConsumeQueues, ``get_messages`` and the key index must match the model exactly.

The store's async methods run on one private event loop per machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rocketq.common.record import decode_records
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus
from tests.storage.crash_writer import COMMIT_LOG_SIZE, QUEUES, TOPICS, encode_batch, store_config
from tests.storage.test_crash import (
    QueueKey,
    SteppingClock,
    bodies,
    check_store,
    crash_store,
    wait_dispatched,
    zero_from,
)

T = TypeVar("T")

# Eight entries per ConsumeQueue file, so queues roll over within a few steps.
CQ_ENTRIES: Final = 8
# The logics flusher never runs by itself: CQ flushes and checkpoints happen only in the
# flush rule, at start and at shutdown, which keeps examples reproducible.
NO_PERIODIC_LOGICS_FLUSH: Final = 3_600_000

body_sizes = st.one_of(st.integers(0, 1500), st.integers(6000, 12000))


@dataclass(frozen=True, slots=True)
class Sent:
    key: str
    body: bytes
    end: int  # CommitLog offset just past the record


def make_body(n: int, size: int) -> bytes:
    return (n.to_bytes(4, "big") * (size // 4 + 1))[:size]


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="rocketq-model-"))
        self.root = self.dir / "store"
        self.loop = asyncio.new_event_loop()
        self.clock = SteppingClock(step=0.5)
        self.model: dict[QueueKey, list[Sent]] = {(t, q): [] for t in TOPICS for q in range(QUEUES)}
        # Every byte below this CommitLog offset was acknowledged as flushed.
        self.durable_end = 0
        self.sent = 0
        self.store = self.open()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def open(self) -> MessageStore:
        config = store_config(
            self.root, cq_entries=CQ_ENTRIES, flush_interval_consume_queue=NO_PERIODIC_LOGICS_FLUSH
        )
        store = MessageStore(config, clock=self.clock)
        self.run(store.start())
        return store

    def teardown(self) -> None:
        try:
            if self.store.running:
                # A failing step already reported the problem; just release the files.
                with contextlib.suppress(Exception):
                    self.run(self.store.shutdown())
            self.run(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- rules ----------------------------------------------------------------------------

    @rule(
        topic=st.sampled_from(TOPICS),
        queue_id=st.integers(0, QUEUES - 1),
        sizes=st.lists(body_sizes, min_size=1, max_size=5),
        wait_flush=st.booleans(),
    )
    def append(self, topic: str, queue_id: int, sizes: list[int], wait_flush: bool) -> None:
        first = self.sent
        self.sent += len(sizes)
        batch = encode_batch(
            topic,
            [make_body(first + i, size) for i, size in enumerate(sizes)],
            [f"m{first + i}" for i in range(len(sizes))],
        )
        if wait_flush:
            put = self.run(self.store.put(batch.blob, topic, queue_id))
            assert put.status is PutStatus.PUT_OK
            result = put.append
            self.durable_end = max(self.durable_end, result.end_offset)
        else:
            result = self.store.append(batch.blob, topic, queue_id)
        queue = self.model[(topic, queue_id)]
        assert result.queue_offset == len(queue), (
            f"{topic}-{queue_id}: batch got queue offset {result.queue_offset}, "
            f"the queue holds {len(queue)} messages"
        )
        end = result.wrote_offset
        for key, body, size in zip(batch.keys, batch.bodies, batch.sizes, strict=True):
            end += size
            queue.append(Sent(key, body, end))
        assert end == result.end_offset

    @rule()
    def flush(self) -> None:
        """Wait for dispatch and the CommitLog fsync, then flush queues and checkpoint."""
        store = self.store
        self.run(wait_dispatched(store))
        end = store.max_phy_offset
        self.run(asyncio.wait_for(store.flusher.wait_flushed(end), 5))
        store.flush_logics()
        self.durable_end = max(self.durable_end, end)

    @rule()
    def restart(self) -> None:
        self.run(self.store.shutdown())
        self.store = self.open()
        recovery = self.store.recovery
        assert recovery is not None and recovery.fast and recovery.scanned_records == 0
        self.durable_end = self.store.max_phy_offset

    @rule(cut=st.integers(0, 1000), drop_queue_tails=st.booleans())
    def crash(self, cut: int, drop_queue_tails: bool) -> None:
        """Power loss: unflushed CommitLog bytes past a cut point vanish (and unflushed
        ConsumeQueue bytes with ``drop_queue_tails``), then the store restarts."""
        old = self.store
        self.run(crash_store(old))
        flushed = old.commitlog.files.flushed_offset
        written = old.max_phy_offset
        assert flushed >= self.durable_end, (
            f"the CommitLog is flushed to {flushed}, but writes up to {self.durable_end} "
            "were acknowledged as flushed"
        )
        cut_at = flushed + (written - flushed) * cut // 1000
        for mf in old.commitlog.files.files:
            if mf.end_offset > cut_at:
                zero_from(mf.path, max(0, cut_at - mf.file_from_offset))
        if drop_queue_tails:
            for cq in old.queues.queues.values():
                for qf in cq.files.files:
                    zero_from(qf.path, qf.flushed_position)

        had_segments = bool(old.commitlog.files.files)

        self.store = self.open()
        recovery = self.store.recovery
        assert recovery is not None and recovery.fast is not had_segments
        for queue in self.model.values():
            queue[:] = [s for s in queue if s.end <= cut_at]
        # The end is the cut, or the end of a segment whose closing blank record survived.
        end = self.store.max_phy_offset
        assert end <= cut_at or end % COMMIT_LOG_SIZE == 0, f"recovered end {end} > {cut_at}"
        self.durable_end = end

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        store = self.store
        self.run(wait_dispatched(store))
        expected = {key: [s.body for s in queue] for key, queue in self.model.items() if queue}
        assert bodies(check_store(store)) == expected
        for (topic, queue_id), queue in self.model.items():
            assert store.max_offset_in_queue(topic, queue_id) == len(queue)

    @invariant()
    def keys_find_their_messages(self) -> None:
        store = self.store
        self.run(wait_dispatched(store))
        for (topic, _), queue in self.model.items():
            for sent in queue:
                views = store.messages_by_key(topic, sent.key)
                try:
                    found = [decode_records(bytes(v))[0].body for v in views]
                finally:
                    for v in views:
                        v.release()
                assert found == [sent.body], f"messages_by_key({topic!r}, {sent.key!r})"


StoreMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
TestStoreModel = StoreMachine.TestCase
