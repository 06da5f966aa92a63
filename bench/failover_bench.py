"""``rocketq bench failover``: how long a Raft broker group is without a master.

A local cluster with one Raft group of three brokers (default DLedger timers unless
``--set`` says otherwise) takes sends from ``concurrency`` senders without pause. The
benchmark SIGKILLs the group's leader ``kills`` times; for each kill it measures the time
from the signal to the first SEND_OK after it (the dead leader answers nothing, so that
send was stored and committed by the new leader), then restarts the killed broker and waits
until it has caught up with what the group wrote up to its return (so each kill hits a
healthy group of three, not one whose quorum waits for a member still catching up) and
then a short steady spell before the next kill. It prints each failover time, their
median and max, and the sends that failed meanwhile (the SDK retries within its send
timeout; a failed send is one whose retries all failed, and the sender tries again at
once).
"""

from __future__ import annotations

import asyncio
import bisect
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketq.bench.client_bench import EMBEDDED_SETTINGS
from rocketq.common.message import Message
from rocketq.common.message_id import decode_offset_msg_id

TOPIC = "FailoverBench"
SETTLE_S = 2.0  # steady sending between a restart and the next kill
FAILOVER_LIMIT_S = 60.0  # a kill with no SEND_OK for this long fails the run
SLOW_FAILOVER_S = 3.0  # a failover slower than the goal lists the senders' errors
ERROR_CHARS = 200  # of each error kept
CATCH_UP_LIMIT_S = 120.0  # a restarted member not caught up by then fails the run


class FailoverBenchError(Exception):
    """The cluster did not come back within the limit."""


@dataclass
class _Sends:
    ok_times: list[float] = field(default_factory=list)  # monotonic, ascending
    ok_hosts: list[str] = field(default_factory=list)  # the storing broker of each
    failed: int = 0
    errors: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, what)

    def errors_between(self, start: float, end: float) -> list[tuple[str, int]]:
        """The distinct send errors between ``start`` and ``end``, with their counts, in
        the order they first came."""
        counts: dict[str, int] = {}
        for t, what in self.errors[bisect.bisect_left(self.errors, (start, "")) :]:
            if t > end:
                break
            counts[what] = counts.get(what, 0) + 1
        return list(counts.items())

    def first_ok_after(self, t: float, not_from: str) -> float | None:
        """The first SEND_OK after ``t`` stored by another broker than ``not_from`` (an
        answer of the old leader may still be on its way when it is killed)."""
        i = bisect.bisect_right(self.ok_times, t)
        for j in range(i, len(self.ok_times)):
            if self.ok_hosts[j] != not_from:
                return self.ok_times[j]
        return None


def _leader_of(cluster: Any, group: str) -> Any | None:
    """The node registered as broker id 0 of ``group``, by a live nameserver's account."""
    status = cluster.status()
    if status.registered is None:
        return None
    addr = status.registered.get(group, {}).get(0)
    for node in cluster.group_members(group):
        if node.addr == addr:
            return node
    return None


async def _caught_up(namesrv: str, addr: str, timeout: float) -> None:
    """Wait until the member at ``addr`` holds the CommitLog the leader had when we began."""
    from rocketq.sdk.admin import Admin

    deadline = time.monotonic() + timeout
    target = -1
    async with Admin(namesrv) as admin:
        while True:
            try:
                brokers = {b.addr: b for b in await admin.cluster_list()}
            except Exception:  # a nameserver or member still settling: ask again
                brokers = {}
            leader = next((b for b in brokers.values() if b.broker_id == 0), None)
            if target < 0 and leader is not None:
                target = int(leader.runtime.get("commitLogMaxOffset", -1))
            member = brokers.get(addr)
            held = int(member.runtime.get("commitLogMaxOffset", -1)) if member else -1
            if target >= 0 and held >= target:
                return
            if time.monotonic() > deadline:
                raise FailoverBenchError(
                    f"the restarted member {addr} did not catch up within {timeout:g} s"
                )
            await asyncio.sleep(0.1)


async def _wait_for(cond: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise FailoverBenchError(f"{what} did not happen within {timeout:g} s")
        await asyncio.sleep(0.05)


async def failover(
    *,
    kills: int,
    concurrency: int,
    size: int,
    data_dir: str | None,
    settings: Mapping[str, str],
    echo: Callable[[str], None],
) -> dict[str, object]:
    from rocketq import Producer
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    base = Path(data_dir or "data")
    base.mkdir(parents=True, exist_ok=True)
    body = os.urandom(size // 2).hex().encode()[:size].ljust(size, b"x")
    sends = _Sends()
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-", dir=base) as tmp:
        spec = ClusterSpec(
            data_dir=Path(tmp),
            replication="raft",
            broker_settings={**EMBEDDED_SETTINGS, **settings},
        )
        cluster = LocalCluster(spec)
        await asyncio.to_thread(cluster.start)
        try:
            echo(f"raft cluster: nameserver {cluster.namesrv_addr}, data in {tmp}")
            from rocketq.bench.client_bench import ensure_topic

            await ensure_topic(cluster.namesrv_addr, TOPIC, 8)
            stop = asyncio.Event()
            async with Producer(group="failover_bench", namesrv=cluster.namesrv_addr) as producer:

                async def sender() -> None:
                    while not stop.is_set():
                        try:
                            result = await producer.send(Message(TOPIC, body))
                        except Exception as exc:
                            sends.failed += 1
                            what = f"{type(exc).__name__}: {exc}"
                            sends.errors.append((time.monotonic(), what[:ERROR_CHARS]))
                            continue
                        sends.ok_times.append(time.monotonic())
                        sends.ok_hosts.append(decode_offset_msg_id(result.offset_msg_id)[0])

                workers = [asyncio.ensure_future(sender()) for _ in range(concurrency)]
                try:
                    await _wait_for(lambda: len(sends.ok_times) > 0, "a first SEND_OK", 30)
                    for k in range(kills):
                        leader = await asyncio.to_thread(_leader_of, cluster, "broker-a")
                        if leader is None:
                            raise FailoverBenchError("broker-a has no master registered")
                        t_kill = time.monotonic()
                        await asyncio.to_thread(cluster.kill, leader.name)
                        await _wait_for(
                            lambda t=t_kill, a=leader.addr: (  # type: ignore[misc]
                                sends.first_ok_after(t, a) is not None
                            ),
                            f"a SEND_OK after kill {k + 1}",
                            FAILOVER_LIMIT_S,
                        )
                        first = sends.first_ok_after(t_kill, leader.addr)
                        assert first is not None
                        times.append(first - t_kill)
                        echo(
                            f"kill {k + 1}/{kills}: {leader.name} SIGKILLed; first SEND_OK "
                            f"{times[-1] * 1000:,.0f} ms later"
                        )
                        if times[-1] > SLOW_FAILOVER_S:
                            # Why the senders waited: the errors they got meanwhile.
                            for what, n in sends.errors_between(t_kill, first)[:5]:
                                echo(f"  {n} x {what}")
                        await asyncio.to_thread(cluster.restart, leader.name)
                        back = cluster.node(leader.name)
                        await _caught_up(cluster.namesrv_addr, back.addr, CATCH_UP_LIMIT_S)
                        await asyncio.sleep(SETTLE_S)
                finally:
                    stop.set()
                    await asyncio.gather(*workers, return_exceptions=True)
        finally:
            await asyncio.to_thread(cluster.stop)
    return {
        "bench": "failover",
        "kills": kills,
        "concurrency": concurrency,
        "failover_ms": [round(t * 1000, 1) for t in times],
        "median_ms": round(statistics.median(times) * 1000, 1) if times else None,
        "max_ms": round(max(times) * 1000, 1) if times else None,
        "send_ok": len(sends.ok_times),
        "send_failed": sends.failed,
    }


__all__ = ["FailoverBenchError", "failover"]
