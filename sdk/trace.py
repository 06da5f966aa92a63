"""Message trace: who sent and who consumed a message, when, how long it took, how it ended.

A producer or consumer made with ``enable_trace=True`` records an event per message (a
send: ``Pub``; a consume: ``SubBefore`` and ``SubAfter``) and a background dispatcher
writes them, many to a message, to the trace topic (``RMQ_SYS_TRACE_TOPIC``) keyed by the
traced message ids, so ``Admin.trace(msg_id)`` / ``rocketq admin trace --msg-id`` find
them with an index lookup. Tracing never slows or fails the traced call: events that
cannot be written are dropped with a warning, and the queue of pending events is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Protocol

from rocketq.common.aio import wait_event
from rocketq.common.exceptions import RocketqError
from rocketq.common.message import TRACE_TOPIC, Message, MessageExt

log = logging.getLogger(__name__)

MAX_PENDING = 20_000
MAX_BATCH = 100  # events per trace message
FLUSH_INTERVAL = 0.1  # s


@dataclass(slots=True)
class TraceEvent:
    type: str  # Pub, SubBefore, SubAfter
    msg_id: str
    topic: str
    group: str
    client_id: str
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    offset_msg_id: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_ms: int = 0
    status: str = ""
    success: bool = True
    reconsume_times: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


def parse_events(body: bytes) -> list[TraceEvent]:
    """The events of one trace message (one JSON object per line); bad lines are skipped."""
    out = []
    for line in body.decode(errors="replace").splitlines():
        try:
            out.append(TraceEvent(**json.loads(line)))
        except (ValueError, TypeError, RecursionError):  # RecursionError: nested too deep
            log.debug("skipping a trace line that is not an event: %r", line[:80])
    return out


def publish_event(
    group: str,
    client_id: str,
    msg: Message,
    msg_id: str,
    offset_msg_id: str,
    cost_ms: int,
    status: str,
) -> TraceEvent:
    return TraceEvent(
        type="Pub",
        msg_id=msg_id,
        topic=msg.topic,
        group=group,
        client_id=client_id,
        tags=msg.tags,
        keys=list(msg.keys),
        offset_msg_id=offset_msg_id,
        body_length=len(msg.body),
        cost_ms=cost_ms,
        status=status,
        success=status == "SEND_OK",
    )


def consume_event(
    kind: str, group: str, client_id: str, msg: MessageExt, cost_ms: int = 0, success: bool = True
) -> TraceEvent:
    return TraceEvent(
        type=kind,
        msg_id=msg.msg_id,
        topic=msg.topic,
        group=group,
        client_id=client_id,
        tags=msg.tags,
        keys=msg.keys,
        offset_msg_id=msg.offset_msg_id,
        store_host=msg.store_host,
        body_length=len(msg.body),
        cost_ms=cost_ms,
        success=success,
        reconsume_times=msg.reconsume_times,
    )


class TraceWriter(Protocol):
    """What writes the trace messages: a producer of the dispatcher's own (in the group
    ``TRACE_PRODUCER_GROUP``), started and shut down with it."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def send(self, msg: Message) -> object: ...


class TraceDispatcher:
    """Writes trace events in the background through ``producer``, a producer of its own."""

    def __init__(self, producer: TraceWriter, *, topic: str = TRACE_TOPIC) -> None:
        self.topic = topic
        self.producer = producer
        self._pending: asyncio.Queue[TraceEvent] = asyncio.Queue(MAX_PENDING)
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.written = 0

    async def start(self) -> None:
        await self.producer.start()
        self._task = asyncio.ensure_future(self._run())

    def record(self, event: TraceEvent) -> None:
        try:
            self._pending.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            return
        self._ready.set()

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Write what is pending (within ``timeout``), then stop."""
        self._stop.set()
        self._ready.set()
        if self._task is not None:
            await asyncio.wait((self._task,), timeout=timeout)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.dropped += self._pending.qsize()
        await self.producer.shutdown()

    def _take(self) -> list[TraceEvent]:
        batch: list[TraceEvent] = []
        while not self._pending.empty() and len(batch) < MAX_BATCH:
            batch.append(self._pending.get_nowait())
        return batch

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            if not self._stop.is_set():
                await wait_event(self._stop, FLUSH_INTERVAL)  # let a batch gather
            while not self._pending.empty():
                await self._write(self._take())
            if self._stop.is_set():
                return

    async def _write(self, events: list[TraceEvent]) -> None:
        if not events:
            return
        keys = sorted({e.msg_id for e in events if e.msg_id})
        body = "\n".join(e.to_json() for e in events).encode()
        try:
            await self.producer.send(Message(self.topic, body, keys=keys))
            self.written += len(events)
        except RocketqError as exc:
            self.dropped += len(events)
            log.warning("dropped %d trace events: %s", len(events), exc)
