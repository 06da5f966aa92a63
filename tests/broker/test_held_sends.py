"""The sends of one network read reach the CommitLog in one write, before their answers
leave: the broker holds its store's writes while it handles a read (MessageStore.hold_writes)
and settles them before the read's answers are written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rocketq.broker.broker import Broker
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import decode
from rocketq.remoting.transport import Connection
from rocketq.storage import mapped_file
from rocketq.storage.mapped_file import MappedFile
from tests.broker.test_wire_batch import TOPIC, json_frame, pull, v2_fields
from tests.pure import ran_pure

# A single message's SendMessageRequestHeaderV2 (m=false), as a stock client sends it.
SINGLE = [(k, "false" if k == "m" else v) for k, v in v2_fields(TOPIC, 0, "")]


async def test_the_sends_of_one_read_are_one_commitlog_write(
    wire: tuple[Broker, Connection],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if ran_pure(request, mapped_file):
        return
    b, conn = wire
    writes: list[tuple[int, int]] = []  # (bytes, answers read by then)
    answers: list[Any] = []
    real = MappedFile.append_bytes

    def counted(self: MappedFile, data: Any, *, fill: bool = False) -> None:
        writes.append((len(data), len(answers)))
        real(self, data, fill=fill)

    monkeypatch.setattr(MappedFile, "append_bytes", counted)
    frames = b"".join(
        json_frame(RequestCode.SEND_MESSAGE_V2, SINGLE, opaque, f"m{opaque}".encode())
        for opaque in range(1, 5)
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
    try:
        writer.write(frames)  # one write: the broker reads the four frames at once
        for _ in range(4):
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5.0), "big")
            answers.append(decode(await asyncio.wait_for(reader.readexactly(size), 5.0)))
    finally:
        writer.close()
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 4, [a.remark for a in answers]
    assert [int((a.ext or {})["queueOffset"]) for a in answers] == [0, 1, 2, 3]
    assert len(writes) == 1 and writes[0][1] == 0  # one write, before any answer was read
    got = await pull(conn, TOPIC, 0, 4)
    assert [m.body for m in got] == [b"m1", b"m2", b"m3", b"m4"]
    assert writes[0][0] == sum(m.store_size for m in got)
