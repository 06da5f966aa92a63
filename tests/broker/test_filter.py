"""The broker's SQL92 filter over stored records."""

from __future__ import annotations

import pytest

from rocketq.broker.filter import sql_filter
from rocketq.common.exceptions import SubscriptionParseFailedError
from rocketq.common.record import encode_properties, encode_record


def record(properties: dict[str, str]) -> bytes:
    return encode_record(
        topic=b"T",
        body=b"x",
        properties=encode_properties(properties),
        born_timestamp=0,
        born_host=b"\0" * 8,
    )


def test_sql_filter_matches_by_properties() -> None:
    check = sql_filter("a = 1", "SQL92", enabled=True)
    assert check is not None
    assert check(memoryview(record({"a": "1"})))
    assert not check(memoryview(record({"a": "2"})))


def test_a_damaged_record_matches_nothing_and_raises_nothing() -> None:
    check = sql_filter("a = 1", "SQL92", enabled=True)
    assert check is not None
    good = record({"a": "1"})
    assert not check(memoryview(good[:-3]))  # cut inside its properties
    assert not check(memoryview(good[:30]))  # cut inside its header


def test_sql_needs_the_broker_switch() -> None:
    with pytest.raises(SubscriptionParseFailedError, match="enable_property_filter"):
        sql_filter("a = 1", "SQL92", enabled=False)
    assert sql_filter("*", "TAG", enabled=False) is None
