"""The replication frames are decoded totally: HA hellos, reports and transfers, and Raft's
appends, answers and protobuf messages. Valid frames round-trip; mutated ones decode or
are refused with the module's error (HAProtocolError, FrameError) within a time and memory
bound; a stream of them cut at any points never raises anything else out of the
connection's parser; and an HA slave's offsets acknowledge only bytes the master sent."""

from __future__ import annotations

import asyncio
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import StoreCorruptError
from rocketq.replication.ha.master import HAMaster, SlaveConnection, listen_socket
from rocketq.replication.ha.slave import CommitLogGapError, HASlave, _Receiver
from rocketq.replication.ha.wire import (
    HELLO,
    REPORT,
    TRANSFER,
    TRUNCATE,
    HAProtocolError,
    Hello,
    decode_hello_head,
    decode_transfer_head,
    encode_hello,
    encode_transfer_head,
)
from rocketq.replication.raft.node import (
    AppendRequest,
    AppendResponse,
    Entry,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from rocketq.replication.raft.store import UNIT, UNIT_MAGIC, HardStateFile, RaftIndex
from rocketq.replication.raft.wire import FRAME, MAX_FRAME, FrameError, decode, encode
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import PutStatus
from tests.fuzz_mutations import json_with_a_part_replaced, mutated, total
from tests.integration.waiting import wait_until
from tests.storage.conftest import batch

FUZZ: Final = settings(max_examples=150, deadline=2000)
INT64: Final = st.integers(-(1 << 63), (1 << 63) - 1)
OFFSETS: Final = st.integers(0, (1 << 63) - 1)
IDS: Final = st.text(string.ascii_letters + string.digits + ":.-", min_size=1, max_size=24)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` in pieces, cut at ``points`` (as TCP may deliver it)."""
    at = sorted({min(p, len(data)) for p in points})
    return [data[a:b] for a, b in zip([0, *at], [*at, len(data)], strict=True) if b > a]


CUTS: Final = st.lists(st.integers(0, 400), max_size=6)

# -- HA: hellos and transfers -------------------------------------------------------------

HELLOS: Final = st.builds(Hello, INT64, INT64, st.text(max_size=40))


@given(HELLOS)
@FUZZ
def test_hellos_round_trip(hello: Hello) -> None:
    raw = encode_hello(hello)
    broker_id, max_offset, addr_len = decode_hello_head(raw[: HELLO.size])
    assert addr_len == len(raw) - HELLO.size
    addr = raw[HELLO.size :].decode()
    assert Hello(broker_id, max_offset, addr) == hello


@given(OFFSETS, INT64, st.integers(0, 64 << 20), st.sampled_from([0, TRUNCATE]))
@FUZZ
def test_transfer_heads_round_trip(offset: int, master_max: int, size: int, flags: int) -> None:
    raw = encode_transfer_head(offset, master_max, size, flags)
    assert decode_transfer_head(raw) == (offset, master_max, size, flags)


@given(st.data(), HELLOS, OFFSETS, INT64, st.integers(0, 1 << 20))
@FUZZ
def test_mutated_heads_decode_or_are_refused(
    data: st.DataObject, hello: Hello, offset: int, master_max: int, size: int
) -> None:
    head = data.draw(mutated(encode_hello(hello)[: HELLO.size]))
    hello_head = total(lambda: decode_hello_head(head), HAProtocolError)
    if isinstance(hello_head, tuple):
        assert 0 <= hello_head[2] <= 1024
    transfer = data.draw(mutated(encode_transfer_head(offset, master_max, size)))
    transfer_head = total(lambda: decode_transfer_head(transfer), HAProtocolError)
    if isinstance(transfer_head, tuple):
        assert transfer_head[0] >= 0 and 0 <= transfer_head[2] <= 64 << 20


class StubMaster:
    """What a SlaveConnection calls on its master, recorded; sends ``sent`` bytes after
    the hello (as HAMaster._hello and pump would)."""

    def __init__(self, sent: int) -> None:
        self._pending: dict[int, SlaveConnection] = {}
        self.tls = None  # plaintext: no certificate proves a node
        self.sent = sent
        self.hellos = 0
        self.reports: list[int] = []

    def _refusal(self, conn: SlaveConnection, hello: Hello) -> str | None:
        return None  # (no inner credentials: any hello is taken)

    def _hello(self, conn: SlaveConnection) -> None:
        self.hellos += 1
        conn.next_offset = self.sent

    def _on_report(self, conn: SlaveConnection) -> None:
        self.reports.append(conn.ack)

    def _forget(self, conn: SlaveConnection) -> None:
        pass


class StubTransport(asyncio.WriteTransport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.written = bytearray()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def write(self, data: Any) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


@given(st.data(), HELLOS, st.lists(INT64, max_size=5), OFFSETS, CUTS)
@FUZZ
def test_a_masters_parser_takes_any_stream(
    data: st.DataObject, hello: Hello, reports: list[int], sent: int, points: list[int]
) -> None:
    """A slave's hello and reports, mutated and cut anywhere: the connection is dropped or
    takes them; no report acknowledges more than was sent, and one past it closes the
    connection."""
    valid = encode_hello(hello) + b"".join(REPORT.pack(r) for r in reports)
    stream = data.draw(st.one_of(st.just(valid), mutated(valid)))
    master = StubMaster(sent)
    conn = SlaveConnection(master, 1)  # type: ignore[arg-type]
    transport = StubTransport()
    conn.connection_made(transport)
    for piece in cut(stream, points):
        if transport.closed:
            break
        total(lambda: conn.data_received(piece), ())  # noqa: B023 (called at once)
    assert master.hellos <= 1
    assert all(ack <= sent for ack in master.reports)
    if stream == valid:
        assert master.hellos == 1
        assert transport.closed == any(r > sent for r in reports)
        assert set(master.reports) <= {r for r in reports if r <= sent}


class StubStore:
    """The parts of a MessageStore a slave's receiver uses: appends must continue the log
    (StoreCorruptError otherwise, as CommitLog.append_raw refuses them)."""

    def __init__(self) -> None:
        self.max_phy_offset = 0
        self.min_phy_offset = 0  # not an empty store: appends continue it

    def append_raw(self, offset: int, data: memoryview, *, wake_dispatch: bool) -> None:
        if offset != self.max_phy_offset:
            raise StoreCorruptError(f"bytes at {offset}, log ends at {self.max_phy_offset}")
        self.max_phy_offset += len(data)

    def truncate_to(self, offset: int) -> None:
        self.max_phy_offset = min(self.max_phy_offset, max(offset, 0))

    def wake_dispatch(self) -> None:
        pass


class StubSlave:
    """The slave's own append (refusals, gaps) over :class:`StubStore`."""

    append = HASlave.append
    _taken = HASlave._taken
    _refused = HASlave._refused

    def __init__(self) -> None:
        self.store = StubStore()
        self.connected_to = ""
        self.master_max_offset = 0
        self.received_bytes = 0
        self.refused: str | None = None


@st.composite
def transfers(draw: st.DrawFn) -> bytes:
    frames, offset = [], 0
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            body = draw(st.binary(max_size=64))
            frames.append(encode_transfer_head(offset, offset + len(body), len(body)) + body)
            offset += len(body)
        else:
            offset = draw(st.integers(0, offset))
            frames.append(encode_transfer_head(offset, offset, 0, TRUNCATE))
    return b"".join(frames)


async def test_a_slaves_parser_takes_any_stream() -> None:
    @given(st.data(), transfers(), CUTS)
    @FUZZ
    def check(data: st.DataObject, valid: bytes, points: list[int]) -> None:
        stream = data.draw(st.one_of(st.just(valid), mutated(valid)))
        receiver = _Receiver(StubSlave(), "127.0.0.1:1")  # type: ignore[arg-type]
        transport = StubTransport()
        receiver.connection_made(transport)
        buf = bytearray()
        for piece in cut(stream, points):
            buf += piece
            got = total(
                lambda: receiver._consume(buf),  # noqa: B023 (called at once)
                # A gap after the log's end is the slave's own error (the connection
                # says it and waits, see HASlave), a bad frame the wire's.
                (HAProtocolError, StoreCorruptError, CommitLogGapError),
            )
            if isinstance(got, BaseException):
                assert stream != valid
                return
        if stream == valid:
            assert not buf  # every frame taken

    check()


# -- HA: offsets a slave reports ---------------------------------------------------------


async def test_a_slave_ahead_of_its_master_acknowledges_nothing_new(
    tmp_path: Path, store_factory: Callable[..., Any]
) -> None:
    """A slave whose hello (or report) names an end past the master's: SYNC sends of new
    messages still wait for bytes it really got."""
    store: MessageStore = await store_factory(tmp_path / "m")
    first = store.append(batch("T", [b"a" * 100]), "T", 0)
    master = HAMaster(store, max_gap=1 << 30)
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    await master.start(sock)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        ahead = first.end_offset + (1 << 20)
        writer.write(encode_hello(Hello(1, ahead, "127.0.0.1:2")))
        await writer.drain()
        head = await asyncio.wait_for(reader.readexactly(TRANSFER.size), 5)
        assert decode_transfer_head(head) == (first.end_offset, first.end_offset, 0, TRUNCATE)
        await wait_until(lambda: master.best_ack == first.end_offset, "the slave to connect")
        second = store.append(batch("T", [b"b" * 100]), "T", 0)
        writer.write(REPORT.pack(ahead))  # a report from before it cut its log back
        await writer.drain()
        status = await master.wait_slave(second.end_offset, 0.5)
        assert status is PutStatus.FLUSH_SLAVE_TIMEOUT
        assert master.best_ack == first.end_offset
    finally:
        writer.close()
        await master.stop()


# -- Raft frames -------------------------------------------------------------------------

ENTRIES: Final = st.lists(st.builds(Entry, INT64, st.binary(max_size=40)), max_size=4)
MESSAGES: Final = st.one_of(
    st.builds(AppendRequest, INT64, IDS, INT64, INT64, ENTRIES.map(tuple), INT64),
    st.builds(AppendResponse, INT64, IDS, st.booleans(), INT64, INT64, st.text(max_size=20)),
    st.builds(VoteRequest, INT64, IDS, INT64, INT64, st.booleans(), st.booleans()),
    st.builds(VoteResponse, INT64, IDS, st.booleans(), st.booleans(), st.text(max_size=20)),
    st.builds(TimeoutNow, INT64, IDS),
)


def sender_of(msg: Message) -> str:
    for name in ("leader", "follower", "candidate", "voter"):
        if hasattr(msg, name):
            return str(getattr(msg, name))
    raise AssertionError(msg)


@given(MESSAGES)
@FUZZ
def test_raft_frames_round_trip(msg: Message) -> None:
    frame = encode(sender_of(msg), msg)
    size, kind = FRAME.unpack_from(frame)
    assert size == len(frame) - 4
    assert decode(kind, memoryview(frame)[FRAME.size :]) == (sender_of(msg), msg)


def parse_stream(stream: bytes) -> list[tuple[str, Message | None]]:
    """Frames as RaftServer's connection reads them; FrameError for a bad one."""
    out, pos = [], 0
    while len(stream) - pos >= FRAME.size:
        size, kind = FRAME.unpack_from(stream, pos)
        if not 1 <= size <= MAX_FRAME:
            raise FrameError(f"a raft frame of {size} bytes")
        end = pos + 4 + size
        if len(stream) < end:
            break
        with memoryview(stream) as view, view[pos + FRAME.size : end] as body:
            out.append(decode(kind, body))
        pos = end
    return out


@given(st.data(), st.lists(MESSAGES, min_size=1, max_size=3))
@settings(max_examples=300, deadline=2000)
def test_mutated_raft_frames_decode_or_are_refused(
    data: st.DataObject, msgs: list[Message]
) -> None:
    valid = b"".join(encode(sender_of(m), m) for m in msgs)
    stream = data.draw(mutated(valid))
    got = total(lambda: parse_stream(stream), FrameError)
    if isinstance(got, list):
        for sender, msg in got:
            assert isinstance(sender, str)
            assert msg is None or isinstance(
                msg, AppendRequest | AppendResponse | VoteRequest | VoteResponse | TimeoutNow
            )


@given(st.integers(0, 255), st.binary(max_size=200))
@FUZZ
def test_any_body_of_any_kind_decodes_or_is_refused(kind: int, body: bytes) -> None:
    total(lambda: decode(kind, memoryview(body)), FrameError)


def test_an_append_counting_more_entries_than_its_bytes_is_refused_at_once() -> None:
    frame = bytearray(encode("n1", AppendRequest(1, "n1", 0, 0, (), 0)))
    frame[4 + 1 + 32 : 4 + 1 + 36] = (0xFFFFFFFF).to_bytes(4, "big")  # the entry count
    got = total(lambda: parse_stream(bytes(frame)), FrameError, seconds=0.5)
    assert isinstance(got, FrameError)


# -- the Raft files read at start ---------------------------------------------------------

UNITS: Final = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 4096), st.integers(0, 1024)), max_size=8
)


def _index_bytes(steps: list[tuple[int, int, int]]) -> tuple[bytes, list[tuple[int, int, int]]]:
    """An index file as a log of entries writes it (terms rising, each entry after the
    last), and its units."""
    units, term, end = [], 1, 0
    for term_step, gap, size in steps:
        term += term_step
        units.append((term, end + gap, size))
        end += gap + size
    return b"".join(UNIT.pack(t, p, s, UNIT_MAGIC) for t, p, s in units), units


@given(st.data(), UNITS)
@FUZZ
def test_a_damaged_raft_index_keeps_its_whole_units(
    tmp_path_factory: Any, data: st.DataObject, steps: list[tuple[int, int, int]]
) -> None:
    path = tmp_path_factory.mktemp("raft") / "index"
    valid, units = _index_bytes(steps)
    path.write_bytes(valid)
    index = RaftIndex(path)
    assert index.units == units
    index.close()
    path.write_bytes(data.draw(mutated(valid)))
    index = total(lambda: RaftIndex(path), ())
    assert isinstance(index, RaftIndex)
    try:
        end, term = 0, 0
        for t, p, s in index.units:  # what is kept still reads as a log
            assert s >= 0 and p >= end and t >= term
            end, term = p + s, t
        assert path.stat().st_size == len(index.units) * UNIT.size
    finally:
        index.close()


@given(st.data(), st.integers(0, 1 << 62), st.none() | IDS)
@FUZZ
def test_a_damaged_raft_hard_state_is_refused(
    tmp_path_factory: Any, data: st.DataObject, term: int, voted: str | None
) -> None:
    path = tmp_path_factory.mktemp("raft") / "hard_state.json"
    HardStateFile(path).save(term, voted)
    assert HardStateFile(path).load() == (term, voted)
    valid = path.read_bytes()
    path.write_bytes(
        data.draw(
            st.one_of(
                mutated(valid),
                json_with_a_part_replaced(valid),
                st.sampled_from([b"[]", b"5", b'{"term": 1e999}', b'{"term": 1.5}', b"null"]),
            )
        )
    )
    got = total(HardStateFile(path).load, StoreCorruptError)
    if isinstance(got, tuple):
        assert type(got[0]) is int and got[0] >= 0 and isinstance(got[1], str | None)
