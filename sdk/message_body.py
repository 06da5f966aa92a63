"""What a consumer checks of each message a pull brings before anyone sees it: the body CRC
the broker stamped, and the inflation of a compressed body under a cap.

RocketMQ's client inflates a body flagged compressed (``SysFlag.COMPRESSED``) with an
``InflaterInputStream`` read to its end, with no limit, and checks the body CRC only when
its decoder is asked to (``checkCRC``); a body that does not inflate throws out of the pull
callback. Its producer compresses only a body of at most ``maxMessageSize`` (4 MiB,
checked before compression), so an honest compressed body inflates to at most that. Here a
body inflates to at most ``max_message_size * max_body_inflate_ratio`` bytes (16 MiB by
default), in steps of ``decompressobj().decompress(data, max_length)``, so a bomb never
allocates past the cap; and the CRC is checked by default (zlib.crc32 runs at GB/s).

A message that fails either is a :class:`BadMessageError`: the consumer reports it (log
and metrics) and moves on, the push consumer through the group's DLQ, the pull consumer by
raising it from ``poll``; one bad message never stops its queue.
"""

from __future__ import annotations

import collections
import logging
import zlib
from typing import TYPE_CHECKING, Final

from rocketq.common.exceptions import ConfigError, MessageIllegalError
from rocketq.common.message import MessageExt, SysFlag
from rocketq.common.record import CRC_MASK, decode_record
from rocketq.sdk.bad_message import BAD_RECORD as BAD_RECORD
from rocketq.sdk.bad_message import BODY_CRC as BODY_CRC
from rocketq.sdk.bad_message import INFLATE_CAP as INFLATE_CAP
from rocketq.sdk.bad_message import NOT_ZLIB as NOT_ZLIB
from rocketq.sdk.bad_message import BadMessageError as BadMessageError

if TYPE_CHECKING:
    from rocketq.sdk.metrics import ClientMetrics

log = logging.getLogger(__name__)

_COMPRESSED: Final = int(SysFlag.COMPRESSED)

# RocketMQ's maxMessageSize (the producer's and the broker's): 4 MiB.
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
# A compressed body may inflate to max_message_size times this.
MAX_BODY_INFLATE_RATIO: Final = 4
# Inflate in steps of this many bytes of output.
INFLATE_STEP: Final = 1024 * 1024


class InflateError(ValueError):
    """A compressed body that does not inflate (``reason`` NOT_ZLIB) or inflates past its
    cap (INFLATE_CAP)."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason


def decode_pulled(
    records: bytes | memoryview,
) -> tuple[list[MessageExt], MessageIllegalError | None]:
    """The records of a pull's answer up to the first that does not decode, and that
    record's error (None when all decode)."""
    data = records if isinstance(records, bytes) else bytes(records)
    out: list[MessageExt] = []
    pos = 0
    while pos < len(data):
        try:
            msg = decode_record(data, pos)
        except MessageIllegalError as exc:
            return out, exc
        out.append(msg)
        pos += msg.store_size
    return out, None


def check_limits(max_message_size: object, max_body_inflate_ratio: object) -> None:
    """Refuse settings that cannot cap an inflated body."""
    for name, value in (
        ("max_message_size", max_message_size),
        ("max_body_inflate_ratio", max_body_inflate_ratio),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a whole number of at least 1, not {value!r}")


def inflate_body(data: bytes, limit: int) -> bytes:
    """``data`` inflated (zlib), holding at most ``limit`` + 1 bytes at any time; raises
    InflateError if it is not a whole zlib stream or inflates past ``limit``."""
    inflate = zlib.decompressobj()
    parts: list[bytes] = []
    size = 0
    pending = data
    try:
        while not inflate.eof:
            step = min(INFLATE_STEP, limit + 1 - size)
            out = inflate.decompress(pending, step)
            size += len(out)
            if size > limit:
                raise InflateError(INFLATE_CAP, f"the body inflates past {limit} bytes")
            parts.append(out)
            pending = inflate.unconsumed_tail
            if not pending and len(out) < step:
                break  # all input taken and nothing more to give: the stream is cut short
    except zlib.error as exc:
        raise InflateError(NOT_ZLIB, f"the body is not zlib data ({exc})") from None
    if not inflate.eof:
        raise InflateError(NOT_ZLIB, f"the zlib stream ends early ({len(data)} bytes)")
    return b"".join(parts)


def check_message(msg: MessageExt, *, max_body_bytes: int, check_crc: bool) -> None:
    """Check ``msg``'s body CRC (if ``check_crc``) and inflate it in place if compressed;
    raises BadMessageError, leaving the message as it was."""
    body = msg.body
    if check_crc:
        crc = zlib.crc32(body) & CRC_MASK
        if crc != msg.body_crc:
            raise BadMessageError(
                msg,
                BODY_CRC,
                f"its body's CRC32 is {crc}, the record says {msg.body_crc} ({len(body)} bytes)",
            )
    if msg.sys_flag & _COMPRESSED:
        try:
            msg.body = inflate_body(body, max_body_bytes)
        except InflateError as exc:
            raise BadMessageError(msg, exc.reason, str(exc)) from None


def check_messages(
    msgs: list[MessageExt], *, max_body_bytes: int, check_crc: bool
) -> tuple[list[MessageExt], list[BadMessageError]]:
    """The messages that pass :func:`check_message` (inflated), and the errors of those
    that do not, each in queue order."""
    good: list[MessageExt] = []
    bad: list[BadMessageError] = []
    for msg in msgs:
        try:
            check_message(msg, max_body_bytes=max_body_bytes, check_crc=check_crc)
        except BadMessageError as exc:
            bad.append(exc)
        else:
            good.append(msg)
    return good, bad


def report_bad(
    exc: BadMessageError,
    *,
    group: str,
    client_id: str,
    counts: collections.Counter[str],
    metrics: ClientMetrics | None,
    then: str = "",
) -> None:
    """Report a bad message a consumer met: count it by reason in ``counts`` (the
    consumer's ``bad_messages``), record it in the client metrics when they are on, and
    log it as an error, followed by ``then`` (what the consumer does with it)."""
    counts[exc.reason] += 1
    if metrics is not None:
        metrics.observe_bad_message(exc.topic, group, client_id, exc.reason)
    log.error("group %s: %s%s", group, exc, f"; {then}" if then else "")
