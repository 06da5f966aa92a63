"""Answers the SDK cannot read come out of its public methods as rocketq errors, never as
``struct.error``, ``KeyError``, ``AttributeError`` or a bare ``ValueError`` from a decoder.

A real remoting server on port 0 plays the nameserver and the broker: routes and cluster
info point at itself, and every other request gets the answer hypothesis draws (any code,
header fields RocketMQ uses with text that may not be numbers, a body of random bytes or of
JSON with the field names the SDK reads holding values of any type). With
``nameserver_too`` the nameserver's answers are drawn as well. Each public call must return
or raise a :class:`~rocketq.errors.RocketqError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.common.exceptions import RocketqError
from rocketq.common.message import Message, MessageQueue
from rocketq.common.message_id import encode_offset_msg_id
from rocketq.common.record import decode_record, encode_host, encode_record
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import (
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
    cluster_info_body,
    route_body,
)
from rocketq.remoting.transport import Connection, RemotingServer
from rocketq.sdk.admin import Admin
from rocketq.sdk.producer import Producer

# Header fields and JSON fields the SDK's decoders read.
HEADER_KEYS = [
    "msgId", "queueId", "queueOffset", "nextBeginOffset", "minOffset", "maxOffset", "offset",
    "suggestWhichBrokerId", "indexLastUpdateTimestamp", "indexLastUpdatePhyoffset",
    "commitLogOffset", "transactionId", "version",
]  # fmt: skip
BODY_KEYS = [
    "offsetTable", "topicList", "groupList", "table", "connectionSet", "consumeTps",
    "brokerAddrTable", "clusterAddrTable", "subscriptionTable", "subscriptionSet",
    "consumerIdList", "lockOKMQSet", "mqTable", "statusTable", "properties", "queueDatas",
    "brokerDatas", "brokerAddrs", "brokerOffset", "consumerOffset", "lastTimestamp",
    "minOffset", "maxOffset", "topic", "brokerName", "queueId", "clientId", "language",
    "version", "subString", "order", "group", "consumeResult", "spentTimeMills", "remark",
    "username", "password", "userType", "userStatus", "subject", "policies", "policyType",
    "entries", "resource", "actions", "sourceIps", "decision",
]  # fmt: skip

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(BODY_KEYS) | st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
json_bodies = st.dictionaries(st.sampled_from(BODY_KEYS), json_values, max_size=5).map(
    lambda doc: json.dumps(doc).encode()
)
bodies = (
    st.none()
    | st.binary(max_size=200)
    | json_bodies
    | json_values.map(lambda v: json.dumps(v).encode())
)
header_values = st.text(max_size=24) | st.integers().map(str) | st.just("")
# Mostly SUCCESS: the decoders read the answers a broker says are good.
codes = st.sampled_from([ResponseCode.SUCCESS] * 6 + [
    ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED, ResponseCode.FLUSH_DISK_TIMEOUT,
    ResponseCode.QUERY_NOT_FOUND,
]) | st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)  # fmt: skip


@dataclass
class Answer:
    code: int
    ext: dict[str, str]
    body: bytes | None
    nameserver_too: bool


answers = st.builds(
    Answer,
    codes,
    st.dictionaries(st.sampled_from(HEADER_KEYS), header_values, max_size=6),
    bodies,
    st.booleans(),
)


class GarbageServer:
    """The nameserver and the broker in one server; answers what ``answer`` says."""

    def __init__(self) -> None:
        self.addr = ""
        self.answer = Answer(ResponseCode.SUCCESS, {}, None, False)
        codes = [*RequestCode.NAMES, *RocketqRequestCode.NAMES]
        self.server = RemotingServer(dict.fromkeys(codes, self.handle))

    def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        a = self.answer
        if not a.nameserver_too and cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            route = TopicRouteData(
                [QueueData("b", 2, 2, 6)], [BrokerData("c", "b", {0: self.addr})]
            )
            return cmd.response(ResponseCode.SUCCESS, body=route_body(route, standard=True))
        if not a.nameserver_too and cmd.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            info = ClusterInfo({"b": BrokerData("c", "b", {0: self.addr})}, {"c": ["b"]})
            return cmd.response(ResponseCode.SUCCESS, body=cluster_info_body(info))
        return cmd.response(a.code, ext=dict(a.ext), body=a.body)


@dataclass
class Rig:
    loop: asyncio.AbstractEventLoop
    garbage: GarbageServer
    admin: Admin
    producer: Producer

    def run(self, make: Callable[[], Awaitable[Any]]) -> Any:
        async def call() -> Any:
            return await make()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout=30)


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    garbage = GarbageServer()

    async def start() -> Rig:
        port = await garbage.server.start("127.0.0.1", 0)
        garbage.addr = f"127.0.0.1:{port}"
        admin = Admin(garbage.addr, timeout=1.0)
        await admin.start()
        producer = Producer("pg", garbage.addr, send_timeout=1.0, retry_times_when_send_failed=0)
        await producer.start()
        return Rig(loop, garbage, admin, producer)

    rig = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    try:
        yield rig
    finally:

        async def stop() -> None:
            await rig.producer.shutdown()
            await rig.admin.shutdown()
            await garbage.server.stop()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def calls(rig: Rig) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every public call that reads a broker's or a nameserver's answer."""
    admin, addr = rig.admin, rig.garbage.addr
    host = encode_host(addr)
    msg_id = encode_offset_msg_id(host, 0)
    record = encode_record(
        topic=b"T", body=b"x", properties=b"", born_timestamp=0, born_host=host, store_host=host
    )
    stored = decode_record(record)
    return {
        "update_topic": lambda: admin.update_topic("T"),
        "delete_topic": lambda: admin.delete_topic("T"),
        "topic_list": admin.topic_list,
        "topic_route": lambda: admin.topic_route("T"),
        "topic_status": lambda: admin.topic_status("T"),
        "update_sub_group": lambda: admin.update_sub_group("G"),
        "group_list": admin.group_list,
        "group_config": lambda: admin.group_config("G"),
        "consume_tps": lambda: admin.consume_tps("G"),
        "topic_consumers": lambda: admin.topic_consumers("T"),
        "broker_addrs": admin.broker_addrs,
        "consumer_progress": lambda: admin.consumer_progress("G"),
        "consumer_connections": lambda: admin.consumer_connections("G"),
        "consumer_running_info": lambda: admin.consumer_running_info("G", "cid"),
        "consume_message_directly": lambda: admin.consume_message_directly("G", "c", msg_id),
        "reset_offset_by_time": lambda: admin.reset_offset_by_time("G", "T", 0),
        "query_msg_by_key": lambda: admin.query_msg_by_key("T", "k"),
        "query_msg_by_id": lambda: admin.query_msg_by_id(msg_id),
        "query_msg_by_offset": lambda: admin.query_msg_by_offset(addr, 0),
        "resend_message": lambda: admin.resend_message(msg_id, "G"),
        "messages_by_time": lambda: admin.messages_by_time("T"),
        "dlq_messages": lambda: admin.dlq_messages("G"),
        "trace": lambda: admin.trace(msg_id),
        "message_track": lambda: admin.message_track(stored),
        "broker_config": lambda: admin.broker_config(addr),
        "transfer_leader": lambda: admin.transfer_leader(addr, "n1"),
        "cluster_list": admin.cluster_list,
        "create_user": lambda: admin.create_user("u", "p"),
        "update_user": lambda: admin.update_user("u", user_status="disable"),
        "delete_user": lambda: admin.delete_user("u"),
        "get_user": lambda: admin.get_user("u"),
        "list_users": admin.list_users,
        "create_acl": lambda: admin.create_acl("User:u", "Topic:T", "Pub"),
        "update_acl": lambda: admin.update_acl("User:u", ["Topic:T", "Group:G"], ["Sub"]),
        "delete_acl": lambda: admin.delete_acl("User:u", "Topic:T"),
        "get_acl": lambda: admin.get_acl("User:u"),
        "list_acls": admin.list_acls,
        "send": lambda: rig.producer.send(Message("T", b"x")),
        "send_batch": lambda: rig.producer.send_batch([Message("T", b"x"), Message("T", b"y")]),
        "send_to_queue": lambda: rig.producer.send(
            Message("T", b"x"), queue=MessageQueue("T", "b", 1)
        ),
    }


CALL_NAMES = [
    "broker_addrs", "broker_config", "cluster_list", "consume_message_directly",
    "consume_tps", "consumer_connections", "consumer_progress", "consumer_running_info",
    "create_acl", "create_user", "delete_acl", "delete_topic", "delete_user", "dlq_messages",
    "get_acl", "get_user", "group_config", "group_list", "list_acls", "list_users",
    "message_track", "messages_by_time", "query_msg_by_id", "query_msg_by_key",
    "query_msg_by_offset", "resend_message", "reset_offset_by_time", "send", "send_batch",
    "send_to_queue", "topic_consumers", "topic_list", "topic_route", "topic_status", "trace",
    "transfer_leader", "update_acl", "update_sub_group", "update_topic", "update_user",
]  # fmt: skip


def test_every_admin_call_that_reads_an_answer_is_covered(rig: Rig) -> None:
    assert sorted(calls(rig)) == CALL_NAMES
    public = {
        name
        for name in dir(Admin)
        if not name.startswith("_") and asyncio.iscoroutinefunction(getattr(Admin, name))
    }
    assert public - {"start", "shutdown", "close"} <= set(CALL_NAMES), "a new Admin call"


@pytest.mark.parametrize("name", CALL_NAMES)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(answer=answers)
def test_answers_that_do_not_decode_raise_rocketq_errors(
    rig: Rig, name: str, answer: Answer
) -> None:
    rig.garbage.answer = answer
    rig.admin.client.routes.clear()  # the nameserver is asked again
    rig.producer.client.routes.clear()
    with contextlib.suppress(RocketqError):
        rig.run(calls(rig)[name])
