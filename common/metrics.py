"""What the servers count, in tables the hot path adds to cheaply, exported through
prometheus-client's collector API when Prometheus scrapes.

prometheus-client's own ``Counter``/``Histogram`` take a lock and look their labels up on
every call, and a histogram observes one value at a time. A send of 32 messages would pay
that per message, or a batch would count as one size. So the broker keeps plain dicts:
one lookup per request (a batch included) adds its message count, its bytes and its size
bucket, with no lock (they are touched only on the event loop). :meth:`families` turns
them into metric families when scraped; everything else that can be read off the broker's
state (lag, store, Raft) is computed then too, not kept per message.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from typing import Final, Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from rocketq.common.exceptions import RocketqSystemError, for_code


class ServerGuard(Protocol):
    """What the remoting server's guard (``rocketq.remoting.bounds.ServerGuard``) shows
    the metrics: refusals by reason, the open connections, the bytes of partial frames."""

    @property
    def rejected(self) -> Mapping[str, int]: ...
    @property
    def open(self) -> Sized: ...
    @property
    def buffered(self) -> int: ...


Labels = tuple[str, ...]

# RocketMQ 5's buckets: message sizes in bytes, RPC latencies in ms.
MESSAGE_SIZE_BUCKETS: Final = (1024, 4096, 512 * 1024, 1024**2, 2 * 1024**2, 4 * 1024**2)
RPC_LATENCY_BUCKETS_MS: Final = (1, 3, 5, 10, 100, 1000, 3000)
SYNC_WAIT_BUCKETS_S: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 3)


@functools.cache
def response_code_name(code: int) -> str:
    """A response code as a label, RocketMQ's ResponseCode name in lower case: 0 "success",
    1 "system_error", 2 "system_busy", 17 "topic_not_exist", ..."""
    if code == 0:
        return "success"
    cls = for_code(code)
    if cls is RocketqSystemError and code != RocketqSystemError.code:
        return str(code)
    name = cls.__name__.removesuffix("Error").removeprefix("Rocketq")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() + (
        "_error" if cls is RocketqSystemError else ""
    )


def flag(value: bool) -> str:
    """A boolean label as RocketMQ writes it."""
    return "true" if value else "false"


class Base:
    """Labels every series of a process carries (cluster, node_type, node_id)."""

    def __init__(self, names: Labels, values: Labels) -> None:
        self.names = names
        self.values = values

    def counter(self, name: str, doc: str, labels: Sequence[str]) -> CounterMetricFamily:
        return CounterMetricFamily(name, doc, labels=[*self.names, *labels])

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=[*self.names, *labels])

    def histogram(self, name: str, doc: str, labels: Sequence[str]) -> HistogramMetricFamily:
        return HistogramMetricFamily(name, doc, labels=[*self.names, *labels])

    def add(self, family: Metric, labels: Iterable[str], value: float) -> None:
        """One sample of a counter or gauge family made by this base."""
        assert isinstance(family, CounterMetricFamily | GaugeMetricFamily)
        family.add_metric([*self.values, *labels], value)


class Histogram:
    """Bucket counts per label tuple; :meth:`observe` adds ``count`` observations of one
    value at once (a batch observed at its mean size)."""

    __slots__ = ("bounds", "rows")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        # label tuple -> [count per bucket (the last one +Inf)..., sum]
        self.rows: dict[Labels, list[float]] = {}

    def observe(self, key: Labels, value: float, count: int = 1) -> None:
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0] * (len(self.bounds) + 2)
        row[bisect.bisect_left(self.bounds, value)] += count
        row[-1] += value * count

    def export(
        self, base: Base, name: str, doc: str, labels: Sequence[str], rows: Iterable[Labels] = ()
    ) -> HistogramMetricFamily:
        """The family, with every label tuple of ``rows`` present even when empty."""
        family = base.histogram(name, doc, labels)
        for key in rows:
            self.rows.setdefault(key, [0] * (len(self.bounds) + 2))
        for key, row in self.rows.items():
            buckets, total = _cumulative(self.bounds, row)
            family.add_metric([*base.values, *key], buckets, total)
        return family


def _cumulative(
    bounds: tuple[float, ...], row: list[float]
) -> tuple[list[tuple[str, float]], float]:
    out, running = [], 0.0
    for bound, n in zip((*bounds, float("inf")), row, strict=False):
        running += n
        out.append(("+Inf" if bound == float("inf") else _le(bound), running))
    return out, row[-1]


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))


class Collector:
    """A prometheus-client collector over a function that yields the families."""

    def __init__(self, families: Callable[[], Iterator[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families()

    def describe(self) -> list[Metric]:
        return []  # no up-front description: families depend on state at scrape time


def bounds_families(
    base: Base, guard: ServerGuard | None, http_rejected: Mapping[str, int]
) -> Iterator[Metric]:
    """What a server's bounds refused (``rocketq_remoting_rejected_total{reason}``,
    ``rocketq_metrics_http_rejected_total{reason}``) and what they hold now (connections,
    bytes of partial frames). ``guard`` is None until the remoting server is made."""
    rejected = base.counter(
        "rocketq_remoting_rejected",
        "Connections closed or requests refused over a bound of the remoting server, by reason.",
        ("reason",),
    )
    connections = base.gauge(
        "rocketq_remoting_connections", "Connections the remoting server holds open."
    )
    buffered = base.gauge(
        "rocketq_remoting_buffered_bytes",
        "Bytes of partial frames the remoting server buffers across its connections.",
    )
    if guard is not None:
        for reason, n in guard.rejected.items():
            base.add(rejected, (reason,), n)
        base.add(connections, (), len(guard.open))
        base.add(buffered, (), guard.buffered)
    http = base.counter(
        "rocketq_metrics_http_rejected",
        "Requests to the metrics HTTP port cut off over a bound, by reason.",
        ("reason",),
    )
    for reason, n in http_rejected.items():
        base.add(http, (reason,), n)
    yield from (rejected, connections, buffered, http)


def bounds_collector(
    base: Callable[[], Base],
    guard: Callable[[], ServerGuard | None],
    http_rejected: Callable[[], Mapping[str, int]],
) -> Collector:
    """A collector of :func:`bounds_families`, for a server's registry (each argument is
    read at scrape time)."""
    return Collector(lambda: bounds_families(base(), guard(), http_rejected()))
