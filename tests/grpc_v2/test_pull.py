"""The v2 pull consumer's RPCs: PullMessage from an offset the client keeps (filtered, long
polling), UpdateOffset and GetOffset of the group's offsets, QueryOffset of a queue's
beginning, end or time; bad requests answered with their codes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc

from rocketq.auth.request_map import SUPER, USER, v2_requirement
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as sv
from rocketq.broker.grpc_v2 import service_pb2_grpc
from rocketq.common.message import TopicConfig
from tests.grpc_v2.test_official_client import running_broker
from tests.integration.waiting import wait_until

TOPIC, GROUP = "V5Pull", "v5-pull"


def _queue(queue_id: int = 0, topic: str = TOPIC) -> d.MessageQueue:
    return d.MessageQueue(topic=d.Resource(name=topic), id=queue_id)


async def _send(stub: service_pb2_grpc.MessagingServiceStub, body: bytes, tag: str) -> None:
    msg = d.Message(topic=d.Resource(name=TOPIC), body=body)
    msg.system_properties.message_id = "01" + body.hex().upper().ljust(30, "0")[:30]
    msg.system_properties.message_type = d.MessageType.NORMAL
    msg.system_properties.tag = tag
    answer = await stub.SendMessage(sv.SendMessageRequest(messages=[msg]))
    assert answer.status.code == d.Code.OK, answer.status


async def _pull(
    stub: service_pb2_grpc.MessagingServiceStub,
    offset: int,
    *,
    tags: str = "*",
    batch: int = 32,
    poll_ms: int = 0,
    queue: d.MessageQueue | None = None,
) -> tuple[int, list[bytes], int]:
    request = sv.PullMessageRequest(
        group=d.Resource(name=GROUP),
        message_queue=queue or _queue(),
        offset=offset,
        batch_size=batch,
        filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression=tags),
    )
    request.long_polling_timeout.FromMilliseconds(poll_ms)
    code, bodies, next_offset = -1, [], -1
    async for answer in stub.PullMessage(request, timeout=10):
        kind = answer.WhichOneof("content")
        if kind == "status":
            code = answer.status.code
        elif kind == "message":
            bodies.append(answer.message.body)
        elif kind == "next_offset":
            next_offset = answer.next_offset
    return code, bodies, next_offset


async def test_pull_offsets_and_long_polling(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as b:
        assert b.grpc is not None
        b.topics.update(TopicConfig(TOPIC, 1, 1))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{b.grpc.port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            for body, tag in ((b"m0", "A"), (b"m1", "B"), (b"m2", "A")):
                await _send(stub, body, tag)

            async def query(policy: int, at_ms: int = 0) -> int:
                request = sv.QueryOffsetRequest(message_queue=_queue(), query_offset_policy=policy)  # type: ignore[arg-type]
                request.timestamp.FromMilliseconds(at_ms)
                answer = await stub.QueryOffset(request)
                assert answer.status.code == d.Code.OK, answer.status
                return answer.offset

            assert await query(d.QueryOffsetPolicy.BEGINNING) == 0
            assert await query(d.QueryOffsetPolicy.END) == 3
            assert await query(d.QueryOffsetPolicy.TIMESTAMP, 0) == 0
            assert (
                await query(d.QueryOffsetPolicy.TIMESTAMP, int(time.time() * 1000) + 3_600_000) == 3
            )

            assert await _pull(stub, 0, batch=2) == (d.Code.OK, [b"m0", b"m1"], 2)
            assert await _pull(stub, 0, tags="A") == (d.Code.OK, [b"m0", b"m2"], 3)
            assert await _pull(stub, 3) == (d.Code.MESSAGE_NOT_FOUND, [], 3)

            # Long polling: the pull waits at the end of the queue until a message comes.
            waiting = asyncio.ensure_future(_pull(stub, 3, poll_ms=5000))
            await wait_until(lambda: b.holds.held_count > 0, "the pull held")
            await _send(stub, b"m3", "A")
            assert await asyncio.wait_for(waiting, 10) == (d.Code.OK, [b"m3"], 4)

            group, queue = d.Resource(name=GROUP), _queue()
            missing = await stub.GetOffset(sv.GetOffsetRequest(group=group, message_queue=queue))
            assert missing.status.code == d.Code.OFFSET_NOT_FOUND
            stored = await stub.UpdateOffset(
                sv.UpdateOffsetRequest(group=group, message_queue=queue, offset=2)
            )
            assert stored.status.code == d.Code.OK
            got = await stub.GetOffset(sv.GetOffsetRequest(group=group, message_queue=queue))
            assert (got.status.code, got.offset) == (d.Code.OK, 2)
            assert b.offsets.query(GROUP, TOPIC, 0) == 2  # the group's offset, as 4.x keeps it
            beyond = await stub.UpdateOffset(
                sv.UpdateOffsetRequest(group=group, message_queue=queue, offset=99)
            )
            assert beyond.status.code == d.Code.ILLEGAL_OFFSET

            assert (await _pull(stub, 0, queue=_queue(5)))[0] == d.Code.BAD_REQUEST
            assert (await _pull(stub, 0, queue=_queue(0, "NoSuchTopic")))[0] == (
                d.Code.TOPIC_NOT_FOUND
            )
            assert (await _pull(stub, -1))[0] == d.Code.BAD_REQUEST


def test_the_pull_rpcs_need_sub() -> None:
    for rpc in ("PullMessage", "UpdateOffset", "GetOffset"):
        need = v2_requirement(rpc, TOPIC, GROUP)
        assert need not in (USER, SUPER), rpc
        assert v2_requirement(rpc, TOPIC, "") is SUPER  # no group named: a super user's
    assert v2_requirement("QueryOffset", TOPIC, "") not in (USER, SUPER)
