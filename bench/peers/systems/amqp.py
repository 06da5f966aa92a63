"""A small awaitable layer over pika's callback-style ``AsyncioConnection``: open a
connection and a channel, run a synchronous AMQP method to its reply, publish with
publisher confirms (many in flight), and consume into an asyncio queue."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, Final

# Without confirms a publisher waits while pika's transport holds more than this unsent.
WRITE_BUFFER_LIMIT: Final = 1 << 20


class AmqpError(RuntimeError):
    """The broker refused or closed something."""


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


def _settle(fut: asyncio.Future[Any], value: Any = None) -> None:
    if not fut.done():
        fut.set_result(value)


def _fail(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


class AmqpChannel:
    """One channel; with ``confirms`` every publish is confirmed by the broker."""

    def __init__(self, connection: AmqpConnection, channel: Any) -> None:
        self.connection = connection
        self.channel = channel
        self._published = 0  # delivery tags handed out
        self._confirmed = 0
        self._waiting: collections.deque[tuple[int, asyncio.Future[Any]]] = collections.deque()
        self.confirms = False
        self._closed: asyncio.Future[Any] = _future()
        # A closed channel is an error only to a caller waiting on it: never "unretrieved".
        self._closed.add_done_callback(lambda f: f.cancelled() or f.exception())
        channel.add_on_close_callback(self._on_close)

    def _on_close(self, _channel: Any, reason: BaseException) -> None:
        exc = AmqpError(f"channel closed: {reason}")
        _fail(self._closed, exc)
        while self._waiting:
            _fail(self._waiting.popleft()[1], exc)

    async def call(self, method: Callable[..., Any], **kwargs: Any) -> Any:
        """Run a synchronous method (queue_declare, basic_qos ...) and return its reply."""
        fut = _future()
        method(callback=lambda frame: _settle(fut, frame), **kwargs)
        done, _ = await asyncio.wait({fut, self._closed}, return_when=asyncio.FIRST_COMPLETED)
        if fut not in done:
            self._closed.result()  # raises why the channel closed
        return fut.result()

    async def enable_confirms(self) -> None:
        fut = _future()
        self.channel.confirm_delivery(self._on_confirm, callback=lambda f: _settle(fut, f))
        await fut
        self.confirms = True

    def _on_confirm(self, frame: Any) -> None:
        # One queue per channel here, so RabbitMQ confirms in publishing order: a confirm
        # of tag N (multiple or not) settles every publish up to N.
        method = frame.method
        self._confirmed = max(self._confirmed, method.delivery_tag)
        nack = method.NAME.endswith("Nack")
        while self._waiting and self._waiting[0][0] <= self._confirmed:
            _tag, fut = self._waiting.popleft()
            if nack:
                _fail(fut, AmqpError(f"broker nacked delivery tag {method.delivery_tag}"))
            else:
                _settle(fut)

    def publish(self, routing_key: str, body: bytes, properties: Any) -> int:
        self.channel.basic_publish("", routing_key, body, properties)
        self._published += 1
        return self._published

    async def confirmed(self, tag: int) -> None:
        """Wait until the broker confirmed every publish up to ``tag``."""
        if tag <= self._confirmed:
            return
        fut = _future()
        self._waiting.append((tag, fut))
        await fut

    async def drained(self) -> None:
        """Wait while pika holds more than WRITE_BUFFER_LIMIT bytes it could not send."""
        while self.connection.write_buffer_size() > WRITE_BUFFER_LIMIT:
            await asyncio.sleep(0.001)


class AmqpConnection:
    def __init__(self, connection: Any) -> None:
        self.connection = connection

    @classmethod
    async def open(cls, host: str, port: int) -> AmqpConnection:
        import pika
        from pika.adapters.asyncio_connection import AsyncioConnection

        opened = _future()
        AsyncioConnection(
            pika.ConnectionParameters(host=host, port=port, heartbeat=0),
            on_open_callback=lambda conn: _settle(opened, conn),
            on_open_error_callback=lambda _c, err: _fail(opened, AmqpError(str(err))),
            custom_ioloop=asyncio.get_running_loop(),
        )
        return cls(await opened)

    async def channel(self) -> AmqpChannel:
        fut = _future()
        self.connection.channel(on_open_callback=lambda ch: _settle(fut, ch))
        return AmqpChannel(self, await fut)

    def write_buffer_size(self) -> int:
        transport = getattr(self.connection, "_transport", None)
        size = getattr(transport, "get_write_buffer_size", None)
        return int(size()) if size is not None else 0

    async def close(self) -> None:
        if self.connection.is_closed or self.connection.is_closing:
            return
        fut = _future()
        self.connection.add_on_close_callback(lambda _c, _r: _settle(fut))
        self.connection.close()
        await asyncio.wait_for(fut, 10)
