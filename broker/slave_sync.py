"""A slave's copy of its master's runtime state (RocketMQ's SlaveSynchronize).

Every ``slave_sync_interval`` (10 s) a slave fetches its master's topic configs, consumer
offsets, delay offsets and subscription group configs (GET_ALL_TOPIC_CONFIG,
GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and GET_ALL_SUBSCRIPTIONGROUP_CONFIG, as
RocketMQ's slaves ask), so it can serve consumers when the master is away; with users and
ACL policies on, those too (rocketq's GET_AUTH_METADATA), so that a replica checks requests
as its master does. The calls are signed with the broker's inner credentials. Consumer offsets
merge by taking the larger one: offsets consumers commit to the slave while the master is
gone are kept, and the master takes them back when the slave reconnects
(:meth:`SlaveSynchronizer.take_back_offsets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from rocketq.broker.config_json import group_of, topic_of
from rocketq.broker.consumer_offset import is_valid_key
from rocketq.common.exceptions import RocketqError, for_code
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import connect

if TYPE_CHECKING:
    from rocketq.broker.host import BrokerHost

log = logging.getLogger(__name__)

SYNC_REQUESTS: Final = (
    RequestCode.GET_ALL_TOPIC_CONFIG,
    RequestCode.GET_ALL_CONSUMER_OFFSET,
    RequestCode.GET_ALL_DELAY_OFFSET,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
)


@dataclass(frozen=True, slots=True)
class MasterState:
    """The four tables of a master, as the JSON its admin requests answer."""

    topics: dict[str, Any]
    offsets: dict[str, Any]
    delay: dict[str, Any]
    groups: dict[str, Any]
    # The users and ACL policies (GET_AUTH_METADATA's body), when asked for.
    auth: bytes | None = None


async def fetch_state(
    addr: str,
    timeout: float = 5.0,
    security: ClientSecurity | None = None,
    *,
    with_auth: bool = False,
) -> MasterState:
    """A broker's topic configs, consumer offsets, delay offsets and group configs, and
    with ``with_auth`` its users and ACL policies (asked with the broker's inner
    credentials, over TLS if set: ``security``)."""
    conn = await connect(addr, {}, timeout=timeout, security=security)
    try:
        docs = []
        for code in SYNC_REQUESTS:
            answer = await conn.invoke(RemotingCommand(code), timeout)
            if answer.code != ResponseCode.SUCCESS:
                raise for_code(answer.code)(answer.remark or f"response code {answer.code}")
            doc = fastjson.loads(bytes(answer.body or b"{}"))
            if not isinstance(doc, dict):
                raise ValueError(f"the answer to request {code} is not a JSON object")
            docs.append(doc)
        auth = None
        if with_auth:
            answer = await conn.invoke(
                RemotingCommand(RocketqRequestCode.GET_AUTH_METADATA), timeout
            )
            if answer.code != ResponseCode.SUCCESS:
                raise for_code(answer.code)(answer.remark or f"response code {answer.code}")
            auth = bytes(answer.body or b"")
    finally:
        conn.close()
    topics, offsets, delay, groups = docs
    return MasterState(topics, offsets, delay, groups, auth)


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
            except RocketqError as exc:
                if not failing:
                    log.warning("cannot copy the master's state: %s", exc)
                failing = True
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("the master's state could not be read: %s", exc)
            # Until the master is known (and reachable), look again every second.
            interval = self._interval_ms or self.b.config.slave_sync_interval
            await asyncio.sleep(interval / 1000 if done else min(1.0, interval / 1000))

    async def _fetch(self, addr: str) -> MasterState:
        return await fetch_state(
            addr,
            security=self.b.client_security,
            with_auth=True,
        )

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

    def apply(self, data: MasterState) -> None:
        b = self.b
        version = int((data.topics.get("dataVersion") or {}).get("counter", 0))
        if version != b.topics.data_version:
            b.topics.replace_all(
                {
                    name: topic_of(doc)
                    for name, doc in (data.topics.get("topicConfigTable") or {}).items()
                },
                version,
            )
        b.groups.groups = {
            name: group_of(doc)
            for name, doc in (data.groups.get("subscriptionGroupTable") or {}).items()
        }
        b.groups.persist()
        b.schedule.offsets = {
            int(k): int(v) for k, v in (data.delay.get("offsetTable") or {}).items()
        }
        b.schedule.persist()
        if data.auth is not None and data.auth != b.auth_metadata.snapshot():
            b.auth_metadata.restore(data.auth)  # unchanged: nothing written
        self.merge_offsets(data)

    def merge_offsets(self, data: MasterState) -> int:
        """Take each offset that is ahead of ours; -> how many moved."""
        table = self.b.offsets.table
        moved = 0
        for key, queues in (data.offsets.get("offsetTable") or {}).items():
            if not is_valid_key(key):
                continue  # not topic@group of valid names: it could not be read back
            mine = table.setdefault(key, {})
            for q, o in queues.items():
                if int(o) > mine.get(int(q), -1):
                    mine[int(q)] = int(o)
                    moved += 1
        if moved:
            self.b.offsets.dirty = True
        return moved

    async def take_back_offsets(self, slave_addr: str) -> bool:
        """A master's side: adopt the offsets its slave holds that are ahead of its own.
        -> whether the slave answered."""
        try:
            moved = self.merge_offsets(await self._fetch(slave_addr))
        except RocketqError as exc:
            log.warning("cannot read the offsets of slave %s: %s", slave_addr, exc)
            return False
        if moved:
            log.info("took back %d consumer offsets from slave %s", moved, slave_addr)
        return True
