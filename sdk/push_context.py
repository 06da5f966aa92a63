"""What the push consumer's services (rebalance, pull, consume) read of the consumer that
wires them: its settings, connection, tables and each other, as protocols, so that each
service module depends on this one and never on :mod:`rocketq.sdk.push_consumer`.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from rocketq.common.message import MessageExt, MessageQueue
from rocketq.sdk.client import ClientInstance
from rocketq.sdk.consumer_config import ConsumerConfig
from rocketq.sdk.consumer_stats import ConsumerStats
from rocketq.sdk.consumer_types import ConsumeFrom, ConsumeResult, MessageSelector
from rocketq.sdk.message_stream import MessageStream
from rocketq.sdk.metrics import ClientMetrics
from rocketq.sdk.offset_store import RemoteOffsetStore
from rocketq.sdk.orderly_locks import QueueLocks
from rocketq.sdk.process_queue import ProcessQueue
from rocketq.sdk.trace import TraceDispatcher

Handler = Callable[[list[MessageExt]], Awaitable[ConsumeResult] | ConsumeResult]
"""A push consumer's listener: it gets a batch of messages (one by default) and says how
its consumption went; plain functions run on the consumer's thread pool."""


class Puller(Protocol):
    """The pull service, as the rebalance service starts and stops its loops."""

    def start_queue(
        self, mq: MessageQueue, pq: ProcessQueue, selector: MessageSelector, offset: int
    ) -> None:
        """Start pulling ``mq`` from ``offset`` into ``pq``."""

    def stop_queue(self, mq: MessageQueue) -> None:
        """Stop pulling ``mq``."""


class Consumer(Protocol):
    """The consume service, as the pull and rebalance services hand it queues and messages."""

    def on_pulled(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], arrived: float
    ) -> None:
        """A pull of ``mq`` brought ``msgs`` (put in ``pq`` already) at ``arrived``."""

    def start_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """The consumer now owns ``mq``."""

    async def stop_queue(self, mq: MessageQueue, wait: float = 1.0) -> None:
        """The consumer no longer owns ``mq``."""

    def max_reconsume_times(self) -> int:
        """How often a message is retried before it goes to the group's DLQ."""


class PushContext(Protocol):
    """The push consumer, as its services see it (the attributes are the consumer's)."""

    group: str
    config: ConsumerConfig
    client: ClientInstance
    consume_from: ConsumeFrom
    orderly: bool
    running: bool
    subscriptions: dict[str, MessageSelector]
    process_queues: dict[MessageQueue, ProcessQueue]
    offsets: RemoteOffsetStore
    stats: ConsumerStats
    bad_messages: collections.Counter[str]
    tracer: TraceDispatcher | None
    locks: QueueLocks
    handler: Handler | None
    _metrics: ClientMetrics | None
    _async_handler: bool
    _pool: ThreadPoolExecutor | None
    _stream: MessageStream | None

    @property
    def broadcasting(self) -> bool:
        """Whether every consumer of the group reads every queue."""

    @property
    def pull_service(self) -> Puller:
        """The pull loops of the owned queues."""

    @property
    def consume_service(self) -> Consumer:
        """The concurrent or the orderly consume service."""
