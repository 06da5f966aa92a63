"""Batch sends on real processes: a long list split into legal batches arrives whole and
in order per batch; illegal batches are refused with nothing stored."""

from __future__ import annotations

import os

import pytest

from rocketq import Message, Producer, split_batches
from rocketq.cluster.errors import MessageIllegalError, NoPermissionError
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin


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
