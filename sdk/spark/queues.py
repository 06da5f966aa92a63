"""What the data source asks of the cluster, through the SDK's clients: the queues of the
topics, their min and max offsets, offsets by store time, a queue's messages between two
offsets as Arrow record batches, committed group offsets, and batches of sends.

Spark calls the data source from plain (blocking) code, on the driver and in each task's
Python worker; each call here runs on the SDK's one background event loop
(``rocketq.sdk.background_loop.run_blocking``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pyarrow as pa

from rocketq.common.exceptions import (
    ConnectBrokerError,
    RequestTimeoutError,
    RocketqError,
    TopicNotExistError,
)
from rocketq.common.message import MessageExt
from rocketq.common.record import decode_records
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk.background_loop import background_loop, run_blocking
from rocketq.sdk.client import ClientInstance
from rocketq.sdk.client_wire import (
    max_offset_request,
    min_offset_request,
    search_offset_request,
    update_offset_request,
)
from rocketq.sdk.message_body import MAX_BODY_INFLATE_RATIO, MAX_MESSAGE_SIZE, check_messages
from rocketq.sdk.security import SecurityConfig, client_security
from rocketq.sdk.spark.options import Offsets, QueueId, queue_label
from rocketq.sdk.wire import PullOutcome, PullReply, pull_request

log = logging.getLogger(__name__)

T = TypeVar("T")

PULL_BATCH = 32  # the broker answers at most 32 messages a pull
PULLS_IN_FLIGHT = 8  # per queue, when no filter makes the next offsets unknown
ROWS_PER_BATCH = 4096

ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("broker", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("msg_id", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("born_timestamp", pa.timestamp("us", tz="UTC")),
        ("store_timestamp", pa.timestamp("us", tz="UTC")),
        ("born_host", pa.string()),
        ("store_host", pa.string()),
        ("reconsume_times", pa.int32()),
    ]
)


class DataLossError(RocketqError):
    """Offsets the stream must read are gone (retention removed them), or hold messages
    that cannot be read (a body failing its CRC, not zlib, or inflating past the cap)."""


def _transient(exc: RocketqError) -> bool:
    """A failure that waiting may cure: a broker down, restarting, busy or not routed yet."""
    return exc.retriable or isinstance(exc, (ConnectBrokerError, RequestTimeoutError))


def blocking(
    namesrv: str,
    fn: Callable[[QueueClient], Awaitable[T]],
    security: SecurityConfig | None = None,
) -> T:
    """Run ``fn`` with a client of its own (signing and TLS as ``security`` says), on the
    SDK's background event loop."""

    async def main() -> T:
        client = QueueClient(namesrv, security=security)
        try:
            return await fn(client)
        finally:
            await client.close()

    return run_blocking(main())


class QueueClient:
    def __init__(
        self, namesrv: str, *, timeout: float = 5.0, security: SecurityConfig | None = None
    ) -> None:
        self.client = ClientInstance(
            namesrv,
            timeout=timeout,
            security=client_security(security or SecurityConfig(), "the rocketq data source"),
        )
        self.timeout = timeout

    async def close(self) -> None:
        await self.client.shutdown()

    async def queues(self, topics: tuple[str, ...]) -> list[QueueId]:
        """Every readable queue of ``topics``, from the nameservers' routes."""
        out: list[QueueId] = []
        for topic in topics:
            try:
                route = await self.client.update_route(topic)
            except TopicNotExistError:
                raise TopicNotExistError(
                    f"topic {topic!r} does not exist: create it (rocketq admin update-topic) or "
                    "check option topic and namesrv"
                ) from None
            for qd in route.queue_datas:
                out.extend((topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
        return sorted(set(out))

    def _addr(self, q: QueueId) -> str:
        addr = self.client.read_addr(q[1])
        if addr is None:
            raise TopicNotExistError(f"no broker of {q[1]} is in the route of {q[0]}")
        return addr

    async def _offset(self, q: QueueId, method: str, **fields: Any) -> int:
        req: RemotingCommand
        if method == "GetMinOffset":
            req = min_offset_request(q[0], q[2])
        elif method == "GetMaxOffset":
            req = max_offset_request(q[0], q[2])
        elif method == "SearchOffsetByTimestamp":
            req = search_offset_request(q[0], q[2], int(fields["timestamp"]))
        else:
            raise ValueError(f"no offset request is called {method!r}")
        return await self.client.broker(self._addr(q)).offset(req, self.timeout)

    async def offsets(self, queues: list[QueueId], method: str, **fields: Any) -> Offsets:
        """Each queue's offset by ``method`` (GetMinOffset, GetMaxOffset,
        SearchOffsetByTimestamp); a queue whose broker does not answer is left out."""
        answers = await asyncio.gather(
            *(self._offset(q, method, **fields) for q in queues), return_exceptions=True
        )
        out: Offsets = {}
        for q, answer in zip(queues, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, RocketqError):
                    raise answer
                log.warning("%s of %s failed: %s", method, queue_label(q), answer)
                continue
            out[q] = answer
        return out

    async def commit(self, group: str, offsets: Offsets) -> None:
        """Store ``offsets`` as ``group``'s consumer offsets on each queue's master."""
        for q, offset in sorted(offsets.items()):
            addr = self.client.master_addr(q[1])
            if addr is None:
                await self.client.update_route(q[0])
                addr = self.client.master_addr(q[1])
            if addr is None:
                log.warning("cannot commit %s for %s: no master", queue_label(q), group)
                continue
            req = update_offset_request(group, q[0], q[2], offset)
            try:
                await self.client.broker(addr).request(req, self.timeout)
            except RocketqError as exc:
                log.warning("commit of %s for %s failed: %s", queue_label(q), group, exc)

    async def pull(
        self, q: QueueId, offset: int, group: str, expression: str, expression_type: str
    ) -> PullReply:
        req = pull_request(
            group=group,
            topic=q[0],
            queue_id=q[2],
            offset=offset,
            max_msg_nums=PULL_BATCH,
            subscription=expression,
            expression_type=expression_type,
        )
        return await self.client.broker(self._addr(q)).pull(req, self.timeout)


def to_arrow(q: QueueId, msgs: list[MessageExt]) -> pa.RecordBatch:
    """Messages of one queue -> one record batch of the data source's schema."""
    n = len(msgs)
    offsets: list[int] = []
    ids: list[str] = []
    keys: list[list[str]] = []
    tags: list[str | None] = []
    bodies: list[bytes] = []
    props: list[list[tuple[str, str]]] = []
    born: list[int] = []
    stored: list[int] = []
    born_hosts: list[str] = []
    store_hosts: list[str] = []
    times: list[int] = []
    for m in msgs:
        p = m.properties  # decoded once per message
        offsets.append(m.queue_offset)
        uniq = p.get("UNIQ_KEY")
        ids.append(uniq if uniq is not None else m.offset_msg_id)
        k = p.get("KEYS")
        keys.append(k.split(" ") if k else [])
        tags.append(p.get("TAGS"))
        bodies.append(m.body)
        props.append(list(p.items()))
        born.append(m.born_timestamp * 1000)
        stored.append(m.store_timestamp * 1000)
        born_hosts.append(m.born_host)
        store_hosts.append(m.store_host)
        times.append(m.reconsume_times)
    stamp = pa.timestamp("us", tz="UTC")
    return pa.RecordBatch.from_arrays(
        [
            pa.array([q[0]] * n, pa.string()),
            pa.array([q[1]] * n, pa.string()),
            pa.array([q[2]] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(ids, pa.string()),
            pa.array(keys, pa.list_(pa.string())),
            pa.array(tags, pa.string()),
            pa.array(bodies, pa.binary()),
            pa.array(props, pa.map_(pa.string(), pa.string())),
            pa.array(born, stamp),
            pa.array(stored, stamp),
            pa.array(born_hosts, pa.string()),
            pa.array(store_hosts, pa.string()),
            pa.array(times, pa.int32()),
        ],
        schema=ARROW_SCHEMA,
    )


class RangeReader:
    """Reads offsets [start, end) of one queue, waiting out a broker that does not answer
    for up to ``timeout`` seconds. Removed offsets (the broker's min offset above where the
    read stands) raise DataLossError with ``fail_on_data_loss``, else are skipped with a
    warning."""

    def __init__(
        self,
        client: QueueClient,
        q: QueueId,
        start: int,
        end: int,
        *,
        group: str,
        expression: str,
        expression_type: str,
        fail_on_data_loss: bool,
        timeout: float,
    ) -> None:
        self.client = client
        self.q = q
        self.next = start
        self.end = end
        self.group = group
        self.expression = expression
        self.expression_type = expression_type
        self.fail_on_data_loss = fail_on_data_loss
        self.timeout = timeout
        # Without a filter every offset is a message, so the next windows are known.
        self.in_flight = PULLS_IN_FLIGHT if expression_type == "TAG" and expression == "*" else 1

    async def _pull(self, offset: int) -> PullReply:
        """A pull at ``offset``, retried until the deadline while the broker fails."""
        deadline = time.monotonic() + self.timeout
        delay = 0.1
        while True:
            try:
                return await self.client.pull(
                    self.q, offset, self.group, self.expression, self.expression_type
                )
            except RocketqError as exc:
                if not _transient(exc):
                    raise RocketqError(f"cannot read {queue_label(self.q)}: {exc}") from exc
                if time.monotonic() + delay > deadline:
                    raise RocketqError(
                        f"cannot read {queue_label(self.q)} at offset {offset} for "
                        f"{self.timeout:.0f} s: {exc}"
                    ) from exc
                log.info("pull of %s failed, retrying: %s", queue_label(self.q), exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                with contextlib.suppress(RocketqError):
                    await self.client.client.update_route(self.q[0])

    async def batches(self) -> list[MessageExt]:
        """The next messages of the range ([] once it is read)."""
        if not self.client.client.broker_addrs:
            with contextlib.suppress(RocketqError):  # else the pull's retries fetch it
                await self.client.client.update_route(self.q[0])
        overflow_deadline: float | None = None
        while self.next < self.end:
            windows = [
                self.next + i * PULL_BATCH
                for i in range(self.in_flight)
                if self.next + i * PULL_BATCH < self.end
            ]
            answers = await asyncio.gather(*(self._pull(o) for o in windows))
            got: list[MessageExt] = []
            for offset, resp in zip(windows, answers, strict=True):
                if offset != self.next:
                    break  # an earlier answer moved elsewhere: ask again from there
                status = resp.outcome
                if status is PullOutcome.FOUND:
                    msgs = [m for m in decode_records(resp.records) if m.queue_offset < self.end]
                    got.extend(self._readable(msgs))
                    self.next = max(self.next, min(resp.next_begin_offset, self.end))
                elif status is PullOutcome.NO_MATCHED_MSG:
                    self.next = max(self.next, min(resp.next_begin_offset, self.end))
                elif status is PullOutcome.OFFSET_ILLEGAL and resp.next_begin_offset > offset:
                    self._lost(offset, resp.next_begin_offset)
                    self.next = min(resp.next_begin_offset, self.end)
                else:
                    # NO_NEW_MSG, or an offset past the queue's end: a replica behind, or a
                    # broker whose queue is still being rebuilt; wait for it.
                    now = time.monotonic()
                    if overflow_deadline is None:
                        overflow_deadline = now + self.timeout
                    if now > overflow_deadline:
                        raise RocketqError(
                            f"{queue_label(self.q)} ends at {resp.max_offset} but offsets up to "
                            f"{self.end} were planned, for {self.timeout:.0f} s"
                        )
                    await asyncio.sleep(0.2)
                    break
            if got:
                return got
        return []

    def _readable(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """``msgs`` with compressed bodies inflated, as consumers read them (at most
        MAX_MESSAGE_SIZE x MAX_BODY_INFLATE_RATIO bytes, sdk.message_body); a bad message
        raises DataLossError with ``fail_on_data_loss``, else is skipped with a warning."""
        good, bad = check_messages(
            msgs, max_body_bytes=MAX_MESSAGE_SIZE * MAX_BODY_INFLATE_RATIO, check_crc=True
        )
        for exc in bad:
            what = f"{queue_label(self.q)}: {exc}"
            if self.fail_on_data_loss:
                raise DataLossError(
                    f"{what}; set failOnDataLoss=false to skip it (it stays in the CommitLog "
                    "for `rocketq admin` to inspect)"
                )
            log.warning("%s; skipped (failOnDataLoss=false)", what)
        return good

    def _lost(self, offset: int, moved_to: int) -> None:
        what = (
            f"{queue_label(self.q)}: offsets [{offset}, {moved_to}) were removed (CommitLog "
            "retention) before they were read"
        )
        if self.fail_on_data_loss:
            raise DataLossError(
                f"{what}; set failOnDataLoss=false to skip them, or read the archive of them"
            )
        log.warning("%s; skipped (failOnDataLoss=false)", what)


def read_range(
    namesrv: str,
    q: QueueId,
    start: int,
    end: int,
    *,
    security: SecurityConfig | None = None,
    **settings: Any,
) -> Iterator[pa.RecordBatch]:
    """A queue's offsets [start, end) as record batches (blocking; for a Spark task)."""

    async def make() -> QueueClient:
        return QueueClient(namesrv, security=security)

    client = run_blocking(make())
    loop = background_loop()
    ahead: concurrent.futures.Future[list[MessageExt]] | None = None
    try:
        reader = RangeReader(client, q, start, end, **settings)
        pending: list[MessageExt] = []
        # The next pulls run while this batch is built and handed to Spark.
        ahead = asyncio.run_coroutine_threadsafe(reader.batches(), loop)
        while ahead is not None:
            msgs = ahead.result()
            ahead = asyncio.run_coroutine_threadsafe(reader.batches(), loop) if msgs else None
            pending.extend(msgs)
            if pending and (ahead is None or len(pending) >= ROWS_PER_BATCH):
                yield to_arrow(q, pending)
                pending = []
    finally:
        if ahead is not None:
            ahead.cancel()
            with contextlib.suppress(BaseException):
                ahead.result()
        run_blocking(client.close())
