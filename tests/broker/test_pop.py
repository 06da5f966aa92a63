"""Pop consumption over the remoting protocol (POP_MESSAGE, ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME), against a broker in this process: receipts, acknowledged
messages never coming back, the rest coming back through the pop retry topic after their
invisible time, the dead-letter queue after the group's max attempts, pop state surviving a
restart, pull consumers of another group beside a pop group, long polling and bad input."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.broker.metrics import BrokerCounters
from rocketq.broker.pop import (
    PROPERTY_POP_CK,
    ExtraInfo,
    PopService,
    pop_retry_topic,
    with_pop_receipt,
)
from rocketq.broker.subscription_group import SubscriptionGroupConfig
from rocketq.common.config import StoreConfig
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.message import Message, MessageExt, TopicConfig
from rocketq.common.pop_body import BatchAck, PopBodyError, decode_batch_acks, encode_batch_acks
from rocketq.common.record import decode_records, encode_message
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, connect
from tests.integration.waiting import wait_until

TOPIC = "PopTopic"
GROUP = "pop-cg"

Start = Callable[[], Awaitable[tuple[Broker, Connection]]]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Start]:
    """Start (and start again, on the same directories) a broker with a nameserver;
    stops whatever is running at the end."""
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    running: list[tuple[Broker, Connection]] = []

    async def start() -> tuple[Broker, Connection]:
        for b, conn in running:
            conn.close()
            await b.stop()
        running.clear()
        b = Broker(
            BrokerConfig(
                listen_port=0,
                ha_listen_port=0,
                metrics_port=0,
                namesrv_addr=f"127.0.0.1:{ns.port}",
                revive_interval=100,
            ),
            StoreConfig(
                store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
            ),
        )
        await b.start()
        conn = await connect(f"127.0.0.1:{b.port}", {})
        running.append((b, conn))
        return b, conn

    try:
        yield start
    finally:
        for b, conn in running:
            conn.close()
            await b.stop()
        await ns.stop()


async def send(conn: Connection, bodies: list[bytes], queue: int = 0, tags: str = "") -> None:
    for body in bodies:
        header = {
            "a": "pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue), "f": "0",
            "g": "1700000000000", "h": "0", "i": f"TAGS\x01{tags}\x02" if tags else "",
            "j": "0", "k": "false", "m": "false",
        }  # fmt: skip
        answer = await conn.invoke(RemotingCommand(RequestCode.SEND_MESSAGE_V2, header, body), 5.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark


async def pop(
    conn: Connection,
    *,
    group: str = GROUP,
    topic: str = TOPIC,
    n: int = 32,
    invisible: int = 60_000,
    poll: int = 0,
    queue: int = -1,
    exp: str = "*",
    order: bool = False,
) -> tuple[RemotingCommand, list[MessageExt]]:
    header = {
        "consumerGroup": group, "topic": topic, "queueId": str(queue), "maxMsgNums": str(n),
        "invisibleTime": str(invisible), "pollTime": str(poll), "bornTime": "0",
        "initMode": "0", "expType": "TAG", "exp": exp, "order": str(order).lower(),
    }  # fmt: skip
    answer = await conn.invoke(
        RemotingCommand(RequestCode.POP_MESSAGE, header, serialize_type=SerializeType.JSON),
        5.0 + poll / 1000,
    )
    return answer, decode_records(bytes(answer.body or b""))


def receipt(msg: MessageExt) -> ExtraInfo:
    return ExtraInfo.parse(msg.properties[PROPERTY_POP_CK])


async def ack(conn: Connection, msg: MessageExt, *, group: str = GROUP) -> RemotingCommand:
    info = receipt(msg)
    header = {
        "consumerGroup": group, "topic": TOPIC, "queueId": str(info.queue_id),
        "extraInfo": msg.properties[PROPERTY_POP_CK], "offset": str(info.queue_offset),
    }  # fmt: skip
    return await conn.invoke(RemotingCommand(RequestCode.ACK_MESSAGE, header), 5.0)


async def pop_all(conn: Connection, want: int, **kw: Any) -> list[MessageExt]:
    """Pop until ``want`` messages came (the revive puts them back on its own turns)."""
    got: list[MessageExt] = []

    async def enough() -> bool:
        _, msgs = await pop(conn, **kw)
        got.extend(msgs)
        return len(got) >= want

    await wait_until(enough, f"{want} popped messages", timeout=15.0)
    return got


async def revive_turns(b: Broker, turns: int) -> None:
    """Wait until the broker's revive has run ``turns`` more times."""
    target = b.pop.turns + turns
    await wait_until(lambda: b.pop.turns >= target, f"{turns} revive turns")


async def setup_topic(b: Broker, queues: int = 2) -> None:
    await wait_until(lambda: all(b.registration.registered.values()), "registration")
    b.topics.update(TopicConfig(TOPIC, queues, queues))


async def test_acknowledged_pops_never_return_and_the_rest_do_after_their_invisible_time(
    cluster: Start,
) -> None:
    b, conn = await cluster()
    b.metrics = BrokerCounters()  # counted as with a metrics port
    await setup_topic(b)
    await send(conn, [b"m0", b"m1"], queue=0)
    await send(conn, [b"m2"], queue=1)
    answer, msgs = await pop(conn, invisible=1_500)
    assert answer.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in msgs) == [b"m0", b"m1", b"m2"]
    ext = answer.ext or {}
    assert ext["invisibleTime"] == "1500" and int(ext["popTime"]) > 0
    assert ext["restNum"] == "0" and ext["orderCountInfo"] == ""
    assert sorted(ext["msgOffsetInfo"].split(";")) == ["0 0 0,1", "0 1 0"]
    for m in msgs:
        info = receipt(m)
        assert (info.pop_time, info.invisible_time) == (int(ext["popTime"]), 1500)
        assert info.queue_offset == m.queue_offset and info.queue_id == m.queue_id
        assert info.broker_name == b.config.broker_name and not info.retry
        assert m.topic == TOPIC and m.reconsume_times == 0
    # Hidden now: nothing to pop, for this group.
    nothing, none = await pop(conn)
    assert nothing.code == ResponseCode.PULL_NOT_FOUND and none == []
    by_body = {m.body: m for m in msgs}
    assert (await ack(conn, by_body[b"m0"])).code == ResponseCode.SUCCESS
    assert (await ack(conn, by_body[b"m2"])).code == ResponseCode.SUCCESS
    # m1 comes back, from the pop retry topic, under the topic popped, one attempt more.
    again = await pop_all(conn, 1, invisible=60_000)
    assert [m.body for m in again] == [b"m1"]
    back = again[0]
    assert back.topic == TOPIC and back.reconsume_times == 1
    assert receipt(back).retry and back.properties["RETRY_TOPIC"] == TOPIC
    assert back.properties["1ST_POP_TIME"] == str(receipt(by_body[b"m1"]).pop_time)
    assert (await ack(conn, back)).code == ResponseCode.SUCCESS
    assert b.pop.revived == 1
    assert b.metrics is not None
    counted = {(p, request, code) for p, request, code, _ in b.metrics.rpc.rows}
    assert {
        ("remoting", "pop_message", "success"),
        ("remoting", "pop_message", "pull_not_found"),
        ("remoting", "ack_message", "success"),
    } <= counted
    await revive_turns(b, 3)  # nothing else comes back
    assert (await pop(conn))[1] == [] and b.pop.revived == 1


async def test_changing_the_invisible_time_gives_a_new_receipt(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"slow"])
    _, [msg] = await pop(conn, invisible=60_000)
    old = msg.properties[PROPERTY_POP_CK]
    info = receipt(msg)
    header = {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(info.queue_id),
        "extraInfo": old, "offset": str(info.queue_offset), "invisibleTime": "300",
    }  # fmt: skip
    changed = await conn.invoke(
        RemotingCommand(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header), 5.0
    )
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    ext = changed.ext or {}
    assert ext["invisibleTime"] == "300" and int(ext["popTime"]) >= info.pop_time
    # Due in 0.3 s instead of a minute: it comes back.
    [back] = await pop_all(conn, 1)
    assert back.body == b"slow" and back.reconsume_times == 1


async def test_after_the_groups_max_attempts_a_message_goes_to_the_dlq(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    b.groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=1))
    await send(conn, [b"poison"])
    first = await pop_all(conn, 1, invisible=200)
    second = await pop_all(conn, 1, invisible=200)
    assert [m.reconsume_times for m in first + second] == [0, 1]
    dlq = "%DLQ%" + GROUP
    await wait_until(lambda: b.store.max_offset_in_queue(dlq, 0) == 1, "the dead letter")
    [dead] = decode_records(b.store.get_messages(dlq, 0, 0).to_bytes())
    assert dead.body == b"poison" and dead.reconsume_times == 2
    assert b.pop.dead_lettered == 1
    await revive_turns(b, 3)
    assert (await pop(conn))[1] == []


async def test_pop_state_survives_a_restart(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"acked", b"pending"])
    _, msgs = await pop(conn, invisible=2_000)
    by_body = {m.body: m for m in msgs}
    assert (await ack(conn, by_body[b"acked"])).code == ResponseCode.SUCCESS
    b, conn = await cluster()  # stopped and started again on the same store
    again = await pop_all(conn, 1, invisible=60_000)
    assert [m.body for m in again] == [b"pending"]
    await revive_turns(b, 3)
    assert (await pop(conn))[1] == []
    assert b.pop.revived == 1


async def test_a_pull_group_and_a_pop_group_share_a_topic(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"a", b"b", b"c"])
    _, popped = await pop(conn, n=2)
    assert [m.body for m in popped] == [b"a", b"b"]
    pull = {
        "consumerGroup": "pull-cg", "topic": TOPIC, "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "-1", "suspendTimeoutMillis": "0",
    }  # fmt: skip
    answer = await conn.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, pull), 5.0)
    assert [m.body for m in decode_records(bytes(answer.body or b""))] == [b"a", b"b", b"c"]
    _, rest = await pop(conn)
    assert [m.body for m in rest] == [b"c"]
    assert b.offsets.query(GROUP, TOPIC, 0) == 3


async def test_a_pop_with_nothing_waits_for_a_message(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=2)
    waiting = asyncio.ensure_future(pop(conn, poll=5_000))
    # Held on both queues and on the queue the group's retry topic will have (the first
    # revive makes it; a message it puts there ends the wait too).
    await wait_until(lambda: b.holds.held_count == 3, "the pop held on its three queues")
    assert not waiting.done()
    await send(conn, [b"late"], queue=1)
    answer, msgs = await asyncio.wait_for(waiting, 5.0)
    assert answer.code == ResponseCode.SUCCESS and [m.body for m in msgs] == [b"late"]
    quiet, none = await pop(conn, poll=300)
    assert quiet.code == ResponseCode.PULL_NOT_FOUND and none == []


async def test_tags_filter_what_a_pop_takes(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"x"], tags="TagA")
    await send(conn, [b"y"], tags="TagB")
    _, msgs = await pop(conn, exp="TagB")
    assert [m.body for m in msgs] == [b"y"]
    assert b.offsets.query(GROUP, TOPIC, 0) == 2  # the skipped one is passed too


@pytest.mark.parametrize(
    ("change", "code", "says"),
    [
        ({"topic": "NoSuchTopic"}, ResponseCode.TOPIC_NOT_EXIST, "does not exist"),
        ({"maxMsgNums": "33"}, ResponseCode.MESSAGE_ILLEGAL, "pop 1 to 32"),
        ({"invisibleTime": "0"}, ResponseCode.MESSAGE_ILLEGAL, "invisibleTime"),
        ({"invisibleTime": "soon"}, ResponseCode.MESSAGE_ILLEGAL, "not a number"),
        ({"queueId": "9"}, ResponseCode.SYSTEM_ERROR, "queue id 9 is illegal"),
    ],
)
async def test_bad_pops_are_refused_clearly(
    cluster: Start, change: dict[str, str], code: int, says: str
) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    header = {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "4",
        "invisibleTime": "1000", "pollTime": "0", "bornTime": "0", "initMode": "0",
        **change,
    }  # fmt: skip
    answer = await conn.invoke(RemotingCommand(RequestCode.POP_MESSAGE, header), 5.0)
    assert answer.code == code and says in (answer.remark or ""), answer.remark


@pytest.mark.parametrize(
    ("extra", "offset", "code", "says"),
    [
        ("garbage", "0", ResponseCode.MESSAGE_ILLEGAL, "not a pop receipt"),
        ("0 1 2 3 x b 0 0", "0", ResponseCode.MESSAGE_ILLEGAL, "retry flag"),
        ("0 1 2 99 0 b 0 0", "0", ResponseCode.MESSAGE_ILLEGAL, "revive queue 99"),
        ("0 1 a 3 0 b 0 0", "0", ResponseCode.MESSAGE_ILLEGAL, "not a number"),
        ("0 1 2 3 0 b 0 0", "5", ResponseCode.NO_MESSAGE, "no message at offset 5"),
    ],
)
async def test_bad_acks_are_refused_and_change_nothing(
    cluster: Start, extra: str, offset: str, code: int, says: str
) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"only"])
    await pop(conn)  # the group exists now
    before = b.store.max_phy_offset
    header = {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "extraInfo": extra,
        "offset": offset,
    }  # fmt: skip
    answer = await conn.invoke(RemotingCommand(RequestCode.ACK_MESSAGE, header), 5.0)
    assert answer.code == code and says in (answer.remark or ""), answer.remark
    assert b.store.max_phy_offset == before


def test_a_receipt_round_trips_and_is_added_to_a_stored_record() -> None:
    info = ExtraInfo(5, 1700000000123, 30000, 3, True, "broker-a", 2, 7)
    assert info.text() == "5 1700000000123 30000 3 1 broker-a 2 7"
    assert ExtraInfo.parse(info.text()) == info
    record = encode_message(
        Message(pop_retry_topic(TOPIC, GROUP), b"body", properties={"k": "v"}),
        born_timestamp=1,
        born_host=b"\x7f\0\0\x01\0\0\x27\x10",
    )
    [out] = decode_records(with_pop_receipt(record, info.text(), TOPIC.encode()))
    assert out.topic == TOPIC and out.body == b"body"
    assert out.properties["k"] == "v" and out.properties[PROPERTY_POP_CK] == info.text()


@given(st.text(max_size=120))
def test_any_receipt_text_parses_or_is_refused_clearly(text: str) -> None:
    try:
        info = ExtraInfo.parse(text)
    except MessageIllegalError:
        return
    assert ExtraInfo.parse(info.text()) == info


@given(st.binary(max_size=200), st.sampled_from(["ck", "ack", "other", ""]))
def test_any_revive_record_is_taken_or_skipped(body: bytes, tag: str) -> None:
    service = PopService.__new__(PopService)
    pending: dict[Any, Any] = {}
    service._take(pending, tag, body, 0)  # never raises
    assert all(isinstance(ck.diffs, list) for ck in pending.values())


async def test_clients_cannot_write_the_revive_log(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    header = {
        "a": "pg", "b": "rmq_sys_REVIVE_LOG_DefaultCluster", "c": "TBW102", "d": "4",
        "e": "0", "f": "0", "g": "1", "h": "0", "i": "TAGS\x01ack\x02", "j": "0",
        "k": "false", "m": "false",
    }  # fmt: skip
    answer = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, header, b'{"ao":0}'), 5.0
    )
    assert answer.code == ResponseCode.NO_PERMISSION and "revive log" in (answer.remark or "")


async def test_an_orderly_pop_gives_a_queues_next_message_once_the_last_is_acked(
    cluster: Start,
) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"first", b"second", b"third"])
    answer, [one] = await pop(conn, n=1, order=True, invisible=60_000)
    assert one.body == b"first" and receipt(one).revive_qid == 999
    assert (answer.ext or {})["orderCountInfo"] == "0 qo0%0 0"
    # The queue is locked for the group while "first" is out.
    locked, none = await pop(conn, n=1, order=True)
    assert locked.code == ResponseCode.PULL_NOT_FOUND and none == []
    assert (locked.ext or {})["restNum"] == "3"
    assert (await ack(conn, one)).code == ResponseCode.SUCCESS
    assert b.offsets.query(GROUP, TOPIC, 0) == 1
    _, [two] = await pop(conn, n=1, order=True, invisible=300)
    assert two.body == b"second"
    # Not acknowledged: once its invisible time is over it is given again, before "third".
    again: list[tuple[RemotingCommand, list[MessageExt]]] = []

    async def given_again() -> bool:
        again.append(await pop(conn, n=2, order=True, invisible=60_000))
        return bool(again[-1][1])

    await wait_until(given_again, "the unacknowledged message given again")
    answer, msgs = again[-1]
    assert [m.body for m in msgs] == [b"second", b"third"]
    assert (answer.ext or {})["orderCountInfo"] == "0 qo0%1 1;0 qo0%2 0"
    # Acknowledging the second one first moves nothing; then both move the offset on.
    assert (await ack(conn, msgs[1])).code == ResponseCode.SUCCESS
    assert b.offsets.query(GROUP, TOPIC, 0) == 1
    assert (await ack(conn, msgs[0])).code == ResponseCode.SUCCESS
    assert b.offsets.query(GROUP, TOPIC, 0) == 3
    assert (await pop(conn, order=True))[1] == []
    assert b.topics.get(pop_retry_topic(TOPIC, GROUP)) is None  # no retry topic in order


async def test_an_orderly_pops_invisible_time_can_be_extended(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"only"])
    _, [msg] = await pop(conn, n=1, order=True, invisible=300)
    info = receipt(msg)
    header = {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0",
        "extraInfo": msg.properties[PROPERTY_POP_CK], "offset": str(info.queue_offset),
        "invisibleTime": "60000",
    }  # fmt: skip
    changed = await conn.invoke(
        RemotingCommand(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header), 5.0
    )
    assert changed.code == ResponseCode.SUCCESS and (changed.ext or {})["reviveQid"] == "999"
    await revive_turns(b, 5)  # 0.5 s: past the first 300 ms
    assert (await pop(conn, order=True))[1] == []


async def batch_ack(conn: Connection, acks: list[BatchAck]) -> RemotingCommand:
    body = encode_batch_acks("broker-a", acks)
    return await conn.invoke(RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, {}, body), 5.0)


def batch_of(msgs: list[MessageExt], *, group: str = GROUP) -> BatchAck:
    """One BatchAck for messages of one pop of one queue, as a RocketMQ 5 client builds it."""
    info = receipt(msgs[0])
    bits = tuple(receipt(m).queue_offset - info.ck_offset for m in msgs)
    return BatchAck(
        group, TOPIC, info.retry, info.ck_offset, info.queue_id, info.revive_qid,
        info.pop_time, info.invisible_time, bits,
    )  # fmt: skip


async def test_a_batch_ack_acknowledges_its_offsets_and_no_others(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"a", b"b", b"c"])
    _, msgs = await pop(conn, invisible=1_000)
    assert [m.body for m in msgs] == [b"a", b"b", b"c"]
    answer = await batch_ack(conn, [batch_of([msgs[0], msgs[2]])])
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    [back] = await pop_all(conn, 1, invisible=60_000)
    assert back.body == b"b" and back.reconsume_times == 1
    await revive_turns(b, 3)
    assert (await pop(conn))[1] == [] and b.pop.revived == 1


async def test_an_orderly_batch_ack_moves_the_offset(cluster: Start) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"a", b"b"])
    _, msgs = await pop(conn, order=True)
    assert (await batch_ack(conn, [batch_of(msgs)])).code == ResponseCode.SUCCESS
    assert b.offsets.query(GROUP, TOPIC, 0) == 2


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"nope", "not JSON"),
        (b'{"acks": 3}', "no list 'acks'"),
        (b'{"acks": [{"c": "pop-cg"}]}', "no 'topic'"),
        (
            b'{"acks": [{"c": "pop-cg", "t": "PopTopic", "so": 0, "q": 0, "rq": 0, "pt": 1,'
            b' "it": 1, "b": "!!"}]}',
            "not base64",
        ),
        (
            b'{"acks": [{"c": "pop-cg", "t": "PopTopic", "so": 0, "q": 0, "rq": 77, "pt": 1,'
            b' "it": 1, "b": "AQ=="}]}',
            "revive queue 77",
        ),
    ],
)
async def test_bad_batch_acks_are_refused_and_change_nothing(
    cluster: Start, body: bytes, says: str
) -> None:
    b, conn = await cluster()
    await setup_topic(b, queues=1)
    await send(conn, [b"only"])
    await pop(conn)
    before = b.store.max_phy_offset
    answer = await conn.invoke(RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, {}, body), 5.0)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL and says in (answer.remark or "")
    assert b.store.max_phy_offset == before


@given(st.binary(max_size=300))
def test_any_batch_ack_body_decodes_or_is_refused_clearly(body: bytes) -> None:
    try:
        acks = decode_batch_acks(body)
    except PopBodyError:
        return
    assert all(isinstance(a, BatchAck) for a in acks)


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda c: (
            st.lists(c)
            | st.dictionaries(
                st.sampled_from(["acks", "c", "t", "so", "q", "rq", "pt", "it", "b", "r"]), c
            )
        ),
        max_leaves=20,
    )
)
def test_any_json_batch_ack_body_decodes_or_is_refused_clearly(doc: object) -> None:
    with contextlib.suppress(PopBodyError):
        decode_batch_acks(json.dumps(doc).encode())


@given(
    st.lists(
        st.builds(
            BatchAck,
            st.text(min_size=1, max_size=8),
            st.text(min_size=1, max_size=8),
            st.booleans(),
            st.integers(0, 1 << 40),
            st.integers(0, 64),
            st.integers(0, 999),
            st.integers(0, 1 << 42),
            st.integers(0, 1 << 30),
            st.lists(st.integers(0, 300), unique=True).map(lambda b: tuple(sorted(b))),
        ),
        max_size=4,
    )
)
def test_batch_acks_round_trip(acks: list[BatchAck]) -> None:
    assert decode_batch_acks(encode_batch_acks("b", acks)) == acks
