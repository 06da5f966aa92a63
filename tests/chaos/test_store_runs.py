"""A short real chaos run of the disk and member faults through ``ChaosRun`` (the code
behind ``rocketq chaos run``): two Raft groups, one round of ``disk-full`` (as root: each
broker on a small tmpfs), ``wipe-member`` and ``replace-member``, in that order. Nothing
acknowledged may be lost; the full group refuses writes, no broker exits, and the group
takes writes again by itself once the disk has space; the wiped member (after retention
trimmed its group's log) and the new member catch up; the member replaced is taken out of
its group; at the end every member holds what its leader holds. The run leaves no
process, filler or mount behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketq.chaos.disk import small_disks_unavailable_reason
from rocketq.chaos.history import read_history
from rocketq.chaos.runner import ChaosOptions
from rocketq.chaos.store_report import store_json
from tests.chaos.real_runs import FAST_RAFT, assert_promises_kept, run_to_end


def disk_full_allowed() -> bool:
    """Whether small disks can be mounted here (as root); with CI set they must be."""
    reason = small_disks_unavailable_reason()
    if reason is not None and os.environ.get("CI"):
        pytest.fail(f"the disk-full fault cannot run here: {reason}")
    return reason is None


def mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if line.split()[1].startswith(str(path))]


@pytest.mark.timeout(300)
def test_full_disk_wiped_member_and_replaced_member_lose_nothing_and_catch_up(
    tmp_path: Path,
) -> None:
    faults = (("disk-full",) if disk_full_allowed() else ()) + ("wipe-member", "replace-member")
    # Segments of 128 KiB: retention trims a group's log two seconds into the load.
    settings = {**FAST_RAFT, "mapped_file_size_commit_log": str(128 << 10)}
    run, outcome = run_to_end(
        ChaosOptions(
            replication="raft",
            groups=2,
            nameservers=1,
            producers=1,
            consumers=1,
            faults=faults,
            in_turn=True,
            rounds=1,
            interval=1.0,
            fault_duration=2.0,
            duration=120,
            seed=11,
            rate=250,
            data_dir=tmp_path / "run",
            settings=settings,
            disk_mib=32,
        )
    )
    assert mounts_under(tmp_path) == []
    assert_promises_kept(outcome)
    assert outcome.result.caught_up is True, outcome.result.lagging
    assert outcome.result.faults == dict.fromkeys(faults, 1), outcome.errors
    summary = store_json(read_history(run.history_path))
    assert summary is not None
    if "disk-full" in faults:
        [full] = summary["disk_full"]
        assert full["exits"] == [] and full["error"] is None
        assert full["refused_ms"] is not None and full["probes"]["refused"] >= 1, full
        assert full["resumed_ms"] is not None, full
        assert "disk" in str(full["refusal"]), full
    wiped, replaced = summary["catch_up"]
    assert wiped["fault"] == "wipe-member" and wiped["catch_up_ms"] is not None, wiped
    assert wiped["leader_min_offset"] > 0  # retention had trimmed the group's log
    assert replaced["fault"] == "replace-member" and replaced["catch_up_ms"] is not None
    assert replaced["removed"] is not None, replaced
    assert run.faults is not None and run.faults.removed == {replaced["removed"]}
    assert run.cluster is not None
    assert not run.cluster.is_alive(replaced["removed"])
