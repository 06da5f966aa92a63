"""The registration body decoder under hostile input: the inflate cap follows the topic
count the table announces (a real 10,000-topic table fits with room to spare, a bomb is
refused without allocating past its cap), valid bodies round-trip, mutated and cut bodies
raise RegisterBodyError within a time bound; and a nameserver refuses a bomb with a remark
naming the cap while it keeps answering (the body is inflated off its event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.common.message import TopicConfig
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.register_body import (
    INLINE_TABLE_BYTES,
    MAX_TABLE_BYTES,
    MAX_TOPIC_ENTRY_BYTES,
    MAX_VERSION_BYTES,
    TABLE_BASE_BYTES,
    RegisterBody,
    RegisterBodyError,
    RegisterBodyTooLargeError,
    crc32,
    decode_body,
    decodes_inline,
    encode_body,
    inflate_table,
    table_cap,
    topic_line,
)
from tests.nameserver.test_server import Harness, register_request

MiB = 1024 * 1024
I32 = struct.Struct(">i")


def chunk(data: bytes) -> bytes:
    return I32.pack(len(data)) + data


def head(count: int, version: bytes = b'{"counter":1,"timestamp":0}') -> bytes:
    return chunk(version) + I32.pack(count)


def stream(prefix: bytes, zeros: int) -> bytes:
    """zlib of ``prefix`` then ``zeros`` zero bytes, made a MiB at a time."""
    deflate = zlib.compressobj(9)
    parts = [deflate.compress(prefix)]
    block = bytes(MiB)
    for _ in range(zeros // MiB):
        parts.append(deflate.compress(block))
    parts.append(deflate.compress(bytes(zeros % MiB)))
    parts.append(deflate.flush())
    return b"".join(parts)


def refused_within(body: bytes, *, seconds: float, peak_bytes: int) -> RegisterBodyError:
    tracemalloc.start()
    try:
        started = time.monotonic()
        with pytest.raises(RegisterBodyError) as caught:
            decode_body(body, compressed=True, crc=crc32(body))
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < seconds, elapsed
    assert peak < peak_bytes, peak
    return caught.value


def many(n: int, width: int = 0) -> list[TopicConfig]:
    return [TopicConfig(f"Many-{i:05d}".ljust(width, "x"), 16, 16, 6) for i in range(n)]


def test_the_cap_grows_with_the_topic_count_up_to_the_ceiling() -> None:
    assert table_cap(0) == TABLE_BASE_BYTES
    assert table_cap(10_000) == TABLE_BASE_BYTES + 10_000 * MAX_TOPIC_ENTRY_BYTES
    assert table_cap(2**31 - 1) == MAX_TABLE_BYTES
    # The longest topic line a broker can send fits its entry.
    longest = TopicConfig("x" * 127, -(2**31), -(2**31), -(2**31), -(2**31), False)
    assert 4 + len(topic_line(longest)) <= MAX_TOPIC_ENTRY_BYTES


@pytest.mark.parametrize("width", [0, 127], ids=["short-names", "127-char-names"])
def test_a_real_10000_topic_table_fits_its_cap_with_room(width: int) -> None:
    topics = many(10_000, width)
    body = encode_body(topics, 42)
    inflated = len(inflate_table(body))
    assert inflated * 2 < table_cap(10_000), inflated
    got = decode_body(body, compressed=True, crc=crc32(body))
    assert got.data_version == 42 and len(got.topics) == 10_000
    assert got.topics[9_999].topic_name == topics[9_999].topic_name


def test_a_table_exactly_at_its_cap_is_read_and_one_byte_more_is_refused() -> None:
    # No topics: the filter server list (never read) pads the table to the cap.
    start = head(0)
    pad = table_cap(0) - len(start) - 4
    at_cap = zlib.compress(start + chunk(b" " * pad))
    assert decode_body(at_cap, compressed=True, crc=0) == RegisterBody([], 1)
    over = zlib.compress(start + chunk(b" " * (pad + 1)))
    with pytest.raises(RegisterBodyTooLargeError) as caught:
        decode_body(over, compressed=True, crc=0)
    assert caught.value.cap == TABLE_BASE_BYTES
    assert f"past {TABLE_BASE_BYTES} bytes" in str(caught.value)
    assert "zlib bomb" in str(caught.value)


def test_a_bomb_after_a_small_count_stops_at_that_counts_cap() -> None:
    body = stream(head(10), 256 * MiB)  # about 255 KiB
    assert len(body) < 300 * 1024
    exc = refused_within(body, seconds=5.0, peak_bytes=table_cap(10) + 4 * MiB)
    assert isinstance(exc, RegisterBodyTooLargeError) and exc.cap == table_cap(10)


def test_a_bomb_announcing_countless_topics_stops_at_the_ceiling() -> None:
    body = stream(head(2**31 - 1), 80 * MiB)
    exc = refused_within(body, seconds=10.0, peak_bytes=MAX_TABLE_BYTES + 8 * MiB)
    assert isinstance(exc, RegisterBodyTooLargeError) and exc.cap == MAX_TABLE_BYTES


def test_a_bomb_of_zeros_from_the_start_is_refused_early() -> None:
    body = stream(b"", 256 * MiB)
    refused_within(body, seconds=5.0, peak_bytes=TABLE_BASE_BYTES + 4 * MiB)


def test_an_oversized_or_negative_head_is_refused_before_inflating_more() -> None:
    for prefix, words in (
        (I32.pack(MAX_VERSION_BYTES + 1), "DataVersion"),
        (I32.pack(-1), "DataVersion"),
        (head(-5), "topic count"),
    ):
        body = stream(prefix, 64 * MiB)
        exc = refused_within(body, seconds=5.0, peak_bytes=4 * MiB)
        assert words in str(exc)


topic_names = st.from_regex(r"[%|a-zA-Z0-9_-]{1,40}", fullmatch=True)
topic_configs = st.builds(
    TopicConfig,
    topic_names,
    st.integers(0, 1024),
    st.integers(0, 1024),
    st.integers(0, 7),
    st.integers(0, 2**31 - 1),
    st.booleans(),
)


@settings(max_examples=100, deadline=2000)
@given(
    st.lists(topic_configs, max_size=50),
    st.integers(0, 2**62),
    st.one_of(st.none(), st.lists(topic_names, max_size=10)),
)
def test_valid_bodies_round_trip(
    topics: list[TopicConfig], version: int, deleted: list[str] | None
) -> None:
    body = encode_body(topics, version, deleted)
    got = decode_body(body, compressed=True, crc=crc32(body))
    assert got == RegisterBody(topics, version, deleted or [])


def _total(data: bytes) -> None:
    started = time.monotonic()
    with contextlib.suppress(RegisterBodyError):
        decode_body(data, compressed=True, crc=0)
    assert time.monotonic() - started < 2.0


@settings(max_examples=150, deadline=4000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(topic_configs, min_size=1, max_size=20), st.data())
def test_mutated_and_cut_bodies_raise_the_projects_error(
    topics: list[TopicConfig], data: st.DataObject
) -> None:
    body = bytearray(encode_body(topics, 3, ["gone"]))
    cut = data.draw(st.integers(0, len(body)))
    _total(bytes(body[:cut]))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] ^= data.draw(st.integers(1, 255))
    _total(bytes(body))


@settings(max_examples=150, deadline=4000)
@given(st.lists(topic_configs, max_size=10), st.data())
def test_mutated_tables_recompressed_raise_the_projects_error(
    topics: list[TopicConfig], data: st.DataObject
) -> None:
    """Damage inside the table itself (lengths, counts, lines), in a whole zlib stream."""
    table = bytearray(zlib.decompress(encode_body(topics, 3, ["gone"])))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(table) - 1))
        table[i] = data.draw(st.integers(0, 255))
    _total(zlib.compress(bytes(table)))


@settings(max_examples=200, deadline=2000)
@given(st.binary(max_size=2048))
def test_any_bytes_raise_the_projects_error_or_decode(data: bytes) -> None:
    _total(data)
    _total(zlib.compress(data))


# ---------------------------------------------------------------- on a real nameserver


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        await h.close()


async def test_a_nameserver_refuses_a_bomb_with_its_cap_and_keeps_answering(
    servers: Harness,
) -> None:
    ns = await servers.start()
    broker, client = await servers.broker(ns), await servers.client(ns)
    # Countless topics announced: inflated up to the ceiling, a few hundred ms of work.
    bomb = stream(head(2**31 - 1), 128 * MiB)
    assert not decodes_inline(bomb, compressed=True)  # decoded off the loop
    req = register_request(topics=("T",))
    assert req.ext is not None
    req.ext["bodyCrc32"] = str(crc32(bomb))
    req = RemotingCommand(RequestCode.REGISTER_BROKER, req.ext, bomb)
    pending = asyncio.ensure_future(broker.register(req))
    # While the bomb is being inflated, the nameserver answers others at once.
    for _ in range(5):
        started = time.monotonic()
        await client.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert time.monotonic() - started < 1.0
    answer = await pending
    assert answer.code == ResponseCode.SYSTEM_ERROR
    remark = answer.remark or ""
    assert "broker-a" in remark and f"past {MAX_TABLE_BYTES} bytes" in remark, remark
    assert "zlib bomb" in remark
    assert ns.service.counters.registrations_refused["inflate_cap"] == 1
    # Nothing was registered; a good registration on the same connection then is.
    assert await client.route_code("T") == ResponseCode.TOPIC_NOT_EXIST
    good = register_request(topics=("T",))
    assert (await broker.register(good)).code == ResponseCode.SUCCESS
    assert await client.route_code("T") == ResponseCode.SUCCESS


async def test_a_large_good_registration_is_decoded_off_the_loop(servers: Harness) -> None:
    ns = await servers.start()
    broker, client = await servers.broker(ns), await servers.client(ns)
    topics = [f"Big-{i:05d}" for i in range(40_000)]
    req = register_request(topics=topics)
    assert table_cap(40_000) > INLINE_TABLE_BYTES
    assert not decodes_inline(req.body, compressed=True)
    assert (await broker.register(req)).code == ResponseCode.SUCCESS
    listed = await client.ok(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert set(topics) <= set(json.loads(bytes(listed.body or b""))["topicList"])


def test_small_tables_and_unreadable_heads_are_decoded_inline() -> None:
    assert decodes_inline(None, compressed=True) and decodes_inline(b"", compressed=False)
    assert decodes_inline(encode_body(many(10_000), 1), compressed=True)
    assert decodes_inline(b"not zlib", compressed=True)  # refused at once
    assert not decodes_inline(encode_body(many(20_000), 1), compressed=True)
    assert not decodes_inline(b" " * (2 * MiB), compressed=False)


def test_the_ceiling_is_the_nameservers_key() -> None:
    """register_body_max_inflated_bytes caps a table however many topics it announces."""
    from rocketq.nameserver.config import NameServerConfig
    from rocketq.remoting.register_body import decode_body, table_cap

    assert NameServerConfig().register_body_max_inflated_bytes == 64 * 1024 * 1024
    assert table_cap(10**9, 5 * 1024 * 1024) == 5 * 1024 * 1024
    assert table_cap(10, 5 * 1024 * 1024) == 4 * 1024 * 1024 + 10 * 256
    # A table announcing 2**31 topics whose bytes run on: refused at the ceiling given.
    head = struct.pack(">i", 2) + b"{}" + struct.pack(">i", 2**31 - 1)
    bomb = zlib.compress(head + b"\0" * (6 * 1024 * 1024), 9)
    with pytest.raises(RegisterBodyTooLargeError) as err:
        decode_body(bomb, compressed=True, crc=0, ceiling=5 * 1024 * 1024)
    assert err.value.cap == 5 * 1024 * 1024


async def test_refused_registrations_are_counted_by_reason_and_logged_once_a_minute(
    servers: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    ns = await servers.start()
    broker = await servers.broker(ns)
    good = register_request(topics=("T",))
    assert good.ext is not None
    caplog.set_level(logging.WARNING, logger="rocketq.nameserver.processor")
    for _ in range(3):  # damaged on the way: the CRC does not match
        damaged = RemotingCommand(
            RequestCode.REGISTER_BROKER, {**good.ext, "bodyCrc32": "12345"}, good.body
        )
        assert (await broker.register(damaged)).code == ResponseCode.SYSTEM_ERROR
    not_zlib = RemotingCommand(
        RequestCode.REGISTER_BROKER, {**good.ext, "bodyCrc32": "0"}, b"not a zlib table"
    )
    assert (await broker.register(not_zlib)).code == ResponseCode.SYSTEM_ERROR
    assert ns.service.counters.registrations_refused == {
        "bad_body": 1,
        "crc": 3,
        "inflate_cap": 0,
        "identity": 0,
    }
    lines = [r.getMessage() for r in caplog.records if "refused the registration" in r.getMessage()]
    assert len(lines) == 2, lines  # one per reason, not one per refusal
    assert any("[crc]" in line for line in lines) and any("[bad_body]" in line for line in lines)
