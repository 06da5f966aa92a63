"""Request signatures as RocketMQ 4.x clients compute them (``AclClientRPCHook``).

A signed request carries the ext fields ``AccessKey`` (and ``SecurityToken`` when the
credentials have one) and ``Signature`` = base64(HMAC-SHA1(secret key, content)), where the
content is the values of all other ext fields, taken in the order of their keys as Java sorts
strings (by UTF-16 code units), joined and encoded as UTF-8, followed by the raw body bytes.
The server rebuilds the same content from the request it received and compares.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import hmac
import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

SIGNATURE: Final = "Signature"
ACCESS_KEY: Final = "AccessKey"
SECURITY_TOKEN: Final = "SecurityToken"
# RocketMQ 4.9.3 and older clients leave this field out of what they sign (MixAll's
# UNIQUE_MSG_QUERY_FLAG); a server also accepts a signature computed without it.
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"

_DEFAULT_SKIP: Final = (SIGNATURE,)
_Hash = Any  # hashlib's SHA-1 state (hashlib._Hash is not public)
_SHA1_BLOCK: Final = 64
_IPAD: Final = bytes(b ^ 0x36 for b in range(256))
_OPAD: Final = bytes(b ^ 0x5C for b in range(256))


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


_Values = Callable[[Mapping[str, str]], Sequence[str]]


def _no_values(ext: Mapping[str, str]) -> Sequence[str]:
    return ()


# Key sets remembered, and the largest remembered (keys, characters of all keys): a server
# also meets key sets made up by anyone, so what it keeps stays small.
_ORDERS_KEPT: Final = 128
_KEPT_KEYS_MAX: Final = 32
_KEPT_KEY_CHARS_MAX: Final = 512


@functools.lru_cache(maxsize=_ORDERS_KEPT)
def _values_in_order(keys: tuple[str, ...], skip: tuple[str, ...] | frozenset[str]) -> _Values:
    """What picks the signed values out of ext fields with exactly these keys, in Java's
    key order: a request kind always sends the same keys, so the sort is done once per
    kind, not once per request."""
    order = [key for key in _sorted_keys(keys) if key not in skip]
    if not order:
        return _no_values
    if len(order) == 1:
        only = order[0]
        return lambda ext: (ext[only],)
    return operator.itemgetter(*order)


def _java_utf8(text: str) -> bytes:
    """``text`` as Java's ``String.getBytes(UTF_8)`` encodes it: surrogate pairs (even when
    Python holds them as two lone surrogates) become one character, a lone surrogate
    becomes ``?``."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        joined = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
        return joined.encode("utf-8", "replace")


# The picker of each key set met with the default skip: a plain dict, looked up by the key
# tuple (a send's ext fields are the same keys every time); emptied when it grows past
# _ORDERS_KEPT, and a key set too large to keep is sorted each time instead.
_DEFAULT_ORDERS: dict[tuple[str, ...], _Values] = {}


def _default_picker(keys: tuple[str, ...]) -> _Values:
    if len(keys) > _KEPT_KEYS_MAX or sum(map(len, keys)) > _KEPT_KEY_CHARS_MAX:
        order = [key for key in _sorted_keys(keys) if key not in _DEFAULT_SKIP]
        return lambda ext: [ext[key] for key in order]
    if len(_DEFAULT_ORDERS) >= _ORDERS_KEPT:
        _DEFAULT_ORDERS.clear()
    pick = _DEFAULT_ORDERS[keys] = _values_in_order(keys, _DEFAULT_SKIP)
    return pick


def signature_text(ext: Mapping[str, str], *, skip: Collection[str] = _DEFAULT_SKIP) -> bytes:
    """The ext-field part of the signed content: the values of ``ext`` (but those of the
    keys in ``skip``) in Java's key order, joined, as UTF-8."""
    keys = tuple(ext)
    if skip is _DEFAULT_SKIP:
        pick = _DEFAULT_ORDERS.get(keys) or _default_picker(keys)
        return _java_utf8("".join(pick(ext)))
    if (
        len(keys) <= _KEPT_KEYS_MAX
        and isinstance(skip, tuple | frozenset)  # a list or a set cannot key the cache
        and sum(map(len, keys)) <= _KEPT_KEY_CHARS_MAX
    ):
        return _java_utf8("".join(_values_in_order(keys, skip)(ext)))
    return _java_utf8("".join([ext[key] for key in _sorted_keys(keys) if key not in skip]))


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
def _keyed_mac(secret: str) -> tuple[_Hash, _Hash]:
    """SHA-1 states fed the secret's inner and outer pads (HMAC, RFC 2104), to copy for
    each message: keying costs two SHA-1 blocks, and a client signs, a server checks,
    many requests of few secrets. Computing HMAC from them is what ``hmac`` does, without
    its Python-level object per message."""
    key = _java_utf8(secret)
    if len(key) > _SHA1_BLOCK:
        key = hashlib.sha1(key).digest()
    key = key.ljust(_SHA1_BLOCK, b"\0")
    return (
        hashlib.sha1(key.translate(_IPAD)),
        hashlib.sha1(key.translate(_OPAD)),
    )


def _hmac_sha1(secret: str, *parts: bytes | memoryview) -> bytes:
    inner_pad, outer_pad = _keyed_mac(secret)
    inner = inner_pad.copy()
    for part in parts:
        inner.update(part)
    outer = outer_pad.copy()
    outer.update(inner.digest())
    digest: bytes = outer.digest()
    return digest


def hmac_sha1_base64(secret: str, content: bytes | memoryview) -> str:
    """base64(HMAC-SHA1(secret as UTF-8, content)), the form of the ``Signature`` field."""
    return binascii.b2a_base64(_hmac_sha1(secret, content), newline=False).decode("ascii")


def compute_signature(
    secret: str,
    ext: Mapping[str, str],
    body: bytes | memoryview | None,
    *,
    skip: Collection[str] = _DEFAULT_SKIP,
) -> str:
    """The ``Signature`` value for a request: ``hmac_sha1_base64(secret,
    signature_content(ext, body))`` without copying the body."""
    text = signature_text(ext, skip=skip)
    digest = _hmac_sha1(secret, text, body) if body is not None else _hmac_sha1(secret, text)
    return binascii.b2a_base64(digest, newline=False).decode("ascii")


def signatures_match(expected: str, given: str) -> bool:
    """Whether two signature strings are equal, compared in constant time."""
    if expected.isascii() and given.isascii():  # as a signature is: compared as they are
        return hmac.compare_digest(expected, given)
    return hmac.compare_digest(
        expected.encode("utf-8", "replace"), given.encode("utf-8", "replace")
    )
