"""Queue selectors for ordered messages: a function ``(queues, message, arg) -> queue``, as
RocketMQ's MessageQueueSelector; :func:`select_by_hash` is its SelectMessageQueueByHash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketq.common.message import Message, MessageQueue

MessageQueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]
"""Picks the queue of a message among the topic's writable queues, given the send's
``arg``: messages it sends to one queue are stored in send order."""


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (a signed 32-bit int), so keys map to the queues RocketMQ's
    SelectMessageQueueByHash would pick."""
    h = 0
    raw = text.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def select_by_hash(mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """The queue of ``arg``'s hash (RocketMQ's SelectMessageQueueByHash)."""
    key = arg if isinstance(arg, str) else str(arg)
    return mqs[abs(java_string_hash(key)) % len(mqs)]
