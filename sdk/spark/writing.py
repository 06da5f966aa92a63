"""A Spark task's rows -> messages, sent in batches through the SDK's producer.

Columns: ``body`` (binary or string) is required; ``topic`` (else option topic), ``keys``
(a string or an array of strings), ``tags``, ``properties`` (map of strings) and
``sharding_key`` (messages with one key go to one queue, in row order) are optional; other
columns are ignored. Every send must be SEND_OK, or the task fails.

Spark runs a failed task again, and a task that fails half way has sent part of its rows:
those are sent twice. Each message therefore carries ``SPARK_ROW_KEY``: the row's
``msg_id`` column when it has one (a row read from rocketq or its archive), else the write's
id, the task's partition and the row's place in it, the same on every attempt of the task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from rocketq.common.exceptions import RocketqError
from rocketq.common.message import SYSTEM_PROPERTY_NAMES, Message
from rocketq.sdk.background_loop import run_blocking
from rocketq.sdk.producer import Producer
from rocketq.sdk.security import security_settings
from rocketq.sdk.spark.options import WriteOptions

log = logging.getLogger(__name__)

ROW_KEY: Final = "SPARK_ROW_KEY"


@dataclass(frozen=True, slots=True)
class WriteResult:
    sent: int


def _keys(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [k for k in value.split(" ") if k]
    return [str(k) for k in value if k]


def row_message(
    row: Mapping[str, Any], default_topic: str | None, row_key: str
) -> tuple[Message, str | None]:
    """One row -> (message, sharding key)."""
    body = row.get("body")
    if body is None:
        raise RocketqError("a row has no body (null): every message needs one")
    if isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        body = bytes(body)
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


def _rows(columns: list[str], iterator: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Arrow record batches (the batch writer) or Spark rows (the stream writer) -> dicts
    by column name."""
    for item in iterator:
        if isinstance(item, pa.RecordBatch):
            yield from item.to_pylist()
        elif isinstance(item, tuple):  # pyspark's Row is a tuple with names
            names = getattr(item, "__fields__", None) or columns
            yield dict(zip(names, item, strict=False))
        else:
            raise TypeError(f"cannot write a {type(item).__name__}: rows or Arrow batches only")


def write_rows(
    opts: WriteOptions, columns: list[str], iterator: Iterable[Any], key_prefix: str
) -> WriteResult:
    """Send every row (blocking; for a Spark task). Rows are read and turned into
    messages on the calling thread; the sends run on the SDK's background event loop."""
    sender = run_blocking(_Sender.open(opts))
    try:
        # One open batch per (topic, sharding key): a batch goes to one queue.
        batches: dict[tuple[str, str | None], list[Message]] = {}
        for n, row in enumerate(_rows(columns, iterator)):
            msg, sharding = row_message(row, opts.topic, f"{key_prefix}-{n}")
            key = (msg.topic, sharding)
            batch = batches.setdefault(key, [])
            batch.append(msg)
            if len(batch) >= opts.batch_size:
                del batches[key]
                run_blocking(sender.submit(batch, sharding))
        for (_, sharding), batch in batches.items():
            run_blocking(sender.submit(batch, sharding))
        return WriteResult(run_blocking(sender.drain()))
    finally:
        run_blocking(sender.close())


class _Sender:
    """Up to ``in_flight`` batches sent at once by one producer; the first failure is
    raised by the next submit or by drain."""

    def __init__(self, opts: WriteOptions, producer: Producer) -> None:
        self.producer = producer
        self.slots = asyncio.Semaphore(opts.in_flight)
        self.pending: set[asyncio.Task[None]] = set()
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

    async def submit(self, msgs: list[Message], sharding: str | None) -> None:
        if sharding is not None:
            # A key's batches go one after another, so its messages keep the rows' order.
            await asyncio.gather(*self.pending)
        await self.slots.acquire()
        if self.failures:
            self.slots.release()
            raise self.failures[0]
        task = asyncio.ensure_future(self._send(msgs, sharding))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _send(self, msgs: list[Message], sharding: str | None) -> None:
        try:
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
            self.sent += len(msgs)
        except BaseException as exc:
            self.failures.append(exc)
        finally:
            self.slots.release()

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
