"""A store with thousands of ConsumeQueues needs no file descriptor per queue file: 5,000
queues load, take writes, flush, reload cleanly and after a crash, under a limit of 128 open
files (before ConsumeQueue files gave up their descriptors, each held two)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Final

CHILD: Final = Path(__file__).with_name("many_queues_child.py")
FD_LIMIT: Final = 128
TOPICS: Final = 1250  # x 4 queues


def test_five_thousand_queues_fit_a_small_fd_limit(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(CHILD), str(tmp_path / "store"), str(TOPICS), str(FD_LIMIT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["queues"] == TOPICS * 4
    assert report["peak_fds"] < FD_LIMIT
