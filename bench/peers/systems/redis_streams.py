"""Redis Streams in a peer benchmark (``redis-server`` from Debian, the ``redis`` client's
asyncio API).

Settings: AOF on, ``appendfsync everysec`` (page-cache) or ``appendfsync always`` (fsync:
Redis fsyncs the AOF before it answers the writes of an event-loop turn), RDB snapshots
off, everything else Redis's default. A producer is one client over a pool of up to 32
connections (redis-py does not multiplex, so each command in flight holds one: the
concurrent scenario's single XADDs in flight, one per coroutine, share the pool); a call
of more than one message is a pipeline of XADDs (one round trip). A consumer is a member
of a consumer group: XREADGROUP of up to 512 entries, the previous batch's XACK pipelined
with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rocketq.bench.peers.install import Client, Installer, Requirement
from rocketq.bench.peers.processes import HOST, ProcessGroup, free_port, port_open, wait_until
from rocketq.bench.peers.systems.base import Consumer, Driver, PeerSystem, Producer, ServerInfo
from rocketq.bench.peers.workload import Durability

READ_COUNT: Final = 512
POOL_SIZE: Final = 32
FIELD: Final = b"d"
REQUIREMENT: Final = Requirement("redis-server", "redis-server", (Client("redis", "redis>=5"),))
_FSYNC: Final = {Durability.PAGE_CACHE: "everysec", Durability.FSYNC: "always"}


class RedisSystem(PeerSystem):
    name = "redis"

    def ensure_installed(self, installer: Installer) -> None:
        installer.ensure(self.name, REQUIREMENT)

    def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
        data = workdir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        port = free_port()
        fsync = _FSYNC[durability]
        argv = [
            REQUIREMENT.server_path() or REQUIREMENT.binary,
            "--port", str(port),
            "--bind", HOST,
            "--dir", str(data),
            "--appendonly", "yes",
            "--appendfsync", fsync,
            "--save", "",
            "--daemonize", "no",
            "--logfile", "",
        ]  # fmt: skip
        proc = procs.spawn(self.name, argv, cwd=data, log=workdir / "redis.log")
        wait_until(lambda: port_open(port) or proc.poll() is not None, 30, "redis-server listening")
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited ({proc.returncode}); see {workdir}/redis.log")
        return ServerInfo(
            address=f"{HOST}:{port}",
            durability=f"{durability} (appendfsync {fsync})",
            settings=f"redis-server, appendonly yes, appendfsync {fsync}, no RDB",
            pids=(proc.pid,),
        )

    def driver(self, server: ServerInfo, durability: Durability) -> Driver:
        host, _, port = server.address.rpartition(":")
        return RedisDriver(host, int(port))


class _RedisProducer(Producer):
    def __init__(self, client: Any, stream: str) -> None:
        self._client = client
        self._stream = stream

    async def send(self, bodies: Sequence[bytes]) -> None:
        if len(bodies) == 1:
            await self._client.xadd(self._stream, {FIELD: bodies[0]})
            return
        pipe = self._client.pipeline(transaction=False)
        for body in bodies:
            pipe.xadd(self._stream, {FIELD: body})
        await pipe.execute()

    async def close(self) -> None:
        await self._client.aclose(close_connection_pool=True)


class _RedisConsumer(Consumer):
    def __init__(self, client: Any, stream: str, group: str, name: str) -> None:
        self._client = client
        self._stream = stream
        self._group = group
        self._name = name
        self._unacked: list[bytes] = []

    async def receive(self, timeout: float) -> list[bytes]:
        pipe = self._client.pipeline(transaction=False)
        if self._unacked:
            pipe.xack(self._stream, self._group, *self._unacked)
        pipe.xreadgroup(
            self._group,
            self._name,
            {self._stream: ">"},
            count=READ_COUNT,
            block=max(1, int(timeout * 1000)),
        )
        replies = await pipe.execute()
        self._unacked = []
        entries = replies[-1] or []
        bodies: list[bytes] = []
        for _stream, items in entries:
            for entry_id, fields in items:
                self._unacked.append(entry_id)
                bodies.append(fields[FIELD])
        return bodies

    async def close(self) -> None:
        if self._unacked:
            await self._client.xack(self._stream, self._group, *self._unacked)
        await self._client.aclose(close_connection_pool=True)


class RedisDriver(Driver):
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._consumers = 0

    def _client(self) -> Any:
        import redis.asyncio

        # Concurrent commands need a connection each (redis-py does not multiplex):
        # up to POOL_SIZE, then a command waits for a free one.
        pool = redis.asyncio.BlockingConnectionPool(
            host=self.host, port=self.port, max_connections=POOL_SIZE, timeout=None
        )
        return redis.asyncio.Redis(connection_pool=pool)

    async def prepare(self, stream: str) -> None:
        client = self._client()
        try:
            await client.delete(stream)
        finally:
            await client.aclose(close_connection_pool=True)

    async def producer(self, stream: str, *, acked: bool = False) -> Producer:
        return _RedisProducer(self._client(), stream)

    async def consumer(self, stream: str, group: str, *, latency: bool = False) -> Consumer:
        import redis.exceptions

        client = self._client()
        try:
            await client.xgroup_create(stream, group, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._consumers += 1
        return _RedisConsumer(client, stream, group, f"consumer-{self._consumers}")
