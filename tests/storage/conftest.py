from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.config import StoreConfig
from rocketq.common.message import Message
from rocketq.common.record import encode_host, encode_message
from rocketq.storage.message_store import MessageStore

BORN_HOST = encode_host("127.0.0.1:40000")


def small_config(root: Path, **overrides: Any) -> StoreConfig:
    """A store with tiny segments, so roll-over happens within a test."""
    values: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": 16 * 1024,
        "mapped_file_size_consume_queue": 20 * 32,
        "max_hash_slot_num": 64,
        "max_index_num": 256,
        "store_host": "10.0.89.59:10911",
    }
    values.update(overrides)
    return StoreConfig(**values)


def batch(topic: str, bodies: list[bytes], **fields: Any) -> bytes:
    return b"".join(
        encode_message(Message(topic, body, **fields), born_timestamp=1, born_host=BORN_HOST)
        for body in bodies
    )


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store_factory(
    tmp_path: Path,
) -> AsyncIterator[Callable[..., Any]]:
    opened: list[MessageStore] = []

    async def make(root: Path | None = None, clock: Any = None, **overrides: Any) -> MessageStore:
        cfg = small_config(root or tmp_path / "store", **overrides)
        store = MessageStore(cfg, clock=clock) if clock else MessageStore(cfg)
        await store.start()
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.shutdown()
