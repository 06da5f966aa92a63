"""A slave's copy of its master's runtime state (RocketMQ's SlaveSynchronize).

Every ``slave_sync_interval`` (10 s) a slave fetches its master's topic configs, consumer
offsets, delay offsets and subscription group configs, so it can serve consumers when the
master is away. Consumer offsets merge by taking the larger one: offsets consumers commit
to the slave while the master is gone are kept, and the master takes them back when the
slave reconnects (:meth:`SlaveSynchronizer.take_back_offsets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import grpc

from rocketq.broker.subscription_group import SubscriptionGroupConfig
from rocketq.cluster.message import TopicConfig
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2 as pb
from rocketq.cluster.proto.rocketq.v1 import rocketq_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from rocketq.broker.host import BrokerHost

log = logging.getLogger(__name__)


def sync_data(b: BrokerHost) -> pb.SlaveSyncData:
    """This broker's state as a slave copies it."""

    def dump(doc: object) -> bytes:
        return json.dumps(doc, sort_keys=True).encode()

    return pb.SlaveSyncData(
        topic_configs=dump(
            {
                "dataVersion": b.topics.data_version,
                "topicConfigTable": {n: asdict(t) for n, t in b.topics.topics.items()},
            }
        ),
        consumer_offsets=dump(
            {
                "offsetTable": {
                    k: {str(q): o for q, o in v.items()} for k, v in b.offsets.table.items()
                }
            }
        ),
        delay_offsets=dump({"offsetTable": {str(k): v for k, v in b.schedule.offsets.items()}}),
        subscription_groups=dump(
            {"subscriptionGroupTable": {n: asdict(g) for n, g in b.groups.groups.items()}}
        ),
    )


class SlaveSynchronizer:
    """``master_addr`` finds the master's client address ("" while unknown; default: what
    the nameserver answered our registration); ``interval_ms`` overrides
    ``slave_sync_interval`` (Raft followers copy every second)."""

    def __init__(
        self,
        broker: BrokerHost,
        *,
        master_addr: Callable[[], Awaitable[str]] | None = None,
        interval_ms: int | None = None,
    ) -> None:
        self.b = broker
        self._master_addr = master_addr
        self._interval_ms = interval_ms
        self._task: asyncio.Task[None] | None = None
        self.last_sync = 0.0

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        failing = False
        while True:
            done = False
            try:
                done = await self.sync_once()
                if done and failing:
                    log.info("copying the master's state again")
                failing = False
            except grpc.aio.AioRpcError as exc:
                if not failing:
                    log.warning("cannot copy the master's state: %s", exc.code().name)
                failing = True
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("the master's state could not be read: %s", exc)
            # Until the master is known (and reachable), look again every second.
            interval = self._interval_ms or self.b.config.slave_sync_interval
            await asyncio.sleep(interval / 1000 if done else min(1.0, interval / 1000))

    async def _fetch(self, addr: str) -> pb.SlaveSyncData:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = pb_grpc.BrokerAdminStub(channel)  # type: ignore[no-untyped-call]
            data: pb.SlaveSyncData = await stub.GetSlaveSyncData(pb.Empty(), timeout=5)
            return data

    async def sync_once(self) -> bool:
        """Copy the master's state now; False when the master is not known yet."""
        if self._master_addr is not None:
            addr = await self._master_addr()
        else:
            addr = self.b.registration.master_addr
        if not addr:
            return False
        data = await self._fetch(addr)
        self.apply(data)
        self.last_sync = asyncio.get_running_loop().time()
        return True

    def apply(self, data: pb.SlaveSyncData) -> None:
        b = self.b
        topics: dict[str, Any] = json.loads(data.topic_configs)
        version = int(topics.get("dataVersion", 0))
        if version != b.topics.data_version:
            b.topics.replace_all(
                {
                    name: TopicConfig(**fields)
                    for name, fields in topics.get("topicConfigTable", {}).items()
                },
                version,
            )
        groups: dict[str, Any] = json.loads(data.subscription_groups)
        b.groups.groups = {
            name: SubscriptionGroupConfig(**fields)
            for name, fields in groups.get("subscriptionGroupTable", {}).items()
        }
        b.groups.persist()
        delay: dict[str, Any] = json.loads(data.delay_offsets)
        b.schedule.offsets = {int(k): int(v) for k, v in delay.get("offsetTable", {}).items()}
        b.schedule.persist()
        self.merge_offsets(data)

    def merge_offsets(self, data: pb.SlaveSyncData) -> int:
        """Take each offset that is ahead of ours; -> how many moved."""
        offsets: dict[str, Any] = json.loads(data.consumer_offsets)
        table = self.b.offsets.table
        moved = 0
        for key, queues in offsets.get("offsetTable", {}).items():
            mine = table.setdefault(key, {})
            for q, o in queues.items():
                if int(o) > mine.get(int(q), -1):
                    mine[int(q)] = int(o)
                    moved += 1
        if moved:
            self.b.offsets.dirty = True
        return moved

    async def take_back_offsets(self, slave_addr: str) -> None:
        """A master's side: adopt the offsets its slave holds that are ahead of its own."""
        try:
            moved = self.merge_offsets(await self._fetch(slave_addr))
        except grpc.aio.AioRpcError as exc:
            log.warning("cannot read the offsets of slave %s: %s", slave_addr, exc.code().name)
            return
        if moved:
            log.info("took back %d consumer offsets from slave %s", moved, slave_addr)
