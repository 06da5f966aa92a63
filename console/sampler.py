"""The dashboard's sampler: every ``interval`` seconds it reads the brokers' message totals
through the console's :class:`~rocketq.sdk.admin.Admin` and keeps the last hour of samples
in memory (a deque; nothing is written anywhere, a restart starts from nothing).

Where the figures come from:

- a broker's messages in and out: the totals in its runtime table (``msgPutTotalTodayNow``,
  messages stored by sends, and ``msgGetTotalTodayNow``, messages pulled by consumers, both
  since the broker started), summed over the members of a broker group;
- a topic's messages in: per broker, its queues' max offsets summed (``topic_status``).

TPS is the difference of two consecutive samples' totals divided by the seconds between
them (an injected monotonic clock). Only keys present in both samples count, and a total
that went down (topic deleted and re-created, offsets reset) counts as 0, never negative.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from rocketq.common.exceptions import RocketqError
from rocketq.sdk.admin import Admin

log = logging.getLogger("rocketq.console")

DEFAULT_INTERVAL: Final = 10.0
WINDOW_SECONDS: Final = 3600.0
SOURCE: Final = (
    "Each sample reads every broker's message totals (stored by sends, pulled by consumers) "
    "from its runtime table, and every topic's queue max offsets (summed per topic and "
    "broker) through the admin service. TPS is the difference between two samples divided "
    "by the seconds between them."
)

K = TypeVar("K")

# (topic, broker name) -> a total of messages.
Totals = dict[tuple[str, str], int]


@dataclass(frozen=True)
class Sample:
    """One reading: when (wall clock in ms for the charts, monotonic seconds for TPS) and
    the totals; ``errors`` names what could not be read this time."""

    at_ms: int
    mono: float
    put: Totals  # per topic and broker group
    broker_put: dict[str, int]  # per broker group: messages stored by sends
    broker_got: dict[str, int]  # per broker group: messages pulled
    errors: tuple[str, ...] = ()


@dataclass
class Point:
    """TPS between two samples, stamped with the later one's time."""

    at_ms: int
    broker_in: dict[str, float] = field(default_factory=dict)
    broker_out: dict[str, float] = field(default_factory=dict)
    topic_in: dict[str, float] = field(default_factory=dict)


def _rates(before: dict[K, int], after: dict[K, int], seconds: float) -> dict[K, float]:
    return {
        key: max(0, value - before[key]) / seconds for key, value in after.items() if key in before
    }


def point_between(a: Sample, b: Sample) -> Point:
    """The TPS from sample ``a`` to the later sample ``b`` (pure: no I/O)."""
    seconds = b.mono - a.mono
    point = Point(b.at_ms)
    if seconds <= 0:
        return point
    for (topic, _broker), tps in _rates(a.put, b.put, seconds).items():
        point.topic_in[topic] = point.topic_in.get(topic, 0.0) + tps
    point.broker_in = _rates(a.broker_put, b.broker_put, seconds)
    point.broker_out = _rates(a.broker_got, b.broker_got, seconds)
    return point


def points_of(samples: Iterable[Sample]) -> list[Point]:
    return [point_between(a, b) for a, b in itertools.pairwise(samples)]


def top_topics(points: list[Point], n: int = 10) -> list[tuple[str, float]]:
    """The ``n`` topics with the highest average TPS over ``points``, highest first."""
    sums: dict[str, float] = {}
    for p in points:
        for topic, tps in p.topic_in.items():
            sums[topic] = sums.get(topic, 0.0) + tps
    if not points:
        return []
    ranked = sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [(topic, total / len(points)) for topic, total in ranked]


async def read_sample(admin: Admin, clock: Callable[[], float] = time.monotonic) -> Sample:
    """One reading of every broker's and every topic's totals. A broker or topic that
    cannot be read is named in ``errors`` and left out; the rest still count."""
    at_ms, mono = int(time.time() * 1000), clock()
    errors: list[str] = []
    topics, brokers = await asyncio.gather(admin.topic_list(), admin.cluster_list())
    broker_put: dict[str, int] = {}
    broker_got: dict[str, int] = {}
    for b in brokers:
        rt = b.runtime
        try:
            stored, pulled = int(rt["msgPutTotalTodayNow"]), int(rt["msgGetTotalTodayNow"])
        except (KeyError, ValueError):
            why = rt.get("error", "no message totals")
            errors.append(f"broker {b.broker_name}/{b.broker_id}: {why}")
            continue
        broker_put[b.broker_name] = broker_put.get(b.broker_name, 0) + stored
        broker_got[b.broker_name] = broker_got.get(b.broker_name, 0) + pulled

    async def topic_totals(topic: str) -> Totals:
        try:
            queues = await admin.topic_status(topic)
        except RocketqError as exc:
            errors.append(f"topic {topic}: {exc}")
            return {}
        out: Totals = {}
        for q in queues:
            out[(topic, q.broker_name)] = out.get((topic, q.broker_name), 0) + q.max_offset
        return out

    put: Totals = {}
    for part in await asyncio.gather(*map(topic_totals, topics)):
        put.update(part)
    return Sample(at_ms, mono, put, broker_put, broker_got, tuple(sorted(errors)))


class Sampler:
    """Samples every ``interval`` seconds on the running event loop, from :meth:`start`
    to :meth:`stop`; keeps ``window`` seconds of samples."""

    def __init__(
        self,
        admin: Admin,
        *,
        interval: float = DEFAULT_INTERVAL,
        window: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the sample interval must be positive, got {interval}")
        self.admin = admin
        self.interval = interval
        self.window = window
        self.clock = clock
        self.samples: deque[Sample] = deque(maxlen=max(2, math.ceil(window / interval)))
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def sample_once(self) -> Sample:
        sample = await read_sample(self.admin, self.clock)
        self.samples.append(sample)
        self.last_error = "; ".join(sample.errors) or None
        return sample

    async def _run(self) -> None:
        next_at = self.clock()
        while True:
            try:
                await self.sample_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop outlives a nameserver that is down
                self.last_error = f"no sample: {exc}"
                log.warning("dashboard sample failed: %s", exc)
            next_at += self.interval
            now = self.clock()
            if next_at < now:  # a slow sample: skip the ticks it overran, no catching up
                next_at = now + self.interval - (now - next_at) % self.interval
            await asyncio.sleep(next_at - now)

    def snapshot(self) -> dict[str, Any]:
        """What the page and ``/api/dashboard`` show: the samples' series, with timestamps."""
        points = points_of(self.samples)
        brokers = sorted({b for p in points for b in (*p.broker_in, *p.broker_out)})
        top = top_topics(points)
        return {
            "interval_seconds": self.interval,
            "window_seconds": self.window,
            "samples": len(self.samples),
            "source": SOURCE,
            "last_error": self.last_error,
            "timestamps": [p.at_ms for p in points],
            "brokers": {
                b: {
                    "tps_in": [round(p.broker_in.get(b, 0.0), 3) for p in points],
                    "tps_out": [round(p.broker_out.get(b, 0.0), 3) for p in points],
                }
                for b in brokers
            },
            "topics": {
                topic: {
                    "tps_in": [round(p.topic_in.get(topic, 0.0), 3) for p in points],
                    "average": round(avg, 3),
                }
                for topic, avg in top
            },
        }
