"""What the tests of real chaos runs share: the broker settings they run with, a run
through ``ChaosRun`` (the code behind ``rocketq chaos run``) that leaves nothing behind,
the promises every such run keeps, and ``rocketq chaos check`` over its history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from rocketq.chaos.netns import TABLE, existing, netns_unavailable_reason
from rocketq.chaos.runner import ChaosOptions, ChaosRun, RunOutcome
from rocketq.cluster.pids import proc_stat

# Fast Raft timers, as the Raft tests use: a paused or cut-off leader is replaced in about
# a second instead of six.
FAST_RAFT: Final = {
    "dledger_heartbeat_interval": "200",
    "dledger_max_heartbeat_leak": "3",
    "dledger_min_vote_interval": "100",
    "dledger_max_vote_interval": "300",
    "sync_flush_timeout": "3000",
    "mapped_file_size_commit_log": "67108864",
}
SMALL: Final = {"mapped_file_size_commit_log": "67108864"}


def echo(line: str) -> None:
    """A run's progress lines, printed as they come (pytest shows them when a test fails)."""
    print(line, flush=True)


def assert_clean(run: ChaosRun) -> None:
    """The run left no process, network namespace, bridge or nftables table behind."""
    alive = [pid for pid in run.started_pids() if (s := proc_stat(pid)) and s[0] not in "ZX"]
    assert alive == [], f"processes left running: {alive}"
    if run.lab is not None:
        assert existing(run.lab.namespaces()) == [], "network namespaces left behind"
        links = subprocess.run(["ip", "link", "show", run.lab.bridge], capture_output=True)
        assert links.returncode != 0, f"bridge {run.lab.bridge} left behind"
    if os.geteuid() == 0 and netns_unavailable_reason() is None:
        tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
        assert TABLE not in tables.stdout  # no rule ever lands outside a lab's namespaces


def run_to_end(
    opts: ChaosOptions,
    *,
    say: Callable[[str], None] = echo,
    started: Callable[[ChaosRun], None] | None = None,
) -> tuple[ChaosRun, RunOutcome]:
    """Run ``opts`` to its end (``say`` gets its progress lines; ``started`` the run before
    it starts); whatever happens, the run must leave nothing behind. The cluster recovered
    and the history is whole (the run was not cut short)."""
    run = ChaosRun(opts, echo=say)
    if started is not None:
        started(run)
    try:
        outcome = run.run()
    finally:
        assert_clean(run)
    print(json.dumps({"faults": outcome.result.faults, "acked": outcome.result.acked}))
    assert outcome.recovered and not outcome.result.partial
    assert outcome.result.acked > 500
    return run, outcome


def brokers_without_topic(run: ChaosRun, topic: str) -> list[str]:
    """The brokers of the run whose stores do not hold ``topic``'s config (a follower or
    slave copies its master's topics within seconds; a new master without them leaves its
    group out of the topic's route)."""
    from rocketq.broker.topic_config import TopicConfigManager

    assert run.cluster is not None
    missing = []
    for broker in run.cluster.brokers:  # read as the broker reads them at its start
        topics = TopicConfigManager(
            broker.store / "config" / "topics.json", auto_create=False, default_queue_nums=4
        )
        topics.load()
        if topics.get(topic) is None:
            missing.append(broker.name)
    return missing


def assert_promises_kept(outcome: RunOutcome) -> None:
    """Nothing acknowledged was lost, nothing never sent was received, no promise broken."""
    assert outcome.result.lost == 0, outcome.broken
    assert outcome.result.unexpected == 0
    assert outcome.broken == []


def check_again(history: Path) -> tuple[dict[str, Any], str]:
    """``rocketq chaos check HISTORY --json`` in a new process, which must exit 0: its JSON
    line, and all it printed (the report, then that line)."""
    done = subprocess.run(
        [sys.executable, "-m", "rocketq", "chaos", "check", str(history), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc, done.stdout
