"""rocketq: a RocketMQ-style distributed message queue written in Python.

The SDK's public names, asyncio first::

    from rocketq import Message, Producer

    async with Producer(group="pg", namesrv="127.0.0.1:9876") as producer:
        await producer.send(Message(topic="T", body=b"hello"))

``rocketq.sync`` has blocking twins with the same names and methods, ``rocketq.errors``
every error class. The servers, the store and the CLI live in the subpackages
(``rocketq.broker``, ``rocketq.storage``, ``rocketq.cluster.cli`` ...); ``python -m rocketq``
runs the CLI.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from rocketq.cluster.message import Message, MessageExt, MessageQueue
from rocketq.sdk.admin import Admin
from rocketq.sdk.consumer_types import ConsumeFrom, ConsumeResult, MessageModel, MessageSelector
from rocketq.sdk.metrics import ClientMetrics
from rocketq.sdk.producer import Producer, ProducerConfig, SendResult, SendStatus, split_batches
from rocketq.sdk.pull_consumer import PullConsumer, PullConsumerConfig
from rocketq.sdk.push_consumer import ConsumerConfig, PushConsumer
from rocketq.sdk.transaction import (
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
    TransactionState,
)

try:
    __version__ = version("rocketq")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Admin",
    "ClientMetrics",
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
    "PullConsumer",
    "PullConsumerConfig",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "__version__",
    "split_batches",
]
