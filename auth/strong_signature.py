"""rocketq's strong remoting signature, which rocketq's own clients and nodes use against
servers that announce it (stock RocketMQ clients keep RocketMQ's, :mod:`rocketq.auth.
signature`).

RocketMQ's signature joins the ext-field values in key order and signs them and the body:
it covers neither the keys, nor where one value ends and the next begins, nor the request
code, nor when the request was made. ``{topic: "zzvictim"}`` and ``{ZZ: "zz", topic:
"victim"}`` sign the same bytes, so a captured signed request can be re-cut into another,
and any signed request replays forever, on any connection.

The strong signature covers an unambiguous encoding of all of it, and is fresh. A request
carries, besides ``AccessKey`` (and ``SecurityToken`` when the credentials have one):

- ``SignatureMethod``: ``HmacSHA256``;
- ``Timestamp``: when it was signed, in milliseconds since the Unix epoch (decimal);
- ``Nonce``: 16 to 64 characters of ``A-Z a-z 0-9 _ -``, new for every signature;
- ``Audience``: the server it is meant for, as that server announced it (AUTH_SESSION's
  ``signatureAudience``: a random value each server process draws when it starts), when it
  announced one;
- ``SignatureV2``: base64(HMAC-SHA256(secret key as UTF-8, content)), where content is::

      b"rocketq remoting signature v2\\n"
      int32 request code | int32 version | uint32 number of fields
      for each ext field but SignatureV2, in the order of its key's UTF-8 bytes:
          uint32 length | key (UTF-8) | uint32 length | value (UTF-8)
      uint64 body length | body

  (integers big-endian; an absent body is an empty one, as on the wire). Every part is
  length-prefixed, so the content decodes back to exactly one (code, version, fields, body):
  two different requests never sign the same bytes.

The server refuses a timestamp outside its window (``authentication_signature_window_
seconds``), a nonce it has seen from that access key within the window
(:mod:`rocketq.auth.replay`), and an audience not its own: a request captured on its way to
one server does not replay at another, nor at the same one once it has restarted (and
forgotten the nonces it saw).
"""

from __future__ import annotations

import binascii
import hmac
import re
import struct
from collections.abc import Mapping
from typing import Final, NamedTuple

SIGNATURE_V2: Final = "SignatureV2"
SIGNATURE_METHOD: Final = "SignatureMethod"
TIMESTAMP: Final = "Timestamp"
NONCE: Final = "Nonce"
AUDIENCE: Final = "Audience"
METHOD: Final = "HmacSHA256"
# The ext fields a strong signature adds (AccessKey and SecurityToken are RocketMQ's).
STRONG_FIELDS: Final = (SIGNATURE_V2, SIGNATURE_METHOD, TIMESTAMP, NONCE, AUDIENCE)

DOMAIN: Final = b"rocketq remoting signature v2\n"
NONCE_MIN: Final = 16
NONCE_MAX: Final = 64
# A millisecond timestamp has 13 digits until the year 2286.
TIMESTAMP_DIGITS_MAX: Final = 15
# base64 of a 32-byte HMAC-SHA256.
SIGNATURE_CHARS: Final = 44

_HEAD: Final = struct.Struct(">iiI")
_LENGTH: Final = struct.Struct(">I")
_BODY_LENGTH: Final = struct.Struct(">Q")
_NONCE: Final = re.compile(rf"[A-Za-z0-9_-]{{{NONCE_MIN},{NONCE_MAX}}}")


def _utf8(text: str) -> bytes:
    # surrogatepass: total and one-to-one on every str (a lone surrogate has its own bytes).
    return text.encode("utf-8", "surrogatepass")


def strong_signature_head(code: int, version: int, ext: Mapping[str, str]) -> bytes:
    """The signed content before the body's length and the body: the domain, the code,
    the version and every ext field but ``SignatureV2``, length-prefixed, in the order of
    their keys' UTF-8 bytes. struct.error for a code or version outside int32."""
    fields = sorted((_utf8(k), _utf8(v)) for k, v in ext.items() if k != SIGNATURE_V2)
    parts = [DOMAIN, _HEAD.pack(code, version, len(fields))]
    for key, value in fields:
        parts += (_LENGTH.pack(len(key)), key, _LENGTH.pack(len(value)), value)
    return b"".join(parts)


def strong_signature_content(
    code: int, version: int, ext: Mapping[str, str], body: bytes | memoryview | None
) -> bytes:
    """The whole content a strong signature is the HMAC of (see the module)."""
    size = 0 if body is None else len(body)
    tail = b"" if body is None else bytes(body)
    return strong_signature_head(code, version, ext) + _BODY_LENGTH.pack(size) + tail


def compute_strong_signature(
    secret: str,
    code: int,
    version: int,
    ext: Mapping[str, str],
    body: bytes | memoryview | None,
) -> str:
    """The ``SignatureV2`` value of a request: base64(HMAC-SHA256(secret, content)),
    streaming the body rather than copying it. struct.error for a code or version
    outside int32."""
    mac = hmac.new(_utf8(secret), strong_signature_head(code, version, ext), "sha256")
    if body is None:
        mac.update(_BODY_LENGTH.pack(0))
    else:
        mac.update(_BODY_LENGTH.pack(len(body)))
        mac.update(body)
    return binascii.b2a_base64(mac.digest(), newline=False).decode("ascii")


class StrongFields(NamedTuple):
    """The strong-signature fields of a request, checked for form."""

    timestamp_ms: int
    nonce: str
    signature: str


def parse_strong_fields(ext: Mapping[str, str]) -> StrongFields | str:
    """The strong-signature fields of ``ext`` when they are all there and well formed,
    else why not (a phrase for a refusal's remark). Total: any mapping of strings gives
    one or the other."""
    method = ext.get(SIGNATURE_METHOD)
    if method != METHOD:
        if method is None:
            return f"carries no {SIGNATURE_METHOD}"
        return f"has {SIGNATURE_METHOD} {_shown(method)}; this server knows {METHOD}"
    stamp = ext.get(TIMESTAMP)
    if stamp is None:
        return f"carries no {TIMESTAMP}"
    if not (0 < len(stamp) <= TIMESTAMP_DIGITS_MAX and stamp.isascii() and stamp.isdigit()):
        return f"has a {TIMESTAMP} {_shown(stamp)} that is not milliseconds since the epoch"
    nonce = ext.get(NONCE)
    if nonce is None:
        return f"carries no {NONCE}"
    if _NONCE.fullmatch(nonce) is None:
        return (
            f"has a {NONCE} {_shown(nonce)} that is not {NONCE_MIN} to {NONCE_MAX} "
            "characters of A-Z a-z 0-9 _ -"
        )
    signature = ext.get(SIGNATURE_V2, "")
    if len(signature) != SIGNATURE_CHARS or not signature.isascii():
        return f"has a {SIGNATURE_V2} that is not the base64 of an HMAC-SHA256"
    return StrongFields(int(stamp), nonce, signature)


def _shown(value: str) -> str:
    """A value from the outside world, safe and short enough for a remark."""
    return repr(value if len(value) <= 32 else value[:32] + "...")
