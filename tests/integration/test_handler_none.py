"""A handler that returns None on a real cluster: the message goes back for retry (as if
the handler had raised) and comes again with reconsume_times 1; the error is logged once."""

from __future__ import annotations

import logging

import pytest

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin
from tests.integration.waiting import wait_until


async def test_a_handler_returning_none_gets_the_message_again(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("NoneBack", read_queue_nums=1, write_queue_nums=1)
    async with Producer("pg-none", ns) as producer:
        await producer.send(Message("NoneBack", b"m"))
    got: list[int] = []

    async def handler(msgs: list[MessageExt]) -> ConsumeResult | None:
        got.extend(m.reconsume_times for m in msgs)
        return None if len(got) == 1 else ConsumeResult.SUCCESS

    consumer = PushConsumer("cg-none", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("NoneBack")
    consumer.on_message(handler)  # type: ignore[arg-type]
    async with consumer:
        await wait_until(lambda: len(got) >= 2, lambda: f"a redelivery (got {got})")
    assert got == [0, 1]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "returned None, not a ConsumeResult" in errors[0]
