"""``rocketq bench store``: the message store alone against plain ``os.write`` on the same disk.

The store run appends ``messages`` records of ``size`` body bytes in batches of ``batch``
through :class:`rocketq.storage.message_store.MessageStore` (``await store.put``), with the store's
dispatch task (ConsumeQueue and index entries), flush threads and cleaner running as they
do in a broker. The raw run then writes the very same bytes in the same batch sizes with
``os.write`` to one file in the same directory (same file system), from one writer:

* ``flush="async"`` (ASYNC_FLUSH): ``writers`` coroutines (default 1) put in a loop, each
  yielding to the event loop after every put as a request handler does between requests,
  so dispatch competes with the appends for the one core. The raw run writes to the page
  cache, no fsync.
* ``flush="sync"`` (SYNC_FLUSH): ``writers`` coroutines (default 32) each wait for their
  group-commit fsync. The raw run is the naive way: ``os.write`` then ``os.fsync`` per batch.

Rates:

* ``msgs_per_s`` = messages / seconds from the first put until every put has returned AND
  dispatch has caught up (``dispatch_behind_bytes == 0``): the rate a broker sustains.
* ``append_msgs_per_s`` = messages / seconds until the last put returned.
* ``dispatch_msgs_per_s`` = records dispatched / seconds the dispatcher itself was busy.
* ``store_mb_s`` = stored bytes over the ``msgs_per_s`` time; ``raw_mb_s`` = the same bytes
  over the raw run's time; ``ratio`` = ``store_mb_s / raw_mb_s``.

Batches are encoded once, before the clock starts: a handful of distinct blobs, each message
with tags and a unique id (UNIQ_KEY) from :class:`UniqIdGenerator`, so dispatch builds
ConsumeQueue and index entries as in production. Nothing but the puts is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from rocketq.bench.report import (
    MB,
    BenchOptionError,
    LatencySummary,
    json_line,
    rate,
    summarize_ns,
    tps_line,
)
from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import RocketqSystemError
from rocketq.common.message import DEFAULT_TOPIC_QUEUE_NUMS, Message
from rocketq.common.message_id import UniqIdGenerator
from rocketq.common.record import END_FILE_MIN_BLANK_LENGTH, encode_host, encode_message
from rocketq.storage.dispatch import Dispatcher
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus

FlushMode = Literal["async", "sync"]

TOPIC: Final = "BenchmarkTest"
QUEUES: Final = DEFAULT_TOPIC_QUEUE_NUMS
TAGS: Final = ("TagA", "TagB", "TagC", "TagD")
DEFAULT_SEGMENT_SIZE: Final = 1 << 30
DEFAULT_DIR: Final = os.path.join("data", "bench-store")
# Distinct pre-encoded batches the run cycles through.
DISTINCT_BATCHES: Final = 8
# How long dispatch may take to catch up after the last put before the run fails.
DISPATCH_TIMEOUT_S: Final = 300.0
_BORN_HOST: Final = encode_host("127.0.0.1:40000")
_FLUSH_DISK_TYPE: Final[Mapping[str, str]] = {"async": "ASYNC_FLUSH", "sync": "SYNC_FLUSH"}
_DEFAULT_WRITERS: Final[Mapping[str, int]] = {"async": 1, "sync": 32}


class StoreBenchError(RocketqSystemError):
    """The benchmark ran but the store did not do what it must (lost or stuck messages)."""


@dataclass(frozen=True, slots=True)
class StoreBenchOptions:
    """What to run; field names match the ``rocketq bench store`` flags."""

    size: int = 1024
    messages: int = 200_000
    batch: int = 32
    flush: FlushMode = "async"
    # None: 1 writer for async, 32 for sync.
    writers: int | None = None
    # The run gets a fresh temporary directory under this one (default ./data/bench-store).
    directory: str | None = None
    # Keep the run's directory (store files) instead of removing it at the end.
    keep: bool = False
    # CommitLog segment size (mapped_file_size_commit_log).
    segment_size: int = DEFAULT_SEGMENT_SIZE
    # Further StoreConfig fields, e.g. small index sizes in tests.
    store_overrides: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for flag, value in (("--size", self.size), ("--messages", self.messages)):
            if value < 1:
                raise BenchOptionError(flag, f"{flag} must be at least 1, got {value}")
        if self.batch < 1:
            raise BenchOptionError("--batch", f"--batch must be at least 1, got {self.batch}")
        if self.flush not in _FLUSH_DISK_TYPE:
            raise BenchOptionError(
                "--flush", f"--flush must be one of async, sync; got {self.flush!r}"
            )
        if self.writers is not None and self.writers < 1:
            raise BenchOptionError("--writers", f"--writers must be at least 1, got {self.writers}")
        if self.segment_size < 4096:
            raise BenchOptionError(
                "--segment-size", f"--segment-size must be at least 4096, got {self.segment_size}"
            )
        max_body = self.store_config(Path(DEFAULT_DIR)).max_message_size
        if self.size > max_body:
            raise BenchOptionError(
                "--size",
                f"--size {self.size} is larger than the store's max_message_size {max_body}",
            )
        batch_bytes = self.batch * record_size(self.size)
        if batch_bytes + END_FILE_MIN_BLANK_LENGTH > self.segment_size:
            raise BenchOptionError(
                "--batch",
                f"a batch of {self.batch} records of {record_size(self.size)} bytes "
                f"({batch_bytes} bytes) does not fit a CommitLog segment of "
                f"{self.segment_size} bytes; lower --batch or --size, or raise --segment-size",
            )

    def store_config(self, root: Path) -> StoreConfig:
        """The store's config for a run whose files live under ``root``."""
        values: dict[str, Any] = {
            "store_path_root_dir": str(root),
            "mapped_file_size_commit_log": self.segment_size,
            "flush_disk_type": self.flush_disk_type,
            **self.store_overrides,
        }
        return StoreConfig(**values)

    @property
    def writer_count(self) -> int:
        return self.writers if self.writers is not None else _DEFAULT_WRITERS[self.flush]

    @property
    def flush_disk_type(self) -> str:
        return _FLUSH_DISK_TYPE[self.flush]


@dataclass(frozen=True, slots=True)
class StoreRun:
    """The store part of a run; times in seconds from the first put."""

    append_s: float  # until the last put returned
    elapsed_s: float  # until dispatch had caught up too
    dispatch_busy_s: float  # time the dispatcher itself ran
    dispatched: int
    latency: LatencySummary  # of one put
    put_failed: int  # puts answered other than PUT_OK (FLUSH_DISK_TIMEOUT)
    fsyncs: int
    stored_messages: int


@dataclass(frozen=True, slots=True)
class RawRun:
    """The plain ``os.write`` baseline."""

    elapsed_s: float
    latency: LatencySummary  # of one batch's write (and fsync)
    fsyncs: int


@dataclass(frozen=True, slots=True)
class StoreBenchResult:
    options: StoreBenchOptions
    loop: str
    record_bytes: int
    total_bytes: int
    store: StoreRun
    raw: RawRun
    data_dir: str | None  # the run's directory when kept

    @property
    def msgs_per_s(self) -> float:
        return rate(self.options.messages, self.store.elapsed_s)

    @property
    def append_msgs_per_s(self) -> float:
        return rate(self.options.messages, self.store.append_s)

    @property
    def dispatch_msgs_per_s(self) -> float:
        return rate(self.store.dispatched, self.store.dispatch_busy_s)

    @property
    def store_mb_s(self) -> float:
        return rate(self.total_bytes, self.store.elapsed_s) / MB

    @property
    def raw_msgs_per_s(self) -> float:
        return rate(self.options.messages, self.raw.elapsed_s)

    @property
    def raw_mb_s(self) -> float:
        return rate(self.total_bytes, self.raw.elapsed_s) / MB

    @property
    def ratio(self) -> float:
        return self.store_mb_s / self.raw_mb_s if self.raw_mb_s else 0.0

    def fields(self) -> dict[str, object]:
        """The JSON object ``--json`` prints."""
        opts, store, raw = self.options, self.store, self.raw
        return {
            "bench": "store",
            "msgs_per_s": self.msgs_per_s,
            "store_mb_s": self.store_mb_s,
            "raw_mb_s": self.raw_mb_s,
            "ratio": self.ratio,
            "append_msgs_per_s": self.append_msgs_per_s,
            "dispatch_msgs_per_s": self.dispatch_msgs_per_s,
            "raw_msgs_per_s": self.raw_msgs_per_s,
            **store.latency.fields(),
            "raw_avg_rt_ms": raw.latency.avg_ms,
            "raw_max_rt_ms": raw.latency.max_ms,
            "elapsed_s": store.elapsed_s,
            "append_s": store.append_s,
            "dispatch_busy_s": store.dispatch_busy_s,
            "raw_s": raw.elapsed_s,
            "fsyncs": store.fsyncs,
            "raw_fsyncs": raw.fsyncs,
            "put_failed": store.put_failed,
            "stored_messages": store.stored_messages,
            "flush": opts.flush,
            "writers": opts.writer_count,
            "messages": opts.messages,
            "size": opts.size,
            "batch": opts.batch,
            "record_bytes": self.record_bytes,
            "total_bytes": self.total_bytes,
            "segment_size": opts.segment_size,
            "loop": self.loop,
            "dir": self.data_dir,
        }

    def lines(self) -> list[str]:
        """What people read, RocketMQ benchmark style."""
        opts, store, raw = self.options, self.store, self.raw
        writers = f"{opts.writer_count} writer{'s' if opts.writer_count > 1 else ''}"
        puts = -(-opts.messages // opts.batch)
        if opts.flush == "sync":
            per_fsync = puts / store.fsyncs if store.fsyncs else 0.0
            flushed = f"{store.fsyncs:,} group-commit fsyncs ({per_fsync:.1f} puts per fsync)"
            rt = f"RT = one put of a {opts.batch}-message batch, including its group-commit wait"
            raw_how = "os.write + os.fsync per batch"
        else:
            flushed = f"{store.fsyncs:,} CommitLog fsyncs by the flush thread"
            rt = f"RT = one put of a {opts.batch}-message batch"
            raw_how = "os.write per batch, no fsync (page cache)"
        where = f"kept in {self.data_dir}" if self.data_dir else "removed afterwards"
        return [
            f"rocketq bench store: {opts.messages:,} messages of {opts.size} B body "
            f"({self.record_bytes:,} B stored) in batches of {opts.batch}, "
            f"{opts.flush_disk_type}, {writers}, {self.loop} loop; data {where}",
            tps_line("Store", self.msgs_per_s, self.store_mb_s, store.latency, store.put_failed),
            f"        TPS and MB/s = {opts.messages:,} messages / {store.elapsed_s:.3f} s, from "
            "the first put until all were appended and dispatch had caught up; " + rt,
            f"        appends alone: {self.append_msgs_per_s:,.0f} msgs/s (last put returned "
            f"at {store.append_s:.3f} s); dispatcher: {self.dispatch_msgs_per_s:,.0f} msgs/s "
            f"of its own busy time ({store.dispatch_busy_s:.3f} s); {flushed}",
            f"[Raw]   Write TPS: {self.raw_msgs_per_s:,.0f} | {self.raw_mb_s:,.1f} MB/s | "
            f"Max RT(ms): {raw.latency.max_ms:.3f} | Average RT(ms): {raw.latency.avg_ms:.3f} | "
            f"{raw_how}, 1 writer, same bytes and batches, {raw.elapsed_s:.3f} s",
            f"[Ratio] store {self.store_mb_s:,.1f} MB/s / raw {self.raw_mb_s:,.1f} MB/s "
            f"= {self.ratio:.3f}",
        ]

    def json(self) -> str:
        return json_line(self.fields())


def record_size(size: int) -> int:
    """Stored bytes of one benchmark message with a ``size``-byte body."""
    return len(_encode(b"\0" * size, TAGS[0], UniqIdGenerator().next_id(), 0))


def _encode(body: bytes, tags: str, uniq_id: str, born_ms: int) -> bytes:
    msg = Message(TOPIC, body, tags=tags)
    return encode_message(msg, born_timestamp=born_ms, born_host=_BORN_HOST, uniq_id=uniq_id)


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """Pre-encoded batches and the order the run puts them in."""

    blobs: Sequence[bytes]
    tail: bytes | None  # the last, shorter batch when messages % batch != 0
    full_batches: int

    @property
    def count(self) -> int:
        return self.full_batches + (self.tail is not None)

    def blob(self, i: int) -> bytes:
        if i < self.full_batches:
            return self.blobs[i % len(self.blobs)]
        assert self.tail is not None
        return self.tail

    def __iter__(self) -> Iterator[bytes]:
        return (self.blob(i) for i in range(self.count))

    @property
    def total_bytes(self) -> int:
        full = sum(len(self.blobs[i % len(self.blobs)]) for i in range(self.full_batches))
        return full + (len(self.tail) if self.tail is not None else 0)


def plan_batches(options: StoreBenchOptions) -> BatchPlan:
    """Encode the distinct batches (untimed)."""
    ids = UniqIdGenerator()
    born_ms = int(time.time() * 1000)
    pattern = bytes(range(32, 127))
    counter = 0

    def encode_batch(n: int) -> bytes:
        nonlocal counter
        parts = []
        for _ in range(n):
            shift = counter % len(pattern)
            body = (pattern[shift:] + pattern[:shift]) * (options.size // len(pattern) + 1)
            parts.append(
                _encode(body[: options.size], TAGS[counter % len(TAGS)], ids.next_id(), born_ms)
            )
            counter += 1
        return b"".join(parts)

    full, rest = divmod(options.messages, options.batch)
    blobs = [encode_batch(options.batch) for _ in range(min(full, DISTINCT_BATCHES))]
    tail = encode_batch(rest) if rest else None
    return BatchPlan(blobs, tail, full)


def run_store_bench(options: StoreBenchOptions) -> StoreBenchResult:
    """Run the benchmark in a new event loop (uvloop when installed)."""
    factory, loop_name = _loop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(run_store_bench_async(options, loop_name=loop_name))


def _loop_factory() -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    try:
        import uvloop
    except ImportError:
        return None, "asyncio"
    return uvloop.new_event_loop, "uvloop"


async def run_store_bench_async(
    options: StoreBenchOptions, *, loop_name: str = "asyncio"
) -> StoreBenchResult:
    """Run the benchmark on the running loop: the store, then the raw baseline."""
    plan = plan_batches(options)
    base = Path(options.directory or DEFAULT_DIR)
    created = _make_dirs(base)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    try:
        store = await _run_store(options, plan, run_dir / "store")
        raw = _run_raw(plan, run_dir / "raw-baseline.bin", fsync=options.flush == "sync")
    finally:
        if not options.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
            for directory in reversed(created):
                with contextlib.suppress(OSError):
                    directory.rmdir()  # only if empty: another run may be using it
    return StoreBenchResult(
        options=options,
        loop=loop_name,
        record_bytes=record_size(options.size),
        total_bytes=plan.total_bytes,
        store=store,
        raw=raw,
        data_dir=str(run_dir) if options.keep else None,
    )


def _make_dirs(path: Path) -> list[Path]:
    """Create ``path`` and missing parents; -> the directories created, outermost first."""
    missing = []
    probe = path.absolute()
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


class _DispatchProbe:
    """The dispatcher's own work during the run: its busy time and records, counted by
    ``Dispatcher.run``, from when the probe is made."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self._busy_ns, self._records = dispatcher.busy_ns, dispatcher.dispatched

    @property
    def busy_ns(self) -> int:
        return self.dispatcher.busy_ns - self._busy_ns

    @property
    def records(self) -> int:
        return self.dispatcher.dispatched - self._records

    def close(self) -> None:
        """Nothing to undo (kept for the run's finally)."""


async def _run_store(options: StoreBenchOptions, plan: BatchPlan, root: Path) -> StoreRun:
    store = MessageStore(options.store_config(root))
    await store.start()
    try:
        latencies: list[int] = []
        failed = 0
        jobs = iter(range(plan.count))
        put = store.put
        clock = time.perf_counter_ns

        async def writer() -> None:
            nonlocal failed
            for i in jobs:
                blob = plan.blob(i)
                start = clock()
                result = await put(blob, TOPIC, i % QUEUES)
                latencies.append(clock() - start)
                if result.status is not PutStatus.PUT_OK:
                    failed += 1
                await asyncio.sleep(0)  # a handler yields between requests

        probe = _DispatchProbe(store.dispatcher)
        fsyncs_before = store.flusher.fsync_count
        try:
            t0 = time.perf_counter()
            await asyncio.gather(*(writer() for _ in range(options.writer_count)))
            t_append = time.perf_counter()
            await _dispatch_caught_up(store)
            t_done = time.perf_counter()
        finally:
            probe.close()
        fsyncs = store.flusher.fsync_count - fsyncs_before
        stored = sum(store.max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
        if stored != options.messages or store.max_phy_offset < plan.total_bytes:
            raise StoreBenchError(
                f"the store holds {stored} messages ({store.max_phy_offset} CommitLog bytes) "
                f"after {options.messages} were put ({plan.total_bytes} bytes)"
            )
    finally:
        await store.shutdown()
    return StoreRun(
        append_s=t_append - t0,
        elapsed_s=t_done - t0,
        dispatch_busy_s=probe.busy_ns / 1e9,
        dispatched=probe.records,
        latency=summarize_ns(latencies),
        put_failed=failed,
        fsyncs=fsyncs,
        stored_messages=stored,
    )


async def _dispatch_caught_up(store: MessageStore) -> None:
    deadline = time.monotonic() + DISPATCH_TIMEOUT_S
    while store.dispatch_behind_bytes:
        if time.monotonic() > deadline:
            raise StoreBenchError(
                f"dispatch is still {store.dispatch_behind_bytes} bytes behind "
                f"{DISPATCH_TIMEOUT_S:.0f} s after the last put"
            )
        await asyncio.sleep(0)


def _run_raw(plan: BatchPlan, path: Path, *, fsync: bool) -> RawRun:
    """One writer, ``os.write`` per batch (and ``os.fsync`` per batch when ``fsync``)."""
    latencies: list[int] = []
    clock = time.perf_counter_ns
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fsyncs = 0
    try:
        t0 = time.perf_counter()
        for blob in plan:
            start = clock()
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
                fsyncs += 1
            latencies.append(clock() - start)
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return RawRun(elapsed, summarize_ns(latencies), fsyncs)
