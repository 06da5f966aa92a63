"""Run in a child process by tests/grpc_v2: RocketMQ 5's official Python client
(rocketmq-python-client, import name ``rocketmq``), unmodified, against the endpoint given
on the command line. Its generated protos and rocketq's cannot share a process.

    python tests/grpc_v2/v5_client.py ENDPOINT TOPIC GROUP SCENARIO

prints one JSON line with what happened."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator

from rocketmq import (  # type: ignore[import-untyped]
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

# V5_TLS=1: the clients connect over TLS (the CA in GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
TLS = os.environ.get("V5_TLS") == "1"


def produce(config: ClientConfiguration, topic: str, bodies: list[str], **kind: str) -> list[str]:
    producer = Producer(config, (topic,), tls_enable=TLS)
    producer.startup()
    try:
        ids = []
        for body in bodies:
            msg = Message()
            msg.topic = topic
            msg.body = body.encode()
            msg.tag = "TagA"
            msg.keys = f"key-{body}"
            msg.add_property("origin", "v5")
            if "group" in kind:
                msg.message_group = kind["group"]
            if "delay_s" in kind:
                msg.delivery_timestamp = int(time.time()) + int(kind["delay_s"])
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


@contextlib.contextmanager
def simple_consumer(
    config: ClientConfiguration, topic: str, group: str, await_duration: int
) -> Iterator[SimpleConsumer]:
    """A started SimpleConsumer of every message of ``topic``, shut down at the end."""
    consumer = SimpleConsumer(
        config, group, {topic: FilterExpression("*")}, await_duration=await_duration,
        tls_enable=TLS,
    )  # fmt: skip
    consumer.startup()
    try:
        yield consumer
    finally:
        consumer.shutdown()


def steady(
    config: ClientConfiguration, topic: str, group: str, seconds: float
) -> dict[str, object]:
    """Send a message every 20 ms for ``seconds`` while receiving and acknowledging, then
    keep receiving until every sent message came or 40 s more passed. Each send that
    succeeded, failed, and each delivery is reported; the acknowledged count goes to the
    file V5_PROGRESS names as it grows (a test waits on it)."""
    progress = os.environ.get("V5_PROGRESS", "")
    sent: list[str] = []
    failed: list[str] = []
    got: list[tuple[str, int]] = []
    lock = threading.Lock()
    stop_sending = time.monotonic() + seconds
    producer = Producer(config, (topic,), tls_enable=TLS)
    producer.startup()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=1,
                              tls_enable=TLS)  # fmt: skip
    consumer.startup()

    def send_loop() -> None:
        i = 0
        while time.monotonic() < stop_sending:
            msg = Message()
            msg.topic, msg.body = topic, f"s-{i}".encode()
            try:
                producer.send(msg)
                with lock:
                    sent.append(f"s-{i}")
            except Exception:
                with lock:
                    failed.append(f"s-{i}")
            i += 1
            time.sleep(0.02)

    sender = threading.Thread(target=send_loop, daemon=True)
    sender.start()
    deadline = stop_sending + 40
    while time.monotonic() < deadline:
        with lock:
            done = not sender.is_alive() and set(sent) <= {b for b, _ in got}
        if done:
            break
        try:
            batch = consumer.receive(16, 10)
        except Exception:
            continue  # the broker is away: receive again
        for m in batch:
            with lock:
                got.append((m.body.decode(), m.delivery_attempt))
            with contextlib.suppress(Exception):
                consumer.ack(m)
        if progress:
            with open(progress, "w") as f:
                f.write(str(len(got)))
    sender.join(5)
    with contextlib.suppress(Exception):
        producer.shutdown()
    with contextlib.suppress(Exception):
        consumer.shutdown()
    return {"sent": sent, "failed": failed, "got": got}


def main() -> None:
    endpoint, topic, group, scenario = sys.argv[1:5]
    ak, sk = (sys.argv[5], sys.argv[6]) if len(sys.argv) > 6 else ("", "")
    config = ClientConfiguration(endpoint, Credentials(ak, sk), request_timeout=5)
    out: dict[str, object] = {}
    if scenario == "send_receive_ack":
        out["sent"] = produce(config, topic, ["v5-0", "v5-1", "v5-2"])
        with simple_consumer(config, topic, group, 3) as consumer:
            got: list[dict[str, object]] = []
            deadline = time.monotonic() + 30
            while len(got) < 3 and time.monotonic() < deadline:
                for m in consumer.receive(16, 15):
                    got.append(
                        {
                            "body": m.body.decode(),
                            "id": m.message_id,
                            "tag": m.tag,
                            "keys": list(m.keys),
                            "props": dict(m.properties),
                            "attempt": m.delivery_attempt,
                        }
                    )
                    consumer.ack(m)
            out["got"] = got
            out["after_ack"] = [m.body.decode() for m in consumer.receive(16, 15)]
    elif scenario == "redelivery":
        produce(config, topic, ["again"])
        with simple_consumer(config, topic, group, 3) as consumer:
            first: list[str] = []
            deadline = time.monotonic() + 30
            while not first and time.monotonic() < deadline:
                first = [m.body.decode() for m in consumer.receive(16, 2)]  # not acked
            second: list[tuple[str, int]] = []
            while not second and time.monotonic() < deadline:
                for m in consumer.receive(16, 15):
                    second.append((m.body.decode(), m.delivery_attempt))
                    consumer.change_invisible_duration(m, 30)
                    consumer.ack(m)
            out["first"], out["second"] = first, second
    elif scenario == "fifo_group":
        # A FIFO group: a queue gives its next messages only once those it gave are
        # acknowledged; what is not acknowledged comes back first, in order.
        produce(config, topic, [f"o-{i}" for i in range(5)], group="g1")

        def receive_some(consumer: SimpleConsumer, tries: int, invisible: int) -> list[Message]:
            for _ in range(tries):  # each receive polls one queue of the route
                got = consumer.receive(2, invisible)
                if got:
                    return list(got)
            return []

        with simple_consumer(config, topic, group, 1) as consumer:
            rounds: list[list[tuple[str, int]]] = []
            first = receive_some(consumer, 8, 3)  # not acknowledged: back after 3 s
            rounds.append([(m.body.decode(), m.delivery_attempt) for m in first])
            out["while_held"] = [m.body.decode() for m in receive_some(consumer, 2, 20)]
            deadline = time.monotonic() + 40
            while sum(len(r) for r in rounds) < 7 and time.monotonic() < deadline:
                batch = receive_some(consumer, 1, 20)
                if batch:
                    rounds.append([(m.body.decode(), m.delivery_attempt) for m in batch])
                    for m in batch:
                        consumer.ack(m)
            out["rounds"] = rounds
    elif scenario == "give_up":
        # Never acknowledged: delivered until the group's attempts run out (then the DLQ).
        kind = {"group": "g1"} if os.environ.get("V5_FIFO") == "1" else {}
        produce(config, topic, ["doomed", "after"] if kind else ["doomed"], **kind)
        with simple_consumer(config, topic, group, 1) as consumer:
            seen: list[tuple[str, int]] = []
            deadline = time.monotonic() + float(os.environ.get("V5_SECONDS", "12"))
            while time.monotonic() < deadline:
                for m in consumer.receive(1, 2):
                    seen.append((m.body.decode(), m.delivery_attempt))
                    if m.body != b"doomed":
                        consumer.ack(m)
            out["seen"] = seen
    elif scenario == "steady":
        out = steady(config, topic, group, float(os.environ.get("V5_SECONDS", "20")))
    elif scenario == "signed":
        # One send and one receive; what the endpoint says is reported, not raised.
        try:
            out["sent"] = produce(config, topic, ["signed"])
        except Exception as exc:
            out["send_error"] = f"{type(exc).__name__}: {exc}"
        consumer = SimpleConsumer(
            config, group, {topic: FilterExpression("*")}, await_duration=2, tls_enable=TLS
        )
        try:
            consumer.startup()
            got: list[str] = []
            deadline = time.monotonic() + 15  # each receive polls one queue of the route
            while not got and time.monotonic() < deadline:
                got = [m.body.decode() for m in consumer.receive(16, 15)]
            out["got"] = got
        except Exception as exc:
            out["receive_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(Exception):
                consumer.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
