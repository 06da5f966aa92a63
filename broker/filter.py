"""Subscription expressions: tags ("TagA || TagB", "*") as sets of tag hash codes, which
the broker compares with the ConsumeQueue's tag code (SQL92 comes with its own issue)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from cluster.errors import SubscriptionParseFailedError
from cluster.record import tags_hash_code

SUB_ALL = "*"
TAG = "TAG"


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
    """A predicate over tag codes for the store, or None to accept everything."""
    if expression_type and expression_type.upper() != TAG:
        raise SubscriptionParseFailedError(
            f"expression type {expression_type!r} is not supported yet; use TAG"
        )
    codes = parse_tags(expression)
    if codes is None:
        return None
    return codes.__contains__
