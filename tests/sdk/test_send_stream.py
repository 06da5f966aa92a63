"""The send stream after a broken stream: gRPC leaves the broken stream's request
generator waiting, and it must not take (and lose) the first send of the next stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rocketq.cluster.errors import ConnectBrokerError
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.sdk.remoting import _SendStream


class FakeStub:
    """Each SendStream call reads its requests in a task of its own, as gRPC does, and
    answers every send; the first stream ends after its first answer (the broker died)
    while its reader still waits for the next request, which gRPC does not cancel."""

    def __init__(self) -> None:
        self.streams = 0
        self.readers: list[asyncio.Task[None]] = []
        self.taken: list[tuple[int, list[int]]] = []  # (stream, request ids)

    def SendStream(self, requests: AsyncIterator[pb.SendBatchRequest]) -> Any:  # noqa: N802
        self.streams += 1
        number = self.streams
        answers: asyncio.Queue[pb.SendBatchResponse | None] = asyncio.Queue()

        async def read() -> None:
            async for batch in requests:
                ids = [r.request_id for r in batch.requests]
                self.taken.append((number, ids))
                answers.put_nowait(
                    pb.SendBatchResponse(responses=[pb.SendResponse(request_id=i) for i in ids])
                )
                if number == 1:
                    answers.put_nowait(None)  # the stream breaks after this answer

        self.readers.append(asyncio.ensure_future(read()))

        async def responses() -> AsyncIterator[pb.SendBatchResponse]:
            while (answer := await answers.get()) is not None:
                yield answer

        return responses()


async def test_the_next_stream_gets_every_send_after_a_break() -> None:
    stub = FakeStub()
    stream = _SendStream(stub, "127.0.0.1:1")
    first = await stream.call(pb.SendRequest(topic="T"), timeout=5)
    assert first.request_id == 1
    for _ in range(20):  # the first stream ends; its reader is left waiting
        await asyncio.sleep(0)
    answers = await asyncio.wait_for(
        asyncio.gather(*(stream.call(pb.SendRequest(topic="T"), timeout=5) for _ in range(3))),
        2,
    )
    assert [a.request_id for a in answers] == [2, 3, 4]
    assert all(number == 2 for number, _ in stub.taken[1:])  # none went to the dead stream
    assert stub.readers[0].done()  # and its reader was told to stop
    await stream.close()
    for reader in stub.readers:
        reader.cancel()


async def test_sends_of_a_broken_stream_fail_at_once() -> None:
    class Dead(FakeStub):
        def SendStream(self, requests: AsyncIterator[pb.SendBatchRequest]) -> Any:  # noqa: N802
            async def none() -> AsyncIterator[pb.SendBatchResponse]:
                return
                yield

            return none()

    stream = _SendStream(Dead(), "127.0.0.1:1")
    with pytest.raises(ConnectBrokerError):
        await asyncio.wait_for(stream.call(pb.SendRequest(topic="T"), timeout=5), 2)
    await stream.close()
