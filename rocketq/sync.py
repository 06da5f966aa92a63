"""Blocking twins of the SDK's clients, with the same names and methods, for code without
asyncio::

    from rocketq.sync import Message, Producer

    with Producer(group="pg", namesrv="127.0.0.1:9876") as producer:
        producer.send(Message(topic="T", body=b"hi"))

Every method of a twin has the parameters of its asynchronous method and returns what
that coroutine returns; ``send_async`` returns a :class:`concurrent.futures.Future`; a
consumer is iterated with ``for msg in consumer`` where the asynchronous one takes
``async for``; ``with`` starts a client and shuts it down, as does ``close()``. Every client
object lives on one event loop in a background thread; a call runs the asynchronous method
there and waits for its result. The data types (``Message``, ``ConsumeResult`` ...) are the
same objects as in ``rocketq``; ``async_client`` is the asynchronous client a twin drives.
"""

from __future__ import annotations

from rocketq.common.message import Message, MessageExt, MessageQueue
from rocketq.sdk.blocking import Admin, Producer, PullConsumer, PushConsumer, TransactionProducer
from rocketq.sdk.consumer_types import ConsumeFrom, ConsumeResult, MessageModel, MessageSelector
from rocketq.sdk.producer import SendResult, SendStatus, split_batches
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
