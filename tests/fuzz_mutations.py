"""Hypothesis strategies that break valid inputs, and the check every decoder of outside
bytes must pass: it returns a value or raises the error its module documents, within a
time and memory bound, and raises nothing else.

A fuzz test builds a VALID input with a structure-aware strategy, then draws
``mutated(valid)``: bytes flipped, inserted or deleted, the input cut short, a 1-, 2-, 4- or
8-byte field overwritten with a hostile number (negative, zero, the type's extremes) or
non-UTF-8 spliced in. :func:`total` runs the decoder on the result.
"""

from __future__ import annotations

import struct
import time
import tracemalloc
from collections.abc import Callable
from typing import Final, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")

# Numbers a length or offset field should never be trusted to hold.
HOSTILE_INTS: Final = (
    0,
    1,
    -1,
    -2,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x7FFFFFFF,
    -0x80000000,
    0xFFFFFFFF,
    0x7FFFFFFFFFFFFFFF,
    -0x8000000000000000,
)
_WIDTHS: Final = {1: "b", 2: "h", 4: "i", 8: "q"}
NON_UTF8: Final = (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80")

# Bounds on one decode: seconds of CPU (generous: tracemalloc slows every allocation).
TIME_LIMIT: Final = 2.0
MEMORY_LIMIT: Final = 64 << 20


def _hostile(width: int, value: int) -> bytes:
    fmt = _WIDTHS[width]
    lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width)) - 1
    value = min(max(value, lo), hi)
    if value > (1 << (8 * width - 1)) - 1:
        value -= 1 << (8 * width)
    return struct.pack(">" + fmt, value)


@st.composite
def mutated(draw: st.DrawFn, data: bytes, *, max_steps: int = 4) -> bytes:
    """``data`` with one to ``max_steps`` mutations applied."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, max_steps))):
        op = draw(
            st.sampled_from(("flip", "insert", "delete", "truncate", "field", "non_utf8", "dup"))
        )
        at = draw(st.integers(0, len(buf)))
        if op == "flip" and buf:
            at = min(at, len(buf) - 1)
            buf[at] ^= draw(st.integers(1, 255))
        elif op == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and buf:
            del buf[at : at + draw(st.integers(1, 16))]
        elif op == "truncate":
            del buf[at:]
        elif op == "field":
            width = draw(st.sampled_from(sorted(_WIDTHS)))
            raw = _hostile(width, draw(st.sampled_from(HOSTILE_INTS)))
            buf[at : at + width] = raw
        elif op == "non_utf8":
            buf[at:at] = draw(st.sampled_from(NON_UTF8))
        elif op == "dup" and buf:
            end = draw(st.integers(at, len(buf)))
            buf[at:at] = buf[at:end] * draw(st.integers(1, 8))
    return bytes(buf)


def mutated_text(text: str, *, max_steps: int = 4) -> st.SearchStrategy[str]:
    """``text`` mutated as UTF-8 bytes and decoded back (bad bytes become U+FFFD)."""
    return mutated(text.encode(), max_steps=max_steps).map(
        lambda raw: raw.decode("utf-8", errors="replace")
    )


# JSON a hostile peer may send in place of any part of a body.
HOSTILE_JSON_TEXTS: Final = (
    "null",
    "true",
    "1",
    "-1",
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "9" * 5000,
    '"x"',
    "[]",
    "{}",
    "[1,2]",
    '{"0":1}',
    "[" * 5000 + "]" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
    '"' + "\\ud800" + '"',
)


@st.composite
def json_with_a_part_replaced(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` with one of its JSON values (at a ':' or '[' or ',') swapped for hostile JSON."""
    text = body.decode()
    marks = [i + 1 for i, ch in enumerate(text) if ch in ":[,"]
    if not marks:
        return body
    at = draw(st.sampled_from(marks))
    end = at
    depth = 0
    while end < len(text):  # the end of the value that starts at ``at``
        ch = text[end]
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            break
        end += 1
    return (text[:at] + draw(st.sampled_from(HOSTILE_JSON_TEXTS)) + text[end:]).encode()


def total(
    call: Callable[[], T],
    errors: type[BaseException] | tuple[type[BaseException], ...],
    *,
    seconds: float = TIME_LIMIT,
    memory: int = MEMORY_LIMIT,
) -> T | BaseException:
    """Run one decode: its value, or the documented error it raised. Anything else raised
    fails the test as itself; so does a decode that takes more than ``seconds`` of CPU
    (the process's CPU time: other processes on a loaded machine do not count, a decode
    that loops does) or one whose peak allocation passes ``memory`` bytes."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    started = time.process_time()
    try:
        result: T | BaseException = call()
    except errors as exc:
        result = exc
    finally:
        elapsed = time.process_time() - started
        _, peak = tracemalloc.get_traced_memory()
        if not tracing:
            tracemalloc.stop()
    assert elapsed < seconds, f"the decode took {elapsed:.2f} s of CPU"
    assert peak < memory, f"the decode allocated {peak} bytes at its peak"
    return result
