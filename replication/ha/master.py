"""The master's side of classic HA (RocketMQ's HAService, HAConnection, GroupTransferService).

Each connected slave gets one ``HA.Replicate`` stream: the slave reports its CommitLog's
end, the master sends the CommitLog from there as byte ranges (at most ``transfer_batch``
bytes each, at most ``window`` bytes sent and not yet acknowledged), and the slave reports
its new end after each range it stored. A slave ahead of the master (the master lost an
unflushed tail) is told to cut its log back first.

For SYNC_MASTER, :meth:`HAMaster.wait_slave` holds a send until some slave acknowledged
past the send's end: a heap of waiting sends is emptied up to the best acknowledged offset
each time a report comes in, so one report completes every send it covers.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from cluster.aio import wait_done, wait_event
from cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from storage.message_store import MessageStore
from storage.results import PutStatus

log = logging.getLogger(__name__)

TRANSFER_BATCH = 4 * 1024 * 1024
WINDOW = 32 * 1024 * 1024
HEARTBEAT_INTERVAL = 1.0  # s: an idle stream sends an empty chunk this often


@dataclass(slots=True)
class SlaveConnection:
    conn_id: int
    ack: int = -1  # the slave's CommitLog end, as last reported
    broker_addr: str = ""
    broker_id: int = 0
    last_report: float = field(default_factory=time.monotonic)
    reported: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # new bytes or a new ack


class HAMaster(pb_grpc.HAServicer):
    def __init__(
        self,
        store: MessageStore,
        *,
        max_gap: int,
        transfer_batch: int = TRANSFER_BATCH,
        window: int = WINDOW,
        on_slave: Callable[[SlaveConnection], None] | None = None,
    ) -> None:
        self.store = store
        self.max_gap = max_gap
        self.transfer_batch = transfer_batch
        self.window = window
        self.on_slave = on_slave
        self.slaves: dict[int, SlaveConnection] = {}
        self._ids = itertools.count(1)
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        store.append_listeners.append(self._on_append)

    # -- state -------------------------------------------------------------------------

    @property
    def best_ack(self) -> int:
        return max((s.ack for s in self.slaves.values()), default=-1)

    def lag_bytes(self) -> int:
        """How far the best slave is behind (the master's end when none is connected)."""
        best = self.best_ack
        return self.store.max_phy_offset - max(best, 0)

    def _on_append(self, end_offset: int) -> None:
        for conn in self.slaves.values():
            conn.wake.set()

    def _on_report(self, conn: SlaveConnection, report: pb.HAReport) -> None:
        conn.ack = int(report.max_offset)
        conn.broker_addr = report.broker_addr
        conn.broker_id = int(report.broker_id)
        conn.last_report = time.monotonic()
        conn.reported.set()
        conn.wake.set()
        best = self.best_ack
        waiting = self._waiting
        while waiting and waiting[0][0] <= best:
            _, _, fut = heapq.heappop(waiting)
            if not fut.done():
                fut.set_result(None)

    # -- SYNC_MASTER -------------------------------------------------------------------

    async def wait_slave(self, end_offset: int, timeout: float) -> PutStatus:
        """PUT_OK once a slave has everything below ``end_offset``; SLAVE_NOT_AVAILABLE
        with no slave (or one too far behind); FLUSH_SLAVE_TIMEOUT after ``timeout``."""
        best = self.best_ack
        if best < 0 or self.store.max_phy_offset - best > self.max_gap:
            return PutStatus.SLAVE_NOT_AVAILABLE
        if best >= end_offset:
            return PutStatus.PUT_OK
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (end_offset, next(self._seq), fut))
        if await wait_done(fut, timeout):
            return PutStatus.PUT_OK
        fut.cancel()
        return PutStatus.FLUSH_SLAVE_TIMEOUT

    # -- the stream --------------------------------------------------------------------

    async def Replicate(
        self, request_iterator: AsyncIterator[pb.HAReport], context: object
    ) -> AsyncIterator[pb.HAChunk]:
        conn = SlaveConnection(next(self._ids))

        async def read_reports() -> None:
            async for report in request_iterator:
                self._on_report(conn, report)

        reader = asyncio.ensure_future(read_reports())
        try:
            if not await wait_event(conn.reported, 10.0) or reader.done():
                return
            self.slaves[conn.conn_id] = conn
            log.info(
                "slave %s (id %d) connected at CommitLog offset %d",
                conn.broker_addr,
                conn.broker_id,
                conn.ack,
            )
            if self.on_slave is not None:
                self.on_slave(conn)
            async for chunk in self._chunks(conn, reader):
                yield chunk
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            if self.slaves.pop(conn.conn_id, None) is not None:
                log.warning("slave %s (id %d) disconnected", conn.broker_addr, conn.broker_id)

    async def _chunks(
        self, conn: SlaveConnection, reader: asyncio.Task[None]
    ) -> AsyncIterator[pb.HAChunk]:
        commitlog = self.store.commitlog
        master_max = commitlog.max_offset
        next_offset = conn.ack
        if next_offset > master_max:
            log.warning(
                "slave %s is ahead of this master (%d > %d): it cuts its CommitLog back",
                conn.broker_addr,
                next_offset,
                master_max,
            )
            yield pb.HAChunk(offset=master_max, truncate=True, master_max_offset=master_max)
            next_offset = master_max
        if next_offset < commitlog.min_offset:
            # A new slave (or one behind what is kept) starts at the oldest segment kept.
            next_offset = commitlog.min_offset
        last_sent = time.monotonic()
        while not reader.done():
            master_max = commitlog.max_offset
            sent = False
            while next_offset < master_max and next_offset - max(conn.ack, 0) < self.window:
                segment_end = commitlog.next_segment_offset(next_offset)
                end = min(master_max, next_offset + self.transfer_batch, segment_end)
                view = commitlog.read(next_offset, end - next_offset)
                if view is None:
                    break
                try:
                    data = bytes(view)
                finally:
                    view.release()
                yield pb.HAChunk(offset=next_offset, data=data, master_max_offset=master_max)
                next_offset = end
                sent = True
            now = time.monotonic()
            if not sent and now - last_sent >= HEARTBEAT_INTERVAL:
                yield pb.HAChunk(offset=next_offset, master_max_offset=master_max)
                sent = True
            if sent:
                last_sent = now
                continue
            conn.wake.clear()
            if commitlog.max_offset > next_offset and next_offset - conn.ack < self.window:
                continue  # appended meanwhile
            await wait_event(conn.wake, HEARTBEAT_INTERVAL)
