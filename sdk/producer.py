"""The producer: queue selection with latency fault tolerance, retries on another broker,
batches, ordered sends through a selector, oneway and fire-and-forget sends.

A message is encoded once (with a unique id that every retry keeps) into the request that
carries it: SEND_MESSAGE_V2 with the body as the request body and the properties in the
header, or SEND_BATCH_MESSAGE with RocketMQ's batch encoding of every message.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from mypy_extensions import mypyc_attr
from prometheus_client import CollectorRegistry

from rocketq.common.exceptions import (
    ClientStateError,
    MessageIllegalError,
    NoPermissionError,
    RequestTimeoutError,
    RocketqError,
    RocketqSystemError,
    ServiceNotAvailableError,
    TopicNotExistError,
    for_code,
)
from rocketq.common.message import (
    DLQ_GROUP_TOPIC_PREFIX,
    MASTER_ID,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    TRACE_PRODUCER_GROUP,
    Message,
    MessageQueue,
)
from rocketq.common.message_id import UniqIdGenerator
from rocketq.common.names import check_group_name
from rocketq.common.topics_batch import encode_segment
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import TopicRouteData
from rocketq.sdk.client import ClientInstance, local_ip, producer_heartbeat, publish_queues
from rocketq.sdk.fault_tolerance import MQFaultStrategy, TopicPublishInfo
from rocketq.sdk.metrics import MetricsOption, client_metrics
from rocketq.sdk.natural_batch import NaturalBatcher
from rocketq.sdk.producer_config import ProducerConfig, check_batching
from rocketq.sdk.queue_selectors import MessageQueueSelector, java_string_hash, select_by_hash
from rocketq.sdk.security import client_security, security_settings
from rocketq.sdk.send_encoding import (
    BATCH_LIMIT,
    Encoded,
    batch_entry_of,
    encode,
    estimated_size,
    split_batches,
)
from rocketq.sdk.settings import make_config, resolve_namesrv
from rocketq.sdk.trace import TraceDispatcher, publish_event
from rocketq.sdk.wire import (
    STORED_CODES,
    parse_topics_batch,
    send_request,
    topics_batch_command,
)

__all__ = [
    "BATCH_LIMIT",
    "MessageQueueSelector",
    "Producer",
    "ProducerConfig",
    "SendResult",
    "SendStatus",
    "estimated_size",
    "java_string_hash",
    "select_by_hash",
    "split_batches",
]

log = logging.getLogger(__name__)


# Topics whose messages are never held for a batch (a broker refuses batches to a retry
# topic, as RocketMQ's does).
_UNBATCHED_PREFIXES: Final = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)


def _no_queue_error(topic: str, route: TopicRouteData, template: str | None) -> RocketqError:
    """Why a topic whose route was found (or, for a topic to create on first send, the
    route of the ``template`` topic) has no queue to send to: the brokers of its writable
    queues have no master now (ServiceNotAvailableError, retriable), or none of its queues
    is writable (NoPermissionError)."""
    what = f"topic {topic!r}" if template is None else f"the template topic {template}"
    writable = sorted({q.broker_name for q in route.queue_datas if q.perm & PERM_WRITE})
    if not writable:
        return NoPermissionError(
            f"{what} has no writable queue; give it write permission with "
            "`rocketq admin update-topic`"
        )
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    down = ", ".join(b for b in writable if b not in masters)
    return ServiceNotAvailableError(
        f"{what} exists, but no broker of its writable queues has a master now "
        f"({down}: master down or failing over); check the brokers with "
        "`rocketq admin cluster-list`"
    )


class SendStatus(enum.Enum):
    """How a send the broker stored went (RocketMQ's SendStatus).

    Attributes:
        SEND_OK: Stored, flushed and replicated as the broker is configured to.
        FLUSH_DISK_TIMEOUT: Stored, but a SYNC_FLUSH broker did not flush it in time.
        SLAVE_NOT_AVAILABLE: Stored, but a SYNC_MASTER had no slave to replicate it to.
        FLUSH_SLAVE_TIMEOUT: Stored, but its slave did not confirm it in time.
    """

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12


# Not frozen (RocketMQ's SendResult has setters too): a frozen dataclass sets each field
# through object.__setattr__, about a microsecond more per message for a batch's results.
@dataclass(unsafe_hash=True)
class SendResult:
    """What a send returns.

    Attributes:
        status: How the broker stored it.
        msg_id: The message's unique id (a batch: every id, comma-separated).
        offset_msg_id: The id of its place in the broker's CommitLog (a batch: all).
        queue: The queue it went to.
        queue_offset: Its offset in that queue (a batch: the first message's).
        msg_ids: Every message's unique id, in order.
        offset_msg_ids: Every message's CommitLog id, in order.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    msg_ids: tuple[str, ...] = ()
    offset_msg_ids: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the status is SEND_OK."""
        return self.status is SendStatus.SEND_OK


# SendStatus by a stored send's answer code (looked up per segment of a topics batch).
_SEND_STATUS: Final[dict[int, SendStatus]] = {s.value: s for s in SendStatus}


def split_result(result: SendResult) -> list[SendResult]:
    """A batch's result as each message's: its own ids and its queue offset (a batch's
    messages lie one after the other in its queue)."""
    offsets = result.offset_msg_ids
    out = []
    for i, msg_id in enumerate(result.msg_ids):
        offset_id = offsets[i] if i < len(offsets) else ""
        out.append(
            SendResult(
                status=result.status,
                msg_id=msg_id,
                offset_msg_id=offset_id,
                queue=result.queue,
                queue_offset=result.queue_offset + i,
                msg_ids=(msg_id,),
                offset_msg_ids=(offset_id,) if offset_id else (),
            )
        )
    return out


@dataclass
class _Attempt:
    last_broker: str | None = None
    errors: list[str] = field(default_factory=list)
    last_error: RocketqError | None = None


# Compiled (setup.py), it stays a class applications and TransactionProducer may subclass.
@mypyc_attr(allow_interpreted_subclasses=True)
class Producer:
    """Sends messages (RocketMQ's DefaultMQProducer)::

        async with Producer("pg", "127.0.0.1:9876") as producer:
            result = await producer.send(Message("Orders", b"hello", tags="TagA"))

    A send picks a queue round robin, avoiding brokers that were slow or failed, and on a
    failure retries on another broker (``retry_times_when_send_failed``) within
    ``send_timeout`` seconds.

    Args:
        group: The producer group.
        namesrv: Nameserver address(es), ``host:port`` separated by ``;``; when None, the
            ``NAMESRV_ADDR`` environment variable.
        config: All settings at once; or give them as keyword ``settings``, not both.
        metrics: True, or a prometheus_client CollectorRegistry, records
            ``rocketmq_send_cost_time`` (see :mod:`rocketq.sdk.metrics`) into a registry
            of the producer's own or into that one.
        **settings: :class:`ProducerConfig` fields.

    Raises:
        TypeError: ``config`` and ``settings`` together, or an unknown setting.
        ConfigError: A natural batching setting out of range, no nameserver address, half
            a key pair, an unreadable credentials file, or a TLS file that is missing or
            does not load.

    Attributes:
        group: The producer group.
        namesrv: The nameserver address(es) used.
        config: The settings.
        client: The connection to the cluster (routes, brokers, heartbeats).
        tracer: Where trace events go when ``enable_trace`` is on.
        fault: The latency fault tolerance that steers sends away from slow brokers.
        publish: Per topic sent to, its writable queues.
    """

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv: str | None = None,
        *,
        config: ProducerConfig | None = None,
        metrics: MetricsOption = False,
        **settings: Any,
    ) -> None:
        self.config = make_config(ProducerConfig, config, settings, type(self).__name__)
        self.group = group
        self.namesrv = resolve_namesrv(namesrv, type(self).__name__)
        self.tracer: TraceDispatcher | None = None
        self._metrics = client_metrics(metrics)
        self.client = ClientInstance(
            self.namesrv,
            poll_name_server_interval=self.config.poll_name_server_interval,
            heartbeat_interval=self.config.heartbeat_broker_interval,
            security=client_security(self.config, type(self).__name__),
        )
        self.client.heartbeat = lambda: producer_heartbeat(self.client.client_id, self.group)
        self.fault = MQFaultStrategy(
            send_latency_fault_enable=self.config.send_latency_fault_enable
        )
        self.publish: dict[str, TopicPublishInfo] = {}
        # Every topic sent to stays fresh, those first sent through TBW102's route too.
        self.client.extra_topics = self.publish.keys
        self.client.on_route = self._route_changed
        self._ids = UniqIdGenerator(local_ip())
        self._oneway: set[asyncio.Task[Any]] = set()
        self._running = False
        self.batcher: NaturalBatcher[SendResult] | None = None
        if self.config.auto_batch:
            check_batching(self.config)
            self.batcher = NaturalBatcher(
                self._send_lane,
                split_result,
                max_delay=self.config.batch_max_delay,
                max_bytes=self.config.batch_max_bytes,
                max_count=self.config.batch_max_count,
                total_max_bytes=self.config.total_batch_max_bytes,
                max_in_flight=self.config.batch_max_in_flight,
                send_topics=self._send_topics,
                takes_topics=self._takes_topics,
            )

    async def start(self) -> None:
        """Connect to the cluster (and start the trace writer when tracing is on).

        Raises:
            ClientStateError: No group name.
            MessageIllegalError: The group name is not valid.
        """
        if not self.group:
            raise ClientStateError("a producer needs a group name")
        check_group_name(self.group)
        await self.client.start()
        if self.config.enable_trace and self.tracer is None:
            writer = Producer(TRACE_PRODUCER_GROUP, self.namesrv, **security_settings(self.config))
            self.tracer = TraceDispatcher(writer, topic=self.config.trace_topic)
            await self.tracer.start()
        self._running = True

    async def shutdown(self) -> None:
        """Wait for oneway sends under way, then unregister and disconnect."""
        if not self._running:
            return
        self._running = False
        if self.batcher is not None:
            await self.batcher.close()
        if self._oneway:
            await asyncio.gather(*self._oneway, return_exceptions=True)
        if self.tracer is not None:
            await self.tracer.shutdown()
            self.tracer = None
        await self.client.unregister(producer_group=self.group)
        await self.client.shutdown()

    async def __aenter__(self) -> Producer:
        """Start the producer."""
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Shut the producer down."""
        await self.shutdown()

    @property
    def metrics_registry(self) -> CollectorRegistry | None:
        """Where the client metrics are recorded; None when ``metrics`` is off."""
        return None if self._metrics is None else self._metrics.registry

    # -- encoding ----------------------------------------------------------------------

    def _encode(
        self,
        msgs: Sequence[Message],
        *,
        system_props: dict[str, str] | None = None,
        extra_sys_flag: int = 0,
        batch: bool = False,
    ) -> Encoded:
        """``msgs`` as their send request's parts (see :func:`send_encoding.encode`)."""
        return encode(
            msgs,
            group=self.group,
            next_id=self._ids.next_id,
            max_message_size=self.config.max_message_size,
            compress_over=self.config.compress_msg_body_over_howmuch,
            system_props=system_props,
            extra_sys_flag=extra_sys_flag,
            batch=batch,
        )

    # -- routes ------------------------------------------------------------------------

    async def _publish_info(self, topic: str, *, refresh: bool = False) -> TopicPublishInfo:
        info = self.publish.get(topic)
        if info is not None and info.has_route() and not refresh:
            return info
        template_key: str | None = None
        try:
            route = await self.client.update_route(topic)
            queues = publish_queues(topic, route)
        except TopicNotExistError:
            # Unknown topic: send through the auto-create template's brokers (TBW102). Its
            # route is cached like any other (refreshed every 30 s and after a failure), so
            # a producer creating topics one by one asks the nameservers once per topic.
            key = template_key = self.config.create_topic_key
            fetch = self.client.update_route if refresh else self.client.route
            try:
                template = await fetch(key)
            except TopicNotExistError:
                raise TopicNotExistError(
                    f"topic {topic!r} does not exist, and no broker creates topics on first "
                    f"send (the nameservers know no {key} route); create it with "
                    "`rocketq admin update-topic`"
                ) from None
            n = self.config.default_topic_queue_nums
            route = TopicRouteData(
                [
                    replace(q, write_queue_nums=min(n, q.write_queue_nums))
                    for q in template.queue_datas
                ],
                template.broker_datas,
            )
            queues = publish_queues(topic, route)
        if not queues:
            raise _no_queue_error(topic, route, template_key)
        info = TopicPublishInfo(message_queues=queues)
        self.publish[topic] = info
        return info

    def _route_changed(self, topic: str, route: TopicRouteData) -> None:
        """A refreshed route: a topic's queues follow it (a topic auto-created through the
        template moves to its own route; a broker added or gone), keeping the round robin."""
        info = self.publish.get(topic)
        if info is None:
            return
        queues = publish_queues(topic, route)
        if queues and queues != info.message_queues:
            info.message_queues = queues

    # -- sending -----------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer; retried on another broker on failure.

        Args:
            msg: The message.
            selector: For ordered messages: ``selector(queues, msg, arg)`` picks the queue.
            arg: What ``selector`` gets.
            queue: Send to this queue.
            sharding_key: For ordered messages: messages with one key go to one queue,
                in send order (instead of ``selector``).
            timeout: Seconds the send may take, retries included (default:
                ``send_timeout``).

        Raises:
            ClientStateError: The producer is not started, or both ``sharding_key`` and
                ``selector`` are given.
            MessageIllegalError: An empty or too big body, or a bad topic name.
            TopicNotExistError: The topic does not exist and cannot be created on send.
            ServiceNotAvailableError: The topic's brokers have no master now.
            RocketqError: The send failed on every attempt.
        """
        if sharding_key is not None:
            if selector is not None:
                raise ClientStateError("give either sharding_key or selector, not both")
            selector, arg = select_by_hash, sharding_key
        enc = self._encode([msg])
        natural = self.batcher is not None and self._batchable(msg, enc)
        sending = self._send(enc, selector, arg, msg, queue, timeout, natural=natural)
        return await (sending if self.tracer is None else self._traced([msg], sending))

    def _batchable(self, msg: Message, enc: Encoded) -> bool:
        """Whether a single send may wait in a lane (see :mod:`rocketq.sdk.natural_batch`):
        not delayed or timed, not to a retry or dead-letter topic, not compressed, and
        there is room."""
        assert self.batcher is not None
        return (
            not enc.sys_flag
            and not msg.delay_level
            and not msg.deliver_at
            and not enc.topic.startswith(_UNBATCHED_PREFIXES)
            and self.batcher.joins(enc)
        )

    async def _via_lane(
        self,
        enc: Encoded,
        selector: MessageQueueSelector | None,
        arg: Any,
        msg: Message,
        fixed: MessageQueue | None,
        timeout: float | None,
    ) -> SendResult:
        """A single send through its lane: its queue is picked now (by the selector, or
        round robin with latency fault tolerance), and it leaves alone or in a batch."""
        assert self.batcher is not None
        budget = timeout if timeout is not None else self.config.send_timeout
        deadline = time.monotonic() + budget
        info = await self._publish_info(enc.topic)
        ordered = True
        if fixed is not None:
            mq = fixed
        elif selector is not None:
            mq = selector(list(info.message_queues), msg, arg)
        else:
            mq = self.fault.select_one_message_queue(info, None)
            ordered = False
        left = deadline - time.monotonic()
        if left <= 0:
            raise RequestTimeoutError(
                f"send to topic {enc.topic} timed out before it left ({budget:.1f} s)"
            )
        return await self.batcher.send(enc, mq, ordered, left)

    def _send_lane(
        self, enc: Encoded, mq: MessageQueue, ordered: bool, timeout: float
    ) -> Awaitable[SendResult]:
        """How a lane's request goes: with retries, to ``mq`` first (an ordered lane's
        only queue)."""
        if ordered:
            return self._send_with_retries(enc, None, None, None, mq, timeout)
        return self._send_with_retries(enc, None, None, None, None, timeout, first=mq)

    def _takes_topics(self, broker_name: str) -> bool:
        """Whether the master of ``broker_name`` said it takes SEND_TOPICS_BATCH."""
        addr = self.client.master_addr(broker_name)
        return addr is not None and addr in self.client.topics_batch

    async def _send_topics(
        self, sends: list[tuple[Encoded, MessageQueue]], timeout: float
    ) -> list[SendResult | BaseException]:
        """Single messages of several topics, each with the queue picked for it on one
        broker, as one SEND_TOPICS_BATCH (a segment per topic and queue) -> each one's
        result or error. A segment the broker refused with an error a retry may mend, or
        the whole request failing, sends its messages again one by one with the retries a
        single send has (to another broker), within what is left of ``timeout``; a
        segment's error no retry can mend (no permission, an illegal message) is its
        messages' answer."""
        deadline = time.monotonic() + timeout
        segments: dict[tuple[str, int], list[int]] = {}
        for i, (enc, mq) in enumerate(sends):
            segments.setdefault((enc.topic, mq.queue_id), []).append(i)
        body: list[bytes] = []
        for (topic, queue_id), members in segments.items():
            entries = b"".join([batch_entry_of(sends[i][0]) for i in members])
            body.append(encode_segment(topic.encode(), queue_id, entries))
        request = topics_batch_command(
            b"".join(body),
            group=self.group,
            born_timestamp=int(time.time() * 1000),
            default_topic=self.config.create_topic_key,
            default_queue_nums=self.config.default_topic_queue_nums,
        )
        outcomes: list[SendResult | BaseException | None] = [None] * len(sends)
        again: list[int] = []
        broker = sends[0][1].broker_name
        started = time.monotonic()
        addr: str | None = None
        try:
            addr = await self._master(sends[0][1])
            answer = await self.client.broker(addr).invoke(request, timeout)
            results = parse_topics_batch(answer, len(segments))
        except RocketqError as exc:
            latency = (time.monotonic() - started) * 1000
            self.fault.update_fault_item(broker, latency, isolation=True)
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and addr is not None:
                self.client.topics_batch.discard(addr)  # an older broker on that address
            # Even an error no retry mends (no permission for one of its topics) may be
            # one segment's: each message gets its own answer.
            log.info("topics batch to %s failed, sending its messages again: %s", broker, exc)
            again = list(range(len(sends)))
        else:
            latency = (time.monotonic() - started) * 1000
            self.fault.update_fault_item(broker, latency, isolation=False)
            for members, result in zip(segments.values(), results, strict=True):
                if result.code not in STORED_CODES:
                    error = for_code(result.code)(result.text or f"response code {result.code}")
                    if error.retriable or isinstance(error, RocketqSystemError):
                        again.extend(members)
                    else:
                        for i in members:
                            outcomes[i] = error
                    continue
                ids = result.text.split(",") if result.text else []
                status = _SEND_STATUS[result.code]  # one of STORED_CODES
                for j, i in enumerate(members):
                    enc, mq = sends[i]
                    offset_id = ids[j] if j < len(ids) else ""
                    outcomes[i] = SendResult(
                        status=status,
                        msg_id=enc.ids[0],
                        offset_msg_id=offset_id,
                        queue=mq,
                        queue_offset=result.queue_offset + j,
                        msg_ids=(enc.ids[0],),
                        offset_msg_ids=(offset_id,) if offset_id else (),
                    )
        if again:
            left = deadline - time.monotonic()
            redone = await asyncio.gather(
                *(
                    self._send_with_retries(sends[i][0], None, None, None, None, left)
                    for i in again
                ),
                return_exceptions=True,
            )
            for i, outcome in zip(again, redone, strict=True):
                outcomes[i] = outcome
        return [o if o is not None else RocketqSystemError("no answer") for o in outcomes]

    async def _traced(self, msgs: Sequence[Message], sending: Awaitable[SendResult]) -> SendResult:
        """Await a send and record a Pub trace event per message, whatever the outcome."""
        assert self.tracer is not None
        started = time.monotonic()
        result: SendResult | None = None
        status = "FAILED"
        try:
            result = await sending
            status = result.status.name
            return result
        finally:
            cost = int((time.monotonic() - started) * 1000)
            ids = (result.msg_ids or (result.msg_id,)) if result is not None else ()
            offset_ids = result.offset_msg_ids if result is not None else ()
            for i, m in enumerate(msgs):
                self.tracer.record(
                    publish_event(
                        self.group,
                        self.client.client_id,
                        m,
                        (i < len(ids) and ids[i]) or "",
                        (i < len(offset_ids) and offset_ids[i]) or "",
                        cost,
                        status,
                    )
                )

    async def send_batch(
        self,
        msgs: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout: float | None = None,
    ) -> SendResult:
        """One topic, at most 4 MiB in all; stored together in one queue (with
        ``sharding_key``, the queue ``send`` picks for that key).

        ``split_batches`` cuts a long list into batches that fit.
        """
        if sharding_key is not None and queue is not None:
            raise ClientStateError("give either sharding_key or queue, not both")
        for m in msgs:
            if m.delay_level or m.deliver_at:
                raise MessageIllegalError(
                    "batch messages cannot be delayed (TimeDelayLevel is not supported for "
                    "batching); send delayed messages one by one"
                )
        selector = select_by_hash if sharding_key is not None else None
        first = msgs[0] if msgs else None
        sending = self._send(
            self._encode(msgs, batch=True), selector, sharding_key, first, queue, timeout
        )
        return await (sending if self.tracer is None else self._traced(msgs, sending))

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send without waiting; the task (and the callback) get the result."""
        task = asyncio.ensure_future(self.send(msg))
        if callback is not None:

            def done(t: asyncio.Task[SendResult]) -> None:
                exc = t.exception() if not t.cancelled() else asyncio.CancelledError()
                callback(None if exc else t.result(), exc)

            task.add_done_callback(done)
        return task

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for the answer (nothing tells whether it was stored)."""
        self._require_running()
        enc = self._encode([msg])
        info = await self._publish_info(enc.topic)
        mq = self.fault.select_one_message_queue(info, None)
        addr = await self._master(mq)
        task = asyncio.ensure_future(self.client.broker(addr).oneway(self._request(enc, mq)))
        self._oneway.add(task)
        task.add_done_callback(self._oneway.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _require_running(self) -> None:
        if not self._running:
            raise ClientStateError("the producer is not started; call `await producer.start()`")

    async def _master(self, mq: MessageQueue) -> str:
        addr = self.client.master_addr(mq.broker_name)
        if addr is None:
            await self.client.update_route(mq.topic)
            addr = self.client.master_addr(mq.broker_name)
        if addr is None:
            raise ServiceNotAvailableError(
                f"broker {mq.broker_name} of topic {mq.topic} has no master now (it is down "
                "or failing over); the send is retried on another broker if there is one"
            )
        return addr

    async def _send(
        self,
        enc: Encoded,
        selector: MessageQueueSelector | None,
        arg: Any,
        msg: Message | None,
        fixed: MessageQueue | None,
        timeout: float | None,
        *,
        natural: bool = False,
    ) -> SendResult:
        """One send call (a message or a batch), timed when metrics are on; ``natural``:
        a single message through its lane (:meth:`_via_lane`)."""
        self._require_running()
        if natural:
            assert msg is not None
            sending = self._via_lane(enc, selector, arg, msg, fixed, timeout)
        else:
            sending = self._send_with_retries(enc, selector, arg, msg, fixed, timeout)
        metrics = self._metrics
        if metrics is None:
            return await sending
        started = time.perf_counter()
        ok = False
        try:
            result = await sending
            ok = result.status is SendStatus.SEND_OK
            return result
        finally:
            millis = (time.perf_counter() - started) * 1000
            metrics.observe_send(enc.topic, self.client.client_id, ok, millis)

    async def _send_with_retries(
        self,
        enc: Encoded,
        selector: MessageQueueSelector | None,
        arg: Any,
        msg: Message | None,
        fixed: MessageQueue | None,
        timeout: float | None,
        *,
        first: MessageQueue | None = None,
    ) -> SendResult:
        budget = timeout if timeout is not None else self.config.send_timeout
        deadline = time.monotonic() + budget
        attempts = 1 + max(0, self.config.retry_times_when_send_failed)
        state = _Attempt()
        refresh = False
        for attempt in range(attempts):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if first is not None and attempt == 0 and fixed is None and selector is None:
                mq = first  # picked, with its route, when the message joined its lane
            else:
                info = await self._publish_info(enc.topic, refresh=refresh)
                if fixed is not None:
                    mq = fixed
                elif selector is not None:
                    assert msg is not None
                    mq = selector(list(info.message_queues), msg, arg)
                else:
                    mq = self.fault.select_one_message_queue(info, state.last_broker)
            started = time.monotonic()
            try:
                result = await self._send_to(enc, mq, left)
            except RocketqError as exc:
                latency = (time.monotonic() - started) * 1000
                self.fault.update_fault_item(mq.broker_name, latency, isolation=True)
                state.errors.append(f"{mq.broker_name}: {exc}")
                state.last_error = exc
                state.last_broker = mq.broker_name
                refresh = True
                if not (exc.retriable or isinstance(exc, RocketqSystemError)):
                    raise
                log.info("send to %s failed (attempt %d): %s", mq.broker_name, attempt + 1, exc)
                continue
            latency = (time.monotonic() - started) * 1000
            self.fault.update_fault_item(mq.broker_name, latency, isolation=False)
            if (
                result.status is not SendStatus.SEND_OK
                and self.config.retry_another_broker_when_not_store_ok
                and attempt + 1 < attempts
                and selector is None
                and fixed is None
            ):
                state.last_broker = mq.broker_name
                continue
            return result
        # Out of time: a timeout (a TimeoutError); out of attempts: the last attempt's
        # error class (a broker that could not be reached stays a ConnectionError, a busy
        # one SystemBusyError), with that error as the cause.
        last = state.last_error
        failed: type[RocketqError] = RocketqSystemError
        if time.monotonic() >= deadline:
            failed = RequestTimeoutError
        elif last is not None and for_code(last.code) is type(last):
            failed = type(last)
        raise failed(
            f"send to topic {enc.topic} failed after {len(state.errors)} attempt(s) within "
            f"{budget:.1f} s: " + "; ".join(state.errors or ["send timeout"])
        ) from last

    def _request(self, enc: Encoded, mq: MessageQueue) -> RemotingCommand:
        return send_request(
            enc.body,
            enc.properties or "",
            group=self.group,
            topic=enc.topic,
            queue_id=mq.queue_id,
            born_timestamp=int(time.time() * 1000),
            sys_flag=enc.sys_flag,
            flag=enc.flag,
            default_topic=self.config.create_topic_key,
            default_queue_nums=self.config.default_topic_queue_nums,
            batch=enc.batch,
        )

    async def _send_to(self, enc: Encoded, mq: MessageQueue, timeout: float) -> SendResult:
        addr = await self._master(mq)
        reply = await self.client.broker(addr).send(self._request(enc, mq), timeout)
        offset_ids = reply.msg_ids
        return SendResult(
            status=SendStatus(reply.code),
            msg_id=",".join(enc.ids),
            offset_msg_id=",".join(offset_ids),
            queue=mq,
            queue_offset=reply.queue_offset,
            msg_ids=tuple(enc.ids),
            offset_msg_ids=tuple(offset_ids),
        )
