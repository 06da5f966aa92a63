"""``rocketq chaos run --protocol v5``: the producers and consumers are RocketMQ 5's official
Python client (rocketmq-python-client) in processes of their own, given every broker's
apache.rocketmq.v2 endpoint. Two short real runs through ``ChaosRun`` must keep the
promises (nothing acknowledged lost, nothing unexpected, at least once; with ``--orderly``
every shard received in send order) and leave nothing behind: one kills Raft leaders under
that load, the other runs it over TLS with FIFO messages and a FIFO group while consumers
are killed. The v5 workload's records are checked against fakes of the client (and its
``main`` against a fake ``rocketmq`` module: TLS from the runner's environment, FIFO
sends and the FIFO group's consumer), its module against loading the client or the
broker's v2 modules into the harness, and the options, the workers' arguments and the
report for what they say of the protocol.

The official client's generated protobuf modules and rocketq's ``apache.rocketmq.v2``
modules cannot share a process: this file never imports ``rocketmq``, and the v5 workload
imports it only inside its ``main``, which runs in the workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from rocketq.chaos.checker import broken_promises, check
from rocketq.chaos.history import ChaosError, HistoryWriter, read_history
from rocketq.chaos.report import render_markdown, run_protocol
from rocketq.chaos.runner import ORDERLY_SHARDS, ChaosOptions, ChaosRun
from rocketq.chaos.v5_workload import (
    GRPC_ROOTS_VARIABLE,
    STOP_GRACE_S,
    ClientTls,
    V5Consumer,
    V5Producer,
    receipt_place,
    route_group,
    shard_names,
    timeout_like,
    tls_of,
)
from rocketq.chaos.workers import V5_WORKLOAD_MODULE, worker_env
from rocketq.chaos.workload import CONSUMER_GROUP, ORDERLY_GROUP, ORDERLY_TOPIC, TOPIC
from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster
from tests.chaos.real_runs import FAST_RAFT, assert_promises_kept, check_again, run_to_end

# ---------------------------------------------------------------- fakes of the client


@dataclass
class FakeQueue:
    """Prints as the client's MessageQueue does."""

    broker: str
    topic: str = "ChaosTopic"
    queue_id: int = 0

    def __str__(self) -> str:
        return f"{self.broker}.{self.topic}.{self.queue_id}"


@dataclass
class FakeReceipt:
    message_id: str
    message_queue: FakeQueue
    offset: int


class FakeProducer:
    """Answers each send with the next outcome: a receipt, or an exception raised."""

    def __init__(self, outcomes: list[FakeReceipt | Exception]) -> None:
        self.outcomes = outcomes
        self.sent: list[dict[str, Any]] = []

    def send(self, msg: dict[str, Any]) -> FakeReceipt:
        self.sent.append(msg)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def as_dict(key: str, body: bytes, shard: str | None) -> dict[str, Any]:
    """A message for the fakes: what the workload's ``make_message`` was given."""
    return {"key": key, "body": body, "shard": shard}


@dataclass
class FakeMessage:
    message_id: str
    keys: set[str]
    receipt_handle: str | None
    delivery_attempt: int | None = 1
    message_group: str | None = None


@dataclass
class FakeConsumer:
    """Acknowledges every message but those of ``refuse`` (raises for them)."""

    refuse: set[str] = field(default_factory=set)
    acked: list[str] = field(default_factory=list)

    def ack(self, msg: FakeMessage) -> None:
        if msg.message_id in self.refuse:
            raise ConnectionError(f"the broker of {msg.message_id} is gone")
        self.acked.append(msg.message_id)


class DeadlineExceededError(Exception):
    """Named as gRPC's deadline would be, for timeout_like."""


def handle_of(broker: str, queue_id: int, offset: int) -> str:
    """A receipt handle as rocketq's endpoint writes it (POP_CK + the CommitLog offset)."""
    return f"{offset} 1700000000000 10000 3 0 {broker} {queue_id} {offset} 123456"


# ---------------------------------------------------------------- the records


def test_v5_producer_logs_each_send_before_and_after_as_the_checker_reads_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    producer = FakeProducer(
        [
            FakeReceipt("MSG0", FakeQueue("broker-a", queue_id=2), 41),
            DeadlineExceededError("Deadline Exceeded"),
            RuntimeError("HA_NOT_AVAILABLE: not the leader"),
            FakeReceipt("MSG3", FakeQueue("broker-b", queue_id=0), 7),
        ]
    )
    with HistoryWriter(path) as history:
        worker = V5Producer(
            "producer-0", history, producer, as_dict, rate=100.0, stop=threading.Event()
        )
        outcomes = [worker.send_one() for _ in range(4)]
        consumer = V5Consumer("consumer-0", history, FakeConsumer(), stop=threading.Event())
        consumer.handle(
            [
                FakeMessage("MSG0", {"producer-0-0"}, handle_of("broker-a", 2, 41)),
                FakeMessage("MSG3", {"producer-0-3"}, handle_of("broker-b", 0, 7)),
            ]
        )
    assert outcomes == [True, False, False, True]
    assert [m["key"] for m in producer.sent] == [f"producer-0-{i}" for i in range(4)]
    assert {m["shard"] for m in producer.sent} == {None}  # the chaos topic: no message group
    records = read_history(path)
    assert records.bad_lines == []
    types = [r["type"] for r in records.records]
    assert types == [
        "send", "send_ok", "send", "send_timeout", "send", "send_failed", "send", "send_ok",
        "receive", "receive",
    ]  # fmt: skip
    first_ok = records.records[1]
    assert first_ok["keys"] == ["producer-0-0"] and first_ok["msg_ids"] == ["MSG0"]
    assert (first_ok["group"], first_ok["queue"], first_ok["offset"]) == ("broker-a", None, 41)
    assert {r["mode"] for r in records.of_type("send")} == {"single"}
    assert {r["shard"] for r in [*records.of_type("send"), *records.of_type("receive")]} == {None}
    assert all(r["op"] == i + 1 for i, r in enumerate(records.of_type("send")))
    result = check(records)
    assert (result.sent, result.acked, result.received, result.lost) == (4, 2, 2, 0)
    assert result.indeterminate == 2 and result.unexpected == 0


def test_v5_consumer_logs_before_it_acknowledges_and_survives_a_failed_ack(
    tmp_path: Path,
) -> None:
    """A message whose acknowledgement fails is logged all the same (it comes back after
    its invisible time); its redelivery counts as a duplicate, not as two messages."""
    path = tmp_path / "history.jsonl"
    fake = FakeConsumer(refuse={"M1"})
    with HistoryWriter(path) as history:
        consumer = V5Consumer("consumer-1", history, fake, stop=threading.Event())
        consumer.handle(
            [
                FakeMessage("M0", {"p-0"}, handle_of("broker-a", 1, 10)),
                FakeMessage("M1", {"p-1"}, handle_of("broker-a", 1, 11)),
                FakeMessage("M2", {"p-2"}, "opaque", delivery_attempt=None),
            ]
        )
        fake.refuse.clear()
        consumer.handle([FakeMessage("M1", {"p-1"}, handle_of("broker-b", 3, 0), 2)])
    assert fake.acked == ["M0", "M2", "M1"]
    assert (consumer.acked, consumer.ack_errors) == (3, 1)
    receipts = list(read_history(path).of_type("receive"))
    assert [r["key"] for r in receipts] == ["p-0", "p-1", "p-2", "p-1"]
    placed = [(r["group"], r["queue"], r["offset"], r["reconsume"]) for r in receipts]
    assert placed == [
        ("broker-a", 1, 10, 0),
        ("broker-a", 1, 11, 0),
        (None, None, None, 0),  # a handle that does not read as the endpoint's
        ("broker-b", 3, 0, 1),  # delivered again: its second attempt
    ]
    result = check(read_history(path))
    assert (result.received, result.receipts, result.duplicated) == (3, 4, 1)


def test_a_stopping_consumer_acknowledges_only_within_its_grace(tmp_path: Path) -> None:
    now = [100.0]
    stop = threading.Event()
    fake = FakeConsumer()
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        consumer = V5Consumer("c", history, fake, stop=stop, clock=lambda: now[0])
        stop.set()
        consumer.handle([FakeMessage("A", {"k-a"}, None)])
        now[0] += STOP_GRACE_S + 1
        consumer.handle([FakeMessage("B", {"k-b"}, None)])
    assert fake.acked == ["A"]
    keys = [r["key"] for r in read_history(tmp_path / "history.jsonl").of_type("receive")]
    assert keys == ["k-a", "k-b"]  # logged all the same: received, not acknowledged


def test_receipts_routes_and_timeouts_read_as_the_client_and_endpoint_give_them() -> None:
    assert receipt_place(handle_of("broker-b", 3, 1234)) == ("broker-b", 3, 1234)
    assert receipt_place("") == receipt_place(None) == receipt_place("a b c") == (None,) * 3
    assert route_group(FakeQueue("broker-a", queue_id=3)) == "broker-a"
    assert route_group(FakeQueue("dc1.broker-a", queue_id=0)) == "dc1.broker-a"
    assert route_group("no queue") is None
    assert timeout_like(DeadlineExceededError("x"))
    assert timeout_like(TimeoutError())
    assert timeout_like(RuntimeError("StatusCode.DEADLINE_EXCEEDED"))
    assert not timeout_like(RuntimeError("StatusCode.UNAVAILABLE: connection refused"))


# ---------------------------------------------------------------- FIFO


def test_fifo_sends_carry_their_shard_and_are_sent_again_with_the_same_key_until_acked(
    tmp_path: Path,
) -> None:
    """A shard's message is sent again (same key, a new operation) after each failure, so
    the next one never overtakes it; each send says its shard and mode as the remoting
    workload's sharding-key sends do, and the shard is the message's group."""
    path = tmp_path / "history.jsonl"
    orderly = FakeQueue("broker-a", ORDERLY_TOPIC, 1)
    producer = FakeProducer(
        [
            RuntimeError("StatusCode.UNAVAILABLE: connection refused"),
            DeadlineExceededError("Deadline Exceeded"),
            FakeReceipt("M0", orderly, 5),
            FakeReceipt("M1", orderly, 6),
        ]
    )
    with HistoryWriter(path) as history:
        worker = V5Producer(
            "producer-0",
            history,
            producer,
            as_dict,
            rate=100.0,
            stop=threading.Event(),
            shards=["producer-0-s0"],
            retry_pause=0.0,
        )
        assert worker.send_orderly("producer-0-s0")
        assert worker.send_orderly("producer-0-s0")
        consumer = V5Consumer("consumer-0", history, FakeConsumer(), stop=threading.Event())
        consumer.handle(
            [
                FakeMessage(
                    "M0", {"producer-0-0"}, handle_of("broker-a", 1, 5), 1, "producer-0-s0"
                ),
                FakeMessage(
                    "M1", {"producer-0-1"}, handle_of("broker-a", 1, 6), 1, "producer-0-s0"
                ),
            ]
        )
    assert [(m["key"], m["shard"]) for m in producer.sent] == [
        ("producer-0-0", "producer-0-s0"),
        ("producer-0-0", "producer-0-s0"),
        ("producer-0-0", "producer-0-s0"),
        ("producer-0-1", "producer-0-s0"),
    ]
    history_read = read_history(path)
    sends = list(history_read.of_type("send"))
    assert [(r["op"], r["keys"], r["mode"], r["shard"]) for r in sends] == [
        (1, ["producer-0-0"], "orderly", "producer-0-s0"),
        (2, ["producer-0-0"], "orderly", "producer-0-s0"),
        (3, ["producer-0-0"], "orderly", "producer-0-s0"),
        (4, ["producer-0-1"], "orderly", "producer-0-s0"),
    ]
    outcomes = [r["type"] for r in history_read.records if r["type"] != "send"]
    assert outcomes == ["send_failed", "send_timeout", "send_ok", "send_ok", "receive", "receive"]
    assert {r["shard"] for r in history_read.of_type("receive")} == {"producer-0-s0"}
    result = check(history_read)
    assert (result.sent, result.acked, result.received, result.indeterminate) == (2, 2, 2, 0)
    assert result.order_violations == 0


def test_a_stopping_producer_leaves_its_unacknowledged_fifo_message_indeterminate(
    tmp_path: Path,
) -> None:
    stop = threading.Event()
    stop.set()
    producer = FakeProducer([RuntimeError("HA_NOT_AVAILABLE: not the leader")])
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        worker = V5Producer(
            "p", history, producer, as_dict, rate=1.0, stop=stop, shards=["p-s0"], retry_pause=60
        )
        assert not worker.send_orderly("p-s0")  # one attempt, then it sees the stop
    result = check(read_history(tmp_path / "history.jsonl"))
    assert (result.sent, result.acked, result.indeterminate, result.lost) == (1, 0, 1, 0)


def test_the_checker_holds_v5_fifo_receipts_to_their_shard_s_send_order(tmp_path: Path) -> None:
    """The v5 workload's records feed the checker's order promise as the remoting ones do:
    a shard's message received before the one sent ahead of it is a violation, which
    breaks the promise of an orderly run; other shards and unordered runs are not held."""
    path = tmp_path / "history.jsonl"
    queue = FakeQueue("broker-b", ORDERLY_TOPIC, 2)
    producer = FakeProducer([FakeReceipt(f"M{i}", queue, i) for i in range(4)])
    with HistoryWriter(path) as history:
        worker = V5Producer(
            "p", history, producer, as_dict, rate=1.0, stop=threading.Event(), shards=["p-s0"]
        )
        for shard in ("p-s0", "p-s0", "p-s1", "p-s1"):
            assert worker.send_orderly(shard)
        consumer = V5Consumer("c", history, FakeConsumer(), stop=threading.Event())
        consumer.handle(
            [
                FakeMessage("M1", {"p-1"}, handle_of("broker-b", 2, 1), 1, "p-s0"),
                FakeMessage("M0", {"p-0"}, handle_of("broker-b", 2, 0), 1, "p-s0"),
                FakeMessage("M2", {"p-2"}, handle_of("broker-b", 3, 2), 1, "p-s1"),
                FakeMessage("M3", {"p-3"}, handle_of("broker-b", 3, 3), 1, "p-s1"),
            ]
        )
    result = check(read_history(path))
    assert (result.acked, result.received, result.order_violations) == (4, 4, 1)
    broken = broken_promises(result, replication="raft", role="SYNC_MASTER", orderly=True)
    assert broken == [
        "1 order violations: orderly messages consumed out of send order within their shard"
    ]
    assert broken_promises(result, replication="raft", role="SYNC_MASTER", orderly=False) == []


class CountingProducer:
    """Acknowledges every send; sets ``stop`` once each of ``shards`` (None: the chaos
    topic) was sent ``each`` messages."""

    def __init__(self, stop: threading.Event, shards: list[str | None], each: int) -> None:
        self.stop = stop
        self.counts = dict.fromkeys(shards, 0)
        self.each = each
        self.sent: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def send(self, msg: dict[str, Any]) -> FakeReceipt:
        with self.lock:
            self.sent.append(msg)
            n = len(self.sent)
            self.counts[msg["shard"]] += 1
            if min(self.counts.values()) >= self.each:
                self.stop.set()
        topic = TOPIC if msg["shard"] is None else ORDERLY_TOPIC
        return FakeReceipt(f"M{n}", FakeQueue("broker-a", topic, 0), n)


def test_a_producer_with_shards_sends_each_shard_from_a_thread_of_its_own(tmp_path: Path) -> None:
    stop = threading.Event()
    shards = shard_names("producer-1", 2)
    assert shards == ["producer-1-s0", "producer-1-s1"]  # the remoting workload's names
    producer = CountingProducer(stop, [None, *shards], each=20)
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        worker = V5Producer(
            "producer-1", history, producer, as_dict, rate=1e6, stop=stop, in_flight=3,
            shards=shards,
        )  # fmt: skip
        threads = worker.start()
        assert sorted(t.name for t in threads) == [
            "producer-1-sender-0", "producer-1-sender-1", "producer-1-sender-2",
            "producer-1-shard-producer-1-s0", "producer-1-shard-producer-1-s1",
        ]  # fmt: skip
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
    history_read = read_history(tmp_path / "history.jsonl")
    per_shard: dict[str | None, list[int]] = defaultdict(list)
    for r in history_read.of_type("send"):
        assert r["mode"] == ("single" if r["shard"] is None else "orderly")
        per_shard[r["shard"]].append(int(r["keys"][0].rsplit("-", 1)[1]))
    assert set(per_shard) == {None, *shards}
    for shard in shards:  # one at a time, each after the one before it
        assert per_shard[shard] == sorted(per_shard[shard]) and len(per_shard[shard]) > 1
    result = check(history_read)
    assert result.acked == result.sent == len(producer.sent) and result.order_violations == 0


# ---------------------------------------------------------------- TLS


def test_tls_is_read_from_the_runner_s_environment_as_rocketq_s_clients_read_it() -> None:
    ca = "/run/cluster/tls/ca.pem"
    assert tls_of({}) == ClientTls(False, {})
    assert tls_of({"ROCKETQ_TLS": "false", "ROCKETQ_TLS_CA_FILE": ca}) == ClientTls(False, {})
    assert tls_of({"ROCKETQ_TLS": "true", "ROCKETQ_TLS_CA_FILE": ca}) == ClientTls(
        True, {GRPC_ROOTS_VARIABLE: ca}
    )
    assert tls_of({"ROCKETQ_TLS": "1"}) == ClientTls(True, {})  # gRPC's own roots
    assert GRPC_ROOTS_VARIABLE == "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"
    # The harness's own gRPC roots never reach a worker: the run's CA does, through the
    # cluster's client environment.
    cluster_env = {"ROCKETQ_TLS": "true", "ROCKETQ_TLS_CA_FILE": ca}
    base = {"PATH": "/bin", GRPC_ROOTS_VARIABLE: "/elsewhere/roots.pem"}
    assert worker_env(cluster_env, base=base) == {"PATH": "/bin", **cluster_env}


# A stand-in for the official client's package, put ahead of it on the worker's path: it
# notes what the workload made of it (and gRPC's roots when it was imported) in a file.
FAKE_CLIENT = """
import json, os, threading
LOG = os.environ["FAKE_CLIENT_LOG"]
_lock = threading.Lock()
def note(**what):
    with _lock, open(LOG, "a") as f:
        f.write(json.dumps(what) + "\\n")
note(event="import", roots=os.environ.get("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"))
class Credentials:
    def __init__(self, access_key, secret_key): pass
class ClientConfiguration:
    def __init__(self, endpoints, credentials, request_timeout=3):
        note(event="config", endpoints=endpoints)
class FilterExpression:
    def __init__(self, expression): pass
class Message:
    topic = body = keys = message_group = None
class Queue:
    def __init__(self, topic): self.topic = topic
    def __str__(self): return "broker-a." + self.topic + ".0"
class Receipt:
    def __init__(self, topic):
        self.message_id, self.message_queue, self.offset = "M", Queue(topic), 0
class Producer:
    def __init__(self, config, topics, tls_enable=False):
        note(event="producer", topics=list(topics), tls=tls_enable)
    def startup(self): pass
    def shutdown(self): pass
    def send(self, msg):
        note(event="send", topic=msg.topic, group=msg.message_group)
        return Receipt(msg.topic)
class SimpleConsumer:
    def __init__(self, config, group, subscriptions, await_duration=0, tls_enable=False):
        note(event="consumer", group=group, topics=list(subscriptions), tls=tls_enable)
        self.stop = threading.Event()
    def startup(self): pass
    def shutdown(self): self.stop.set()
    def receive(self, batch, invisible):
        self.stop.wait(0.1)  # a long poll that finds nothing
        return []
    def ack(self, msg): pass
"""


def _fake_worker(tmp_path: Path, role_args: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    """The v5 workload's ``main`` in a process of its own against the fake client, ended by
    its own ``--deadline``; -> what the fake noted."""
    fake = tmp_path / "fake"
    (fake / "rocketmq").mkdir(parents=True, exist_ok=True)
    (fake / "rocketmq" / "__init__.py").write_text(FAKE_CLIENT)
    log = tmp_path / f"{role_args[0]}-fake.jsonl"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETQ_", "GRPC_"))}
    args = [*role_args, "--endpoints", "127.0.0.1:1", "--history", str(tmp_path / "h.jsonl")]
    args += ["--deadline", "1", "--client-home", str(tmp_path / "home")]
    done = subprocess.run(
        [sys.executable, "-m", V5_WORKLOAD_MODULE, *args],
        env=base | {"PYTHONPATH": str(fake), "FAKE_CLIENT_LOG": str(log)} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_v5_worker_trusts_the_cluster_s_ca_and_sends_fifo_messages_in_shards(
    tmp_path: Path,
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    tls = {"ROCKETQ_TLS": "true", "ROCKETQ_TLS_CA_FILE": str(ca)}
    notes = _fake_worker(
        tmp_path, ["producer", "--name", "p", "--rate", "20", "--shards", "2"], tls
    )
    assert notes[0] == {"event": "import", "roots": str(ca)}  # set before gRPC could load
    assert {"event": "producer", "topics": [TOPIC, ORDERLY_TOPIC], "tls": True} in notes
    sends = [(n["topic"], n["group"]) for n in notes if n["event"] == "send"]
    assert set(sends) == {(TOPIC, None), (ORDERLY_TOPIC, "p-s0"), (ORDERLY_TOPIC, "p-s1")}
    history = read_history(tmp_path / "h.jsonl")
    shards = {r["shard"] for r in history.of_type("send") if r["mode"] == "orderly"}
    assert shards == {"p-s0", "p-s1"}
    notes = _fake_worker(tmp_path, ["consumer", "--name", "c", "--orderly"], tls)
    consumers = [(n["group"], n["topics"], n["tls"]) for n in notes if n["event"] == "consumer"]
    assert consumers == [(CONSUMER_GROUP, [TOPIC], True), (ORDERLY_GROUP, [ORDERLY_TOPIC], True)]


def test_a_plaintext_v5_worker_neither_enables_tls_nor_sets_grpc_roots(tmp_path: Path) -> None:
    notes = _fake_worker(tmp_path, ["producer", "--name", "p", "--rate", "20"], {})
    assert notes[0] == {"event": "import", "roots": None}
    assert {"event": "producer", "topics": [TOPIC], "tls": False} in notes
    assert {n["group"] for n in notes if n["event"] == "send"} == {None}
    notes = _fake_worker(tmp_path, ["consumer", "--name", "c"], {})
    assert [n["group"] for n in notes if n["event"] == "consumer"] == [CONSUMER_GROUP]


def test_a_v5_worker_whose_ca_is_missing_stops_before_loading_the_client(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETQ_", "GRPC_"))}
    env |= {"ROCKETQ_TLS": "true", "ROCKETQ_TLS_CA_FILE": str(tmp_path / "gone.pem")}
    args = ["producer", "--name", "p", "--endpoints", "127.0.0.1:1"]
    args += ["--history", str(tmp_path / "h.jsonl")]
    done = subprocess.run(
        [sys.executable, "-m", V5_WORKLOAD_MODULE, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"the CA file {tmp_path / 'gone.pem'} does not exist" in done.stderr
    assert not (tmp_path / "h.jsonl").exists()


def test_the_v5_workload_module_loads_neither_the_client_nor_the_v2_endpoint() -> None:
    """Importing the v5 workload (as the runner and the tests do) loads no ``rocketmq``, no
    broker module and no gRPC: the client's protobuf modules come only in its workers."""
    code = (
        "import sys, json, rocketq.chaos.v5_workload\n"
        "bad = [m for m in sys.modules if m == 'rocketmq' or m.startswith(('rocketmq.', "
        "'rocketq.broker', 'grpc'))]\n"
        "print(json.dumps(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


# ---------------------------------------------------------------- options and report


def test_v5_runs_with_tls_and_orderly_and_an_unknown_protocol_is_named(tmp_path: Path) -> None:
    with pytest.raises(ChaosError, match=r"^--protocol: 'v6': choose remoting or v5"):
        ChaosOptions(data_dir=tmp_path / "run", protocol="v6").validate()
    for tls, orderly in ((True, False), (False, True), (True, True)):
        ChaosOptions(data_dir=tmp_path / "run", protocol="v5", tls=tls, orderly=orderly).validate()
    assert not (tmp_path / "run").exists()


def test_cli_gives_v5_its_tls_and_orderly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rocketq.chaos.runner as runner

    seen: list[ChaosOptions] = []

    class Recorder:
        def __init__(self, opts: ChaosOptions, echo: object = None) -> None:
            seen.append(opts)
            raise ChaosError("recorded")

    monkeypatch.setattr(runner, "ChaosRun", Recorder)
    flags = ["--protocol", "v5", "--tls", "--orderly", "--data-dir", str(tmp_path / "x")]
    result = CliRunner().invoke(app, ["chaos", "run", *flags])
    assert result.exit_code == 2 and "recorded" in result.output
    assert (seen[-1].protocol, seen[-1].tls, seen[-1].orderly) == ("v5", True, True)
    assert not (tmp_path / "x").exists()


def _started_v5_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **changes: bool
) -> tuple[ChaosRun, list[str]]:
    """The workers ``_start_v5_workload`` adds for three brokers (none is started); -> the
    run and the brokers' endpoints."""
    run = ChaosRun(ChaosOptions(data_dir=tmp_path / "run", protocol="v5", **changes))
    monkeypatch.setattr(run.workers, "start", lambda name: None)
    brokers = [
        SimpleNamespace(name=f"broker-a-{i}", host="127.0.0.1", grpc_port=40100 + i)
        for i in range(3)
    ]
    run._start_v5_workload(cast(LocalCluster, SimpleNamespace(brokers=brokers)))
    return run, [f"127.0.0.1:{40100 + i}" for i in range(3)]


def _arg(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_v5_workers_get_shards_the_fifo_consumer_and_over_tls_one_endpoint_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, endpoints = _started_v5_workers(tmp_path, monkeypatch, tls=True, orderly=True)
    workers = run.workers.workers
    assert list(workers) == ["consumer-0", "consumer-1", "producer-0", "producer-1"]
    for name in run.producers:
        assert _arg(workers[name].argv, "--shards") == str(ORDERLY_SHARDS)
        assert "--orderly" not in workers[name].argv
    for name in run.consumers:
        assert "--orderly" in workers[name].argv and workers[name].ready_line
    # Over TLS each worker's access point is one endpoint, the workers spread over them.
    chosen = [_arg(w.argv, "--endpoints") for w in workers.values()]
    assert chosen == [endpoints[0], endpoints[1], endpoints[2], endpoints[0]]

    plain, endpoints = _started_v5_workers(tmp_path / "plain", monkeypatch)
    for w in plain.workers.workers.values():
        assert _arg(w.argv, "--endpoints") == ";".join(endpoints)
        assert "--orderly" not in w.argv and "--shards" not in w.argv


def _history(path: Path, config: dict[str, object] | None) -> None:
    with HistoryWriter(path) as history:
        if config is not None:
            history.write("run", config=config)
        history.write("send", process="p", op=1, keys=["p-0"], mode="single", shard=None)
        history.write(
            "send_ok", process="p", op=1, keys=["p-0"], msg_ids=["M"], group="broker-a",
            queue=None, offset=0,
        )  # fmt: skip
        history.write("receive", process="c", key="p-0", msg_id="M", group="broker-a")
        history.write("phase", phase="done")


@pytest.mark.parametrize(
    ("config", "protocol", "said"),
    [
        ({"replication": "raft", "protocol": "v5"}, "v5", "RocketMQ 5's official Python"),
        ({"replication": "raft", "protocol": "remoting"}, "remoting", "rocketq's SDK"),
        ({"replication": "raft"}, "remoting", "rocketq's SDK"),  # before the option
        (None, None, None),
    ],
)
def test_the_report_names_the_clients_of_the_run(
    config: dict[str, object] | None, protocol: str | None, said: str | None, tmp_path: Path
) -> None:
    path = tmp_path / "history.jsonl"
    _history(path, config)
    history = read_history(path)
    assert run_protocol(history) == protocol
    text = render_markdown(check(history), broken=[], protocol=run_protocol(history))
    if said is None:
        assert "Clients:" not in text
    else:
        assert f"Clients: {said}" in text
    result = CliRunner().invoke(app, ["chaos", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["protocol"] == protocol


# ---------------------------------------------------------------- a real run


@pytest.mark.timeout(420)
def test_raft_leader_kills_under_v5_clients_keep_the_promises(tmp_path: Path) -> None:
    """Two Raft groups, their leaders killed one at a time for 30 s while two v5 producers
    and two v5 consumers run: every acknowledged message is received (at least once),
    nothing unexpected arrives, both groups are sent to and received from through the
    endpoints' routes, and every process is stopped by pid."""
    opts = ChaosOptions(
        replication="raft",
        groups=2,
        nameservers=1,
        faults=("kill-master",),
        # A killed leader's restart takes 4-8 s on a busy machine: a short gap between
        # faults keeps three of them inside the 30 s.
        interval=1.0,
        fault_duration=2.5,
        duration=30,
        seed=5,
        rate=100,
        data_dir=tmp_path / "v5",
        settings=FAST_RAFT,
        protocol="v5",
    )
    run, outcome = run_to_end(opts)
    assert_promises_kept(outcome)
    result = outcome.result
    print(json.dumps({"failovers": [(f.target, f.ms) for f in result.failovers]}))
    assert run.faults_made >= 3 and result.faults.get("kill-master", 0) == run.faults_made
    assert run.cluster is not None and all(b.grpc_port for b in run.cluster.brokers)
    assert {w.argv[2] for w in run.workers.workers.values()} == {V5_WORKLOAD_MODULE}
    history = read_history(run.history_path)
    assert run_protocol(history) == "v5"
    groups = {b.broker_name for b in run.cluster.brokers}
    assert {r["group"] for r in history.of_type("send_ok")} == groups
    assert {r["group"] for r in history.of_type("receive")} == groups
    for name in run.consumers + run.producers:
        client_log = run.data_dir / "logs" / f"{name}-client" / "logs" / "rocketmq_python"
        assert (client_log / "rocketmq_client.log").is_file(), name
    doc, printed = check_again(run.history_path)
    assert doc["protocol"] == "v5" and doc["lost"] == 0
    assert "Clients: RocketMQ 5's official Python client" in printed


@pytest.mark.timeout(420)
def test_fifo_over_tls_under_consumer_kills_keeps_every_promise_and_the_order(
    tmp_path: Path,
) -> None:
    """``--protocol v5 --tls --orderly``: every v2 endpoint serves TLS only and every client
    connects over it, trusting the run's CA; the producers send FIFO messages in two shards
    each besides the chaos topic's, and the consumers receive the orderly topic as a FIFO
    group while they are killed one at a time: nothing acknowledged is lost, nothing
    unexpected arrives, and every shard is received in send order (the batch a killed
    consumer held comes back, in order, after its invisible time)."""
    opts = ChaosOptions(
        replication="raft",
        groups=2,
        nameservers=1,
        faults=("kill-consumer",),
        interval=2.5,
        fault_duration=2.5,
        duration=20,
        seed=11,
        rate=100,
        data_dir=tmp_path / "fifo-tls",
        settings=FAST_RAFT,
        protocol="v5",
        tls=True,
        orderly=True,
    )
    run, outcome = run_to_end(opts)
    assert_promises_kept(outcome)  # with --orderly: no order violation either
    result = outcome.result
    assert result.order_violations == 0
    # A kill every 2.5 s once the consumers run; a slow machine starts them late, so at
    # least two kills (each batch a killed consumer held then comes back, in order).
    assert run.faults_made >= 2 and result.faults.get("kill-consumer", 0) == run.faults_made
    # TLS: the cluster's CA through the workers' environment, one endpoint per worker.
    assert run.cluster is not None and run.cluster.certs is not None
    assert run.workers.env is not None and run.workers.env["ROCKETQ_TLS"] == "true"
    assert run.workers.env["ROCKETQ_TLS_CA_FILE"] == str(run.cluster.certs.ca_file)
    for worker in run.workers.workers.values():
        assert ";" not in (_arg(worker.argv, "--endpoints") or ";")
    # FIFO: every shard sent in orderly sends, acknowledged and received with its shard.
    history = read_history(run.history_path)
    shard_of = {r["keys"][0]: r["shard"] for r in history.of_type("send") if r["mode"] == "orderly"}
    shards = {f"{p}-s{i}" for p in run.producers for i in range(ORDERLY_SHARDS)}
    assert set(shard_of.values()) == shards
    acked = [r["keys"][0] for r in history.of_type("send_ok") if r["keys"][0] in shard_of]
    assert {shard_of[k] for k in acked} == shards and len(acked) > 100
    orderly_receipts = [r for r in history.of_type("receive") if r["key"] in shard_of]
    assert all(r["shard"] == shard_of[r["key"]] for r in orderly_receipts)
    assert {r["key"] for r in orderly_receipts} >= set(acked)
    doc, printed = check_again(run.history_path)
    assert doc["security"] == {"auth": False, "tls": True} and doc["order_violations"] == 0
    assert doc["protocol"] == "v5" and "TLS on" in printed
