"""rocketq: a RocketMQ-style distributed message queue written in Python.

The SDK's public names, asyncio first::

    from rocketq import Message, Producer

    async with Producer(group="pg", namesrv="127.0.0.1:9876") as producer:
        await producer.send(Message(topic="T", body=b"hello"))

``rocketq.sync`` has blocking twins with the same names and methods, ``rocketq.errors``
every error class. The servers, the store and the CLI live in the subpackages
(``rocketq.broker``, ``rocketq.storage``, ``rocketq.cli.main`` ...); ``python -m rocketq``
runs the CLI.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketq.common.message import Message, MessageExt, MessageQueue
    from rocketq.sdk.admin import Admin
    from rocketq.sdk.consumer_config import ConsumerConfig, PullConsumerConfig
    from rocketq.sdk.consumer_types import (
        ConsumeFrom,
        ConsumeResult,
        MessageModel,
        MessageSelector,
    )
    from rocketq.sdk.metrics import ClientMetrics
    from rocketq.sdk.producer import (
        Producer,
        ProducerConfig,
        SendResult,
        SendStatus,
        split_batches,
    )
    from rocketq.sdk.pull_consumer import PullConsumer
    from rocketq.sdk.push_consumer import PushConsumer
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

# Where each public name lives. They are imported on first use, so the servers and the CLI,
# which import rocketq.<subpackage> (and so this package first), do not load the SDK.
_HOMES = {
    "Message": "rocketq.common.message",
    "MessageExt": "rocketq.common.message",
    "MessageQueue": "rocketq.common.message",
    "Admin": "rocketq.sdk.admin",
    "ConsumeFrom": "rocketq.sdk.consumer_types",
    "ConsumeResult": "rocketq.sdk.consumer_types",
    "MessageModel": "rocketq.sdk.consumer_types",
    "MessageSelector": "rocketq.sdk.consumer_types",
    "ClientMetrics": "rocketq.sdk.metrics",
    "Producer": "rocketq.sdk.producer",
    "ProducerConfig": "rocketq.sdk.producer",
    "SendResult": "rocketq.sdk.producer",
    "SendStatus": "rocketq.sdk.producer",
    "split_batches": "rocketq.sdk.producer",
    "PullConsumer": "rocketq.sdk.pull_consumer",
    "PullConsumerConfig": "rocketq.sdk.consumer_config",
    "ConsumerConfig": "rocketq.sdk.consumer_config",
    "PushConsumer": "rocketq.sdk.push_consumer",
    "TransactionListener": "rocketq.sdk.transaction",
    "TransactionProducer": "rocketq.sdk.transaction",
    "TransactionSendResult": "rocketq.sdk.transaction",
    "TransactionState": "rocketq.sdk.transaction",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its home module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rocketq' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> list[str]:
    """The module's names, the public ones not imported yet included."""
    return sorted([*globals(), *_HOMES])


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
