"""The slave's side of classic HA (RocketMQ's HAClient).

The slave connects to its master's HA address, reports where its CommitLog ends and
appends what the master streams from there, byte for byte, reporting its new end after
every range and at least every ``report_interval``. When the master says the slave is
ahead of it, the slave cuts its CommitLog back (and logs it). A broken stream is opened
again after a second; the slave resumes from its own end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import grpc

from cluster.errors import RocketqError
from cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc
from storage.message_store import MessageStore

log = logging.getLogger(__name__)

RECONNECT_DELAY = 1.0
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


class HASlave:
    def __init__(
        self,
        store: MessageStore,
        master_ha_addr: Callable[[], str],
        *,
        broker_addr: str,
        broker_id: int,
        report_interval: float = 5.0,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.master_ha_addr = master_ha_addr
        self.broker_addr = broker_addr
        self.broker_id = broker_id
        self.report_interval = report_interval
        # Called when the master cannot be reached (its address may have changed: the
        # broker asks the nameserver again).
        self.on_lost = on_lost
        self.connected_to = ""
        self.master_max_offset = -1
        self.received_bytes = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def lag_bytes(self) -> int:
        if self.master_max_offset < 0:
            return -1
        return max(0, self.master_max_offset - self.store.max_phy_offset)

    def _report(self) -> pb.HAReport:
        return pb.HAReport(
            max_offset=self.store.max_phy_offset,
            broker_addr=self.broker_addr,
            broker_id=self.broker_id,
        )

    async def _run(self) -> None:
        while True:
            addr = self.master_ha_addr()
            if addr:
                try:
                    await self._replicate(addr)
                except asyncio.CancelledError:
                    raise
                except grpc.aio.AioRpcError as exc:
                    if self.connected_to:
                        log.warning("lost master %s (%s); reconnecting", addr, exc.code().name)
                except RocketqError as exc:
                    log.error("replication from %s stopped: %s; reconnecting", addr, exc)
                except Exception:
                    log.exception("replication from %s failed; reconnecting", addr)
                finally:
                    self.connected_to = ""
                if self.on_lost is not None:
                    self.on_lost()
            await asyncio.sleep(RECONNECT_DELAY)

    async def _replicate(self, addr: str) -> None:
        # One pending report at most: chunks stored while the last report was being
        # written are all acknowledged by the next one (the newest offset is what counts).
        due = asyncio.Event()
        due.set()

        async def outgoing() -> AsyncIterator[pb.HAReport]:
            while True:
                await due.wait()
                due.clear()
                yield self._report()

        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(self.report_interval)
                due.set()

        async with grpc.aio.insecure_channel(addr, options=GRPC_OPTIONS) as channel:
            stub = pb_grpc.HAStub(channel)  # type: ignore[no-untyped-call]
            beat = asyncio.ensure_future(heartbeat())
            try:
                async for chunk in stub.Replicate(outgoing()):
                    if not self.connected_to:
                        self.connected_to = addr
                        log.info(
                            "replicating from master %s at CommitLog offset %d",
                            addr,
                            self.store.max_phy_offset,
                        )
                    self.master_max_offset = chunk.master_max_offset
                    if chunk.truncate:
                        self.store.truncate_to(chunk.offset)
                    elif chunk.data:
                        self.store.append_raw(chunk.offset, chunk.data, wake_dispatch=False)
                        self.received_bytes += len(chunk.data)
                    else:
                        continue  # the master's heartbeat; our own timer reports
                    due.set()
                    # The ack goes out before dispatch takes the loop.
                    await asyncio.sleep(0)
                    self.store.wake_dispatch()
            finally:
                beat.cancel()
