"""Topic and group names: RocketMQ's characters and lengths, the reserved topics, and the
property every text format that carries names relies on: any string is either refused or
round-trips through the nameserver registration's topic lines unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.message import TopicConfig
from rocketq.common.names import (
    GROUP_MAX_LENGTH,
    TOPIC_MAX_LENGTH,
    check_group_name,
    check_topic_name,
    check_user_topic,
    is_reserved_topic,
    is_system_topic,
    is_valid_group_name,
    is_valid_topic_name,
)
from rocketq.common.record import check_topic
from rocketq.remoting.register_body import (
    RegisterBody,
    RegisterBodyError,
    crc32,
    decode_body,
    encode_body,
)


@pytest.mark.parametrize(
    "name", ["T", "orders", "a-b_c", "%RETRY%cg", "%DLQ%cg", "x|y", "0", "a" * TOPIC_MAX_LENGTH]
)
def test_valid_topic_names_pass(name: str) -> None:
    assert check_topic_name(name) == name
    assert is_valid_topic_name(name)
    assert check_topic(name) == name.encode()


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("", "empty"),
        ("a" * (TOPIC_MAX_LENGTH + 1), "128 characters; at most 127"),
        ("payments 1 1 0", r"illegal characters \(' '\)"),
        ("t@g", "illegal characters"),
        ("a/b", "illegal characters"),
        ("new\nline", "illegal characters"),
        ("trailing\n", "illegal characters"),  # a `$` pattern would let this through
        ("caf\u00e9", "illegal characters"),
        ("\u0661", "illegal characters"),  # an Arabic-Indic digit: not [0-9]
        ("nul\x00", "illegal characters"),
    ],
)
def test_bad_topic_names_are_refused_saying_why(name: str, match: str) -> None:
    with pytest.raises(MessageIllegalError, match=match):
        check_topic_name(name)
    assert not is_valid_topic_name(name)
    with pytest.raises(MessageIllegalError):
        check_topic(name)


def test_a_non_text_name_is_refused() -> None:
    with pytest.raises(MessageIllegalError, match="not a text"):
        check_topic_name(5)  # type: ignore[arg-type]
    assert not is_valid_topic_name(None)  # type: ignore[arg-type]


def test_group_names_allow_255_characters() -> None:
    assert check_group_name("g" * GROUP_MAX_LENGTH) == "g" * GROUP_MAX_LENGTH
    with pytest.raises(MessageIllegalError, match="at most 255"):
        check_group_name("g" * (GROUP_MAX_LENGTH + 1))
    with pytest.raises(MessageIllegalError, match="group name is empty"):
        check_group_name("")
    with pytest.raises(MessageIllegalError, match="illegal characters"):
        check_group_name("bad group")
    assert is_valid_group_name("cg-1") and not is_valid_group_name("cg 1")


@pytest.mark.parametrize(
    "name",
    [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_wheel_timer",
        "rmq_sys_REVIVE_LOG_DefaultCluster",
        "rmq_sys_anything",
    ],
)
def test_system_topics_are_reserved(name: str) -> None:
    assert is_reserved_topic(name) and is_system_topic(name)
    with pytest.raises(MessageIllegalError, match="reserved: it is a system topic"):
        check_user_topic(name)


@pytest.mark.parametrize(
    ("name", "match"),
    [("%RETRY%secret-cg", "retry topic"), ("%DLQ%secret-cg", "dead-letter topic")],
)
def test_retry_and_dead_letter_topics_are_reserved_but_not_system(name: str, match: str) -> None:
    assert is_reserved_topic(name) and not is_system_topic(name)
    with pytest.raises(MessageIllegalError, match=match):
        check_user_topic(name)


def test_user_topics_pass_and_bad_ones_fail_on_the_name_first() -> None:
    assert check_user_topic("orders") == "orders"
    assert check_user_topic("BenchmarkTest") == "BenchmarkTest"  # rocketq's benchmarks use it
    assert not is_reserved_topic("RMQ_SYS_X") and not is_reserved_topic("my%DLQ%x")
    with pytest.raises(MessageIllegalError, match="illegal characters"):
        check_user_topic("%DLQ% x")


def _round_trip(topics: list[TopicConfig], deleted: list[str] | None) -> RegisterBody:
    body = encode_body(topics, 7, deleted)
    return decode_body(body, compressed=True, crc=crc32(body))


@settings(max_examples=300, deadline=2000)
@given(
    st.one_of(
        st.text(max_size=140),
        st.from_regex(r"[%|a-zA-Z0-9_ -]{0,130}", fullmatch=True),
        st.builds(
            lambda a, b: f"{a} {b}",
            st.from_regex(r"[a-z]{1,8}", fullmatch=True),
            st.sampled_from(["1 1 0", "4 4 6 SINGLE_TAG 0 false", "0", ""]),
        ),
    ),
    st.integers(0, 2**31 - 1),
    st.integers(0, 7),
    st.booleans(),
)
def test_any_name_passes_and_round_trips_the_registration_or_is_refused(
    name: str, queues: int, perm: int, order: bool
) -> None:
    """A name the validator passes travels through a registration's topic lines (and its
    deleted names) unchanged, beside other topics; any other is refused by the encoder, so
    no name can split the encoding into other topics or other numbers."""
    topic = TopicConfig(name, queues, queues, perm, 0, order)
    neighbour = TopicConfig("payments", 4, 4, 6)
    try:
        check_topic_name(name)
    except MessageIllegalError:
        assert not is_valid_topic_name(name)
        with pytest.raises(RegisterBodyError, match="not a valid topic name"):
            encode_body([neighbour, topic], 7)
        with pytest.raises(RegisterBodyError, match="not a valid topic name"):
            encode_body([neighbour], 7, [name])
        return
    assert is_valid_topic_name(name)
    got = _round_trip([neighbour, topic], [name])
    assert got == RegisterBody([neighbour, topic], 7, [name])
