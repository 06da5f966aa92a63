"""The chaos checker over hand-made histories: every anomaly counted exactly (lost,
duplicated, unexpected, indeterminate, order violations), failover percentiles per fault
kind, availability, partial and damaged histories, and the broken promises of each mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocketq.chaos.checker import (
    CheckResult,
    FailoverStats,
    broken_promises,
    check,
    nearest_rank,
    promises_no_loss,
)
from rocketq.chaos.history import History, HistoryWriter, read_history

T0 = 1_700_000_000.0


class Run:
    """A history built by hand, in file order, each record at ``T0 + at`` seconds."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.add("run", 0.0, config={"replication": "raft"})

    def add(self, type_: str, at: float, **fields: Any) -> Run:
        self.records.append({"t": T0 + at, "type": type_, **fields})
        return self

    def send(self, at: float, *keys: str, mode: str = "single", shard: str | None = None) -> Run:
        return self.add("send", at, process="p1", op=0, keys=list(keys), mode=mode, shard=shard)

    def ok(self, at: float, *keys: str, group: str = "g1") -> Run:
        return self.add(
            "send_ok",
            at,
            process="p1",
            op=0,
            keys=list(keys),
            msg_ids=[],
            group=group,
            queue=0,
            offset=0,
        )

    def sent_ok(self, at: float, *keys: str, group: str = "g1", **send: Any) -> Run:
        """A send and its SEND_OK at the same time."""
        return self.send(at, *keys, **send).ok(at, *keys, group=group)

    def receive(self, at: float, key: str, group: str = "g1") -> Run:
        return self.add(
            "receive",
            at,
            process="c1",
            key=key,
            msg_id="m",
            group=group,
            queue=0,
            offset=0,
            reconsume=0,
            shard=None,
        )

    def fault(self, at: float, kind: str, target: str, group: str | None) -> Run:
        return self.add("fault_start", at, fault=kind, target=target, group=group)

    def heal(self, at: float, kind: str, target: str, group: str | None) -> Run:
        return self.add("fault_end", at, fault=kind, target=target, group=group)

    def phase(self, at: float, *phases: str) -> Run:
        for phase in phases:
            self.add("phase", at, phase=phase)
        return self

    def finish(self, at: float) -> Run:
        return self.phase(at, "faults_stopped", "recovered", "producers_stopped", "drained", "done")

    def history(self) -> History:
        return History(records=list(self.records))

    def check(self) -> CheckResult:
        return check(self.history(), "history.jsonl")

    def write(self, path: Path) -> Path:
        """The records through the writer every process of a run uses."""
        with HistoryWriter(path) as writer:
            for record in self.records:
                fields = {k: v for k, v in record.items() if k != "type"}
                writer.write(record["type"], **fields)
        return path


def clean_run() -> Run:
    run = Run()
    for i in range(4):
        run.sent_ok(0.5 + i, f"p1-{i}")
    for i in range(4):
        run.receive(0.6 + i, f"p1-{i}")
    return run.finish(5.0)


def test_clean_history_has_no_anomaly() -> None:
    result = clean_run().check()
    assert (result.sent, result.acked, result.received, result.receipts) == (4, 4, 4, 4)
    assert result.lost == result.duplicated == result.unexpected == 0
    assert result.indeterminate == result.indeterminate_received == result.order_violations == 0
    assert result.duplicate_rate == 0.0 and result.redeliveries == 0
    assert result.faults == {} and result.failover_ms == {} and result.loss_window is None
    assert not result.partial and result.partial_reason is None and result.bad_lines == 0
    assert result.history == "history.jsonl"
    for replication, role in (("raft", ""), ("ha", "SYNC_MASTER"), ("none", "ASYNC_MASTER")):
        assert broken_promises(result, replication=replication, role=role, orderly=True) == []


def test_empty_history() -> None:
    result = check(History())
    assert (result.sent, result.acked, result.window_s, result.availability) == (0, 0, 0.0, 0.0)
    assert result.ok_seconds == 0.0 and result.partial
    assert result.partial_reason is not None and "no phase recorded" in result.partial_reason


def test_lost_message_and_its_loss_window() -> None:
    run = Run()
    run.sent_ok(1.0, "p1-0").sent_ok(2.0, "p1-1").sent_ok(2.25, "p1-2").sent_ok(3.0, "p1-3")
    run.receive(3.5, "p1-0").receive(3.6, "p1-3")
    result = run.finish(4.0).check()
    assert result.lost == 2 and result.lost_keys == ["p1-1", "p1-2"]
    assert result.loss_window is not None
    assert result.loss_window.count == 2
    assert (result.loss_window.first_t, result.loss_window.last_t) == (T0 + 2.0, T0 + 2.25)
    assert result.loss_window.ms == 250
    assert result.indeterminate == 0


def test_a_receipt_anywhere_in_the_history_is_not_lost() -> None:
    """A message received before its SEND_OK was logged (the consumer was faster than the
    producer's answer) is received, not lost."""
    run = Run().send(1.0, "p1-0").receive(1.1, "p1-0").ok(1.2, "p1-0")
    result = run.finish(2.0).check()
    assert (result.lost, result.received, result.unexpected) == (0, 1, 0)


def test_duplicates_and_their_rate() -> None:
    run = Run()
    for i in range(4):
        run.sent_ok(1.0, f"p1-{i}")
    for key in ("p1-0", "p1-1", "p1-1", "p1-2", "p1-3", "p1-1", "p1-3"):
        run.receive(2.0, key)
    result = run.finish(3.0).check()
    assert (result.received, result.receipts) == (4, 7)
    assert result.duplicated == 2
    assert result.duplicate_rate == pytest.approx(0.5)
    assert result.redeliveries == 3
    assert result.lost == 0


def test_unexpected_receipt() -> None:
    run = Run().sent_ok(1.0, "p1-0").receive(1.5, "p1-0").receive(1.6, "ghost-7")
    result = run.finish(2.0).check()
    assert (result.unexpected, result.unexpected_keys, result.received) == (1, ["ghost-7"], 2)
    assert result.lost == 0


def test_indeterminate_sends_are_never_lost() -> None:
    run = Run()
    run.sent_ok(1.0, "p1-0")
    run.send(1.1, "p1-1").add("send_failed", 1.2, process="p1", op=1, keys=["p1-1"], error="x")
    run.send(1.3, "p1-2").add("send_timeout", 4.3, process="p1", op=2, keys=["p1-2"], error="t")
    run.send(1.4, "p1-3")  # the producer died before an answer
    run.receive(2.0, "p1-0").receive(5.0, "p1-2")  # the timed-out one was stored after all
    result = run.finish(6.0).check()
    assert (result.sent, result.acked) == (4, 1)
    assert result.indeterminate == 3
    assert result.indeterminate_received == 1
    assert result.lost == 0 and result.unexpected == 0


def test_retried_send_counts_once() -> None:
    run = Run().send(1.0, "p1-0", mode="orderly", shard="s")
    run.add("send_timeout", 1.5, process="p1", op=0, keys=["p1-0"], error="t")
    run.sent_ok(2.0, "p1-0", mode="orderly", shard="s").receive(2.1, "p1-0")
    result = run.finish(3.0).check()
    assert (result.sent, result.acked, result.indeterminate, result.lost) == (1, 1, 0, 0)


def orderly_run(send_order: list[str], receive_order: list[str], *, lost: str = "") -> Run:
    run = Run()
    for i, key in enumerate(send_order):
        run.sent_ok(1.0 + i / 10, key, mode="orderly", shard="A")
    for i, key in enumerate(receive_order):
        run.receive(5.0 + i / 10, key)
    return run


@pytest.mark.parametrize(
    ("receive_order", "violations"),
    [
        (["a", "b", "c", "d", "e"], 0),
        (["b", "a", "c", "e", "d"], 2),
        (["e", "d", "c", "b", "a"], 4),
        (["a", "c", "b", "d", "e"], 1),
    ],
)
def test_order_violations_count_adjacent_inversions(
    receive_order: list[str], violations: int
) -> None:
    result = orderly_run(["a", "b", "c", "d", "e"], receive_order).finish(9.0).check()
    assert result.order_violations == violations
    assert result.lost == 0


def test_order_violations_skip_lost_and_unacked_keys() -> None:
    """b is lost and x never acked: the pairs are (a, c) and (c, d); only (a, c) inverts."""
    run = orderly_run(["a", "b", "c"], [])
    run.send(1.5, "x", mode="orderly", shard="A")
    run.sent_ok(1.6, "d", mode="orderly", shard="A")
    run.receive(5.0, "x").receive(5.1, "c").receive(5.2, "a").receive(5.3, "d")
    result = run.finish(9.0).check()
    assert result.lost == 1 and result.lost_keys == ["b"]
    assert result.indeterminate == 1 and result.indeterminate_received == 1
    assert result.order_violations == 1


def test_order_is_per_shard_and_only_for_orderly_sends() -> None:
    run = Run()
    run.sent_ok(1.0, "a1", mode="orderly", shard="A").sent_ok(1.1, "b1", mode="orderly", shard="B")
    run.sent_ok(1.2, "a2", mode="orderly", shard="A").sent_ok(1.3, "b2", mode="orderly", shard="B")
    run.sent_ok(1.4, "s1").sent_ok(1.5, "s2")  # not orderly: their order is free
    for key in ("s2", "b1", "a2", "s1", "b2", "a1"):
        run.receive(2.0, key)
    result = run.finish(3.0).check()
    assert result.order_violations == 1  # A: a2 before a1; B in order


def test_order_uses_file_order_not_t() -> None:
    """Two consumers' clocks may tie or disagree: the file order of the receipts decides."""
    run = orderly_run(["a", "b"], [])
    run.receive(5.0, "a").receive(4.0, "b")  # b logged later but with an earlier t
    assert run.finish(9.0).check().order_violations == 0


def test_failover_per_kind() -> None:
    run = Run()
    # kill_master on g1: answered after 100, 500 and 1000 ms (a g2 ack in between is no answer).
    for start, answer in ((10.0, 10.1), (20.0, 20.5), (30.0, 31.0)):
        run.fault(start, "kill_master", "broker-g1-0", "g1")
        run.sent_ok(start + 0.05, f"k{start}", group="g2")
        run.heal(start + 2, "kill_master", "broker-g1-0", "g1")
        run.sent_ok(answer, f"k{answer}", group="g1")
    # a nameserver fault (group null) is answered by any group's next ack
    run.fault(40.0, "kill_nameserver", "namesrv-0", None).sent_ok(40.25, "n", group="g2")
    # pause of g2 is never followed by a g2 ack
    run.fault(50.0, "pause_broker", "broker-g2-0", "g2").sent_ok(51.0, "late", group="g1")
    result = run.finish(60.0).check()
    assert result.faults == {"kill_master": 3, "kill_nameserver": 1, "pause_broker": 1}
    assert result.failover_ms["kill_master"] == FailoverStats(p50=500, p99=1000, max=1000, count=3)
    assert result.failover_ms["kill_nameserver"] == FailoverStats(250, 250, 250, 1)
    assert result.failover_ms["pause_broker"] == FailoverStats(None, None, None, 0)
    assert result.failover_missing == {"kill_master": 0, "kill_nameserver": 0, "pause_broker": 1}
    measured = [(f.kind, f.group, f.ms) for f in result.failovers]
    assert measured == [
        ("kill_master", "g1", pytest.approx(100)),
        ("kill_master", "g1", pytest.approx(500)),
        ("kill_master", "g1", pytest.approx(1000)),
        ("kill_nameserver", None, pytest.approx(250)),
        ("pause_broker", "g2", None),
    ]


def test_one_ack_answers_every_pending_fault_of_its_group() -> None:
    run = Run().fault(1.0, "kill_master", "b0", "g1").fault(1.5, "partition", "b0", "g1")
    run.sent_ok(2.0, "k", group="g1")
    result = run.finish(3.0).check()
    assert result.failover_ms["kill_master"].max == 1000
    assert result.failover_ms["partition"].max == 500


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (nearest_rank(values, 50), nearest_rank(values, 99), nearest_rank(values, 100)) == (
        50.0,
        99.0,
        100.0,
    )
    assert nearest_rank([7.0], 50) == nearest_rank([7.0], 99) == 7.0
    assert FailoverStats.of([3.4, 1.6, 2.5]) == FailoverStats(p50=2, p99=3, max=3, count=3)


def test_availability_and_ok_seconds() -> None:
    """A 4 s window (run at 0, producers stopped at 4): 4 acked keys in it (1 msg/s), acks
    in seconds 0, 1 and 3 (75 %); an ack after the window is acked but not in the figure."""
    run = Run()
    run.sent_ok(0.5, "a", "b").sent_ok(1.2, "c")
    run.send(2.5, "d").add("send_failed", 2.6, process="p1", op=0, keys=["d"], error="busy")
    run.sent_ok(3.9, "e").phase(4.0, "faults_stopped", "recovered", "producers_stopped")
    run.ok(4.5, "f").phase(6.0, "drained", "done")
    result = run.check()
    assert result.window_s == pytest.approx(4.0)
    assert result.acked == 5
    assert result.availability == pytest.approx(1.0)
    assert result.ok_seconds == pytest.approx(0.75)
    assert (result.start_t, result.end_t) == (T0, T0 + 4.0)


def test_availability_window_ends_at_the_last_outcome_without_producers_stopped() -> None:
    run = Run().sent_ok(0.5, "a").sent_ok(0.8, "b")
    run.send(1.5, "c").add("send_timeout", 2.0, process="p1", op=0, keys=["c"], error="t")
    result = run.check()
    assert result.window_s == pytest.approx(2.0)
    assert result.availability == pytest.approx(1.0)
    assert result.ok_seconds == pytest.approx(0.5)  # both acks in second 0 of 2
    assert result.partial


def test_window_starts_at_the_first_record_without_a_run_record() -> None:
    run = Run()
    run.records.pop(0)
    run.sent_ok(2.0, "a").sent_ok(3.0, "b").phase(4.0, "producers_stopped")
    result = run.check()
    assert result.start_t == T0 + 2.0 and result.window_s == pytest.approx(2.0)
    assert result.availability == pytest.approx(1.0) and result.ok_seconds == pytest.approx(1.0)


def test_partial_history_says_how_far_it_got() -> None:
    run = clean_run()
    run.records = [r for r in run.records if r.get("phase") not in ("drained", "done")]
    run.records.append({"t": T0 + 9, "type": "send_ok", "keys": ["late"], "group": "g1"})
    result = run.check()
    assert result.partial
    assert result.partial_reason is not None
    assert "'producers_stopped'" in result.partial_reason
    assert "not received yet" in result.partial_reason
    assert result.lost == 1  # not received yet, as the reason says
    no_phase = Run().sent_ok(1.0, "a").check()
    assert no_phase.partial and no_phase.partial_reason is not None
    assert "no phase recorded" in no_phase.partial_reason


def test_history_read_from_a_file_with_a_torn_last_line(tmp_path: Path) -> None:
    path = clean_run().write(tmp_path / "history.jsonl")
    with path.open("a", encoding="utf-8") as f:
        f.write('{"t": 1700000009.0, "type": "rece')
    history = read_history(path)
    result = check(history, str(path))
    assert result.bad_lines == 1
    lines = len(path.read_text().splitlines())
    assert result.bad_line_samples[0][0] == lines
    assert result.bad_line_samples[0][1].startswith("not JSON")
    assert (result.acked, result.received, result.lost, result.partial) == (4, 4, 0, False)
    assert result.history == str(path)


def test_anomalies_through_the_file_reader(tmp_path: Path) -> None:
    run = orderly_run(["a", "b", "c"], ["b", "a"])  # c lost, one inversion
    run.receive(6.0, "a").receive(6.1, "zz")
    run.fault(7.0, "kill_master", "b0", "g1").sent_ok(7.3, "d", group="g1").receive(8, "d")
    result = check(read_history(run.finish(9.0).write(tmp_path / "h.jsonl")))
    assert (result.lost, result.duplicated, result.unexpected) == (1, 1, 1)
    assert result.order_violations == 1
    assert result.failover_ms["kill_master"] == FailoverStats(300, 300, 300, 1)


def test_promises_of_each_mode() -> None:
    assert promises_no_loss("raft", "")
    assert promises_no_loss("ha", "SYNC_MASTER") and promises_no_loss("HA", "sync_master")
    assert not promises_no_loss("ha", "ASYNC_MASTER")
    assert not promises_no_loss("none", "ASYNC_MASTER")
    assert not promises_no_loss("none", "SYNC_MASTER")


def test_broken_promises_lost() -> None:
    run = Run().sent_ok(1.0, "p1-0").sent_ok(1.1, "p1-1").receive(2.0, "p1-0")
    result = run.finish(3.0).check()
    for replication, role in (("raft", "ASYNC_MASTER"), ("ha", "SYNC_MASTER")):
        broken = broken_promises(result, replication=replication, role=role, orderly=False)
        assert broken == ["1 acknowledged message was lost (e.g. p1-1)"]
    for replication, role in (("ha", "ASYNC_MASTER"), ("none", "ASYNC_MASTER")):
        assert broken_promises(result, replication=replication, role=role, orderly=False) == []


def test_broken_promises_unexpected_in_every_mode() -> None:
    result = Run().receive(1.0, "ghost-1").receive(1.1, "ghost-2").finish(2.0).check()
    for replication, role in (("raft", ""), ("ha", "SYNC_MASTER"), ("ha", "ASYNC_MASTER")):
        for orderly in (False, True):
            broken = broken_promises(result, replication=replication, role=role, orderly=orderly)
            assert broken == ["2 received messages were never sent (e.g. ghost-1, ghost-2)"]


def test_broken_promises_order_only_when_orderly() -> None:
    result = orderly_run(["a", "b", "c"], ["c", "b", "a"]).finish(9.0).check()
    assert result.order_violations == 2
    assert broken_promises(result, replication="raft", role="", orderly=False) == []
    broken = broken_promises(result, replication="none", role="ASYNC_MASTER", orderly=True)
    assert len(broken) == 1 and broken[0].startswith("2 order violations")


def test_many_lost_keys_are_sampled() -> None:
    run = Run()
    for i in range(20):
        run.sent_ok(1.0, f"p1-{i}")
    result = run.finish(2.0).check()
    assert result.lost == 20 and len(result.lost_keys) == 5
    [sentence] = broken_promises(result, replication="raft", role="", orderly=False)
    assert sentence == "20 acknowledged messages were lost (e.g. p1-0, p1-1, p1-2, p1-3, p1-4, ...)"


def test_a_send_in_flight_across_the_fault_does_not_answer_it() -> None:
    """Failover counts from the fault to a SEND_OK of a send invoked after it: a send
    already in flight (stored, maybe, before the fault) proves nothing of the new master."""
    run = Run()
    run.add("send", 9.9, process="p1", op=1, keys=["early"], mode="single", shard=None)
    run.fault(10.0, "pause", "broker-g1-0", "g1")
    run.add("send", 10.5, process="p1", op=2, keys=["late"], mode="single", shard=None)
    for at, op, key in ((10.2, 1, "early"), (12.0, 2, "late")):
        run.add(
            "send_ok", at, process="p1", op=op, keys=[key], msg_ids=[], group="g1", queue=0,
            offset=0,
        )  # fmt: skip
    result = run.finish(20.0).check()
    assert [f.ms for f in result.failovers] == [pytest.approx(2000)]
