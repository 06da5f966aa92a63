"""Subscription expressions: tags ("TagA || TagB", "*") as sets of tag hash codes, which
the broker compares with the ConsumeQueue's tag code, and SQL92 conditions on properties,
which it runs on each record's properties (when ``enable_property_filter`` is on)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from rocketq.common.exceptions import MessageIllegalError, SubscriptionParseFailedError
from rocketq.common.record import record_properties, tags_hash_code
from rocketq.common.sql92 import compile_expression

SUB_ALL = "*"
TAG = "TAG"
SQL92 = "SQL92"


@functools.lru_cache(maxsize=4096)
def parse_tags(expression: str) -> frozenset[int] | None:
    """None means every message; otherwise the hash codes of the accepted tags."""
    expr = expression.strip()
    if not expr or expr == SUB_ALL:
        return None
    tags = [t.strip() for t in expr.split("||")]
    if any(not t for t in tags):
        raise SubscriptionParseFailedError(
            f"subscription {expression!r} is not valid: write tags as 'TagA || TagB' or '*'"
        )
    return frozenset(tags_hash_code(t) for t in tags)


def tag_filter(expression: str, expression_type: str = TAG) -> Callable[[int], bool] | None:
    """A predicate over tag codes for the store, or None to accept everything (SQL92
    subscriptions are filtered by :func:`sql_filter`)."""
    kind = (expression_type or TAG).upper()
    if kind == SQL92:
        return None
    if kind != TAG:
        raise SubscriptionParseFailedError(
            f"expression type {expression_type!r} is unknown; use TAG or SQL92"
        )
    codes = parse_tags(expression)
    if codes is None:
        return None
    return codes.__contains__


def sql_filter(
    expression: str, expression_type: str, *, enabled: bool
) -> Callable[[memoryview], bool] | None:
    """A predicate over stored records for a SQL92 subscription, None for tags."""
    if (expression_type or TAG).upper() != SQL92:
        return None
    if not enabled:
        raise SubscriptionParseFailedError(
            "this broker does not filter by SQL92; set enable_property_filter = true in its "
            "config, or subscribe by tags"
        )
    matches = compile_expression(expression).matches

    def check(record: memoryview) -> bool:
        try:
            return matches(record_properties(record))
        except MessageIllegalError:  # a damaged record matches nothing; the pull goes on
            return False

    return check
