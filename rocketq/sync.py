"""Blocking twins of the SDK's clients, with the same names and methods, for code without
asyncio::

    from rocketq import Message
    from rocketq.sync import Producer

    with Producer(group="pg", namesrv="127.0.0.1:9876") as producer:
        producer.send(Message(topic="T", body=b"hi"))

Every client object lives on one event loop in a background thread; a method call runs
the asynchronous method there and waits for its result. The data types (``Message``,
``ConsumeResult`` ...) are the same objects as in ``rocketq``.
"""

from __future__ import annotations

from rocketq.common.message import Message, MessageExt, MessageQueue
from rocketq.sdk.consumer_types import ConsumeFrom, ConsumeResult, MessageModel, MessageSelector
from rocketq.sdk.producer import SendResult, SendStatus, split_batches
from rocketq.sdk.sync import Admin, Producer, PullConsumer, PushConsumer, TransactionProducer
from rocketq.sdk.transaction import TransactionListener, TransactionSendResult, TransactionState

__all__ = [
    "Admin",
    "ConsumeFrom",
    "ConsumeResult",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "split_batches",
]
