"""Pulled messages as Arrow record batches of the data source's schema, a column at a time.

A read task turns tens of thousands of messages a second into rows. Building them one
message at a time in Python (each message's properties decoded into a dict, then each dict
converted into a map entry) was the largest cost of a read, ahead of the pulls themselves.
Here each column is one list comprehension over the messages or one Arrow compute call: the
``properties`` map is split by Arrow from the records' raw properties (``name\\x01value\\x02``
pairs), and ``msg_id``, ``tags`` and ``keys`` are looked up in that map.

Arrow's split must give what the SDK's decoder (``common.message.decode_properties``)
gives, and for every record a producer writes it does. Properties it cannot split alike (not
UTF-8, an empty pair, a pair without its separator, a name twice) are decoded by the SDK's
decoder instead, for that batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from rocketq.common.message import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
    decode_properties,
)

QueueId = tuple[str, str, int]
"""(topic, broker name, queue id), as :data:`rocketq.sdk.spark.options.QueueId`."""

PROPERTIES_TYPE: Final = pa.map_(pa.string(), pa.string())
KEYS_TYPE: Final = pa.list_(pa.string())
STAMP_TYPE: Final = pa.timestamp("us", tz="UTC")
_ZERO: Final = pa.scalar(0, pa.int32())

ARROW_SCHEMA: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("broker", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("msg_id", pa.string()),
        ("keys", KEYS_TYPE),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("properties", PROPERTIES_TYPE),
        ("born_timestamp", STAMP_TYPE),
        ("store_timestamp", STAMP_TYPE),
        ("born_host", pa.string()),
        ("store_host", pa.string()),
        ("reconsume_times", pa.int32()),
    ]
)


def split_properties(raw: Sequence[bytes]) -> pa.MapArray | None:
    """Raw properties of each message -> the ``properties`` column, split by Arrow; None
    when some message's properties are not what a producer writes (each pair
    ``name\\x01value`` followed by ``\\x02``, names unique, UTF-8): the caller decodes that
    batch with the SDK's decoder."""
    text = pa.array(raw, pa.binary())
    try:
        text = text.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: the SDK's decoder replaces what is not
        return None
    if len(text) == 0:
        return pa.array([], PROPERTIES_TYPE)
    if not pc.all(pc.ends_with(text, PROPERTY_SEPARATOR)).as_py():
        return None  # no properties at all, or a last pair without its separator
    pairs = pc.split_pattern(pc.utf8_slice_codeunits(text, 0, -1), PROPERTY_SEPARATOR)
    name_value = pc.split_pattern(pairs.flatten(), NAME_VALUE_SEPARATOR, max_splits=1)
    if pc.min(pc.list_value_length(name_value)).as_py() != 2:
        return None  # an empty pair, or one without the name-value separator
    names = pc.list_element(name_value, 0)
    distinct = (
        pa.table({"message": pc.list_parent_indices(pairs), "name": names})
        .group_by(["message", "name"])
        .aggregate([])
    )
    if distinct.num_rows != len(names):
        return None  # a name twice in one message: the decoder keeps its last value
    return pa.MapArray.from_arrays(pairs.offsets, names, pc.list_element(name_value, 1))


def decoded_properties(raw: Sequence[bytes]) -> pa.MapArray:
    """The ``properties`` column by the SDK's decoder, one message at a time."""
    return pa.array([list(decode_properties(r).items()) for r in raw], PROPERTIES_TYPE)


def _lookup(props: pa.MapArray, name: str) -> pa.StringArray:
    return pc.map_lookup(props, pa.scalar(name), "last")


def _keys(raw: pa.StringArray) -> pa.ListArray:
    """The KEYS property split at spaces; [] where it is missing or empty."""
    n = len(raw)
    if raw.null_count == n:  # no message has keys: n empty lists
        return pa.ListArray.from_arrays(pa.repeat(_ZERO, n + 1), pa.array([], pa.string()))
    present = pc.if_else(pc.equal(raw, ""), pa.scalar(None, pa.string()), raw)
    split = pc.split_pattern(present, KEY_SEPARATOR)
    # Null lists become empty ones: offsets from the lengths, nulls counted as 0 (a list
    # array's fill_null costs more than the split).
    lengths = pc.fill_null(pc.list_value_length(split), 0)
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])
    return pa.ListArray.from_arrays(offsets.cast(pa.int32()), split.flatten())


def _stamps(millis: list[int]) -> pa.Array:
    return pc.multiply(pa.array(millis, pa.int64()), 1000).cast(STAMP_TYPE)


_UNIQ_FIRST: Final = f"{PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}{NAME_VALUE_SEPARATOR}".encode()
_UNIQ_PAIR: Final = PROPERTY_SEPARATOR.encode() + _UNIQ_FIRST


def _offset_id(m: MessageExt) -> str | None:
    """The broker's offset id of a message without a UNIQ_KEY pair, for its ``msg_id``;
    None for one with it (decoded later, with the other properties)."""
    raw = m.properties_raw
    if raw.startswith(_UNIQ_FIRST) or _UNIQ_PAIR in raw:
        return None
    return m.offset_msg_id


class BatchBuilder:
    """The columns of one queue's messages, gathered answer by answer, as a record batch
    of :data:`ARROW_SCHEMA`. Only plain values are kept (bytes, numbers, strings): a
    pulled message's object is dropped as soon as its pull answer is done with, so
    thousands of them do not outlive the garbage collector's young generation."""

    __slots__ = (
        "bodies",
        "born",
        "born_hosts",
        "offset_ids",
        "offsets",
        "props",
        "q",
        "reconsume",
        "store_hosts",
        "stored",
    )

    def __init__(self, q: QueueId) -> None:
        self.q = q
        self.offsets: list[int] = []
        self.bodies: list[bytes] = []
        self.props: list[bytes] = []
        self.offset_ids: list[str | None] = []
        self.born: list[int] = []
        self.stored: list[int] = []
        self.born_hosts: list[str] = []
        self.store_hosts: list[str] = []
        self.reconsume: list[int] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, msgs: Sequence[MessageExt]) -> None:
        """Take the columns of ``msgs`` (the next messages of the queue)."""
        self.offsets += [m.queue_offset for m in msgs]
        self.bodies += [m.body for m in msgs]
        self.props += [m.properties_raw for m in msgs]
        self.offset_ids += [_offset_id(m) for m in msgs]
        self.born += [m.born_timestamp for m in msgs]
        self.stored += [m.store_timestamp for m in msgs]
        self.born_hosts += [m.born_host for m in msgs]
        self.store_hosts += [m.store_host for m in msgs]
        self.reconsume += [m.reconsume_times for m in msgs]

    def _msg_ids(self, uniq: pa.StringArray) -> pa.StringArray:
        """UNIQ_KEY, else the broker's offset id (a message whose producer set none)."""
        if uniq.null_count == 0:
            return uniq
        return pa.array(
            [
                u if u is not None else o
                for u, o in zip(uniq.to_pylist(), self.offset_ids, strict=True)
            ],
            pa.string(),
        )

    def build(self) -> pa.RecordBatch:
        """The messages taken so far as one record batch."""
        q, n = self.q, len(self.offsets)
        props = split_properties(self.props)
        if props is None:
            props = decoded_properties(self.props)
        return pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(q[0], pa.string()), n),
                pa.repeat(pa.scalar(q[1], pa.string()), n),
                pa.repeat(pa.scalar(q[2], pa.int32()), n),
                pa.array(self.offsets, pa.int64()),
                self._msg_ids(_lookup(props, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)),
                _keys(_lookup(props, PROPERTY_KEYS)),
                _lookup(props, PROPERTY_TAGS),
                pa.array(self.bodies, pa.binary()),
                props,
                _stamps(self.born),
                _stamps(self.stored),
                pa.array(self.born_hosts, pa.string()),
                pa.array(self.store_hosts, pa.string()),
                pa.array(self.reconsume, pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )


def to_arrow(q: QueueId, msgs: Sequence[MessageExt]) -> pa.RecordBatch:
    """Messages of one queue -> one record batch of :data:`ARROW_SCHEMA`."""
    builder = BatchBuilder(q)
    builder.add(msgs)
    return builder.build()
