"""What the admin client's queries return: queue offsets, a group's progress in a queue,
where a group stands with a message, and the brokers of the cluster list."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueueOffsets:
    """A queue's offsets on its broker.

    Attributes:
        broker_name: The broker group holding the queue.
        queue_id: The queue.
        min_offset: Its oldest stored message's offset.
        max_offset: One past its newest message's offset.
        last_update_timestamp_ms: When its newest message was stored, in epoch
            milliseconds (0: never).
    """

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """How far a consumer group is in one queue.

    Attributes:
        topic: The queue's topic.
        broker_name: The broker group holding the queue.
        queue_id: The queue.
        broker_offset: One past the queue's newest message.
        consumer_offset: The group's committed offset.
        last_timestamp_ms: When the message at the committed offset was stored, in epoch
            milliseconds (0: none).
    """

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp_ms: int

    @property
    def lag(self) -> int:
        """Messages the group has not consumed yet."""
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass(frozen=True, slots=True)
class MessageTrack:
    """Where a consumer group stands with one message (RocketMQ's TrackType).

    Attributes:
        group: The consumer group.
        state: CONSUMED, CONSUMED_BUT_FILTERED, NOT_CONSUME_YET, NOT_ONLINE or UNKNOWN.
        detail: Why, when the state needs explaining.
    """

    group: str
    state: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One broker of the cluster list.

    Attributes:
        cluster: Its cluster.
        broker_name: Its broker group.
        broker_id: 0 for the master, a slave's id otherwise.
        addr: Its address.
        runtime: Its runtime figures (RocketMQ's GET_BROKER_RUNTIME_INFO), by name.
    """

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str]
