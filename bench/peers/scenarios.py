"""The scenarios of a peer benchmark, written once over the ``Driver`` interface so
that every system runs exactly the same workload."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

from rocketq.bench.peers.results import ScenarioResult
from rocketq.bench.peers.systems.base import Consumer, Driver, Producer
from rocketq.bench.peers.workload import Scenario, Workload, make_body, stamp_of, stamped
from rocketq.bench.report import MB, rate, summarize_ns

Echo = Callable[[str], None]
# e2e: producers wake this often and send what is due (one send per message).
_TICK_S = 0.001
# e2e: sends in flight per producer at most; past it a producer waits (and falls behind).
_E2E_IN_FLIGHT = 256
_RECEIVE_POLL_S = 0.2


async def run_scenario(
    driver: Driver, scenario: Scenario, w: Workload, stream: str
) -> ScenarioResult:
    runs = {
        Scenario.PRODUCE: produce,
        Scenario.CONSUME: consume,
        Scenario.E2E: end_to_end,
        Scenario.SYNC_SEND: sync_send,
        Scenario.CONCURRENT: concurrent,
    }
    return await runs[scenario](driver, w, stream)


def _result(
    scenario: Scenario, w: Workload, count: int, elapsed: float, lat_ns: list[int] | None
) -> ScenarioResult:
    tps = rate(count, elapsed)
    s = summarize_ns(lat_ns) if lat_ns else None
    return ScenarioResult(
        system="",
        scenario=str(scenario),
        msgs_per_s=tps,
        mb_s=tps * w.size / MB,
        p50_ms=s.p50_ms if s else None,
        p99_ms=s.p99_ms if s else None,
        p999_ms=s.p999_ms if s else None,
        messages=count,
        elapsed_s=elapsed,
    )


async def _close_all(items: list[Producer] | list[Consumer]) -> None:
    for item in items:
        with contextlib.suppress(Exception):
            await item.close()


async def produce(driver: Driver, w: Workload, stream: str) -> ScenarioResult:
    """N producers, each sending batches of ``w.batch`` back to back, for ``w.duration``
    seconds or until ``w.messages`` in all; the clock stops once the system holds them
    all. Latency is per batch call."""
    await driver.prepare(stream)
    producers = [await driver.producer(stream) for _ in range(w.producers)]
    body = make_body(w.size)
    bodies = [body] * w.batch
    try:
        for p in producers:  # warm-up: connections and routes outside the timed region
            await p.send([body])
        warm = len(producers)
        sent = 0
        budget = w.messages or None
        lat: list[int] = []
        stop_at = time.monotonic() + w.duration

        async def loop(p: Producer) -> None:
            nonlocal sent, budget
            while time.monotonic() < stop_at:
                n = w.batch
                if budget is not None:
                    if budget <= 0:
                        return
                    n = min(n, budget)
                    budget -= n
                t0 = time.perf_counter_ns()
                await p.send(bodies if n == w.batch else bodies[:n])
                lat.append(time.perf_counter_ns() - t0)
                sent += n

        start = time.monotonic()
        await asyncio.gather(*(loop(p) for p in producers))
        await driver.settle(stream, sent + warm, timeout=max(30.0, w.duration * 3))
        elapsed = time.monotonic() - start
    finally:
        await _close_all(producers)
    return _result(Scenario.PRODUCE, w, sent, elapsed, lat)


async def write_backlog(driver: Driver, w: Workload, stream: str) -> None:
    """``w.backlog`` messages into ``stream`` with ``w.producers`` producers (not timed)."""
    producers = [await driver.producer(stream) for _ in range(w.producers)]
    body = make_body(w.size)
    left = w.backlog

    async def loop(p: Producer) -> None:
        nonlocal left
        while left > 0:
            n = min(w.batch, left)
            left -= n
            await p.send([body] * n)

    try:
        await asyncio.gather(*(loop(p) for p in producers))
        await driver.settle(stream, w.backlog, timeout=120.0)
    finally:
        await _close_all(producers)


async def consume(driver: Driver, w: Workload, stream: str) -> ScenarioResult:
    """M consumers of one group drain a backlog of ``w.backlog`` messages written
    beforehand; the clock runs from their start until all arrived (at most
    ``w.duration`` seconds, then the rate is of what arrived)."""
    await driver.prepare(stream)
    await write_backlog(driver, w, stream)
    received = 0
    start = time.monotonic()
    stop_at = start + w.duration
    consumers = [await driver.consumer(stream, f"{stream}-group") for _ in range(w.consumers)]
    done = asyncio.Event()

    async def loop(c: Consumer) -> None:
        nonlocal received
        while not done.is_set() and time.monotonic() < stop_at:
            got = await c.receive(min(_RECEIVE_POLL_S, max(0.01, stop_at - time.monotonic())))
            received += len(got)
            if received >= w.backlog:
                done.set()

    try:
        await asyncio.gather(*(loop(c) for c in consumers))
        elapsed = time.monotonic() - start
    finally:
        await _close_all(consumers)
    return _result(Scenario.CONSUME, w, min(received, w.backlog), elapsed, None)


async def end_to_end(driver: Driver, w: Workload, stream: str) -> ScenarioResult:
    """Producers send ``w.e2e_rate`` messages/s in all, one message per send, paced every
    millisecond, while M consumers receive; latency is from the send call to receipt
    (the body carries the send time). Messages sent in the first ``w.e2e_warmup`` seconds
    are not counted."""
    await driver.prepare(stream)
    group = f"{stream}-group"
    consumers = [await driver.consumer(stream, group, latency=True) for _ in range(w.consumers)]
    producers = [await driver.producer(stream) for _ in range(w.producers)]
    body = make_body(w.size)
    lat: list[int] = []
    sent = received = 0
    sending = True
    start_ns = time.perf_counter_ns()
    counted_from = start_ns + int(w.e2e_warmup * 1e9)
    per_producer = w.e2e_rate / w.producers

    async def receive_loop(c: Consumer) -> None:
        nonlocal received
        while sending or received < sent:
            got = await c.receive(_RECEIVE_POLL_S)
            now = time.perf_counter_ns()
            received += len(got)
            for b in got:
                t = stamp_of(b)
                if t >= counted_from:
                    lat.append(now - t)

    failures: list[BaseException] = []

    def finished(task: asyncio.Task[None], in_flight: set[asyncio.Task[None]]) -> None:
        in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            failures.append(task.exception())  # type: ignore[arg-type]

    async def send_loop(p: Producer) -> None:
        nonlocal sent
        in_flight: set[asyncio.Task[None]] = set()
        t0 = time.perf_counter()
        due = 0
        while not failures:
            now = time.perf_counter()
            if now - t0 >= w.duration:
                break
            target = int((now - t0) * per_producer) + 1
            while due < target and len(in_flight) < _E2E_IN_FLIGHT:
                task = asyncio.ensure_future(p.send([stamped(body)]))
                in_flight.add(task)
                task.add_done_callback(lambda t, s=in_flight: finished(t, s))  # type: ignore[misc]
                due += 1
                sent += 1
            await asyncio.sleep(_TICK_S)
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
        if failures:
            raise failures[0]

    receivers = [asyncio.ensure_future(receive_loop(c)) for c in consumers]
    try:
        await asyncio.gather(*(send_loop(p) for p in producers))
        sending = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*receivers), w.drain_timeout)
        elapsed = (time.perf_counter_ns() - start_ns) / 1e9
    finally:
        sending = False
        for r in receivers:
            r.cancel()
        await asyncio.gather(*receivers, return_exceptions=True)
        await _close_all(producers)
        await _close_all(consumers)
    result = _result(Scenario.E2E, w, received, max(elapsed, w.duration), lat)
    lost = sent - received
    note = f"{sent:,} sent, {received:,} received" + (f", {lost:,} missing" if lost > 0 else "")
    return replace(result, note=note)


async def sync_send(driver: Driver, w: Workload, stream: str) -> ScenarioResult:
    """One producer, one message per send, the next only after the last returned."""
    return await _single_sends(driver, w, stream, Scenario.SYNC_SEND, senders=1)


async def concurrent(driver: Driver, w: Workload, stream: str) -> ScenarioResult:
    """One producer shared by ``w.in_flight`` coroutines, each sending one message per
    send and the next once its last returned: that many single sends in flight from one
    process, as an asyncio application sends. Latency is per send."""
    return await _single_sends(driver, w, stream, Scenario.CONCURRENT, senders=w.in_flight)


async def _single_sends(
    driver: Driver, w: Workload, stream: str, scenario: Scenario, *, senders: int
) -> ScenarioResult:
    """``senders`` coroutines share one producer whose every send waits for the broker's
    answer, one message per send, for ``w.duration`` seconds; the clock stops when the
    last send under way returned."""
    await driver.prepare(stream)
    p = await driver.producer(stream, acked=True)
    body = make_body(w.size)
    lat: list[int] = []

    async def loop(stop_at: float) -> None:
        while time.monotonic() < stop_at:
            t0 = time.perf_counter_ns()
            await p.send([body])
            lat.append(time.perf_counter_ns() - t0)

    try:
        # warm-up: as many sends at once as the timed region has, so a client that opens
        # a connection per concurrent command (redis-py's pool) has them all open
        await asyncio.gather(*(p.send([body]) for _ in range(senders)))
        start = time.monotonic()
        stop_at = start + w.duration
        await asyncio.gather(*(loop(stop_at) for _ in range(senders)))
        elapsed = time.monotonic() - start
    finally:
        await _close_all([p])
    return _result(scenario, w, len(lat), elapsed, lat)
