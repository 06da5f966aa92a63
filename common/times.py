"""Times given as text, read one way everywhere (the CLI, the console, the Spark pipeline).

A time is one of:

- epoch milliseconds, as digits (``1774751400000``);
- ``now``;
- an ISO 8601 date or date and time (``2026-03-29``, ``2026-03-29T02:30``,
  ``2026-03-29 02:30:00.250``, ``2026-03-29T02:30:00+02:00``, ``...Z``);
- mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS`` (``2026-03-29#02:30:00:000``).

The rule: a time with an offset (``+02:00``, ``Z``) is that instant; a time without one is
UTC, whatever time zone the machine, the server or the pod is in. RocketMQ's own admin
tools read such a time in local time; servers and Kubernetes pods run in UTC, and one rule
everywhere means the same text is the same instant wherever it is typed. A time in the
hour a daylight saving change skips or repeats is therefore never ambiguous.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Final

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS: Final = timedelta(milliseconds=1)
MIN_MS: Final = (datetime.min.replace(tzinfo=UTC) - EPOCH) // ONE_MS
"""0001-01-01T00:00:00Z in epoch milliseconds, the earliest time there is."""
MAX_MS: Final = (datetime.max.replace(tzinfo=UTC) - EPOCH) // ONE_MS
"""9999-12-31T23:59:59.999Z in epoch milliseconds, the latest time there is."""

RULE: Final = "UTC unless it ends in an offset such as +02:00 or Z"
"""How a time without an offset is read, in words for help texts and form labels."""
FORMS: Final = (
    "give epoch milliseconds, 'now', or an ISO 8601 date or date and time "
    f"(2026-03-29T02:30:00; {RULE})"
)
"""What a time may be, in words for help texts and error messages."""

_DIGITS: Final = re.compile(r"[0-9]+")
_MQADMIN: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})#([0-9]{2}):([0-9]{2}):([0-9]{2})(?::([0-9]{3}))?"
)  # yyyy-MM-dd#HH:mm:ss:SSS


def parse_ms(text: str) -> int:
    """The instant ``text`` names, in epoch milliseconds (see the module for the forms and
    the rule). A ValueError says what to give instead; its message names neither the field
    nor the text, so each caller words it its own way."""
    raw = text.strip()
    if raw == "now":
        return time.time_ns() // 1_000_000
    if _DIGITS.fullmatch(raw):
        return _in_range(int(raw))
    moment = _moment(raw)
    if moment is None:
        raise ValueError(FORMS)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _in_range((moment - EPOCH) // ONE_MS)


def parse_datetime(text: str) -> datetime:
    """The instant ``text`` names, as an aware datetime in UTC (same forms and rule as
    :func:`parse_ms`, to the millisecond)."""
    return from_ms(parse_ms(text))


def from_ms(ms: int) -> datetime:
    """Epoch milliseconds as an aware datetime in UTC."""
    return EPOCH + _in_range(ms) * ONE_MS


def format_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC with milliseconds, ``2026-03-29T00:30:00.000Z``;
    :func:`parse_ms` reads it back to the same instant."""
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _moment(raw: str) -> datetime | None:
    mqadmin = _MQADMIN.fullmatch(raw)
    try:
        if mqadmin is not None:
            y, mo, d, h, mi, s, ms = mqadmin.groups()
            return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int(ms or 0) * 1000)
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            # What the CLI's strptime took before: unpadded fields, 2026-3-9T2:30:00.
            return datetime.strptime(raw, "%Y-%m-%dT%H:%M:%S")
    except (ValueError, OverflowError):
        return None


def _in_range(ms: int) -> int:
    if not MIN_MS <= ms <= MAX_MS:
        raise ValueError(
            f"give a time from 0001-01-01 to 9999-12-31 (epoch milliseconds {MIN_MS} to {MAX_MS})"
        )
    return ms
