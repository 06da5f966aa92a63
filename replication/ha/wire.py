"""The classic HA channel's frames: plain TCP, as RocketMQ's HAService (no gRPC on this path).

A slave opens a connection to its master's HA port and sends a hello: who it is and where
its CommitLog ends. The hello, field by field:

- ``magic`` (4, "RQHA"), ``version`` (2), ``broker id`` (8), ``CommitLog end`` (8),
  ``address length`` (2), then the slave's broker address (UTF-8, at most MAX_ADDR bytes);
- version 1 ends there (a slave without inner credentials sends it, as before);
- version 2 goes on with the slave's inner credentials: ``timestamp`` (8, ms since the
  epoch), ``nonce`` (16 random bytes), ``access key length`` (1), the access key (UTF-8),
  ``signature length`` (1), the signature (ASCII): base64(HMAC-SHA1(secret key, every byte
  of the hello before the signature length)), i.e. over all the fields above, the
  timestamp, nonce and access key included.

A master given inner credentials takes only a version 2 hello signed with them, whose
timestamp is within five minutes of its clock and whose signature it has not seen before
(or a slave whose client certificate it verified); a master without them takes both
versions and checks no signature (as before).

From then on the two sides stream fixed headers:

- master -> slave, a *transfer*: ``offset`` (8), ``master_max_offset`` (8), ``size`` (4),
  ``flags`` (1), then ``size`` bytes of CommitLog starting at ``offset``. ``size`` 0 is a
  heartbeat; flag ``TRUNCATE`` tells the slave to cut its CommitLog back to ``offset``
  (it was ahead of a restarted master).
- slave -> master, a *report*: the slave's CommitLog end (8), as RocketMQ's HAClient
  reports its max offset. A report past what the master sent on the connection is a
  protocol violation: the master closes the connection.

Everything is big-endian. A header that does not parse (bad magic, a size past the limit)
ends the connection with a :class:`HAProtocolError` naming what was wrong.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, replace
from typing import Final

from rocketq.auth.credentials import Credentials
from rocketq.auth.signature import hmac_sha1_base64, signatures_match
from rocketq.common.exceptions import RocketqError
from rocketq.replication.ha.secure import NONCE_SIZE, now_ms, stale

HELLO_MAGIC: Final = 0x52514841  # "RQHA"
VERSION: Final = 1
SIGNED_VERSION: Final = 2  # the hello carries the slave's inner credentials
# magic, version, broker id, CommitLog end, length of the broker's client address
HELLO: Final = struct.Struct(">IHqqH")
# (version 2) timestamp ms, nonce, access key length; then the key, its signature's length
# (one byte) and the signature
HELLO_AUTH: Final = struct.Struct(f">q{NONCE_SIZE}sB")
MAX_KEY: Final = 255
MAX_SIGNATURE: Final = 255
TRANSFER: Final = struct.Struct(">qqiB")
REPORT: Final = struct.Struct(">q")
TRUNCATE: Final = 0x01
MAX_TRANSFER: Final = 64 * 1024 * 1024
MAX_ADDR: Final = 1024


class HAProtocolError(RocketqError):
    """The other side of an HA connection sent something that is not this protocol."""


MAX_HELLO: Final = HELLO.size + MAX_ADDR + HELLO_AUTH.size + MAX_KEY + 1 + MAX_SIGNATURE


@dataclass(frozen=True, slots=True)
class Hello:
    """A slave's hello; ``access_key`` and ``signature`` set for a signed one (version 2)."""

    broker_id: int
    max_offset: int
    broker_addr: str
    timestamp_ms: int = 0
    nonce: bytes = b""
    access_key: str = ""
    signature: str = ""

    @property
    def signed(self) -> bool:
        return bool(self.access_key)


def _unsigned_bytes(hello: Hello) -> bytes:
    """The hello up to its signature's length: what is signed (all of a version 1 hello)."""
    addr = hello.broker_addr.encode()
    if len(addr) > MAX_ADDR:
        raise ValueError(f"broker address of {len(addr)} bytes is too long (max {MAX_ADDR})")
    if not hello.signed:
        return HELLO.pack(HELLO_MAGIC, VERSION, hello.broker_id, hello.max_offset, len(addr)) + addr
    key = hello.access_key.encode()
    if len(key) > MAX_KEY:
        raise ValueError(
            f"an access key of {len(key)} bytes is too long for the HA hello (max {MAX_KEY})"
        )
    if len(hello.nonce) != NONCE_SIZE:
        raise ValueError(f"an HA hello's nonce has {NONCE_SIZE} bytes")
    head = HELLO.pack(HELLO_MAGIC, SIGNED_VERSION, hello.broker_id, hello.max_offset, len(addr))
    return head + addr + HELLO_AUTH.pack(hello.timestamp_ms, hello.nonce, len(key)) + key


def encode_hello(hello: Hello) -> bytes:
    """The hello's bytes: version 1 when unsigned, else version 2 (see the module)."""
    raw = _unsigned_bytes(hello)
    if not hello.signed:
        return raw
    sig = hello.signature.encode("ascii")
    if len(sig) > MAX_SIGNATURE:
        raise ValueError(f"a signature of {len(sig)} bytes (max {MAX_SIGNATURE})")
    return raw + bytes([len(sig)]) + sig


def sign_hello(
    hello: Hello,
    credentials: Credentials,
    *,
    timestamp_ms: int | None = None,
    nonce: bytes | None = None,
) -> Hello:
    """``hello`` signed with a slave's inner credentials, stamped now (or at
    ``timestamp_ms``) with a fresh random nonce."""
    stamped = replace(
        hello,
        timestamp_ms=now_ms() if timestamp_ms is None else timestamp_ms,
        nonce=os.urandom(NONCE_SIZE) if nonce is None else nonce,
        access_key=credentials.access_key,
        signature="",
    )
    signature = hmac_sha1_base64(credentials.secret_key, _unsigned_bytes(stamped))
    return replace(stamped, signature=signature)


def check_hello(hello: Hello, credentials: Credentials, now: int | None = None) -> str | None:
    """Why a master holding ``credentials`` refuses this hello, or None when it is signed
    with them within the timestamp window (the caller checks it is not a replay)."""
    if not hello.signed:
        return "the hello is not signed (the slave has no inner credentials?)"
    if hello.access_key != credentials.access_key:
        return f"the hello is signed with access key {hello.access_key!r}, not this master's"
    expected = hmac_sha1_base64(credentials.secret_key, _unsigned_bytes(hello))
    if not signatures_match(expected, hello.signature):
        return "the hello's signature does not match (another secret key?)"
    return stale(hello.timestamp_ms, now_ms() if now is None else now)


def decode_hello_head(head: bytes) -> tuple[int, int, int]:
    """(broker id, CommitLog end, address length) from the fixed part of a hello."""
    return decode_hello_fixed(head)[1:]


def decode_hello_fixed(head: bytes) -> tuple[int, int, int, int]:
    """(version, broker id, CommitLog end, address length) from the fixed part of a hello."""
    if len(head) != HELLO.size:
        raise HAProtocolError(f"an HA hello head of {len(head)} bytes (it has {HELLO.size})")
    magic, version, broker_id, max_offset, addr_len = HELLO.unpack(head)
    if magic != HELLO_MAGIC:
        raise HAProtocolError(
            f"not an HA hello (magic {magic:#x}); is a client connecting to the HA port "
            "instead of the broker's port?"
        )
    if version not in (VERSION, SIGNED_VERSION):
        raise HAProtocolError(
            f"HA protocol version {version} is not spoken here ({VERSION}, {SIGNED_VERSION})"
        )
    if addr_len > MAX_ADDR:
        raise HAProtocolError(f"HA hello names an address of {addr_len} bytes (max {MAX_ADDR})")
    return version, broker_id, max_offset, addr_len


def decode_hello(buf: bytes | bytearray | memoryview) -> tuple[Hello, int] | None:
    """The hello at the start of ``buf`` and its length in bytes, or None while it is not
    whole. HAProtocolError for bytes that are not a hello."""
    if len(buf) < HELLO.size:
        return None
    version, broker_id, max_offset, addr_len = decode_hello_fixed(bytes(buf[: HELLO.size]))
    pos = HELLO.size + addr_len
    if len(buf) < pos:
        return None
    raw_addr = bytes(buf[HELLO.size : pos])
    if version == VERSION:
        return Hello(broker_id, max_offset, raw_addr.decode(errors="replace")), pos
    try:
        # Signed: the address is re-encoded to check the signature, so it must be text.
        addr = raw_addr.decode()
    except UnicodeDecodeError:
        raise HAProtocolError("a signed HA hello's address is not UTF-8 text") from None
    if len(buf) < pos + HELLO_AUTH.size:
        return None
    timestamp_ms, nonce, key_len = HELLO_AUTH.unpack_from(buf, pos)
    pos += HELLO_AUTH.size + key_len
    if len(buf) < pos + 1:
        return None
    key_bytes = bytes(buf[pos - key_len : pos])
    end = pos + 1 + buf[pos]
    if len(buf) < end:
        return None
    try:
        key = key_bytes.decode()
        signature = bytes(buf[pos + 1 : end]).decode("ascii")
    except UnicodeDecodeError:
        raise HAProtocolError("an HA hello's access key or signature is not text") from None
    if not key:
        raise HAProtocolError("a signed HA hello without an access key")
    return Hello(broker_id, max_offset, addr, timestamp_ms, nonce, key, signature), end


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
