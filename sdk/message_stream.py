"""A push consumer's messages for ``async for``: the consumer's listener when it has no
handler of its own, handing each delivered message to the loop and waiting to hear how it
went.

Every ``async for`` loop over the consumer has at most one message in flight: the last one
it got. That message

* counts as consumed when the loop asks for the next one, or on ``consumer.ack(msg)``;
* goes back for retry, as a handler's RECONSUME_LATER would send it, on
  ``consumer.reconsume_later(msg)``, or when an exception raised in the loop's body leaves
  the consumer's ``async with`` block (the consumer shuts down, and the message returns:
  to the group through ``%RETRY%<group>``, or, for an orderly group, in queue order);
* once the loop is left otherwise (``break``, ``return``, or an exception caught inside the
  ``async with`` block), counts as consumed when the next loop over the consumer asks for
  a message, or when the consumer shuts down without an exception.

Messages are delivered as the group's consume services deliver them: an orderly group's
queues each in order, one message at a time per queue (a message sent back for retry comes
again before anything later of its queue); a concurrent group's as pulled. Nothing is
buffered beyond what the consumer's process queues already hold, so its flow-control limits
(``pull_threshold_for_queue`` ...) bound what waits for the loop. Messages pulled but never
handed to a loop when the consumer shuts down are neither consumed nor sent back: their
offsets are not committed, and the group reads them again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from rocketq.common.exceptions import ClientStateError
from rocketq.common.message import MessageExt
from rocketq.sdk.consumer_types import ConsumeResult


@dataclass(eq=False, slots=True)
class _Delivery:
    """A message handed to the loops, and how it went once known (True: consumed)."""

    msg: MessageExt
    settled: asyncio.Future[bool] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def settle(self, consumed: bool) -> None:
        if not self.settled.done():
            self.settled.set_result(consumed)


class MessageStream:
    """The hand-over between a push consumer's consume services and its ``async for``
    loops."""

    def __init__(self) -> None:
        self._ready: asyncio.Queue[_Delivery | None] = asyncio.Queue()
        self._in_flight: dict[int, _Delivery] = {}  # id(message) -> its delivery
        # Messages of loops that were left without asking for the next one.
        self._left: list[_Delivery] = []
        self._unseen: set[int] = set()  # ids of messages returned without a loop seeing them
        self.closed = False

    async def listener(self, batch: list[MessageExt]) -> ConsumeResult:
        """The consumer's listener: hand each message of ``batch`` to the loops in turn;
        RECONSUME_LATER as soon as one goes back for retry (the rest of the batch is not
        handed out: it comes again with it)."""
        for i, msg in enumerate(batch):
            if self.closed:
                self._unseen.update(id(m) for m in batch[i:])
                return ConsumeResult.RECONSUME_LATER
            delivery = _Delivery(msg)
            self._ready.put_nowait(delivery)
            if not await delivery.settled:
                if id(msg) in self._unseen:
                    self._unseen.update(id(m) for m in batch[i:])
                return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    def never_seen(self, batch: list[MessageExt]) -> bool:
        """Whether the consumer stopped before any loop got a message of ``batch`` (then
        its offsets stay uncommitted, and nothing is sent back)."""
        unseen = self._unseen
        if not any(id(m) in unseen for m in batch):
            return False
        unseen.difference_update(id(m) for m in batch)
        return True

    async def next(self) -> MessageExt | None:
        """The next message for a loop (the messages of loops left before count as consumed
        now); None once the consumer has stopped."""
        self._settle_left(consumed=True)
        while True:
            delivery = await self._ready.get()
            if delivery is None:
                self._ready.put_nowait(None)  # for every other loop waiting
                return None
            if delivery.settled.done():
                continue
            self._in_flight[id(delivery.msg)] = delivery
            return delivery.msg

    def settle(self, msg: MessageExt, *, consumed: bool) -> None:
        """Settle a message a loop got: consumed, or back for retry.

        Raises:
            ClientStateError: When ``msg`` is not a message in flight (already settled,
                or not delivered by this consumer).
        """
        delivery = self._in_flight.pop(id(msg), None)
        if delivery is None:
            delivery = next((d for d in self._left if d.msg is msg), None)
            if delivery is not None:
                self._left.remove(delivery)
        if delivery is None or delivery.msg is not msg:
            raise ClientStateError(
                f"message {msg.msg_id} is not in flight here: it was settled already (a "
                "message is consumed once the loop asks for the next one) or did not come "
                "from this consumer"
            )
        delivery.settle(consumed)

    def consumed_if_in_flight(self, msg: MessageExt) -> None:
        """Settle ``msg`` as consumed unless it was settled already (through ``ack`` or
        ``reconsume_later``)."""
        delivery = self._in_flight.pop(id(msg), None)
        if delivery is not None:
            delivery.settle(True)

    def left(self, msg: MessageExt) -> None:
        """The loop that got ``msg`` was left without asking for the next one: settled by
        the next loop's first step or by the consumer's shutdown."""
        delivery = self._in_flight.pop(id(msg), None)
        if delivery is not None:
            self._left.append(delivery)

    def _settle_left(self, *, consumed: bool) -> None:
        left, self._left = self._left, []
        for delivery in left:
            delivery.settle(consumed)

    def close(self, *, failed: bool) -> None:
        """The consumer is stopping: settle the messages loops have (back for retry when
        ``failed``, else consumed), return those no loop got, and end every loop."""
        self.closed = True
        self._settle_left(consumed=not failed)
        for delivery in self._in_flight.values():
            delivery.settle(not failed)
        self._in_flight.clear()
        while not self._ready.empty():
            waiting = self._ready.get_nowait()
            if waiting is not None:
                self._unseen.add(id(waiting.msg))
                waiting.settle(False)
        self._ready.put_nowait(None)


class MessageIterator(AsyncIterator[MessageExt]):
    """One ``async for`` loop over a push consumer: each step settles the message the loop
    got before as consumed, and waits for the next one."""

    def __init__(self, stream: MessageStream) -> None:
        self._stream = stream
        self._last: MessageExt | None = None

    def __aiter__(self) -> MessageIterator:
        return self

    async def __anext__(self) -> MessageExt:
        last, self._last = self._last, None
        if last is not None:
            self._stream.consumed_if_in_flight(last)
        msg = await self._stream.next()
        if msg is None:
            raise StopAsyncIteration
        self._last = msg
        return msg

    def __del__(self) -> None:
        # The loop was left (its iterator dropped) without asking for the next message.
        last = self._last
        if last is not None:
            self._stream.left(last)
