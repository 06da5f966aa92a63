"""Reading an answer: the error class of a code that is not SUCCESS, and a JSON body's
fields checked against the types RocketMQ writes.

A non-SUCCESS answer raises the class ``rocketq.common.exceptions.for_code`` gives for its
code, with the remark. A SUCCESS answer whose body or header is not the shape RocketMQ
gives raises :class:`~rocketq.common.exceptions.RocketqSystemError` naming the answer (``what``)
and the field. Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from rocketq.common.exceptions import RocketqError, for_code
from rocketq.remoting import fastjson
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand


def check(answer: RemotingCommand) -> None:
    """Raise the error class of a non-SUCCESS answer, with the broker's remark."""
    if answer.code != ResponseCode.SUCCESS:
        raise for_code(answer.code)(answer.remark or f"response code {answer.code}")


def malformed(what: str, why: str) -> RocketqError:
    """The error for an answer of the wrong shape: "the broker's <what> answer <why>"."""
    return for_code(ResponseCode.SYSTEM_ERROR)(f"the broker's {what} answer {why}")


def body_doc(answer: RemotingCommand, what: str) -> dict[Any, Any]:
    """The JSON object of a SUCCESS answer's body (fastjson's bare keys read too)."""
    check(answer)
    try:
        doc = fastjson.loads(bytes(answer.body or b""))
    except ValueError as exc:
        raise malformed(what, f"is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise malformed(what, "is not a JSON object")
    return doc


def object_field(doc: dict[Any, Any], key: str, what: str) -> dict[Any, Any]:
    """A map or bean field; absent or null: empty."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise malformed(what, f"has a {key} that is not an object")
    return value


def int_field(doc: Any, key: str, what: str, default: int | None = None) -> int:
    """A whole-number field of an object (or of a MessageQueue key); ``default`` when
    absent, an error when absent without one."""
    if not isinstance(doc, dict | fastjson.ObjectKey):
        raise malformed(what, f"has {doc!r:.80} where an object belongs")
    value = doc.get(key)
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise malformed(what, f"has {key}={value!r:.80}, not a whole number")
    return value


def bool_field(doc: dict[Any, Any], key: str, what: str, default: bool) -> bool:
    value = doc.get(key, default)
    if not isinstance(value, bool):
        raise malformed(what, f"has {key}={value!r:.80}, not true or false")
    return value


def text_field(doc: dict[Any, Any], key: str, default: str = "") -> str:
    value = doc.get(key)
    return default if value is None else str(value)


def header_int(answer: RemotingCommand, key: str, what: str) -> int:
    """A number in the answer's header (every header value is a string), within a Java
    long as RocketMQ writes it."""
    value = (answer.ext or {}).get(key)
    try:
        number = int(value or "")
    except ValueError:  # not digits, or more digits than int() reads
        raise malformed(what, f"header has {key}={value!r:.80}, not a number") from None
    if not _LONG_MIN <= number <= _LONG_MAX:
        raise malformed(what, f"header has {key}={value!r:.80}, past a Java long")
    return number


_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1
