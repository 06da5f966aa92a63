"""The v2 gate's fuzz harnesses hold the gate to what it must do, not only to not crashing:
a real receipt handle verifies and its forgeries do not, and alice's settings frames are let
through only on her own topic and group."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocketq.bench.fuzz.seeds import v2_telemetry
from rocketq.bench.fuzz.v2_targets import V2_GATE, _same_pop
from rocketq.common.exceptions import NoMessageError


@pytest.fixture(scope="module")
def gate() -> Iterator[None]:
    # As the fuzz tests leave it: started and stopped once already, in this process.
    V2_GATE.setup()
    V2_GATE.teardown()
    V2_GATE.setup()
    try:
        yield
    finally:
        V2_GATE.teardown()


def test_a_real_handle_verifies_and_its_forgeries_do_not(gate: None) -> None:
    assert V2_GATE.receipts, "the harness popped nothing"
    real = V2_GATE.receipts[0]
    V2_GATE.receipt(real.encode())
    head, _, offset = real.rpartition(" ")
    fields = head.split(" ")
    forgeries = [
        f"{head} {int(offset) + 1}",  # another CommitLog offset
        " ".join([*fields[:7], str(int(fields[7]) + 100), offset]),  # another queue offset
        " ".join([fields[0], str(int(fields[1]) + 1), *fields[2:], offset]),  # another pop
    ]
    for forged in forgeries:
        with pytest.raises(NoMessageError):
            V2_GATE.receipt(forged.encode())


def test_alice_is_let_through_only_on_her_own(gate: None) -> None:
    seeds = v2_telemetry()
    for name in ("alice-publishes-secret", "alice-subscribes-other-group"):
        before = V2_GATE.let_through
        V2_GATE.telemetry(seeds[name])  # refused: an answer, not an error
        assert V2_GATE.let_through == before, name
    for name in ("alice-publishes-hers", "alice-subscribes-hers", "root-publishes"):
        before = V2_GATE.let_through
        V2_GATE.telemetry(seeds[name])
        assert V2_GATE.let_through == before + 1, name


def test_the_same_pop_reads_numbers_as_numbers() -> None:
    real = "0 1700000000000 60000 0 0 broker-a 1 3 4096"
    assert _same_pop("00 1700000000000 1 0 0 other 01 3 4096", real)
    assert not _same_pop("0 1700000000001 60000 0 0 broker-a 1 3 4096", real)
    assert not _same_pop("0 1700000000000 60000 0 1 broker-a 1 3 4096", real)
    assert not _same_pop("short", real)
