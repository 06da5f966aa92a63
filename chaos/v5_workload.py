"""The load of a chaos run with RocketMQ 5's official Python client (``rocketq chaos run
--protocol v5``): the roles of :mod:`rocketq.chaos.workload`, its topics, groups, keys and
history records, spoken over the brokers' apache.rocketmq.v2 gRPC endpoints.

``python -m rocketq.chaos.v5_workload producer|consumer --endpoints H1:P1;H2:P2 ...`` - the
runner starts each as a process of its own with the access point of every broker's v2
endpoint joined by ``;`` (the client fails over between them). The client's generated
protobuf modules and rocketq's ``apache.rocketmq.v2`` modules cannot share a process, so
this module imports only the standard library, parts of rocketq that never reach the
broker, and ``rocketmq`` - that one inside :func:`main`, once the client's log directory
and TLS roots are set, so importing this module loads no client.

A producer runs :data:`~rocketq.chaos.workload.IN_FLIGHT` sender threads, each paced to its
share of ``--rate``, sending single messages (the v2 API has no batches) keyed
``<name>-<sequence>`` to the chaos topic with ``Producer.send``, which tries up to three
queues of its route. Each operation is logged before the call and after it: ``send_ok``
with the message id, the broker group and the queue offset of the receipt (a v2 send names
no queue, so ``queue`` is null); ``send_timeout`` when the client gave up waiting;
``send_failed`` otherwise. With ``--shards N`` half of the rate goes to the orderly topic
as FIFO messages: N shards ``<name>-s<i>``, each the message group of its messages (the
client hashes a group to one queue of its route, the broker keeps the group's order in
that queue), one thread per shard sending one message at a time, and a message not
acknowledged is sent again (same key, mode ``orderly``) until it is, as the remoting
workload's sharding-key sends are.

A consumer runs :data:`RECEIVERS` threads on one ``SimpleConsumer`` of the chaos group:
each receives up to :data:`RECEIVE_BATCH` messages hidden for :data:`INVISIBLE_S`
seconds, logs each one as received, then acknowledges it. A message whose
acknowledgement is lost (its broker died, its group's leader changed) comes back after its
invisible time: at least once. With ``--orderly`` a second ``SimpleConsumer`` of the
orderly group (a FIFO group, ``consume_message_orderly``, made so by the runner before the
consumers start) receives the orderly topic the same way: a FIFO group's receive gives a
queue's next messages only once those it gave are acknowledged or their invisible time
ended (then they come again, in order), so logging a batch in the order received and then
acknowledging it in that order logs each queue's messages in order. A received message's
message group is its ``shard``.

Every process stops on SIGTERM or SIGINT, at ``--deadline`` seconds after its start, and
when the process that started it is gone: a producer starts nothing new and lets its sends
in flight finish, a consumer acknowledges what it holds for at most :data:`STOP_GRACE_S`
seconds more; then the client shuts down. Against a cluster with auth on, each client
signs with the credentials of the runner's environment (``ROCKETQ_CREDENTIALS_FILE``);
with TLS on (``ROCKETQ_TLS``, as rocketq's own clients read it) each client connects over
TLS, verifying the endpoints against ``ROCKETQ_TLS_CA_FILE``, which the official client
takes through gRPC's ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (:func:`tls_of`). The client
logs to ``<--client-home>/logs/rocketmq_python/`` (it writes under ``~``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rocketq.auth.credentials import load_credentials
from rocketq.chaos.history import HistoryWriter
from rocketq.chaos.workload import (
    BODY_SIZE,
    CONSUMER_GROUP,
    IN_FLIGHT,
    ORDERLY_GROUP,
    ORDERLY_TOPIC,
    RETRY_PAUSE_S,
    TOPIC,
    Pacer,
    client_settings,
)

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
ORDERLY_SHARE: Final = 0.5  # of a producer's rate that goes to its shards, when it has some
# gRPC's roots for TLS: the official client verifies servers against them and takes no CA
# of its own.
GRPC_ROOTS_VARIABLE: Final = "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"


@dataclass(frozen=True)
class ClientTls:
    """How the workload's clients connect: ``enable`` is the client's ``tls_enable``;
    ``env`` what the process's environment needs before gRPC loads (the CA as gRPC's
    roots)."""

    enable: bool
    env: dict[str, str]


def tls_of(environ: Mapping[str, str] = os.environ) -> ClientTls:
    """The clients' TLS from the runner's environment, read as rocketq's own clients read
    it (:func:`rocketq.chaos.workload.client_settings`: ``ROCKETQ_TLS`` true, the CA in
    ``ROCKETQ_TLS_CA_FILE``). With TLS and a CA, gRPC's roots are that CA; with TLS and no
    CA, gRPC's own roots (or the environment's ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``)."""
    settings = client_settings(environ)
    if not settings.get("tls"):
        return ClientTls(False, {})
    ca = settings.get("tls_ca_file")
    return ClientTls(True, {GRPC_ROOTS_VARIABLE: str(ca)} if ca else {})


def shard_names(name: str, shards: int) -> list[str]:
    """The message groups of a producer's orderly sends, named as the remoting workload
    names its shards."""
    return [f"{name}-s{i}" for i in range(shards)]


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
    ``in_flight`` threads, and with ``shards`` FIFO messages from one thread per shard,
    until ``stop`` is set, logging every operation to ``history``. ``make_message(key,
    body, shard)`` builds the client's ``Message``: for the chaos topic when ``shard`` is
    None, else for the orderly topic with ``shard`` as its message group."""

    def __init__(
        self,
        name: str,
        history: HistoryWriter,
        producer: Any,
        make_message: Callable[[str, bytes, str | None], Any],
        *,
        rate: float,
        stop: threading.Event,
        in_flight: int = IN_FLIGHT,
        shards: Sequence[str] = (),
        retry_pause: float = RETRY_PAUSE_S,
    ) -> None:
        self.name = name
        self.history = history
        self.producer = producer
        self.make_message = make_message
        self.rate = rate
        self.stop = stop
        self.in_flight = in_flight
        self.shards = list(shards)
        self.retry_pause = retry_pause
        self.body = (b"chaos-" * (BODY_SIZE // 6 + 1))[:BODY_SIZE]
        self._lock = threading.Lock()
        self._seq = 0
        self._op = 0

    def _next_key(self) -> str:
        with self._lock:
            key = f"{self.name}-{self._seq}"
            self._seq += 1
            return key

    def _next_op(self) -> int:
        with self._lock:
            self._op += 1
            return self._op

    def send_one(self, shard: str | None = None) -> bool:
        """A new message (of ``shard``, when given) sent once; True when it was
        acknowledged."""
        return self.send(self._next_key(), shard)

    def send(self, key: str, shard: str | None = None) -> bool:
        """One send of the message ``key``, logged before and after; True when it was
        acknowledged."""
        op = self._next_op()
        msg = self.make_message(key, self.body, shard)
        mode = "single" if shard is None else "orderly"
        self.history.write("send", process=self.name, op=op, keys=[key], mode=mode, shard=shard)
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

    def send_orderly(self, shard: str) -> bool:
        """A new message of ``shard``, sent again (same key) after each failure until it is
        acknowledged, so the shard's next message never overtakes it; False when ``stop``
        came first (the message stays unacknowledged: indeterminate)."""
        key = self._next_key()
        while not self.send(key, shard):
            if self.stop.wait(self.retry_pause):
                return False
        return True

    def _sender(self, share: float) -> None:
        pacer = Pacer(self.rate * share)
        while not self.stop.is_set():
            self.send_one()
            delay = pacer.sent(1)
            if delay > 0:
                self.stop.wait(delay)

    def _orderly(self, shard: str, share: float) -> None:
        pacer = Pacer(self.rate * share)
        while not self.stop.is_set():
            if not self.send_orderly(shard):
                return
            delay = pacer.sent(1)
            if delay > 0:
                self.stop.wait(delay)

    def start(self) -> list[threading.Thread]:
        """The sender threads (``in_flight`` of them sharing the chaos topic's part of the
        rate, one per shard sharing :data:`ORDERLY_SHARE` of it), started."""
        single = 1.0 - ORDERLY_SHARE if self.shards else 1.0
        threads = [
            threading.Thread(
                target=self._sender,
                args=(single / self.in_flight,),
                name=f"{self.name}-sender-{i}",
                daemon=True,
            )
            for i in range(self.in_flight)
        ]
        threads += [
            threading.Thread(
                target=self._orderly,
                args=(shard, ORDERLY_SHARE / len(self.shards)),
                name=f"{self.name}-shard-{shard}",
                daemon=True,
            )
            for shard in self.shards
        ]
        for t in threads:
            t.start()
        return threads


class V5Consumer:
    """Receives from ``consumer`` (the client's ``SimpleConsumer``, started) on ``receivers``
    threads until ``stop`` is set: logs each message of a batch to ``history`` in the order
    received, then acknowledges them in that order (what a FIFO group's order needs: a
    queue gives nothing more until they are acknowledged). ``label`` names the threads."""

    def __init__(
        self,
        name: str,
        history: HistoryWriter,
        consumer: Any,
        *,
        stop: threading.Event,
        receivers: int = RECEIVERS,
        clock: Callable[[], float] = time.monotonic,
        label: str = "receiver",
    ) -> None:
        self.name = name
        self.history = history
        self.consumer = consumer
        self.stop = stop
        self.receivers = receivers
        self.label = label
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
        """Log one received message (before its acknowledgement); a FIFO message's group
        is its shard."""
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
            shard=msg.message_group or None,
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
            threading.Thread(
                target=self._receiver, name=f"{self.name}-{self.label}-{i}", daemon=True
            )
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
            p.add_argument(
                "--shards", type=int, default=0, help="FIFO message groups on the orderly topic"
            )
        else:
            p.add_argument(
                "--orderly", action="store_true", help="also consume the orderly topic (FIFO)"
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    stop = threading.Event()
    started = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    args = _parser().parse_args(argv)
    producer = args.role == "producer"
    if args.deadline <= 0 or (producer and (args.rate <= 0 or args.shards < 0)):
        print("--deadline and --rate must be > 0, --shards >= 0", file=sys.stderr)
        return 2
    try:
        credentials = load_credentials()
    except ValueError as exc:
        print(f"credentials: {exc}", file=sys.stderr)
        return 2
    tls = tls_of()
    missing = [path for path in tls.env.values() if not Path(path).is_file()]
    if missing:
        print(f"TLS: the CA file {missing[0]} does not exist", file=sys.stderr)
        return 2
    # gRPC reads its roots from the environment once it loads: before the client is imported.
    os.environ.update(tls.env)
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
        if producer:
            return _produce(rocketmq, config, tls.enable, args, history, stop, deadline)
        return _consume(rocketmq, config, tls.enable, args, history, stop, deadline)


def _produce(
    rocketmq: Any,
    config: Any,
    tls: bool,
    args: argparse.Namespace,
    history: HistoryWriter,
    stop: threading.Event,
    deadline: float,
) -> int:
    def make_message(key: str, body: bytes, shard: str | None) -> Any:
        msg = rocketmq.Message()
        msg.topic = TOPIC if shard is None else ORDERLY_TOPIC
        msg.body = body
        msg.keys = key
        if shard is not None:
            msg.message_group = shard  # FIFO: the group's messages keep their order
        return msg

    shards = shard_names(args.name, args.shards)
    topics = (TOPIC, ORDERLY_TOPIC) if shards else (TOPIC,)
    producer = rocketmq.Producer(config, topics, tls_enable=tls)
    producer.startup()
    try:
        worker = V5Producer(
            args.name, history, producer, make_message, rate=args.rate, stop=stop, shards=shards
        )
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
    tls: bool,
    args: argparse.Namespace,
    history: HistoryWriter,
    stop: threading.Event,
    deadline: float,
) -> int:
    subscriptions = [(CONSUMER_GROUP, TOPIC, "receiver")]
    if args.orderly:  # the runner made the orderly group a FIFO group before this started
        subscriptions.append((ORDERLY_GROUP, ORDERLY_TOPIC, "fifo"))
    consumers: list[Any] = []
    try:
        workers = []
        for group, topic, label in subscriptions:
            consumer = rocketmq.SimpleConsumer(
                config,
                group,
                {topic: rocketmq.FilterExpression("*")},
                await_duration=AWAIT_S,
                tls_enable=tls,
            )
            consumer.startup()
            consumers.append(consumer)
            workers.append(V5Consumer(args.name, history, consumer, stop=stop, label=label))
        threads = [t for worker in workers for t in worker.start()]
        print('{"ready": "consumer"}', flush=True)
        watch(stop, deadline)
        join(threads)
        for (group, _topic, _label), worker in zip(subscriptions, workers, strict=True):
            print(
                f"{group}: acknowledged {worker.acked}; {worker.ack_errors} acknowledgements "
                f"and {worker.receive_errors} receives failed",
                flush=True,
            )
    finally:
        for consumer in consumers:
            with contextlib.suppress(Exception):
                consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
