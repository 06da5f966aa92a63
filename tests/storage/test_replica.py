"""A replica's store: bytes copied from another CommitLog at given offsets make a
byte-identical log with the same ConsumeQueues, and a replica ahead of its source cuts
its log, queues and index back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.exceptions import StoreCorruptError
from rocketq.storage.message_store import MessageStore
from tests.storage.conftest import batch


def log_bytes(store: MessageStore) -> bytes:
    end = store.max_phy_offset
    start = store.min_phy_offset
    out = b""
    pos = start
    while pos < end:
        size = min(end, store.commitlog.next_segment_offset(pos)) - pos
        view = store.commitlog.read(pos, size)
        assert view is not None
        out += bytes(view)
        view.release()
        pos += size
    return out


async def copy(src: MessageStore, dst: MessageStore, chunk: int) -> None:
    pos = dst.max_phy_offset
    while pos < src.max_phy_offset:
        end = min(src.max_phy_offset, pos + chunk, src.commitlog.next_segment_offset(pos))
        view = src.commitlog.read(pos, end - pos)
        assert view is not None
        dst.append_raw(pos, bytes(view))
        view.release()
        pos = end


async def test_replica_is_byte_identical_and_dispatches(
    store_factory: Callable[..., Any], tmp_path: Path
) -> None:
    src: MessageStore = await store_factory(tmp_path / "src")
    dst: MessageStore = await store_factory(tmp_path / "dst")
    for i in range(60):  # several 16 KiB segments
        src.append(batch("T", [b"x" * 700, b"y%d" % i], keys=[f"k{i}"]), "T", i % 2)
    await copy(src, dst, chunk=5000)
    assert dst.max_phy_offset == src.max_phy_offset
    assert log_bytes(dst) == log_bytes(src)
    for store in (src, dst):
        while store.dispatcher.run(1 << 20):
            pass
    for q in (0, 1):
        assert dst.max_offset_in_queue("T", q) == src.max_offset_in_queue("T", q) == 60
    assert len(dst.messages_by_key("T", "k7")) == 2  # both messages of that batch
    with pytest.raises(StoreCorruptError, match="must continue it"):
        dst.append_raw(dst.max_phy_offset + 10, b"\0" * 10)


async def test_replica_ahead_cuts_back(store_factory: Callable[..., Any], tmp_path: Path) -> None:
    src: MessageStore = await store_factory(tmp_path / "src")
    dst: MessageStore = await store_factory(tmp_path / "dst")
    for i in range(10):
        src.append(batch("T", [b"a%d" % i], keys=[f"a{i}"]), "T", 0)
    keep = src.max_phy_offset
    for i in range(10):
        src.append(batch("T", [b"b%d" % i], keys=[f"b{i}"]), "T", 0)
    await copy(src, dst, chunk=1 << 20)
    while dst.dispatcher.run(1 << 20):
        pass
    assert dst.max_offset_in_queue("T", 0) == 20
    dst.truncate_to(keep)
    assert dst.max_phy_offset == keep
    assert dst.max_offset_in_queue("T", 0) == 10
    assert dst.messages_by_key("T", "b3") == []
    # It goes on from there as its source does.
    view = src.commitlog.read(keep, src.max_phy_offset - keep)
    assert view is not None
    dst.append_raw(keep, bytes(view))
    view.release()
    assert log_bytes(dst) == log_bytes(src)
