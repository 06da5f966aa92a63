"""Queue allocation strategies (RocketMQ's AllocateMessageQueueStrategy), as pure functions:
(group, this consumer's id, every queue, every consumer id) -> this consumer's queues."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence
from typing import Final

from cluster.message import MessageQueue

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def allocate_averagely(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Contiguous blocks of the sorted queues, the first ``len(mq) % len(cid)`` consumers
    getting one more (AllocateMessageQueueAveragely)."""
    mqs, cids = sorted(mq_all), sorted(cid_all)
    if not mqs or current_cid not in cids:
        return []
    index, n, m = cids.index(current_cid), len(mqs), len(cids)
    mod = n % m
    if n <= m:
        size = 1
    elif mod > 0 and index < mod:
        size = n // m + 1
    else:
        size = n // m
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, n - start)
    return [mqs[(start + i) % n] for i in range(max(0, count))]


def allocate_averagely_by_circle(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Queue i goes to consumer i % len(consumers) (AllocateMessageQueueAveragelyByCircle)."""
    mqs, cids = sorted(mq_all), sorted(cid_all)
    if current_cid not in cids:
        return []
    index = cids.index(current_cid)
    return [mq for i, mq in enumerate(mqs) if i % len(cids) == index]


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:8], "little")


def allocate_consistent_hash(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
    virtual_nodes: int = 10,
) -> list[MessageQueue]:
    """A ring of consumers (``virtual_nodes`` each, MD5 positions); a queue belongs to the
    first node clockwise from its own position, so a leaving consumer only moves its own
    queues (AllocateMessageQueueConsistentHash)."""
    cids = sorted(set(cid_all))
    if current_cid not in cids:
        return []
    ring = sorted((_hash(f"{cid}-{i}"), cid) for cid in cids for i in range(virtual_nodes))
    points = [p for p, _ in ring]
    mine = []
    for mq in sorted(mq_all):
        at = bisect.bisect_left(points, _hash(f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"))
        if ring[at % len(ring)][1] == current_cid:
            mine.append(mq)
    return mine


STRATEGIES: Final[dict[str, AllocateStrategy]] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}
