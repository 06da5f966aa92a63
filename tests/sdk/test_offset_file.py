"""A broadcasting consumer's offsets file (``<dir>/<group>/offsets.json``) is outside
bytes: whatever it holds, the store starts (an unreadable file is logged and ignored, as
RocketMQ's LocalFileOffsetStore does) and every offset it answers is an integer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.message import MessageQueue
from rocketq.sdk.offset_store import LocalFileOffsetStore

MQ = MessageQueue("T", "broker-a", 0)
KEY = "T@broker-a@0"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def store_over(tmp: Path, raw: bytes) -> LocalFileOffsetStore:
    path = tmp / "g" / "offsets.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return LocalFileOffsetStore(cast(Any, None), "g", tmp)


@settings(max_examples=150, deadline=None)
@given(doc=json_values | st.dictionaries(st.just(KEY), json_values, max_size=1))
def test_any_json_in_the_file_starts_the_store(tmp_path_factory: Any, doc: object) -> None:
    tmp = tmp_path_factory.mktemp("offsets")
    store = store_over(tmp, json.dumps(doc).encode())
    offset = asyncio.run(store.read_store(MQ))
    assert type(offset) is int
    good = isinstance(doc, dict) and all(type(v) is int and v >= 0 for v in doc.values())
    assert offset == (doc.get(KEY, -1) if good else -1)  # type: ignore[union-attr]


@settings(max_examples=100, deadline=None)
@given(raw=st.binary(max_size=64))
def test_any_bytes_in_the_file_start_the_store(tmp_path_factory: Any, raw: bytes) -> None:
    store = store_over(tmp_path_factory.mktemp("offsets"), raw)
    assert type(asyncio.run(store.read_store(MQ))) is int


def test_a_good_file_is_read_and_written_back(tmp_path: Path) -> None:
    store = store_over(tmp_path, json.dumps({KEY: 42}).encode())
    assert asyncio.run(store.read_store(MQ)) == 42
    store.update(MQ, 50)
    asyncio.run(store.persist_all([MQ]))
    assert json.loads((tmp_path / "g" / "offsets.json").read_text()) == {KEY: 50}
