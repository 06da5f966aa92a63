"""Names consumers share: message model, where to start, listener results, selectors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rocketq.common.sql92 import validate


class MessageModel(enum.Enum):
    """How a consumer group reads its topics.

    Attributes:
        CLUSTERING: The group's consumers share the queues; offsets live on the brokers
            and failed messages are retried through ``%RETRY%<group>``.
        BROADCASTING: Every consumer reads every queue; offsets live in a local file and
            nothing is retried.
    """

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFrom(enum.Enum):
    """Where a queue the group has no committed offset for starts.

    Attributes:
        LAST_OFFSET: After the messages stored so far.
        FIRST_OFFSET: At the oldest stored message.
        TIMESTAMP: At the first message stored at or after the consumer's
            ``consume_timestamp_ms`` (by default 30 minutes before it started).
    """

    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeResult(enum.Enum):
    """What a push consumer's handler answers for a batch.

    Attributes:
        SUCCESS: The batch is consumed.
        RECONSUME_LATER: Retry it: a concurrent group's broker delivers it again later
            (up to ``max_reconsume_times``, then to ``%DLQ%<group>``); an orderly group
            consumes it again after ``suspend_current_queue_time``.
        SUSPEND: Orderly groups: RocketMQ's SUSPEND_CURRENT_QUEUE_A_MOMENT, the same as
            RECONSUME_LATER.
    """

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription expression: tags ("TagA || TagB", "*") or SQL92.

    Attributes:
        expression: The tags, or the SQL92 condition.
        type: "TAG" or "SQL92".
    """

    expression: str = "*"
    type: str = "TAG"

    @staticmethod
    def tags(expression: str = "*") -> MessageSelector:
        """Messages with one of the tags of ``expression`` ("TagA || TagB"; "*": all)."""
        return MessageSelector(expression, "TAG")

    @staticmethod
    def sql(expression: str) -> MessageSelector:
        """A SQL92 condition on properties (brokers need enable_property_filter = true).
        A bad expression raises SubscriptionParseFailedError naming its position."""
        validate(expression)
        return MessageSelector(expression, "SQL92")

    @property
    def is_sql(self) -> bool:
        """Whether the expression is SQL92."""
        return self.type.upper() == "SQL92"
