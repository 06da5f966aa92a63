"""The pull consumer's RPCs of the v2 endpoint: the client keeps its offsets. PullMessage
reads one queue from the client's offset, UpdateOffset and GetOffset store and read the
group's offsets as a 4.x consumer's, QueryOffset finds a queue's beginning, end or time."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from rocketq.broker.filter import sql_filter, tag_filter
from rocketq.broker.grpc_v2 import convert as v2
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2 import service_pb2 as s
from rocketq.broker.grpc_v2.base import RpcBase
from rocketq.broker.grpc_v2.convert import OK, POLL_MARGIN_S, error_status
from rocketq.broker.grpc_v2.routes import PERM_READ
from rocketq.broker.subscription_group import check_group
from rocketq.common.exceptions import (
    MessageIllegalError,
    NoPermissionError,
    RocketqError,
    TopicNotExistError,
)
from rocketq.common.record import decode_records
from rocketq.storage.results import GetStatus


class PullRpcs(RpcBase):
    """The pull RPCs, a part of the endpoint."""

    # -- the pull consumer: offsets kept by the client ---------------------------------

    def _pull_queue(self, group: str, topic: str, queue_id: int, *, reading: bool) -> None:
        """Refuse a pull or an offset of a queue that this broker cannot serve."""
        if reading and not self.b.config.broker_permission & PERM_READ:
            raise NoPermissionError(f"the broker[{self.b.config.broker_addr}] is not readable")
        if group:
            check_group(group)
            if not self.b.groups.find_or_create(group).consume_enable:
                raise NoPermissionError(f"consumer group {group} may not consume")
        config = self.b.topics.get(topic)
        if config is None:
            raise TopicNotExistError(f"topic {topic!r} does not exist on this broker")
        if reading and not config.readable():
            raise NoPermissionError(f"topic {topic!r} is not readable")
        if not 0 <= queue_id < config.read_queue_nums:
            raise MessageIllegalError(
                f"queue {queue_id} of {topic!r}: the topic has {config.read_queue_nums} "
                "read queues on this broker"
            )

    async def PullMessage(
        self, request: s.PullMessageRequest, context: Any
    ) -> AsyncIterator[s.PullMessageResponse]:
        """Up to ``batch_size`` messages of one queue from the client's ``offset`` (the
        client keeps its offsets: UpdateOffset and GetOffset store them for the group),
        waiting up to the long polling time for one: the status, the messages, then the
        offset to pull next (RocketMQ 5's pull consumer)."""
        started = time.perf_counter()
        group, topic = request.group.name, request.message_queue.topic.name
        queue_id, offset = request.message_queue.id, request.offset
        refused = self._refusal("PullMessage", context, topic, group)
        if refused is not None:
            yield s.PullMessageResponse(status=refused)
            return
        expression = request.filter_expression
        kind = "SQL92" if expression.type == d.FilterType.SQL else "TAG"
        poll = v2.duration_ms(request.long_polling_timeout)
        remaining = context.time_remaining()
        if remaining is not None:
            poll = max(0, min(poll, int((remaining - POLL_MARGIN_S) * 1000)))
        store = self.b.store
        held = False
        try:
            self._pull_queue(group, topic, queue_id, reading=True)
            if offset < 0:
                raise MessageIllegalError(f"offset {offset} is below 0")
            tags = tag_filter(expression.expression or "*", kind)
            records = sql_filter(
                expression.expression or "*", kind, enabled=self.b.config.enable_property_filter
            )
            count = max(1, min(request.batch_size or 32, 32))
            while True:
                result = store.get_messages(
                    topic, queue_id, offset, max_count=count, tag_filter=tags, record_filter=records
                )
                try:
                    found = result.to_bytes() if result.status is GetStatus.FOUND else b""
                finally:
                    result.release()
                end = store.max_offset_in_queue(topic, queue_id)
                if found or held or poll <= 0 or offset < end:
                    break
                held = True
                await self.b.holds.hold(topic.encode(), queue_id, end, poll / 1000)
        except RocketqError as exc:
            yield s.PullMessageResponse(status=error_status(exc))
            return
        code = OK if found else d.Code.MESSAGE_NOT_FOUND
        if result.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            code = d.Code.ILLEGAL_OFFSET  # the queue no longer holds it: pull from next_offset
        self._observe("pull_message", started, code, held=held)
        yield s.PullMessageResponse(status=v2.status(code))
        for msg in decode_records(found) if found else []:
            yield s.PullMessageResponse(message=v2.message(msg, 0))
        yield s.PullMessageResponse(next_offset=result.next_begin_offset)

    @v2.timed("update_offset")
    async def UpdateOffset(
        self, request: s.UpdateOffsetRequest, context: Any
    ) -> s.UpdateOffsetResponse:
        """Store the group's offset of one queue (as a 4.x consumer commits it)."""
        group, topic = request.group.name, request.message_queue.topic.name
        refused = self._refusal("UpdateOffset", context, topic, group)
        if refused is not None:
            return s.UpdateOffsetResponse(status=refused)
        queue_id = request.message_queue.id
        try:
            self._pull_queue(group, topic, queue_id, reading=False)
            self.b.send._check_writable()
            end = self.b.store.max_offset_in_queue(topic, queue_id)
            if not 0 <= request.offset <= end:
                return s.UpdateOffsetResponse(
                    status=v2.status(
                        d.Code.ILLEGAL_OFFSET,
                        f"offset {request.offset} of {topic} queue {queue_id}: it holds up to "
                        f"{end}",
                    )
                )
            self.b.offsets.commit(group, topic, queue_id, request.offset)
        except RocketqError as exc:
            return s.UpdateOffsetResponse(status=error_status(exc))
        return s.UpdateOffsetResponse(status=v2.status(OK))

    @v2.timed("get_offset")
    async def GetOffset(self, request: s.GetOffsetRequest, context: Any) -> s.GetOffsetResponse:
        """The group's stored offset of one queue; OFFSET_NOT_FOUND when it has none."""
        group, topic = request.group.name, request.message_queue.topic.name
        refused = self._refusal("GetOffset", context, topic, group)
        if refused is not None:
            return s.GetOffsetResponse(status=refused)
        queue_id = request.message_queue.id
        try:
            self._pull_queue(group, topic, queue_id, reading=False)
        except RocketqError as exc:
            return s.GetOffsetResponse(status=error_status(exc))
        offset = self.b.offsets.query(group, topic, queue_id)
        if offset < 0:
            return s.GetOffsetResponse(
                status=v2.status(
                    d.Code.OFFSET_NOT_FOUND, f"{group} has no offset of {topic} queue {queue_id}"
                )
            )
        return s.GetOffsetResponse(status=v2.status(OK), offset=offset)

    @v2.timed("query_offset")
    async def QueryOffset(
        self, request: s.QueryOffsetRequest, context: Any
    ) -> s.QueryOffsetResponse:
        """A queue's first offset (BEGINNING), its end (END) or the first message stored
        at or after a time (TIMESTAMP)."""
        topic, queue_id = request.message_queue.topic.name, request.message_queue.id
        refused = self._refusal("QueryOffset", context, topic, "")
        if refused is not None:
            return s.QueryOffsetResponse(status=refused)
        store = self.b.store
        try:
            self._pull_queue("", topic, queue_id, reading=False)
        except RocketqError as exc:
            return s.QueryOffsetResponse(status=error_status(exc))
        policy = request.query_offset_policy
        if policy == d.QueryOffsetPolicy.END:
            offset = store.max_offset_in_queue(topic, queue_id)
        elif policy == d.QueryOffsetPolicy.TIMESTAMP:
            offset = store.offset_by_time(topic, queue_id, v2.ms(request.timestamp))
        else:
            offset = store.min_offset_in_queue(topic, queue_id)
        return s.QueryOffsetResponse(status=v2.status(OK), offset=offset)
