"""Pulled messages as the data source's record batches, built a column at a time
(sdk/spark/record_batches.py): for any raw properties, the same rows as the SDK's decoder
gives message by message."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.message import MessageExt, decode_properties
from rocketq.common.record import decode_record, encode_record
from rocketq.sdk.spark.record_batches import ARROW_SCHEMA, split_properties, to_arrow

Q = ("T", "broker-a", 3)


def message(properties: bytes, offset: int = 0, body: bytes = b"body") -> MessageExt:
    return decode_record(
        encode_record(
            topic=b"T",
            body=body,
            properties=properties,
            born_timestamp=1_700_000_000_123,
            born_host=b"\x7f\0\0\1\0\0\0\1",
            queue_offset=offset,
        )
    )


def reference_rows(msgs: list[MessageExt]) -> list[dict[str, Any]]:
    """The rows as the SDK's decoder gives them, one message at a time."""
    rows = []
    for m in msgs:
        p = decode_properties(m.properties_raw)
        uniq = p.get("UNIQ_KEY")
        k = p.get("KEYS")
        rows.append(
            {
                "msg_id": uniq if uniq is not None else m.offset_msg_id,
                "keys": k.split(" ") if k else [],
                "tags": p.get("TAGS"),
                "properties": list(p.items()),
                "queue_offset": m.queue_offset,
                "body": m.body,
            }
        )
    return rows


def got_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    cols = ("msg_id", "keys", "tags", "properties", "queue_offset", "body")
    return [{c: row[c] for c in cols} for row in batch.to_pylist()]


def props(*pairs: tuple[str, str]) -> bytes:
    return "".join(f"{k}\x01{v}\x02" for k, v in pairs).encode()


def test_a_producers_properties_are_split_by_arrow() -> None:
    msgs = [
        message(props(("UNIQ_KEY", "ID1"), ("KEYS", "a b"), ("TAGS", "TagA"), ("n", "1")), 0),
        message(props(("UNIQ_KEY", "ID2"), ("colour", "red")), 1),
    ]
    assert split_properties([m.properties_raw for m in msgs]) is not None
    batch = to_arrow(Q, msgs)
    assert batch.schema == ARROW_SCHEMA
    assert got_rows(batch) == reference_rows(msgs)
    row = batch.to_pylist()[0]
    assert (row["topic"], row["broker"], row["queue_id"]) == Q
    assert row["keys"] == ["a", "b"] and row["tags"] == "TagA" and row["msg_id"] == "ID1"
    assert row["born_timestamp"].timestamp() == 1_700_000_000.123
    assert row["born_host"] == "127.0.0.1:1"


def test_what_arrow_cannot_split_alike_goes_to_the_sdks_decoder() -> None:
    cases = [
        props(("UNIQ_KEY", "A"), ("UNIQ_KEY", "B")),  # a name twice: the last value wins
        b"UNIQ_KEY\x01\xff\xfe\x02",  # not UTF-8
        b"KEYS\x01k1\x02\x02TAGS\x01t\x02",  # an empty pair
        b"TAGS\x01t\x02lonely\x02",  # a pair without a value
        b"TAGS\x01t",  # no trailing separator
        b"",  # no properties: msg_id is the offset id
    ]
    for raw in cases:
        msgs = [message(props(("UNIQ_KEY", "OK")), 0), message(raw, 1)]
        assert split_properties([m.properties_raw for m in msgs]) is None, raw
        assert got_rows(to_arrow(Q, msgs)) == reference_rows(msgs), raw


_TOKENS = ["a", "K", " ", "\x01", "\x02", "é", "UNIQ_KEY", "KEYS", "TAGS"]
_TEXT = st.lists(st.sampled_from(_TOKENS), max_size=4).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.lists(st.tuples(_TEXT, _TEXT), max_size=4).map(
                lambda pairs: "".join(f"{k}\x01{v}\x02" for k, v in pairs).encode()
            ),
            st.binary(max_size=24),
            _TEXT.map(str.encode),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_raw_properties_give_the_rows_of_the_sdks_decoder(raws: list[bytes]) -> None:
    msgs = [message(raw, offset=i) for i, raw in enumerate(raws)]
    assert got_rows(to_arrow(Q, msgs)) == reference_rows(msgs)
