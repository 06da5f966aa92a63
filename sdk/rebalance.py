"""Queue allocation strategies (RocketMQ's ``AllocateMessageQueueStrategy``).

Each strategy is a pure function ``(group, this consumer's id, every queue, every consumer
id) -> this consumer's queues``. RocketMQ's ``RebalanceImpl`` sorts the queues and the
consumer ids before it calls a strategy; here every strategy sorts (and de-duplicates) its
inputs itself, so the answer never depends on the order the caller passes them in, and every
consumer of a group computing its own share sees the same global assignment: each queue goes
to exactly one consumer.

A consumer that is not in the consumer list (it registered after the broker answered) gets
nothing, as in RocketMQ, which logs and returns an empty list; so does an empty queue or
consumer list (where RocketMQ throws).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from typing import Final, Protocol

from rocketq.common.message import MessageQueue

DEFAULT_VIRTUAL_NODES: Final = 10


class AllocateStrategy(Protocol):
    """The signature every allocation strategy has."""

    def __call__(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]: ...


def _prepare(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> tuple[list[MessageQueue], list[str], int] | None:
    """Sorted unique queues and consumer ids and this consumer's index, or None when this
    consumer gets nothing."""
    mqs, cids = sorted(set(mq_all)), sorted(set(cid_all))
    if not mqs or current_cid not in cids:
        return None
    return mqs, cids, cids.index(current_cid)


def allocate_averagely(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
) -> list[MessageQueue]:
    """Contiguous "pages" of the sorted queues (AllocateMessageQueueAveragely).

    With ``n`` queues and ``m`` consumers each consumer gets ``n // m`` queues and the first
    ``n % m`` consumers one more; with ``n <= m`` the first ``n`` consumers get one queue each
    and the rest sit idle. 8 queues / 3 consumers -> 3, 3, 2.
    """
    prepared = _prepare(current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    mqs, cids, index = prepared
    n, m = len(mqs), len(cids)
    mod = n % m
    if n <= m:
        average_size = 1
    elif mod > 0 and index < mod:
        average_size = n // m + 1
    else:
        average_size = n // m
    start = index * average_size if mod > 0 and index < mod else index * average_size + mod
    count = min(average_size, n - start)
    return [mqs[(start + i) % n] for i in range(count)]


def allocate_averagely_by_circle(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
) -> list[MessageQueue]:
    """Queue ``i`` of the sorted queues goes to consumer ``i % m``
    (AllocateMessageQueueAveragelyByCircle): consecutive queues, usually on the same broker,
    land on different consumers."""
    prepared = _prepare(current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    mqs, cids, index = prepared
    return mqs[index :: len(cids)]


def ring_hash(key: str) -> int:
    """A position on the ring: the first 4 bytes of the key's MD5 (UTF-8) as a big-endian
    unsigned number, exactly RocketMQ's ``ConsistentHashRouter.MD5Hash``."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def queue_key(mq: MessageQueue) -> str:
    """The key a queue is hashed by: ``topic@broker_name@queue_id``."""
    return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"


def allocate_consistent_hash(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES,
) -> list[MessageQueue]:
    """A consistent-hash ring of consumers (AllocateMessageQueueConsistentHash).

    Consumer ``c`` has ``virtual_nodes`` points on the ring, at ``ring_hash(f"{c}-{i}")``; a
    queue belongs to the consumer of the first point at or after ``ring_hash(queue_key(q))``,
    wrapping around. When two points collide the later consumer in sorted order keeps it (as
    RocketMQ's TreeMap does with sorted input). A consumer joining or leaving only moves the
    queues it takes or gives up; the shares are uneven for few queues.
    """
    if virtual_nodes < 1:
        raise ValueError(f"virtual_nodes must be at least 1, not {virtual_nodes}")
    prepared = _prepare(current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    mqs, cids, _ = prepared
    owner_at = {ring_hash(f"{cid}-{i}"): cid for cid in cids for i in range(virtual_nodes)}
    points = sorted(owner_at)
    mine: list[MessageQueue] = []
    for mq in mqs:
        at = bisect.bisect_left(points, ring_hash(queue_key(mq)))
        if owner_at[points[at % len(points)]] == current_cid:
            mine.append(mq)
    return mine


STRATEGIES: Final[dict[str, AllocateStrategy]] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}
"""Strategies by the name a consumer's ``allocate_strategy`` setting uses."""
