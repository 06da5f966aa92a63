"""Batch sends on real processes: a long list split into legal batches arrives whole and
in order per batch; illegal batches are refused with nothing stored. A stock client's batch
flagged in the request header (SEND_MESSAGE_V2 with m=true, SEND_MESSAGE with batch=true),
sent as raw bytes with a JSON or a binary header, is consumed as its messages."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from rocketq import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    split_batches,
)
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import MessageIllegalError, NoPermissionError
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.sdk.admin import Admin
from tests.broker.test_wire_batch import (
    BATCH_PROPS,
    binary_frame,
    java_entry,
    json_frame,
    raw_request,
    v1_fields,
    v2_fields,
)
from tests.integration.waiting import wait_until


async def test_split_batches_all_arrive(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("Bulk", read_queue_nums=2, write_queue_nums=2)
    msgs = [Message("Bulk", b"%06d" % i + b"." * 2000) for i in range(5000)]
    batches = split_batches(msgs)
    assert len(batches) >= 3  # about 10 MB in all
    async with Producer("pg-bulk", ns) as producer:
        for batch in batches:
            result = await producer.send_batch(batch)
            assert result.ok and len(result.msg_ids) == len(batch)
        with pytest.raises(NoPermissionError, match="retry topic"):
            await producer.send_batch([Message("%RETRY%g", b"a"), Message("%RETRY%g", b"b")])
        with pytest.raises(MessageIllegalError, match="one topic"):
            await producer.send_batch([Message("Bulk", b"a"), Message("Other", b"b")])
        with pytest.raises(MessageIllegalError, match="a batch may hold at most"):
            big = os.urandom(1_000_000)  # incompressible
            await producer.send_batch([Message("Bulk", big)] * 5)
    async with Admin(ns) as admin:
        stats = await admin.topic_status("Bulk")
    assert sum(q.max_offset for q in stats) == 5000


Frame = Callable[[int, list[tuple[str, str]], int, bytes], bytes]
FLAGGED: list[tuple[str, int, Frame]] = [
    ("json-v2", RequestCode.SEND_MESSAGE_V2, json_frame),
    ("binary-v2", RequestCode.SEND_MESSAGE_V2, binary_frame),
    ("json-v1", RequestCode.SEND_MESSAGE, json_frame),
    ("binary-v1", RequestCode.SEND_MESSAGE, binary_frame),
]


def entry_of(form: str, i: int) -> bytes:
    """Message i of a form's batch: tagged even or odd, keyed by form and number."""
    tag = "even" if i % 2 == 0 else "odd"
    uniq = f"7F0000011F9018B4AAC2179D3E8A{i:04X}"
    props = f"KEYS\x01{form}-k{i}\x02TAGS\x01{tag}\x02WAIT\x01true\x02UNIQ_KEY\x01{uniq}\x02"
    return java_entry(f"{form}-{i}".encode(), props.encode())


async def test_a_batch_flagged_in_the_header_is_consumed_as_its_messages(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    addr = cluster.brokers[0].addr
    async with Admin(ns) as admin:
        await admin.update_topic("FlagBatch", read_queue_nums=2, write_queue_nums=2)
    for n, (form, code, frame) in enumerate(FLAGGED):
        fields = (v2_fields if code == RequestCode.SEND_MESSAGE_V2 else v1_fields)(
            "FlagBatch", n % 2, BATCH_PROPS
        )
        body = b"".join(entry_of(form, i) for i in range(4))
        answer = await raw_request(addr, frame(code, fields, n + 1, body))
        assert answer.code == ResponseCode.SUCCESS, (form, answer.remark)
        assert len((answer.ext or {})["msgId"].split(",")) == 4, form

    got: list[MessageExt] = []
    consumer = PushConsumer("cg-flag-batch", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("FlagBatch", "even")  # each message's own tag decides

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(handler)
    await consumer.start()
    try:
        await wait_until(lambda: len(got) >= 8, lambda: f"8 even messages, got {len(got)}")
    finally:
        await consumer.shutdown()
    expected = {f"{form}-{i}" for form, _, _ in FLAGGED for i in (0, 2)}
    assert sorted(m.body.decode() for m in got) == sorted(expected)
    for m in got:
        form, _, i = m.body.decode().rpartition("-")
        assert m.tags == "even" and m.keys == [f"{form}-k{i}"], m.body
        assert m.msg_id == f"7F0000011F9018B4AAC2179D3E8A{int(i):04X}"
    async with Admin(ns) as admin:
        stats = await admin.topic_status("FlagBatch")
        assert sum(q.max_offset for q in stats) == 16  # 4 batches of 4, each its own record
        # Each message is indexed by its own key.
        found: list[MessageExt] = []

        async def indexed() -> bool:
            found[:] = await admin.query_msg_by_key("FlagBatch", "binary-v1-k3")
            return bool(found)

        await wait_until(indexed, "message binary-v1-3 in the index by its key")
        assert [(m.body, m.tags) for m in found] == [(b"binary-v1-3", "odd")]


async def test_a_flagged_batch_is_refused_as_send_batch_message_is(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    addr = cluster.brokers[0].addr
    async with Admin(ns) as admin:
        await admin.update_topic("FlagRefused", read_queue_nums=1, write_queue_nums=1)
    delayed = java_entry(b"a", b"TAGS\x01t\x02") + java_entry(b"b", b"DELAY\x012\x02")
    cases = [
        ("FlagRefused", delayed, "a batch cannot hold delayed messages"),
        ("%RETRY%cg", entry_of("r", 0) * 2, "batch request does not support retry group"),
    ]
    for topic, body, says in cases:
        remarks = set()
        for form, code, frame in [
            *FLAGGED,
            ("json-320", RequestCode.SEND_BATCH_MESSAGE, json_frame),
        ]:
            fields = (v1_fields if code == RequestCode.SEND_MESSAGE else v2_fields)(
                topic, 0, BATCH_PROPS
            )
            answer = await raw_request(addr, frame(code, fields, 1, body))
            assert answer.code == ResponseCode.MESSAGE_ILLEGAL, (form, answer.remark)
            assert says in str(answer.remark), (form, answer.remark)
            remarks.add(answer.remark)
        assert len(remarks) == 1, remarks  # the header flag is answered as code 320 is
    # A batch of several topics has no bytes on the wire: RocketMQ's batch body carries no
    # topic per message (every one goes to the header's), so the client refuses it.
    async with Producer("pg-flag", ns) as producer:
        with pytest.raises(MessageIllegalError, match="one topic"):
            await producer.send_batch([Message("FlagRefused", b"a"), Message("Other", b"b")])
    async with Admin(ns) as admin:
        assert sum(q.max_offset for q in await admin.topic_status("FlagRefused")) == 0
