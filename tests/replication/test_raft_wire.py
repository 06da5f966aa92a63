"""Raft frames: every message survives the trip, an append's bytes are fixed, the leader's
encoder reuses an append's frame for the next follower, and bad frames are refused."""

from __future__ import annotations

import pytest

from rocketq.replication.raft.node import (
    AppendRequest,
    AppendResponse,
    Entry,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from rocketq.replication.raft.wire import (
    ACK,
    APPEND,
    FRAME,
    PB,
    Encoder,
    FrameError,
    decode,
    encode,
)


def trip(sender: str, msg: Message) -> tuple[str, Message | None]:
    frame = encode(sender, msg)
    size, kind = FRAME.unpack_from(frame)
    assert size == len(frame) - 4
    return decode(kind, memoryview(frame)[FRAME.size :])


@pytest.mark.parametrize(
    "msg",
    [
        AppendRequest(
            7, "n1", 41, 6, (Entry(6, b"abc"), Entry(7, b""), Entry(7, b"\x00" * 70000)), 40
        ),
        AppendRequest(7, "n1", 41, 6, (), 40),
        AppendResponse(7, "n0", True, 44),
        AppendResponse(8, "n0", False, 0, 12, "TERM_MISMATCH"),
        VoteRequest(9, "n2", 44, 7, pre=True, transfer=False),
        VoteResponse(9, "n0", False, True, "LOG_BEHIND"),
        TimeoutNow(9, "n1"),
    ],
)
def test_every_message_makes_the_trip(msg: Message) -> None:
    sender = getattr(msg, "leader", None) or getattr(msg, "follower", None)
    sender = sender or getattr(msg, "candidate", None) or getattr(msg, "voter", "n1")
    assert trip(sender, msg) == (sender, msg)


def test_append_bytes() -> None:
    frame = encode("n1", AppendRequest(2, "n1", 5, 1, (Entry(2, b"xy"),), 4))
    assert frame == (
        b"\x00\x00\x00\x36"  # 54 bytes follow
        + bytes([APPEND])
        + (2).to_bytes(8, "big")  # term
        + (5).to_bytes(8, "big")  # prev index
        + (1).to_bytes(8, "big")  # prev term
        + (4).to_bytes(8, "big")  # commit
        + (1).to_bytes(4, "big")  # entries
        + b"\x02n1"
        + (2).to_bytes(8, "big")  # entry term
        + (2).to_bytes(4, "big")  # entry size
        + b"xy"
    )
    ack = encode("n0", AppendResponse(2, "n0", True, 6))
    assert ack[4] == ACK and len(ack) == 4 + 1 + 27 + 2  # size, kind, head, "n0"


def test_encoder_reuses_the_frame_for_the_same_entries_only() -> None:
    entries = [Entry(3, b"batch")]
    enc = Encoder("n0")
    first = enc.encode(AppendRequest(3, "n0", 9, 3, tuple(entries), 8))
    again = enc.encode(AppendRequest(3, "n0", 9, 3, tuple(entries), 8))
    assert again is first
    other = enc.encode(AppendRequest(3, "n0", 9, 3, (Entry(3, b"batch"),), 9))
    assert other is not first and other != first  # another commit index
    same_bytes_new_objects = enc.encode(AppendRequest(3, "n0", 9, 3, (Entry(3, b"batch"),), 9))
    assert same_bytes_new_objects == other and same_bytes_new_objects is not other


@pytest.mark.parametrize(
    ("kind", "body", "why"),
    [
        (APPEND, encode("n1", AppendRequest(2, "n1", 5, 1, (Entry(2, b"xy"),), 4))[5:-1], "past"),
        (APPEND, encode("n1", AppendRequest(2, "n1", 5, 1, (), 4))[5:] + b"!", "after"),
        (APPEND, b"\x00" * 10, "malformed"),
        (ACK, encode("n0", AppendResponse(2, "n0", True, 6))[5:] + b"?", "wrong size"),
        (PB, b"\xff\xff\xff", "malformed"),
        (9, b"", "unknown"),
    ],
)
def test_bad_frames_are_refused(kind: int, body: bytes, why: str) -> None:
    with pytest.raises(FrameError, match=why):
        decode(kind, memoryview(body))
