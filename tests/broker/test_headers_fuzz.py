"""No request stops a broker: every request handler (send, pull, client calls, admin) takes
hostile header fields and bodies and answers, or raises the project's error (which goes
back as a response code), within a time bound; the broker serves a normal send and pull
after them all. The header field readers and the files the broker reads at start (the
topic snapshot and change log, consumer offsets) are total as well."""

from __future__ import annotations

import asyncio
import contextlib
import json
import string
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.broker.broker import Broker
from rocketq.broker.consumer_offset import ConsumerOffsetManager
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.broker.wire.admin import AdminRequests, header_bool, header_text
from rocketq.broker.wire.client import ClientRequests
from rocketq.broker.wire.pull import PullRequests, header_int
from rocketq.broker.wire.send import SendHeader, SendRequests, java_true
from rocketq.common.exceptions import MessageIllegalError, RocketqError, StoreCorruptError
from rocketq.common.message import Message, TopicConfig
from rocketq.common.names import is_valid_topic_name
from rocketq.common.record import decode_records, encode_host, encode_message
from rocketq.remoting.codes import PullSysFlag, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, RemotingError
from rocketq.remoting.transport import Connection
from tests.broker.conftest import WIRE_TOPIC
from tests.fuzz_mutations import HOSTILE_JSON_TEXTS, json_with_a_part_replaced, mutated, total

INT_TEXT: Final = st.one_of(
    st.integers(-(1 << 64), 1 << 64).map(str),
    st.sampled_from(
        [
            "",
            " ",
            " 7 ",
            "-0",
            "+5",
            "1_000",
            "0x10",
            "1e3",
            "nan",
            "٣",
            "9" * 30,
            "9" * 5000,
            "-2147483649",
            "2147483648",
            "9223372036854775808",
            "-9223372036854775809",
        ]
    ),
)
HOSTILE_TEXT: Final = st.one_of(
    INT_TEXT,
    # No lone surrogates: the remoting decoders refuse them, so no header holds one.
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=20),
    st.sampled_from(["true", "TRUE", "\x00", "T" * 300, "%RETRY%g", "../x", "a/b", "*", "a||b"]),
)


# -- header field readers -----------------------------------------------------------------


def command(code: int, fields: dict[str, str], body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand(code, ext=fields, body=body)


@given(
    st.dictionaries(st.sampled_from(["n", "x"]), HOSTILE_TEXT),
    st.none() | st.integers(-(1 << 63), (1 << 63) - 1),
)
@settings(max_examples=300, deadline=2000)
def test_header_fields_read_or_are_refused(fields: dict[str, str], default: int | None) -> None:
    cmd = command(RequestCode.PULL_MESSAGE, fields)
    got = total(lambda: header_int(cmd, "n", default), MessageIllegalError)
    if isinstance(got, int):
        assert -(1 << 63) <= got < 1 << 63  # what a Java long holds
    total(lambda: header_text(cmd, "n"), MessageIllegalError)
    assert header_bool(cmd, "n", True) in (True, False)
    send = SendHeader(command(RequestCode.SEND_MESSAGE, fields))
    got = total(lambda: send.int("n", default), MessageIllegalError)
    if isinstance(got, int):
        assert -(1 << 63) <= got < 1 << 63
    assert java_true(fields.get("n")) in (True, False)


# -- every handler, on a running broker -----------------------------------------------------

BORN_HOST: Final = encode_host("127.0.0.1:40000")
GROUP: Final = "FuzzGroup"
VALID_FIELDS: Final = {
    # pull, offsets, admin
    "topic": WIRE_TOPIC,
    "queueId": "0",
    "consumerGroup": GROUP,
    "group": GROUP,
    "queueOffset": "0",
    "maxMsgNums": "32",
    "sysFlag": "4",
    "commitOffset": "0",
    "suspendTimeoutMillis": "0",
    "subscription": "*",
    "expressionType": "TAG",
    "subVersion": "1",
    "timestamp": "0",
    "offset": "0",
    "key": "k1",
    "maxNum": "10",
    "beginTimestamp": "0",
    "endTimestamp": "99999999999999",
    "msgId": "7F00000100002A9F0000000000000000",
    "readQueueNums": "2",
    "writeQueueNums": "2",
    "perm": "6",
    "topicSysFlag": "0",
    "topicFilterType": "SINGLE_TAG",
    "clientId": "c1",
    "clientID": "c1",
    "isForce": "true",
    "delayLevel": "0",
    "maxReconsumeTimes": "16",
    "originMsgId": "x",
    "originTopic": WIRE_TOPIC,
    "commitLogOffset": "0",
    "tranStateTableOffset": "0",
    "commitOrRollback": "8",
    "transactionId": "t",
    "fromTransactionCheck": "false",
    "producerGroup": "P",
    "to": "n0",
    # SEND_MESSAGE and SEND_MESSAGE_V2's names
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "bornTimestamp": "1700000000000",
    "flag": "0",
    "properties": "TAGS\x01a\x02",
    "reconsumeTimes": "0",
    "unitMode": "false",
    "batch": "false",
    "a": "P",
    "b": WIRE_TOPIC,
    "c": "TBW102",
    "d": "4",
    "e": "0",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "TAGS\x01a\x02",
    "j": "0",
    "k": "false",
    "m": "false",
}
MQ: Final = {"brokerName": "b", "queueId": 0, "topic": WIRE_TOPIC}
HEARTBEAT: Final = {
    "clientID": "c1",
    "consumerDataSet": [
        {
            "groupName": GROUP,
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [
                {
                    "topic": WIRE_TOPIC,
                    "subString": "*",
                    "expressionType": "TAG",
                    "subVersion": 1,
                    "codeSet": [],
                    "tagsSet": [],
                }
            ],
            "unitMode": False,
        }
    ],
    "producerDataSet": [{"groupName": "P"}],
}
LOCK: Final = {"consumerGroup": GROUP, "clientId": "c1", "mqSet": [MQ]}
GROUP_CONFIG: Final = {"groupName": GROUP, "retryQueueNums": 1, "consumeEnable": True}
# The JSON body each request takes; other requests carry a message body or none.
JSON_BODIES: Final = {
    RequestCode.HEART_BEAT: json.dumps(HEARTBEAT).encode(),
    RequestCode.LOCK_BATCH_MQ: json.dumps(LOCK).encode(),
    RequestCode.UNLOCK_BATCH_MQ: json.dumps(LOCK).encode(),
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: json.dumps(GROUP_CONFIG).encode(),
}
OTHER_BODIES: Final = [
    b"",
    b"plain body",
    encode_message(Message(WIRE_TOPIC, b"x", tags="a"), born_timestamp=1, born_host=BORN_HOST),
]
HOSTILE_BODIES: Final = [
    b"[" * 5000,
    b'{"mqSet":' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'{"mqSet":[{"topic":"T","queueId":"x"}]}',
    b'{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T","subVersion":"x"}]}]}',
]


@st.composite
def bodies(draw: st.DrawFn, code: int) -> bytes | None:
    valid = JSON_BODIES.get(code)
    if valid is None:
        body = draw(st.sampled_from(OTHER_BODIES))
        return draw(st.one_of(st.none(), st.just(body), mutated(body)))
    return draw(
        st.one_of(
            st.just(valid),
            mutated(valid),
            json_with_a_part_replaced(valid),
            json_with_a_part_replaced(valid),
            st.sampled_from(HOSTILE_BODIES),
        )
    )


@st.composite
def requests(draw: st.DrawFn, codes: list[int]) -> RemotingCommand:
    """A request of one of ``codes``: every header field any request reads, valid, then
    some replaced by hostile text or left out; its body valid, mutated or hostile."""
    code = draw(st.sampled_from(codes))
    fields = dict(VALID_FIELDS)
    for name in draw(st.sets(st.sampled_from(sorted(VALID_FIELDS)), max_size=12)):
        if draw(st.booleans()):
            fields[name] = draw(HOSTILE_TEXT)
        else:
            del fields[name]
    return command(code, fields, draw(bodies(code)))


class FakeTransport(asyncio.Transport):
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


async def answer(handler: Callable[..., Any], conn: Connection, cmd: RemotingCommand) -> Any:
    result = handler(conn, cmd)
    if asyncio.iscoroutine(result):
        result = await result
    return result


# Requests that wait on another party by design (a consumer's channel, a Raft peer): a
# hostile header makes them wait the call's timeout, not parse longer.
WAITING: Final = {
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
}


async def test_no_request_stops_the_broker(wire: tuple[Broker, Connection]) -> None:
    b, client = wire
    clients = ClientRequests(b)
    handlers: dict[int, Callable[..., Any]] = {
        **SendRequests(b).handlers(),
        **PullRequests(b).handlers(),
        **clients.handlers(),
        **AdminRequests(b).handlers(),
    }
    codes = sorted(code for code in handlers if code not in WAITING)
    loop = asyncio.get_running_loop()
    conn = Connection({})
    conn.connection_made(FakeTransport())

    @given(requests(codes))
    @settings(
        max_examples=600,
        deadline=None,  # the bound is total()'s, on the broker's loop
        suppress_health_check=[HealthCheck.too_slow],  # the broker runs on the loop thread
    )
    def check(cmd: RemotingCommand) -> None:
        handler = handlers[cmd.code]
        ext = cmd.ext or {}
        if cmd.code == RequestCode.PULL_MESSAGE and "suspendTimeoutMillis" in ext:
            # A held pull waits up to long_polling_max_suspend_millis (15 s) by design.
            ext["suspendTimeoutMillis"] = "0"

        def call() -> Any:
            future = asyncio.run_coroutine_threadsafe(answer(handler, conn, cmd), loop)
            return future.result(timeout=10)

        got = total(call, (RocketqError, RemotingError), seconds=5.0, memory=1 << 30)
        assert got is None or isinstance(got, RemotingCommand | BaseException)
        if isinstance(got, RemotingCommand):  # a handler's own catch-all answered
            assert not (got.remark or "").startswith("server error"), got.remark

    await asyncio.to_thread(check)
    # Still serving: a normal send and pull of WireTopic.
    b.topics.update(TopicConfig(WIRE_TOPIC, 2, 2))
    sent = await client.invoke(
        RemotingCommand(
            RequestCode.SEND_MESSAGE_V2,
            ext={
                "a": "P",
                "b": WIRE_TOPIC,
                "c": "TBW102",
                "d": "4",
                "e": "1",
                "f": "0",
                "g": "1",
                "h": "0",
                "i": "TAGS\x01z\x02",
                "j": "0",
                "k": "false",
            },
            body=b"after",
        ),
        10,
    )
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    pulled = await client.invoke(
        RemotingCommand(
            RequestCode.PULL_MESSAGE,
            ext={
                "consumerGroup": "after",
                "topic": WIRE_TOPIC,
                "queueId": "1",
                "queueOffset": str(b.store.max_offset_in_queue(WIRE_TOPIC, 1) - 1),
                "maxMsgNums": "32",
                "sysFlag": str(PullSysFlag.FLAG_SUBSCRIPTION),
                "subscription": "z",
                "expressionType": "TAG",
                "subVersion": "1",
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
            },
        ),
        10,
    )
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    assert any(m.body == b"after" for m in decode_records(pulled.body or b""))


# -- the topic snapshot and change log ------------------------------------------------------

TOPIC_NAMES: Final = st.text(string.ascii_letters + string.digits + "_-%|", min_size=1, max_size=20)
TOPIC_CONFIGS: Final = st.builds(
    TopicConfig,
    TOPIC_NAMES,
    st.integers(1, 1024),
    st.integers(1, 1024),
    st.integers(0, 7),
    st.integers(0, 255),
    st.booleans(),
)
HOSTILE_VALUES: Final = st.sampled_from(
    [None, True, -1, 1 << 70, 1e999, float("nan"), "x", "", [], {}, [1], {"a": 1}, "T" * 300]
)


def _manager(root: Path) -> TopicConfigManager:
    return TopicConfigManager(root / "topics.json", auto_create=True, default_queue_nums=4)


def _check_loaded(m: TopicConfigManager) -> None:
    """A loaded table holds only topic configs a broker can serve."""
    for name, t in m.topics.items():
        assert isinstance(name, str) and name == t.topic_name
        assert is_valid_topic_name(name), name
        for value in (t.read_queue_nums, t.write_queue_nums, t.perm, t.topic_sys_flag):
            assert isinstance(value, int) and not isinstance(value, bool)
            assert 0 <= value < 1 << 31
        assert 0 <= t.perm <= 7 and isinstance(t.order, bool)
    assert isinstance(m.data_version, int)


def _load(root: Path) -> TopicConfigManager | BaseException:
    m = _manager(root)

    def load() -> TopicConfigManager:
        m.load()
        return m

    got = total(load, StoreCorruptError)
    if isinstance(got, TopicConfigManager):
        _check_loaded(got)
    return got


@given(st.data(), st.lists(TOPIC_CONFIGS, max_size=4), st.lists(TOPIC_CONFIGS, max_size=4))
@settings(max_examples=150, deadline=3000)
def test_damaged_topic_files_load_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    snapshot: list[TopicConfig],
    changes: list[TopicConfig],
) -> None:
    root = tmp_path_factory.mktemp("topics")
    m = _manager(root)
    m.load()
    for t in snapshot:
        m.update(t)
    m.persist()
    for t in changes:
        m.update(t)
    asyncio.run(m.close())
    expected = dict(m.topics)
    assert _manager_loaded(root).topics == expected  # valid files round-trip

    which = data.draw(st.sampled_from(["topics.json", "topics.log"]))
    path = root / which
    valid = path.read_bytes() if path.exists() else b""
    doc_field = data.draw(
        st.sampled_from(
            [
                "",
                "dataVersion",
                "put",
                "delete",
                "topic_name",
                "read_queue_nums",
                "perm",
                "order",
                "topicConfigTable",
            ]
        )
    )
    hostile = json.dumps(data.draw(HOSTILE_VALUES)) if doc_field else ""
    replaced = (
        valid.replace(f'"{doc_field}":'.encode(), f'"{doc_field}":{hostile},"_":'.encode(), 1)
        if doc_field
        else valid
    )
    path.write_bytes(data.draw(st.one_of(mutated(valid), st.just(replaced))))
    _load(root)


def _manager_loaded(root: Path) -> TopicConfigManager:
    m = _manager(root)
    m.load()
    return m


@pytest.mark.parametrize(
    "line",
    [
        b'{"dataVersion":1e999,"put":[]}',
        b'{"dataVersion":5,"put":[{"topic_name":"T","read_queue_nums":"x"}]}',
        b'{"dataVersion":5,"put":[{"topic_name":5}]}',
        b'{"dataVersion":5,"put":[{"topic_name":"T","perm":99}]}',
        b'{"dataVersion":5,"put":[{"topic_name":"T","order":"yes"}]}',
        b'{"dataVersion":5,"delete":"abc"}',
        b'{"dataVersion":5,"put":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
def test_a_bad_topic_change_is_logged_naming_its_line_and_skipped(
    tmp_path: Path, line: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    good = b'{"dataVersion":9,"put":[{"topic_name":"Good"}]}'
    (tmp_path / "topics.log").write_bytes(line + b"\n" + good + b"\n")
    m = _manager(tmp_path)
    with caplog.at_level("ERROR", logger="rocketq.broker.topic_config"):
        m.load()
    assert "topics.log" in caplog.text and "line 1" in caplog.text
    assert "Good" in m.topics and "T" not in m.topics
    _check_loaded(m)


# -- consumer offsets -------------------------------------------------------------------------

OFFSET_TABLES: Final = st.dictionaries(
    st.from_regex(r"[%|a-zA-Z0-9_-]{1,10}", fullmatch=True).map(lambda s: s + "@g"),
    st.dictionaries(st.integers(0, 64), st.integers(-1, 1 << 62), max_size=3),
    max_size=3,
)


@given(st.data(), OFFSET_TABLES)
@settings(max_examples=150, deadline=2000)
def test_damaged_consumer_offsets_load_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, table: dict[str, dict[int, int]]
) -> None:
    path = tmp_path_factory.mktemp("offsets") / "consumerOffset.json"
    m = ConsumerOffsetManager(path)
    m.table = table
    m.persist()
    again = ConsumerOffsetManager(path)
    again.load()
    assert again.table == table
    valid = path.read_bytes()
    hostile = json.dumps(data.draw(HOSTILE_VALUES)).encode()
    path.write_bytes(
        data.draw(
            st.one_of(
                mutated(valid),
                st.just(
                    valid.replace(b'"offsetTable": ', b'"offsetTable": ' + hostile + b', "_": ', 1)
                ),
                st.just(b'{"offsetTable": {"t@g": ' + hostile + b"}}"),
                st.just(b'{"offsetTable": {"t@g": {"0": ' + hostile + b"}}}"),
                st.just(b'{"offsetTable": {"t@g": {"x": 1}}}'),
            )
        )
    )
    loaded = ConsumerOffsetManager(path)
    got = total(loaded.load, StoreCorruptError)
    if not isinstance(got, StoreCorruptError):
        for key, queues in loaded.table.items():
            assert isinstance(key, str)
            assert all(type(q) is int and type(o) is int for q, o in queues.items())


@pytest.mark.parametrize("code", sorted(JSON_BODIES))
async def test_hostile_json_bodies_are_refused(wire: tuple[Broker, Connection], code: int) -> None:
    b, _ = wire
    handlers = {**ClientRequests(b).handlers(), **AdminRequests(b).handlers()}
    conn = Connection({})
    conn.connection_made(FakeTransport())
    valid = JSON_BODIES[code]
    hostile = [*HOSTILE_BODIES, *(t.encode() for t in HOSTILE_JSON_TEXTS)]
    for part in HOSTILE_JSON_TEXTS:  # each value of the valid body, in turn, made hostile
        text = valid.decode()
        for at in [i + 1 for i, ch in enumerate(text) if ch == ":"]:
            end = at
            while end < len(text) and text[end] not in ",}]":
                end += 1
            if text[at] not in "[{":
                hostile.append((text[:at] + part + text[end:]).encode())
    for body in hostile:
        cmd = command(code, dict(VALID_FIELDS), body)
        started = time.perf_counter()
        with contextlib.suppress(RocketqError, RemotingError):
            got = await answer(handlers[code], conn, cmd)
            assert not (got.remark or "").startswith("server error"), got.remark
        assert time.perf_counter() - started < 2.0, body[:60]
