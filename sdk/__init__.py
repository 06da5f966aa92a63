"""The Python client: producers, consumers and admin, asyncio first with a blocking twin
in ``sdk.sync``.

May import ``cluster`` only; never a server package.
"""

from __future__ import annotations

from cluster.message import Message, MessageExt, MessageQueue
from sdk.consumer_types import ConsumeFrom, ConsumeResult, MessageModel, MessageSelector
from sdk.producer import Producer, ProducerConfig, SendResult, SendStatus, split_batches
from sdk.push_consumer import ConsumerConfig, PushConsumer
from sdk.transaction import (
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
    TransactionState,
)

__all__ = [
    "ConsumeFrom",
    "ConsumeResult",
    "ConsumerConfig",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "ProducerConfig",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "split_batches",
]
