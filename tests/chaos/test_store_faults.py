"""The mechanics of the disk and member faults without a cluster: small disks (a tmpfs
mounted, filled to ENOSPC, freed, unmounted; refused clearly without root), a wiped store,
the disk-full fault on real small disks with a stand-in cluster, the members' caught-up
view, the write probe's log, the report's section and the promises it adds, and the
checker's final caught-up check over hand-made histories."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from rocketq.chaos import disk as disk_module
from rocketq.chaos.checker import broken_promises, check
from rocketq.chaos.disk import (
    FILLER_NAME,
    Filler,
    SmallDisks,
    free_bytes,
    small_disks_unavailable_reason,
    wipe_store,
)
from rocketq.chaos.history import ChaosError, History
from rocketq.chaos.members import MemberOffsets, ProbeLog, classify, group_view
from rocketq.chaos.runner import ChaosOptions
from rocketq.chaos.store_faults import DiskFull
from rocketq.chaos.store_report import render_store, store_broken, store_json
from rocketq.cluster.launcher import LocalCluster, Node
from rocketq.remoting.codes import ResponseCode

MIB = 1 << 20
CAN_MOUNT = small_disks_unavailable_reason() is None


@pytest.fixture
def disks() -> Any:
    """Small disks of 16 MiB, every mount undone at the end whatever the test did. Where
    they cannot be mounted (not root) the test proves only that they are refused with a
    clear error: the fixture gives None (with CI set, it fails instead)."""
    if not CAN_MOUNT:
        if os.environ.get("CI"):
            pytest.fail(f"small disks cannot be mounted here: {small_disks_unavailable_reason()}")
        with pytest.raises(ChaosError, match="needs root"):
            SmallDisks(16)
        yield None
        return
    made = SmallDisks(16)
    try:
        yield made
    finally:
        assert made.close() == []
        for path in made.mounts:
            assert not os.path.ismount(path)


def test_a_filler_fills_a_small_disk_to_enospc_takes_back_what_is_freed_and_goes(
    disks: SmallDisks | None, tmp_path: Path
) -> None:
    if disks is None:
        return
    home = tmp_path / "broker-a-0"
    disks.mount(home)
    assert os.path.ismount(home)
    segment = home / "segment"
    segment.write_bytes(b"s" * (2 * MIB))
    filler = Filler(home)
    written = filler.fill()
    assert 12 * MIB < written <= 14 * MIB
    assert filler.full_seen and free_bytes(home) < 64 * 1024
    with pytest.raises(OSError):  # the broker's next write finds the disk full
        (home / "more").write_bytes(b"x" * MIB)
    assert filler.fill() == 0  # already full
    segment.unlink()  # retention frees a segment: the filler takes it back
    assert filler.fill() >= 2 * MIB - 64 * 1024
    assert free_bytes(home) < 64 * 1024
    filler.remove()
    assert not (home / FILLER_NAME).exists()
    assert free_bytes(home) > 15 * MIB
    filler.remove()  # twice is harmless


def test_small_disks_unmount_on_close_and_refuse_a_used_directory(
    disks: SmallDisks | None, tmp_path: Path
) -> None:
    if disks is None:
        return
    first, second = tmp_path / "a", tmp_path / "b"
    disks.mount(first)
    with pytest.raises(ChaosError, match="already a mount point"):
        disks.mount(first)
    second.mkdir()
    (second / "store").mkdir()
    with pytest.raises(ChaosError, match="not empty"):
        disks.mount(second)
    (first / "busy").write_bytes(b"x")
    assert disks.close() == []
    assert not os.path.ismount(first)
    assert not (first / "busy").exists()  # it was on the tmpfs
    assert disks.mounts == []


def test_small_disks_are_refused_without_root_or_below_the_least_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ChaosError, match="at least 16 MiB"):
        SmallDisks(8)
    monkeypatch.setattr(disk_module.os, "geteuid", lambda: 1000)
    assert "needs root" in str(small_disks_unavailable_reason())
    with pytest.raises(ChaosError, match="needs root"):
        SmallDisks(32)
    with pytest.raises(ChaosError, match=r"disk-full: .*needs root"):
        ChaosOptions(faults=("disk-full",)).validate()


def test_options_of_the_member_faults_are_checked() -> None:
    with pytest.raises(ChaosError, match=r"replace-member .* --replication raft"):
        ChaosOptions(replication="ha", faults=("replace-member",)).validate()
    with pytest.raises(ChaosError, match="--disk-mib: must be at least 16"):
        ChaosOptions(faults=("wipe-member",), disk_mib=4).validate()
    ChaosOptions(replication="ha", faults=("wipe-member",)).validate()


def test_wipe_store_deletes_everything_but_the_directory(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    (store / "commitlog" / "00000000000000000000").write_bytes(b"x" * 100)
    (store / "dledger").mkdir()
    (store / "dledger" / "index").write_bytes(b"i")
    (store / "checkpoint").write_bytes(b"c")
    assert wipe_store(store) == 3
    assert store.is_dir() and list(store.iterdir()) == []
    assert wipe_store(tmp_path / "missing") == 0


class StandInCluster:
    """What DiskFull asks of a cluster: a group's members, whether each is alive, and the
    client security of its probe (none)."""

    def __init__(self, members: list[Node]) -> None:
        self.members = members
        self.dead: set[str] = set()

    def group_members(self, group: str) -> list[Node]:
        return [n for n in self.members if n.broker_name == group]

    def is_alive(self, name: str) -> bool:
        return name not in self.dead

    def client_security(self) -> None:
        return None


def test_disk_full_fills_every_small_disk_of_the_group_notes_exits_and_frees_them(
    disks: SmallDisks | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocketq.chaos.store_faults as store_faults

    if disks is None:
        return

    monkeypatch.setattr(store_faults, "RESUME_TIMEOUT_S", 0.5)
    nodes = [
        Node(f"broker-a-{i}", "broker", tmp_path, broker_name="broker-a", broker_id=i)
        for i in range(2)
    ] + [Node("broker-b-0", "broker", tmp_path, broker_name="broker-b")]
    for node in nodes:
        disks.mount(node.home)
    stand_in = StandInCluster(nodes)
    fault = DiskFull(cast(LocalCluster, stand_in), disks, "broker-a", lambda: None)
    assert [n.name for n in fault.members] == ["broker-a-0", "broker-a-1"]
    fault.start()
    try:
        for node in nodes[:2]:
            assert free_bytes(node.home) < 64 * 1024
        assert free_bytes(nodes[2].home) > 15 * MIB  # the other group's disk is untouched
        stand_in.dead.add("broker-a-1")
        deadline = time.monotonic() + 5.0  # the keeper notes the exit within its period
        while "broker-a-1" not in fault.exits and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        fault.heal()
    for node in nodes[:2]:
        assert free_bytes(node.home) > 15 * MIB
        assert not (node.home / FILLER_NAME).exists()
    d = fault.detail
    assert d["group"] == "broker-a" and d["full_seen"] is True
    assert all(12 * MIB < b <= 16 * MIB for b in d["filler_bytes"].values())
    assert [e["node"] for e in d["exits"]] == ["broker-a-1"]
    # No master to probe: nothing refused, nothing accepted, every probe an error.
    assert d["refused_ms"] is None and d["resumed_ms"] is None
    assert d["probes"]["error"] >= 1 and d["probes"]["ok"] == 0
    summary = store_json(History([fault_end("disk-full", d)]))
    assert summary is not None
    assert store_broken(summary) == [
        "brokers of broker-a exited while their disk was full: broker-a-1",
        "broker-a did not take writes again once its disk had space",
    ]


def test_a_disk_full_torn_down_before_its_heal_removes_its_fillers_and_threads(
    disks: SmallDisks | None, tmp_path: Path
) -> None:
    """What the run's teardown calls (``ActiveFault.undo``) on Ctrl-C during the fault."""
    if disks is None:
        return
    node = Node("broker-a-0", "broker", tmp_path, broker_name="broker-a")
    disks.mount(node.home)
    fault = DiskFull(cast(LocalCluster, StandInCluster([node])), disks, "broker-a", lambda: None)
    fault.start()
    assert free_bytes(node.home) < 64 * 1024
    fault.stop_quietly()
    assert not (node.home / FILLER_NAME).exists() and free_bytes(node.home) > 15 * MIB
    assert not fault.probe.alive() and not fault._keeper.is_alive()


def test_disk_full_needs_a_group_with_small_disks(tmp_path: Path) -> None:
    node = Node("broker-a-0", "broker", tmp_path, broker_name="broker-a")
    no_disks = cast(SmallDisks, type("NoDisks", (), {"mounts": []})())
    with pytest.raises(ChaosError, match="no live member of broker-a has a small disk"):
        DiskFull(cast(LocalCluster, StandInCluster([node])), no_disks, "broker-a", lambda: None)


# ---------------------------------------------------------------- members and probes


def member(name: str, leads: bool, max_offset: int | None, error: str | None = None) -> Any:
    return MemberOffsets(name, "g", leads, 0, max_offset, error)


def test_a_group_is_caught_up_when_every_member_has_its_single_leaders_offset() -> None:
    view = group_view([member("a", True, 500), member("b", False, 500), member("c", False, 500)])
    assert view["leader"] == "a" and view["caught_up"] is True
    assert view["behind"] == {"a": 0, "b": 0, "c": 0}
    behind = group_view([member("a", True, 500), member("b", False, 120)])
    assert behind["caught_up"] is False and behind["behind"]["b"] == 380
    down = group_view([member("a", True, 500), member("b", False, None, "not running")])
    assert down["caught_up"] is False and down["errors"] == {"b": "not running"}
    assert down["behind"]["b"] is None
    two = group_view([member("a", True, 500), member("b", True, 500)])
    assert two["leader"] is None and two["caught_up"] is False
    none = group_view([member("a", False, 500)])
    assert none["leader"] is None and none["caught_up"] is False


def test_the_probe_log_spans_a_refusal_to_the_first_accepted_send_after_it() -> None:
    log = ProbeLog([(1.0, "ok", ""), (2.0, "refused", "14 disk full"), (2.5, "error", "x")])
    assert log.refused_span() == (2.0, None)
    log.outcomes += [(3.0, "refused", "14"), (4.25, "ok", "0")]
    assert log.refused_span() == (2.0, 4.25)
    assert log.count("refused") == 2 and log.first_text("refused") == "14 disk full"
    assert ProbeLog([(1.0, "ok", "")]).refused_span() is None
    assert classify(ResponseCode.SUCCESS, "") == "ok"
    assert classify(ResponseCode.SERVICE_NOT_AVAILABLE, "the broker's disk is full") == "refused"
    assert classify(ResponseCode.SYSTEM_BUSY, "") == "error"


# ---------------------------------------------------------------- report and checker


def fault_end(kind: str, detail: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    return {
        "t": 10.0,
        "type": "fault_end",
        "fault": kind,
        "target": detail.get("member") or detail.get("group"),
        "group": detail.get("group"),
        "error": error,
        "detail": detail,
    }


def test_the_store_section_gives_refusal_and_catch_up_times_and_the_broken_promises() -> None:
    history = History(
        [
            fault_end("kill-master", {}),
            fault_end(
                "disk-full",
                {
                    "group": "broker-a",
                    "members": ["broker-a-0"],
                    "refused_ms": 4200,
                    "resumed_ms": 850,
                    "probes": {"ok": 10, "refused": 17, "error": 0},
                    "refusal": "14 the broker's disk is full",
                    "full_seen": True,
                    "exits": [],
                },
            ),
            fault_end(
                "wipe-member",
                {
                    "group": "broker-b",
                    "member": "broker-b-2",
                    "catch_up_ms": 3100,
                    "target_offset": 901234,
                    "leader_min_offset": 524288,
                },
            ),
            fault_end(
                "replace-member",
                {"group": "broker-a", "added": "broker-a-3", "catch_up_ms": None, "removed": None},
                error="the new member did not start",
            ),
        ]
    )
    summary = store_json(history)
    assert summary is not None
    assert summary["disk_full"][0]["refused_ms"] == 4200
    assert summary["catch_up"][0] == {
        "fault": "wipe-member",
        "member": "broker-b-2",
        "group": "broker-b",
        "catch_up_ms": 3100,
        "target_offset": 901234,
        "leader_min_offset": 524288,
        "removed": None,
        "error": None,
    }
    text = render_store(summary)
    assert "| broker-a | 4200 | 850 | 10 / 17 / 0 | none | 14 the broker's disk is full |" in text
    assert "| broker-b-2 | wipe-member | broker-b | 3100 | 901234 | - |" in text
    assert store_broken(summary) == [
        "broker-a-3 (replace-member) did not catch up with its leader: the new member did not start"
    ]
    assert store_json(History([fault_end("pause", {})])) is None
    assert store_broken(None) == []


def members_record(caught_up: bool, **groups: dict[str, Any]) -> dict[str, Any]:
    return {
        "t": 5.0,
        "type": "members",
        "caught_up": caught_up,
        "waited_ms": 1500,
        "timeout_s": 60.0,
        "groups": groups,
    }


def test_the_checker_breaks_a_promise_when_a_member_did_not_catch_up() -> None:
    lagging = members_record(
        False,
        **{
            "broker-a": {
                "leader": "broker-a-0",
                "behind": {"broker-a-0": 0, "broker-a-1": 4096, "broker-a-2": None},
                "errors": {"broker-a-2": "not running"},
            },
            "broker-b": {"leader": None, "behind": {}, "errors": {}},
        },
    )
    result = check(History([{"t": 0.0, "type": "run", "config": {}}, lagging]))
    assert result.caught_up is False and result.caught_up_ms == 1500
    assert result.lagging == [
        "broker-a-1 (4096 bytes behind broker-a-0)",
        "broker-a-2 (not running behind broker-a-0)",
        "broker-b: no single leader",
    ]
    broken = broken_promises(result, replication="ha", role="ASYNC_MASTER", orderly=False)
    assert broken == [
        "members did not catch up with their leader or master after the producers stopped: "
        + "; ".join(result.lagging)
    ]
    fine = check(
        History(
            [members_record(True, **{"g": {"leader": "g-0", "behind": {"g-0": 0}, "errors": {}}})]
        )
    )
    assert fine.caught_up is True and fine.lagging == []
    assert broken_promises(fine, replication="raft", role="SYNC_MASTER", orderly=False) == []
    assert check(History([])).caught_up is None


# ---------------------------------------------------------------- the run's options


def test_the_run_gives_its_brokers_small_files_and_quick_retention_unless_set_otherwise(
    tmp_path: Path,
) -> None:
    from rocketq.chaos.runner import DISK_FULL_SETTINGS, RETENTION_SETTINGS, ChaosRun

    def broker_settings(**options: Any) -> dict[str, str]:
        opts = ChaosOptions(data_dir=tmp_path / str(len(list(tmp_path.iterdir()))), **options)
        cluster, _ = ChaosRun(opts, echo=lambda _l: None)._make_cluster()
        return dict(cluster.spec.broker_settings)

    plain = broker_settings(faults=("kill-master",))
    assert "file_reserved_time" not in plain and "max_index_num" not in plain
    wiped = broker_settings(faults=("wipe-member",), replication="ha")
    assert {k: wiped[k] for k in RETENTION_SETTINGS} == RETENTION_SETTINGS
    assert wiped["broker_role"] == "SYNC_MASTER"
    both = broker_settings(
        faults=("wipe-member", "replace-member"),
        settings={"mapped_file_size_commit_log": "1048576"},
    )
    assert both["mapped_file_size_commit_log"] == "1048576"  # --set wins
    assert both["file_reserved_time"] == "0"
    if CAN_MOUNT:
        full = broker_settings(faults=("disk-full",))
        assert {k: full[k] for k in DISK_FULL_SETTINGS} == DISK_FULL_SETTINGS


def test_in_turn_injects_the_faults_in_the_given_order_round_after_round(tmp_path: Path) -> None:
    from rocketq.chaos.faults import ActiveFault, Faults
    from rocketq.chaos.history import HistoryWriter, read_history
    from rocketq.chaos.runner import ChaosRun

    opts = ChaosOptions(
        data_dir=tmp_path,
        faults=("kill-master", "pause", "restart"),
        in_turn=True,
        interval=0.01,
        fault_duration=0.01,
    )
    run = ChaosRun(opts, echo=lambda _l: None)
    made: list[str] = []

    class Recording:
        def inject(self, kind: str) -> ActiveFault:
            made.append(kind)
            return ActiveFault(kind, "n", "g", lambda: None)

    run.history = HistoryWriter(tmp_path / "history.jsonl")
    run._fault_cycle(cast(Faults, Recording()), time.monotonic() + 1.0)
    assert len(made) >= 4  # about 40 in a second; at least four on a loaded machine
    assert made == [opts.faults[i % 3] for i in range(len(made))]
    # With rounds, the faults end after that many rounds, long before the duration.
    made.clear()
    run.opts = replace(opts, rounds=2)
    started = time.monotonic()
    run._fault_cycle(cast(Faults, Recording()), started + 30.0)
    assert time.monotonic() - started < 20.0
    assert made == list(opts.faults) * 2
    run.history.close()
    ends = [r["fault"] for r in read_history(tmp_path / "history.jsonl").of_type("fault_end")]
    assert len(ends) >= 10 and ends[-6:] == made
    with pytest.raises(ChaosError, match="--rounds: counts rounds of --in-turn"):
        ChaosOptions(rounds=2).validate()
    with pytest.raises(ChaosError, match="--rounds: must be 0"):
        ChaosOptions(rounds=-1, in_turn=True).validate()


def test_cli_store_fault_options_reach_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import rocketq.chaos.runner as runner
    from rocketq.cli.main import app

    seen: list[ChaosOptions] = []

    class Recorder:
        def __init__(self, opts: ChaosOptions, echo: object = None) -> None:
            seen.append(opts)
            raise ChaosError("recorded")

    monkeypatch.setattr(runner, "ChaosRun", Recorder)
    flags = ["--faults", "wipe-member,replace-member", "--in-turn", "--rounds", "1"]
    flags += ["--disk-mib", "32"]
    result = CliRunner().invoke(app, ["chaos", "run", *flags, "--data-dir", str(tmp_path / "x")])
    assert result.exit_code == 2 and "recorded" in result.output
    assert seen[-1].faults == ("wipe-member", "replace-member")
    assert (seen[-1].in_turn, seen[-1].rounds, seen[-1].disk_mib) == (True, 1, 32)
    result = CliRunner().invoke(app, ["chaos", "run", "--disk-mib", "8"])
    assert result.exit_code == 2 and "--disk-mib" in result.output


def test_chaos_check_prints_the_section_and_fails_on_a_member_that_did_not_catch_up(
    tmp_path: Path,
) -> None:
    import json

    from typer.testing import CliRunner

    from rocketq.cli.main import app

    detail = {"group": "broker-b", "member": "broker-b-2", "catch_up_ms": 2500}
    lagging = {"leader": "broker-b-0", "behind": {"broker-b-0": 0, "broker-b-2": 8192}}
    records = [
        {"t": 0.0, "type": "run", "config": {"replication": "raft", "faults": ["wipe-member"]}},
        {"t": 1.0, "type": "fault_start", "fault": "wipe-member", "target": "broker-b-2",
         "group": "broker-b"},
        fault_end("wipe-member", detail),
        members_record(False, **{"broker-b": {**lagging, "errors": {}}}),
        {"t": 20.0, "type": "phase", "phase": "done"},
    ]  # fmt: skip
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(app, ["chaos", "check", str(history), "--json"])
    assert result.exit_code == 1, result.output
    assert "## Disks and members" in result.output
    assert "| broker-b-2 | wipe-member | broker-b | 2500 |" in result.output
    assert "Members: **not caught up**: broker-b-2 (8192 bytes behind broker-b-0)." in result.output
    doc = json.loads(result.output.strip().splitlines()[-1])
    assert doc["caught_up"] is False and doc["store"]["catch_up"][0]["catch_up_ms"] == 2500
