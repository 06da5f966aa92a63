from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.exceptions import (
    MessageIllegalError,
    PropertiesSizeExceededError,
    ServiceNotAvailableError,
)
from rocketq.common.message import Message
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.common.record import (
    BLANK_MAGIC_CODE,
    FIXED_SIZE,
    HEADER,
    SIZE_MAGIC,
    decode_record,
    decode_records,
    encode_message,
    encode_properties,
    encode_record,
)
from rocketq.storage.message_store import MessageStore
from tests.storage.conftest import BORN_HOST, batch


async def test_append_stamps_every_store_field(store_factory: Any, clock: Any) -> None:
    clock.now = 1_700_000_123.456
    store: MessageStore = await store_factory(clock=clock)
    blob = batch("T", [b"a", b"bb", b"ccc"], tags="X", keys=["k"])
    r = store.append(blob, "T", 2)
    assert (r.wrote_offset, r.msg_count, r.queue_offset, r.wrote_bytes) == (0, 3, 0, len(blob))
    assert r.store_timestamp == 1_700_000_123_456
    view = store.commitlog.read(0, len(blob))
    assert view is not None
    msgs = decode_records(view)
    assert [m.body for m in msgs] == [b"a", b"bb", b"ccc"]
    assert [m.queue_offset for m in msgs] == [0, 1, 2]
    assert all(m.queue_id == 2 and m.store_timestamp == r.store_timestamp for m in msgs)
    assert all(m.store_host == "10.0.89.59:10911" for m in msgs)
    offsets = [m.commit_log_offset for m in msgs]
    assert offsets[0] == 0 and offsets[1] == msgs[0].store_size
    for m in msgs:
        assert decode_offset_msg_id(m.offset_msg_id) == ("10.0.89.59:10911", m.commit_log_offset)
    r2 = store.append(batch("T", [b"d"]), "T", 2)
    assert r2.queue_offset == 3 and r2.wrote_offset == len(blob)


async def test_broker_computes_the_crc(store_factory: Any) -> None:
    store: MessageStore = await store_factory()
    rec = encode_record(
        topic=b"T",
        body=b"payload",
        properties=b"",
        born_timestamp=1,
        born_host=BORN_HOST,
        body_crc=12345,
    )
    store.append(rec, "T", 0)
    view = store.commitlog.read_record(0)
    assert view is not None
    m = decode_record(view)
    import zlib

    assert m.body_crc == zlib.crc32(b"payload")


async def test_prepared_and_rollback_records_do_not_advance_the_queue(store_factory: Any) -> None:
    store: MessageStore = await store_factory()
    blob = b"".join(
        encode_record(
            topic=b"T",
            body=b"x",
            properties=b"",
            born_timestamp=1,
            born_host=BORN_HOST,
            sys_flag=flag,
        )
        for flag in (0, 0x4, 0x8, 0xC, 0)
    )
    store.append(blob, "T", 0)
    view = store.commitlog.read(0, len(blob))
    assert view is not None
    assert [m.queue_offset for m in decode_records(view)] == [0, 0, 1, 0, 2]
    await _dispatched(store)
    # Only plain and committed records reach the ConsumeQueue.
    assert store.max_offset_in_queue("T", 0) == 3


async def _dispatched(store: MessageStore) -> None:
    import asyncio

    for _ in range(1000):
        if store.dispatch_behind_bytes == 0:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("dispatch did not catch up")


async def test_segments_roll_over_with_a_blank_record(store_factory: Any) -> None:
    store: MessageStore = await store_factory()
    size = store.config.mapped_file_size_commit_log
    body = b"z" * 1000
    ends = []
    for _ in range(40):
        ends.append(store.append(batch("T", [body]), "T", 0))
    files = store.commitlog.files.files
    assert len(files) >= 2
    names = sorted(os.listdir(store.config.commit_log_dir))
    assert names[:2] == [f"{0:020d}", f"{size:020d}"]
    first = files[0]
    # Records never span segments: the first segment ends with a blank record.
    last_in_first = max((r for r in ends if r.wrote_offset < size), key=lambda r: r.wrote_offset)
    blank_at = last_in_first.end_offset
    blank_size, magic = SIZE_MAGIC.unpack_from(first.buf, blank_at)
    assert magic == BLANK_MAGIC_CODE and blank_at + blank_size == size
    second = min(r.wrote_offset for r in ends if r.wrote_offset >= size)
    assert second == size
    await _dispatched(store)
    got = store.get_messages("T", 0, 0, max_count=40)
    # One pull reads within one ConsumeQueue file (32 entries here), as RocketMQ does.
    assert got.message_count == 32 and got.next_begin_offset == 32
    assert [m.queue_offset for m in decode_records(got.to_bytes())] == list(range(32))
    rest = store.get_messages("T", 0, 32, max_count=40)
    assert [m.queue_offset for m in decode_records(rest.to_bytes())] == list(range(32, 40))
    # A run spanning two segments comes back as two views.
    assert len(got.buffers) >= 2


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: batch("T", [b"x" * 5000]), MessageIllegalError, "max_message_size"),
        (lambda: batch("Other", [b"x"]), MessageIllegalError, "batch's topic"),
        (lambda: batch("T", [b"x"])[:-3], MessageIllegalError, "truncated|not a message record"),
        (lambda: b"\0" * 200, MessageIllegalError, "not a message record"),
        (lambda: batch("T", [b"x" * 100] * 200), MessageIllegalError, "larger than a CommitLog"),
    ],
)
async def test_bad_batches_are_refused_and_nothing_is_written(
    store_factory: Any, make: Any, error: type[Exception], match: str
) -> None:
    store: MessageStore = await store_factory(max_message_size=4096)
    good = batch("T", [b"ok"])
    store.append(good, "T", 0)
    before = store.max_phy_offset
    with pytest.raises(error, match=match):
        store.append(batch("T", [b"fine"]) + make(), "T", 0)
    assert store.max_phy_offset == before
    assert store.commitlog.queue_table[(b"T", 0)] == 1


async def test_properties_and_topic_limits(store_factory: Any) -> None:
    store: MessageStore = await store_factory(mapped_file_size_commit_log=64 * 1024)
    with pytest.raises(MessageIllegalError, match="empty"):
        store.append(b"", "T", 0)
    # A record whose properties length field says more than 32767 bytes.
    rec = bytearray(
        encode_record(
            topic=b"T", body=b"", properties=b"a" * 40000, born_timestamp=0, born_host=BORN_HOST
        )
    )
    with pytest.raises(PropertiesSizeExceededError, match="32767"):
        store.append(bytes(rec), "T", 0)
    with pytest.raises(MessageIllegalError, match="at most 127"):
        store.append(batch("T", [b"x"]), "T" * 128, 0)
    with pytest.raises(MessageIllegalError, match="illegal characters"):
        store.append(batch("T", [b"x"]), "a b", 0)
    assert store.max_phy_offset == 0
    assert encode_properties({"k": "v"})


async def test_system_topics_and_properties_are_stored_as_given(store_factory: Any) -> None:
    store: MessageStore = await store_factory()
    props = {
        "DELAY": "3",
        "REAL_TOPIC": "Orders",
        "REAL_QID": "2",
        "TRAN_MSG": "true",
        "RETRY_TOPIC": "%RETRY%g",
        "TRAN_PREPARED_QUEUE_OFFSET": "99",
    }
    rec = encode_record(
        topic=b"SCHEDULE_TOPIC_XXXX",
        body=b"later",
        properties=encode_properties(props),
        born_timestamp=5,
        born_host=BORN_HOST,
        reconsume_times=4,
        prepared_transaction_offset=1234,
    )
    store.append(rec, "SCHEDULE_TOPIC_XXXX", 2)
    await _dispatched(store)
    got = store.get_messages("SCHEDULE_TOPIC_XXXX", 2, 0)
    (m,) = decode_records(got.to_bytes())
    assert m.properties == props
    assert (m.reconsume_times, m.prepared_transaction_offset) == (4, 1234)
    assert m.topic == "SCHEDULE_TOPIC_XXXX" and m.queue_id == 2


async def test_writes_refused_when_not_writable(store_factory: Any) -> None:
    store: MessageStore = await store_factory()
    store.writable = False
    store.read_only_reason = "slave"
    with pytest.raises(ServiceNotAvailableError, match="read-only"):
        store.append(batch("T", [b"x"]), "T", 0)
    await store.shutdown()
    with pytest.raises(ServiceNotAvailableError, match="not running"):
        store.append(batch("T", [b"x"]), "T", 0)


def test_wrong_segment_size_is_a_clear_error(tmp_path: Path) -> None:
    from rocketq.common.exceptions import StoreCorruptError
    from tests.storage.conftest import small_config

    d = tmp_path / "store" / "commitlog"
    d.mkdir(parents=True)
    (d / f"{0:020d}").write_bytes(b"\0" * 1000)
    store = MessageStore(small_config(tmp_path / "store"))
    with pytest.raises(StoreCorruptError, match="mapped_file_size"):
        store.load()
    _ = (FIXED_SIZE, HEADER, Message, encode_message)
