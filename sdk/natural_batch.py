"""Natural batching: concurrent sends of one topic leave together as one batch request.

A send goes to a *lane*: the broker its queue is on, whatever the topic, when that broker
takes SEND_TOPICS_BATCH (a rocketq broker says so in its HEART_BEAT answer), else its topic
and that broker; a send to a given queue, through a selector or with a sharding key, goes
to the lane of its topic and that queue. A send to a
lane with fewer than ``batch_max_in_flight`` requests in flight (2), or with fewer than
``ALONE_BELOW`` (4) messages in flight in all, leaves at once, alone, exactly as it would
without batching: a lone send waits for nothing, and a few sends in flight are not held
for batches of two or three, which cost more than they save (``rocketq bench produce
--sweep``: 4 sends in flight ran at 0.63-0.92 of batching off when they waited). Sends
that arrive while the lane has that many in flight wait; when one returns they leave together as one
``SEND_BATCH_MESSAGE``, or sooner when they fill ``batch_max_bytes`` or ``batch_max_count``
(an ordered lane never has two requests in flight: its messages are stored in the order
they were sent). A batch of one topic leaves as SEND_BATCH_MESSAGE; one of several topics
(a broker's lane) as SEND_TOPICS_BATCH, each (topic, queue) a segment the broker stores
whole or not at all. Two in flight keep the broker busy while the client reads an answer and
the next batch gathers (figures in docs/performance.md, "Natural batching"). With
``batch_max_delay``, a send to an idle lane also waits that long for others to join it.
Waiting messages of every lane together hold at most ``total_batch_max_bytes``; past it a
send leaves alone, at once.

Each caller gets its own :class:`~rocketq.sdk.producer.SendResult` (its message id, its
CommitLog id, its queue offset) or the batch's exception: the broker stores a batch whole
or not at all (as RocketMQ's autoBatch reports a failed batch to every message in it). A
caller's timeout is its own: a message still waiting when it passes is taken out of its
batch and fails with a RequestTimeoutError; once it has left, the caller is told of the
timeout and the message may still be stored (as with any send that times out).

Which sends join: single sends without a delay level or delivery time, to a topic that is
not a retry or dead-letter topic, whose body is at most the compression threshold (a
larger body is sent alone, compressed, as before). Transactional, oneway and batch sends
are never held.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final, Generic, TypeVar

from rocketq.common.exceptions import RequestTimeoutError
from rocketq.common.message import MessageQueue
from rocketq.sdk.send_encoding import Encoded, batch_entry_of

# A send's result (the producer's SendResult).
R = TypeVar("R")

_ENTRY_OVERHEAD: Final = 22  # a batch entry's fixed fields
# An unordered lane carrying fewer messages in flight than this lets a send leave alone.
ALONE_BELOW: Final = 4


class _Item(Generic[R]):
    """A send waiting in its lane (or in a batch that left)."""

    __slots__ = ("deadline", "enc", "entry_size", "future", "mq")

    def __init__(
        self, enc: Encoded, mq: MessageQueue, future: asyncio.Future[R], deadline: float
    ) -> None:
        self.enc = enc
        self.mq = mq  # the queue picked for it
        props = enc.properties or ""
        self.entry_size = _ENTRY_OVERHEAD + len(enc.body) + len(props)
        self.future = future
        self.deadline = deadline  # the loop's clock


class _Lane(Generic[R]):
    """One topic's sends to one broker (unordered) or to one queue (ordered)."""

    __slots__ = (
        "bytes",
        "carried",
        "in_flight",
        "linger",
        "mixed",
        "mq",
        "ordered",
        "timer",
        "waiting",
    )

    def __init__(self, mq: MessageQueue, ordered: bool, mixed: bool = False) -> None:
        self.mq = mq  # the queue of the lane's latest send: where a batch goes first
        self.ordered = ordered
        self.mixed = mixed  # a broker's lane: its sends' topics differ
        self.in_flight = 0  # requests
        self.carried = 0  # messages in those requests
        self.waiting: deque[_Item[R]] = deque()
        self.bytes = 0
        self.linger: asyncio.TimerHandle | None = None
        # One timer for the earliest deadline among the waiting (not one per message).
        self.timer: asyncio.TimerHandle | None = None


class NaturalBatcher(Generic[R]):
    """The lanes of one producer (see the module docstring).

    Args:
        send: Sends an encoding (one message or a batch) with the producer's retries:
            ``send(enc, first_queue, ordered, seconds)``.
        split: A batch's result as one result per message, in order.
        send_topics: Sends messages of several topics to one broker as one request
            (``send_topics(sends, seconds)``, each send an encoding and its queue) -> each
            message's result or exception, in order.
        takes_topics: Whether the broker of that name takes such requests.
        max_delay: Seconds a send to an idle lane waits for company (0: none).
        max_bytes: A batch's largest size in bytes; a full batch leaves at once.
        max_count: A batch's most messages.
        total_max_bytes: The most bytes waiting in every lane together.
        max_in_flight: Requests an unordered lane has in flight at once before sends
            wait (an ordered lane has one).
        alone_below: An unordered lane carrying fewer messages in flight than this lets
            a send leave alone whatever its requests in flight.
    """

    def __init__(
        self,
        send: Callable[[Encoded, MessageQueue, bool, float], Awaitable[R]],
        split: Callable[[R], list[R]],
        *,
        send_topics: Callable[
            [list[tuple[Encoded, MessageQueue]], float], Awaitable[list[R | BaseException]]
        ]
        | None = None,
        takes_topics: Callable[[str], bool] | None = None,
        max_delay: float,
        max_bytes: int,
        max_count: int,
        total_max_bytes: int,
        max_in_flight: int = 1,
        alone_below: int = ALONE_BELOW,
    ) -> None:
        self._send = send
        self._split = split
        self._send_topics = send_topics
        self._takes_topics = takes_topics
        self.max_delay = max_delay
        self.max_bytes = max_bytes
        self.max_count = max_count
        self.total_max_bytes = total_max_bytes
        self.max_in_flight = max_in_flight
        self.alone_below = alone_below
        self._lanes: dict[tuple[Any, ...], _Lane[R]] = {}
        self._held = 0  # bytes waiting in every lane
        self._tasks: set[asyncio.Task[None]] = set()
        self.batches_sent = 0  # requests of more than one message
        self.batched_messages = 0  # messages that left in those
        self.topics_batches_sent = 0  # of those, requests of several topics

    def joins(self, enc: Encoded) -> bool:
        """Whether this (single, checked) send may wait in a lane now: it fits a batch and
        the lanes are not full."""
        size = _ENTRY_OVERHEAD + len(enc.body) + len(enc.properties or "")
        return size <= self.max_bytes and self._held + size <= self.total_max_bytes

    async def send(self, enc: Encoded, mq: MessageQueue, ordered: bool, timeout: float) -> R:
        """Send one message through its lane: alone at once when the lane is idle, else
        with the messages that wait beside it."""
        mixed = False
        key: tuple[Any, ...]
        if ordered:
            key = (enc.topic, mq.broker_name, mq.queue_id)
        elif self._takes_topics is not None and self._takes_topics(mq.broker_name):
            key = ("", mq.broker_name)
            mixed = True
        else:
            key = (enc.topic, mq.broker_name)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(mq, ordered, mixed)
        if (
            not lane.waiting
            and self.max_delay <= 0
            and (
                lane.in_flight < (1 if ordered else self.max_in_flight)
                or (not ordered and lane.carried < self.alone_below)
            )
        ):
            lane.in_flight += 1
            lane.carried += 1
            try:
                return await self._send(enc, mq, ordered, timeout)
            finally:
                self._done(lane, 1)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        item: _Item[R] = _Item(enc, mq, future, loop.time() + timeout)
        if lane.timer is None:
            lane.timer = loop.call_at(item.deadline, self._expire_waiting, lane)
        if not ordered:
            lane.mq = mq
        lane.waiting.append(item)
        lane.bytes += item.entry_size
        self._held += item.entry_size
        if lane.in_flight == 0:
            if self.max_delay > 0 and lane.linger is None and not self._full(lane):
                lane.linger = loop.call_later(self.max_delay, self._linger_over, lane)
            elif self.max_delay <= 0 or self._full(lane):
                self._depart(lane)
        elif self._full(lane) and not ordered:
            self._depart(lane)
        return await future

    def _full(self, lane: _Lane[R]) -> bool:
        return lane.bytes >= self.max_bytes or len(lane.waiting) >= self.max_count

    def _linger_over(self, lane: _Lane[R]) -> None:
        lane.linger = None
        if lane.waiting and (lane.in_flight == 0 or not lane.ordered):
            self._depart(lane)

    def _expire_waiting(self, lane: _Lane[R]) -> None:
        """The earliest deadline among a lane's waiting messages passed: those whose time
        is up leave the lane unsent; the timer is set for the next one."""
        lane.timer = None
        now = asyncio.get_running_loop().time()
        keep: deque[_Item[R]] = deque()
        for item in lane.waiting:
            if item.future.done() or item.deadline <= now:
                lane.bytes -= item.entry_size
                self._held -= item.entry_size
                if not item.future.done():
                    item.future.set_exception(
                        RequestTimeoutError(
                            f"send to topic {item.enc.topic} timed out: it was still waiting "
                            "for its batch to leave, and was not sent"
                        )
                    )
            else:
                keep.append(item)
        lane.waiting = keep
        if keep:
            lane.timer = asyncio.get_running_loop().call_at(
                min(i.deadline for i in keep), self._expire_waiting, lane
            )

    def _done(self, lane: _Lane[R], carried: int) -> None:
        """A request of the lane (of ``carried`` messages) returned: what waits leaves
        now."""
        lane.in_flight -= 1
        lane.carried -= carried
        if lane.waiting and (lane.in_flight == 0 or not lane.ordered):
            self._depart(lane)

    def _take(self, lane: _Lane[R]) -> list[_Item[R]]:
        """The waiting messages that leave next: in order, within the caps; those whose
        callers gave up are dropped."""
        items: list[_Item[R]] = []
        size = 0
        waiting = lane.waiting
        while waiting and len(items) < self.max_count:
            item = waiting[0]
            if item.future.done():  # cancelled by its caller
                waiting.popleft()
                lane.bytes -= item.entry_size
                self._held -= item.entry_size
                continue
            if items and size + item.entry_size > self.max_bytes:
                break
            waiting.popleft()
            lane.bytes -= item.entry_size
            self._held -= item.entry_size
            size += item.entry_size
            items.append(item)
        return items

    def _depart(self, lane: _Lane[R]) -> None:
        if lane.linger is not None:
            lane.linger.cancel()
            lane.linger = None
        items = self._take(lane)
        if not lane.waiting and lane.timer is not None:
            lane.timer.cancel()
            lane.timer = None
        if not items:
            return
        lane.in_flight += 1
        lane.carried += len(items)
        task = asyncio.ensure_future(self._leave(lane, items))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _leave(self, lane: _Lane[R], items: list[_Item[R]]) -> None:
        loop = asyncio.get_running_loop()
        watch = _SentWatch(items)
        try:
            budget = max(max(item.deadline for item in items) - loop.time(), 0.001)
            mq = lane.mq
            if len(items) == 1:
                enc = items[0].enc
                mq = items[0].mq if lane.mixed else mq
            else:
                self.batches_sent += 1
                self.batched_messages += len(items)
                if lane.mixed:
                    topic = items[0].enc.topic
                    if any(item.enc.topic != topic for item in items):
                        await self._leave_topics(items, budget)
                        return
                    mq = items[-1].mq
                enc = _batch(items)
            try:
                result = await self._send(enc, mq, lane.ordered, budget)
            except BaseException as exc:
                for item in items:
                    _settle(item, exc=exc)
                if not isinstance(exc, Exception):
                    raise
                return
            if len(items) == 1:
                _settle(items[0], result=result)
                return
            for item, one in zip(items, self._split(result), strict=True):
                _settle(item, result=one)
        finally:
            watch.cancel()
            self._done(lane, len(items))

    async def _leave_topics(self, items: list[_Item[R]], budget: float) -> None:
        """A broker's lane's batch of several topics, as one request; each message gets its
        own result."""
        assert self._send_topics is not None
        self.topics_batches_sent += 1
        try:
            outcomes = await self._send_topics([(item.enc, item.mq) for item in items], budget)
        except BaseException as exc:
            for item in items:
                _settle(item, exc=exc)
            if not isinstance(exc, Exception):
                raise
            return
        for item, outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                _settle(item, exc=outcome)
            else:
                _settle(item, result=outcome)

    async def close(self) -> None:
        """Send what waits (a lingering lane leaves now) and wait until every message has
        its answer: the batches under way, and those that leave behind a lone send still
        in flight (within the waiting messages' own time limits)."""
        loop = asyncio.get_running_loop()
        while True:
            for lane in self._lanes.values():
                if lane.waiting and (lane.in_flight == 0 or not lane.ordered):
                    self._depart(lane)
            if self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
                continue
            waiting = [i for lane in self._lanes.values() for i in lane.waiting]
            if not waiting or loop.time() >= max(i.deadline for i in waiting):
                return
            await asyncio.sleep(0.005)  # behind a lone send still in flight


class _SentWatch(Generic[R]):
    """The deadlines of a batch's messages while it is under way: one timer at a time, for
    the earliest caller still waiting; a caller whose time is up is told (its message may
    still be stored)."""

    __slots__ = ("handle", "items")

    def __init__(self, items: list[_Item[R]]) -> None:
        self.items = items
        self.handle: asyncio.TimerHandle | None = None
        self._arm(min(item.deadline for item in items))

    def _arm(self, when: float) -> None:
        self.handle = asyncio.get_running_loop().call_at(when, self._fire)

    def _fire(self) -> None:
        self.handle = None
        now = asyncio.get_running_loop().time()
        later = []
        for item in self.items:
            if item.future.done():
                continue
            if item.deadline <= now:
                item.future.set_exception(
                    RequestTimeoutError(
                        f"send to topic {item.enc.topic} timed out: it left in a batch that "
                        "has not been answered; it may still be stored"
                    )
                )
            else:
                later.append(item.deadline)
        if later:
            self._arm(min(later))

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


def _batch(items: list[_Item[R]]) -> Encoded:
    """The waiting messages as one batch request (none of them compressed)."""
    entries = []
    ids: list[str] = []
    for item in items:
        enc = item.enc
        entries.append(batch_entry_of(enc))
        ids.extend(enc.ids)
    return Encoded(items[0].enc.topic, b"".join(entries), None, ids, 0, 0)


def _settle(item: _Item[R], *, result: R | None = None, exc: BaseException | None = None) -> None:
    if item.future.done():
        return
    if exc is not None:
        if isinstance(exc, asyncio.CancelledError):
            item.future.cancel()
        else:
            item.future.set_exception(exc)
    else:
        assert result is not None
        item.future.set_result(result)


__all__ = ["ALONE_BELOW", "NaturalBatcher"]
