"""The awaitable layer over pika's asyncio adapter that the RabbitMQ peer publishes through:
many single publishes in flight on one channel, each waiting for the confirm of its own
delivery tag (the concurrent scenario), over a fake pika channel."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from rocketq.bench.peers.systems.amqp import AmqpChannel, AmqpError


class FakePikaChannel:
    """What AmqpChannel calls on a pika channel; confirms are sent by the test."""

    def __init__(self) -> None:
        self.published: list[bytes] = []
        self.on_confirm: Callable[[Any], None] | None = None
        self.on_close: Callable[[Any, BaseException], None] | None = None

    def add_on_close_callback(self, callback: Callable[[Any, BaseException], None]) -> None:
        self.on_close = callback

    def confirm_delivery(self, on_confirm: Callable[[Any], None], callback: Any) -> None:
        self.on_confirm = on_confirm
        callback(None)

    def basic_publish(self, exchange: str, routing_key: str, body: bytes, props: Any) -> None:
        self.published.append(body)

    def confirm(self, tag: int, *, nack: bool = False) -> None:
        name = "Basic.Nack" if nack else "Basic.Ack"
        assert self.on_confirm is not None
        self.on_confirm(SimpleNamespace(method=SimpleNamespace(NAME=name, delivery_tag=tag)))


async def _channel() -> tuple[FakePikaChannel, AmqpChannel]:
    fake = FakePikaChannel()
    channel = AmqpChannel(None, fake)  # type: ignore[arg-type]  # no connection needed
    await channel.enable_confirms()
    return fake, channel


async def _publish(channel: AmqpChannel, body: bytes) -> int:
    tag = channel.publish("q", body, None)
    await channel.confirmed(tag)
    return tag


async def test_each_of_32_publishes_in_flight_waits_for_its_own_confirm() -> None:
    fake, channel = await _channel()
    sends = [asyncio.ensure_future(_publish(channel, b"%d" % i)) for i in range(32)]
    await asyncio.sleep(0)
    assert len(fake.published) == 32 and not any(s.done() for s in sends)
    fake.confirm(20)  # a multiple ack up to tag 20
    await asyncio.sleep(0)
    assert [s.done() for s in sends] == [True] * 20 + [False] * 12
    fake.confirm(32)
    assert await asyncio.gather(*sends) == list(range(1, 33))


async def test_a_nack_fails_the_sends_it_covers_and_later_ones_go_on() -> None:
    fake, channel = await _channel()
    sends = [asyncio.ensure_future(_publish(channel, b"x")) for _ in range(4)]
    await asyncio.sleep(0)
    fake.confirm(2, nack=True)
    fake.confirm(4)
    results = await asyncio.gather(*sends, return_exceptions=True)
    assert [type(r) for r in results[:2]] == [AmqpError, AmqpError]
    assert results[2:] == [3, 4]


async def test_a_closed_channel_fails_every_send_in_flight() -> None:
    fake, channel = await _channel()
    sends = [asyncio.ensure_future(_publish(channel, b"x")) for _ in range(3)]
    await asyncio.sleep(0)
    assert fake.on_close is not None
    fake.on_close(fake, RuntimeError("connection lost"))
    with pytest.raises(AmqpError, match="connection lost"):
        await asyncio.gather(*sends)
