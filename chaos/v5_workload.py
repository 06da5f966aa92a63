"""The load of a chaos run with RocketMQ 5's official Python client (``rocketq chaos run
--protocol v5``): the roles of :mod:`rocketq.chaos.workload`, its topic, group, keys and
history records, spoken over the brokers' apache.rocketmq.v2 gRPC endpoints.

``python -m rocketq.chaos.v5_workload producer|consumer --endpoints H1:P1;H2:P2 ...`` - the
runner starts each as a process of its own with the access point of every broker's v2
endpoint joined by ``;`` (the client fails over between them). The client's generated
protobuf modules and rocketq's ``apache.rocketmq.v2`` modules cannot share a process, so
this module imports only the standard library, parts of rocketq that never reach the
broker, and ``rocketmq`` - that one inside :func:`main`, once the client's log directory
is set, so importing this module loads no client.

A producer runs :data:`~rocketq.chaos.workload.IN_FLIGHT` sender threads, each paced to its
share of ``--rate``, sending single messages (the v2 API has no batches) keyed
``<name>-<sequence>`` to the chaos topic with ``Producer.send``, which tries up to three
queues of its route. Each operation is logged before the call and after it: ``send_ok``
with the message id, the broker group and the queue offset of the receipt (a v2 send names
no queue, so ``queue`` is null); ``send_timeout`` when the client gave up waiting;
``send_failed`` otherwise.

A consumer runs :data:`RECEIVERS` threads on one ``SimpleConsumer`` of the chaos group:
each receives up to :data:`RECEIVE_BATCH` messages hidden for :data:`INVISIBLE_S`
seconds, logs each one as received, then acknowledges it. A message whose
acknowledgement is lost (its broker died, its group's leader changed) comes back after its
invisible time: at least once.

Every process stops on SIGTERM or SIGINT, at ``--deadline`` seconds after its start, and
when the process that started it is gone: a producer starts nothing new and lets its sends
in flight finish, a consumer acknowledges what it holds for at most :data:`STOP_GRACE_S`
seconds more; then the client shuts down. Against a cluster with auth on, each client
signs with the credentials of the runner's environment (``ROCKETQ_CREDENTIALS_FILE``).
The client logs to ``<--client-home>/logs/rocketmq_python/`` (it writes under ``~``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from rocketq.auth.credentials import load_credentials
from rocketq.chaos.history import HistoryWriter
from rocketq.chaos.workload import BODY_SIZE, CONSUMER_GROUP, IN_FLIGHT, TOPIC, Pacer

REQUEST_TIMEOUT_S: Final = 3  # the client's default; an attempt waits this long
RECEIVERS: Final = 4  # receive threads per consumer process
RECEIVE_BATCH: Final = 32  # messages per receive (the endpoint's most)
INVISIBLE_S: Final = 10  # an unacknowledged message comes back after this
AWAIT_S: Final = 2  # a receive's long poll
ERROR_PAUSE_S: Final = 0.2  # after a failed receive, before the next one
STOP_GRACE_S: Final = 5.0  # a stopping consumer still acknowledges what it holds this long
JOIN_S: Final = 20.0  # for the worker threads to end once stopping
DEFAULT_DEADLINE_S: Final = 3600.0
NOTE_EVERY_S: Final = 1.0  # a consumer's errors go to its log at most this often
WATCH_S: Final = 0.5  # how often the main thread looks at the signals and the deadline


def timeout_like(exc: BaseException) -> bool:
    """No answer in time: the client's own timeout, or gRPC's deadline."""
    name, text = type(exc).__name__.lower(), str(exc).lower()
    return (
        isinstance(exc, TimeoutError)
        or "timeout" in name
        or "deadline" in name
        or "deadline" in text
        or "timed out" in text
    )


def route_group(queue: object) -> str | None:
    """The broker group of the client's ``MessageQueue``, which prints as
    ``<broker>.<topic>.<queue id>``; None for anything else."""
    parts = str(queue).rsplit(".", 2)
    if len(parts) != 3 or not parts[0] or not parts[2].lstrip("-").isdigit():
        return None
    return parts[0]


def receipt_place(handle: str | None) -> tuple[str | None, int | None, int | None]:
    """(broker group, queue id, queue offset) of a receipt handle of rocketq's endpoint:
    the pop's ``POP_CK`` (``ckOffset popTime invisibleTime reviveQid retry brokerName
    queueId queueOffset``) and the CommitLog offset, as RocketMQ's ReceiptHandle. The handle
    is opaque to a client, so (None, None, None) when it does not read so."""
    parts = (handle or "").split(" ")
    if len(parts) < 8 or not parts[6].isdigit() or not parts[7].isdigit():
        return None, None, None
    return parts[5] or None, int(parts[6]), int(parts[7])


class V5Producer:
    """Sends keyed messages through ``producer`` (the client's ``Producer``, started) from
    ``in_flight`` threads until ``stop`` is set, logging every operation to ``history``.
    ``make_message(key, body)`` builds the client's ``Message`` for the chaos topic."""

    def __init__(
        self,
        name: str,
        history: HistoryWriter,
        producer: Any,
        make_message: Callable[[str, bytes], Any],
        *,
        rate: float,
        stop: threading.Event,
        in_flight: int = IN_FLIGHT,
    ) -> None:
        self.name = name
        self.history = history
        self.producer = producer
        self.make_message = make_message
        self.rate = rate
        self.stop = stop
        self.in_flight = in_flight
        self.body = (b"chaos-" * (BODY_SIZE // 6 + 1))[:BODY_SIZE]
        self._lock = threading.Lock()
        self._seq = 0
        self._op = 0

    def _next(self) -> tuple[int, str]:
        with self._lock:
            self._op += 1
            key = f"{self.name}-{self._seq}"
            self._seq += 1
            return self._op, key

    def send_one(self) -> bool:
        """One send, logged before and after; True when it was acknowledged."""
        op, key = self._next()
        msg = self.make_message(key, self.body)
        self.history.write("send", process=self.name, op=op, keys=[key], mode="single", shard=None)
        try:
            receipt = self.producer.send(msg)
        except Exception as exc:
            kind = "send_timeout" if timeout_like(exc) else "send_failed"
            error = f"{type(exc).__name__}: {exc}"[:300]
            self.history.write(kind, process=self.name, op=op, keys=[key], error=error)
            return False
        # A v2 send names no queue: the group's broker picks one, and says only the offset.
        self.history.write(
            "send_ok",
            process=self.name,
            op=op,
            keys=[key],
            msg_ids=[receipt.message_id],
            group=route_group(receipt.message_queue),
            queue=None,
            offset=receipt.offset,
        )
        return True

    def _sender(self, share: float) -> None:
        pacer = Pacer(self.rate * share)
        while not self.stop.is_set():
            self.send_one()
            delay = pacer.sent(1)
            if delay > 0:
                self.stop.wait(delay)

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(
                target=self._sender,
                args=(1.0 / self.in_flight,),
                name=f"{self.name}-sender-{i}",
                daemon=True,
            )
            for i in range(self.in_flight)
        ]
        for t in threads:
            t.start()
        return threads


class V5Consumer:
    """Receives from ``consumer`` (the client's ``SimpleConsumer``, started) on ``receivers``
    threads until ``stop`` is set: logs each message to ``history``, then acknowledges it."""

    def __init__(
        self,
        name: str,
        history: HistoryWriter,
        consumer: Any,
        *,
        stop: threading.Event,
        receivers: int = RECEIVERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.history = history
        self.consumer = consumer
        self.stop = stop
        self.receivers = receivers
        self.clock = clock
        self.stopped_at: float | None = None  # when ``stop`` was first seen
        self.acked = 0
        self.ack_errors = 0
        self.receive_errors = 0
        self._noted = 0.0

    def _note(self, what: str, exc: BaseException) -> None:
        """An error on stderr (the worker's log), at most one line a second."""
        now = self.clock()
        if now - self._noted >= NOTE_EVERY_S:
            self._noted = now
            print(f"{what} failed: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)

    def _late(self) -> bool:
        """Stopping and past the grace for acknowledging what was received."""
        if not self.stop.is_set():
            return False
        if self.stopped_at is None:
            self.stopped_at = self.clock()
        return self.clock() - self.stopped_at > STOP_GRACE_S

    def record(self, msg: Any) -> None:
        """Log one received message (before its acknowledgement)."""
        group, queue, offset = receipt_place(msg.receipt_handle)
        keys = sorted(msg.keys or ())
        attempt = msg.delivery_attempt or 1
        self.history.write(
            "receive",
            process=self.name,
            key=keys[0] if keys else None,
            msg_id=msg.message_id,
            group=group,
            queue=queue,
            offset=offset,
            reconsume=max(0, attempt - 1),
            shard=None,
        )

    def handle(self, msgs: Sequence[Any]) -> None:
        """Log each message, then acknowledge it; one whose acknowledgement fails comes back
        after its invisible time."""
        for msg in msgs:
            self.record(msg)
        for msg in msgs:
            if self._late():
                return
            try:
                self.consumer.ack(msg)
                self.acked += 1
            except Exception as exc:
                self.ack_errors += 1
                self._note("acknowledgement", exc)

    def _receiver(self) -> None:
        while not self.stop.is_set():
            try:
                msgs = self.consumer.receive(RECEIVE_BATCH, INVISIBLE_S)
            except Exception as exc:
                self.receive_errors += 1
                self._note("receive", exc)
                self.stop.wait(ERROR_PAUSE_S)
                continue
            self.handle(msgs or ())

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._receiver, name=f"{self.name}-receiver-{i}", daemon=True)
            for i in range(self.receivers)
        ]
        for t in threads:
            t.start()
        return threads


def watch(stop: threading.Event, deadline: float) -> None:
    """Return once ``stop`` is set (by a signal), the deadline passed or the parent that
    started this process is gone."""
    parent = os.getppid()
    while not stop.wait(WATCH_S):
        if time.monotonic() >= deadline or os.getppid() != parent:
            stop.set()


def join(threads: Sequence[threading.Thread], timeout: float = JOIN_S) -> None:
    until = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, until - time.monotonic()))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rocketq.chaos.v5_workload")
    sub = parser.add_subparsers(dest="role", required=True)
    for role in ("producer", "consumer"):
        p = sub.add_parser(role)
        p.add_argument("--name", required=True)
        p.add_argument(
            "--endpoints", required=True, help="the v2 endpoints, HOST:PORT joined by ';'"
        )
        p.add_argument("--history", required=True)
        p.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S)
        p.add_argument("--client-home", help="where the client writes logs/rocketmq_python/")
        if role == "producer":
            p.add_argument("--rate", type=float, default=200.0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    stop = threading.Event()
    started = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    args = _parser().parse_args(argv)
    if args.deadline <= 0 or (args.role == "producer" and args.rate <= 0):
        print("--deadline and --rate must be > 0", file=sys.stderr)
        return 2
    try:
        credentials = load_credentials()
    except ValueError as exc:
        print(f"credentials: {exc}", file=sys.stderr)
        return 2
    if args.client_home:
        # The client logs under ~ (expanded when it is imported): into the run instead.
        Path(args.client_home).mkdir(parents=True, exist_ok=True)
        os.environ["HOME"] = str(Path(args.client_home).absolute())
    import rocketmq

    ak, sk = (credentials.access_key, credentials.secret_key) if credentials else ("", "")
    config = rocketmq.ClientConfiguration(
        args.endpoints, rocketmq.Credentials(ak, sk), request_timeout=REQUEST_TIMEOUT_S
    )
    deadline = started + args.deadline
    with HistoryWriter(args.history) as history:
        if args.role == "producer":
            return _produce(rocketmq, config, args, history, stop, deadline)
        return _consume(rocketmq, config, args, history, stop, deadline)


def _produce(
    rocketmq: Any,
    config: Any,
    args: argparse.Namespace,
    history: HistoryWriter,
    stop: threading.Event,
    deadline: float,
) -> int:
    def make_message(key: str, body: bytes) -> Any:
        msg = rocketmq.Message()
        msg.topic = TOPIC
        msg.body = body
        msg.keys = key
        return msg

    producer = rocketmq.Producer(config, (TOPIC,))
    producer.startup()
    try:
        worker = V5Producer(args.name, history, producer, make_message, rate=args.rate, stop=stop)
        threads = worker.start()
        watch(stop, deadline)
        join(threads)
    finally:
        with contextlib.suppress(Exception):
            producer.shutdown()
    return 0


def _consume(
    rocketmq: Any,
    config: Any,
    args: argparse.Namespace,
    history: HistoryWriter,
    stop: threading.Event,
    deadline: float,
) -> int:
    consumer = rocketmq.SimpleConsumer(
        config, CONSUMER_GROUP, {TOPIC: rocketmq.FilterExpression("*")}, await_duration=AWAIT_S
    )
    consumer.startup()
    try:
        worker = V5Consumer(args.name, history, consumer, stop=stop)
        threads = worker.start()
        print('{"ready": "consumer"}', flush=True)
        watch(stop, deadline)
        join(threads)
        print(
            f"acknowledged {worker.acked}; {worker.ack_errors} acknowledgements and "
            f"{worker.receive_errors} receives failed",
            flush=True,
        )
    finally:
        with contextlib.suppress(Exception):
            consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
