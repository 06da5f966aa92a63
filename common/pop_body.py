"""The body of BATCH_ACK_MESSAGE (RocketMQ 5's BatchAckMessageRequestBody), read the same
way by the broker's handler and by the authorization check.

``{"brokerName": ..., "acks": [{"c": group, "t": topic, "r": "1" for the pop retry topic,
"so": the receipt's check point offset, "q": queue id, "rq": revive queue, "pt": pop time,
"it": invisible time, "b": the acknowledged offsets as a bit set}]}``: each field also under
its long name (``consumerGroup``, ``topic``, ``retry``, ``startOffset``, ``queueId``,
``reviveQueueId``, ``popTime``, ``invisibleTime``, ``bitSet``), as fastjson2 reads them. The
bit set is Java's ``BitSet.toByteArray()`` in base64 (how fastjson2 writes the bytes): bit
``i`` set acknowledges offset ``so + i``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Final

MAX_ACKS: Final = 1024  # entries in one body
MAX_BITSET_BYTES: Final = 4096  # 32,768 offsets per entry


class PopBodyError(ValueError):
    """A BATCH_ACK_MESSAGE body that is not RocketMQ's BatchAckMessageRequestBody."""


@dataclass(frozen=True)
class BatchAck:
    group: str
    topic: str
    retry: bool
    start_offset: int
    queue_id: int
    revive_qid: int
    pop_time: int
    invisible_time: int
    bits: tuple[int, ...]

    @property
    def offsets(self) -> list[int]:
        return [self.start_offset + i for i in self.bits]


def _field(entry: dict[str, Any], short: str, long: str) -> Any:
    value = entry.get(short, entry.get(long))
    if value is None:
        raise PopBodyError(f"a batch ack has no {long!r} ({short!r})")
    return value


def _number(entry: dict[str, Any], short: str, long: str) -> int:
    value = _field(entry, short, long)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise PopBodyError(f"a batch ack's {long} is {str(value)[:40]!r}, not a number")
    try:
        number = int(value)
    except ValueError:
        raise PopBodyError(f"a batch ack's {long} is {str(value)[:40]!r}, not a number") from None
    if not -(1 << 63) <= number < 1 << 63:
        raise PopBodyError(f"a batch ack's {long} is past a Java long's range")
    return number


def _text(entry: dict[str, Any], short: str, long: str) -> str:
    value = _field(entry, short, long)
    if not isinstance(value, str) or not value:
        raise PopBodyError(f"a batch ack's {long} is {str(value)[:40]!r}, not a name")
    return value


def _bits(entry: dict[str, Any]) -> tuple[int, ...]:
    value = _field(entry, "b", "bitSet")
    if not isinstance(value, str):
        raise PopBodyError("a batch ack's bitSet must be base64 text (BitSet.toByteArray)")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise PopBodyError("a batch ack's bitSet is not base64") from None
    if len(raw) > MAX_BITSET_BYTES:
        raise PopBodyError(
            f"a batch ack's bitSet holds {len(raw)} bytes; at most {MAX_BITSET_BYTES}"
        )
    return tuple(i * 8 + bit for i, byte in enumerate(raw) for bit in range(8) if byte >> bit & 1)


def decode_batch_acks(body: bytes | memoryview | None) -> list[BatchAck]:
    """The acks of a BATCH_ACK_MESSAGE body; PopBodyError names what is wrong."""
    try:
        doc = json.loads(bytes(body or b""))
    except (ValueError, RecursionError):
        raise PopBodyError("the batch ack body is not JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("acks"), list):
        raise PopBodyError("the batch ack body has no list 'acks' (BatchAckMessageRequestBody)")
    entries = doc["acks"]
    if len(entries) > MAX_ACKS:
        raise PopBodyError(f"the batch ack body has {len(entries)} acks; at most {MAX_ACKS}")
    acks = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise PopBodyError("a batch ack is not an object")
        retry = str(entry.get("r", entry.get("retry", "0")))
        if retry not in ("0", "1"):
            raise PopBodyError(f"a batch ack's retry is {retry[:8]!r}, not 0 or 1")
        acks.append(
            BatchAck(
                _text(entry, "c", "consumerGroup"),
                _text(entry, "t", "topic"),
                retry == "1",
                _number(entry, "so", "startOffset"),
                _number(entry, "q", "queueId"),
                _number(entry, "rq", "reviveQueueId"),
                _number(entry, "pt", "popTime"),
                _number(entry, "it", "invisibleTime"),
                _bits(entry),
            )
        )
    return acks


def encode_batch_acks(broker_name: str, acks: list[BatchAck]) -> bytes:
    """A body as a RocketMQ 5 client writes it (for tests and rocketq's own callers)."""

    def bitset(bits: tuple[int, ...]) -> str:
        raw = bytearray((max(bits) // 8 + 1) if bits else 0)
        for i in bits:
            raw[i // 8] |= 1 << (i % 8)
        return base64.b64encode(bytes(raw)).decode()

    return json.dumps(
        {
            "brokerName": broker_name,
            "acks": [
                {
                    "c": a.group,
                    "t": a.topic,
                    "r": "1" if a.retry else "0",
                    "so": a.start_offset,
                    "q": a.queue_id,
                    "rq": a.revive_qid,
                    "pt": a.pop_time,
                    "it": a.invisible_time,
                    "b": bitset(a.bits),
                }
                for a in acks
            ],
        }
    ).encode()
