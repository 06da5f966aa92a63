"""A short real chaos run with the hostile fault (bounded: under a minute): one Raft group
of three brokers (remoting, Raft and metrics ports) with a nameserver, under load while a
neighbour sends every port of every node mutated frames, bombs, frames at the size limit,
floods, slow partial frames, garbage and slowloris HTTP. A SYNC_MASTER master and slave
take the same run with ``rocketq chaos run --replication ha --role SYNC_MASTER --faults
hostile``; in ``make test`` the HA port is under fire in
tests/integration/test_replication_port_bounds.py, and the remoting and metrics ports
are those this run covers on the Raft group. The promises hold (nothing
acknowledged lost, nothing unexpected received), no server process exits, every server's
peak resident set stays under a bound, the report has its hostile section, and the run
leaves no process behind.

Measured on a 2-core machine: without hostile traffic the servers peak at about 43 MiB
(nameserver) and 64 MiB (each broker); with every kind but ``big`` the nameserver at about
111 MiB (it holds up to its 64 MiB registration cap while refusing a bomb) and the
brokers at about 64 MiB. With ``big`` (four connections of frames at the 16 MiB limit) the
master or leader reaches 64-141 MiB and the nameserver 217-228 MiB. What bounds the
nameserver by design: about 45 MiB of its own, 32 MiB of partial frames
(server_max_buffered_bytes), 64 MiB of requests its handlers hold
(server_max_in_flight_bytes) and two body decodes of a 16 MiB frame at a time (a copy and
its text each), about 205 MiB, and the allocator's slack on top: the bound is 320 MiB.
Before the in-flight budgets it reached 1.5 GiB.

Each run is two windows of 8 s of hostile traffic, 1 s apart (the brokers' peaks still
grow near a window's end, so the windows keep their length); the bombs are built once
before the runs (the neighbour keeps them), so every window sends them from its start
instead of after the several seconds the build takes under load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest

from rocketq.chaos.history import read_history
from rocketq.chaos.hostile import HostileLimits
from rocketq.chaos.hostile_payloads import bomb_frames
from rocketq.chaos.report import hostile_json
from rocketq.chaos.runner import ChaosOptions
from tests.chaos.real_runs import FAST_RAFT, assert_promises_kept, check_again, run_to_end

PEAK_RSS_BOUND_MIB: Final = 320.0


@pytest.fixture(scope="module")
def bombs_built() -> None:
    """The neighbour's compression bombs, built once (about 2 s)."""
    bomb_frames(HostileLimits().bomb_inflated)


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("bombs_built")
def test_a_hostile_neighbour_breaks_no_promise_and_stops_no_server(tmp_path: Path) -> None:
    run, outcome = run_to_end(
        ChaosOptions(
            replication="raft",
            role="SYNC_MASTER",
            groups=1,
            nameservers=1,
            producers=1,
            consumers=1,
            faults=("hostile",),
            interval=1,
            fault_duration=8,
            duration=18,  # windows at 1-9 s and 10-18 s of the load
            seed=5,
            rate=100,
            data_dir=tmp_path / "hostile",
            settings=FAST_RAFT,
        )
    )
    assert_promises_kept(outcome)
    assert outcome.errors == []
    assert run.faults_made >= 2 and outcome.result.faults == {"hostile": run.faults_made}
    summary = hostile_json(read_history(run.history_path))
    assert summary is not None
    print(json.dumps(summary, indent=1))
    assert summary["server_exits"] == []
    assert summary["windows"] == run.faults_made
    assert summary["send_ms"]["inside"]["count"] > 0 and summary["send_ms"]["outside"]["count"] > 0
    nodes = {n.name for n in run.cluster.nodes} if run.cluster else set()
    assert set(summary["peak_rss_mib"]) == nodes and len(nodes) == 4
    over = {n: mib for n, mib in summary["peak_rss_mib"].items() if mib > PEAK_RSS_BOUND_MIB}
    assert over == {}, f"servers over {PEAK_RSS_BOUND_MIB} MiB: {over}"
    traffic = summary["traffic"]
    for kind in ("frames", "lengths", "bombs", "big", "slow", "flood", "garbage", "slowloris"):
        assert traffic[kind]["connects"] > 0, kind
    ports = {port.split(":")[1] for port in summary["ports"]}
    assert ports == {"remoting", "metrics", "raft"}
    assert summary["peak_sockets"] >= 300  # the flood reached its bound
    # The command line's check reports the same section.
    doc, printed = check_again(run.history_path)
    assert "## Hostile traffic" in printed
    assert doc["hostile"]["peak_rss_mib"] == summary["peak_rss_mib"]
