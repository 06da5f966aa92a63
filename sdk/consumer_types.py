"""Names consumers share: message model, where to start, listener results, selectors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rocketq.common.sql92 import validate


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFrom(enum.Enum):
    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeResult(enum.Enum):
    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription expression: tags ("TagA || TagB", "*") or SQL92."""

    expression: str = "*"
    type: str = "TAG"

    @staticmethod
    def tags(expression: str = "*") -> MessageSelector:
        return MessageSelector(expression, "TAG")

    @staticmethod
    def sql(expression: str) -> MessageSelector:
        """A SQL92 condition on properties (brokers need enable_property_filter = true).
        A bad expression raises SubscriptionParseFailedError naming its position."""
        validate(expression)
        return MessageSelector(expression, "SQL92")

    @property
    def is_sql(self) -> bool:
        return self.type.upper() == "SQL92"
