"""RemotingCommand: RocketMQ's request/response frame and both of its header encodings.

A frame on the wire::

    int32 length          everything after this word: 4 + header length + body length
    int32 type|hlen       high byte: serialize type (0 JSON, 1 ROCKETMQ), low 3 bytes:
                          header length
    header                JSON object, or RocketMQ's binary layout (below)
    body                  the rest (message bytes, a JSON body, stored records)

The binary header: int16 code, int8 language, int16 version, int32 opaque, int32 flag,
int32 remark length + UTF-8 remark, int32 ext-fields length + for each field int16 key
length + key, int32 value length + value. The JSON header has the same fields by name
(``language`` as the language's name) plus ``serializeTypeCurrentRPC``; an absent remark or
empty ext fields are left out, as RocketMQ's fastjson writes them.

Flag bit 0 marks a response, bit 1 a oneway request. A response keeps the request's opaque.
Encoding and decoding are pure functions over bytes: no I/O here.
"""

from __future__ import annotations

import json
import re
import struct
from typing import Final

from rocketq.remoting import fastjson
from rocketq.remoting.codes import (
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    LanguageCode,
    RocketqVersion,
    SerializeType,
)

__all__ = ["ONEWAY_FLAG", "RESPONSE_FLAG", "RemotingCommand", "RemotingError", "decode", "encode"]

# RocketMQ's Netty frame decoder refuses frames over 16 MiB (com.rocketmq.remoting.frameMaxLength).
MAX_FRAME: Final = 16 * 1024 * 1024
# The version our commands carry: rocketq's release (RocketqVersion explains the numbers),
# which a RocketMQ server reads as newer than its own: a 4.9 nameserver answers our route
# requests in standard JSON, as it does for clients at V4_9_4 or later.
VERSION: Final = RocketqVersion.CURRENT

# JSON headers nested deeper are refused (RocketMQ's header is two levels: extFields).
MAX_JSON_DEPTH: Final = fastjson.MAX_DEPTH

_PREFIX: Final = struct.Struct(">II")  # length, serialize type | header length
_FIXED: Final = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")

# A \u escape of a UTF-16 surrogate: a lone one makes a str no UTF-8 can carry.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")

_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_LOADS = json.loads


class RemotingError(ValueError):
    """A frame or header that is not RocketMQ's (the connection that sent it is closed)."""


class RemotingCommand:
    """One request or response. ``ext`` holds the header fields as strings (the request
    header classes' fields, by their Java names); ``body`` is raw bytes."""

    __slots__ = (
        "body",
        "code",
        "ext",
        "flag",
        "language",
        "opaque",
        "remark",
        "serialize_type",
        "version",
    )

    def __init__(
        self,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes | memoryview | None = None,
        *,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        language: int = LanguageCode.PYTHON,
        version: int = VERSION,
        serialize_type: int = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.ext = ext
        self.body = body
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.language = language
        self.version = version
        self.serialize_type = serialize_type

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def response(
        self,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes | memoryview | None = None,
        remark: str | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque and header encoding."""
        return RemotingCommand(
            code,
            ext,
            body,
            opaque=self.opaque,
            flag=RESPONSE_FLAG,
            remark=remark,
            serialize_type=self.serialize_type,
        )

    def field(self, name: str) -> str:
        """A required header field; RemotingError names it when it is missing."""
        ext = self.ext
        if ext is None or name not in ext:
            raise RemotingError(f"the request header has no field {name!r}")
        return ext[name]

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        size = 0 if self.body is None else len(self.body)
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext={self.ext!r} body={size} bytes)"
        )


# -- encoding --------------------------------------------------------------------------


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header, fields in fastjson's (alphabetical) order."""
    header: dict[str, object] = {"code": cmd.code}
    if cmd.ext:
        header["extFields"] = cmd.ext
    header["flag"] = cmd.flag
    header["language"] = LanguageCode.BY_CODE.get(cmd.language, "OTHER")
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    return _DUMPS(header).encode()


# Header field names as they go on the wire (length and bytes), made once per name.
_KEY_PARTS: dict[str, bytes] = {}


def _key_part(key: str) -> bytes:
    part = _KEY_PARTS.get(key)
    if part is None:
        raw = key.encode()
        part = _I16.pack(len(raw)) + raw
        if len(_KEY_PARTS) < 1024:  # names are a few dozen; a peer cannot grow this
            _KEY_PARTS[key] = part
    return part


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """RocketMQ's binary header (RocketMQSerializable)."""
    out = bytearray(_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag))
    if cmd.remark is None:
        out += b"\0\0\0\0"
    else:
        remark = cmd.remark.encode()
        out += _I32.pack(len(remark))
        out += remark
    ext = cmd.ext
    if not ext:
        out += b"\0\0\0\0"
    else:
        at = len(out)
        out += b"\0\0\0\0"  # the fields' length, filled in below
        for key, value in ext.items():
            v = value.encode()
            out += _key_part(key)
            out += _I32.pack(len(v))
            out += v
        _I32.pack_into(out, at, len(out) - at - 4)
    return bytes(out)


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame, length word included."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = encode_binary_header(cmd)
    else:
        header = encode_json_header(cmd)
    body = cmd.body
    size = 0 if body is None else len(body)
    prefix = _PREFIX.pack(4 + len(header) + size, (cmd.serialize_type << 24) | len(header))
    if body is None or not size:
        return prefix + header
    return b"".join((prefix, header, body))


# -- decoding --------------------------------------------------------------------------


def decode_json_header(data: bytes | memoryview) -> RemotingCommand:
    try:
        text = bytes(data).decode()
    except UnicodeDecodeError as exc:
        raise RemotingError(f"the JSON header is not UTF-8: {exc}") from None
    # Before json recurses into it; a header with few brackets (all of them) costs two counts.
    deep = text.count("{") + text.count("[") > MAX_JSON_DEPTH
    if deep and fastjson.too_deep(text, MAX_JSON_DEPTH):
        raise RemotingError(f"the JSON header nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        header = _LOADS(text)
    except (ValueError, RecursionError) as exc:
        raise RemotingError(f"the JSON header does not parse: {exc}") from None
    # One memchr for a backslash (headers without escapes skip the search).
    if "\\" in text and _SURROGATE_ESCAPE.search(text) is not None:
        try:
            _DUMPS(header).encode()
        except UnicodeEncodeError:
            raise RemotingError(
                "the JSON header has a \\u escape of a lone surrogate (not UTF-8)"
            ) from None
    code = header.get("code") if isinstance(header, dict) else None
    if not isinstance(code, int) or isinstance(code, bool):
        raise RemotingError("the JSON header is not an object with an integer code")
    ext = header.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise RemotingError("the JSON header's extFields is not an object")
        # A null field is an absent one, as a Java header bean reads it.
        ext = {k: v if isinstance(v, str) else _text(v) for k, v in ext.items() if v is not None}
    language = header.get("language", "JAVA")
    remark = header.get("remark")
    try:
        return RemotingCommand(
            _int32(code, "code"),
            ext,
            None,
            opaque=_int32(header.get("opaque", 0), "opaque"),
            flag=_int32(header.get("flag", 0), "flag"),
            remark=None if remark is None else _text(remark),
            language=LanguageCode.BY_NAME.get(language, LanguageCode.OTHER)
            if isinstance(language, str)
            else _int_in(language, "language", -0x80, 0x7F),
            version=_int32(header.get("version", 0), "version"),
            serialize_type=SerializeType.JSON,
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise RemotingError(f"the JSON header has a bad field: {exc}") from None


def _int32(value: object, name: str) -> int:
    if type(value) is int and -0x80000000 <= value <= 0x7FFFFFFF:  # the usual case
        return value
    return _int_in(value, name, -0x80000000, 0x7FFFFFFF)


def _int_in(value: object, name: str, lo: int, hi: int) -> int:
    """A header number as Java reads it into its field: within the field's type."""
    if not isinstance(value, int | float | str):
        raise TypeError(f"{name} is {type(value).__name__}, not a number")
    number = int(value)  # ValueError or OverflowError (NaN, infinity): the caller's
    if not lo <= number <= hi:
        raise ValueError(f"{name} {number} is outside {lo}..{hi}")
    return number


def _text(value: object) -> str:
    """An ext field (or remark) that a client wrote as a JSON number, boolean, object or
    array, as Java would read it into a String."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return _DUMPS(value)  # as fastjson's JSONObject.toString() writes it
    return str(value)


def _ext_fields(blob: bytes) -> dict[str, str]:
    """The binary header's ext fields: for each, an int16 key length, the key, an int32 value
    length, the value. Each length is checked before it moves the cursor: not negative (as
    Java reads it) and within the blob."""
    # One decode, one character per byte, so byte offsets are character offsets; fields
    # that are not all ASCII are decoded as UTF-8 at the end.
    text = blob.decode("latin-1")
    n = len(blob)
    fields = {}
    p = 0
    while p < n:
        if p + 2 > n or blob[p] & 0x80:  # cut short, or a negative short
            raise RemotingError(f"the binary header's ext field at byte {p} has a bad key length")
        kend = p + 2 + ((blob[p] << 8) | blob[p + 1])
        vstart = kend + 4
        if vstart > n:
            raise RemotingError(f"the binary header's ext field at byte {p} runs past its end")
        vend = vstart + int.from_bytes(blob[kend:vstart], "big", signed=True)
        if vend > n or vend < vstart:
            raise RemotingError(f"the binary header's ext field at byte {p} has a bad value length")
        fields[text[p + 2 : kend]] = text[vstart:vend]
        p = vend
    if blob.isascii():  # the usual case
        return fields
    return {_utf8(key): _utf8(value) for key, value in fields.items()}


def _utf8(latin1: str) -> str:
    return latin1.encode("latin-1").decode()


def decode_binary_header(data: bytes | memoryview) -> RemotingCommand:
    view = memoryview(data)
    end = len(view)
    if end < _FIXED.size + 4:
        raise RemotingError(f"the binary header is cut short ({end} bytes)")
    code, language, version, opaque, flag = _FIXED.unpack_from(view, 0)
    pos = _FIXED.size
    (n,) = _I32.unpack_from(view, pos)
    pos += 4
    remark = None
    if n:
        if n < 0 or n > end - pos:
            raise RemotingError(f"the binary header's remark runs past its end (length {n})")
        try:
            remark = bytes(view[pos : pos + n]).decode()
        except UnicodeDecodeError as exc:
            raise RemotingError(f"the binary header's remark is not UTF-8: {exc}") from None
        pos += n
    if end - pos < 4:
        raise RemotingError(f"the binary header is cut short ({end} bytes, no ext fields length)")
    (n,) = _I32.unpack_from(view, pos)
    pos += 4
    ext = None
    if n:
        if n < 0 or n > end - pos:
            raise RemotingError(f"the binary header's ext fields run past its end (length {n})")
        try:
            ext = _ext_fields(bytes(view[pos : pos + n]))
        except UnicodeDecodeError as exc:
            raise RemotingError(f"the binary header's ext fields are not UTF-8: {exc}") from None
    return RemotingCommand(
        code,
        ext,
        None,
        opaque=opaque,
        flag=flag,
        remark=remark,
        language=language,
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode(frame: bytes | memoryview) -> RemotingCommand:
    """A frame without its length word (what the length word counts)."""
    view = memoryview(frame)
    if len(view) < 4:
        raise RemotingError(f"a frame of {len(view)} bytes is too short for its header length")
    word = int.from_bytes(view[:4], "big")
    kind, hlen = (word >> 24) & 0xFF, word & 0xFFFFFF
    if 4 + hlen > len(view):
        raise RemotingError(f"the header length {hlen} runs past the frame ({len(view)} bytes)")
    header = view[4 : 4 + hlen]
    if kind == SerializeType.JSON:
        cmd = decode_json_header(header)
    elif kind == SerializeType.ROCKETMQ:
        cmd = decode_binary_header(header)
    else:
        raise RemotingError(f"unknown serialize type {kind} (0 is JSON, 1 is ROCKETMQ)")
    if 4 + hlen < len(view):
        cmd.body = view[4 + hlen :]
    return cmd
