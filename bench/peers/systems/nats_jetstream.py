"""NATS JetStream in a peer benchmark (``nats-server`` from Debian, started with ``-js``
and a store dir; the ``nats-py`` client).

Settings: one file-storage stream per scenario, everything else the server's default
(page-cache: JetStream writes its files and syncs them in the background every two
minutes). The fsync class sets ``sync_interval: always`` where the server has it (2.10 and
later); an older server runs at its default and its rows say so, and it is left out of
the fsync ratios. A producer is one connection; a call of one message is a ``publish``
that waits for its ack (in the concurrent scenario many coroutines await theirs on the one
connection), a call of more than one message is that many async publishes, then a wait
for all their acks. A consumer is a durable pull consumer (fetches of up to 256, ack-all
on the last of each) for throughput, or a push consumer (ack-all) when the scenario
measures latency, since a pull waits for a full batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rocketq.bench.peers.install import Client, Installer, Requirement
from rocketq.bench.peers.processes import HOST, ProcessGroup, free_port, port_open, wait_until
from rocketq.bench.peers.systems.base import Consumer, Driver, PeerSystem, Producer, ServerInfo
from rocketq.bench.peers.workload import Durability

FETCH_BATCH: Final = 256
MAX_ACK_PENDING: Final = 65_536
REQUIREMENT: Final = Requirement("nats-server", "nats-server", (Client("nats", "nats-py>=2.7"),))
SYNC_ALWAYS_SINCE: Final = (2, 10)


def server_version(binary: str = "nats-server") -> tuple[int, int]:
    """(major, minor) of ``nats-server --version``; (0, 0) if it cannot be read."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except OSError:
        return (0, 0)
    m = re.search(r"v(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


class NatsSystem(PeerSystem):
    name = "nats"

    def ensure_installed(self, installer: Installer) -> None:
        installer.ensure(self.name, REQUIREMENT)

    def start(self, durability: Durability, workdir: Path, procs: ProcessGroup) -> ServerInfo:
        store = workdir / "nats"
        store.mkdir(parents=True, exist_ok=True)
        port = free_port()
        binary = REQUIREMENT.server_path() or REQUIREMENT.binary  # /usr/sbin on Debian
        version = server_version(binary)
        vtext = ".".join(map(str, version))
        sync_always = durability is Durability.FSYNC and version >= SYNC_ALWAYS_SINCE
        conf = store / "nats.conf"
        lines = [f'listen: "{HOST}:{port}"', "jetstream {", f'  store_dir: "{store}"']
        if sync_always:
            lines.append("  sync_interval: always")
        conf.write_text("\n".join([*lines, "}", ""]))
        proc = procs.spawn(self.name, [binary, "-c", str(conf)], log=workdir / "nats.log")
        wait_until(lambda: port_open(port) or proc.poll() is not None, 30, "nats-server listening")
        if proc.poll() is not None:
            raise RuntimeError(f"nats-server exited ({proc.returncode}); see {workdir}/nats.log")
        if durability is Durability.FSYNC and not sync_always:
            label = f"page-cache (nats-server {vtext} has no sync_interval: always)"
            matches = False
        elif sync_always:
            label, matches = "fsync (sync_interval: always)", True
        else:
            label, matches = "page-cache (default: background sync every 2 min)", True
        return ServerInfo(
            address=f"nats://{HOST}:{port}",
            durability=label,
            settings=f"nats-server {vtext} -js, file storage"
            + (", sync_interval always" if sync_always else ""),
            matches_class=matches,
            pids=(proc.pid,),
        )

    def driver(self, server: ServerInfo, durability: Durability) -> Driver:
        return NatsDriver(server.address)


class _NatsProducer(Producer):
    def __init__(self, nc: Any, stream: str) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._stream = stream

    async def send(self, bodies: Sequence[bytes]) -> None:
        if len(bodies) == 1:
            await self._js.publish(self._stream, bodies[0])
            return
        if hasattr(self._js, "publish_async"):
            acks = [await self._js.publish_async(self._stream, b) for b in bodies]
            await asyncio.gather(*acks)
        else:  # an older nats-py: concurrent requests
            await asyncio.gather(*(self._js.publish(self._stream, b) for b in bodies))

    async def close(self) -> None:
        await self._nc.close()


class _NatsPullConsumer(Consumer):
    def __init__(self, nc: Any, sub: Any) -> None:
        self._nc = nc
        self._sub = sub
        self._last: Any = None

    async def receive(self, timeout: float) -> list[bytes]:
        import nats.errors

        await self._ack()
        try:
            msgs = await self._sub.fetch(batch=FETCH_BATCH, timeout=timeout)
        except (nats.errors.TimeoutError, TimeoutError):
            return []
        if msgs:
            self._last = msgs[-1]
        return [m.data for m in msgs]

    async def _ack(self) -> None:
        if self._last is not None:
            last, self._last = self._last, None
            await last.ack()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._ack()
        await self._nc.close()


class _NatsPushConsumer(_NatsPullConsumer):
    def __init__(self, nc: Any, inbox: asyncio.Queue[Any]) -> None:
        super().__init__(nc, None)
        self._inbox = inbox

    async def receive(self, timeout: float) -> list[bytes]:
        await self._ack()
        try:
            msgs = [await asyncio.wait_for(self._inbox.get(), timeout)]
        except TimeoutError:
            return []
        while not self._inbox.empty():
            msgs.append(self._inbox.get_nowait())
        self._last = msgs[-1]
        return [m.data for m in msgs]


class NatsDriver(Driver):
    def __init__(self, url: str) -> None:
        self.url = url

    async def _connect(self) -> Any:
        import nats

        return await nats.connect(self.url, max_reconnect_attempts=0)

    async def prepare(self, stream: str) -> None:
        import nats.js.errors
        from nats.js.api import StorageType

        nc = await self._connect()
        try:
            js = nc.jetstream()
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(stream)
            await js.add_stream(name=stream, subjects=[stream], storage=StorageType.FILE)
        finally:
            await nc.close()

    async def producer(self, stream: str, *, acked: bool = False) -> Producer:
        return _NatsProducer(await self._connect(), stream)

    async def consumer(self, stream: str, group: str, *, latency: bool = False) -> Consumer:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        nc = await self._connect()
        js = nc.jetstream()
        config = ConsumerConfig(
            ack_policy=AckPolicy.ALL,
            max_ack_pending=MAX_ACK_PENDING,
            deliver_policy=DeliverPolicy.ALL,
        )
        if not latency:
            sub = await js.pull_subscribe(stream, durable=group, stream=stream, config=config)
            return _NatsPullConsumer(nc, sub)
        inbox: asyncio.Queue[Any] = asyncio.Queue()

        async def on_msg(msg: Any) -> None:
            inbox.put_nowait(msg)

        await js.subscribe(
            stream, queue=group, durable=group, stream=stream, cb=on_msg, manual_ack=True,
            config=config,
        )  # fmt: skip
        return _NatsPushConsumer(nc, inbox)
