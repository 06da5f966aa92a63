"""Edges of the message types on real processes: a running consumer rewound by
reset-offset-by-time, and bad inputs of ordered and transactional sends (clear errors,
nothing stored)."""

from __future__ import annotations

import pytest

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
    TransactionState,
)
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import ClientStateError, MessageIllegalError, NoPermissionError
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.transport import request_once
from rocketq.sdk.admin import Admin
from rocketq.sdk.client_wire import TRANSACTION_COMMIT, end_transaction_request
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until


async def stored(ns: str, topic: str) -> int:
    async with Admin(ns) as admin:
        return sum(q.max_offset for q in await admin.topic_status(topic))


async def test_running_consumer_follows_a_reset_offset(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("Rewind", read_queue_nums=2, write_queue_nums=2)
    got: list[MessageExt] = []
    c = PushConsumer("cg-rewind", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    c.subscribe("Rewind", "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    c.on_message(handler)
    await c.start()
    try:
        async with Producer("pg", ns) as producer:
            for i in range(6):
                await producer.send(Message("Rewind", b"r%d" % i))
        await wait_until(lambda: len(got) >= 6, "the first pass")
        async with Admin(ns) as admin:
            await admin.reset_offset_by_time("cg-rewind", "Rewind", 0)
        await wait_until(lambda: len(got) >= 12, "the second pass after the reset")
    finally:
        await c.shutdown()
    assert sorted(m.body for m in got) == sorted([b"r%d" % i for i in range(6)] * 2)


class Never:
    def execute_local_transaction(self, msg: Message, arg: object) -> TransactionState:
        return TransactionState.COMMIT

    def check_local_transaction(self, msg: MessageExt) -> TransactionState:
        return TransactionState.COMMIT


async def test_bad_ordered_and_transactional_sends(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(broker_settings={"reject_transaction_message": "true"})
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("Edges", read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg", ns) as producer:
        with pytest.raises(ClientStateError, match="either sharding_key or selector"):
            await producer.send(
                Message("Edges", b"x"), sharding_key="k", selector=lambda q, m, a: q[0]
            )
    async with TransactionProducer("tpg-edges", ns, listener=Never()) as tp:
        with pytest.raises(MessageIllegalError, match="cannot be delayed"):
            await tp.send_message_in_transaction(Message("Edges", b"x", delay_level=2))
        with pytest.raises(NoPermissionError, match="reject_transaction_message"):
            await tp.send_message_in_transaction(Message("Edges", b"x"))
    # Ending a transaction that does not exist names what is wrong.
    end = end_transaction_request(
        "tpg-edges",
        commit_log_offset=10**12,
        tran_state_table_offset=0,
        msg_id="",
        transaction_id="",
        commit_or_rollback=TRANSACTION_COMMIT,
        from_transaction_check=False,
    )
    answer = await request_once(cluster.brokers[0].addr, end, 5.0)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "no half message" in str(answer.remark)
    assert await stored(ns, "Edges") == 0
    assert await stored(ns, "RMQ_SYS_TRANS_HALF_TOPIC") == 0
