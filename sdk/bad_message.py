"""A pulled message the consumer cannot deliver (:class:`BadMessageError`) and why
(:mod:`rocketq.sdk.message_body` checks each message; this class stays apart from it so
that the compiled build leaves the error, a public class, as Python)."""

from __future__ import annotations

from typing import Final

from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.message import MessageExt

# Why a message is bad (BadMessageError.reason, a metrics label).
BODY_CRC: Final = "body_crc"
NOT_ZLIB: Final = "not_zlib"
INFLATE_CAP: Final = "inflate_cap"
BAD_RECORD: Final = "bad_record"  # a pulled record that does not decode at all


class BadMessageError(MessageIllegalError):
    """A pulled message the consumer cannot deliver: its body fails its CRC, does not
    inflate, or inflates past the cap. ``message`` is the message as stored (its body the
    raw stored bytes); ``reason`` is BODY_CRC, NOT_ZLIB or INFLATE_CAP; ``topic``,
    ``queue_id``, ``queue_offset`` and ``msg_id`` say which message it is. The consumer
    has already moved past it.

    With ``reason`` BAD_RECORD (:meth:`undecodable`) the record itself did not decode:
    ``message`` is None, ``msg_id`` is empty and ``queue_offset`` is the offset the
    consumer skipped (the record is there or after it)."""

    message: MessageExt | None

    def __init__(
        self,
        message: MessageExt | None,
        reason: str,
        detail: str,
        *,
        where: tuple[str, int, int] = ("", -1, -1),
    ) -> None:
        self.message = message
        self.reason = reason
        if message is None:
            self.topic, self.queue_id, self.queue_offset = where
            self.msg_id = ""
            text = (
                f"the record at offset {self.queue_offset} of {self.topic} queue "
                f"{self.queue_id} (or the first after it) does not decode ({reason}): {detail}"
            )
        else:
            self.topic = message.topic
            self.queue_id = message.queue_id
            self.queue_offset = message.queue_offset
            self.msg_id = message.msg_id
            text = (
                f"message {self.msg_id} at offset {self.queue_offset} of {self.topic} queue "
                f"{self.queue_id} is bad ({reason}): {detail}"
            )
        super().__init__(text)

    @classmethod
    def undecodable(
        cls, topic: str, queue_id: int, queue_offset: int, detail: str
    ) -> BadMessageError:
        """A pulled record at or after ``queue_offset`` that does not decode."""
        return cls(None, BAD_RECORD, detail, where=(topic, queue_id, queue_offset))
