"""The launcher never loses a port race: it binds every port a node serves and hands the
listening socket down, so Raft clusters come up first time, one after another, while
another process keeps taking ephemeral ports (binding port 0 by the hundred, holding the
ports a moment, letting them go, again and again).

The race runs in a network namespace of its own (``unshare --net``, as root; without root
it fails when ``CI`` is set and is skipped otherwise): its loopback is the only one the
contender can exhaust, so the tests running beside it on this machine keep their ports.

Each start costs about 4 CPU-seconds (four Python processes that import the servers), so
the suite runs 8 starts; ``PORT_RACE_STARTS=20`` runs the 20 in a row by hand (not a
``ROCKETQ_`` name, which the servers read as config keys). Each start's time is printed
(``pytest -s``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rocketq.cluster.launcher import ClusterSpec, LocalCluster, free_ports, port_free
from tests.chaos.real_runs import FAST_RAFT
from tests.system_deps import unavailable

ROOT = Path(__file__).resolve().parents[2]
STARTS = int(os.environ.get("PORT_RACE_STARTS", "8"))
# Ports the contender holds at a time, of Linux's ~28,000 ephemeral ones.
HELD = 1500
# Binds port 0 HELD times, holds the ports 100 ms, lets them go; forever. It prints a line
# once it has held ports, so the race starts only under contention.
CONTENDER = """
import socket, sys, time
held, said = int(sys.argv[1]), False
while True:
    socks = []
    for _ in range(held):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
        except OSError:
            s.close()
            break
        socks.append(s)
    if not said:
        print("holding", len(socks), flush=True)
        said = True
    time.sleep(0.1)
    for s in socks:
        s.close()
"""


def one_taken_within(ports: list[int], seconds: float) -> bool:
    """Whether another process binds one of ``ports`` (free now, not held) within
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not all(port_free(port) for port in ports):
            return True
        time.sleep(0.005)
    return False


def race(data_dir: Path, starts: int) -> list[float]:
    """Start ``starts`` Raft clusters one after another under a contender; each start's
    time. Run inside the race's own network namespace (see :func:`main`)."""
    contender = subprocess.Popen(
        [sys.executable, "-c", CONTENDER, str(HELD)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert contender.stdout is not None
        assert contender.stdout.readline().startswith("holding"), "the contender did not start"
        # The contention is real: a port chosen free and left unbound, as the launcher once
        # left the ports it chose for a node until the node bound them, is soon taken.
        # (The contender binds 1,500 of ~28,000 ports a cycle: 64 chosen ports watched
        # together are taken within a few cycles.)
        chosen = free_ports(64)
        assert one_taken_within(chosen, 10.0), "no chosen port was taken in 10 s"
        times = []
        for i in range(starts):
            spec = ClusterSpec(
                data_dir=data_dir / f"c{i}",
                replication="raft",
                metrics=False,
                broker_settings={**FAST_RAFT, "mapped_file_size_commit_log": "4194304"},
            )
            cluster = LocalCluster(spec)
            began = time.monotonic()
            try:
                cluster.start()
                times.append(time.monotonic() - began)
                # First time: one process per node, every port as bound for it.
                assert cluster.spawns == len(cluster.nodes) == 4
                assert cluster.port_fallbacks == []
                raft_ports = {b.raft_port for b in cluster.brokers}
                assert len(raft_ports) == 3 and 0 not in raft_ports
                assert cluster.status().all_alive
            finally:
                cluster.stop()
            assert contender.poll() is None, "the contender stopped"
        return times
    finally:
        contender.kill()
        contender.wait(timeout=10)


def main() -> None:
    """``python -m tests.integration.test_port_races DATA_DIR STARTS`` inside the
    namespace: brings its loopback up, races, prints the start times as JSON."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
    print(json.dumps(race(Path(sys.argv[1]), int(sys.argv[2]))), flush=True)


def test_raft_clusters_start_first_time_while_ports_are_taken(tmp_path: Path) -> None:
    missing = [t for t in ("unshare", "ip") if shutil.which(t) is None]
    reason = "the race needs root" if os.geteuid() != 0 else None
    if missing:
        reason = f"the race needs {', '.join(missing)}"
    if reason is not None:
        unavailable(reason)
    argv = ["unshare", "--net", "--", sys.executable, "-m", "tests.integration.test_port_races"]
    done = subprocess.run(
        [*argv, str(tmp_path), str(STARTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60 + 30 * STARTS,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    times = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(times) == STARTS
    print(f"{STARTS} Raft clusters in {sum(times):.1f} s: " + ", ".join(f"{t:.1f}" for t in times))


if __name__ == "__main__":
    main()
