"""Blocking twins of the SDK's classes, same names and methods, for code without asyncio.

Every client object lives on one event loop that runs in a background thread; a method
call runs the asynchronous method there and waits for its result::

    from rocketq.sync import Producer
    with Producer(group="pg", namesrv="127.0.0.1:9876") as producer:
        producer.send(Message(topic="T", body=b"hi"))
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from rocketq.sdk import admin as _admin
from rocketq.sdk import producer as _producer
from rocketq.sdk import pull_consumer as _pull
from rocketq.sdk import push_consumer as _push
from rocketq.sdk import transaction as _transaction

T = TypeVar("T")
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The SDK's one event loop for blocking callers, running in a daemon thread."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="rocketq-sdk", daemon=True)
            thread.start()
            atexit.register(loop.call_soon_threadsafe, loop.stop)
            _loop = loop
        return _loop


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the SDK's one background event loop and wait for its result. The
    SDK's clients and their connections belong to the loop that made them: code that needs
    the SDK from plain threads (Spark tasks, say) calls it through here rather than starting
    loops of its own."""
    return asyncio.run_coroutine_threadsafe(coro, background_loop()).result()


class _Blocking:
    """Wraps one asynchronous client object; coroutine methods become blocking calls."""

    _target: Callable[..., Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        async def make() -> Any:
            return self._target(*args, **kwargs)

        object.__setattr__(self, "_obj", run_blocking(make()))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._obj, name)
        if inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            def blocking(*args: Any, **kwargs: Any) -> Any:
                return run_blocking(attr(*args, **kwargs))

            return blocking
        return attr

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class Producer(_Blocking):
    _target = _producer.Producer


class TransactionProducer(_Blocking):
    """The listener's methods may be plain functions: they run on a thread pool."""

    _target = _transaction.TransactionProducer


class PushConsumer(_Blocking):
    """Handlers may be plain functions: they run on the consumer's thread pool."""

    _target = _push.PushConsumer


class PullConsumer(_Blocking):
    _target = _pull.PullConsumer


class Admin(_Blocking):
    _target = _admin.Admin


__all__ = ["Admin", "Producer", "PullConsumer", "PushConsumer", "TransactionProducer"]
