"""A broker with 10,000 topics (40,000 queues): created by producers' first sends, written,
read back, restarted gracefully (every queue's end taken from what the stop recorded), then
SIGKILLed and restarted; every acknowledged message is readable again, the nameserver
routes every topic, and every ConsumeQueue file holds exactly the bytes a ConsumeQueue
given the CommitLog's records one ``put`` at a time writes."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

from rocketq import Message, MessageQueue, Producer, SendResult
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.record import decode_record, decode_records, iter_records, tags_hash_code
from rocketq.remoting.transport import connect
from rocketq.sdk.admin import Admin
from rocketq.sdk.wire import PullOutcome, parse_pull, pull_request
from rocketq.storage.consume_queue import ConsumeQueue
from tests.integration.conftest import MakeCluster

TOPICS = 10_000
IN_FLIGHT = 64
CQ_FILE_SIZE = 20 * 50  # small ConsumeQueue files: 40,000 queues of 6 MB each take long to read


def name(i: int) -> str:
    return f"Many-{i:05d}"


async def send_all(ns: str) -> dict[str, SendResult]:
    """One message to each topic (its first send creates it), 64 in flight."""
    results: dict[str, SendResult] = {}
    todo = iter(range(TOPICS))
    async with Producer("pg-many", ns) as producer:

        async def worker() -> None:
            for i in todo:
                results[name(i)] = await producer.send(Message(name(i), b"body-%d" % i))

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return results


async def read_back(addr: str, sent: dict[str, SendResult]) -> dict[str, bytes]:
    """Pull each acknowledged message from its queue at its offset, 64 pulls in flight on
    one connection."""
    got: dict[str, bytes] = {}
    items = iter(sent.items())
    conn = await connect(addr, {}, timeout=5)
    try:

        async def worker() -> None:
            for topic, result in items:
                queue: MessageQueue = result.queue
                request = pull_request(
                    group="cg-many",
                    topic=topic,
                    queue_id=queue.queue_id,
                    offset=result.queue_offset,
                    max_msg_nums=1,
                )
                reply = parse_pull(await conn.invoke(request, 30))  # raises on an error code
                assert reply.outcome is PullOutcome.FOUND, (topic, reply.outcome)
                (msg,) = decode_records(reply.records)
                got[topic] = msg.body

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    finally:
        conn.close()
    return got


def commit_log_records(commit_log: Path) -> list[tuple[int, bytes]]:
    """(CommitLog offset, record) of every record of the store's CommitLog, in order."""
    out = []
    for segment in sorted(commit_log.iterdir()):
        data = segment.read_bytes()
        end = len(data.rstrip(b"\0"))  # the segment's unwritten rest is zeros
        base = int(segment.name)
        out.extend((base + pos, data[pos : pos + size]) for pos, size in iter_records(data[:end]))
    return out


def reference_queues(records: list[tuple[int, bytes]], into: Path) -> None:
    """The ConsumeQueue files the records make when each entry is written by one ``put``."""
    queues: dict[tuple[str, int], ConsumeQueue] = {}
    for offset, record in records:
        msg = decode_record(record)
        key = (msg.topic, msg.queue_id)
        cq = queues.get(key)
        if cq is None:
            cq = ConsumeQueue(
                msg.topic, msg.queue_id, into / msg.topic / str(msg.queue_id), CQ_FILE_SIZE
            )
            cq.load()
            queues[key] = cq
        code = tags_hash_code(msg.tags) if msg.tags else 0
        assert cq.put(offset, len(record), code, msg.queue_offset)
    for cq in queues.values():
        cq.close()


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_ten_thousand_topics_survive_a_sigkill(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster: LocalCluster = make_cluster(
        broker_settings={
            "default_topic_queue_nums": "4",
            "mapped_file_size_consume_queue": str(CQ_FILE_SIZE),
        }
    )
    ns = cluster.namesrv_addr
    broker = cluster.brokers[0]
    sent = await send_all(ns)
    assert len(sent) == TOPICS and all(r.ok for r in sent.values())
    expected = {name(i): b"body-%d" % i for i in range(TOPICS)}
    assert await read_back(broker.addr, sent) == expected
    async with Admin(ns) as admin:
        routed = set(await admin.topic_list())
    assert set(expected) <= routed

    await asyncio.to_thread(cluster.restart, broker.name)  # SIGTERM, then start again
    log = broker.log.read_text()
    loaded = re.findall(r"store loaded from .*, (\d+) queues, fast recovery", log)
    assert len(loaded) == 2 and int(loaded[1]) >= TOPICS, loaded
    assert f": {loaded[1]} consume queues took their end from the clean stop's record\n" in log
    assert await read_back(broker.addr, sent) == expected

    await asyncio.to_thread(cluster.kill, broker.name, signal.SIGKILL)
    await asyncio.to_thread(cluster.restart, broker.name)

    assert await read_back(broker.addr, sent) == expected
    async with Admin(ns) as admin:
        routed = set(await admin.topic_list())
        status = await admin.topic_status(name(TOPICS - 1))
    assert set(expected) <= routed
    assert sum(q.max_offset for q in status) == 1
    # And it takes new messages on every topic's queues.
    async with Producer("pg-many-after", ns) as producer:
        for i in (0, TOPICS // 2, TOPICS - 1):
            assert (await producer.send(Message(name(i), b"again"))).ok

    # Stopped (the queues flushed), the store's ConsumeQueues hold what the one-put-at-a-time
    # writer makes of the CommitLog's records.
    await asyncio.to_thread(cluster.kill, broker.name, signal.SIGTERM)
    records = commit_log_records(broker.store / "commitlog")
    assert len(records) == TOPICS + 3
    reference = tmp_path / "reference"
    reference_queues(records, reference)
    written = files_under(broker.store / "consumequeue")
    expected_files = files_under(reference)
    assert len(expected_files) >= TOPICS
    assert set(expected_files) <= set(written)
    # Beside them only the first files a new topic's queues get ahead of their first entry
    # (the store prepares them), still empty.
    for n in set(written) - set(expected_files):
        assert n.endswith("/00000000000000000000") and written[n] == bytes(CQ_FILE_SIZE), n
    assert [n for n in expected_files if written[n] != expected_files[n]] == []
