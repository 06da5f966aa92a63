from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from rocketq.bench.report import BenchOptionError, percentile, summarize_ns
from rocketq.bench.store_bench import (
    QUEUES,
    TOPIC,
    FlushMode,
    StoreBenchOptions,
    record_size,
    run_store_bench_async,
)
from rocketq.common.record import decode_records
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import GetStatus

# Small files so a run of a few thousand messages rolls CommitLog segments over.
SMALL_STORE = {
    "mapped_file_size_consume_queue": 20 * 256,
    "max_hash_slot_num": 512,
    "max_index_num": 1024,
}
POSITIVE = (
    "msgs_per_s",
    "store_mb_s",
    "raw_mb_s",
    "ratio",
    "append_msgs_per_s",
    "dispatch_msgs_per_s",
    "avg_rt_ms",
    "max_rt_ms",
    "p50_ms",
    "p99_ms",
    "p999_ms",
    "writers",
    "messages",
    "size",
    "batch",
)


def small_options(tmp_path: Path, flush: FlushMode, **changes: Any) -> StoreBenchOptions:
    options = StoreBenchOptions(
        size=256,
        messages=2000,
        batch=32,
        flush=flush,
        directory=str(tmp_path),
        keep=True,
        segment_size=64 * 1024,
        store_overrides=SMALL_STORE,
    )
    return dataclasses.replace(options, **changes)


@pytest.mark.parametrize(("flush", "writers"), [("async", 1), ("sync", 32)])
async def test_every_message_is_stored_and_reported(
    tmp_path: Path, flush: FlushMode, writers: int
) -> None:
    options = small_options(tmp_path, flush)
    result = await run_store_bench_async(options)

    fields = json.loads(result.json())
    for name in POSITIVE:
        assert fields[name] > 0, name
    assert fields["flush"] == flush and fields["writers"] == writers
    assert fields["stored_messages"] == 2000 and fields["put_failed"] == 0
    assert fields["total_bytes"] == 2000 * record_size(256)
    assert fields["msgs_per_s"] <= fields["append_msgs_per_s"]
    assert fields["p50_ms"] <= fields["p99_ms"] <= fields["p999_ms"] <= fields["max_rt_ms"]
    # 62 full batches of 32 and one of 16; sync fsyncs once per batch in the raw run, and
    # group commit needs at least one fsync (async may finish before its flush thread runs).
    assert fields["raw_fsyncs"] == (63 if flush == "sync" else 0)
    assert flush == "async" or 0 < fields["fsyncs"] <= 63
    assert result.lines()[-1].startswith("[Ratio]")

    # Reopen what the run left: every message is in a ConsumeQueue and the CommitLog.
    assert result.data_dir is not None
    root = Path(result.data_dir) / "store"
    assert len(list((root / "commitlog").iterdir())) > 1  # segments rolled over
    store = MessageStore(options.store_config(root))
    await store.start()
    try:
        offsets = [store.max_offset_in_queue(TOPIC, q) for q in range(QUEUES)]
        assert sum(offsets) == 2000
        assert store.max_phy_offset >= fields["total_bytes"]
        got = store.get_messages(TOPIC, 0, 0, max_count=4)
        assert got.status is GetStatus.FOUND
        messages = decode_records(got.to_bytes())
        got.release()
        assert [m.queue_offset for m in messages] == [0, 1, 2, 3]
        assert all(m.tags and len(m.msg_id) == 32 and len(m.body) == 256 for m in messages)
    finally:
        await store.shutdown()


async def test_run_directory_is_removed_unless_kept(tmp_path: Path) -> None:
    base = tmp_path / "data" / "bench-store"
    options = small_options(base, "async", messages=100, keep=False)
    result = await run_store_bench_async(options)
    assert result.data_dir is None and result.store.stored_messages == 100
    assert list(tmp_path.iterdir()) == []  # the directories it created are gone too


def test_options_are_checked_naming_the_flag() -> None:
    with pytest.raises(BenchOptionError, match="--size") as size:
        StoreBenchOptions(size=0)
    assert size.value.flag == "--size"
    with pytest.raises(BenchOptionError, match="does not fit a CommitLog segment") as fit:
        StoreBenchOptions(batch=32, segment_size=8192)
    assert fit.value.flag == "--batch"
    with pytest.raises(BenchOptionError, match="async, sync"):
        StoreBenchOptions(flush="fast")  # type: ignore[arg-type]
    assert StoreBenchOptions(flush="sync").writer_count == 32
    assert StoreBenchOptions().writer_count == 1


def test_latency_summary_uses_nearest_rank() -> None:
    samples = list(range(1, 1001))
    assert (percentile(samples, 0.5), percentile(samples, 0.99)) == (500, 990)
    assert percentile(samples, 0.999) == 999 and percentile([], 0.5) == 0
    summary = summarize_ns([2_000_000, 1_000_000, 3_000_000])
    assert (summary.avg_ms, summary.max_ms, summary.p50_ms) == (2.0, 3.0, 2.0)
