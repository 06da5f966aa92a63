"""rocketq in a peer benchmark: one nameserver and one broker started by the same
launcher as ``rocketq cluster up``, driven by the SDK.

Settings: ``flush_disk_type`` ASYNC_FLUSH (page-cache) or SYNC_FLUSH (fsync, group
commit), 1 GiB CommitLog segments, one topic of 8 queues per scenario. Producers share
one ``Producer`` as ``rocketq bench produce`` does (the SDK multiplexes sends over one
stream per broker); a call of more than one message is one ``send_batch``, a call of one
is one ``send`` (the concurrent scenario's sends in flight together leave in batches: the
producer's natural batching, on by default, is left on; the system
``rocketq-no-auto-batch``, run with ``--compare-auto-batch``, is the same with it off).
Each consumer is a ``PushConsumer`` (from the first offset, up to 32 messages per handler
call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rocketq.bench.peers.install import Installer
from rocketq.bench.peers.processes import ProcessGroup
from rocketq.bench.peers.results import ROCKETQ, ROCKETQ_NO_AUTO_BATCH
from rocketq.bench.peers.systems.base import Consumer, Driver, PeerSystem, Producer, ServerInfo
from rocketq.bench.peers.workload import Durability

if TYPE_CHECKING:
    from rocketq.cluster.launcher import LocalCluster

QUEUES: Final = 8
CONSUME_BATCH: Final = 32
_FLUSH: Final = {Durability.PAGE_CACHE: "ASYNC_FLUSH", Durability.FSYNC: "SYNC_FLUSH"}


class RocketqSystem(PeerSystem):
    """rocketq; ``auto_batch``: the producer's natural batching, on (the default, the
    system ``rocketq``) or off (``rocketq-no-auto-batch``)."""

    name = ROCKETQ

    def __init__(self, *, auto_batch: bool = True) -> None:
        self._cluster: LocalCluster | None = None
        self.auto_batch = auto_batch
        self.name = ROCKETQ if auto_batch else ROCKETQ_NO_AUTO_BATCH

    def ensure_installed(self, installer: Installer) -> None:
        return None  # this package

    def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
        from rocketq.cluster.launcher import ClusterSpec, LocalCluster

        flush = _FLUSH[durability]
        spec = ClusterSpec(
            data_dir=workdir / "rocketq",
            broker_settings={
                "mapped_file_size_commit_log": str(1 << 30),
                "flush_disk_type": flush,
            },
        )
        cluster = LocalCluster(spec)
        self._cluster = cluster
        try:
            cluster.start()
        finally:
            for node in cluster.nodes:  # stopped by pid by the run too, whatever happens
                if node.pid:
                    procs.adopt(f"rocketq-{node.name}", node.pid)
        brokers = tuple(n.pid for n in cluster.nodes if n.role == "broker")
        return ServerInfo(
            address=cluster.namesrv_addr,
            durability=f"{durability} (flush_disk_type {flush})",
            settings=f"1 nameserver + 1 broker, {flush}, topic of {QUEUES} queues, "
            f"producer auto_batch {'on' if self.auto_batch else 'off'}",
            pids=brokers,
        )

    def driver(self, server: ServerInfo, durability: Durability) -> Driver:
        return RocketqDriver(server.address, auto_batch=self.auto_batch)

    def stop(self, procs: ProcessGroup) -> None:
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None
        procs.stop_all()


class _SharedProducer(Producer):
    def __init__(self, producer: Any, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    async def send(self, bodies: Sequence[bytes]) -> None:
        from rocketq.common.message import Message

        if len(bodies) == 1:
            result = await self._producer.send(Message(self._topic, bodies[0]))
        else:
            result = await self._producer.send_batch([Message(self._topic, b) for b in bodies])
        if not result.ok:
            raise RuntimeError(f"rocketq send answered {result.status.name}")

    async def close(self) -> None:
        return None  # the driver owns the shared producer


class _PushConsumer(Consumer):
    def __init__(self, consumer: Any, inbox: asyncio.Queue[list[bytes]]) -> None:
        self._consumer = consumer
        self._inbox = inbox

    async def receive(self, timeout: float) -> list[bytes]:
        try:
            got = await asyncio.wait_for(self._inbox.get(), timeout)
        except TimeoutError:
            return []
        while not self._inbox.empty():
            got.extend(self._inbox.get_nowait())
        return got

    async def close(self) -> None:
        await self._consumer.shutdown()


class RocketqDriver(Driver):
    def __init__(self, namesrv: str, *, auto_batch: bool = True) -> None:
        self.namesrv = namesrv
        self.auto_batch = auto_batch
        self._producer: Any = None

    async def prepare(self, stream: str) -> None:
        from rocketq.sdk.admin import Admin

        async with Admin(self.namesrv) as admin:
            await admin.update_topic(stream, read_queue_nums=QUEUES, write_queue_nums=QUEUES)

    async def producer(self, stream: str, *, acked: bool = False) -> Producer:
        from rocketq import Producer as SdkProducer

        if self._producer is None:
            self._producer = SdkProducer(
                group="bench_peers_producer", namesrv=self.namesrv, auto_batch=self.auto_batch
            )
            await self._producer.start()
        return _SharedProducer(self._producer, stream)

    async def consumer(self, stream: str, group: str, *, latency: bool = False) -> Consumer:
        from rocketq import ConsumeFrom, ConsumeResult, MessageExt, PushConsumer

        inbox: asyncio.Queue[list[bytes]] = asyncio.Queue()

        async def handler(msgs: list[MessageExt]) -> ConsumeResult:
            inbox.put_nowait([m.body for m in msgs])
            return ConsumeResult.SUCCESS

        consumer = PushConsumer(
            group,
            self.namesrv,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            consume_message_batch_max_size=CONSUME_BATCH,
        )
        consumer.subscribe(stream, "*")
        consumer.on_message(handler)
        await consumer.start()
        return _PushConsumer(consumer, inbox)

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.shutdown()
            self._producer = None
