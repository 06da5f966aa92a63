"""The v5 conformance matrix's runner for RocketMQ 5's official Python client
(rocketmq-python-client 5.1.2, import name ``rocketmq``), unmodified and used through its
public API only. ``tests/conformance/test_v5_matrix.py`` runs it in a process of its own
(the client's generated protos and rocketq's cannot share one):

    python tests/conformance/v5_python.py '<spec json>'

The spec and the output are those of the matrix's contract, shared with the Node.js
runner (``v5_nodejs/runner.js``): one JSON object on argv[1] (scenario, endpoint, topic,
group, ak, sk, tls, count, deadline_s), one JSON object as the last stdout line, exit 0
also when the scenario failed part-way (the first failure in ``error``), non-zero only
for a spec this runner cannot read. A watchdog prints what was gathered and ends the
process if the scenario (or a client's shutdown) overruns its deadline.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import FilterType

SPEC_KEYS: Final = ("scenario", "endpoint", "topic", "group", "ak", "sk", "tls", "count",
                    "deadline_s")  # fmt: skip
AWAIT_S: Final = 5  # a SimpleConsumer's long polling, as the contract says
BATCH: Final = 32  # receive(32, ...)
INVISIBLE_S: Final = 30  # receive(32, 30 s)
VOLUME_INVISIBLE_S: Final = 60  # the volume scenario's receive(32, 60 s)
IN_FLIGHT: Final = 64  # volume sends outstanding at once
# The client's default (3 s) is short for a 2-core machine running the matrix.
REQUEST_TIMEOUT_S: Final = 10
GRACE_S: Final = 20.0  # past the deadline, for the clients' shutdown, before the watchdog


class Report:
    """What the scenario gathered so far, shared by the scenario's threads (the push
    consumers' listeners record from the client's threads) and printed once."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.out: dict[str, Any] = {}
        self.printed = False

    def now(self) -> float:
        """Seconds since the runner started (the ``at_s`` clock)."""
        return round(time.monotonic() - self.started, 3)

    def set(self, key: str, value: Any) -> None:
        with self.lock:
            self.out[key] = value

    def add(self, key: str, item: Any) -> None:
        with self.lock:
            self.out.setdefault(key, []).append(item)

    def get(self, key: str) -> Any:
        with self.lock:
            return copy.deepcopy(self.out.get(key))

    def fail(self, exc: BaseException) -> None:
        """Keep the first error only: later ones usually follow from it."""
        with self.lock:
            self.out.setdefault("error", f"{type(exc).__name__}: {exc}")

    def emit(self) -> None:
        """Print the report as the last stdout line, once (main thread or watchdog)."""
        with self.lock:
            if self.printed:
                return
            self.printed = True
            line = json.dumps(self.out)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@contextlib.contextmanager
def started(client: Any) -> Iterator[Any]:
    """``client`` started, then shut down however the block ends."""
    client.startup()
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.shutdown()


class Run:
    """One scenario's inputs, its clock and its report."""

    def __init__(self, spec: dict[str, Any], report: Report) -> None:
        self.spec = spec
        self.report = report
        self.topic: str = spec["topic"]
        self.group: str = spec["group"]
        self.tls: bool = spec["tls"]
        self.count: int = spec["count"]
        self.deadline = report.started + float(spec["deadline_s"])
        self.config = self.configuration(spec["sk"])

    def configuration(self, sk: str) -> ClientConfiguration:
        return ClientConfiguration(
            self.spec["endpoint"],
            Credentials(self.spec["ak"], sk),
            request_timeout=REQUEST_TIMEOUT_S,
        )

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def producer(self, checker: TransactionChecker | None = None, sk: str | None = None) -> Any:
        """A started producer of the topic (signing with ``sk`` when given)."""
        config = self.config if sk is None else self.configuration(sk)
        return started(Producer(config, (self.topic,), checker=checker, tls_enable=self.tls))

    def simple_consumer(self, expression: FilterExpression | None = None) -> Any:
        """A started SimpleConsumer of the topic (every tag unless ``expression``)."""
        return started(
            SimpleConsumer(
                self.config,
                self.group,
                {self.topic: expression or FilterExpression("*")},
                await_duration=AWAIT_S,
                tls_enable=self.tls,
            )
        )

    def push_consumer(self, listener: MessageListener) -> Any:
        """A started PushConsumer of every message of the topic."""
        return started(
            PushConsumer(
                self.config,
                self.group,
                listener,
                {self.topic: FilterExpression("*")},
                tls_enable=self.tls,
            )
        )

    def message(
        self,
        body: str,
        tag: str | None = None,
        keys: str | None = None,
        props: dict[str, str] | None = None,
        group: str | None = None,
    ) -> Message:
        msg = Message()
        msg.topic = self.topic
        msg.body = body.encode()
        if tag is not None:
            msg.tag = tag
        if keys is not None:
            msg.keys = keys
        for key, value in (props or {}).items():
            msg.add_property(key, value)
        if group is not None:
            msg.message_group = group
        return msg

    def view(self, m: Message) -> dict[str, Any]:
        """A received message as the contract's view."""
        body = m.body.decode(errors="replace") if m.body is not None else ""
        return {
            "body": body,
            "id": m.message_id,
            "topic": m.topic,
            "tag": m.tag,
            "keys": sorted(m.keys),
            "props": dict(m.properties),
            "group": m.message_group,
            "attempt": m.delivery_attempt,
            "born_host": m.born_host or None,
            "born_ms": m.born_timestamp,
            "delivery_ms": m.delivery_timestamp,
            "corrupted": m.corrupted,
            "at_s": self.report.now(),
        }

    def receive_until(
        self,
        consumer: Any,
        done: Callable[[], bool],
        on_message: Callable[[Message], None],
        invisible_s: int = INVISIBLE_S,
        ack: bool = True,
    ) -> None:
        """Receive (and acknowledge) until ``done()`` or the deadline."""
        while not done() and self.left() > 0:
            for m in consumer.receive(BATCH, invisible_s):
                on_message(m)
                if ack:
                    consumer.ack(m)

    def receive_bodies(self, consumer: Any, wanted: set[str]) -> None:
        """Receive until every body of ``wanted`` came, then once more, each body received
        added to the report's ``bodies``."""
        self.receive_until(
            consumer,
            lambda: wanted <= set(self.report.get("bodies")),
            lambda m: self.report.add("bodies", m.body.decode(errors="replace")),
        )
        for body in self.receive_once(consumer):
            self.report.add("bodies", body)

    def receive_once(self, consumer: Any) -> list[str]:
        """One more receive after the wanted ones came: what it gives is acknowledged and
        its bodies returned."""
        bodies = []
        for m in consumer.receive(BATCH, INVISIBLE_S):
            bodies.append(m.body.decode(errors="replace"))
            consumer.ack(m)
        return bodies


class Checker(TransactionChecker):  # type: ignore[misc]
    """Answers every check COMMIT, counting the checks."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.calls = 0

    def check(self, message: Message) -> TransactionResolution:
        with self.report.lock:
            self.calls += 1
            self.report.out["checked_calls"] = self.calls
        return TransactionResolution.COMMIT


class Listener(MessageListener):  # type: ignore[misc]
    """Records each delivery as [body, attempt] under ``seen``; ``fails(body, n)`` says
    whether the n-th delivery (1-based) of a body fails."""

    def __init__(self, run: Run, fails: Callable[[str, int], bool]) -> None:
        self.run = run
        self.fails = fails
        self.counts: dict[str, int] = {}

    def consume(self, message: Message) -> ConsumeResult:
        body = message.body.decode(errors="replace")
        with self.run.report.lock:
            self.counts[body] = self.counts.get(body, 0) + 1
            nth = self.counts[body]
            self.run.report.out.setdefault("seen", []).append([body, message.delivery_attempt])
        return ConsumeResult.FAILURE if self.fails(body, nth) else ConsumeResult.SUCCESS

    def seen(self, body: str) -> int:
        with self.run.report.lock:
            return self.counts.get(body, 0)


def wait_for(run: Run, done: Callable[[], bool]) -> None:
    """Poll ``done`` until it holds or the deadline passed."""
    while not done() and run.left() > 0:
        time.sleep(0.05)


def linger(run: Run, seconds: float) -> None:
    """Keep a consumer running a little longer (within the deadline) to catch what should
    not come."""
    time.sleep(max(0.0, min(seconds, run.left())))


# -- scenarios ------------------------------------------------------------------------


def send_normal(run: Run) -> None:
    with run.producer() as producer:
        for i in range(20):
            msg = run.message(f"n-{i}", tag="TagA", keys=f"k-{i}", props={"origin": "v5"})
            receipt = producer.send(msg)
            run.report.add("sent", {"body": f"n-{i}", "id": receipt.message_id})
    run.report.set("got", [])
    wanted = {f"n-{i}" for i in range(20)}
    with run.simple_consumer() as consumer:
        run.receive_until(
            consumer,
            lambda: wanted <= {v["body"] for v in run.report.get("got")},
            lambda m: run.report.add("got", run.view(m)),
        )
        run.report.set("after_ack", run.receive_once(consumer))


def send_fifo(run: Run) -> None:
    with run.producer() as producer:
        for i in range(10):
            for prefix, group in (("a", "g1"), ("b", "g2")):
                body = f"{prefix}-{i}"
                receipt = producer.send(run.message(body, group=group))
                run.report.add("sent", {"body": body, "id": receipt.message_id})
    run.report.set("got", [])
    wanted = {s["body"] for s in run.report.get("sent")}
    with run.simple_consumer() as consumer:
        run.receive_until(
            consumer,
            lambda: wanted <= {v["body"] for v in run.report.get("got")},
            lambda m: run.report.add("got", run.view(m)),
        )


def send_delay(run: Run) -> None:
    run.report.set("got", [])
    with run.producer() as producer:
        later = run.message("later")
        # The 5.1.2 client writes delivery_timestamp into Timestamp.seconds as it is: it
        # takes whole epoch seconds (research note, quirk 1). Rounded up: at least 3 s.
        later.delivery_timestamp = math.ceil(time.time() + 3)
        run.report.set("sent_at_s", run.report.now())
        producer.send(later)
        producer.send(run.message("now"))
    with run.simple_consumer() as consumer:
        run.receive_until(
            consumer,
            lambda: {"later", "now"} <= {v["body"] for v in run.report.get("got")},
            lambda m: run.report.add("got", run.view(m)),
        )


def transaction(run: Run) -> None:
    run.report.set("bodies", [])
    checker = Checker(run.report)
    run.report.set("checked_calls", 0)
    # The producer stays up while the consumer waits: the broker's check of the open
    # transaction reaches it over its Telemetry stream.
    with run.producer(checker=checker) as producer:
        for body, end in (("committed", "commit"), ("rolled-back", "rollback"), ("checked", "")):
            tx = producer.begin_transaction()
            producer.send(run.message(body), tx)
            if end == "commit":
                tx.commit()
            elif end == "rollback":
                tx.rollback()
        with run.simple_consumer() as consumer:
            run.receive_bodies(consumer, {"committed", "checked"})


def simple_ack(run: Run) -> None:
    with run.producer() as producer:
        for i in range(5):
            producer.send(run.message(f"s-{i}"))
    run.report.set("first", [])
    wanted = {f"s-{i}" for i in range(5)}
    with run.simple_consumer() as consumer:
        run.receive_until(
            consumer,
            lambda: wanted <= set(run.report.get("first")),
            lambda m: run.report.add("first", m.body.decode(errors="replace")),
        )
        consumer.await_duration = 3
        run.report.set("after_ack", run.receive_once(consumer))


def change_invisible(run: Run) -> None:
    with run.producer() as producer:
        producer.send(run.message("again"))
    with run.simple_consumer() as consumer:
        first: list[Message] = []
        run.receive_until(consumer, lambda: bool(first), first.append, ack=False)
        if not first:
            return
        run.report.set("first", run.view(first[0]))
        consumer.change_invisible_duration(first[0], 2)
        second: list[Message] = []
        run.receive_until(consumer, lambda: bool(second), second.append, ack=False)
        if not second:
            return
        view = run.view(second[0])
        run.report.set("second", view)
        run.report.set("gap_s", round(view["at_s"] - run.report.get("first")["at_s"], 3))
        consumer.ack(second[0])


def push_retry_dlq(run: Run) -> None:
    run.report.set("seen", [])
    with run.producer() as producer:
        for body in ("ok-1", "fail-once", "fail-always", "ok-2"):
            producer.send(run.message(body))

    def fails(body: str, nth: int) -> bool:
        return body == "fail-always" or (body == "fail-once" and nth == 1)

    listener = Listener(run, fails)
    with run.push_consumer(listener):
        wait_for(
            run,
            lambda: (
                listener.seen("fail-once") >= 2
                and listener.seen("fail-always") >= 3
                and listener.seen("ok-1") >= 1
                and listener.seen("ok-2") >= 1
            ),
        )
        linger(run, 3)


def push_fifo(run: Run) -> None:
    run.report.set("seen", [])
    with run.producer() as producer:
        for i in range(6):
            producer.send(run.message(f"p-{i}", group="g1"))
    listener = Listener(run, lambda body, _: body == "p-2")
    with run.push_consumer(listener):
        wait_for(run, lambda: listener.seen("p-5") >= 1)
        linger(run, 2)


def filter_tag(run: Run) -> None:
    run.report.set("bodies", [])
    with run.simple_consumer(FilterExpression("TagA||TagB")) as consumer:
        with run.producer() as producer:
            for body, tag in (("ta", "TagA"), ("tb", "TagB"), ("tc", "TagC"), ("ta2", "TagA")):
                producer.send(run.message(body, tag=tag))
        run.receive_bodies(consumer, {"ta", "tb", "ta2"})


def filter_sql(run: Run) -> None:
    run.report.set("bodies", [])
    sql = FilterExpression("color = 'red' AND n > 2", FilterType.SQL)
    with run.simple_consumer(sql) as consumer:
        with run.producer() as producer:
            for body, color, n in (("r1", "red", 1), ("r3", "red", 3), ("b5", "blue", 5),
                                   ("r7", "red", 7)):  # fmt: skip
                producer.send(run.message(body, props={"color": color, "n": str(n)}))
        run.receive_bodies(consumer, {"r3", "r7"})


def new_group(run: Run) -> None:
    # Sent before any consumer of the group exists: where the group starts decides
    # whether these are received.
    with run.producer() as producer:
        for i in range(5):
            receipt = producer.send(run.message(f"ng-{i}"))
            run.report.add("sent", {"body": f"ng-{i}", "id": receipt.message_id})
    run.report.set("bodies", [])
    with run.simple_consumer() as consumer:
        run.receive_until(
            consumer,
            lambda: len(run.report.get("bodies")) >= 5,
            lambda m: run.report.add("bodies", m.body.decode(errors="replace")),
        )


def two_brokers(run: Run) -> None:
    with run.producer() as producer:
        for i in range(40):
            receipt = producer.send(run.message(f"tb-{i}"))
            run.report.add("sent", {"body": f"tb-{i}", "id": receipt.message_id})
    run.report.set("bodies", [])
    wanted = {f"tb-{i}" for i in range(40)}
    with run.simple_consumer() as consumer:
        run.receive_until(
            consumer,
            lambda: wanted <= set(run.report.get("bodies")),
            lambda m: run.report.add("bodies", m.body.decode(errors="replace")),
        )


def send_volume(run: Run) -> set[str]:
    """``count`` sends, at most IN_FLIGHT outstanding (send_async); the bodies sent."""
    sent: set[str] = set()
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(IN_FLIGHT)
    failures: list[BaseException] = []
    began = time.monotonic()
    run.report.set("sent_n", 0)

    def done(body: str, future: Future[Any]) -> None:
        try:
            exc = future.exception()
            with lock:
                if exc is None:
                    sent.add(body)
                else:
                    failures.append(exc)
        finally:
            slots.release()

    with run.producer() as producer:
        for i in range(run.count):
            if not slots.acquire(timeout=max(0.0, run.left())):
                break
            future = producer.send_async(run.message(f"v-{i}"))
            future.add_done_callback(lambda f, body=f"v-{i}": done(body, f))
        for _ in range(IN_FLIGHT):  # every outstanding send answered
            if not slots.acquire(timeout=max(0.0, run.left())):
                break
    run.report.set("send_s", round(time.monotonic() - began, 3))
    run.report.set("sent_n", len(sent))
    if failures:
        run.report.fail(failures[0])
    return sent


def report_volume(run: Run, sent: set[str], got: list[str], began: float) -> None:
    distinct = set(got)
    run.report.set("distinct", len(distinct))
    run.report.set("duplicates", len(got) - len(distinct))
    run.report.set("missing", sorted(sent - distinct, key=lambda b: int(b[2:]))[:10])
    run.report.set("drain_s", round(time.monotonic() - began, 3))


def volume_simple(run: Run) -> None:
    sent = send_volume(run)
    got: list[str] = []
    calls = empty = 0
    began = time.monotonic()
    # Acknowledged by a few threads while the loop receives: 2000 acks one after the
    # other would hold up the receives.
    with run.simple_consumer() as consumer, ThreadPoolExecutor(8) as acks:
        pending = []
        while not sent <= set(got) and run.left() > 0:
            batch = consumer.receive(BATCH, VOLUME_INVISIBLE_S)
            calls += 1
            empty += not batch
            got += [m.body.decode(errors="replace") for m in batch]
            pending += [acks.submit(consumer.ack, m) for m in batch]
            run.report.set("receive_calls", calls)
            run.report.set("empty_receives", empty)
        report_volume(run, sent, got, began)
        for ack in pending:
            ack.result(timeout=max(1.0, run.left()))


def volume_push(run: Run) -> None:
    sent = send_volume(run)
    got: list[str] = []
    lock = threading.Lock()

    class All(MessageListener):  # type: ignore[misc]
        def consume(self, message: Message) -> ConsumeResult:
            with lock:
                got.append(message.body.decode(errors="replace"))
            return ConsumeResult.SUCCESS

    began = time.monotonic()

    def drained() -> bool:
        with lock:
            return sent <= set(got)

    with run.push_consumer(All()):
        wait_for(run, drained)
        with lock:
            report_volume(run, sent, list(got), began)


def acl_tls(run: Run) -> None:
    run.report.set("bodies", [])
    run.report.set("forged_error", None)
    with run.producer() as producer:
        receipt = producer.send(run.message("signed"))
        run.report.add("sent", {"body": "signed", "id": receipt.message_id})
    with run.simple_consumer() as consumer:
        run.receive_until(
            consumer,
            lambda: "signed" in run.report.get("bodies"),
            lambda m: run.report.add("bodies", m.body.decode(errors="replace")),
        )
    try:
        with run.producer(sk=run.spec["sk"] + "-wrong") as forger:
            forger.send(run.message("forged"))
    except Exception as exc:  # what the client says of the refusal is the result
        run.report.set("forged_error", f"{type(exc).__name__}: {exc}")


SCENARIOS: Final[dict[str, Callable[[Run], None]]] = {
    f.__name__: f
    for f in (
        send_normal, send_fifo, send_delay, transaction, simple_ack, change_invisible,
        push_retry_dlq, push_fifo, filter_tag, filter_sql, new_group, two_brokers,
        volume_simple, volume_push, acl_tls,
    )
}  # fmt: skip


def read_spec(argv: list[str]) -> dict[str, Any]:
    """The spec on argv[1], checked: a bad one is the only reason to exit non-zero."""
    if len(argv) != 2:
        raise ValueError(f"usage: {argv[0]} '<spec json>' (got {len(argv) - 1} arguments)")
    spec = json.loads(argv[1])
    if not isinstance(spec, dict):
        raise ValueError(f"the spec must be a JSON object, got {type(spec).__name__}")
    missing = [k for k in SPEC_KEYS if k not in spec]
    if missing:
        raise ValueError(f"the spec lacks {', '.join(missing)}")
    if spec["scenario"] not in SCENARIOS:
        raise ValueError(f"unknown scenario {spec['scenario']!r}; known: {', '.join(SCENARIOS)}")
    for key in ("endpoint", "topic", "group", "ak", "sk"):
        if not isinstance(spec[key], str):
            raise ValueError(f"spec key {key} must be a string, got {spec[key]!r}")
    if not isinstance(spec["tls"], bool):
        raise ValueError(f"spec key tls must be true or false, got {spec['tls']!r}")
    for key in ("count", "deadline_s"):
        if isinstance(spec[key], bool) or not isinstance(spec[key], int | float):
            raise ValueError(f"spec key {key} must be a number, got {spec[key]!r}")
        if spec[key] <= 0:
            raise ValueError(f"spec key {key} must be > 0, got {spec[key]}")
    return spec


def main() -> None:
    try:
        spec = read_spec(sys.argv)
    except ValueError as exc:
        sys.stderr.write(f"bad spec: {exc}\n")
        sys.exit(2)
    report = Report()
    run = Run(spec, report)

    def watchdog() -> None:
        time.sleep(max(0.0, run.left()) + GRACE_S)
        report.fail(TimeoutError(f"the scenario overran its {spec['deadline_s']} s deadline"))
        report.emit()
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True, name="deadline").start()
    try:
        SCENARIOS[spec["scenario"]](run)
        if run.left() <= 0:
            report.fail(TimeoutError(f"deadline of {spec['deadline_s']} s passed"))
    except Exception as exc:
        report.fail(exc)
    report.emit()
    # The client's own threads (schedulers, its gRPC loop) need not end for the report.
    os._exit(0)


if __name__ == "__main__":
    main()
