"""Names at each of the broker's entry points, against a broker running in this process:
UPDATE_AND_CREATE_TOPIC (bad names, system topics), a SEND's auto-create (bad and reserved
names), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, HEART_BEAT (groups and subscribed topics),
UPDATE_CONSUMER_OFFSET and pulls; each bad name answered with a clear remark and nothing
changed. Then the managers as the last line (TopicConfigManager, SubscriptionGroupManager,
ConsumerOffsetManager) and their files: a bad entry is logged naming its file and skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.broker.broker import Broker
from rocketq.broker.consumer_offset import ConsumerOffsetManager
from rocketq.broker.pop import CK_TAG, PopService
from rocketq.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.common.exceptions import (
    MessageIllegalError,
    StoreCorruptError,
    SubscriptionGroupNotExistError,
)
from rocketq.common.message import TRACE_TOPIC, TopicConfig
from rocketq.common.names import is_valid_group_name
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection
from tests.broker.test_wire import v2
from tests.fuzz_mutations import total


async def ask(
    conn: Connection, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
) -> RemotingCommand:
    return await conn.invoke(RemotingCommand(code, ext, body), 5.0)


def topic_header(topic: str) -> dict[str, str]:
    return {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
    }  # fmt: skip


def heartbeat(group: str, topic: str, producer: str = "pg") -> bytes:
    sub = {"expressionType": "TAG", "subString": "*", "subVersion": 1, "topic": topic}
    consumer = {
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": group,
        "messageModel": "CLUSTERING",
        "subscriptionDataSet": [sub],
    }
    return fastjson.dumps(
        {
            "clientID": "cid-names",
            "consumerDataSet": [consumer],
            "producerDataSet": [{"groupName": producer}],
        }
    )


@pytest.mark.parametrize(
    ("topic", "says"),
    [
        ("payments 1 1 0", "illegal characters"),
        ("t@g", "illegal characters"),
        ("x" * 128, "at most 127"),
        ("SCHEDULE_TOPIC_XXXX", "system topic"),
        ("rmq_sys_mine", "system topic"),
        ("RMQ_SYS_TRACE_TOPIC", "system topic"),
    ],
)
async def test_update_topic_refuses_bad_and_system_names(
    wire: tuple[Broker, Connection], topic: str, says: str
) -> None:
    b, conn = wire
    version = b.topics.data_version
    answer = await ask(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, topic_header(topic))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL and says in str(answer.remark), answer
    assert b.topics.data_version == version
    assert topic not in b.topics.topics or topic == "SCHEDULE_TOPIC_XXXX"


@pytest.mark.parametrize(
    ("topic", "code", "says"),
    [
        ("payments 1 1 0", ResponseCode.MESSAGE_ILLEGAL, "illegal characters"),
        ("%DLQ%secret-cg", ResponseCode.NO_PERMISSION, "dead-letter topic"),
        ("%RETRY%secret-cg", ResponseCode.NO_PERMISSION, "retry topic"),
        ("rmq_sys_mine", ResponseCode.MESSAGE_ILLEGAL, "reserved"),
        ("OFFSET_MOVED_EVENT", ResponseCode.MESSAGE_ILLEGAL, "reserved"),
    ],
)
async def test_a_send_never_auto_creates_a_bad_or_reserved_name(
    wire: tuple[Broker, Connection], topic: str, code: int, says: str
) -> None:
    b, conn = wire
    version = b.topics.data_version
    answer = await ask(conn, RequestCode.SEND_MESSAGE_V2, v2(topic, 0, ""), b"x")
    assert answer.code == code and says in str(answer.remark), answer
    assert topic not in b.topics.topics
    assert b.topics.data_version == version


async def test_a_send_auto_creates_a_good_name(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    answer = await ask(conn, RequestCode.SEND_MESSAGE_V2, v2("alice-made-topic", 0, ""), b"x")
    assert answer.code == ResponseCode.SUCCESS, answer
    assert b.topics.get("alice-made-topic") is not None


@pytest.mark.parametrize(
    ("group", "topic", "producer"),
    [("bad group", "WireTopic", "pg"), ("cg", "Wire@Topic", "pg"), ("cg", "WireTopic", "p g")],
)
async def test_a_heartbeat_with_a_bad_name_changes_nothing(
    wire: tuple[Broker, Connection], group: str, topic: str, producer: str
) -> None:
    b, conn = wire
    groups, version = dict(b.groups.groups), b.topics.data_version
    answer = await ask(conn, RequestCode.HEART_BEAT, None, heartbeat(group, topic, producer))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL, answer
    assert "illegal characters" in str(answer.remark)
    assert b.groups.groups == groups and b.topics.data_version == version
    assert b.consumers.client_ids("cg") == [] and b.consumers.client_ids(group) == []


async def test_update_group_and_offsets_refuse_bad_names(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    body = fastjson.dumps({"groupName": "bad group"})
    answer = await ask(conn, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
    assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "illegal characters" in str(answer.remark)
    assert "bad group" not in b.groups.groups

    ext = {"consumerGroup": "cg", "topic": "Wire@Topic", "queueId": "0", "commitOffset": "5"}
    answer = await ask(conn, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL, answer
    ext = {"consumerGroup": "c@g", "topic": "WireTopic", "queueId": "0", "commitOffset": "5"}
    answer = await ask(conn, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL, answer
    assert "Wire@Topic@cg" not in b.offsets.table and "WireTopic@c@g" not in b.offsets.table


# -- the managers and their files --------------------------------------------------------


def topics(tmp_path: Path) -> TopicConfigManager:
    m = TopicConfigManager(tmp_path / "topics.json", auto_create=True, default_queue_nums=4)
    m.load()
    return m


def test_the_topic_table_refuses_bad_names_and_auto_creates_no_reserved_one(
    tmp_path: Path,
) -> None:
    m = topics(tmp_path)
    version = m.data_version
    for bad in ("a b", "", "t\n", "x" * 128):
        with pytest.raises(MessageIllegalError):
            m.update(TopicConfig(bad, 1, 1))
        with pytest.raises(MessageIllegalError):
            m.create_in_send(bad, "TBW102", 4)
        with pytest.raises(MessageIllegalError):
            m.create_system(bad, 1, 6)
    for reserved in ("%DLQ%cg", "%RETRY%cg", "rmq_sys_x", "SELF_TEST_TOPIC", "TBW102"):
        if reserved in m.topics:
            continue
        with pytest.raises(MessageIllegalError, match="reserved"):
            m.create_in_send(reserved, "TBW102", 4)
    assert m.data_version == version
    # What the broker creates itself, and the trace writers' first send, still go.
    assert m.create_system("%RETRY%cg", 1, 6).topic_name == "%RETRY%cg"
    assert m.create_in_send(TRACE_TOPIC, "TBW102", 4).topic_name == TRACE_TOPIC


def test_the_group_table_refuses_bad_names_and_skips_bad_entries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "subscriptionGroup.json"
    m = SubscriptionGroupManager(path, auto_create=True)
    with pytest.raises(SubscriptionGroupNotExistError, match="illegal characters"):
        m.find_or_create("bad group")
    with pytest.raises(SubscriptionGroupNotExistError, match="at most 255"):
        m.update(SubscriptionGroupConfig("g" * 256))
    m.find_or_create("cg")
    assert set(m.groups) == {"cg"}

    doc = json.loads(path.read_text())
    table = doc["subscriptionGroupTable"]
    table["bad group"] = {"group_name": "bad group"}
    table["odd"] = {"group_name": "odd", "retry_max_times": "many"}
    table["other"] = {"group_name": "someone-else"}
    table["unknown"] = {"group_name": "unknown", "no_such_field": 1}
    table["fine"] = {"group_name": "fine", "retry_max_times": 3}
    path.write_text(json.dumps(doc))
    again = SubscriptionGroupManager(path, auto_create=True)
    with caplog.at_level("ERROR", logger="rocketq.broker.subscription_group"):
        again.load()
    assert set(again.groups) == {"cg", "fine"}
    assert again.groups["fine"].retry_max_times == 3
    assert caplog.text.count("subscriptionGroup.json: skipping the entry") == 4


def test_offsets_refuse_names_that_would_split_their_key_and_skip_bad_entries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "consumerOffset.json"
    m = ConsumerOffsetManager(path)
    with pytest.raises(MessageIllegalError):
        m.commit("g", "a@b", 0, 1)  # a@b@g would read back as topic a, group b@g
    with pytest.raises(MessageIllegalError):
        m.commit("b@g", "a", 0, 1)
    m.commit("g", "T", 0, 7)
    assert m.table == {"T@g": {0: 7}}
    m.persist()

    doc = json.loads(path.read_text())
    doc["offsetTable"]["a@b@g"] = {"0": 1}
    doc["offsetTable"]["no-separator"] = {"0": 1}
    doc["offsetTable"]["U@g"] = {"0": "x"}
    doc["offsetTable"]["V@g"] = {"1": 2}
    path.write_text(json.dumps(doc))
    again = ConsumerOffsetManager(path)
    with caplog.at_level("ERROR", logger="rocketq.broker.consumer_offset"):
        again.load()
    assert again.table == {"T@g": {0: 7}, "V@g": {1: 2}}
    assert caplog.text.count("consumerOffset.json: skipping the entry") == 3


def test_a_revive_check_point_naming_a_bad_topic_or_group_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A check point an older broker wrote for a name that is not valid never reaches the
    revive (where its group could not be found or made, and would hold its queue)."""
    service = PopService.__new__(PopService)
    pending: dict[Any, Any] = {}
    ck = {"c": "cg", "q": 0, "so": 5, "pt": 1, "it": 60000, "d": [0]}
    with caplog.at_level("WARNING", logger="rocketq.broker.pop"):
        for topic, group in (("a b", "cg"), ("T", "c g"), ("T", "")):
            service._take(pending, CK_TAG, json.dumps({**ck, "t": topic, "c": group}).encode(), 9)
    assert pending == {}
    assert caplog.text.count("not valid names") == 3
    service._take(pending, CK_TAG, json.dumps({**ck, "t": "T"}).encode(), 9)
    assert [c.topic for c in pending.values()] == ["T"]


GROUP_FIELDS = st.dictionaries(
    st.sampled_from(["group_name", "consume_enable", "retry_max_times", "broker_id", "x"]),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**40), 2**40),
        st.text(max_size=8),
        st.lists(st.integers(), max_size=2),
    ),
    max_size=4,
)


@settings(max_examples=150, deadline=2000)
@given(
    st.dictionaries(st.text(max_size=12), st.one_of(GROUP_FIELDS, st.integers()), max_size=4),
    st.binary(max_size=64),
)
def test_any_group_file_loads_valid_groups_only_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, table: dict[str, Any], junk: bytes
) -> None:
    """A subscriptionGroup.json of any entries loads just its valid group configs; one
    that is not a group table at all is StoreCorruptError; nothing else is raised."""
    root = tmp_path_factory.mktemp("groups")
    for i, data in enumerate(
        (json.dumps({"subscriptionGroupTable": table}).encode(), junk, json.dumps(table).encode())
    ):
        path = root / f"{i}.json"
        path.write_bytes(data)
        m = SubscriptionGroupManager(path, auto_create=True)
        got = total(m.load, StoreCorruptError)
        if isinstance(got, BaseException):
            continue
        for name, config in m.groups.items():
            assert is_valid_group_name(name) and config.group_name == name
            assert type(config.retry_max_times) is int and type(config.consume_enable) is bool
