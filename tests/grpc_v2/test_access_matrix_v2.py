"""Who may do what on the apache.rocketmq.v2 endpoint: every RPC the MessagingService
defines (Telemetry twice: a publisher's and a subscriber's settings), sent by the six
senders of the remoting matrix (:mod:`tests.auth.test_access_matrix`) to a broker with
authentication and authorization on, and off.

With auth on, an answer is UNAUTHORIZED or FORBIDDEN exactly where the RPC's gate says so
(stated here, RPC by RPC, independently of ``auth/request_map.py``), and a refused RPC
changes nothing: the broker's topics, groups, offsets, store, clients, producers and client
bindings are the same after it. With auth off, nothing is refused."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
import pytest

from rocketq.auth.credentials import Credentials
from rocketq.auth.model import Gate, User
from rocketq.broker.broker import Broker
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as sv
from rocketq.broker.grpc_v2 import service_pb2_grpc
from rocketq.broker.grpc_v2.convert import signature
from rocketq.common.message import TopicConfig
from tests.auth.test_access_matrix import ALICE, BOB, ROOT, SENDERS, _acl, refused, secured_pair
from tests.integration.waiting import wait_until

TOPIC, GROUP, OTHER = "V5Matrix", "v5-matrix", "V5Other"
TIMEOUT: Final = 10.0
REFUSALS: Final = (d.Code.UNAUTHORIZED, d.Code.FORBIDDEN)

Stub = service_pb2_grpc.MessagingServiceStub
Metadata = list[tuple[str, str]]
Call = Callable[[Stub, Metadata], Awaitable[int]]


def res(name: str) -> d.Resource:
    return d.Resource(name=name)


def headers(who: Credentials | None, client_id: str) -> Metadata:
    now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    found = [("x-mq-date-time", now), ("x-mq-client-id", client_id)]
    if who is not None:
        sig = signature(who.secret_key, now)
        found.append(
            (
                "authorization",
                f"MQv2-HMAC-SHA1 Credential={who.access_key}, SignedHeaders=x-mq-date-time, "
                f"Signature={sig}",
            )
        )
    return found


def _message() -> d.Message:
    msg = d.Message(topic=res(TOPIC), body=b"matrix")
    msg.system_properties.message_id = "01" + f"{time.monotonic_ns():030X}"[-30:]
    msg.system_properties.message_type = d.MessageType.NORMAL
    return msg


FORGED: Final = "0 0 60000 0 0 broker-a 0 0 0"


async def _receive(stub: Stub, md: Metadata) -> int:
    request = sv.ReceiveMessageRequest(
        group=res(GROUP), message_queue=d.MessageQueue(topic=res(TOPIC), id=-1), batch_size=1
    )
    request.invisible_duration.FromSeconds(30)
    request.long_polling_timeout.FromMilliseconds(10)
    async for answer in stub.ReceiveMessage(request, metadata=md, timeout=TIMEOUT):
        return int(answer.status.code)
    return -1


async def _telemetry(stub: Stub, md: Metadata, settings: d.Settings) -> int:
    call = stub.Telemetry(metadata=md, timeout=TIMEOUT)
    try:
        await call.write(sv.TelemetryCommand(settings=settings))
        answer = await asyncio.wait_for(call.read(), TIMEOUT)
        return -1 if answer is grpc.aio.EOF else int(answer.status.code)
    finally:
        call.cancel()


def _streamed(method: str, request: Any) -> Call:
    """A server-streaming RPC: the status its first answer carries."""

    async def call(stub: Stub, md: Metadata) -> int:
        async for answer in getattr(stub, method)(request, metadata=md, timeout=TIMEOUT):
            if answer.HasField("status"):
                return int(answer.status.code)
        return -1

    return call


def _unary(method: str, request: Any) -> Call:
    async def call(stub: Stub, md: Metadata) -> int:
        answer = await getattr(stub, method)(request, metadata=md, timeout=TIMEOUT)
        return int(answer.status.code)

    return call


# Every RPC with what it needs: stated here, not read from the request map.
TABLE: Final[dict[str, tuple[Call, Gate]]] = {
    "QueryRoute": (_unary("QueryRoute", sv.QueryRouteRequest(topic=res(TOPIC))), Gate.POLICY),
    "Heartbeat": (
        _unary(
            "Heartbeat",
            sv.HeartbeatRequest(group=res(GROUP), client_type=d.ClientType.SIMPLE_CONSUMER),
        ),
        Gate.POLICY,
    ),
    "SendMessage": (
        lambda stub, md: _unary("SendMessage", sv.SendMessageRequest(messages=[_message()]))(
            stub, md
        ),
        Gate.POLICY,
    ),
    "QueryAssignment": (
        _unary("QueryAssignment", sv.QueryAssignmentRequest(topic=res(TOPIC), group=res(GROUP))),
        Gate.POLICY,
    ),
    "ReceiveMessage": (_receive, Gate.POLICY),
    "AckMessage": (
        _unary(
            "AckMessage",
            sv.AckMessageRequest(
                group=res(GROUP),
                topic=res(TOPIC),
                entries=[sv.AckMessageEntry(message_id="x", receipt_handle=FORGED)],
            ),
        ),
        Gate.POLICY,
    ),
    "ForwardMessageToDeadLetterQueue": (
        _unary(
            "ForwardMessageToDeadLetterQueue",
            sv.ForwardMessageToDeadLetterQueueRequest(
                group=res(GROUP), topic=res(TOPIC), receipt_handle=FORGED
            ),
        ),
        Gate.POLICY,
    ),
    "EndTransaction": (
        _unary(
            "EndTransaction",
            sv.EndTransactionRequest(
                topic=res(TOPIC),
                message_id="x",
                transaction_id="999999:0",
                resolution=d.TransactionResolution.COMMIT,
            ),
        ),
        Gate.POLICY,
    ),
    "NotifyClientTermination": (
        _unary("NotifyClientTermination", sv.NotifyClientTerminationRequest(group=res(GROUP))),
        Gate.USER,
    ),
    "ChangeInvisibleDuration": (
        _unary(
            "ChangeInvisibleDuration",
            sv.ChangeInvisibleDurationRequest(
                group=res(GROUP), topic=res(TOPIC), receipt_handle=FORGED, message_id="x"
            ),
        ),
        Gate.POLICY,
    ),
    "PullMessage": (
        _streamed(
            "PullMessage",
            sv.PullMessageRequest(
                group=res(GROUP),
                message_queue=d.MessageQueue(topic=res(TOPIC), id=0),
                offset=0,
                batch_size=1,
            ),
        ),
        Gate.POLICY,
    ),
    "UpdateOffset": (
        _unary(
            "UpdateOffset",
            sv.UpdateOffsetRequest(
                group=res(GROUP), message_queue=d.MessageQueue(topic=res(TOPIC), id=0), offset=0
            ),
        ),
        Gate.POLICY,
    ),
    "GetOffset": (
        _unary(
            "GetOffset",
            sv.GetOffsetRequest(
                group=res(GROUP), message_queue=d.MessageQueue(topic=res(TOPIC), id=0)
            ),
        ),
        Gate.POLICY,
    ),
    "QueryOffset": (
        _unary(
            "QueryOffset",
            sv.QueryOffsetRequest(
                message_queue=d.MessageQueue(topic=res(TOPIC), id=0),
                query_offset_policy=d.QueryOffsetPolicy.BEGINNING,
            ),
        ),
        Gate.POLICY,
    ),
    "Telemetry (publishing)": (
        lambda stub, md: _telemetry(
            stub,
            md,
            d.Settings(
                client_type=d.ClientType.PRODUCER, publishing=d.Publishing(topics=[res(TOPIC)])
            ),
        ),
        Gate.POLICY,
    ),
    "Telemetry (subscription)": (
        lambda stub, md: _telemetry(
            stub,
            md,
            d.Settings(
                client_type=d.ClientType.SIMPLE_CONSUMER,
                subscription=d.Subscription(
                    group=res(GROUP),
                    subscriptions=[
                        d.SubscriptionEntry(
                            topic=res(TOPIC),
                            expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
                        )
                    ],
                ),
            ),
        ),
        Gate.POLICY,
    ),
}


@dataclass
class Endpoint:
    broker: Broker
    auth: bool

    def state(self) -> object:
        """Everything a refused RPC could have changed."""
        b = self.broker
        assert b.grpc is not None
        return (
            sorted(b.topics.topics),
            b.topics.data_version,
            sorted(b.groups.groups),
            json.dumps({k: dict(v) for k, v in b.offsets.table.items()}, sort_keys=True),
            b.store.max_phy_offset,
            {g: sorted(c.clients) for g, c in b.consumers.groups.items()},
            sorted(b.consumers.producer_groups),
            json.dumps(b.grpc._producers, sort_keys=True),
            len(b.grpc.bindings),
        )


@pytest.fixture(params=[True, False], ids=["auth on", "auth off"])
async def endpoint(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Endpoint]:
    auth: bool = request.param
    ns, b = await secured_pair(tmp_path, auth, grpc=True)
    try:
        await b.start()
        await wait_until(lambda: all(b.registration.registered.values()), "registration")
        b.topics.update(TopicConfig(TOPIC, 2, 2))
        b.topics.update(TopicConfig(OTHER, 2, 2))
        b.groups.find_or_create(GROUP)
        meta = b.auth_metadata
        meta.create_user(User(ALICE.access_key, ALICE.secret_key))
        meta.create_user(User(BOB.access_key, BOB.secret_key))
        meta.create_acl(_acl("User:alice", [f"Topic:{TOPIC}", f"Group:{GROUP}"]))
        meta.create_acl(_acl("User:bob", [f"Topic:{OTHER}", "Group:others"]))
        yield Endpoint(b, auth)
    finally:
        await b.stop()
        await ns.stop()


async def test_every_v2_rpc_from_every_sender(endpoint: Endpoint) -> None:
    broker = endpoint.broker
    assert broker.grpc is not None
    wrong = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{broker.grpc.port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        for rpc, (call, gate) in TABLE.items():
            for sender, who in SENDERS.items():
                # A stream the last call cancelled is cleaned up (its producer leaves) first.
                await wait_until(lambda: not broker.grpc._producers, "streams ended")
                before = endpoint.state()
                code = await call(stub, headers(who, f"matrix-{sender.replace(' ', '-')}"))
                expect = endpoint.auth and refused(gate, sender)
                got = code in REFUSALS
                if got != expect:
                    wrong.append(
                        f"{rpc} from {sender}: answered {d.Code.Name(code) if code >= 0 else code}"
                        f", expected {'a refusal' if expect else 'an answer from the handler'}"
                    )
                if got and endpoint.state() != before:
                    wrong.append(f"{rpc} from {sender}: refused, yet changed the state")
    assert not wrong, "\n".join(wrong)


# RPCs of the protos the endpoint does not serve: UNIMPLEMENTED to everyone, acting on
# nothing (RecallMessage takes back a delayed message by its handle, SyncLiteSubscription is
# RocketMQ 5.4's lite topics).
UNSERVED: Final = ("RecallMessage", "SyncLiteSubscription")


def test_the_table_covers_every_rpc_of_the_service() -> None:
    methods = {m.name for m in sv.DESCRIPTOR.services_by_name["MessagingService"].methods}
    covered = {name.split(" ")[0] for name in TABLE}
    assert covered | set(UNSERVED) == methods
    assert not covered & set(UNSERVED)


async def test_the_rpcs_not_served_are_unimplemented_for_everyone(endpoint: Endpoint) -> None:
    broker = endpoint.broker
    assert broker.grpc is not None
    before = endpoint.state()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{broker.grpc.port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        for rpc in UNSERVED:
            method = sv.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name[rpc]
            request = getattr(sv, method.input_type.name)()
            for who in (ROOT, ALICE, None):
                call = getattr(stub, rpc)
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    if method.client_streaming or method.server_streaming:
                        stream = call(metadata=headers(who, "unserved"), timeout=TIMEOUT)
                        await stream.write(request)
                        await stream.read()
                    else:
                        await call(request, metadata=headers(who, "unserved"), timeout=TIMEOUT)
                assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED, rpc
    assert endpoint.state() == before
