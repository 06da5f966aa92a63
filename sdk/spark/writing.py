"""A Spark task's rows -> messages, sent in batches through the SDK's producer.

Columns: ``body`` (binary or string) is required; ``topic`` (else option topic), ``keys``
(a string or an array of strings), ``tags``, ``properties`` (map of strings) and
``sharding_key`` (messages with one key go to one queue, in row order) are optional; other
columns are ignored. Every send must be SEND_OK, or the task fails.

Spark hands a task its rows as Arrow record batches (thousands of rows each; a stream
writer on Spark 4.0 gets rows). Each column of a record batch becomes a Python list at once,
the rows of one topic and sharding key are cut into batches of ``batchSize`` messages (at
most :data:`BATCH_BYTES`), and all the batches of one record batch go to the SDK's event
loop together, where up to ``maxInFlight`` are sent at once while the task's thread turns
the next record batch into messages. A batch the brokers refuse for a while (busy, down,
restarting) is sent again until ``writeTimeoutSeconds`` have passed.

Spark runs a failed task again, and a task that fails half way has sent part of its rows:
those are sent twice. Each message therefore carries ``SPARK_ROW_KEY``: the row's
``msg_id`` column when it has one (a row read from rocketq or its archive), else the write's
id, the task's partition and the row's place in it, the same on every attempt of the task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from rocketq.common.exceptions import (
    ConnectBrokerError,
    RequestTimeoutError,
    RocketqError,
    TopicNotExistError,
)
from rocketq.common.message import SYSTEM_PROPERTY_NAMES, Message
from rocketq.sdk.background_loop import background_loop, run_blocking
from rocketq.sdk.producer import Producer
from rocketq.sdk.security import security_settings
from rocketq.sdk.spark.options import WriteOptions

log = logging.getLogger(__name__)

ROW_KEY: Final = "SPARK_ROW_KEY"
# A batch is cut at about this many bytes (RocketMQ's batch splitter's size): a send
# holds at most max_message_size (4 MiB), and smaller requests keep the broker's queue
# moving.
BATCH_BYTES: Final = 1024 * 1024
_RECORD_BYTES: Final = 200  # a message's bytes in a batch besides its body and properties
ROWS_PER_HANDOFF: Final = 4096  # a stream writer's rows handed to the loop at once

Batch = tuple[list[Message], str | None]
"""Messages of one topic for one queue, and their sharding key."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    sent: int


def _keys(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [k for k in value.split(" ") if k]
    return [str(k) for k in value if k]


def _body(body: Any) -> bytes:
    if body is None:
        raise RocketqError("a row has no body (null): every message needs one")
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return bytes(body)


def row_message(
    row: Mapping[str, Any], default_topic: str | None, row_key: str
) -> tuple[Message, str | None]:
    """One row -> (message, sharding key)."""
    body = _body(row.get("body"))
    topic = row.get("topic") or default_topic
    if not topic:
        raise RocketqError("a row has no topic: fill the topic column or set option topic")
    props_in = row.get("properties") or {}
    if not isinstance(props_in, Mapping):
        props_in = dict(props_in)
    props = {str(k): str(v) for k, v in props_in.items() if k not in SYSTEM_PROPERTY_NAMES}
    origin = row.get("msg_id")
    props[ROW_KEY] = str(origin) if origin else row_key
    sharding = row.get("sharding_key")
    msg = Message(
        topic=str(topic),
        body=body,
        tags=str(row["tags"]) if row.get("tags") else None,
        keys=_keys(row.get("keys")),
        properties=props,
    )
    return msg, (str(sharding) if sharding is not None else None)


_OPTIONAL: Final = ("topic", "keys", "tags", "properties", "sharding_key", "msg_id")


def _columns(batch: pa.RecordBatch) -> dict[str, list[Any]]:
    """The columns the writer reads, each as a list (binary bodies as bytes)."""
    names = set(batch.schema.names)
    if "body" not in names:
        raise RocketqError(f"a record batch has no body column: {', '.join(batch.schema.names)}")
    out: dict[str, list[Any]] = {}
    for name in ("body", *_OPTIONAL):
        if name in names:
            column = batch.column(name)
            if name == "body" and pa.types.is_string(column.type):
                column = column.cast(pa.binary())  # the same bytes, read as bytes
            elif name == "body" and pa.types.is_large_string(column.type):
                column = column.cast(pa.large_binary())
            out[name] = column.to_pylist()
    return out


def _rows_columns(columns: list[str], rows: Sequence[Any]) -> dict[str, list[Any]]:
    """Spark rows (tuples with names) -> the columns the writer reads, each as a list."""
    if not rows:
        return {"body": []}
    names = list(getattr(rows[0], "__fields__", None) or columns)
    out: dict[str, list[Any]] = {}
    for name in ("body", *_OPTIONAL):
        if name in names:
            i = names.index(name)
            out[name] = [row[i] for row in rows]
    if "body" not in out:
        raise RocketqError(f"the rows have no body column: {', '.join(names)}")
    return out


class Batcher:
    """Rows -> batches of messages, one open batch per (topic, sharding key), cut at
    ``batch_size`` messages or :data:`BATCH_BYTES`; row keys numbered from 0 in the order
    rows come."""

    def __init__(self, opts: WriteOptions, key_prefix: str) -> None:
        self.topic = opts.topic
        self.batch_size = opts.batch_size
        self.prefix = f"{key_prefix}-"
        self.rows = 0
        self.open: dict[tuple[str, str | None], tuple[list[Message], int]] = {}

    def add(self, columns: dict[str, list[Any]]) -> list[Batch]:
        """The rows of ``columns`` (each column a list, body required); -> the batches
        they filled."""
        bodies = columns["body"]
        first = self.rows
        self.rows += len(bodies)
        if len(columns) == 1 and self.topic is not None:
            return self._plain(bodies, first)
        names = list(columns)
        ready: list[Batch] = []
        for i, values in enumerate(zip(*columns.values(), strict=True)):
            msg, sharding = row_message(
                dict(zip(names, values, strict=True)), self.topic, f"{self.prefix}{first + i}"
            )
            size = len(msg.body) + _RECORD_BYTES
            size += sum(len(k) + len(v) for k, v in msg.properties.items())
            self._put(msg, sharding, size, ready)
        return ready

    def _plain(self, bodies: list[Any], first: int) -> list[Batch]:
        """Rows with a body only, into option topic: messages built in one comprehension,
        and cut into batches by count alone when ``batch_size`` of the longest fit in
        :data:`BATCH_BYTES`."""
        topic = self.topic
        assert topic is not None
        prefix = self.prefix
        if not all(type(b) is bytes for b in bodies):
            bodies = [_body(b) for b in bodies]
        msgs = [
            Message(topic, b, properties={ROW_KEY: f"{prefix}{n}"})
            for n, b in enumerate(bodies, first)
        ]
        ready: list[Batch] = []
        extra = _RECORD_BYTES + len(ROW_KEY) + len(prefix) + 12
        if not msgs or (max(map(len, bodies)) + extra) * self.batch_size > BATCH_BYTES:
            for msg in msgs:
                self._put(msg, None, len(msg.body) + extra, ready)
            return ready
        key = (topic, None)
        batch, _ = self.open.pop(key, ([], 0))
        take = self.batch_size - len(batch)
        batch.extend(msgs[:take])
        ready.append((batch, None))
        size = self.batch_size
        for i in range(take, len(msgs), size):
            ready.append((msgs[i : i + size], None))
        if len(ready[-1][0]) < size:  # the last batch stays open for the next rows
            last, _ = ready.pop()
            self.open[key] = (last, sum(len(m.body) + extra for m in last))
        return ready

    def _put(self, msg: Message, sharding: str | None, size: int, ready: list[Batch]) -> None:
        key = (msg.topic, sharding)
        batch, held = self.open.get(key) or ([], 0)
        if batch and held + size > BATCH_BYTES:
            ready.append((batch, sharding))
            batch, held = [], 0
        batch.append(msg)
        held += size
        if len(batch) >= self.batch_size:
            ready.append((batch, sharding))
            self.open.pop(key, None)
        else:
            self.open[key] = (batch, held)

    def rest(self) -> list[Batch]:
        """The batches still open (the task's last rows)."""
        out = [(batch, key[1]) for key, (batch, _) in self.open.items()]
        self.open.clear()
        return out


def _pieces(columns: list[str], iterator: Iterable[Any]) -> Iterator[dict[str, list[Any]]]:
    """Arrow record batches (the batch writer, and the stream writer from Spark 4.1) or
    Spark rows (the stream writer on 4.0) -> the writer's columns, a piece at a time."""
    rows: list[Any] = []
    for item in iterator:
        if isinstance(item, pa.RecordBatch):
            if rows:
                yield _rows_columns(columns, rows)
                rows = []
            yield _columns(item)
        elif isinstance(item, tuple):  # pyspark's Row is a tuple with names
            rows.append(item)
            if len(rows) >= ROWS_PER_HANDOFF:
                yield _rows_columns(columns, rows)
                rows = []
        else:
            raise TypeError(f"cannot write a {type(item).__name__}: rows or Arrow batches only")
    if rows:
        yield _rows_columns(columns, rows)


def write_rows(
    opts: WriteOptions, columns: list[str], iterator: Iterable[Any], key_prefix: str
) -> WriteResult:
    """Send every row (blocking; for a Spark task). Rows are turned into messages on the
    calling thread, a record batch at a time; the sends run on the SDK's background event
    loop, the batches of one record batch while the next is being turned."""
    sender = run_blocking(_Sender.open(opts))
    loop = background_loop()
    handing: concurrent.futures.Future[None] | None = None
    try:
        batcher = Batcher(opts, key_prefix)
        for piece in _pieces(columns, iterator):
            ready = batcher.add(piece)
            if handing is not None:
                handing.result()  # the batches before are all under way (or one failed)
            handing = asyncio.run_coroutine_threadsafe(sender.submit_all(ready), loop)
        if handing is not None:
            handing.result()
            handing = None
        run_blocking(sender.submit_all(batcher.rest()))
        return WriteResult(run_blocking(sender.drain()))
    finally:
        if handing is not None:
            handing.cancel()
            with contextlib.suppress(BaseException):
                handing.result()
        run_blocking(sender.close())


def _transient(exc: BaseException) -> bool:
    """A refusal that waiting may cure: a broker busy, down or restarting. A topic that
    does not exist fails the task at once (a wrong option topic, most likely)."""
    if not isinstance(exc, RocketqError) or isinstance(exc, TopicNotExistError):
        return False
    return exc.retriable or isinstance(exc, (ConnectBrokerError, RequestTimeoutError))


class _Sender:
    """Up to ``in_flight`` batches sent at once by one producer; a batch the brokers
    refuse for a while is sent again until ``retry_timeout`` seconds have passed since
    its first send; the first failure is raised by the next submit or by drain. The
    batches of one sharding key are sent one after another, in order."""

    def __init__(self, opts: WriteOptions, producer: Producer) -> None:
        self.producer = producer
        self.retry_timeout = opts.write_timeout
        self.slots = asyncio.Semaphore(opts.in_flight)
        self.pending: set[asyncio.Task[None]] = set()
        self.last_of_key: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.failures: list[BaseException] = []
        self.sent = 0

    @classmethod
    async def open(cls, opts: WriteOptions) -> _Sender:
        producer = Producer(
            opts.group,
            opts.namesrv,
            send_timeout=opts.send_timeout_ms / 1000,
            send_latency_fault_enable=False,
            **security_settings(opts.security),
        )
        await producer.start()
        return cls(opts, producer)

    async def submit_all(self, batches: list[Batch]) -> None:
        """Start sending ``batches``; returns once the last has a slot."""
        for msgs, sharding in batches:
            await self.slots.acquire()
            if self.failures:
                self.slots.release()
                raise self.failures[0]
            after = None
            if sharding is not None:
                key = (msgs[0].topic, sharding)
                after = self.last_of_key.get(key)
            task = asyncio.ensure_future(self._send(msgs, sharding, after))
            if sharding is not None:
                self.last_of_key[(msgs[0].topic, sharding)] = task
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def _send_once(self, msgs: list[Message], sharding: str | None) -> None:
        result = (
            await self.producer.send_batch(msgs, sharding_key=sharding)
            if len(msgs) > 1 or sharding is not None
            else await self.producer.send(msgs[0])
        )
        if not result.ok:
            raise RocketqError(
                f"a send of {len(msgs)} message(s) to {msgs[0].topic} answered "
                f"{result.status.name}, not SEND_OK"
            )

    async def _send(
        self, msgs: list[Message], sharding: str | None, after: asyncio.Task[None] | None
    ) -> None:
        try:
            if after is not None:
                await asyncio.wait([after])  # the key's batch before goes first
                if self.failures:
                    return  # the task fails: no row after a failed one is sent
            deadline = time.monotonic() + self.retry_timeout
            delay = 0.05
            while True:
                try:
                    await self._send_once(msgs, sharding)
                    break
                except Exception as exc:
                    if not _transient(exc) or time.monotonic() + delay > deadline:
                        raise
                    log.info("a send to %s was refused, sending again: %s", msgs[0].topic, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
            self.sent += len(msgs)
        except BaseException as exc:
            self.failures.append(exc)
        finally:
            self.slots.release()
            if sharding is not None:
                key = (msgs[0].topic, sharding)
                if self.last_of_key.get(key) is asyncio.current_task():
                    del self.last_of_key[key]

    async def drain(self) -> int:
        await asyncio.gather(*self.pending)
        if self.failures:
            raise self.failures[0]
        return self.sent

    async def close(self) -> None:
        for task in list(self.pending):
            task.cancel()
        await asyncio.gather(*self.pending, return_exceptions=True)
        await self.producer.shutdown()
