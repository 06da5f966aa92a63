"""The checks of a batch's records look at their properties only: a name in a body is no
property, a name in any record's properties is found, and bytes that stop being records
are searched whole (a false yes at worst, never a false no)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.broker.send_processor import (
    MAY_DELAY,
    SHARDED,
    UNKNOWN_TRAITS,
    check_batch,
    has_property,
)
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.record import encode_batch_entry, encode_properties, encode_record
from tests.broker.test_cpp_batch import _records

NEEDLE = b"DELAY\x01"

names = st.sampled_from(["DELAY", "KEYS", "TAGS", "XDELAY", "UNIQ_KEY", "SHARDING_KEY"])
values = st.text(alphabet="0123456789abcDELAY ", max_size=8)


def record(body: bytes, props: dict[str, str], topic: bytes = b"T") -> bytes:
    return encode_record(
        topic=topic,
        body=body,
        properties=encode_properties(props),
        born_timestamp=1,
        born_host=b"\x7f\0\0\x01\0\0\x04\xd2",
    )


messages = st.lists(
    st.tuples(st.binary(max_size=64), st.dictionaries(names, values, max_size=3)),
    min_size=1,
    max_size=6,
)


@given(messages)
def test_a_property_is_found_in_any_record_and_never_in_a_body(
    msgs: list[tuple[bytes, dict[str, str]]],
) -> None:
    records = b"".join(record(body, props) for body, props in msgs)
    expected = any(NEEDLE in encode_properties(props) for _body, props in msgs)
    assert has_property(records, NEEDLE) is expected


@given(messages, st.binary(max_size=40), st.integers(min_value=0, max_value=400))
def test_bytes_that_stop_being_records_are_searched_whole(
    msgs: list[tuple[bytes, dict[str, str]]], junk: bytes, cut: int
) -> None:
    records = b"".join(record(body, props) for body, props in msgs)
    blob = (records + junk)[: len(records) + len(junk) - cut] if cut else records + junk
    found = has_property(blob, NEEDLE)
    assert not found or NEEDLE in blob  # never a yes without the bytes
    whole = len(blob) == len(records) and blob == records
    if whole:
        assert found is any(NEEDLE in encode_properties(p) for _b, p in msgs)


def test_a_body_naming_delay_is_no_delayed_message() -> None:
    check_batch(record(b"DELAY\x013\x02TIMER_DELIVER_MS\x01999\x02", {"KEYS": "k"}) * 3)


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"DELAY": "3"}, "delayed messages"),
        ({"TIMER_DELIVER_MS": "99999"}, "delivery time"),
    ],
)
def test_a_delay_or_delivery_time_in_any_record_refuses_the_batch(
    props: dict[str, str], says: str
) -> None:
    records = record(b"a", {}) + record(b"b", {"KEYS": "k", **props}) + record(b"c", {})
    with pytest.raises(MessageIllegalError, match=says):
        check_batch(records)


def test_a_delay_level_of_zero_is_no_delay() -> None:
    check_batch(record(b"a", {"DELAY": "0"}) + record(b"b", {}))


# -- what batch_records notes while it builds the records -------------------------------------

batch_names = st.sampled_from(
    ["DELAY", "TIMER_DELIVER_MS", "KEYS", "TAGS", "__SHARDINGKEY", "MODEL", "WAIT"]
)
batch_values = st.text(alphabet="0123456789ab", min_size=1, max_size=6)


@given(
    st.lists(
        st.tuples(st.binary(max_size=32), st.dictionaries(batch_names, batch_values, max_size=3)),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([b"", b"CLUSTER\x01DefaultCluster\x02", b"CLUSTER\x01DELTA\x02"]),
)
def test_the_builders_traits_agree_with_a_search_of_the_records(
    msgs: list[tuple[bytes, dict[str, str]]], extra: bytes
) -> None:
    body = b"".join(encode_batch_entry(b, encode_properties(p)) for b, p in msgs)
    records, sizes, traits = _records(body, extra)
    assert len(sizes) == len(msgs)
    assert bool(traits & MAY_DELAY) is has_property(records, b"DEL")
    assert bool(traits & SHARDED) is has_property(records, b"__SHARDINGKEY\x01")

    def refusal(t: int) -> str | None:
        try:
            check_batch(records, t)
        except MessageIllegalError as exc:
            return str(exc)
        return None

    assert refusal(traits) == refusal(UNKNOWN_TRAITS)
