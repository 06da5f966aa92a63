"""``rocketq chaos run --protocol v5``: the producers and consumers are RocketMQ 5's official
Python client (rocketmq-python-client) in processes of their own, given every broker's
apache.rocketmq.v2 endpoint. A short real run through ``ChaosRun`` kills Raft leaders under
that load and must keep the promises (nothing acknowledged lost, nothing unexpected, at
least once) and leave nothing behind; the v5 workload's records are checked against fakes
of the client, its module against loading the client or the broker's v2 modules into the
harness, and the options and the report for what they say of the protocol.

The official client's generated protobuf modules and rocketq's ``apache.rocketmq.v2``
modules cannot share a process: this file never imports ``rocketmq``, and the v5 workload
imports it only inside its ``main``, which runs in the workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rocketq.chaos.checker import check
from rocketq.chaos.history import ChaosError, HistoryWriter, read_history
from rocketq.chaos.report import render_markdown, run_protocol
from rocketq.chaos.runner import ChaosOptions
from rocketq.chaos.v5_workload import (
    STOP_GRACE_S,
    V5Consumer,
    V5Producer,
    receipt_place,
    route_group,
    timeout_like,
)
from rocketq.chaos.workers import V5_WORKLOAD_MODULE
from rocketq.cli.main import app
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


@dataclass
class FakeMessage:
    message_id: str
    keys: set[str]
    receipt_handle: str | None
    delivery_attempt: int | None = 1


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
            "producer-0",
            history,
            producer,
            lambda key, body: {"key": key, "body": body},
            rate=100.0,
            stop=threading.Event(),
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


@pytest.mark.parametrize(
    ("changes", "flag", "says"),
    [
        ({"protocol": "v6"}, "--protocol", "choose remoting or v5"),
        ({"protocol": "v5", "orderly": True}, "--orderly", "not with --protocol v5"),
        ({"protocol": "v5", "tls": True}, "--tls", "plaintext gRPC only"),
    ],
)
def test_options_the_v5_clients_cannot_run_name_their_flag(
    changes: dict[str, object], flag: str, says: str, tmp_path: Path
) -> None:
    opts = ChaosOptions(data_dir=tmp_path / "run", **changes)  # type: ignore[arg-type]
    with pytest.raises(ChaosError, match=f"^{flag}: .*{says}"):
        opts.validate()
    ChaosOptions(data_dir=tmp_path / "run", protocol="v5").validate()  # the rest is fine
    assert not (tmp_path / "run").exists()


def test_cli_refuses_orderly_v5_before_starting_anything(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["chaos", "run", "--protocol", "v5", "--orderly", "--data-dir", str(tmp_path / "x")],
    )
    assert result.exit_code == 2
    assert "--orderly: not with --protocol v5" in result.output
    assert not (tmp_path / "x").exists()


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
        interval=2.5,
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
