"""Registration with every nameserver (RocketMQ's registerBrokerAll), each over a
long-lived stream: the channel whose breaking tells the nameserver the broker is gone.

Registers at start, every ``register_name_server_period`` (clamped to 10-60 s as RocketMQ
does) and at once when topics change; a broken stream is reopened after a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import grpc

from rocketq.cluster.aio import wait_event
from rocketq.cluster.message import TopicConfig
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

RECONNECT_DELAY = 1.0


class NameServerRegistration:
    def __init__(
        self,
        addrs: list[str],
        *,
        identity: Callable[[], pb.RegisterBrokerRequest],
        period_ms: int,
    ) -> None:
        self.addrs = addrs
        self.identity = identity
        self.period = max(10.0, min(period_ms / 1000, 60.0))
        self._wakes: list[asyncio.Event] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.registered: dict[str, bool] = {a: False for a in addrs}
        self.master_addr = ""
        self.master_ha_addr = ""

    def start(self) -> None:
        for addr in self.addrs:
            wake = asyncio.Event()
            self._wakes.append(wake)
            self._tasks.append(asyncio.ensure_future(self._run(addr, wake)))

    def register_now(self) -> None:
        for wake in self._wakes:
            wake.set()

    async def _run(self, addr: str, wake: asyncio.Event) -> None:
        while not self._stopping:
            channel = grpc.aio.insecure_channel(addr)
            try:
                stub = pb_grpc.NameServerStub(channel)  # type: ignore[no-untyped-call]
                call = stub.BrokerChannel(self._requests(wake))
                async for result in call:
                    if result.status.code == 0:
                        if not self.registered[addr]:
                            log.info("registered with nameserver %s", addr)
                        self.registered[addr] = True
                        if result.master_addr:
                            self.master_addr = result.master_addr
                            self.master_ha_addr = result.ha_server_addr
                    else:
                        log.warning(
                            "nameserver %s refused registration: %s", addr, result.status.message
                        )
                if not self._stopping:
                    log.warning("nameserver %s closed our channel; registering again", addr)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                if self.registered[addr]:
                    log.warning("lost nameserver %s (%s); reconnecting", addr, exc.code().name)
            finally:
                self.registered[addr] = False
                await channel.close()
            if not self._stopping:
                await asyncio.sleep(RECONNECT_DELAY)

    async def _requests(self, wake: asyncio.Event) -> AsyncIterator[pb.BrokerChannelRequest]:
        while not self._stopping:
            yield pb.BrokerChannelRequest(register=self.identity())
            await wait_event(wake, self.period)
            wake.clear()

    async def stop(self, unregister: pb.UnregisterBrokerRequest | None) -> None:
        """Unregister cleanly from every nameserver, then close the streams."""
        self._stopping = True
        if unregister is not None:
            await asyncio.gather(
                *(self._unregister(a, unregister) for a in self.addrs), return_exceptions=True
            )
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _unregister(self, addr: str, req: pb.UnregisterBrokerRequest) -> None:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = pb_grpc.NameServerStub(channel)  # type: ignore[no-untyped-call]
            await stub.UnregisterBroker(req, timeout=3)


def topic_datas(topics: list[TopicConfig]) -> list[pb.TopicConfigData]:
    return [
        pb.TopicConfigData(
            topic_name=t.topic_name,
            read_queue_nums=t.read_queue_nums,
            write_queue_nums=t.write_queue_nums,
            perm=t.perm,
            topic_sys_flag=t.topic_sys_flag,
            order=t.order,
        )
        for t in topics
    ]
