"""Attacks on the apache.rocketmq.v2 endpoint of a secured cluster (``cluster up --auth
--tls --grpc``) by a user with an account: alice may Pub, Sub and Get on ``Topic:orders``
and ``Group:orders-cg`` only; bob may Sub on ``Topic:secret`` and ``Group:secret-cg``. Each
attack is refused and leaves the broker as it was:

- a route query naming a topic that splits the registration encoding, a topic alice may
  not create, or a reserved one creates nothing;
- a Telemetry stream declaring a topic alice may not publish to is refused, and gets no
  transaction check (with the half message) of that topic;
- a forged receipt handle (naming any CommitLog offset) copies nothing into alice's DLQ,
  and acknowledges or hides nothing; a real handle, once spent, is refused too;
- alice cannot join bob's group, take bob's client id, or end bob's client;
- a signature over a time outside the window (or none) is refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Final

import grpc
import pytest

from rocketq import Message, Producer
from rocketq.auth.credentials import Credentials
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as sv
from rocketq.broker.grpc_v2 import service_pb2_grpc
from rocketq.broker.grpc_v2.convert import signature
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.remoting.codes import ResponseCode
from rocketq.sdk import client_wire as cw
from rocketq.sdk.admin import Admin
from rocketq.sdk.producer import SendStatus
from rocketq.sdk.wire import send_request
from tests.integration.security_helpers import (
    ask,
    ask_super,
    broker_topics,
    running,
    secure_spec,
    super_credentials,
)
from tests.integration.test_security_attacks import consumer_ids
from tests.integration.waiting import wait_until

ALICE: Final = Credentials("alice", "alice-secret-1")
BOB: Final = Credentials("bob", "bob-secret-1")
ORDERS, ORDERS_CG = "orders", "orders-cg"
SECRET, SECRET_CG = "secret", "secret-cg"
TIMEOUT: Final = 10.0


class Target:
    """The module's cluster and what it holds for the attacks to aim at."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.broker = cluster.brokers[0]
        self.secret_offsets: list[int] = []  # CommitLog offsets of SECRET's messages
        certs = cluster.certs
        assert certs is not None
        self.ca = certs.ca_file.read_bytes()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.broker.grpc_port}"

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.secure_channel(
            self.endpoint, grpc.ssl_channel_credentials(root_certificates=self.ca)
        )


async def _prepare(cluster: LocalCluster, target: Target) -> None:
    settings = cluster.client_settings()
    async with Admin(cluster.namesrv_addr, **settings) as admin:
        for topic in (ORDERS, SECRET, "payments"):
            await admin.update_topic(topic, read_queue_nums=2, write_queue_nums=2)
        for group in (ORDERS_CG, SECRET_CG):
            await admin.update_sub_group(group)
        await admin.create_user(ALICE.access_key, ALICE.secret_key)
        await admin.create_user(BOB.access_key, BOB.secret_key)
        await admin.create_acl(
            f"User:{ALICE.access_key}",
            [f"Topic:{ORDERS}", f"Group:{ORDERS_CG}"],
            ["Pub", "Sub", "Get"],
        )
        await admin.create_acl(
            f"User:{BOB.access_key}", [f"Topic:{SECRET}", f"Group:{SECRET_CG}"], ["Sub"]
        )
    async with Producer("secret-writers", cluster.namesrv_addr, **settings) as producer:
        for i in range(4):
            result = await producer.send(Message(SECRET, b"secret-%d" % i))
            assert result.status is SendStatus.SEND_OK
            target.secret_offsets.append(decode_offset_msg_id(result.offset_msg_id)[1])


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # Transaction checks soon and often, for the Telemetry attack.
    spec = secure_spec(
        tmp_path_factory.mktemp("v2-attacks"),
        tls=True,
        grpc=True,
        broker_settings={"transaction_timeout": "1000", "transaction_check_interval": "1000"},
    )
    with running(spec) as cluster:
        t = Target(cluster)
        asyncio.run(_prepare(cluster, t))
        yield t


def signed(
    who: Credentials | None, client_id: str = "attacker", date_time: str | None = None
) -> list[tuple[str, str]]:
    """The headers of a RocketMQ 5 client signing as ``who`` at ``date_time`` (now)."""
    now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) if date_time is None else date_time
    headers = [("x-mq-date-time", now), ("x-mq-client-id", client_id), ("x-mq-language", "PYTHON")]
    if who is not None:
        sig = signature(who.secret_key, now)
        headers.append(
            (
                "authorization",
                f"MQv2-HMAC-SHA1 Credential={who.access_key}, "
                f"SignedHeaders=x-mq-date-time, Signature={sig}",
            )
        )
    return headers


def res(name: str) -> d.Resource:
    return d.Resource(name=name)


@pytest.fixture
async def stub(target: Target) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    async with target.channel() as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


def v2_message(topic: str, body: bytes, kind: int = d.MessageType.NORMAL) -> d.Message:
    msg = d.Message(topic=res(topic), body=body)
    msg.system_properties.message_id = f"01{time.monotonic_ns():030X}"[:32]
    msg.system_properties.message_type = kind  # type: ignore[assignment]
    msg.system_properties.born_timestamp.GetCurrentTime()
    return msg


async def receive(
    stub: service_pb2_grpc.MessagingServiceStub, who: Credentials, topic: str, group: str
) -> list[d.Message]:
    """One ReceiveMessage (pop) of ``topic`` for ``group`` as ``who``."""
    request = sv.ReceiveMessageRequest(
        group=res(group),
        message_queue=d.MessageQueue(topic=res(topic), id=-1),
        filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
        batch_size=16,
        auto_renew=False,
    )
    request.invisible_duration.FromSeconds(60)
    request.long_polling_timeout.FromSeconds(2)
    got: list[d.Message] = []
    async for answer in stub.ReceiveMessage(request, metadata=signed(who), timeout=TIMEOUT):
        if answer.HasField("message"):
            got.append(answer.message)
    return got


# -- 1: route queries create nothing they may not --------------------------------------------


async def test_route_queries_create_no_topic_the_user_may_not(
    target: Target, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    cluster = target.cluster
    before = await broker_topics(cluster, target.broker)

    async def route(name: str, who: Credentials) -> d.Status:
        answer = await stub.QueryRoute(
            sv.QueryRouteRequest(topic=res(name)), metadata=signed(who), timeout=TIMEOUT
        )
        return answer.status

    assert (await route("payments 1 1 0", ALICE)).code == d.Code.ILLEGAL_TOPIC
    assert (await route("payments\n1 1 0", super_credentials(cluster))).code == d.Code.ILLEGAL_TOPIC
    assert (await route("alice-made-topic", ALICE)).code == d.Code.FORBIDDEN
    assert (await route(f"%DLQ%{SECRET_CG}", ALICE)).code == d.Code.FORBIDDEN
    assert (await route(ORDERS, ALICE)).code == d.Code.OK
    assert (await route(SECRET, ALICE)).code == d.Code.FORBIDDEN  # not hers to look up
    assert await broker_topics(cluster, target.broker) == before
    # The remoting port: a send alice may make to a topic that does not exist creates none.
    cmd = send_request(
        b"x", "", group="alice-pg", topic="alice-made-topic", queue_id=0, born_timestamp=0
    )
    answer = await ask(cluster, target.broker.addr, cmd, ALICE)
    assert answer.code == ResponseCode.NO_PERMISSION, answer.remark
    assert await broker_topics(cluster, target.broker) == before
    # Whoever may create topics still gets one made by a route query or a send.
    assert (await route("made-by-root", super_credentials(cluster))).code == d.Code.OK
    assert b"made-by-root" in await broker_topics(cluster, target.broker)
    # The reserved names are nobody's to create that way.
    status = await route("%DLQ%nobody-cg", super_credentials(cluster))
    assert status.code != d.Code.OK
    assert b"%DLQ%nobody-cg" not in await broker_topics(cluster, target.broker)


# -- 2: Telemetry declarations -----------------------------------------------------------------


def publishing(*topics: str) -> sv.TelemetryCommand:
    settings = d.Settings(
        client_type=d.ClientType.PRODUCER,
        publishing=d.Publishing(topics=[res(t) for t in topics]),
    )
    return sv.TelemetryCommand(settings=settings)


class Stream:
    """A Telemetry stream as a client holds it: frames written when asked, answers read
    with a deadline."""

    def __init__(self, stub: service_pb2_grpc.MessagingServiceStub, who: Credentials, cid: str):
        self.call = stub.Telemetry(metadata=signed(who, cid))

    async def send(self, command: sv.TelemetryCommand) -> None:
        await self.call.write(command)

    async def read(self, timeout: float) -> sv.TelemetryCommand | None:
        """The next frame; None when the stream ended or nothing came in time."""
        try:
            answer = await asyncio.wait_for(self.call.read(), timeout)
        except (TimeoutError, grpc.aio.AioRpcError):
            return None
        return None if answer is grpc.aio.EOF else answer

    def close(self) -> None:
        self.call.cancel()


async def test_a_stream_declaring_another_users_topic_gets_no_transaction_check(
    target: Target, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    root = super_credentials(target.cluster)
    refused = Stream(stub, ALICE, "alice-tx")
    lawful = Stream(stub, ALICE, "alice-tx-orders")
    owner = Stream(stub, root, "root-tx")
    try:
        await refused.send(publishing(SECRET))
        answer = await refused.read(TIMEOUT)
        assert answer is not None and answer.status.code == d.Code.FORBIDDEN, answer
        assert await refused.read(2) is None  # the stream ended
        await lawful.send(publishing(ORDERS))
        answer = await lawful.read(TIMEOUT)
        assert answer is not None and answer.status.code == d.Code.OK, answer
        await owner.send(publishing(SECRET))
        answer = await owner.read(TIMEOUT)
        assert answer is not None and answer.status.code == d.Code.OK, answer
        # A transaction on SECRET left open: its check goes to the owner's stream only.
        half = v2_message(SECRET, b"half-secret", d.MessageType.TRANSACTION)
        sent = await stub.SendMessage(
            sv.SendMessageRequest(messages=[half]), metadata=signed(root, "root-tx")
        )
        assert sent.status.code == d.Code.OK, sent.status
        check = await owner.read(30)
        assert check is not None and check.HasField("recover_orphaned_transaction_command")
        assert check.recover_orphaned_transaction_command.message.body == b"half-secret"
        assert await lawful.read(3) is None
        # Alice cannot end it either: the transaction id names a half message of SECRET.
        end = sv.EndTransactionRequest(
            topic=res(ORDERS),
            message_id=half.system_properties.message_id,
            transaction_id=sent.entries[0].transaction_id,
            resolution=d.TransactionResolution.COMMIT,
            source=d.TransactionSource.SOURCE_CLIENT,
        )
        ended = await stub.EndTransaction(end, metadata=signed(ALICE, "alice-tx-orders"))
        assert ended.status.code != d.Code.OK, ended.status
    finally:
        for stream in (refused, lawful, owner):
            stream.close()


# -- 3: receipt handles ------------------------------------------------------------------------


async def dlq_size(target: Target, group: str) -> int:
    """How many messages the broker's ``%DLQ%<group>`` holds (its one queue)."""
    answer = await ask_super(
        target.cluster, target.broker.addr, cw.max_offset_request(f"%DLQ%{group}", 0)
    )
    return cw.parse_offset(answer) if answer.code == ResponseCode.SUCCESS else 0


async def test_forged_receipt_handles_act_on_nothing(
    target: Target, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    name = target.broker.broker_name
    secret = target.secret_offsets[0]
    forged = f"0 0 60000 0 0 {name} 0 0 {secret}"
    meta = signed(ALICE, "alice-receiver")
    before = await dlq_size(target, ORDERS_CG)
    answer = await stub.ForwardMessageToDeadLetterQueue(
        sv.ForwardMessageToDeadLetterQueueRequest(
            group=res(ORDERS_CG), topic=res(ORDERS), receipt_handle=forged,
            message_id="x", delivery_attempt=1, max_delivery_attempts=16,
        ),
        metadata=meta,
    )  # fmt: skip
    assert answer.status.code == d.Code.INVALID_RECEIPT_HANDLE, answer.status
    # A real message of ORDERS, popped by alice: its handle with SECRET's offset in it.
    sent = await stub.SendMessage(
        sv.SendMessageRequest(messages=[v2_message(ORDERS, b"order-1")]), metadata=meta
    )
    assert sent.status.code == d.Code.OK, sent.status
    got: list[d.Message] = []

    async def popped() -> bool:
        got.extend(await receive(stub, ALICE, ORDERS, ORDERS_CG))
        return bool(got)

    await wait_until(popped, timeout=20, what="alice receives her order")
    handle = got[0].system_properties.receipt_handle
    swapped = handle.rpartition(" ")[0] + f" {secret}"
    for call, request in (
        (
            stub.ForwardMessageToDeadLetterQueue,
            sv.ForwardMessageToDeadLetterQueueRequest(
                group=res(ORDERS_CG), topic=res(ORDERS), receipt_handle=swapped
            ),
        ),
        (
            stub.AckMessage,
            sv.AckMessageRequest(
                group=res(ORDERS_CG), topic=res(ORDERS),
                entries=[sv.AckMessageEntry(message_id="x", receipt_handle=forged)],
            ),
        ),
        (
            stub.ChangeInvisibleDuration,
            sv.ChangeInvisibleDurationRequest(
                group=res(ORDERS_CG), topic=res(ORDERS), receipt_handle=swapped,
                message_id="x",
            ),
        ),
    ):  # fmt: skip
        answer = await call(request, metadata=meta)
        assert answer.status.code == d.Code.INVALID_RECEIPT_HANDLE, (call, answer.status)
    assert await dlq_size(target, ORDERS_CG) == before
    # The real handle works once; spent, it is refused.
    forward = sv.ForwardMessageToDeadLetterQueueRequest(
        group=res(ORDERS_CG), topic=res(ORDERS), receipt_handle=handle
    )
    answer = await stub.ForwardMessageToDeadLetterQueue(forward, metadata=meta)
    assert answer.status.code == d.Code.OK, answer.status

    async def dead_lettered() -> bool:
        return await dlq_size(target, ORDERS_CG) == before + 1

    await wait_until(dead_lettered, timeout=TIMEOUT, what="the order in the DLQ")
    answer = await stub.ForwardMessageToDeadLetterQueue(forward, metadata=meta)
    assert answer.status.code == d.Code.INVALID_RECEIPT_HANDLE, answer.status
    assert await dlq_size(target, ORDERS_CG) == before + 1


# -- 5: client ids -----------------------------------------------------------------------------


async def test_a_user_cannot_join_take_or_end_another_users_client(
    target: Target, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    cluster, broker = target.cluster, target.broker

    def heartbeat(group: str) -> sv.HeartbeatRequest:
        return sv.HeartbeatRequest(group=res(group), client_type=d.ClientType.SIMPLE_CONSUMER)

    answer = await stub.Heartbeat(heartbeat(SECRET_CG), metadata=signed(BOB, "bob-client"))
    assert answer.status.code == d.Code.OK, answer.status
    assert await consumer_ids(cluster, broker, SECRET_CG) == ["bob-client"]
    intruder = await stub.Heartbeat(heartbeat(SECRET_CG), metadata=signed(ALICE, "alice-intruder"))
    assert intruder.status.code == d.Code.FORBIDDEN, intruder.status
    taken = await stub.Heartbeat(heartbeat(ORDERS_CG), metadata=signed(ALICE, "bob-client"))
    assert taken.status.code == d.Code.FORBIDDEN, taken.status
    end = await stub.NotifyClientTermination(
        sv.NotifyClientTerminationRequest(group=res(SECRET_CG)),
        metadata=signed(ALICE, "bob-client"),
    )
    assert end.status.code == d.Code.FORBIDDEN, end.status
    assert await consumer_ids(cluster, broker, SECRET_CG) == ["bob-client"]
    assert await consumer_ids(cluster, broker, ORDERS_CG) == []
    # Bob ends his own client, from the connection that registered it.
    end = await stub.NotifyClientTermination(
        sv.NotifyClientTerminationRequest(group=res(SECRET_CG)),
        metadata=signed(BOB, "bob-client"),
    )
    assert end.status.code == d.Code.OK, end.status
    assert await consumer_ids(cluster, broker, SECRET_CG) == []


# -- 6: signatures expire ----------------------------------------------------------------------


async def test_signatures_outside_the_window_are_refused(
    target: Target, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    route = sv.QueryRouteRequest(topic=res(ORDERS))
    later = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() + 3600))
    for date_time in ("20010101T000000Z", "", later, "2001-01-01T00:00:00Z", "now"):
        answer = await stub.QueryRoute(route, metadata=signed(ALICE, date_time=date_time))
        assert answer.status.code == d.Code.UNAUTHORIZED, (date_time, answer.status)
        assert "authentication failed" in answer.status.message
    answer = await stub.QueryRoute(route, metadata=signed(ALICE))
    assert answer.status.code == d.Code.OK, answer.status
