"""The bytes between Raft members. Each frame is a 4-byte big-endian length, then a kind
byte, then the body:

- ``APPEND`` (an AppendRequest, the hot path): ``>qqqqIB`` term, prev index, prev term,
  commit, entry count and sender length, the sender id, then each entry as ``>qI`` term and
  size followed by its bytes (a CommitLog range, copied once into the frame).
- ``ACK`` (an AppendResponse): ``>q?qqBB`` term, success, match index, conflict index,
  sender length and reason length, then the sender id and the reason.
- ``PB``: a ``RaftMessage`` protobuf, for the rare messages (votes, TimeoutNow).

Appends and their answers are a few struct packs instead of protobuf objects per entry;
the leader sends the same append to followers at the same position, so its frame is
encoded once for all of them (:class:`Encoder`).
"""

from __future__ import annotations

import struct
from typing import Final

from google.protobuf.message import DecodeError

from rocketq.common.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.replication.raft.node import (
    AppendRequest,
    AppendResponse,
    Entry,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)

FRAME: Final = struct.Struct(">IB")  # size of what follows the size field, kind
MAX_FRAME: Final = 64 * 1024 * 1024
PB: Final = 0
APPEND: Final = 1
ACK: Final = 2
APPEND_HEAD: Final = struct.Struct(">qqqqIB")
ENTRY_HEAD: Final = struct.Struct(">qI")
ACK_HEAD: Final = struct.Struct(">q?qqBB")


class FrameError(ValueError):
    """Bytes that are not a Raft frame."""


def to_pb(sender: str, msg: Message) -> pb.RaftMessage:
    if isinstance(msg, VoteRequest):
        return pb.RaftMessage(
            sender=sender,
            term=msg.term,
            vote_request=pb.RaftVoteRequest(
                last_index=msg.last_index,
                last_term=msg.last_term,
                pre=msg.pre,
                transfer=msg.transfer,
            ),
        )
    if isinstance(msg, VoteResponse):
        return pb.RaftMessage(
            sender=sender,
            term=msg.term,
            vote_response=pb.RaftVoteResponse(granted=msg.granted, pre=msg.pre, reason=msg.reason),
        )
    if isinstance(msg, TimeoutNow):
        return pb.RaftMessage(sender=sender, term=msg.term, timeout_now=pb.RaftTimeoutNow())
    raise TypeError(f"{type(msg).__name__} has a frame of its own")


def from_pb(m: pb.RaftMessage) -> Message | None:
    sender = m.sender
    kind = m.WhichOneof("kind")
    if kind == "vote_request":
        v = m.vote_request
        return VoteRequest(m.term, sender, v.last_index, v.last_term, v.pre, v.transfer)
    if kind == "vote_response":
        r = m.vote_response
        return VoteResponse(m.term, sender, r.granted, r.pre, r.reason)
    if kind == "timeout_now":
        return TimeoutNow(m.term, sender)
    return None


def _framed(kind: int, parts: list[bytes]) -> bytes:
    size = 1 + sum(map(len, parts))
    if size > MAX_FRAME:
        raise FrameError(
            f"a raft frame of {size} bytes (max {MAX_FRAME}); lower the entries per append"
        )
    return b"".join([FRAME.pack(size, kind), *parts])


def encode(sender: str, msg: Message) -> bytes:
    """One whole frame, size field included."""
    who = sender.encode()
    if isinstance(msg, AppendRequest):
        parts = [
            APPEND_HEAD.pack(
                msg.term, msg.prev_index, msg.prev_term, msg.commit, len(msg.entries), len(who)
            ),
            who,
        ]
        for e in msg.entries:
            parts += (ENTRY_HEAD.pack(e.term, len(e.data)), e.data)
        return _framed(APPEND, parts)
    if isinstance(msg, AppendResponse):
        why = msg.reason.encode()
        head = ACK_HEAD.pack(
            msg.term, msg.success, msg.match_index, msg.conflict_index, len(who), len(why)
        )
        return _framed(ACK, [head, who, why])
    return _framed(PB, [to_pb(sender, msg).SerializeToString()])


def decode(kind: int, body: memoryview) -> tuple[str, Message | None]:
    """-> (sender, message); the message is None for a kind this member does not know."""
    try:
        if kind == APPEND:
            term, prev_index, prev_term, commit, count, slen = APPEND_HEAD.unpack_from(body)
            pos = APPEND_HEAD.size
            sender = str(body[pos : pos + slen], "utf-8")
            pos += slen
            entries = []
            for _ in range(count):
                e_term, size = ENTRY_HEAD.unpack_from(body, pos)
                pos += ENTRY_HEAD.size
                if pos + size > len(body):
                    raise FrameError("an entry runs past the end of its frame")
                entries.append(Entry(e_term, bytes(body[pos : pos + size])))
                pos += size
            if pos != len(body):
                raise FrameError(f"{len(body) - pos} bytes after the last entry")
            msg: Message = AppendRequest(
                term, sender, prev_index, prev_term, tuple(entries), commit
            )
            return sender, msg
        if kind == ACK:
            term, ok, match, conflict, slen, rlen = ACK_HEAD.unpack_from(body)
            pos = ACK_HEAD.size
            if pos + slen + rlen != len(body):
                raise FrameError("an append answer of the wrong size")
            sender = str(body[pos : pos + slen], "utf-8")
            reason = str(body[pos + slen : pos + slen + rlen], "utf-8")
            return sender, AppendResponse(term, sender, ok, match, conflict, reason)
        if kind == PB:
            m = pb.RaftMessage.FromString(bytes(body))
            return m.sender, from_pb(m)
    except (struct.error, UnicodeDecodeError, DecodeError) as exc:
        raise FrameError(f"a malformed raft frame of kind {kind}: {exc}") from None
    raise FrameError(f"unknown raft frame kind {kind}")


class Encoder:
    """Frames for one sender. An append equal to the one just encoded (same term,
    position, commit and entry objects: the leader's next append to another follower at
    the same place) reuses that frame."""

    def __init__(self, sender: str) -> None:
        self.sender = sender
        self._last: AppendRequest | None = None
        self._last_frame = b""

    def encode(self, msg: Message) -> bytes:
        if isinstance(msg, AppendRequest) and msg.entries:
            last = self._last
            if (
                last is not None
                and last.prev_index == msg.prev_index
                and last.term == msg.term
                and last.commit == msg.commit
                and len(last.entries) == len(msg.entries)
                and all(a is b for a, b in zip(last.entries, msg.entries, strict=True))
            ):
                return self._last_frame
            frame = encode(self.sender, msg)
            self._last, self._last_frame = msg, frame
            return frame
        return encode(self.sender, msg)
