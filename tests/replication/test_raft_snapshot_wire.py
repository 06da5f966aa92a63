"""The snapshot frames on the Raft transport, and the bytes a member installs: chunks and
their answers round-trip; mutated frames decode or are refused with FrameError (within a
time and memory bound); a snapshot stream's head and units are checked before anything is
installed; and on a secured port a chunk is bound to its link's member like any frame."""

from __future__ import annotations

import hashlib
import string
import zlib
from typing import Final

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.replication.raft.membership import Members
from rocketq.replication.raft.node import SnapshotAck, SnapshotChunk, SnapshotError
from rocketq.replication.raft.snapshot import (
    STREAM_HEAD,
    STREAM_MAGIC,
    chain_next,
    chain_start,
    decode_configs,
    decode_head,
    decode_units,
    encode_configs,
)
from rocketq.replication.raft.store import UNIT, UNIT_MAGIC
from rocketq.replication.raft.wire import (
    FRAME,
    MAX_CHUNK,
    SNAPSHOT,
    SNAPSHOT_ACK,
    FrameError,
    decode,
    encode,
)
from tests.fuzz_mutations import mutated, total
from tests.replication.test_raft_security import INNER, hello, lone_member, send, untouched

FUZZ: Final = settings(max_examples=150, deadline=2000)
IDS: Final = st.text(string.ascii_letters + string.digits + ":.-", min_size=1, max_size=24)
SMALL: Final = st.integers(0, 1 << 40)


@st.composite
def chunks(draw: st.DrawFn) -> SnapshotChunk:
    payload = draw(st.binary(max_size=512))
    offset = draw(SMALL)
    size = offset + len(payload) + draw(st.integers(0, 1 << 20))
    return SnapshotChunk(
        draw(SMALL),
        draw(IDS),
        draw(st.integers(0, (1 << 64) - 1)),
        draw(SMALL),
        draw(SMALL),
        size,
        offset,
        payload,
        zlib.crc32(payload),
        hashlib.sha256(payload).digest(),
    )


@st.composite
def acks(draw: st.DrawFn) -> SnapshotAck:
    return SnapshotAck(
        draw(SMALL),
        draw(IDS),
        draw(st.integers(0, (1 << 64) - 1)),
        draw(SMALL),
        draw(st.sampled_from([b"", bytes(range(32))])),
        draw(SMALL),
        draw(st.sampled_from(["", "BAD_CHUNK", "STALE_TERM"])),
    )


def body(frame: bytes) -> tuple[int, memoryview]:
    size, kind = FRAME.unpack_from(frame)
    return kind, memoryview(frame)[FRAME.size : 4 + size]


@given(chunks())
@FUZZ
def test_chunks_round_trip(chunk: SnapshotChunk) -> None:
    kind, view = body(encode(chunk.leader, chunk))
    assert kind == SNAPSHOT
    assert decode(kind, view) == (chunk.leader, chunk)


@given(acks())
@FUZZ
def test_answers_round_trip(ack: SnapshotAck) -> None:
    kind, view = body(encode(ack.follower, ack))
    assert kind == SNAPSHOT_ACK
    assert decode(kind, view) == (ack.follower, ack)


@given(st.data())
@FUZZ
def test_mutated_snapshot_frames_decode_or_are_refused(data: st.DataObject) -> None:
    msg = data.draw(st.one_of(chunks(), acks()))
    sender = msg.leader if isinstance(msg, SnapshotChunk) else msg.follower
    kind, view = body(encode(sender, msg))
    raw = data.draw(mutated(bytes(view)))
    result = total(lambda: decode(kind, memoryview(raw)), FrameError)
    if isinstance(result, tuple):
        _, got = result
        if isinstance(got, SnapshotChunk):  # what is taken is within its snapshot
            assert got.offset >= 0 and got.offset + len(got.payload) <= got.size
            assert len(got.payload) <= MAX_CHUNK and len(got.chain) == 32
        else:
            assert isinstance(got, SnapshotAck) and len(got.chain) in (0, 32)


def test_a_chunk_outside_its_snapshot_is_refused() -> None:
    chunk = SnapshotChunk(1, "n0", 7, 10, 1, 100, 90, b"x" * 20, 0, bytes(32))
    kind, view = body(encode("n0", chunk))
    try:
        decode(kind, view)
    except FrameError as exc:
        assert "outside its snapshot" in str(exc)
    else:
        raise AssertionError("a chunk past its snapshot's size was taken")


def stream(
    units: list[tuple[int, int, int]], first: int, start: int, end: int, configs: bytes = b""
) -> bytes:
    head = STREAM_HEAD.pack(STREAM_MAGIC, first, 1, start, end, len(units), len(configs))
    return head + b"".join(UNIT.pack(t, p, s, UNIT_MAGIC) for t, p, s in units) + configs


CONFIGS = encode_configs(
    [(6, 2, Members.of({"n0": "127.0.0.1:1", "n1": "127.0.0.1:2"}, {"n3": "127.0.0.1:4"}))]
)


def test_stream_heads_and_units_are_checked() -> None:
    good = stream([(1, 4096, 100), (2, 4196, 50)], 5, 4096, 4246, CONFIGS)
    head = decode_head(good)
    assert decode_units(head, good, last_index=6, last_term=2) == [(1, 4096, 100), (2, 4196, 50)]
    [(index, term, members)] = decode_configs(head, good, last_index=6)
    assert (index, term, members.learner_ids) == (6, 2, frozenset({"n3"}))
    try:  # a configuration past the snapshot's last entry
        decode_configs(head, good, last_index=5)
    except SnapshotError:
        pass
    else:
        raise AssertionError("a configuration past the last entry was taken")
    bad = [
        (stream([(1, 4096, 100), (2, 4100, 50)], 5, 4096, 4246), 6, 2),  # overlapping bytes
        (stream([(2, 4096, 100), (1, 4196, 50)], 5, 4096, 4246), 6, 1),  # a falling term
        (stream([(1, 4096, 100), (2, 4196, 500)], 5, 4096, 4246), 6, 2),  # past the end
        (good, 7, 2),  # not ending at the last index
        (good, 6, 3),  # not ending with the last term
    ]
    for data, last_index, last_term in bad:
        try:
            decode_units(decode_head(data), data, last_index, last_term)
        except SnapshotError:
            continue
        raise AssertionError(f"bad units taken: {data!r}")


@given(st.data())
@FUZZ
def test_mutated_stream_heads_and_units_are_refused_or_consistent(data: st.DataObject) -> None:
    good = stream([(1, 4096, 100), (2, 4196, 50), (2, 4246, 0)], 5, 4096, 4246, CONFIGS)
    raw = data.draw(mutated(good))

    def check() -> tuple[list[tuple[int, int, int]], list[tuple[int, int, Members]]]:
        head = decode_head(raw)
        last = head.first_index + head.units - 1
        return decode_units(head, raw, last, 2), decode_configs(head, raw, last)

    result = total(check, SnapshotError)
    if isinstance(result, tuple):
        units, configs = result
        end = 0
        for _, pos, size in units:
            assert pos >= end and size >= 0
            end = pos + size
        assert [i for i, _, _ in configs] == sorted({i for i, _, _ in configs})


def test_the_chain_binds_every_chunk_in_order() -> None:
    a, b = chain_start(1), chain_start(2)
    assert a != b  # bound to the snapshot
    one = chain_next(chain_next(a, b"x"), b"y")
    assert one != chain_next(chain_next(a, b"y"), b"x")


async def test_a_chunk_naming_another_member_is_refused_on_a_secured_port() -> None:
    server, port = await lone_member(inner=INNER)
    rejected = server.guard.rejected
    chunk = SnapshotChunk(9, "n2", 7, 10, 9, 100, 0, b"x" * 10, zlib.crc32(b"x" * 10), bytes(32))
    ack = SnapshotAck(9, "n2", 7, 0, b"")
    try:
        assert await send(port, hello("n1"), encode("n2", chunk))
        assert await send(port, hello("n1"), encode("n2", ack))
        assert rejected["raft_forged_sender"] == 2
        assert await send(port, encode("n2", chunk))  # no handshake at all
        assert rejected["raft_unauthenticated"] == 1
        assert untouched(server)
    finally:
        await server.stop()
