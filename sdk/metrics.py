"""Client metrics, opt-in: the histograms of RocketMQ 5's clients, with its names, labels
and buckets (milliseconds), recorded into a ``prometheus_client`` registry that the user
exposes as they like::

    producer = Producer("pg", ns, metrics=True)
    prometheus_client.start_http_server(8000, registry=producer.metrics_registry)

``metrics=True`` gives a client a registry of its own; ``metrics=<CollectorRegistry>``
records into that one, and clients given the same registry share its histograms (told
apart by ``client_id``). There is no default registry: nothing is recorded anywhere unless
asked. With metrics off a client makes no timing call for them at all.

What one observation is:

- ``rocketmq_send_cost_time``: one per send call (``send``, ``send_batch``, a transactional
  half message), a batch counting once, from the call to its result, retries included;
  ``success`` when the broker answered SEND_OK, ``failure`` for an error or another status.
  A message the client rejects before sending (empty body, forbidden topic) is not timed,
  nor is a oneway send (it has no result).
- ``rocketmq_delivery_latency``: one per message a pull brings to a consumer (push or
  pull): the client's clock minus the broker's store timestamp (0 if the clocks disagree).
- ``rocketmq_await_time``: one per message a push consumer hands to its listener: how long
  it sat in the consumer's cache since its pull arrived. Orderly consumers time a batch
  from its first message's arrival.
- ``rocketmq_process_time``: one per listener call (not per message: a batch of
  ``consume_message_batch_max_size`` messages is one call, so the sum is the time spent
  in the listener); ``success`` when it returned CONSUME_SUCCESS, ``failure`` when it
  raised or returned anything else.
- ``rocketq_consumer_bad_messages_total`` (rocketq's own, a counter, registered at the
  first): one per pulled message a consumer could not deliver (``reason``: body_crc,
  not_zlib, inflate_cap; see sdk.message_body).

Labelled children are cached per label values, so a hot loop does not call ``labels()``;
the per-message histograms are fed once per pull (one clock read, one child lookup per
topic).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from typing import Final, TypeAlias

from prometheus_client import CollectorRegistry, Counter, Histogram

from rocketq.common.exceptions import ClientStateError
from rocketq.common.message import MessageExt

SEND_COST_TIME: Final = "rocketmq_send_cost_time"
DELIVERY_LATENCY: Final = "rocketmq_delivery_latency"
AWAIT_TIME: Final = "rocketmq_await_time"
PROCESS_TIME: Final = "rocketmq_process_time"
BAD_MESSAGES: Final = "rocketq_consumer_bad_messages"

SEND_COST_TIME_BUCKETS: Final = (1.0, 5.0, 10.0, 20.0, 50.0, 200.0, 500.0)
DELIVERY_LATENCY_BUCKETS: Final = (1.0, 5.0, 10.0, 20.0, 50.0, 200.0, 500.0)
AWAIT_TIME_BUCKETS: Final = (1.0, 5.0, 20.0, 100.0, 1000.0, 5000.0, 10000.0)
PROCESS_TIME_BUCKETS: Final = (1.0, 5.0, 10.0, 100.0, 10000.0, 60000.0)

SUCCESS: Final = "success"
FAILURE: Final = "failure"

_PRODUCER_LABELS: Final = ("topic", "client_id", "invocation_status")
_CONSUMER_LABELS: Final = ("topic", "consumer_group", "client_id")
_PROCESS_LABELS: Final = ("topic", "consumer_group", "client_id", "invocation_status")
_BAD_LABELS: Final = ("topic", "consumer_group", "client_id", "reason")

# What a client's ``metrics=`` takes: True (a registry of its own), a registry, or off.
MetricsOption: TypeAlias = bool | CollectorRegistry | None


class _Histograms:
    """The four histograms as registered in one registry."""

    __slots__ = ("await_time", "delivery_latency", "process_time", "send_cost_time")

    def __init__(self, registry: CollectorRegistry) -> None:
        made: list[Histogram] = []
        try:
            self.send_cost_time = _histogram(
                made,
                registry,
                SEND_COST_TIME,
                "Time of a send call until its result, in milliseconds",
                _PRODUCER_LABELS,
                SEND_COST_TIME_BUCKETS,
            )
            self.delivery_latency = _histogram(
                made,
                registry,
                DELIVERY_LATENCY,
                "Time from a message's store on the broker to its arrival at the consumer, "
                "in milliseconds",
                _CONSUMER_LABELS,
                DELIVERY_LATENCY_BUCKETS,
            )
            self.await_time = _histogram(
                made,
                registry,
                AWAIT_TIME,
                "Time a message waited in the push consumer's cache before its listener got "
                "it, in milliseconds",
                _CONSUMER_LABELS,
                AWAIT_TIME_BUCKETS,
            )
            self.process_time = _histogram(
                made,
                registry,
                PROCESS_TIME,
                "Time of a push consumer's listener call, in milliseconds",
                _PROCESS_LABELS,
                PROCESS_TIME_BUCKETS,
            )
        except ValueError as exc:  # a name taken by a collector of someone else's
            for histogram in made:
                registry.unregister(histogram)
            raise ClientStateError(
                f"the registry already has a collector named like a client metric ({exc}); "
                "give the client a registry of its own, or metrics=True"
            ) from exc


def _histogram(
    made: list[Histogram],
    registry: CollectorRegistry,
    name: str,
    documentation: str,
    labels: tuple[str, ...],
    buckets: tuple[float, ...],
) -> Histogram:
    histogram = Histogram(name, documentation, labels, registry=registry, buckets=buckets)
    made.append(histogram)
    return histogram


# The histograms each registry holds, so that clients sharing a registry share them
# (registering them twice is "Duplicated timeseries"). Weak: it keeps no registry alive.
_registered = weakref.WeakKeyDictionary[CollectorRegistry, _Histograms]()
_registered_lock = threading.Lock()


def _histograms(registry: CollectorRegistry) -> _Histograms:
    with _registered_lock:
        histograms = _registered.get(registry)
        if histograms is None:
            histograms = _registered[registry] = _Histograms(registry)
        return histograms


class ClientMetrics:
    """RocketMQ 5's client histograms in ``registry`` (a new one when None); more than one
    ClientMetrics (of more than one client) may record into one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        histograms = _histograms(self.registry)
        self.send_cost_time = histograms.send_cost_time
        self.delivery_latency = histograms.delivery_latency
        self.await_time = histograms.await_time
        self.process_time = histograms.process_time
        self._send: dict[tuple[str, str, bool], Histogram] = {}
        self._delivery: dict[tuple[str, str, str], Histogram] = {}
        self._await: dict[tuple[str, str, str], Histogram] = {}
        self._process: dict[tuple[str, str, str, bool], Histogram] = {}

    def observe_send(self, topic: str, client_id: str, ok: bool, millis: float) -> None:
        """Count one send to ``topic`` and its latency in milliseconds (the producer calls
        this)."""
        key = (topic, client_id, ok)
        child = self._send.get(key)
        if child is None:
            child = self._send[key] = self.send_cost_time.labels(
                topic, client_id, SUCCESS if ok else FAILURE
            )
        child.observe(millis)

    def observe_delivery(self, group: str, client_id: str, msgs: Sequence[MessageExt]) -> None:
        """The messages of a pull result that just reached the consumer."""
        now = time.time() * 1000
        topic, child = "", None
        for m in msgs:
            if child is None or m.topic != topic:
                topic = m.topic
                child = _child(self._delivery, self.delivery_latency, topic, group, client_id)
            child.observe(max(0.0, now - m.store_timestamp))

    def observe_await(
        self, group: str, client_id: str, msgs: Sequence[MessageExt], millis: float
    ) -> None:
        """Messages handed to the listener together, after ``millis`` in the cache."""
        topic, child = "", None
        for m in msgs:
            if child is None or m.topic != topic:
                topic = m.topic
                child = _child(self._await, self.await_time, topic, group, client_id)
            child.observe(millis)

    def observe_process(
        self, topic: str, group: str, client_id: str, ok: bool, millis: float
    ) -> None:
        """Count one message a consumer's handler processed and how long it took in
        milliseconds (the consumers call this)."""
        key = (topic, group, client_id, ok)
        child = self._process.get(key)
        if child is None:
            child = self._process[key] = self.process_time.labels(
                topic, group, client_id, SUCCESS if ok else FAILURE
            )
        child.observe(millis)

    def observe_bad_message(self, topic: str, group: str, client_id: str, reason: str) -> None:
        """A pulled message the consumer could not deliver (the counter is registered on
        the first, so a registry without bad messages holds RocketMQ's metrics only)."""
        _bad_messages(self.registry).labels(topic, group, client_id, reason).inc()


def _child(
    cache: dict[tuple[str, str, str], Histogram],
    histogram: Histogram,
    topic: str,
    group: str,
    client_id: str,
) -> Histogram:
    key = (topic, group, client_id)
    child = cache.get(key)
    if child is None:
        child = cache[key] = histogram.labels(topic, group, client_id)
    return child


_bad_counters = weakref.WeakKeyDictionary[CollectorRegistry, Counter]()


def _bad_messages(registry: CollectorRegistry) -> Counter:
    with _registered_lock:
        counter = _bad_counters.get(registry)
        if counter is None:
            counter = _bad_counters[registry] = Counter(
                BAD_MESSAGES,
                "Pulled messages a consumer could not deliver (bad body CRC, not zlib, "
                "inflating past the cap)",
                _BAD_LABELS,
                registry=registry,
            )
        return counter


def client_metrics(option: MetricsOption) -> ClientMetrics | None:
    """A client's ``metrics=`` argument as the ClientMetrics it records into (None: off)."""
    if option is None or option is False:
        return None
    if option is True:
        return ClientMetrics()
    if isinstance(option, CollectorRegistry):
        return ClientMetrics(option)
    raise ClientStateError(
        f"metrics={option!r}: give True (a registry of the client's own), a "
        "prometheus_client CollectorRegistry, or False"
    )
