"""The lite pull consumer: subscribe (the group shares the queues, as with push) or assign
queues yourself, then ``poll()`` messages, ``commit()`` offsets and ``seek()``.

Each owned queue has a pull loop that fills a buffer (bounded per queue); ``poll`` takes
what is buffered. With ``auto_commit`` the offsets of what earlier polls returned are
committed every 5 s and at shutdown; otherwise ``commit()`` does it.

For admins, through the broker: its running info (settings, subscriptions, owned queues,
pull figures); having no listener, it runs none on a message (``sdk/consumer_diagnostics.py``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeAlias

from prometheus_client import CollectorRegistry

from rocketq.common.aio import get_within, wait_event
from rocketq.common.exceptions import ClientStateError, RocketqError, TopicNotExistError
from rocketq.common.message import MessageExt, MessageQueue
from rocketq.common.names import check_group_name, check_topic_name
from rocketq.common.sql92 import validate
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk import consumer_diagnostics as diagnostics
from rocketq.sdk import pulling
from rocketq.sdk.client import ClientInstance, consumer_heartbeat, subscribe_queues
from rocketq.sdk.client_wire import (
    GroupChanged,
    Notice,
    max_offset_request,
    min_offset_request,
)
from rocketq.sdk.consumer_config import PullConsumerConfig
from rocketq.sdk.consumer_stats import ConsumerStats
from rocketq.sdk.consumer_types import ConsumeFrom, MessageModel, MessageSelector
from rocketq.sdk.message_body import (
    BadMessageError,
    report_bad,
)
from rocketq.sdk.metrics import MetricsOption, client_metrics
from rocketq.sdk.offset_store import LocalFileOffsetStore, RemoteOffsetStore
from rocketq.sdk.rebalance import STRATEGIES
from rocketq.sdk.running_info import ConsumerRunningInfo, ProcessQueueInfo
from rocketq.sdk.security import client_security
from rocketq.sdk.settings import make_config, resolve_namesrv
from rocketq.sdk.wire import PullOutcome

__all__ = ["PullConsumer", "PullConsumerConfig"]

log = logging.getLogger(__name__)

# Seconds until a rebalance that found a subscribed topic without a route, or this consumer
# not yet listed in its group, looks again.
RETRY_UNSETTLED = 1.0


# What a pull loop buffers for poll(): messages in queue order, or a bad message's error.
_Pulled: TypeAlias = list[MessageExt] | BadMessageError


class PullConsumer:
    """A consumer that pulls at its own pace (RocketMQ's DefaultLitePullConsumer)::

        consumer = PullConsumer("cg", "127.0.0.1:9876")
        consumer.subscribe("Orders")  # or consumer.assign(queues), before start
        async with consumer:
            async for batch in consumer:  # or: batch = await consumer.poll()
                ...

    A batch an ``async for`` loop got counts as consumed when the loop asks for the next
    one; when an exception raised in the loop's body leaves the consumer's ``async with``,
    the batch's offsets are not committed, so the group reads it again. Bad messages are
    skipped there (logged and counted in ``bad_messages``); ``poll()`` raises them.

    Args:
        group: The consumer group.
        namesrv: Nameserver address(es), ``host:port`` separated by ``;``; when None, the
            ``NAMESRV_ADDR`` environment variable.
        model: CLUSTERING (the group shares the queues) or BROADCASTING (every consumer
            reads every queue, offsets in a local file).
        consume_from: Where a queue without a committed offset starts.
        config: All settings at once; or give them as keyword ``settings``, not both.
        metrics: True, or a prometheus_client CollectorRegistry, records
            ``rocketmq_delivery_latency`` (see :mod:`rocketq.sdk.metrics`) into a registry
            of the consumer's own or into that one.
        **settings: :class:`PullConsumerConfig` fields.

    Raises:
        TypeError: ``config`` and ``settings`` together, or an unknown setting.
        ConfigError: No nameserver address, a setting out of range, half a key pair, an
            unreadable credentials file, or a TLS file that is missing or does not load.

    Attributes:
        group: The consumer group.
        namesrv: The nameserver address(es) used.
        model: The message model.
        consume_from: Where a queue without a committed offset starts.
        config: The settings.
        client: The connection to the cluster (routes, brokers, heartbeats).
        stats: Pull times and rates, for the running info.
        started_ms: When the consumer started, in epoch milliseconds (0: not yet).
        subscriptions: Topic -> selector.
        assigned: The queues given to :meth:`assign` (None when subscribing).
        bad_messages: Bad messages met (:mod:`rocketq.sdk.message_body`), by reason.
        offsets: The offset store (on the brokers, or a local file when broadcasting).
        running: Whether it is started.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
        *,
        model: MessageModel = MessageModel.CLUSTERING,
        consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET,
        config: PullConsumerConfig | None = None,
        metrics: MetricsOption = False,
        **settings: Any,
    ) -> None:
        self.group = group
        self.model = model
        self.consume_from = consume_from
        self.config = make_config(PullConsumerConfig, config, settings, "PullConsumer")
        self.namesrv = resolve_namesrv(namesrv, "PullConsumer")
        self._metrics = client_metrics(metrics)
        self.client = ClientInstance(
            self.namesrv, security=client_security(self.config, "PullConsumer")
        )
        self.client.heartbeat = self._heartbeat_data
        self.client.on_event = self._on_event
        self.client.on_request = self._broker_request
        # Measured for the running info: pull times and rates per topic.
        self.stats = ConsumerStats()
        self.started_ms = 0
        self.subscriptions: dict[str, MessageSelector] = {}
        self.assigned: list[MessageQueue] | None = None
        self._owned: dict[MessageQueue, asyncio.Task[None]] = {}
        self._next: dict[MessageQueue, int] = {}  # where each pull loop reads next
        self._polled: dict[MessageQueue, int] = {}  # one past what poll returned
        # The batch an ``async for`` loop has and has not finished: its queue and offset.
        self._in_flight: tuple[MessageQueue, int] | None = None
        self._last_poll: tuple[MessageQueue, int] | None = None
        self._buffer: asyncio.Queue[tuple[MessageQueue, int, _Pulled]] = asyncio.Queue()
        # Bad messages met (sdk.message_body), by reason.
        self.bad_messages: collections.Counter[str] = collections.Counter()
        self._buffered: dict[MessageQueue, int] = {}
        self._generation: dict[MessageQueue, int] = {}
        self._rebalance_now = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.offsets: RemoteOffsetStore
        self.running = False

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic``'s messages that ``expression`` selects (tags, ``"*"``, or a
        :class:`MessageSelector`), sharing its queues with the group.

        Raises:
            ClientStateError: Queues were assigned already.
            MessageIllegalError: ``topic`` is not a valid topic name.
            SubscriptionParseFailedError: A SQL92 expression that does not parse.
        """
        check_topic_name(topic)
        if self.assigned is not None:
            raise ClientStateError("use either subscribe() or assign(), not both")
        selector = (
            expression
            if isinstance(expression, MessageSelector)
            else MessageSelector.tags(expression)
        )
        if selector.is_sql:
            validate(selector.expression)
        self.subscriptions[topic] = selector

    def assign(self, queues: list[MessageQueue]) -> None:
        """Read exactly ``queues`` (no group rebalancing); may be called again while
        running.

        Raises:
            ClientStateError: Topics were subscribed already.
        """
        if self.subscriptions:
            raise ClientStateError("use either subscribe() or assign(), not both")
        self.assigned = list(queues)
        if self.running:
            self._rebalance_now.set()

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, from its route (for :meth:`assign`)."""
        return subscribe_queues(topic, await self.client.update_route(topic))

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer reads now."""
        return sorted(self._owned)

    async def start(self) -> None:
        """Connect, take the queues and start pulling.

        Raises:
            ClientStateError: Nothing subscribed or assigned.
            MessageIllegalError: The group name is not valid.
        """
        check_group_name(self.group)
        if not self.subscriptions and self.assigned is None:
            raise ClientStateError("subscribe to a topic or assign queues before start()")
        self.offsets = (
            LocalFileOffsetStore(self.client, self.group, Path(self.config.offset_store_dir))
            if self.model is MessageModel.BROADCASTING
            else RemoteOffsetStore(self.client, self.group)
        )
        self.stats = ConsumerStats()
        self.started_ms = int(time.time() * 1000)
        await self.client.start()
        self.running = True
        for topic in self.subscriptions:
            with contextlib.suppress(TopicNotExistError):
                await self.client.update_route(topic)
        await self.client.heartbeat_all()
        settled = await self._rebalance()
        self._tasks = [asyncio.ensure_future(self._rebalance_loop(settled))]
        if self.config.auto_commit:
            self._tasks.append(asyncio.ensure_future(self._auto_commit()))

    async def shutdown(self) -> None:
        """Stop pulling, commit (with ``auto_commit``) and unregister from the brokers."""
        await self._stop(failed=False)

    async def _stop(self, *, failed: bool) -> None:
        if not self.running:
            return
        self.running = False
        self._buffer.put_nowait((_STOP, 0, []))  # a poll waiting returns at once
        if self._in_flight is not None:
            if failed:  # the batch was not consumed: the group reads it again
                mq, offset = self._in_flight
                self._polled[mq] = min(self._polled.get(mq, offset), offset)
            self._in_flight = None
        tasks = self._tasks + list(self._owned.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.config.auto_commit:
            await self.commit()
        await self.client.unregister(consumer_group=self.group)
        await self.client.shutdown()

    async def __aenter__(self) -> PullConsumer:
        """Start the consumer."""
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        """Shut the consumer down; with an exception, the batch an ``async for`` loop had
        is left uncommitted."""
        await self._stop(failed=exc_type is not None)

    def __aiter__(self) -> AsyncIterator[list[MessageExt]]:
        """``async for batch in consumer``: see :meth:`batches`."""
        return self.batches()

    async def batches(self) -> AsyncIterator[list[MessageExt]]:
        """The polled batches (never empty) until the consumer shuts down; a batch counts
        as consumed when the loop asks for the next one (see the class docstring)."""
        while self.running:
            try:
                msgs = await self.poll()
            except BadMessageError:
                continue  # reported (logged, counted in bad_messages) and skipped
            if not msgs or self._last_poll is None:
                continue
            self._in_flight = self._last_poll
            try:
                yield msgs
            finally:
                if self._in_flight == self._last_poll:
                    self._in_flight = None

    @property
    def metrics_registry(self) -> CollectorRegistry | None:
        """Where the client metrics are recorded; None when ``metrics`` is off."""
        return None if self._metrics is None else self._metrics.registry

    def _heartbeat_data(self) -> RemotingCommand:
        return consumer_heartbeat(
            self.client.client_id,
            self.group,
            consume_type="CONSUME_ACTIVELY",
            message_model=self.model.value,
            consume_from_where=self.consume_from.value,
            subscriptions={t: (s.expression, s.type) for t, s in self.subscriptions.items()},
        )

    async def _on_event(self, event: Notice, addr: str = "") -> None:
        if isinstance(event, GroupChanged) and event.group == self.group:
            self._rebalance_now.set()

    # -- for admins --------------------------------------------------------------------

    async def _broker_request(self, cmd: RemotingCommand) -> RemotingCommand:
        return await diagnostics.answer(
            cmd,
            group=self.group,
            client_id=self.client.client_id,
            running_info=self.running_info,
            consume_directly=None,
        )

    def running_info(self, jstack: bool = False) -> ConsumerRunningInfo:
        """Settings, subscriptions and every owned queue (the offset it would commit, the
        messages pulled and not polled yet, the last pull), and per topic the pull time
        and rate of the last minute, measured here; the consume figures are 0, for the
        application consumes what ``poll`` returns out of the consumer's sight."""
        props = diagnostics.consumer_properties(
            self.config,
            group=self.group,
            message_model=self.model.value,
            consume_from_where=self.consume_from.value,
            consume_type="CONSUME_ACTIVELY",
            namesrv_addrs=self.client.nameserver.addrs,
            client_id=self.client.client_id,
            started_ms=self.started_ms,
        )
        queues = {
            mq: ProcessQueueInfo(
                commit_offset=self._polled.get(mq, self.offsets.read_memory(mq)),
                cached_msg_count=max(0, self._buffered.get(mq, 0)),
                last_pull_timestamp=self.stats.last_pull(mq),
            )
            for mq in sorted(self._owned)
        }
        topics = sorted({*self.subscriptions, *(mq.topic for mq in self._owned)})
        return ConsumerRunningInfo(
            props,
            diagnostics.subscription_set(self.subscriptions),
            queues,
            {topic: self.stats.status(topic) for topic in topics},
            diagnostics.thread_dump() if jstack else None,
        )

    # -- ownership ---------------------------------------------------------------------

    async def _rebalance_loop(self, settled: bool) -> None:
        """Rebalance every interval, or a second after one that was not ``settled``."""
        while True:
            # A topic without a route yet (created a moment ago by a producer's first send)
            # or a group the broker does not list yet is looked at again within a second,
            # not after a whole rebalance interval.
            wait = self.config.rebalance_interval if settled else RETRY_UNSETTLED
            await wait_event(self._rebalance_now, min(wait, self.config.rebalance_interval))
            self._rebalance_now.clear()
            try:
                settled = await self._rebalance()
            except RocketqError as exc:
                settled = False
                log.warning("rebalance of %s failed: %s", self.group, exc)

    async def _rebalance(self) -> bool:
        """Take and give up queues; False when a subscribed topic had no route yet or the
        brokers did not list this consumer in its group."""
        settled = True
        if self.assigned is not None:
            mine = set(self.assigned)
        else:
            mine = set()
            for topic in self.subscriptions:
                try:
                    route = await self.client.update_route(topic)
                except TopicNotExistError:
                    settled = False
                    continue
                mqs = subscribe_queues(topic, route)
                if self.model is MessageModel.BROADCASTING:
                    mine |= set(mqs)
                    continue
                cids = await self.client.consumer_ids(self.group, route)
                if self.client.client_id not in cids:
                    await self.client.heartbeat_all()
                    cids = await self.client.consumer_ids(self.group, route)
                if self.client.client_id not in cids:
                    settled = False
                if cids:
                    mine |= set(
                        STRATEGIES[self.config.allocate_strategy](
                            self.group, self.client.client_id, mqs, cids
                        )
                    )
        for mq in [m for m in self._owned if m not in mine]:
            self._owned.pop(mq).cancel()
            self.stats.forget(mq)
            with contextlib.suppress(RocketqError):
                self.offsets.update(mq, self._polled.get(mq, -1))
                await self.offsets.persist(mq)
            self._polled.pop(mq, None)
            self._generation[mq] = self._generation.get(mq, 0) + 1
        for mq in sorted(mine - set(self._owned)):
            offset = await self._start_offset(mq)
            self._start(mq, offset)
        return settled

    def _start(self, mq: MessageQueue, offset: int) -> None:
        self._next[mq] = offset
        self._polled[mq] = offset
        self._generation[mq] = self._generation.get(mq, 0) + 1
        self._owned[mq] = asyncio.ensure_future(self._pull_loop(mq, self._generation[mq]))

    async def _start_offset(self, mq: MessageQueue) -> int:
        offset = await self.offsets.read_store(mq)
        if offset >= 0:
            return offset
        addr = self.client.read_addr(mq.broker_name)
        if addr is None:
            return 0
        if self.consume_from is ConsumeFrom.FIRST_OFFSET:
            req = min_offset_request(mq.topic, mq.queue_id)
        else:
            req = max_offset_request(mq.topic, mq.queue_id)
        return await self.client.broker(addr).offset(req, self.client.timeout)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read ``mq`` from ``offset`` on: buffered messages of it are discarded."""
        if mq not in self._owned:
            raise ClientStateError(f"{mq} is not assigned to this consumer")
        self._owned.pop(mq).cancel()
        self._start(mq, offset)

    # -- pulling and polling -----------------------------------------------------------

    async def _pull_loop(self, mq: MessageQueue, generation: int) -> None:
        selector = self.subscriptions.get(mq.topic, MessageSelector.tags("*"))
        while self.running:
            if self._buffered.get(mq, 0) >= self.config.pull_threshold_for_queue:
                await asyncio.sleep(0.05)
                continue
            try:
                addr = await pulling.read_address(self.client, mq)
                pull_started = time.monotonic()
                self.stats.pulling(mq)
                resp = await pulling.pull(
                    self.client,
                    addr,
                    group=self.group,
                    mq=mq,
                    offset=self._next[mq],
                    selector=selector,
                    batch_size=self.config.pull_batch_size,
                    suspend=self.config.broker_suspend_max_time,
                )
            except RocketqError as exc:
                log.info("pull of %s failed: %s", mq, exc)
                await asyncio.sleep(pulling.PULL_DELAY_WHEN_EXCEPTION)
                continue
            if self._generation.get(mq) != generation:
                return
            requested, self._next[mq] = self._next[mq], resp.next_begin_offset
            if resp.outcome is PullOutcome.FOUND:
                cfg = self.config
                found = pulling.read_found(
                    resp,
                    mq,
                    requested,
                    self.group,
                    max_body_bytes=cfg.max_body_bytes,
                    check_crc=cfg.check_crc,
                )
                msgs, bad, self._next[mq] = found.messages, found.bad, found.next_offset
                self.stats.pulled(mq, (time.monotonic() - pull_started) * 1000, len(msgs))
                if self._metrics is not None:
                    self._metrics.observe_delivery(self.group, self.client.client_id, msgs)
                for error in bad:
                    report_bad(
                        error,
                        group=self.group,
                        client_id=self.client.client_id,
                        counts=self.bad_messages,
                        metrics=self._metrics,
                        then="poll() raises it, then skips it",
                    )
                self._buffered[mq] = self._buffered.get(mq, 0) + len(msgs)
                for item in _in_order(msgs, bad):
                    self._buffer.put_nowait((mq, generation, item))
            elif resp.outcome not in (PullOutcome.NO_NEW_MSG, PullOutcome.NO_MATCHED_MSG):
                log.warning("offset of %s corrected to %d", mq, resp.next_begin_offset)
                self._polled[mq] = resp.next_begin_offset

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Messages pulled so far (up to pull_batch_size), waiting up to ``timeout``.

        Raises :class:`~rocketq.sdk.message_body.BadMessageError` for a message whose body
        fails its CRC, does not inflate or inflates past the cap (``exc.message`` is the
        message as stored, ``exc.queue_offset`` its offset); the consumer has moved past
        it (a commit covers it) and the next poll returns the messages after it."""
        wait = self.config.poll_timeout if timeout is None else timeout
        got, item = await get_within(self._buffer, wait)
        if not got:
            return []
        mq, generation, msgs = item
        if isinstance(msgs, BadMessageError):
            if mq not in self._owned or generation != self._generation.get(mq):
                return []
            if msgs.queue_offset >= self._polled.get(mq, 0):
                self._polled[mq] = msgs.queue_offset + 1
                raise msgs
            return []
        self._buffered[mq] = self._buffered.get(mq, 0) - len(msgs)
        if mq not in self._owned or generation != self._generation.get(mq):
            return []  # pulled before a seek or before the queue moved away
        msgs = [m for m in msgs if m.queue_offset >= self._polled.get(mq, 0)]
        if msgs:
            self._polled[mq] = msgs[-1].queue_offset + 1
            self._last_poll = (mq, msgs[0].queue_offset)
        return msgs

    async def commit(self) -> None:
        """Commit, for every owned queue, the offset after the last polled message."""
        in_flight = self._in_flight
        for mq, offset in list(self._polled.items()):
            if in_flight is not None and in_flight[0] == mq:
                offset = min(offset, in_flight[1])  # not past a batch a loop still has
            if mq in self._owned and offset >= 0:
                self.offsets.update(mq, offset, increase_only=False)
        await self.offsets.persist_all(list(self._owned))

    async def _auto_commit(self) -> None:
        while True:
            await asyncio.sleep(self.config.auto_commit_interval)
            await self.commit()


# Put in the buffer at shutdown, so that a poll waiting returns at once.
_STOP = MessageQueue("", "", -1)


def _in_order(msgs: list[MessageExt], bad: list[BadMessageError]) -> list[_Pulled]:
    """A pull's good messages and bad messages' errors as poll() hands them out: runs of
    good messages between the bad ones, in queue order."""
    if not bad:
        return [msgs] if msgs else []
    out: list[_Pulled] = []
    run: list[MessageExt] = []
    pending = sorted(bad, key=lambda e: e.queue_offset)
    i = 0
    for m in msgs:
        while i < len(pending) and pending[i].queue_offset < m.queue_offset:
            if run:
                out.append(run)
                run = []
            out.append(pending[i])
            i += 1
        run.append(m)
    if run:
        out.append(run)
    out.extend(pending[i:])
    return out
