"""The signed frames of the replication ports, decoded totally: the HA hello (version 2)
and the Raft handshake round-trip; mutated, they decode, wait for more bytes or are refused
with the module's error; and a mutation that still decodes to another hello or handshake
fails the signature check (so nothing a forger can change is left unsigned)."""

from __future__ import annotations

import asyncio
import string
from typing import Any, Final

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.auth.credentials import Credentials
from rocketq.replication.ha.secure import NONCE_SIZE, now_ms
from rocketq.replication.ha.wire import (
    HAProtocolError,
    Hello,
    check_hello,
    decode_hello,
    encode_hello,
    sign_hello,
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
from rocketq.replication.raft.server import RaftServer, _Inbound
from rocketq.replication.raft.wire import (
    FRAME,
    HELLO,
    FrameError,
    Handshake,
    check_handshake,
    decode_handshake,
    encode,
    encode_handshake,
    sign_handshake,
)
from tests.fuzz_mutations import mutated, total
from tests.replication.raft_sim import MemoryHardState, MemoryLog
from tests.replication.test_raft_security import INNER, hello

FUZZ: Final = settings(max_examples=150, deadline=2000)
INT64: Final = st.integers(-(1 << 63), (1 << 63) - 1)
IDS: Final = st.text(string.ascii_letters + string.digits + ":.-", min_size=1, max_size=24)
NONCES: Final = st.binary(min_size=NONCE_SIZE, max_size=NONCE_SIZE)
CREDS: Final = st.builds(Credentials, IDS, st.text(min_size=1, max_size=40))


@given(st.builds(Hello, INT64, INT64, st.text(max_size=40)), CREDS, NONCES, st.binary(max_size=8))
@FUZZ
def test_signed_hellos_round_trip(
    hello: Hello, creds: Credentials, nonce: bytes, more: bytes
) -> None:
    signed = sign_hello(hello, creds, nonce=nonce)
    raw = encode_hello(signed)
    assert decode_hello(raw + more) == (signed, len(raw))
    assert all(decode_hello(raw[:n]) is None for n in range(len(raw)))
    assert check_hello(signed, creds) is None
    assert check_hello(hello, creds) is not None  # unsigned


@given(st.data(), st.builds(Hello, INT64, INT64, st.text(max_size=40)), CREDS, NONCES)
@FUZZ
def test_mutated_signed_hellos_decode_wait_or_are_refused(
    data: st.DataObject, hello: Hello, creds: Credentials, nonce: bytes
) -> None:
    signed = sign_hello(hello, creds, nonce=nonce)
    raw = data.draw(mutated(encode_hello(signed)))
    result = total(lambda: decode_hello(raw), HAProtocolError)
    if isinstance(result, tuple):
        got, size = result
        assert 0 < size <= len(raw)
        if got != signed and got.signed:
            assert check_hello(got, creds) is not None


@given(IDS, IDS, CREDS, NONCES)
@FUZZ
def test_handshakes_round_trip(
    member: str, receiver: str, creds: Credentials, nonce: bytes
) -> None:
    h = sign_handshake(member, receiver, creds, nonce=nonce)
    raw = encode_handshake(h)
    size, kind = FRAME.unpack_from(raw)
    assert kind == HELLO and size == len(raw) - 4
    assert decode_handshake(raw[FRAME.size :]) == h
    assert check_handshake(h, receiver, creds) is None
    if receiver != member:
        assert check_handshake(h, member, creds) is not None  # meant for another member


@given(st.data(), IDS, CREDS, NONCES)
@FUZZ
def test_mutated_handshakes_decode_or_are_refused(
    data: st.DataObject, member: str, creds: Credentials, nonce: bytes
) -> None:
    h = sign_handshake(member, "n0", creds, nonce=nonce)
    body = data.draw(mutated(encode_handshake(h)[FRAME.size :]))
    got = total(lambda: decode_handshake(body), FrameError)
    if isinstance(got, Handshake) and got != h:
        assert check_handshake(got, "n0", creds) is not None


@given(st.integers(-(1 << 40), 1 << 40))
@FUZZ
def test_only_timestamps_within_five_minutes_are_taken(skew_ms: int) -> None:
    creds = Credentials("ak", "sk")
    now = now_ms()
    h = sign_handshake("n1", "n0", creds, timestamp_ms=now + skew_ms)
    assert (check_handshake(h, "n0", creds, now=now) is None) == (abs(skew_ms) <= 300_000)
    hello = sign_hello(Hello(1, 0, "a"), creds, timestamp_ms=now + skew_ms)
    assert (check_hello(hello, creds, now=now) is None) == (abs(skew_ms) <= 300_000)


class StubTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 4242) if name == "peername" else default

    def write(self, data: Any) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def sender_of(msg: Message) -> str:
    if isinstance(msg, VoteRequest):
        return msg.candidate
    if isinstance(msg, VoteResponse):
        return msg.voter
    if isinstance(msg, AppendRequest | TimeoutNow):
        return msg.leader
    return msg.follower


STREAM_MESSAGES: Final = st.lists(
    st.sampled_from(
        [
            ("n1", VoteRequest(3, "n1", 0, 0)),
            ("n2", VoteRequest(3, "n2", 0, 0)),
            ("n1", AppendRequest(3, "n1", 0, 0, (Entry(3, b"x"),), 0)),
            ("n2", AppendRequest(4, "n2", 0, 0, (), 0)),
            ("n1", AppendResponse(3, "n1", True, 1)),
            ("n1", VoteResponse(3, "n1", True)),
            ("n1", TimeoutNow(3, "n1")),
        ]
    ),
    max_size=5,
)


@given(st.data(), STREAM_MESSAGES, st.lists(st.integers(0, 400), max_size=6))
@FUZZ
def test_a_members_parser_takes_only_its_links_member(
    data: st.DataObject, messages: list[tuple[str, Message]], points: list[int]
) -> None:
    """A link's handshake and frames, mutated and cut anywhere: nothing escapes the
    member's parser, and every message it takes names the member the handshake proved."""
    valid = hello("n1") + b"".join(encode(who, msg) for who, msg in messages)
    stream = data.draw(st.one_of(st.just(valid), mutated(valid)))
    taken: list[Message] = []

    async def feed() -> None:
        server = RaftServer(
            "n0",
            "127.0.0.1:0",
            {"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"},
            MemoryLog(),
            MemoryHardState(),
            inner=INNER,
        )
        server.node.receive = taken.append  # type: ignore[method-assign]
        inbound = _Inbound(server)
        transport = StubTransport()
        inbound.connection_made(transport)
        at = sorted({min(p, len(stream)) for p in points})
        for a, b in zip([0, *at], [*at, len(stream)], strict=True):
            if b > a and not transport.closed:
                inbound.data_received(stream[a:b])
        if stream == valid:
            assert transport.closed == any(who != "n1" for who, _ in messages)

    asyncio.run(feed())
    assert all(sender_of(m) == "n1" for m in taken)
