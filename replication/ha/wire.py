"""The classic HA channel's frames: plain TCP, as RocketMQ's HAService (no gRPC on this path).

A slave opens a connection to its master's HA port and sends a hello: who it is and where
its CommitLog ends. From then on the two sides stream fixed headers:

- master -> slave, a *transfer*: ``offset`` (8), ``master_max_offset`` (8), ``size`` (4),
  ``flags`` (1), then ``size`` bytes of CommitLog starting at ``offset``. ``size`` 0 is a
  heartbeat; flag ``TRUNCATE`` tells the slave to cut its CommitLog back to ``offset``
  (it was ahead of a restarted master).
- slave -> master, a *report*: the slave's CommitLog end (8), as RocketMQ's HAClient
  reports its max offset.

Everything is big-endian. A header that does not parse (bad magic, a size past the limit)
ends the connection with a :class:`HAProtocolError` naming what was wrong.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from rocketq.common.exceptions import RocketqError

HELLO_MAGIC: Final = 0x52514841  # "RQHA"
VERSION: Final = 1
# magic, version, broker id, CommitLog end, length of the broker's client address
HELLO: Final = struct.Struct(">IHqqH")
TRANSFER: Final = struct.Struct(">qqiB")
REPORT: Final = struct.Struct(">q")
TRUNCATE: Final = 0x01
MAX_TRANSFER: Final = 64 * 1024 * 1024
MAX_ADDR: Final = 1024


class HAProtocolError(RocketqError):
    """The other side of an HA connection sent something that is not this protocol."""


@dataclass(frozen=True, slots=True)
class Hello:
    broker_id: int
    max_offset: int
    broker_addr: str


def encode_hello(hello: Hello) -> bytes:
    addr = hello.broker_addr.encode()
    if len(addr) > MAX_ADDR:
        raise ValueError(f"broker address of {len(addr)} bytes is too long (max {MAX_ADDR})")
    return HELLO.pack(HELLO_MAGIC, VERSION, hello.broker_id, hello.max_offset, len(addr)) + addr


def decode_hello_head(head: bytes) -> tuple[int, int, int]:
    """(broker id, CommitLog end, address length) from the fixed part of a hello."""
    if len(head) != HELLO.size:
        raise HAProtocolError(f"an HA hello head of {len(head)} bytes (it has {HELLO.size})")
    magic, version, broker_id, max_offset, addr_len = HELLO.unpack(head)
    if magic != HELLO_MAGIC:
        raise HAProtocolError(
            f"not an HA hello (magic {magic:#x}); is a client connecting to the HA port "
            "instead of the broker's port?"
        )
    if version != VERSION:
        raise HAProtocolError(f"HA protocol version {version} is not spoken here ({VERSION})")
    if addr_len > MAX_ADDR:
        raise HAProtocolError(f"HA hello names an address of {addr_len} bytes (max {MAX_ADDR})")
    return broker_id, max_offset, addr_len


def encode_transfer_head(offset: int, master_max: int, size: int, flags: int = 0) -> bytes:
    return TRANSFER.pack(offset, master_max, size, flags)


def decode_transfer_head(head: bytes) -> tuple[int, int, int, int]:
    """(offset, master's max offset, size, flags)."""
    if len(head) != TRANSFER.size:
        raise HAProtocolError(f"an HA transfer head of {len(head)} bytes (it has {TRANSFER.size})")
    offset, master_max, size, flags = TRANSFER.unpack(head)
    if size < 0 or size > MAX_TRANSFER:
        raise HAProtocolError(f"HA transfer of {size} bytes (max {MAX_TRANSFER})")
    if offset < 0:
        raise HAProtocolError(f"HA transfer at negative offset {offset}")
    return offset, master_max, size, flags
