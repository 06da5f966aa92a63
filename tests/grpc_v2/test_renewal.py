"""auto_renew: what a push consumer received stays invisible until it acknowledges it,
renewed before its invisible time ends; an ack names the first receipt and applies to the
newest; a consumer that leaves lets its messages come back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as sv
from rocketq.broker.grpc_v2 import service_pb2_grpc
from rocketq.broker.grpc_v2.renewal import Renewals
from rocketq.common.exceptions import NoMessageError
from rocketq.common.message import TopicConfig
from tests.grpc_v2.test_official_client import running_broker
from tests.integration.waiting import wait_until

TOPIC = "V5Renew"


def _meta(client: str) -> list[tuple[str, str]]:
    return [("x-mq-client-id", client)]


async def _send(stub: service_pb2_grpc.MessagingServiceStub, body: bytes) -> None:
    msg = d.Message(topic=d.Resource(name=TOPIC), body=body)
    msg.system_properties.message_id = "01" + body.hex().upper().ljust(30, "0")
    msg.system_properties.message_type = d.MessageType.NORMAL
    answer = await stub.SendMessage(sv.SendMessageRequest(messages=[msg]), metadata=_meta("p"))
    assert answer.status.code == d.Code.OK, answer.status


async def _receive(
    stub: service_pb2_grpc.MessagingServiceStub, client: str, *, renew: bool, poll_ms: int
) -> list[d.Message]:
    request = sv.ReceiveMessageRequest(
        group=d.Resource(name="renew-cg"),
        message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=-1),
        filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
        batch_size=8,
        auto_renew=renew,
    )
    request.long_polling_timeout.FromMilliseconds(poll_ms)
    if not renew:
        request.invisible_duration.FromMilliseconds(30_000)
    got = []
    async for answer in stub.ReceiveMessage(request, metadata=_meta(client), timeout=10):
        if answer.HasField("message"):
            got.append(answer.message)
    return got


async def test_received_messages_stay_hidden_until_acked_or_the_consumer_leaves(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as b:
        b.topics.update(TopicConfig(TOPIC, 1, 1))
        assert b.grpc is not None
        renewals = b.grpc.renewals
        renewals.configure(invisible_ms=1500, before_ms=1000, every_s=0.1)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.grpc.port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            await _send(stub, b"kept")
            [first] = await _receive(stub, "push-1", renew=True, poll_ms=3000)
            handle = first.system_properties.receipt_handle
            # Renewed three times: 1.5 s invisible each, so without renewals it was
            # visible again long ago.
            await wait_until(lambda: renewals.renewed >= 3, "three renewals")
            assert await _receive(stub, "other", renew=False, poll_ms=0) == []
            ack = await stub.AckMessage(
                sv.AckMessageRequest(
                    group=d.Resource(name="renew-cg"), topic=d.Resource(name=TOPIC),
                    entries=[sv.AckMessageEntry(message_id=first.system_properties.message_id,
                                                receipt_handle=handle)],
                ),
                metadata=_meta("push-1"),
            )  # fmt: skip
            assert ack.status.code == d.Code.OK, ack.status
            assert len(renewals) == 0
            acked_at = b.pop.clock_ms()
            await wait_until(lambda: b.pop.clock_ms() > acked_at + 2500, "the time to pass")
            assert await _receive(stub, "other", renew=False, poll_ms=0) == []  # not back

            # A consumer that leaves: its message comes back when its time ends.
            await _send(stub, b"left")
            [given] = await _receive(stub, "push-2", renew=True, poll_ms=3000)
            gone = await stub.NotifyClientTermination(
                sv.NotifyClientTerminationRequest(group=d.Resource(name="renew-cg")),
                metadata=_meta("push-2"),
            )
            assert gone.status.code == d.Code.OK and len(renewals) == 0 and given.body == b"left"
            # One long poll: the revive's first message into the group's retry topic (made
            # by that revive) ends it.
            again = await _receive(stub, "other", renew=False, poll_ms=8000)
            assert [m.body for m in again] == [b"left"]
            assert again[0].system_properties.delivery_attempt == 2


async def test_an_ack_during_a_renewal_applies_to_the_new_receipt() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    changed: list[str] = []

    async def change(group: str, topic: str, handle: str, invisible: int) -> str:
        started.set()
        await release.wait()
        changed.append(handle)
        return handle + "-renewed"

    now = [0]
    renewals = Renewals(change, lambda: now[0])
    renewals.add("c", "g", "t", "r1", due_ms=5_000)
    now[0] = 4_500  # within before_ms of its end
    renewing = asyncio.ensure_future(renewals.renew_due())
    await asyncio.wait_for(started.wait(), 5)
    taking = asyncio.ensure_future(renewals.take("r1"))
    await asyncio.sleep(0)
    assert not taking.done()  # waits for the change in flight
    release.set()
    assert await asyncio.wait_for(taking, 5) == "r1-renewed"
    assert await renewing == 1 and changed == ["r1"] and len(renewals) == 0


async def test_a_failed_renewal_ends_it_and_old_ones_stop() -> None:
    async def change(group: str, topic: str, handle: str, invisible: int) -> str:
        raise NoMessageError("acknowledged already")

    now = [0]
    renewals = Renewals(change, lambda: now[0])
    renewals.add("c", "g", "t", "gone", due_ms=1_000)
    assert await renewals.renew_due() == 0 and len(renewals) == 0
    renewals.max_ms = 10_000
    renewals.add("c", "g", "t", "old", due_ms=1_000)
    now[0] = 20_000  # past the most a receipt is renewed
    assert await renewals.renew_due() == 0 and len(renewals) == 0
    assert await renewals.take("unknown") == "unknown"
