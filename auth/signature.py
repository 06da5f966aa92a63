"""Request signatures as RocketMQ 4.x clients compute them (``AclClientRPCHook``).

A signed request carries the ext fields ``AccessKey`` (and ``SecurityToken`` when the
credentials have one) and ``Signature`` = base64(HMAC-SHA1(secret key, content)), where the
content is the values of all other ext fields, taken in the order of their keys as Java sorts
strings (by UTF-16 code units), joined and encoded as UTF-8, followed by the raw body bytes.
The server rebuilds the same content from the request it received and compares.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from collections.abc import Collection, Mapping
from typing import Final

SIGNATURE: Final = "Signature"
ACCESS_KEY: Final = "AccessKey"
SECURITY_TOKEN: Final = "SecurityToken"
# RocketMQ 4.9.3 and older clients leave this field out of what they sign (MixAll's
# UNIQUE_MSG_QUERY_FLAG); a server also accepts a signature computed without it.
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"

_DEFAULT_SKIP: Final = (SIGNATURE,)


def _java_order(key: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does: by UTF-16 code
    units (big-endian code units compare as their bytes do)."""
    return key.encode("utf-16-be", "surrogatepass")


def _sorted_keys(keys: Collection[str]) -> list[str]:
    # Code point order and UTF-16 order differ only when a key holds a character beyond
    # U+FFFF; almost every key is ASCII, so the plain sort is the common path.
    if "".join(keys).isascii():
        return sorted(keys)
    return sorted(keys, key=_java_order)


def _java_utf8(text: str) -> bytes:
    """``text`` as Java's ``String.getBytes(UTF_8)`` encodes it: surrogate pairs (even when
    Python holds them as two lone surrogates) become one character, a lone surrogate
    becomes ``?``."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        joined = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
        return joined.encode("utf-8", "replace")


def signature_text(ext: Mapping[str, str], *, skip: Collection[str] = _DEFAULT_SKIP) -> bytes:
    """The ext-field part of the signed content: the values of ``ext`` (but those of the
    keys in ``skip``) in Java's key order, joined, as UTF-8."""
    return _java_utf8("".join([ext[key] for key in _sorted_keys(ext) if key not in skip]))


def signature_content(
    ext: Mapping[str, str],
    body: bytes | memoryview | None,
    *,
    skip: Collection[str] = _DEFAULT_SKIP,
) -> bytes:
    """The bytes a RocketMQ 4.x client signs for a request with these ext fields and body:
    the values sorted by key in Java's String order (UTF-16 code units), as UTF-8, then the
    raw body. Keys in ``skip`` (``Signature`` by default) are left out."""
    text = signature_text(ext, skip=skip)
    if body is None or not len(body):
        return text
    return text + bytes(body)


@functools.lru_cache(maxsize=1024)
def _keyed_mac(secret: str) -> hmac.HMAC:
    """An HMAC-SHA1 keyed with ``secret`` and fed nothing yet, to copy for each message
    (keying costs two SHA-1 blocks; a server checks many requests of few users)."""
    return hmac.new(_java_utf8(secret), digestmod=hashlib.sha1)


def hmac_sha1_base64(secret: str, content: bytes | memoryview) -> str:
    """base64(HMAC-SHA1(secret as UTF-8, content)), the form of the ``Signature`` field."""
    mac = _keyed_mac(secret).copy()
    mac.update(content)
    return base64.b64encode(mac.digest()).decode("ascii")


def compute_signature(
    secret: str,
    ext: Mapping[str, str],
    body: bytes | memoryview | None,
    *,
    skip: Collection[str] = _DEFAULT_SKIP,
) -> str:
    """The ``Signature`` value for a request: ``hmac_sha1_base64(secret,
    signature_content(ext, body))`` without copying the body."""
    mac = _keyed_mac(secret).copy()
    mac.update(signature_text(ext, skip=skip))
    if body is not None and len(body):
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


def signatures_match(expected: str, given: str) -> bool:
    """Whether two signature strings are equal, compared in constant time."""
    return hmac.compare_digest(
        expected.encode("utf-8", "replace"), given.encode("utf-8", "replace")
    )
