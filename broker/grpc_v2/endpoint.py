"""The apache.rocketmq.v2 gRPC endpoint of a broker, for RocketMQ 5's official clients.

It translates, as RocketMQ 5's proxy does in its "local" mode, each RPC into what the
broker already does:

- QueryRoute and QueryAssignment answer every master holding the topic, each at its own
  endpoint (:mod:`rocketq.broker.grpc_v2.routes`); a FIFO group is assigned each queue,
  the others one pseudo-queue (-1, pop from any) per master;
- SendMessage and EndTransaction store through the send path
  (:mod:`rocketq.broker.grpc_v2.sending`);
- ReceiveMessage pops (:mod:`rocketq.broker.pop`, orderly for a FIFO group) and streams the
  status, the messages and the delivery time; AckMessage, ChangeInvisibleDuration and
  ForwardMessageToDeadLetterQueue take the pop's receipt and the CommitLog offset as the
  receipt handle (RocketMQ's ReceiptHandle); what auto_renew consumers hold is renewed
  (:mod:`rocketq.broker.grpc_v2.renewal`);
- the pull consumer's RPCs read and store offsets (:mod:`rocketq.broker.grpc_v2.pull`);
- Telemetry answers each settings frame with the settings the broker applies, carries the
  broker's transaction checks to producers and its admin calls to consumers
  (:mod:`rocketq.broker.grpc_v2.client_calls`); Heartbeat and NotifyClientTermination keep
  a consumer in its group's client list.

Business errors go in the response's ``Status`` with RocketMQ's codes
(:mod:`rocketq.broker.grpc_v2.convert`); signatures and ACLs are checked as on the remoting
port, TLS follows the broker's keys (:mod:`rocketq.broker.grpc_v2.tls`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc

from rocketq.auth.request_map import SUPER, v2_requirement
from rocketq.broker.client_channels import client_channels
from rocketq.broker.consumer_manager import CONSUME_POP
from rocketq.broker.grpc_v2 import convert as v2
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as s
from rocketq.broker.grpc_v2 import service_pb2_grpc
from rocketq.broker.grpc_v2.client_calls import ClientCalls
from rocketq.broker.grpc_v2.convert import (
    MAX_POLL_MS,
    OK,
    POLL_MARGIN_S,
    EndpointHost,
    error_status,
    receipt_error,
)
from rocketq.broker.grpc_v2.pull import PullRpcs
from rocketq.broker.grpc_v2.renewal import Renewals
from rocketq.broker.grpc_v2.routes import PERM_READ, PERM_WRITE, ClusterRoutes, RouteBroker
from rocketq.broker.grpc_v2.sending import SendRpcs
from rocketq.broker.grpc_v2.tls import server_credentials
from rocketq.broker.metrics import GRPC
from rocketq.broker.pop import (
    INIT_MODE_MAX,
    MAX_INVISIBLE_MS,
    MAX_POP,
    PROPERTY_POP_CK,
    ExtraInfo,
)
from rocketq.broker.transaction import CheckTransaction
from rocketq.common.exceptions import (
    RocketqError,
)
from rocketq.common.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PROPERTY_REAL_TOPIC,
    MessageExt,
)
from rocketq.common.ports import PortBindError
from rocketq.common.record import (
    decode_record,
    decode_records,
)

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


class Endpoint(SendRpcs, PullRpcs, service_pb2_grpc.MessagingServiceServicer):
    """The v2 MessagingService on ``host:port`` (port 0: any free port)."""

    def __init__(self, broker: EndpointHost, host: str, port: int) -> None:
        super().__init__(broker)
        self.host = host
        self.port = port
        self._server: grpc.aio.Server | None = None
        # Producers with a Telemetry stream: client id -> the topics they publish to.
        self._producers: dict[str, list[str]] = {}
        # With authentication on: which user and connection each client id belongs to
        # (the broker's one table, shared with the remoting port).
        self.bindings = broker.consumers.bindings
        self.routes = ClusterRoutes(broker, self._own_address)
        # What auto_renew consumers received, kept invisible until they are done with it.
        self.renewals = Renewals(self._change_receipt, broker.pop.clock_ms)

    async def start(self) -> int:
        # No SO_REUSEPORT (gRPC's default): a second server asking for the same port must
        # fail, not share it.
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        service_pb2_grpc.add_MessagingServiceServicer_to_server(self, server)  # type: ignore[no-untyped-call]
        address = f"{self.host}:{self.port}"
        tls = self.b.security.tls
        try:
            if tls is not None and tls.enabled:
                self.port = server.add_secure_port(address, server_credentials(tls))
            else:
                self.port = server.add_insecure_port(address)
        except RuntimeError:  # gRPC says only that it failed: learn why from a plain bind
            raise PortBindError(
                f"cannot listen on {address} for the apache.rocketmq.v2 endpoint "
                f"({v2.bind_error(self.host, self.port)}); set grpc_listen_port",
                name="grpc",
                port=self.port,
                code=v2.bind_errno(self.host, self.port),
            ) from None
        await server.start()
        self._server = server
        self.renewals.start()
        log.info(
            "apache.rocketmq.v2 gRPC endpoint on %s:%d (%s)",
            self.host, self.port, "TLS" if tls is not None and tls.enabled else "plaintext",
        )  # fmt: skip
        return self.port

    async def stop(self) -> None:
        self.routes.close()
        await self.renewals.stop()
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None

    # -- routes, settings, liveness ----------------------------------------------------

    def _own_address(self) -> tuple[str, int]:
        return self.b.config.broker_ip1 or self.host, self.port

    def _endpoints(self, host: str = "", port: int = 0) -> d.Endpoints:
        if not host:
            host, port = self._own_address()
        return d.Endpoints(scheme=v2.scheme(host), addresses=[d.Address(host=host, port=port)])

    async def _brokers(self, topic: str, read_queues: int, write_queues: int) -> list[RouteBroker]:
        """The masters holding ``topic`` with a v2 endpoint, from the nameservers' route;
        this broker alone (its ``read_queues`` and ``write_queues``) when the nameservers
        do not know the topic yet or cannot be reached."""
        brokers = await self.routes.brokers(topic)
        if brokers:
            return brokers
        host, port = self._own_address()
        perm = PERM_READ | PERM_WRITE
        return [RouteBroker(self.b.config.broker_name, host, port, read_queues, write_queues, perm)]

    @v2.timed("query_route")
    async def QueryRoute(self, request: s.QueryRouteRequest, context: Any) -> s.QueryRouteResponse:
        """Every master holding the topic, each with its own endpoint's address (RocketMQ
        5's proxy in local mode); a topic not known anywhere is created here as a send
        would create it."""
        topic = request.topic.name
        illegal = v2.illegal_topic(topic)
        if illegal is not None:
            return s.QueryRouteResponse(status=illegal)
        refused = self._refusal("QueryRoute", context, topic, "")
        if refused is not None:
            return s.QueryRouteResponse(status=refused)
        config = self.b.topics.get(topic)
        if config is None:
            # Answering creates the topic, as a send would: Create on it is needed too.
            refused = self._creation_refusal(context, topic)
            if refused is not None:
                return s.QueryRouteResponse(status=refused)
            try:
                config = self.b.topics.create_in_send(topic, AUTO_CREATE_TOPIC_KEY_TOPIC, 0)
            except RocketqError as exc:
                return s.QueryRouteResponse(status=error_status(exc))
        kinds = [
            d.MessageType.NORMAL,
            d.MessageType.FIFO,
            d.MessageType.DELAY,
            d.MessageType.TRANSACTION,
        ]
        namespace = request.topic.resource_namespace
        queues: list[d.MessageQueue] = []
        for found in await self._brokers(topic, config.read_queue_nums, config.write_queue_nums):
            broker = d.Broker(
                name=found.name, id=0, endpoints=self._endpoints(found.host, found.port)
            )
            permission = v2.permission(found.perm)
            queues.extend(
                d.MessageQueue(
                    topic=d.Resource(name=topic, resource_namespace=namespace),
                    id=i,
                    permission=permission,
                    broker=broker,
                    accept_message_types=kinds,
                )
                for i in range(max(found.read_queue_nums, found.write_queue_nums))
            )
        return s.QueryRouteResponse(status=v2.status(OK), message_queues=queues)

    @v2.timed("heartbeat")
    async def Heartbeat(self, request: s.HeartbeatRequest, context: Any) -> s.HeartbeatResponse:
        consumer = request.client_type in v2.CONSUMER_TYPES
        group = request.group.name if consumer else ""
        refused = self._refusal("Heartbeat", context, "", group)
        if refused is not None:
            return s.HeartbeatResponse(status=refused)
        client_id = v2.client_id(context)
        refused = self._claim(client_id, context)
        if refused is not None:
            return s.HeartbeatResponse(status=refused)
        for topic in self._producers.get(client_id, ()):
            self.b.consumers.register_producer(topic, client_id)  # still alive
        if group:
            self._register_consumer(group, client_id, context)
        return s.HeartbeatResponse(status=v2.status(OK))

    def _claim(self, client_id: str, context: Any) -> d.Status | None:
        """With authentication on, bind the request's client id to its user and connection
        (:mod:`rocketq.broker.client_bindings`); FORBIDDEN when it is another user's."""
        if not client_id or self.b.security.access is None:
            return None
        if self._refused(context, SUPER, windowed=False) is None:
            return None  # a super user (or a node) may do anything, this too
        why = self.bindings.claim(client_id, self._identity(context), context.peer())
        if why is None:
            return None
        return v2.status(d.Code.FORBIDDEN, f"authorization failed: {why}")

    def _register_consumer(self, group: str, client_id: str, context: Any) -> None:
        """A v2 consumer in the group's client list (as RocketMQ 5's proxy registers it,
        consume type CONSUME_POP), with its language for the metrics; it leaves with
        NotifyClientTermination or 120 s without a heartbeat."""
        if not client_id:
            return
        self._describe(client_id, context)
        self.b.consumers.register_consumer(
            group,
            client_id,
            client_addr=v2.peer_ip(context.peer()),
            consume_type=CONSUME_POP,
            message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscriptions=[],
        )

    def _describe(self, client_id: str, context: Any) -> None:
        if client_id:
            language = v2.describe_client(context)[0] or "unknown"
            self.b.consumers.client_kinds[client_id] = (language, GRPC)

    @v2.timed("notify_client_termination")
    async def NotifyClientTermination(
        self, request: s.NotifyClientTerminationRequest, context: Any
    ) -> s.NotifyClientTerminationResponse:
        refused = self._refusal("NotifyClientTermination", context, "", "")
        if refused is not None:
            return s.NotifyClientTerminationResponse(status=refused)
        client_id = v2.client_id(context)
        if client_id and self.b.security.access is not None:
            # Only the user and connection a client id is bound to may end it; an id bound
            # to nobody has nothing of this endpoint's to end.
            user = self._identity(context)
            if not self.bindings.owns(client_id, user, context.peer()):
                holder = self.bindings.user_of(client_id)
                if holder is not None and holder != user:
                    why = f"client id {client_id[:80]!r} belongs to another user"
                    return s.NotifyClientTerminationResponse(
                        status=v2.status(d.Code.FORBIDDEN, f"authorization failed: {why}")
                    )
                return s.NotifyClientTerminationResponse(status=v2.status(OK))
            self.bindings.release(client_id)
        self.renewals.drop_client(client_id)
        if client_id and client_id not in self._producers:
            self.b.consumers.unregister_client(client_id, reason="it terminated")
        return s.NotifyClientTerminationResponse(status=v2.status(OK))

    async def Telemetry(
        self, request_iterator: AsyncIterator[s.TelemetryCommand], context: Any
    ) -> None:
        """Answer each settings frame with the settings applied. A producer's stream also
        carries the broker's transaction checks of its topics (the producer group of a v2
        producer is the topic, as RocketMQ 5's proxy makes it): a half message not ended
        in time is sent as a RecoverOrphanedTransactionCommand, and the producer's checker
        ends it with EndTransaction. A consumer's stream carries the broker's admin calls
        to it (running info with thread stacks, consuming a message directly:
        :mod:`rocketq.broker.grpc_v2.client_calls`) and their answers."""
        client_id = v2.client_id(context)
        consumers = self.b.consumers
        remote = client_channels(consumers).remote
        channel: asyncio.Queue[Any] | None = None
        forward: asyncio.Task[None] | None = None
        calls: ClientCalls | None = None
        lock = asyncio.Lock()  # one write at a time: replies, checks and calls share it
        first = True  # the stream's headers are held to the signature window once

        async def write(command: s.TelemetryCommand) -> None:
            async with lock:
                await context.write(command)

        try:
            async for command in request_iterator:
                refused = self._refusal("Telemetry", context, windowed=first)
                if refused is None and command.HasField("settings"):
                    refused = self._settings_refusal(
                        command.settings, client_id, context, windowed=first
                    )
                first = False
                if refused is not None:
                    await write(s.TelemetryCommand(status=refused))
                    return
                if calls is not None and calls.answered(command):
                    continue
                if not command.HasField("settings"):
                    continue
                settings = self._settings(command.settings)
                await write(s.TelemetryCommand(status=v2.status(OK), settings=settings))
                if settings.HasField("subscription") and settings.subscription.group.name:
                    self._register_consumer(settings.subscription.group.name, client_id, context)
                    if calls is None and client_id:
                        calls = ClientCalls(
                            client_id,
                            write,
                            lambda m: v2.message(m, 0),
                            lambda: v2.describe_client(context),
                        )
                        remote[client_id] = calls
                    if calls is not None:
                        calls.settings = settings
                if settings.HasField("publishing") and client_id:
                    self._describe(client_id, context)
                    topics = [t.name for t in settings.publishing.topics if t.name]
                    self._producers[client_id] = topics
                    for topic in topics:
                        consumers.register_producer(topic, client_id)
                    if channel is None:
                        channel = consumers.open_channel(client_id)
                        forward = asyncio.ensure_future(
                            self._forward(channel, write, client_id, context)
                        )
        finally:
            if calls is not None:
                calls.close()
                if remote.get(client_id) is calls:
                    del remote[client_id]
            if forward is not None:
                forward.cancel()
            if channel is not None:
                self._producers.pop(client_id, None)
                consumers.close_channel(client_id, channel)

    def _settings_refusal(
        self, asked: d.Settings, client_id: str, context: Any, *, windowed: bool
    ) -> d.Status | None:
        """What a settings frame declares, checked before anything is registered: a
        publisher needs Pub on every topic it names (its stream receives their transaction
        checks, half message included), a subscriber Sub on its group and every topic it
        subscribes to; the client id must be the user's own."""
        if asked.HasField("publishing"):
            topics = [t.name for t in asked.publishing.topics]
            refused = self._declared_refusal(
                "Telemetry.publishing", context, "", topics, windowed=windowed
            )
            if refused is not None:
                return refused
        if asked.HasField("subscription") and (
            asked.subscription.group.name or asked.subscription.subscriptions
        ):
            topics = [e.topic.name for e in asked.subscription.subscriptions]
            refused = self._declared_refusal(
                "Telemetry.subscription",
                context,
                asked.subscription.group.name,
                topics,
                windowed=windowed,
            )
            if refused is not None:
                return refused
        return self._claim(client_id, context)

    def _check_refusal(self, topic: str, client_id: str, context: Any) -> str | None:
        """Why a transaction check of ``topic`` may not go to this producer's stream."""
        if topic not in self._producers.get(client_id, ()):
            return "the stream did not declare the topic"
        access = self.b.security.access
        if access is None:
            return None
        need = v2_requirement("Telemetry.publishing", "", "", [topic])
        return access.may(self._identity(context), need, v2.peer_ip(context.peer()))

    def _settings(self, asked: d.Settings) -> d.Settings:
        """The client's settings merged as RocketMQ 5's proxy merges them
        (GrpcClientSettingsManager): a producer gets the proxy's retry policy and the
        broker's message size limit, a consumer its group's FIFO flag and attempts, the
        proxy's batch size and longest poll and the group's retry delays; metrics stay off.
        What a client proposes otherwise (its request timeout...) is kept."""
        settings = d.Settings()
        settings.CopyFrom(asked)
        if settings.HasField("publishing"):
            policy = settings.backoff_policy
            policy.Clear()
            policy.max_attempts = v2.PRODUCER_MAX_ATTEMPTS
            backoff = policy.exponential_backoff
            backoff.initial.FromMilliseconds(v2.PRODUCER_BACKOFF_INITIAL_MS)
            backoff.max.FromMilliseconds(v2.PRODUCER_BACKOFF_MAX_MS)
            backoff.multiplier = v2.PRODUCER_BACKOFF_MULTIPLIER
            settings.publishing.validate_message_type = True
            settings.publishing.max_body_size = self.b.store_config.max_message_size
        elif settings.HasField("subscription"):
            group = settings.subscription.group.name
            config = self.b.groups.find_or_create(group) if group else None
            retries = config.retry_max_times if config is not None else 16
            subscription = settings.subscription
            subscription.receive_batch_size = v2.RECEIVE_BATCH_SIZE
            subscription.long_polling_timeout.FromMilliseconds(MAX_POLL_MS)
            # A FIFO group (consumeMessageOrderly): the push consumer keeps each message
            # group's messages in order.
            subscription.fifo = bool(config and config.consume_message_orderly)
            policy = settings.backoff_policy
            policy.Clear()
            policy.max_attempts = retries + 1
            # RocketMQ's default group retry policy (CustomizedRetryPolicy): 1 s, 5 s,
            # 10 s, 30 s, 1 min ... 2 h, the delay levels from the third on.
            for delay in v2.RETRY_DELAYS_MS:
                policy.customized_backoff.next.add().FromMilliseconds(delay)
        settings.metric.Clear()
        settings.metric.on = False
        return settings

    async def _forward(
        self,
        channel: asyncio.Queue[Any],
        write: Callable[[s.TelemetryCommand], Awaitable[None]],
        client_id: str,
        context: Any,
    ) -> None:
        """The broker's events for this client onto its Telemetry stream: a transaction
        check only of a topic the stream declared and its user may publish to now (the
        users and ACLs may have changed since the stream began)."""
        while True:
            event = await channel.get()
            if not isinstance(event, CheckTransaction):
                continue  # consumer events are for 4.x clients
            half = decode_record(event.record)
            real = half.properties.get(PROPERTY_REAL_TOPIC, half.topic)
            refused = self._check_refusal(real, client_id, context)
            if refused is not None:
                log.warning(
                    "transaction check of %s not sent to client %s: %s",
                    real, client_id[:80], refused,
                )  # fmt: skip
                continue
            msg = v2.message(half, 0, topic=real)
            command = s.RecoverOrphanedTransactionCommand(
                message=msg,
                transaction_id=f"{event.commit_log_offset}:{event.tran_state_table_offset}",
            )
            try:
                await write(s.TelemetryCommand(recover_orphaned_transaction_command=command))
            except Exception:  # the stream ended: the checks go to another producer
                log.debug("transaction check not written to a closed Telemetry stream")
                return

    # -- receiving -------------------------------------------------------------------------

    async def ReceiveMessage(
        self, request: s.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[s.ReceiveMessageResponse]:
        started = time.perf_counter()
        group = request.group.name
        topic = request.message_queue.topic.name
        refused = self._refusal("ReceiveMessage", context, topic, group)
        if refused is not None:
            yield s.ReceiveMessageResponse(status=refused)
            yield s.ReceiveMessageResponse(delivery_timestamp=v2.timestamp(v2.now_ms()))
            return
        renew = request.auto_renew
        invisible = (
            v2.duration_ms(request.invisible_duration)
            if request.HasField("invisible_duration") and not renew
            else self.renewals.invisible_ms
        )
        if not 0 < invisible <= MAX_INVISIBLE_MS:
            yield s.ReceiveMessageResponse(
                status=v2.status(
                    d.Code.ILLEGAL_INVISIBLE_TIME,
                    f"the invisible duration is {invisible} ms; it must be above 0 and at "
                    "most 12 h",
                )
            )
            yield s.ReceiveMessageResponse(delivery_timestamp=v2.timestamp(v2.now_ms()))
            return
        poll = (
            v2.duration_ms(request.long_polling_timeout)
            if request.HasField("long_polling_timeout")
            else MAX_POLL_MS
        )
        remaining = context.time_remaining()
        if remaining is not None:
            poll = max(0, min(poll, int((remaining - POLL_MARGIN_S) * 1000)))
        expression = request.filter_expression
        kind = "SQL92" if expression.type == d.FilterType.SQL else "TAG"
        try:
            group_config = self.b.groups.find_or_create(group)
            orderly = group_config.consume_message_orderly
            # Every queue of the topic on this broker and the group's retry topic, whatever
            # queue the client named (RocketMQ 5's proxy pops queue -1 of the broker the
            # client picked), a new group starting as the proxy starts it (init mode MAX).
            answer = await self.b.pop.pop(
                group,
                topic,
                -1,
                max_nums=max(1, min(request.batch_size or v2.RECEIVE_BATCH_SIZE, MAX_POP)),
                invisible_time=invisible,
                poll_time=poll,
                init_mode=INIT_MODE_MAX,
                expression=expression.expression or "*",
                expression_type=kind,
                order=orderly,
                max_poll_ms=MAX_POLL_MS,  # the proxy's longest poll, not the pull's
            )
            records = decode_records(b"".join(answer.records)) if answer.records else []
            attempts = [m.reconsume_times + 1 for m in records]
            if orderly:
                # An orderly pop counts deliveries itself (RocketMQ's orderCountInfo).
                attempts = [int(c.rpartition(" ")[2]) + 1 for c in answer.order_counts]
                records, attempts = await self._past_attempts(
                    group, topic, records, attempts, group_config.retry_max_times + 1
                )
        except RocketqError as exc:
            yield s.ReceiveMessageResponse(status=error_status(exc))
            yield s.ReceiveMessageResponse(delivery_timestamp=v2.timestamp(v2.now_ms()))
            return
        self._observe(
            "receive_message",
            started,
            OK if records else d.Code.MESSAGE_NOT_FOUND,
            held=answer.held,
        )
        if not records:
            yield s.ReceiveMessageResponse(status=v2.status(d.Code.MESSAGE_NOT_FOUND))
            yield s.ReceiveMessageResponse(delivery_timestamp=v2.timestamp(v2.now_ms()))
            return
        yield s.ReceiveMessageResponse(status=v2.status(OK))
        client_id = v2.client_id(context) if renew else ""
        for msg, attempt in zip(records, attempts, strict=True):
            message = v2.message(msg, invisible, attempt=attempt)
            if renew:
                receipt = message.system_properties.receipt_handle
                self.renewals.add(client_id, group, topic, receipt, answer.pop_time + invisible)
            yield s.ReceiveMessageResponse(message=message)
        yield s.ReceiveMessageResponse(delivery_timestamp=v2.timestamp(answer.pop_time))

    async def _past_attempts(
        self,
        group: str,
        topic: str,
        records: list[MessageExt],
        attempts: list[int],
        max_attempts: int,
    ) -> tuple[list[MessageExt], list[int]]:
        """An orderly pop's messages delivered ``max_attempts`` times already go to
        ``%DLQ%<group>`` and are acknowledged, so the queue moves on (RocketMQ 5's proxy
        does the same for a FIFO group's receive); the others, with their attempts."""
        kept, kept_attempts = [], []
        for msg, attempt in zip(records, attempts, strict=True):
            if attempt <= max_attempts:
                kept.append(msg)
                kept_attempts.append(attempt)
                continue
            receipt = msg.properties.get(PROPERTY_POP_CK, "")
            info = ExtraInfo.parse(receipt)
            await self.b.send.send_back(group, msg.commit_log_offset, -1, 0)
            await self.b.pop.ack(group, topic, info.queue_id, receipt, info.queue_offset)
            log.info(
                "%s of %s queue %d went to the DLQ of %s after %d deliveries",
                msg.offset_msg_id, topic, info.queue_id, group, attempt - 1,
            )  # fmt: skip
        return kept, kept_attempts

    @v2.timed("query_assignment")
    async def QueryAssignment(
        self, request: s.QueryAssignmentRequest, context: Any
    ) -> s.QueryAssignmentResponse:
        """One assignment per readable master holding the topic, queue -1: the push
        consumer pops from any queue of each (RocketMQ 5's proxy); a FIFO group gets one
        per queue."""
        refused = self._refusal("QueryAssignment", context, request.topic.name, request.group.name)
        if refused is not None:
            return s.QueryAssignmentResponse(status=refused)
        topic = request.topic.name
        config = self.b.topics.get(topic)
        brokers = await self.routes.brokers(topic)
        if not brokers:
            if config is None:
                return s.QueryAssignmentResponse(
                    status=v2.status(d.Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
                )
            brokers = await self._brokers(topic, config.read_queue_nums, config.write_queue_nums)
            if not config.readable():
                brokers = []
        readable = [b for b in brokers if b.readable]
        if not readable:
            return s.QueryAssignmentResponse(
                status=v2.status(d.Code.FORBIDDEN, f"topic {topic!r} has no readable queue")
            )
        namespace = request.topic.resource_namespace
        # A FIFO group gets each queue apart (its order is per queue); the others pop
        # from any queue of a broker (-1).
        orderly = self.b.groups.find_or_create(request.group.name).consume_message_orderly
        assignments = [
            d.Assignment(
                message_queue=d.MessageQueue(
                    topic=d.Resource(name=topic, resource_namespace=namespace),
                    id=queue_id,
                    permission=v2.permission(found.perm),
                    broker=d.Broker(
                        name=found.name, id=0, endpoints=self._endpoints(found.host, found.port)
                    ),
                    accept_message_types=[
                        d.MessageType.NORMAL, d.MessageType.FIFO, d.MessageType.DELAY
                    ],
                )
            )
            for found in readable
            for queue_id in (range(found.read_queue_nums) if orderly else [-1])
        ]  # fmt: skip
        return s.QueryAssignmentResponse(status=v2.status(OK), assignments=assignments)

    @v2.timed("forward_message_to_dead_letter_queue")
    async def ForwardMessageToDeadLetterQueue(
        self, request: s.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> s.ForwardMessageToDeadLetterQueueResponse:
        """A consumer gave up on a message: a copy to ``%DLQ%<group>``, then the pop acked."""
        refused = self._refusal(
            "ForwardMessageToDeadLetterQueue", context, request.topic.name, request.group.name
        )
        if refused is not None:
            return s.ForwardMessageToDeadLetterQueueResponse(status=refused)
        handle = await self.renewals.take(request.receipt_handle)
        try:
            info, commit_log_offset = v2.receipt(handle)
            # The handle must be the group's pending pop of a message of the topic before
            # anything is copied: a forged one would name any message in the CommitLog.
            await self.b.pop.verify_receipt(
                request.group.name, request.topic.name, info, commit_log_offset
            )
            await self.b.send.send_back(request.group.name, commit_log_offset, -1, 0)
            await self.b.pop.ack(
                request.group.name, request.topic.name, info.queue_id, handle, info.queue_offset
            )
        except RocketqError as exc:
            status = receipt_error(exc)
            return s.ForwardMessageToDeadLetterQueueResponse(status=status)
        return s.ForwardMessageToDeadLetterQueueResponse(status=v2.status(OK))

    @v2.timed("ack_message")
    async def AckMessage(self, request: s.AckMessageRequest, context: Any) -> s.AckMessageResponse:
        refused = self._refusal("AckMessage", context, request.topic.name, request.group.name)
        if refused is not None:
            return s.AckMessageResponse(status=refused)
        group, topic = request.group.name, request.topic.name
        results = []
        status = v2.status(OK)
        for entry in request.entries:
            try:
                handle = await self.renewals.take(entry.receipt_handle)
                info, commit_log_offset = v2.receipt(handle)
                await self.b.pop.verify_receipt(group, topic, info, commit_log_offset)
                await self.b.pop.ack(group, topic, info.queue_id, handle, info.queue_offset)
                one = v2.status(OK)
            except RocketqError as exc:
                one = receipt_error(exc)
                status = one
            results.append(
                s.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=one
                )
            )
        if len(request.entries) > 1 and any(r.status.code != OK for r in results):
            status = v2.status(d.Code.MULTIPLE_RESULTS)
        return s.AckMessageResponse(status=status, entries=results)

    @v2.timed("change_invisible_duration")
    async def ChangeInvisibleDuration(
        self, request: s.ChangeInvisibleDurationRequest, context: Any
    ) -> s.ChangeInvisibleDurationResponse:
        refused = self._refusal(
            "ChangeInvisibleDuration", context, request.topic.name, request.group.name
        )
        if refused is not None:
            return s.ChangeInvisibleDurationResponse(status=refused)
        try:
            handle = await self.renewals.take(request.receipt_handle)
            info, commit_log_offset = v2.receipt(handle)
            await self.b.pop.verify_receipt(
                request.group.name, request.topic.name, info, commit_log_offset
            )
            new = await self._change_receipt(
                request.group.name,
                request.topic.name,
                handle,
                v2.duration_ms(request.invisible_duration),
            )
        except RocketqError as exc:
            status = receipt_error(exc)
            return s.ChangeInvisibleDurationResponse(
                status=status, receipt_handle=request.receipt_handle
            )
        return s.ChangeInvisibleDurationResponse(status=v2.status(OK), receipt_handle=new)

    async def _change_receipt(self, group: str, topic: str, handle: str, invisible: int) -> str:
        """Hide a received message for ``invisible`` ms from now; -> its new receipt."""
        info, commit_log_offset = v2.receipt(handle)
        new = await self.b.pop.change_invisible(
            group, topic, info.queue_id, handle, info.queue_offset, invisible
        )
        return f"{new.text()} {commit_log_offset}"
