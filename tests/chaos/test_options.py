"""Bad options of ``rocketq chaos run|check`` get an error naming the flag and the fix, and
start nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.chaos.faults import FAULT_KINDS, parse_faults
from rocketq.chaos.history import ChaosError
from rocketq.chaos.runner import ChaosOptions, ChaosRun
from rocketq.cli.main import app


def test_fault_lists_parse_in_order_without_repeats() -> None:
    assert parse_faults("kill-master, pause,kill-master") == ("kill-master", "pause")
    assert set(parse_faults(",".join(FAULT_KINDS))) == set(FAULT_KINDS)


@pytest.mark.parametrize("text", ["", "kill-everything", "pause,nuke"])
def test_unknown_faults_are_named(text: str) -> None:
    with pytest.raises(ChaosError, match=r"--faults: unknown fault .*choose from kill-master"):
        parse_faults(text)


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"replication": "none"}, "--replication"),
        ({"role": "SLAVE"}, "--role"),
        ({"groups": 0}, "--groups"),
        ({"producers": 0}, "--producers"),
        ({"duration": 0}, "--duration"),
        ({"interval": -1}, "--interval"),
        ({"fault_duration": float("nan")}, "--fault-duration"),
        ({"rate": 0}, "--rate"),
        ({"faults": ("kill-consumer",), "consumers": 1}, "--consumers"),
    ],
)
def test_bad_options_name_their_flag(changes: dict[str, object], flag: str, tmp_path: Path) -> None:
    opts = ChaosOptions(data_dir=tmp_path / "run", **changes)  # type: ignore[arg-type]
    with pytest.raises(ChaosError, match=f"^{flag}: "):
        opts.validate()
    assert not (tmp_path / "run").exists()


def test_a_data_dir_with_an_earlier_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("")
    run = ChaosRun(ChaosOptions(data_dir=tmp_path), echo=lambda _line: None)
    with pytest.raises(ChaosError, match="holds an earlier run"):
        run.run()
    assert run.cluster is None  # nothing was started


def test_cli_bad_fault_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["chaos", "run", "--faults", "melt", "--data-dir", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert "unknown fault melt" in result.output
    assert not (tmp_path / "x").exists()


def test_cli_check_of_a_missing_history_says_where_histories_come_from(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["chaos", "check", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1
    assert "no such history" in result.output


def test_a_second_signal_does_not_cut_the_teardown_short() -> None:
    """Inside the teardown a Ctrl-C is held until the end, then raised."""
    import os
    import signal

    from rocketq.chaos.runner import _signals_held

    # What SIGINT did before (a shell's background job starts with it ignored) comes back.
    before = signal.getsignal(signal.SIGINT)
    finished = False
    with pytest.raises(KeyboardInterrupt), _signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is before
