"""The bytes between Raft members. Each frame is a 4-byte big-endian length, then a kind
byte, then the body:

- ``APPEND`` (an AppendRequest, the hot path): ``>qqqqIB`` term, prev index, prev term,
  commit, entry count and sender length, the sender id, then each entry as ``>qI`` term and
  size followed by its bytes (a CommitLog range, copied once into the frame).
- ``ACK`` (an AppendResponse): ``>q?qqBB`` term, success, match index, conflict index,
  sender length and reason length, then the sender id and the reason.
- ``PB``: a ``RaftMessage`` protobuf, for the rare messages (votes, TimeoutNow).
- ``SNAPSHOT`` (a SnapshotChunk): ``>qQqqqqIB32sI`` term, snapshot id, last index, last
  term, snapshot size, chunk offset, CRC-32 of the payload, sender length, the chain
  digest (32 bytes) and the payload length, then the sender id and the payload (at most
  MAX_CHUNK bytes, lying within the snapshot's size).
- ``SNAPSHOT_ACK`` (a SnapshotAck): ``>qQqqBBB`` term, snapshot id, next offset, match
  index, chain length (0 or 32), sender length and reason length, then the chain, the
  sender id and the reason.
- ``HELLO`` (a :class:`Handshake`, the first frame on a link when the members hold inner
  credentials): ``>q16sBB`` timestamp (ms since the epoch), nonce (16 random bytes), member
  id length and access key length, the member id and the access key (UTF-8), then the
  signature's length (1) and the signature (ASCII): base64(HMAC-SHA1(secret key, "RQRAFT",
  the body up to the signature's length, then the receiving member's id length (1) and
  id)). Naming the receiver keeps a handshake from being played to another member; the
  receiver refuses a timestamp more than five minutes off and a signature seen before.

Appends and their answers are a few struct packs instead of protobuf objects per entry;
the leader sends the same append to followers at the same position, so its frame is
encoded once for all of them (:class:`Encoder`).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, replace
from typing import Final

from google.protobuf.message import DecodeError

from rocketq.auth.credentials import Credentials
from rocketq.auth.signature import hmac_sha1_base64, signatures_match
from rocketq.common.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.replication.ha.secure import NONCE_SIZE, now_ms, stale
from rocketq.replication.raft.node import (
    AppendRequest,
    AppendResponse,
    Entry,
    Message,
    SnapshotAck,
    SnapshotChunk,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)

FRAME: Final = struct.Struct(">IB")  # size of what follows the size field, kind
MAX_FRAME: Final = 64 * 1024 * 1024
PB: Final = 0
APPEND: Final = 1
ACK: Final = 2
HELLO: Final = 3
SNAPSHOT: Final = 4
SNAPSHOT_ACK: Final = 5
SNAPSHOT_HEAD: Final = struct.Struct(">qQqqqqIB32sI")
SNAPSHOT_ACK_HEAD: Final = struct.Struct(">qQqqBBB")
CHAIN_SIZE: Final = 32
MAX_CHUNK: Final = 4 * 1024 * 1024  # what a chunk may carry (senders use 1 MiB)
APPEND_HEAD: Final = struct.Struct(">qqqqIB")
ENTRY_HEAD: Final = struct.Struct(">qI")
ACK_HEAD: Final = struct.Struct(">q?qqBB")
HELLO_HEAD: Final = struct.Struct(f">q{NONCE_SIZE}sBB")
HELLO_DOMAIN: Final = b"RQRAFT"


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
    if isinstance(msg, SnapshotChunk):
        if len(msg.chain) != CHAIN_SIZE or len(msg.payload) > MAX_CHUNK or len(who) > 255:
            raise FrameError("a snapshot chunk with a bad chain, payload or sender size")
        head = SNAPSHOT_HEAD.pack(
            msg.term,
            msg.snapshot_id,
            msg.last_index,
            msg.last_term,
            msg.size,
            msg.offset,
            msg.crc,
            len(who),
            msg.chain,
            len(msg.payload),
        )
        return _framed(SNAPSHOT, [head, who, msg.payload])
    if isinstance(msg, SnapshotAck):
        why = msg.reason.encode()
        if len(msg.chain) not in (0, CHAIN_SIZE) or len(who) > 255 or len(why) > 255:
            raise FrameError("a snapshot answer with a bad chain, sender or reason size")
        head = SNAPSHOT_ACK_HEAD.pack(
            msg.term,
            msg.snapshot_id,
            msg.next_offset,
            msg.match_index,
            len(msg.chain),
            len(who),
            len(why),
        )
        return _framed(SNAPSHOT_ACK, [head, msg.chain, who, why])
    return _framed(PB, [to_pb(sender, msg).SerializeToString()])


def _decode_snapshot(body: memoryview) -> tuple[str, Message]:
    """A SNAPSHOT frame's body; FrameError names what is wrong."""
    (term, snap_id, last_index, last_term, size, offset, crc, slen, chain, plen) = (
        SNAPSHOT_HEAD.unpack_from(body)
    )
    pos = SNAPSHOT_HEAD.size
    if pos + slen + plen != len(body):
        raise FrameError("a snapshot chunk of the wrong size")
    if plen > MAX_CHUNK:
        raise FrameError(f"a snapshot chunk of {plen} bytes (max {MAX_CHUNK})")
    if min(term, last_index, last_term, size, offset) < 0 or offset + plen > size:
        raise FrameError(
            f"a snapshot chunk at {offset} of {plen} bytes, outside its snapshot of {size} "
            "bytes (or a negative term or index)"
        )
    sender = str(body[pos : pos + slen], "utf-8")
    payload = bytes(body[pos + slen :])
    chunk = SnapshotChunk(
        term, sender, snap_id, last_index, last_term, size, offset, payload, crc, bytes(chain)
    )
    return sender, chunk


def _decode_snapshot_ack(body: memoryview) -> tuple[str, Message]:
    """A SNAPSHOT_ACK frame's body; FrameError names what is wrong."""
    term, snap_id, next_offset, match, clen, slen, rlen = SNAPSHOT_ACK_HEAD.unpack_from(body)
    pos = SNAPSHOT_ACK_HEAD.size
    if pos + clen + slen + rlen != len(body):
        raise FrameError("a snapshot answer of the wrong size")
    if clen not in (0, CHAIN_SIZE):
        raise FrameError(f"a snapshot answer with a {clen}-byte chain (0 or {CHAIN_SIZE})")
    if min(term, next_offset, match) < 0:
        raise FrameError("a snapshot answer with a negative term, offset or index")
    chain = bytes(body[pos : pos + clen])
    pos += clen
    sender = str(body[pos : pos + slen], "utf-8")
    reason = str(body[pos + slen : pos + slen + rlen], "utf-8")
    return sender, SnapshotAck(term, sender, snap_id, next_offset, chain, match, reason)


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
        if kind == SNAPSHOT:
            return _decode_snapshot(body)
        if kind == SNAPSHOT_ACK:
            return _decode_snapshot_ack(body)
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


@dataclass(frozen=True, slots=True)
class Handshake:
    """The first frame of a link between members that hold inner credentials: who is
    connecting, signed."""

    member: str
    timestamp_ms: int
    nonce: bytes
    access_key: str
    signature: str = ""


def _signed_part(h: Handshake) -> bytes:
    """The handshake's body up to its signature's length."""
    who, key = h.member.encode(), h.access_key.encode()
    if len(who) > 255 or len(key) > 255:
        raise FrameError("a member id or access key over 255 bytes in a raft handshake")
    if len(h.nonce) != NONCE_SIZE:
        raise FrameError(f"a raft handshake's nonce has {NONCE_SIZE} bytes")
    return HELLO_HEAD.pack(h.timestamp_ms, h.nonce, len(who), len(key)) + who + key


def _content(h: Handshake, receiver: str) -> bytes:
    to = receiver.encode()[:255]
    return HELLO_DOMAIN + _signed_part(h) + bytes([len(to)]) + to


def sign_handshake(
    member: str,
    receiver: str,
    credentials: Credentials,
    *,
    timestamp_ms: int | None = None,
    nonce: bytes | None = None,
) -> Handshake:
    """``member``'s handshake for a link to ``receiver``, stamped now (or at
    ``timestamp_ms``) with a fresh random nonce and signed with ``credentials``."""
    h = Handshake(
        member,
        now_ms() if timestamp_ms is None else timestamp_ms,
        os.urandom(NONCE_SIZE) if nonce is None else nonce,
        credentials.access_key,
    )
    return replace(h, signature=hmac_sha1_base64(credentials.secret_key, _content(h, receiver)))


def encode_handshake(h: Handshake) -> bytes:
    """The handshake as one whole frame, size field included."""
    sig = h.signature.encode("ascii")
    if len(sig) > 255:
        raise FrameError(f"a raft handshake's signature of {len(sig)} bytes (max 255)")
    return _framed(HELLO, [_signed_part(h), bytes([len(sig)]), sig])


def decode_handshake(body: memoryview | bytes) -> Handshake:
    """The handshake in a HELLO frame's body; FrameError for bytes that are not one."""
    try:
        timestamp_ms, nonce, who_len, key_len = HELLO_HEAD.unpack_from(body)
        pos = HELLO_HEAD.size
        member = str(body[pos : pos + who_len], "utf-8")
        pos += who_len
        access_key = str(body[pos : pos + key_len], "utf-8")
        pos += key_len
        if pos >= len(body):
            raise FrameError("a raft handshake cut short")
        sig_len = body[pos]
        pos += 1
        if pos + sig_len != len(body):
            raise FrameError("a raft handshake of the wrong size")
        signature = str(body[pos : pos + sig_len], "ascii")
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"a malformed raft handshake: {exc}") from None
    if not member or not access_key:
        raise FrameError("a raft handshake without a member id or an access key")
    return Handshake(member, timestamp_ms, bytes(nonce), access_key, signature)


def check_handshake(
    h: Handshake, receiver: str, credentials: Credentials, now: int | None = None
) -> str | None:
    """Why member ``receiver``, holding ``credentials``, refuses this handshake, or None
    when it is signed with them for ``receiver`` within the timestamp window (the caller
    checks it is not a replay)."""
    if h.access_key != credentials.access_key:
        return f"it is signed with access key {h.access_key!r}, not this group's"
    expected = hmac_sha1_base64(credentials.secret_key, _content(h, receiver))
    if not signatures_match(expected, h.signature):
        return "its signature does not match (another secret key, or meant for another member?)"
    return stale(h.timestamp_ms, now_ms() if now is None else now)
