"""What the data source asks of the cluster, through the SDK's clients: the queues of the
topics, their min and max offsets, offsets by store time, a queue's messages between two
offsets as Arrow record batches, committed group offsets, and batches of sends.

Spark calls the data source from plain (blocking) code, on the driver and in each task's
Python worker; each call here runs on the SDK's one background event loop
(``rocketq.sdk.background_loop.run_blocking``).
"""

from __future__ import annotations

import asyncio
import collections
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
from rocketq.sdk.spark.record_batches import BatchBuilder
from rocketq.sdk.wire import PullOutcome, PullReply, pull_request

log = logging.getLogger(__name__)

T = TypeVar("T")

PULL_BATCH = 32  # the broker answers at most 32 messages a pull
PULLS_IN_FLIGHT = 8  # per queue, when no filter makes the next offsets unknown
ROWS_PER_BATCH = 4096


class DataLossError(RocketqError):
    """Offsets the stream must read are gone (retention removed them), or hold messages
    that cannot be read (a body failing its CRC, not zlib, or inflating past the cap)."""


def _transient(exc: RocketqError) -> bool:
    """A failure that waiting may cure: a broker down, restarting, busy or not routed yet."""
    return exc.retriable or isinstance(exc, (ConnectBrokerError, RequestTimeoutError))


# This process's clients by (nameservers, security), on the SDK's background loop. A Spark
# worker runs task after task and the driver plans batch after batch: each reuses the
# client's connections and routes instead of connecting and looking up anew (as a Kafka
# source keeps its consumers). They live as long as the process.
_clients: dict[tuple[str, SecurityConfig | None], QueueClient] = {}


async def shared_client(namesrv: str, security: SecurityConfig | None = None) -> QueueClient:
    """This process's client of ``namesrv`` (signing and TLS as ``security`` says), made on
    first use; call on the SDK's background loop."""
    key = (namesrv, security)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = QueueClient(namesrv, security=security)
    return client


def blocking(
    namesrv: str,
    fn: Callable[[QueueClient], Awaitable[T]],
    security: SecurityConfig | None = None,
) -> T:
    """Run ``fn`` with this process's client (:func:`shared_client`), on the SDK's
    background event loop."""

    async def main() -> T:
        return await fn(await shared_client(namesrv, security))

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


class RangeReader:
    """Reads offsets [start, end) of one queue, waiting out a broker that does not answer
    for up to ``timeout`` seconds. Removed offsets (the broker's min offset above where the
    read stands) raise DataLossError with ``fail_on_data_loss``, else are skipped with a
    warning.

    Without a filter every offset is a message, so where the next pulls start is known
    before their answers come: up to :data:`PULLS_IN_FLIGHT` pulls stay in flight, each
    starting as many offsets after the one before as the last answer held. An answer that
    moves the read elsewhere (a shorter answer, a gap) drops the pulls planned after it."""

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
        self.in_flight = PULLS_IN_FLIGHT if expression_type == "TAG" and expression == "*" else 1
        self.step = PULL_BATCH  # offsets between planned pulls: the last answer's count
        self._ahead: collections.deque[tuple[int, asyncio.Future[PullReply]]] = collections.deque()
        self._overflow_deadline: float | None = None

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

    def _plan(self) -> None:
        """Keep up to ``in_flight`` pulls requested, the first at ``next``."""
        ahead = self._ahead
        planned = ahead[-1][0] + self.step if ahead else self.next
        while len(ahead) < self.in_flight and planned < self.end:
            ahead.append((planned, asyncio.ensure_future(self._pull(planned))))
            planned += self.step

    def _drop_planned(self) -> None:
        """Cancel the pulls planned ahead (the read moved elsewhere, or stops)."""
        for _, pending in self._ahead:
            pending.cancel()
        self._ahead.clear()

    def _move(self, offset: int, to: int) -> None:
        """The answer at ``offset`` moves the read to ``to``; the pulls planned ahead stay
        if the first of them starts there."""
        self.next = to
        if to > offset:
            self.step = min(PULL_BATCH, to - offset)
        if self._ahead and self._ahead[0][0] != to:
            self._drop_planned()

    async def close(self) -> None:
        """Cancel the pulls still in flight and wait for them to end."""
        pending = [p for _, p in self._ahead]
        self._drop_planned()
        await asyncio.gather(*pending, return_exceptions=True)

    async def messages(self) -> list[MessageExt]:
        """The next messages of the range ([] once it is read)."""
        if not self.client.client.broker_addrs:
            with contextlib.suppress(RocketqError):  # else the pull's retries fetch it
                await self.client.client.update_route(self.q[0])
        while self.next < self.end:
            self._plan()
            offset, pending = self._ahead.popleft()
            try:
                resp = await pending
            except BaseException:
                self._drop_planned()
                raise
            status = resp.outcome
            moved = min(resp.next_begin_offset, self.end)
            if status is PullOutcome.FOUND:
                msgs = decode_records(resp.records)
                if resp.next_begin_offset > self.end:  # the answer runs past the range
                    msgs = [m for m in msgs if m.queue_offset < self.end]
                got = self._readable(msgs)
                self._move(offset, max(self.next, moved))
                self._overflow_deadline = None
                if got:
                    return got
            elif status is PullOutcome.NO_MATCHED_MSG:
                self._move(offset, max(self.next, moved))
            elif status is PullOutcome.OFFSET_ILLEGAL and resp.next_begin_offset > offset:
                self._lost(offset, resp.next_begin_offset)
                self._move(offset, moved)
            else:
                # NO_NEW_MSG, or an offset past the queue's end: a replica behind, or a
                # broker whose queue is still being rebuilt; wait for it.
                self._drop_planned()
                now = time.monotonic()
                if self._overflow_deadline is None:
                    self._overflow_deadline = now + self.timeout
                if now > self._overflow_deadline:
                    raise RocketqError(
                        f"{queue_label(self.q)} ends at {resp.max_offset} but offsets up to "
                        f"{self.end} were planned, for {self.timeout:.0f} s"
                    )
                await asyncio.sleep(0.2)
        return []

    async def next_batch(self, rows: int) -> pa.RecordBatch | None:
        """The next messages of the range, at least ``rows`` of them unless the range ends
        first, as one record batch; None once the range is read."""
        batch = BatchBuilder(self.q)
        while len(batch) < rows:
            msgs = await self.messages()
            if not msgs:
                break
            batch.add(msgs)
        return batch.build() if len(batch) else None

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
    """A queue's offsets [start, end) as record batches (blocking; for a Spark task).

    Batches are built on the SDK's loop: the next one (its pulls and its columns) while
    Spark takes the one before, so the task's thread only waits for finished batches."""

    client = run_blocking(shared_client(namesrv, security))
    loop = background_loop()
    reader = RangeReader(client, q, start, end, **settings)
    ahead: concurrent.futures.Future[pa.RecordBatch | None] | None = None
    try:
        ahead = asyncio.run_coroutine_threadsafe(reader.next_batch(ROWS_PER_BATCH), loop)
        while True:
            batch = ahead.result()
            if batch is None:
                ahead = None
                break
            ahead = asyncio.run_coroutine_threadsafe(reader.next_batch(ROWS_PER_BATCH), loop)
            yield batch
    finally:
        if ahead is not None:
            ahead.cancel()
            with contextlib.suppress(BaseException):
                ahead.result()

        run_blocking(reader.close())
