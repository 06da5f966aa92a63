"""RemotingCommand frames, valid and then broken: decode is total.

Valid frames of both header encodings round-trip byte for byte. Mutated ones (bytes
flipped, inserted, deleted, the frame cut short or grown, the header-length word and each
length word of the binary header set to negative, zero, huge and off-by-one values,
non-UTF-8 spliced in, JSON header values replaced by hostile JSON) decode to a command or
raise RemotingError, and nothing else, within a time and memory bound; a command that
decodes can always be answered (its response encodes).
"""

from __future__ import annotations

import json
import struct
from typing import Final

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rocketq.remoting.codes import LanguageCode, SerializeType
from rocketq.remoting.command import (
    MAX_JSON_DEPTH,
    RemotingCommand,
    RemotingError,
    decode,
    encode,
)
from tests.fuzz_mutations import HOSTILE_INTS, NON_UTF8, mutated
from tests.remoting.time_bound import bounded

# No shrinking: a decoder that hangs would cost a second per shrink step, for minutes; the
# failure names the frame in hex instead.
FUZZ: Final = settings(
    max_examples=300,
    deadline=2000,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)
INT8: Final = st.integers(-(1 << 7), (1 << 7) - 1)
INT16: Final = st.integers(-(1 << 15), (1 << 15) - 1)
INT32: Final = st.integers(-(1 << 31), (1 << 31) - 1)
# Any text UTF-8 can carry (no lone surrogates), short.
TEXT: Final = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ASCII: Final = st.text(st.characters(max_codepoint=0x7F), max_size=12)
# Text that is often not ASCII (st.characters leans to ASCII): the binary header's ext
# fields then take their other decoding path.
MIXED: Final = st.text(st.sampled_from("aZ0_ \x00é中\U0001f600\u07ff"), max_size=8)


@st.composite
def commands(draw: st.DrawFn, kind: int | None = None) -> RemotingCommand:
    """A command either header encoding can carry exactly: every field set, ext fields all
    ASCII (the usual case) or not, a body or none."""
    serialize_type = draw(st.sampled_from((SerializeType.JSON, SerializeType.ROCKETMQ)))
    if kind is not None:
        serialize_type = kind
    text = draw(st.sampled_from((ASCII, TEXT, MIXED)))
    ext = draw(st.dictionaries(text, text, max_size=6))
    return RemotingCommand(
        draw(INT16),  # the binary header's code is a short
        ext or None,
        draw(st.binary(min_size=1, max_size=32) | st.none()),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(TEXT.filter(bool) | st.none()),
        language=draw(st.sampled_from(sorted(LanguageCode.BY_CODE))),
        version=draw(INT16),
        serialize_type=serialize_type,
    )


def fields(cmd: RemotingCommand) -> tuple[object, ...]:
    body = None if cmd.body is None else bytes(cmd.body)
    return (cmd.code, cmd.ext, body, cmd.opaque, cmd.flag, cmd.remark, cmd.language,
            cmd.version, cmd.serialize_type)  # fmt: skip


def length_words(cmd: RemotingCommand) -> list[tuple[int, int, list[int]]]:
    """Every length word of the encoded frame without its length word, as (offset, width,
    back-steps): the type|header-length word, then in a binary header the remark length,
    the ext fields' length and each field's key and value lengths. The back-steps are the
    negative values that, trusted, would move the cursor back to the start of this field or
    an earlier one (a decoder that trusts them goes round for ever)."""
    words: list[tuple[int, int, list[int]]] = [(0, 4, [])]
    if cmd.serialize_type != SerializeType.ROCKETMQ:
        return words
    at = 4 + 13  # the word, then code, language, version, opaque, flag
    words.append((at, 4, [-4]))
    at += 4 + (0 if cmd.remark is None else len(cmd.remark.encode()))
    words.append((at, 4, [-4]))
    at += 4
    starts: list[int] = []
    for key, value in (cmd.ext or {}).items():
        starts.append(at)
        words.append((at, 2, [s - at - 2 for s in starts]))
        at += 2 + len(key.encode())
        words.append((at, 4, [s - at - 4 for s in starts]))
        at += 4 + len(value.encode())
    return words


def hostile_word(width: int, back_steps: list[int]) -> st.SearchStrategy[bytes]:
    """A length word's bytes: a hostile number, a small one, a back-step, or any number of
    that width."""
    lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
    fmt = ">" + {2: "h", 4: "i"}[width]
    values = st.sampled_from([v for v in HOSTILE_INTS if lo <= v <= hi])
    values |= st.integers(-64, 64) | st.integers(lo, hi)
    if back_steps:
        values |= st.sampled_from(back_steps)
    return values.map(lambda v: struct.pack(fmt, v))


def check(frame: bytes) -> RemotingCommand | RemotingError:
    """Decode under the bounds; a command must be answerable."""
    try:
        result = bounded(lambda: decode(frame), RemotingError)
    except AssertionError as exc:  # a hang, a slow decode, too much memory
        raise AssertionError(f"{exc}: decoding the frame {frame.hex()}") from exc
    assert isinstance(result, RemotingCommand | RemotingError), repr(result)
    if isinstance(result, RemotingCommand):
        repr(result)
        encode(result.response(0, {"k": "v"}, b"x", remark="r"))
    return result


@FUZZ
@given(commands())
def test_valid_frames_round_trip(cmd: RemotingCommand) -> None:
    wire = encode(cmd)
    (size,) = struct.unpack_from(">I", wire)
    assert size == len(wire) - 4
    back = check(wire[4:])
    assert isinstance(back, RemotingCommand)
    assert fields(back) == fields(cmd)
    assert encode(back) == wire


@FUZZ
@given(st.data(), commands())
def test_mutated_frames_decode_or_raise_remoting_error(
    data: st.DataObject, cmd: RemotingCommand
) -> None:
    check(data.draw(mutated(encode(cmd)[4:])))


# The frame that once hung servers, as a regression example (its ext fields: an empty key
# and value, then a key length of -6 behind a non-ASCII byte).
HANG_37: Final = bytes.fromhex(
    "000000210100001d006a00000000000001000000000000000000000008000000000000fffa"
)


def test_the_37_byte_frame_and_back_steps_are_refused_in_bounded_time() -> None:
    assert isinstance(check(HANG_37[4:]), RemotingError)
    cmd = RemotingCommand(1, {"é": "x", "k": "v"}, serialize_type=SerializeType.ROCKETMQ)
    for at, width, back_steps in length_words(cmd):
        for step in back_steps:
            frame = bytearray(encode(cmd)[4:])
            frame[at : at + width] = struct.pack(">h" if width == 2 else ">i", step)
            assert isinstance(check(bytes(frame)), RemotingError)


@FUZZ
@given(st.data(), commands(SerializeType.ROCKETMQ))
def test_every_length_word_of_a_binary_header_is_checked(
    data: st.DataObject, cmd: RemotingCommand
) -> None:
    frame = bytearray(encode(cmd)[4:])
    for _ in range(data.draw(st.integers(1, 3))):
        at, width, back_steps = data.draw(st.sampled_from(length_words(cmd)))
        frame[at : at + width] = data.draw(hostile_word(width, back_steps))
    tail = data.draw(st.sampled_from((b"", b"\0", b"\0\0\0\0", b"\xff" * 7)))
    check(bytes(frame) + tail)


# JSON values a header field should not hold.
HOSTILE_JSON: Final = st.sampled_from(
    [
        "1e999", "-1e999", "NaN", "Infinity", "-0.0", "1.5", "true", "null", '""', '"x"',
        "[]", "{}", '{"a":[1,{"b":null}]}', "9" * 400, "-" + "9" * 30, str(1 << 31),
        str(-(1 << 31) - 1), '"' + "9" * 40 + '"', '"\\ud800"', '"\\udc00\\ud800"',
        '"\\u0000"', "[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5),
        '"' + "[" * 300 + '"',
    ]
)  # fmt: skip
HEADER_KEYS: Final = st.sampled_from(
    ["code", "extFields", "flag", "language", "opaque", "remark", "version", "x"]
)


@FUZZ
@given(st.data(), commands(SerializeType.JSON))
def test_json_headers_with_hostile_values_decode_or_raise_remoting_error(
    data: st.DataObject, cmd: RemotingCommand
) -> None:
    wire = encode(cmd)
    (word,) = struct.unpack_from(">I", wire, 4)
    header = json.loads(wire[8 : 8 + (word & 0xFFFFFF)])
    raw = {key: json.dumps(value) for key, value in header.items()}
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(HEADER_KEYS)
        if key == "extFields" and data.draw(st.booleans()):
            inner = data.draw(ASCII)
            raw[key] = '{"' + inner.replace('"', "").replace("\\", "") + '":'
            raw[key] += data.draw(HOSTILE_JSON) + "}"
        else:
            raw[key] = data.draw(HOSTILE_JSON)
    text = ("{" + ",".join(f'"{k}":{v}' for k, v in raw.items()) + "}").encode()
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + data.draw(st.sampled_from(NON_UTF8)) + text[at:]
    check(struct.pack(">I", len(text)) + text + bytes(cmd.body or b""))


@settings(max_examples=200, deadline=2000, phases=FUZZ.phases)
@given(st.binary(max_size=64), st.integers(0, 255))
def test_any_bytes_after_any_header_word_decode_or_raise_remoting_error(
    rest: bytes, kind: int
) -> None:
    check(struct.pack(">I", (kind << 24) | len(rest)) + rest)
    check(struct.pack(">I", (kind << 24) | 0xFFFFFF) + rest)
