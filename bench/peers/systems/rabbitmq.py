"""RabbitMQ in a peer benchmark (``rabbitmq-server`` from Debian, run as its own node from
a temp dir; the ``pika`` client over asyncio).

The node runs with every RABBITMQ_* location under the run's temp dir, a unique node
name, AMQP, distribution and epmd ports free on loopback, no plugins. Its epmd daemon
leaves the node's session; it carries the run's marker variable, so the run stops it too.

Settings: one durable classic queue in lazy mode per scenario, persistent messages
(delivery mode 2). page-cache: no publisher confirms (RabbitMQ confirms a persistent
message only after fsync), so a publisher waits only while its socket buffer is full, and
the produce clock stops when the queue holds every message; the sync-send and concurrent
scenarios need an answer per send, so there it sends transient messages with confirms
(RabbitMQ confirms them once queued; the lazy queue pages them to disk without fsync).
fsync: publisher confirms, every call's messages in flight together, its send returns at
the last confirm. The concurrent scenario's coroutines share one channel: each publishes
and waits for the confirm of its own delivery tag (pika's asyncio adapter, ``amqp.py``).
A consumer: manual acks, prefetch 1,000, one multiple-ack per batch received.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rocketq.bench.peers.install import Client, Installer, Requirement
from rocketq.bench.peers.processes import HOST, ProcessGroup, free_port, port_open, wait_until
from rocketq.bench.peers.systems.amqp import AmqpChannel, AmqpConnection
from rocketq.bench.peers.systems.base import Consumer, Driver, PeerSystem, Producer, ServerInfo
from rocketq.bench.peers.workload import Durability, Scenario

SERVER: Final = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # not the Debian wrapper (su)
REQUIREMENT: Final = Requirement(SERVER, "rabbitmq-server", (Client("pika", "pika>=1.3"),))
PREFETCH: Final = 1_000
QUEUE_ARGS: Final = {"x-queue-mode": "lazy"}
START_TIMEOUT: Final = 90.0


class RabbitmqSystem(PeerSystem):
    name = "rabbitmq"

    def ensure_installed(self, installer: Installer) -> None:
        installer.ensure(self.name, REQUIREMENT)

    def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
        home = workdir / "rabbitmq"
        home.mkdir(parents=True, exist_ok=True)
        (home / "enabled_plugins").write_text("[].\n")
        port, dist_port, epmd_port = free_port(), free_port(), free_port()
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(home),  # the Erlang cookie goes here
            "LANG": "C.UTF-8",
            "RABBITMQ_NODENAME": f"rocketq-bench-{uuid.uuid4().hex[:8]}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": HOST,
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "ERL_EPMD_ADDRESS": HOST,
            "ERL_EPMD_PORT": str(epmd_port),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(home / "plugins-expand"),
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(home / "advanced.config"),
            "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
        }
        log = workdir / "rabbitmq.log"
        proc = procs.spawn(self.name, [SERVER], env=env, cwd=home, log=log)
        wait_until(
            lambda: port_open(port) or proc.poll() is not None, START_TIMEOUT, "RabbitMQ listening"
        )
        procs.adopt_marked()  # epmd and the node's helpers, so they are stopped by pid too
        if proc.poll() is not None:
            raise RuntimeError(f"rabbitmq-server exited ({proc.returncode}); see {log}")
        if durability is Durability.FSYNC:
            label = "fsync (persistent, publisher confirms)"
        else:
            label = "page-cache (persistent, lazy queue, no confirms)"
        return ServerInfo(
            address=f"{HOST}:{port}",
            durability=label,
            settings="rabbitmq-server, durable lazy classic queue, persistent messages"
            + (", publisher confirms" if durability is Durability.FSYNC else ", no confirms"),
            pids=(proc.pid,),
        )

    def driver(self, server: ServerInfo, durability: Durability) -> Driver:
        host, _, port = server.address.rpartition(":")
        return RabbitmqDriver(host, int(port), confirms=durability is Durability.FSYNC)


class _RabbitProducer(Producer):
    def __init__(
        self, conn: AmqpConnection, channel: AmqpChannel, queue: str, *, persistent: bool
    ) -> None:
        import pika

        self._conn = conn
        self._channel = channel
        self._queue = queue
        self._props = pika.BasicProperties(delivery_mode=2 if persistent else 1)

    async def send(self, bodies: Sequence[bytes]) -> None:
        tag = 0
        for body in bodies:
            tag = self._channel.publish(self._queue, body, self._props)
        if self._channel.confirms:
            await self._channel.confirmed(tag)
        else:
            await self._channel.drained()

    async def close(self) -> None:
        await self._conn.close()


class _RabbitConsumer(Consumer):
    def __init__(self, conn: AmqpConnection, channel: AmqpChannel) -> None:
        self._conn = conn
        self._channel = channel
        self.inbox: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self._last_tag = 0

    def on_message(self, _ch: Any, method: Any, _props: Any, body: bytes) -> None:
        self.inbox.put_nowait((method.delivery_tag, body))

    def _ack(self) -> None:
        if self._last_tag:
            self._channel.channel.basic_ack(self._last_tag, multiple=True)
            self._last_tag = 0

    async def receive(self, timeout: float) -> list[bytes]:
        self._ack()
        try:
            first = await asyncio.wait_for(self.inbox.get(), timeout)
        except TimeoutError:
            return []
        items = [first]
        while not self.inbox.empty():
            items.append(self.inbox.get_nowait())
        self._last_tag = items[-1][0]
        return [body for _tag, body in items]

    async def close(self) -> None:
        self._ack()
        await self._conn.close()


class RabbitmqDriver(Driver):
    def __init__(self, host: str, port: int, *, confirms: bool) -> None:
        self.host = host
        self.port = port
        self.confirms = confirms

    async def _open(self) -> tuple[AmqpConnection, AmqpChannel]:
        conn = await AmqpConnection.open(self.host, self.port)
        return conn, await conn.channel()

    async def _declare(self, channel: AmqpChannel, queue: str, *, passive: bool = False) -> Any:
        return await channel.call(
            channel.channel.queue_declare,
            queue=queue,
            durable=True,
            passive=passive,
            arguments=QUEUE_ARGS,
        )

    async def prepare(self, stream: str) -> None:
        conn, channel = await self._open()
        try:
            await channel.call(channel.channel.queue_delete, queue=stream)
            await self._declare(channel, stream)
        finally:
            await conn.close()

    async def producer(self, stream: str, *, acked: bool = False) -> Producer:
        conn, channel = await self._open()
        # page-cache with an answer per send: a transient message with a confirm, which
        # RabbitMQ sends once the queue took it (a persistent one would wait for fsync).
        transient_acked = acked and not self.confirms
        if self.confirms or transient_acked:
            await channel.enable_confirms()
        return _RabbitProducer(conn, channel, stream, persistent=not transient_acked)

    def durability_of(self, scenario: Scenario) -> str | None:
        if scenario in (Scenario.SYNC_SEND, Scenario.CONCURRENT) and not self.confirms:
            return "page-cache (transient message, confirm once queued, lazy queue)"
        return None

    async def consumer(self, stream: str, group: str, *, latency: bool = False) -> Consumer:
        conn, channel = await self._open()
        await channel.call(channel.channel.basic_qos, prefetch_count=PREFETCH)
        consumer = _RabbitConsumer(conn, channel)
        channel.channel.basic_consume(stream, consumer.on_message, auto_ack=False)
        return consumer

    async def settle(self, stream: str, total: int, timeout: float) -> None:
        """Without confirms: wait until the queue holds ``total`` messages."""
        if self.confirms:
            return
        conn, channel = await self._open()
        try:
            deadline = time.monotonic() + timeout
            while True:
                frame = await self._declare(channel, stream, passive=True)
                if frame.method.message_count >= total:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"RabbitMQ queue {stream} holds {frame.method.message_count:,} of "
                        f"{total:,} messages after {timeout:.0f} s"
                    )
                await asyncio.sleep(0.02)
        finally:
            await conn.close()
