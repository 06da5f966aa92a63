"""Every decoder of outside bytes in the shared model is total: CommitLog records as the
SDK decodes pulled ones, message properties, route and cluster-info bodies, JSON state
files, SQL92 expressions and the properties they run on, and config TOML files.

Each test builds valid inputs (which round-trip where an encoder exists), then mutates
them (tests/fuzz_mutations.py) and checks the decoder returns a value or raises the error
its module documents, within a time and memory bound.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.common.config import StoreConfig, load_config
from rocketq.common.exceptions import (
    ConfigError,
    MessageIllegalError,
    StoreCorruptError,
    SubscriptionParseFailedError,
)
from rocketq.common.json_file import read_json
from rocketq.common.message import MessageExt, decode_properties, message_doc
from rocketq.common.record import (
    decode_record,
    decode_records,
    encode_properties,
    encode_record,
    iter_records,
    property_value,
    record_properties,
)
from rocketq.common.sql92 import Sql92Filter, compile_expression
from rocketq.remoting.route_data import (
    BrokerData,
    ClusterInfo,
    QueueData,
    RouteBodyError,
    TopicRouteData,
    cluster_info_body,
    parse_cluster_info,
    parse_route,
    route_body,
)
from tests.fuzz_mutations import (
    HOSTILE_JSON_TEXTS,
    json_with_a_part_replaced,
    mutated,
    mutated_text,
    total,
)

FUZZ: Final = settings(max_examples=150, deadline=2000)
NAMES: Final = st.text(string.ascii_letters + string.digits + "_-%|", min_size=1, max_size=20)
# Property names and values: anything but the two separators.
PROP_TEXT: Final = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), max_size=30
)
INT32: Final = st.integers(-(1 << 31), (1 << 31) - 1)
INT64: Final = st.integers(-(1 << 63), (1 << 63) - 1)


# -- CommitLog records as the SDK decodes them -------------------------------------------


@st.composite
def records(draw: st.DrawFn) -> bytes:
    props = draw(st.dictionaries(PROP_TEXT.filter(bool), PROP_TEXT, max_size=5))
    # System properties the SDK reads as numbers or lists, with any text in them.
    props.update(draw(st.dictionaries(st.sampled_from(["DELAY", "KEYS", "UNIQ_KEY"]), PROP_TEXT)))
    return encode_record(
        topic=draw(NAMES).encode(),
        body=draw(st.binary(max_size=64)),
        properties=encode_properties(props),
        born_timestamp=draw(INT64),
        born_host=draw(st.binary(min_size=8, max_size=8)),
        queue_id=draw(INT32),
        flag=draw(INT32),
        sys_flag=draw(INT32),
        reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64),
        queue_offset=draw(INT64),
        physical_offset=draw(INT64),
        store_timestamp=draw(INT64),
        store_host=draw(st.binary(min_size=8, max_size=8)),
    )


def read_every_field(msg: MessageExt) -> None:
    """What an SDK or tool reads of a decoded message: every lazy field too."""
    message_doc(msg)
    repr(msg)
    assert isinstance(msg.delay_level, int)
    msg.user_properties()
    assert msg.born_host and msg.store_host


@given(st.lists(records(), min_size=1, max_size=4))
@FUZZ
def test_valid_records_round_trip(blobs: list[bytes]) -> None:
    blob = b"".join(blobs)
    msgs = decode_records(blob)
    assert [size for _, size in iter_records(blob)] == [len(b) for b in blobs]
    for raw, msg in zip(blobs, msgs, strict=True):
        again = encode_record(
            topic=msg.topic.encode(),
            body=msg.body,
            properties=encode_properties(msg.properties),
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host_bytes,
            queue_id=msg.queue_id,
            flag=msg.flag,
            sys_flag=msg.sys_flag,
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            queue_offset=msg.queue_offset,
            physical_offset=msg.commit_log_offset,
            store_timestamp=msg.store_timestamp,
            store_host=msg._store_host,
            body_crc=msg.body_crc,
        )
        assert again == raw
        assert record_properties(raw) == msg.properties
        read_every_field(msg)


@given(st.data(), st.lists(records(), min_size=1, max_size=3))
@FUZZ
def test_mutated_records_decode_or_are_refused(data: st.DataObject, blobs: list[bytes]) -> None:
    blob = data.draw(mutated(b"".join(blobs)))
    msgs = total(lambda: decode_records(blob), MessageIllegalError)
    if isinstance(msgs, list):
        for msg in msgs:
            read_every_field(msg)
    total(lambda: list(iter_records(blob)), MessageIllegalError)
    total(lambda: decode_record(blob), MessageIllegalError)
    total(lambda: record_properties(blob), MessageIllegalError)


@given(st.binary(max_size=300))
@FUZZ
def test_any_bytes_decode_or_are_refused(blob: bytes) -> None:
    total(lambda: decode_records(blob), MessageIllegalError)
    total(lambda: record_properties(blob), MessageIllegalError)


# -- message properties ------------------------------------------------------------------


@given(st.dictionaries(PROP_TEXT.filter(bool), PROP_TEXT, max_size=8))
@FUZZ
def test_properties_round_trip(props: dict[str, str]) -> None:
    raw = encode_properties(props)
    assert decode_properties(raw) == props
    for name, value in props.items():
        assert property_value(raw, name.encode()) == value.encode()


@given(st.data(), st.dictionaries(PROP_TEXT.filter(bool), PROP_TEXT, min_size=1, max_size=8))
@FUZZ
def test_mutated_properties_decode(data: st.DataObject, props: dict[str, str]) -> None:
    raw = data.draw(mutated(encode_properties(props)))
    decoded = total(lambda: decode_properties(raw), ())
    assert isinstance(decoded, dict)
    total(lambda: property_value(raw, b"TAGS"), ())


# -- route and cluster-info bodies -------------------------------------------------------

BROKER_DATAS: Final = st.builds(
    BrokerData,
    NAMES,
    NAMES,
    st.dictionaries(st.integers(0, 1 << 20), NAMES, max_size=3),
)
ROUTES: Final = st.builds(
    TopicRouteData,
    st.lists(st.builds(QueueData, NAMES, INT32, INT32, INT32, INT32), max_size=3),
    st.lists(BROKER_DATAS, max_size=3),
    st.just("") | NAMES,
)
CLUSTER_INFOS: Final = st.builds(
    ClusterInfo,
    st.dictionaries(NAMES, BROKER_DATAS, max_size=3),
    st.dictionaries(NAMES, st.lists(NAMES, max_size=3).map(sorted), max_size=3),
)
HOSTILE_JSON: Final = st.sampled_from(HOSTILE_JSON_TEXTS)


@given(ROUTES, st.booleans())
@FUZZ
def test_route_bodies_round_trip(route: TopicRouteData, standard: bool) -> None:
    assert parse_route(route_body(route, standard=standard)) == route


@given(CLUSTER_INFOS)
@FUZZ
def test_cluster_info_bodies_round_trip(info: ClusterInfo) -> None:
    assert parse_cluster_info(cluster_info_body(info)) == info


@given(st.data(), ROUTES, CLUSTER_INFOS, st.booleans())
@settings(max_examples=200, deadline=2000)
def test_mutated_route_bodies_parse_or_are_refused(
    data: st.DataObject, route: TopicRouteData, info: ClusterInfo, standard: bool
) -> None:
    for body, parse in (
        (route_body(route, standard=standard), parse_route),
        (cluster_info_body(info), parse_cluster_info),
    ):
        bad = data.draw(st.one_of(mutated(body), json_with_a_part_replaced(body)))
        total(lambda: parse(bad), RouteBodyError)  # noqa: B023 (called at once)


# -- JSON state files --------------------------------------------------------------------


@given(st.data(), st.dictionaries(NAMES, st.dictionaries(NAMES, INT64), max_size=3))
@FUZZ
def test_damaged_json_files_read_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, doc: dict[str, object]
) -> None:
    path = tmp_path_factory.mktemp("json") / "state.json"
    valid = json.dumps(doc).encode()
    path.write_bytes(valid)
    assert read_json(path, "state") == doc
    path.write_bytes(
        data.draw(st.one_of(mutated(valid), json_with_a_part_replaced(valid), HOSTILE_BYTES))
    )
    total(lambda: read_json(path, "state"), StoreCorruptError)


HOSTILE_BYTES: Final = HOSTILE_JSON.map(str.encode)


# -- SQL92 -------------------------------------------------------------------------------

PROPERTY: Final = st.sampled_from(["a", "b", "TAGS", "x.y", "_n"])
NUMBER: Final = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([10**400, -(10**400), 1e300, 5e-324]),
)
STRING: Final = st.text(max_size=10).map(lambda s: "'" + s.replace("'", "''") + "'")


def _number(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def _conditions() -> st.SearchStrategy[str]:
    """Valid SQL92 conditions, as RocketMQ's grammar allows them."""
    tests = st.one_of(
        st.tuples(
            PROPERTY,
            st.sampled_from(["=", "<>", "!=", ">", ">=", "<", "<="]),
            NUMBER.map(_number),
        ).map(" ".join),
        st.tuples(PROPERTY, st.sampled_from(["=", "<>"]), STRING | st.sampled_from(["TRUE"])).map(
            " ".join
        ),
        st.tuples(PROPERTY, NUMBER, NUMBER).map(
            lambda t: f"{t[0]} BETWEEN {_number(min(t[1:]))} AND {_number(max(t[1:]))}"
        ),
        st.tuples(PROPERTY, st.lists(STRING, min_size=1, max_size=3)).map(
            lambda t: f"{t[0]} IN ({', '.join(t[1])})"
        ),
        st.tuples(PROPERTY, st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]), STRING).map(
            " ".join
        ),
        PROPERTY.map(lambda p: f"{p} IS NOT NULL"),
    )
    return st.recursive(
        tests,
        lambda inner: st.one_of(
            inner.map(lambda c: f"NOT ({c})"),
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(
                lambda t: f"({t[0]}) {t[1]} ({t[2]})"
            ),
        ),
        max_leaves=8,
    )


HOSTILE_VALUES: Final = st.one_of(
    PROP_TEXT,
    st.sampled_from(
        ["1e999", "-1e999", "NaN", "inf", "9" * 5000, "9" * 100_000, "1" + "0" * 400, "x" * 100_000]
    ),
    st.integers().map(str),
    st.floats().map(repr),
)


@given(
    _conditions(),
    st.dictionaries(PROPERTY, HOSTILE_VALUES, max_size=5),
)
@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
def test_sql92_valid_expressions_evaluate_on_hostile_properties(
    text: str, props: dict[str, str]
) -> None:
    # too_slow: the property values are up to 100 kB; generating them is the slow part.
    compiled = compile_expression(text)
    assert total(lambda: compiled.matches(props), ()) in (True, False)


@given(st.data(), _conditions())
@settings(max_examples=200, deadline=2000)
def test_sql92_mutated_expressions_compile_or_are_refused(data: st.DataObject, text: str) -> None:
    bad = data.draw(
        st.one_of(
            mutated_text(text),
            st.integers(1, 5000).map(lambda n: "(" * n + text + ")" * n),
            st.integers(1, 5000).map(lambda n: "NOT " * n + "(" + text + ")"),
            st.integers(1, 3000).map(lambda n: " AND ".join([text] * n)),
            st.integers(1, 3000).map(lambda n: text + " " + "x" * (n * 100)),
        )
    )
    compiled = total(lambda: compile_expression(bad), SubscriptionParseFailedError)
    if isinstance(compiled, Sql92Filter):
        matches = compiled.matches
        assert total(lambda: matches({"a": "1", "TAGS": "x"}), ()) in (True, False)


# -- config TOML files -------------------------------------------------------------------

VALID_TOML: Final = (
    'store_path_root_dir = "/tmp/store"\n'
    "mapped_file_size_commit_log = 1048576\n"
    "max_message_size = 4194304\n"
    'flush_disk_type = "SYNC_FLUSH"\n'
    "sync_flush_timeout = 5000\n"
)
HOSTILE_TOML: Final = st.sampled_from(
    [
        "max_message_size = 1e999",
        "max_message_size = nan",
        "max_message_size = -9223372036854775809",
        "max_message_size = 9223372036854775808",
        "mapped_file_size_commit_log = true",
        "mapped_file_size_commit_log = [1, 2]",
        'flush_disk_type = "\\ud800"',
        'flush_disk_type = "' + "x" * 100_000 + '"',
        "store_path_root_dir = 1979-05-27T07:32:00Z",
        "a." * 300 + "b = 1",
        "[store]\nx = 1",
    ]
)
# Nested deeper than tomllib's recursion: common/config.py's loader lets the
# RecursionError out (it catches TOMLDecodeError and UnicodeDecodeError only).
# An integer of more digits than int() reads (4300) gets ValueError out of it as well.
DEEP_OR_HUGE_TOML: Final = (
    "x = " + "[" * 5000 + "]" * 5000,
    "x = " + "{a = " * 3000 + "1" + "}" * 3000,
    "max_message_size = " + "9" * 5000,
)


@given(st.data())
@settings(max_examples=150, deadline=3000)
def test_damaged_config_files_load_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("toml") / "store.toml"
    path.write_text(VALID_TOML)
    cfg = load_config(StoreConfig, path, env={})
    assert cfg.max_message_size == 4194304 and cfg.flush_disk_type == "SYNC_FLUSH"
    path.write_bytes(
        data.draw(
            st.one_of(
                mutated(VALID_TOML.encode()),
                HOSTILE_TOML.map(lambda line: (VALID_TOML + line + "\n").encode()),
            )
        )
    )
    total(lambda: load_config(StoreConfig, path, env={}), ConfigError, seconds=3.0)


def test_a_deep_json_file_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    path.write_text("[" * 100_000)
    with pytest.raises(StoreCorruptError, match="offsets"):
        read_json(path, "offsets")


@pytest.mark.parametrize("line", DEEP_OR_HUGE_TOML, ids=["arrays", "inline-tables", "long-int"])
def test_a_deep_or_huge_config_value_is_refused_clearly(tmp_path: Path, line: str) -> None:
    path = tmp_path / "store.toml"
    path.write_text(VALID_TOML + line + "\n")
    with pytest.raises(ConfigError):
        load_config(StoreConfig, path, env={})


def test_an_expression_past_the_length_limit_is_refused_at_once() -> None:
    text = " OR ".join(["a = 1"] * 20_000)
    refused = total(lambda: compile_expression(text), SubscriptionParseFailedError, seconds=0.5)
    assert isinstance(refused, SubscriptionParseFailedError)
    assert "at most 65536" in str(refused) and len(str(refused)) < 400
