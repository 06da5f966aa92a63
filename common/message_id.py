"""Message ids: the broker's offset id and the producer's unique id (UNIQ_KEY).

The offset id is the store host (IPv4 4 + port 4, or IPv6 16 + port 4) followed by the
record's CommitLog offset (8), as uppercase hex, so an id finds its record directly.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from datetime import datetime
from typing import Final

_PORT_OFFSET: Final = struct.Struct(">iq")
_HEX2: Final = tuple(f"{i:02X}" for i in range(256))


def encode_offset_msg_id(store_host: bytes, physical_offset: int) -> str:
    """``store_host`` is 8 bytes (IPv4 + port) or 20 bytes (IPv6 + port); the offset goes
    as Java's ``putLong`` writes it (two's complement: a damaged record's negative offset
    still makes an id)."""
    return (store_host + physical_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """-> (``"ip:port"``, physical offset); ValueError naming the id if it is not one."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise ValueError(f"message id {msg_id!r} is not hex") from exc
    if len(raw) == 16:
        ip = socket.inet_ntop(socket.AF_INET, raw[:4])
        port, offset = _PORT_OFFSET.unpack_from(raw, 4)
        return f"{ip}:{port}", offset
    if len(raw) == 28:
        ip = socket.inet_ntop(socket.AF_INET6, raw[:16])
        port, offset = _PORT_OFFSET.unpack_from(raw, 16)
        return f"[{ip}]:{port}", offset
    raise ValueError(
        f"message id {msg_id!r} has {len(raw)} bytes; an offset id has 16 (IPv4) or 28 (IPv6)"
    )


class UniqIdGenerator:
    """Client unique ids in RocketMQ's shape: 16 bytes as 32 hex digits.

    ip (4) + pid (2) + a random per-process part (4) + milliseconds since the start of the
    month (4) + a counter (2). The prefix is fixed per generator, so an id costs one format.
    """

    def __init__(self, ip: str = "127.0.0.1") -> None:
        try:
            ip_raw = socket.inet_aton(ip)
        except OSError:
            ip_raw = b"\x7f\0\0\x01"
        prefix = ip_raw + struct.pack(">H", os.getpid() & 0xFFFF) + os.urandom(4)
        self._prefix = prefix.hex().upper()
        now = datetime.now()
        month_start = datetime(now.year, now.month, 1)
        self._month_start_ms = int(month_start.timestamp() * 1000)
        self._counter = itertools.count()
        self._ms = -1  # the millisecond ``_head`` was made for
        self._head = ""

    def next_id(self) -> str:
        """A new id: the prefix and time part are formatted once per millisecond, the
        counter from a table (a send makes one; formatting each whole took microseconds)."""
        ms = int(time.time() * 1000)
        if ms != self._ms:
            self._ms = ms
            self._head = f"{self._prefix}{(ms - self._month_start_ms) & 0xFFFFFFFF:08X}"
        n = next(self._counter) & 0xFFFF
        return self._head + _HEX2[n >> 8] + _HEX2[n & 0xFF]
