"""Read and write JSON the way RocketMQ's bodies are written by Alibaba fastjson.

fastjson writes a map whose keys are not strings with the keys bare: a ``Long`` key as a
number (``{"brokerAddrs":{0:"10.0.0.1:10911"}}``) and an object key as an object
(``{"offsetTable":{{"brokerName":"a","queueId":0,"topic":"T"}:{"brokerOffset":5}}}``).
Neither is standard JSON, so :func:`loads` parses standard JSON plus those two forms and
:func:`dumps` writes them.

What :func:`loads` returns:

* an object whose keys are all strings is a ``dict[str, Any]``; a number key stays an
  ``int`` (or a ``float``), ``true``/``false``/``null`` keys become ``True``/``False``/``None``;
* an object used as a key becomes an :class:`ObjectKey`: a tuple of its ``(name, value)``
  pairs sorted by name, with nested objects frozen the same way and arrays as tuples. It is
  hashable, so such a map is an ordinary ``dict`` keyed by ``ObjectKey``;
* arrays are lists, numbers ``int`` or ``float``, the rest as :mod:`json` gives them.

:func:`dumps` writes compact JSON (no spaces) as UTF-8 bytes, non-ASCII unescaped as fastjson
does; ``int``/``float``/``bool``/``None`` dict keys are written bare and :class:`ObjectKey`
keys as objects, so ``dumps(loads(b)) == b`` for fastjson's output up to key order. Keys keep
the dict's order (fastjson sorts the fields of a bean, not the keys of a map).

``loads`` tries :func:`json.loads` first; only text that standard JSON rejects goes through
the small parser below. Nesting deeper than :data:`MAX_DEPTH` arrays and objects is refused
before either parser recurses (:func:`too_deep`, which costs two ``str.count`` calls for text
with few brackets).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = [
    "MAX_DEPTH",
    "FastjsonDecodeError",
    "ObjectKey",
    "dumps",
    "encodable",
    "loads",
    "too_deep",
]

MAX_DEPTH: Final = 200  # deeper nesting is refused (well inside the recursion limit)


class FastjsonDecodeError(json.JSONDecodeError):
    """Malformed input; ``pos``, ``lineno`` and ``colno`` say where (0-based char offset,
    1-based line and column), and the message says both."""


class ObjectKey(tuple[tuple[str, Any], ...]):
    """An object used as a map key, frozen: its ``(name, value)`` pairs sorted by name.

    Build one with :meth:`of`; :meth:`as_dict` gives the object back as a dict. Nested
    objects are ObjectKeys and arrays tuples, so the whole key is hashable.
    """

    __slots__ = ()

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> ObjectKey:
        """The frozen key for an object given as a mapping (nested dicts and lists too)."""
        # By name alone (values of different types do not compare); names equal as text
        # (0 and "0") are one field, the later one's value, as a dict keeps it.
        named = {str(name): value for name, value in fields.items()}
        return cls(sorted(((name, _freeze(v)) for name, v in named.items()), key=_name))

    def as_dict(self) -> dict[str, Any]:
        """The object as a dict; nested ObjectKeys become dicts and tuples lists."""
        return {name: _thaw(value) for name, value in self}

    def get(self, name: str, default: Any = None) -> Any:
        """The value of field ``name`` (frozen), or ``default``."""
        for field, value in self:
            if field == name:
                return value
        return default

    def __repr__(self) -> str:
        return f"ObjectKey({self.as_dict()!r})"


def _name(field: tuple[str, Any]) -> str:
    return field[0]


def _freeze(value: Any) -> Any:
    if isinstance(value, ObjectKey):
        return value
    if isinstance(value, Mapping):
        return ObjectKey.of(value)
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    if isinstance(value, set | frozenset):
        return frozenset(_freeze(item) for item in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, ObjectKey):
        return value.as_dict()
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value


# --------------------------------------------------------------------------- loads


def loads(text: str | bytes) -> Any:
    """Parse JSON as fastjson writes it (see the module docstring for what comes back).

    Raises :class:`FastjsonDecodeError` (a ``ValueError``) naming the position of the first
    error (nesting deeper than :data:`MAX_DEPTH` is one, and so is a ``\\u`` escape of a lone
    surrogate, which no UTF-8 could carry), or ``ValueError`` for bytes that are not UTF-8.
    """
    raw: str | bytes = text
    if isinstance(text, bytes | bytearray | memoryview):
        raw = bytes(text)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"JSON body is not UTF-8: bad byte at position {exc.start}") from exc
    value = _parse(raw, text)
    # One memchr for a backslash first: most bodies have none, and skip the search.
    surrogate = _SURROGATE_ESCAPE.search(text) if "\\" in text else None
    if surrogate is not None and not encodable(value):
        raise FastjsonDecodeError(
            "a \\u escape of a lone surrogate (not UTF-8)", text, surrogate.start()
        )
    return value


def _parse(raw: str | bytes, text: str) -> Any:
    try:
        if not too_deep(raw):
            try:
                return json.loads(text)
            except ValueError:
                pass  # not standard JSON (a bare key), a number too long, or really malformed
        # The parser says where the text goes wrong (nesting too deep included).
        return _Parser(text).parse()
    except RecursionError:  # only when called from an already deep stack
        raise FastjsonDecodeError("nesting too deep for the stack", text, 0) from None


# A \u escape of a UTF-16 surrogate: a lone one makes a str that UTF-8 cannot write back.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def encodable(value: Any) -> bool:
    """Whether every string in a parsed value can be written as UTF-8 (no lone surrogate)."""
    try:
        dumps(value)
    except UnicodeEncodeError:
        return False
    return True


_BRACKETS: Final = bytes.maketrans(b"{}", b"[]")  # one kind: a mismatch fails the parse anyway
_NOT_MARKS: Final = bytes(c for c in range(256) if c not in b'"[]{}')
_STEPS: Final = bytes.maketrans(b"[]", b"\x01\xff")  # +1 and -1 as signed bytes


def too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``text`` nests arrays and objects more than ``limit`` levels deep before its
    first error (brackets inside strings do not count), so that a parser refuses it before
    recursing. Text with at most ``limit`` opening brackets is answered by counting them;
    other text costs a few linear passes in C and a sum over its brackets (a quarter of
    what :func:`json.loads` takes for a 500 KB body of a few levels). ``limit`` >= 0."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if raw.count(b"{") + raw.count(b"[") <= limit:
        return False
    if b"\\" in raw:  # escapes out first, so that the quotes left pair up
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Quotes and brackets only; a string without brackets is then two adjacent quotes.
    marks = raw.translate(_BRACKETS, _NOT_MARKS).replace(b'""', b"")
    if b'"' in marks:  # strings holding brackets (or one never closed): drop what they hold
        marks = b"".join(marks.split(b'"')[::2])
    # Innermost pairs out, twice: a pass takes one level off the depth (at most one, if the
    # brackets do not match), and a body of many small objects and arrays then has few
    # brackets left to sum.
    for _ in range(2):
        if limit < 1 or not marks:
            break
        marks = marks.replace(b"[]", b"")
        limit -= 1
    if marks.count(b"[") <= limit:
        return False
    depths = itertools.accumulate(memoryview(marks.translate(_STEPS)).cast("b"))
    return next(itertools.dropwhile(limit.__ge__, depths), None) is not None


_WS: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_CHUNK: Final = re.compile(r'[^"\\\x00-\x1f]*')  # a run of string characters needing no work
_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX4: Final = re.compile(r"[0-9a-fA-F]{4}")


class _Parser:
    """Recursive descent over one document; ``pos`` is the index of the next character."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, message: str, pos: int | None = None) -> FastjsonDecodeError:
        return FastjsonDecodeError(message, self.text, self.pos if pos is None else pos)

    def skip_ws(self) -> None:
        match = _WS.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> Any:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.fail("expecting a value, found the end of the input")
        value = self.value()
        self.skip_ws()
        if self.pos != len(self.text):
            raise self.fail("extra data after the JSON value")
        return value

    def value(self) -> Any:
        char = self.peek()
        if char == "{":
            return self.obj()
        if char == "[":
            return self.array()
        if char == '"':
            return self.string()
        if char == "-" or char.isdigit():
            return self.number()
        for word, result in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        if not char:
            raise self.fail("expecting a value, found the end of the input")
        raise self.fail(f"expecting a value, found {char!r}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH} levels")

    def obj(self) -> dict[Any, Any]:
        self.enter()
        self.pos += 1  # "{"
        result: dict[Any, Any] = {}
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            self.depth -= 1
            return result
        while True:
            self.skip_ws()
            key_at = self.pos
            if self.peek() == "}":
                raise self.fail("expecting an object key, found '}' after ','")
            key = self.value()
            if isinstance(key, dict):
                key = ObjectKey.of(key)
            elif isinstance(key, list):
                raise self.fail("an array cannot be an object key", key_at)
            self.skip_ws()
            if self.peek() != ":":
                raise self.fail("expecting ':' after an object key")
            self.pos += 1
            self.skip_ws()
            result[key] = self.value()
            self.skip_ws()
            char = self.peek()
            self.pos += 1
            if char == ",":
                continue
            if char == "}":
                self.depth -= 1
                return result
            self.pos -= 1
            raise self.fail("expecting ',' or '}' in an object")

    def array(self) -> list[Any]:
        self.enter()
        self.pos += 1  # "["
        result: list[Any] = []
        self.skip_ws()
        if self.peek() == "]":
            self.pos += 1
            self.depth -= 1
            return result
        while True:
            self.skip_ws()
            if self.peek() == "]":
                raise self.fail("expecting a value, found ']' after ','")
            result.append(self.value())
            self.skip_ws()
            char = self.peek()
            self.pos += 1
            if char == ",":
                continue
            if char == "]":
                self.depth -= 1
                return result
            self.pos -= 1
            raise self.fail("expecting ',' or ']' in an array")

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail("malformed number")
        start, self.pos = self.pos, match.end()
        if match.group(1) or match.group(2):
            return float(match.group())
        try:
            return int(match.group())
        except ValueError:  # past sys.get_int_max_str_digits()
            raise self.fail(f"a number of {self.pos - start} digits", start) from None

    def string(self) -> str:
        start = self.pos
        self.pos += 1  # opening quote
        parts: list[str] = []
        text = self.text
        while True:
            chunk = _CHUNK.match(text, self.pos)
            assert chunk is not None  # the pattern matches the empty string
            parts.append(chunk.group())
            self.pos = chunk.end()
            if self.pos >= len(text):
                raise self.fail("unterminated string", start)
            char = text[self.pos]
            if char == '"':
                self.pos += 1
                return "".join(parts)
            if char != "\\":
                raise self.fail(f"control character {char!r} in a string")
            escape = text[self.pos + 1 : self.pos + 2]
            if escape == "u":
                parts.append(self.unicode_escape())
            elif escape in _ESCAPES:
                parts.append(_ESCAPES[escape])
                self.pos += 2
            else:
                raise self.fail(f"invalid escape {text[self.pos : self.pos + 2]!r} in a string")

    def unicode_escape(self) -> str:
        code = self.hex4(self.pos + 2)
        self.pos += 6
        if 0xD800 <= code <= 0xDBFF and self.text.startswith("\\u", self.pos):
            low = self.hex4(self.pos + 2)
            if 0xDC00 <= low <= 0xDFFF:
                self.pos += 6
                return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
        return chr(code)

    def hex4(self, at: int) -> int:
        if _HEX4.match(self.text, at) is None:
            raise self.fail("invalid \\u escape: expecting 4 hex digits", at - 2)
        return int(self.text[at : at + 4], 16)


# --------------------------------------------------------------------------- dumps

_STRING: Final = json.JSONEncoder(ensure_ascii=False)


def dumps(obj: Any) -> bytes:
    """``obj`` as fastjson would write it, UTF-8 encoded (see the module docstring).

    Accepts dicts (any Mapping), lists, tuples, sets, str, int, float, bool, None and
    :class:`ObjectKey`; a non-finite float is written ``null`` as fastjson does. Anything
    else raises ``TypeError``.
    """
    parts: list[str] = []
    _write(obj, parts, 0)
    return "".join(parts).encode("utf-8")


def _write(obj: Any, out: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels (a cycle?)")
    if isinstance(obj, str):
        out.append(_STRING.encode(obj))
    elif obj is None or isinstance(obj, bool | int | float):
        out.append(_scalar(obj))
    elif isinstance(obj, ObjectKey):
        _write_pairs(((name, value) for name, value in obj), out, depth)
    elif isinstance(obj, Mapping):
        _write_pairs(obj.items(), out, depth)
    elif isinstance(obj, list | tuple | set | frozenset):
        out.append("[")
        for index, item in enumerate(obj):
            if index:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    else:
        raise TypeError(f"cannot write a {type(obj).__name__} as JSON")


def _write_pairs(pairs: Iterable[tuple[Any, Any]], out: list[str], depth: int) -> None:
    out.append("{")
    first = True
    for key, value in pairs:
        if not first:
            out.append(",")
        first = False
        if isinstance(key, str):
            out.append(_STRING.encode(key))
        elif key is None or isinstance(key, bool | int | float):
            out.append(_scalar(key))
        elif isinstance(key, ObjectKey):
            _write(key, out, depth + 1)
        else:
            raise TypeError(f"cannot write a {type(key).__name__} as a JSON object key")
        out.append(":")
        _write(value, out, depth + 1)
    out.append("}")


def _scalar(value: bool | int | float | None) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if not math.isfinite(value):
        return "null"
    return float.__repr__(value)
