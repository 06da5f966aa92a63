"""RocketMQ 5's official Python client as a load generator: one process of ``rocketq bench
produce|consume --protocol v5`` (bench/v5_bench.py starts as many as it is told).

    python -m rocketq.bench.v5_driver produce --endpoint HOST:PORT --topic T [--size 1024]
        [--in-flight 32] [--duration 5 | --messages N] [--wait-go] [--timeout 120]
    python -m rocketq.bench.v5_driver consume --endpoint HOST:PORT --topic T --group G
        [--mode simple|push] [--batch 32] [--receivers 4] [--ackers 16]
        [--duration 5 | --messages N] [--idle 2] [--wait-go] [--timeout 120]

It imports the standard library and the client (``rocketmq``, the ``v5client`` extra) and
nothing of rocketq: the client's generated apache.rocketmq.v2 modules and the broker's
cannot share a process, so it runs as a program of its own.

What it writes to stdout is JSON, one object a line, each with an ``event``:

``ready``  (with ``--wait-go``) the client has started (routes fetched, settings sent); the
           driver then waits for a line ``go`` on stdin before its timed region begins, so
           that every process of a run starts at once and no start-up is timed; end of
           input instead of ``go`` shuts the client down and exits.
``result`` the last line: ``role``, ``msgs`` (sends answered OK, or messages received and
           acknowledged), ``errors``, ``elapsed_s`` (from the start to the last answer),
           ``msgs_per_s``, ``cpu_s`` (this process's CPU time over the timed region) and,
           for sends, the latency percentiles (``p50_ms``, ``p99_ms``, ``p999_ms``,
           ``avg_rt_ms``, ``max_rt_ms``), with ``first_error`` when there was one.
``error``  what went wrong, when the client cannot start or the run cannot go on; the
           exit status is then 1.

``--timeout`` bounds the whole process: past it the driver writes an ``error`` line and
exits with status 3, whatever the client is doing.

Sends use ``Producer.send_async`` with ``--in-flight`` sends outstanding, after one untimed
send. Receives use a SimpleConsumer (``--mode simple``, the default): ``--receivers``
threads each receive up to ``--batch`` messages and have ``--ackers`` threads acknowledge
each one (the v5 API acknowledges one message per AckMessage call); the run ends after
``--duration`` seconds, after ``--messages``, or once no message has come for ``--idle``
seconds (a drained backlog), and the time counted ends at the last acknowledgement.
``--mode push`` uses a PushConsumer instead (the client's own receive loop and 20
consumption threads); it starts at ``go``, so its start-up is timed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any, Final

EXIT_ERROR: Final = 1
EXIT_TIMEOUT: Final = 3
REQUEST_TIMEOUT: Final = 5  # s, each RPC of the client (its default is 3)
DRAIN_TIMEOUT: Final = 15.0  # s for sends in flight to be answered after the run
INVISIBLE_S: Final = 30  # a received message's invisible time; every one is acknowledged

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """One JSON line on stdout, flushed (the parent reads it as it comes)."""
    line = json.dumps({"event": event, **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    """avg/max and nearest-rank p50/p99/p999 of latencies in ns, in ms."""
    if not samples_ns:
        return {"avg_rt_ms": 0.0, "max_rt_ms": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "p999_ms": 0.0}
    ordered = sorted(samples_ns)

    def rank(q: float) -> float:
        i = min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1
        return round(ordered[i] / 1e6, 3)

    return {
        "avg_rt_ms": round(sum(ordered) / len(ordered) / 1e6, 3),
        "max_rt_ms": round(ordered[-1] / 1e6, 3),
        "p50_ms": rank(0.50),
        "p99_ms": rank(0.99),
        "p999_ms": rank(0.999),
    }


class Tally:
    """Counts shared by the threads of a run (the client calls back on its own threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok = 0
        self.errors = 0
        self.first_error = ""
        self.last_ok = 0.0  # time.monotonic() of the last success
        self.latencies: list[int] = []

    def success(self, n: int = 1, latency_ns: int | None = None) -> None:
        now = time.monotonic()
        with self.lock:
            self.ok += n
            self.last_ok = now
            if latency_ns is not None:
                self.latencies.append(latency_ns)

    def failure(self, exc: BaseException, n: int = 1) -> None:
        with self.lock:
            self.errors += n
            if not self.first_error:
                self.first_error = f"{type(exc).__name__}: {exc}"[:500]


def _wait_for_go() -> bool:
    """True on a line ``go`` on stdin; False at the end of input (the parent gave up)."""
    return any(line.strip() == "go" for line in sys.stdin)


def _result(role: str, tally: Tally, started: float, cpu_start: float, **extra: Any) -> None:
    end = tally.last_ok if tally.ok else time.monotonic()
    elapsed = max(end - started, 1e-9)
    fields: dict[str, Any] = {
        "role": role,
        "msgs": tally.ok,
        "errors": tally.errors,
        "elapsed_s": round(elapsed, 4),
        "msgs_per_s": round(tally.ok / elapsed, 1),
        "cpu_s": round(time.process_time() - cpu_start, 3),
        **extra,
    }
    if tally.first_error:
        fields["first_error"] = tally.first_error
    emit("result", **fields)


class DriverError(Exception):
    """The client cannot run against the endpoint; the message says what to check."""


def _check_route(client: Any, args: argparse.Namespace) -> None:
    """The client's start-up only logs a route it could not fetch: ask for it again, so a
    wrong endpoint fails here, with its address, instead of every call later."""
    try:
        client.route_manager.retrieve_topic_route_data(args.topic)
    except Exception as exc:
        raise DriverError(
            f"no route for topic {args.topic!r} from {args.endpoint} ({exc}); is it a "
            "broker's apache.rocketmq.v2 endpoint (grpc_listen_port; `rocketq cluster up "
            "--grpc` prints it)?"
        ) from None


# -- produce --------------------------------------------------------------------------------


def produce(args: argparse.Namespace, config: Any) -> int:
    from rocketmq import Message, Producer

    producer = Producer(config, (args.topic,))
    producer.startup()
    try:
        body = (os.urandom(args.size // 2 + 1).hex().encode())[: args.size]
        _check_route(producer, args)
        # One send outside the timed region: the channel open, the settings answered, and
        # an endpoint that refuses sends found out before "ready".
        warm = Message()
        warm.topic = args.topic
        warm.body = body
        producer.send(warm)
        if args.wait_go:
            emit("ready", pid=os.getpid())
            if not _wait_for_go():
                return 0
        tally = Tally()
        slots = threading.BoundedSemaphore(args.in_flight)
        budget = args.messages if args.messages > 0 else None
        cpu_start = time.process_time()
        started = time.monotonic()
        stop_at = started + args.duration

        def answered(t0: int, future: Future[Any]) -> None:
            try:
                exc = future.exception()
                if exc is None:
                    tally.success(latency_ns=time.perf_counter_ns() - t0)
                else:
                    tally.failure(exc)
            finally:
                slots.release()

        sent = 0
        while time.monotonic() < stop_at and (budget is None or sent < budget):
            if not slots.acquire(timeout=0.05):
                continue
            msg = Message()
            msg.topic = args.topic
            msg.body = body
            t0 = time.perf_counter_ns()
            try:
                future = producer.send_async(msg)
            except Exception as exc:  # refused before it left: counted, and on to the next
                tally.failure(exc)
                slots.release()
                continue
            sent += 1
            future.add_done_callback(lambda f, t0=t0: answered(t0, f))
        # Every send in flight answered (or failed) before the result: take all the slots.
        drain_until = time.monotonic() + DRAIN_TIMEOUT
        taken = 0
        while taken < args.in_flight and time.monotonic() < drain_until:
            if slots.acquire(timeout=0.1):
                taken += 1
        lost = args.in_flight - taken
        if lost:
            tally.failure(TimeoutError(f"{lost} sends still unanswered after the run"), lost)
        _result(
            "produce",
            tally,
            started,
            cpu_start,
            size=args.size,
            in_flight=args.in_flight,
            **percentiles(tally.latencies),
        )
        return 0
    finally:
        with contextlib.suppress(Exception):
            producer.shutdown()


# -- consume --------------------------------------------------------------------------------


def consume(args: argparse.Namespace, config: Any) -> int:
    if args.mode == "push":
        return consume_push(args, config)
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        config, args.group, {args.topic: FilterExpression("*")}, await_duration=args.poll
    )
    consumer.startup()
    try:
        _check_route(consumer, args)
        if args.wait_go:
            emit("ready", pid=os.getpid())
            if not _wait_for_go():
                return 0
        tally = Tally()
        stop = threading.Event()
        budget = args.messages if args.messages > 0 else None
        last_seen = [time.monotonic()]
        cpu_start = time.process_time()
        started = time.monotonic()
        # 5.1.2's ack_async makes an asyncio future, which fails outside an event loop's
        # thread: acknowledgements are blocking calls, made by a pool of threads.
        ackers = ThreadPoolExecutor(args.ackers, thread_name_prefix="ack")

        def ack(message: Any) -> None:
            try:
                consumer.ack(message)
                tally.success()
            except Exception as exc:
                tally.failure(exc)

        def receiver() -> None:
            while not stop.is_set():
                try:
                    messages = consumer.receive(args.batch, INVISIBLE_S)
                except Exception as exc:
                    tally.failure(exc)
                    if tally.errors > 100 and tally.ok == 0:
                        stop.set()  # nothing works: no point in going on
                    continue
                if not messages:
                    continue
                last_seen[0] = time.monotonic()
                futures_wait([ackers.submit(ack, m) for m in messages])
                if budget is not None and tally.ok >= budget:
                    stop.set()

        threads = [
            threading.Thread(target=receiver, name=f"receiver-{i}", daemon=True)
            for i in range(args.receivers)
        ]
        for t in threads:
            t.start()
        stop_at = started + args.duration
        while not stop.wait(0.05):
            now = time.monotonic()
            if now >= stop_at or now - last_seen[0] >= args.idle:
                stop.set()
        for t in threads:
            t.join(args.poll + REQUEST_TIMEOUT * 3)
        ackers.shutdown(wait=False, cancel_futures=True)
        _result(
            "consume",
            tally,
            started,
            cpu_start,
            mode="simple",
            batch=args.batch,
            receivers=args.receivers,
        )
        return 0
    finally:
        with contextlib.suppress(Exception):
            consumer.shutdown()


def consume_push(args: argparse.Namespace, config: Any) -> int:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    tally = Tally()
    stop = threading.Event()
    budget = args.messages if args.messages > 0 else None

    class Counter(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            tally.success()  # counted when handed over; the client then acknowledges it
            if budget is not None and tally.ok >= budget:
                stop.set()
            return ConsumeResult.SUCCESS

    if args.wait_go:
        emit("ready", pid=os.getpid())
        if not _wait_for_go():
            return 0
    cpu_start = time.process_time()
    started = time.monotonic()
    consumer = PushConsumer(config, args.group, Counter(), {args.topic: FilterExpression("*")})
    consumer.startup()
    try:
        stop_at = started + args.duration
        while not stop.wait(0.05):
            now = time.monotonic()
            seen = tally.last_ok or started
            if now >= stop_at or (tally.ok and now - seen >= args.idle):
                stop.set()
        _result("consume", tally, started, cpu_start, mode="push")
        return 0
    finally:
        with contextlib.suppress(Exception):
            consumer.shutdown()


# -- the program ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m rocketq.bench.v5_driver",
        description="RocketMQ 5's official Python client as one load-generating process.",
    )
    roles = parser.add_subparsers(dest="role", required=True)
    for role in ("produce", "consume"):
        p = roles.add_parser(role)
        p.add_argument("--endpoint", required=True, help="the v2 endpoint, HOST:PORT")
        p.add_argument("--topic", required=True)
        p.add_argument("--duration", type=float, default=5.0, help="seconds of the run")
        p.add_argument("--messages", type=int, default=0, help="stop after N (0: duration)")
        p.add_argument("--wait-go", action="store_true", help="'ready', then wait for 'go'")
        p.add_argument("--timeout", type=float, default=120.0, help="bound on the process, s")
        p.add_argument("--access-key", default="")
        p.add_argument("--secret-key", default="")
        if role == "produce":
            p.add_argument("--size", type=int, default=1024, help="body size in bytes")
            p.add_argument("--in-flight", type=int, default=32, help="sends outstanding")
        else:
            p.add_argument("--group", required=True)
            p.add_argument("--mode", choices=("simple", "push"), default="simple")
            p.add_argument("--batch", type=int, default=32, help="messages per receive")
            p.add_argument("--receivers", type=int, default=4, help="receiving threads")
            p.add_argument("--ackers", type=int, default=16, help="acknowledging threads")
            p.add_argument("--poll", type=int, default=1, help="long polling, s")
            p.add_argument("--idle", type=float, default=2.0, help="stop after s without one")
    args = parser.parse_args(argv)
    for name in ("size", "in_flight", "batch", "receivers", "ackers", "poll"):
        if getattr(args, name, 1) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.duration <= 0 or args.timeout <= 0:
        parser.error("--duration and --timeout must be > 0")
    return args


def _watchdog(seconds: float) -> None:
    def expire() -> None:
        emit("error", error=f"the driver did not finish within its --timeout of {seconds:g} s")
        os._exit(EXIT_TIMEOUT)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _watchdog(args.timeout)
    try:
        from rocketmq import ClientConfiguration, Credentials

        config = ClientConfiguration(
            args.endpoint,
            Credentials(args.access_key, args.secret_key),
            request_timeout=REQUEST_TIMEOUT,
        )
        run = produce if args.role == "produce" else consume
        return run(args, config)
    except Exception as exc:
        text = str(exc) if isinstance(exc, DriverError) else f"{type(exc).__name__}: {exc}"
        emit("error", error=text[:1000], endpoint=args.endpoint)
        return EXIT_ERROR


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # The client leaves threads behind (schedulers, its I/O loop): leave without them.
    os._exit(code)
