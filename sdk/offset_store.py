"""Where a consumer keeps its progress: on the brokers (clustering) or in a local file
(broadcasting), updated in memory as messages finish and persisted every 5 s."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

from rocketq.common.exceptions import QueryNotFoundError, RocketqError
from rocketq.common.message import MessageQueue
from rocketq.sdk.client import ClientInstance
from rocketq.sdk.client_wire import query_offset_request, update_offset_request

log = logging.getLogger(__name__)


class RemoteOffsetStore:
    """Offsets kept by the broker of each queue (clustering).

    Args:
        client: The consumer's connection to the cluster.
        group: The consumer group.

    Attributes:
        client: The consumer's connection to the cluster.
        group: The consumer group.
        table: The offsets to commit, per queue, in memory.
    """

    def __init__(self, client: ClientInstance, group: str) -> None:
        self.client = client
        self.group = group
        self.table: dict[MessageQueue, int] = {}
        self._persisted: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        """Set the queue's offset to commit (only forwards, unless ``increase_only`` is
        False)."""
        old = self.table.get(mq, -1)
        if not increase_only or offset > old:
            self.table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        """The queue's offset to commit, -1 when there is none."""
        return self.table.get(mq, -1)

    async def read_store(self, mq: MessageQueue) -> int:
        """The broker's offset for the queue, -1 when the group has none yet."""
        addr = self.client.read_addr(mq.broker_name)
        if addr is None:
            await self.client.update_route(mq.topic)
            addr = self.client.read_addr(mq.broker_name)
        if addr is None:
            raise QueryNotFoundError(f"broker {mq.broker_name} is not in the route")
        req = query_offset_request(self.group, mq.topic, mq.queue_id)
        try:
            offset = await self.client.broker(addr).offset(req, self.client.timeout)
        except QueryNotFoundError:
            return -1
        self.table[mq] = offset
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        """Commit the queue's offset to its broker, if it changed."""
        offset = self.table.get(mq)
        if offset is None or offset < 0 or self._persisted.get(mq) == offset:
            return
        # The master, or a slave while the master is away (it hands them back later).
        addr = self.client.read_addr(mq.broker_name)
        if addr is None:
            return
        req = update_offset_request(self.group, mq.topic, mq.queue_id, offset)
        await self.client.broker(addr).request(req, self.client.timeout)
        self._persisted[mq] = offset

    async def persist_all(self, queues: list[MessageQueue]) -> None:
        """Commit the offsets of ``queues``; a failure is logged, not raised."""
        for mq in queues:
            try:
                await self.persist(mq)
            except RocketqError as exc:
                log.warning("committing the offset of %s failed: %s", mq, exc)

    def remove(self, mq: MessageQueue) -> None:
        """Forget the queue (given up)."""
        self.table.pop(mq, None)
        self._persisted.pop(mq, None)


class LocalFileOffsetStore(RemoteOffsetStore):
    """Offsets in ``<directory>/<group>/offsets.json`` (broadcasting).

    Args:
        client: The consumer's connection to the cluster.
        group: The consumer group.
        directory: The consumer's ``offset_store_dir``.

    Attributes:
        path: The offsets file.
    """

    def __init__(self, client: ClientInstance, group: str, directory: Path) -> None:
        super().__init__(client, group)
        self.path = directory / group.replace("%", "_") / "offsets.json"
        self._loaded: dict[str, int] = {}
        if self.path.exists():
            try:
                self._loaded = _offsets(json.loads(self.path.read_text()))
            except (OSError, ValueError) as exc:
                log.error("ignoring unreadable offsets file %s: %s", self.path, exc)

    @staticmethod
    def _key(mq: MessageQueue) -> str:
        return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"

    async def read_store(self, mq: MessageQueue) -> int:
        """The queue's offset in the file, -1 when it has none."""
        offset = self._loaded.get(self._key(mq), -1)
        if offset >= 0:
            self.table[mq] = offset
        return offset

    async def persist_all(self, queues: list[MessageQueue]) -> None:
        """Write every offset held to the file (atomically)."""
        for mq, offset in self.table.items():
            self._loaded[self._key(mq)] = offset
        await asyncio.to_thread(self._write)

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name("offsets.json.tmp")
        tmp.write_text(json.dumps(self._loaded, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def _offsets(doc: object) -> dict[str, int]:
    """The offsets of a file's JSON: an object of queue keys to offsets (ints >= 0);
    ValueError naming what is wrong otherwise."""
    if not isinstance(doc, dict):
        raise ValueError(f"expected an object of queue offsets, got {type(doc).__name__}")
    for key, offset in doc.items():
        if type(offset) is not int or offset < 0:
            raise ValueError(f"the offset of {key!r} is {offset!r}, not an integer >= 0")
    return doc
