"""A single message whose body is over max_message_size is refused as soon as its request
is read (MESSAGE_ILLEGAL, in the words of RocketMQ's client Validators), before a record is
made of it or the send queue's checks (flow control) see it: a flood of them costs the
broker no store work and no refusal of the sends behind them."""

from __future__ import annotations

from typing import Any, Final

import pytest

from rocketq.broker.broker import Broker
from rocketq.common.exceptions import SystemBusyError
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection
from tests.broker.conftest import WIRE_TOPIC

MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024  # the wire fixture's store: the default


def v2(**extra: str) -> dict[str, str]:
    return {
        "a": "pg", "b": WIRE_TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": "1700000000000", "h": "0", "i": "", "j": "0", "k": "false", **extra,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("code", "fields"),
    [
        (RequestCode.SEND_MESSAGE_V2, v2()),
        (RequestCode.SEND_MESSAGE, {"producerGroup": "pg", "topic": WIRE_TOPIC, "queueId": "0"}),
    ],
)
async def test_an_oversize_body_is_refused_at_once_and_nothing_stored(
    wire: tuple[Broker, Connection],
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    fields: dict[str, str],
) -> None:
    b, conn = wire
    stored = b.store.max_phy_offset
    reached: list[Any] = []
    append, check = b.store.append, b.flow.check

    def spy_append(*args: Any, **kwargs: Any) -> Any:
        reached.append("append")
        return append(*args, **kwargs)

    def spy_check() -> None:
        reached.append("flow control")
        check()

    monkeypatch.setattr(b.store, "append", spy_append)
    monkeypatch.setattr(b.flow, "check", spy_check)
    answer = await conn.invoke(RemotingCommand(code, fields, b"x" * (MAX_MESSAGE_SIZE + 1)), 10.0)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL, answer.remark
    assert str(answer.remark).startswith(
        f"the message body size over max value, MAX: {MAX_MESSAGE_SIZE}"
    )
    assert f"the body is {MAX_MESSAGE_SIZE + 1} bytes" in str(answer.remark)
    assert "max_message_size" in str(answer.remark)
    assert reached == []  # refused before flow control and the store
    assert b.store.max_phy_offset == stored  # nothing stored
    # A body within the limit goes on to be stored (the fixture's 4 MiB CommitLog segments
    # take no record of a body at the limit itself).
    answer = await conn.invoke(RemotingCommand(code, fields, b"y" * (1 << 20)), 10.0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert reached == ["flow control", "append"]
    assert b.store.max_phy_offset > stored + (1 << 20)


async def test_an_oversize_send_is_refused_even_while_the_send_queue_refuses(
    wire: tuple[Broker, Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    b, conn = wire
    stored = b.store.max_phy_offset

    def lagging() -> None:  # the send queue refuses what reaches it, as a loop running late
        raise SystemBusyError("[TIMEOUT_CLEAN_QUEUE] broker busy, start flow control")

    monkeypatch.setattr(b.flow, "check", lagging)
    busy = await conn.invoke(RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(), b"ok"), 10.0)
    assert busy.code == ResponseCode.SYSTEM_BUSY, busy.remark
    oversize = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(), b"x" * (MAX_MESSAGE_SIZE + 1)), 10.0
    )
    assert oversize.code == ResponseCode.MESSAGE_ILLEGAL, oversize.remark
    assert b.store.max_phy_offset == stored
