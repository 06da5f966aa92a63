"""The fuzz harnesses (bench/fuzz/): every seed and every kept regression input goes
through its harness in this process, without atheris, and finds nothing; the checked-in
corpus is what the encoders make; the judge tells a crash, a hang and an oom from an
accepted error; and ``rocketq bench fuzz`` runs a real atheris worker end to end."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.bench.fuzz import seeds
from rocketq.bench.fuzz.harness import Harness, judge
from rocketq.bench.fuzz.runner import CORPUS, HARNESS_NAMES, REGRESSIONS, FuzzOptions
from rocketq.bench.fuzz.targets import HARNESSES, cleanup
from rocketq.bench.report import BenchOptionError
from rocketq.cli.main import app
from tests.system_deps import unavailable

# CPU seconds per input here: the worker's 1 s, with room for a busy machine under pytest.
TIME_LIMIT = 5.0


def test_the_runner_the_targets_and_the_seeds_name_the_same_harnesses() -> None:
    assert tuple(HARNESSES) == HARNESS_NAMES
    assert tuple(seeds.SEEDS) == HARNESS_NAMES
    for name, h in HARNESSES.items():
        assert h.name == name and h.accepted and h.summary


def test_the_checked_in_corpus_is_what_the_encoders_make() -> None:
    """`python -m rocketq.bench.fuzz.seeds` regenerates bench/fuzz/corpus/."""
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(HARNESS_NAMES)
    for name in HARNESS_NAMES:
        made = seeds.corpus(name)
        there = {p.name: p.read_bytes() for p in (CORPUS / name).iterdir()}
        assert there == made, f"bench/fuzz/corpus/{name}: run python -m rocketq.bench.fuzz.seeds"


def _inputs(name: str) -> list[Path]:
    found = sorted((CORPUS / name).iterdir())
    if (REGRESSIONS / name).is_dir():
        found += sorted(p for p in (REGRESSIONS / name).iterdir() if not p.name.endswith(".txt"))
    return found


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    h = HARNESSES[request.param]
    if h.setup is not None:
        h.setup()
    try:
        yield h
    finally:
        if h.teardown is not None:
            h.teardown()
        cleanup()


@pytest.mark.parametrize("harness", HARNESS_NAMES, indirect=True)
def test_every_seed_and_regression_input_finds_nothing(harness: Harness) -> None:
    inputs = _inputs(harness.name)
    assert inputs
    found = []
    for path in inputs:
        finding = judge(harness, path.read_bytes(), time_limit=TIME_LIMIT)
        if finding is not None:
            found.append(f"{path.relative_to(CORPUS.parent)}: {finding.signature}\n{finding.trace}")
    assert not found, "\n".join(found)


def test_regression_folders_are_named_after_harnesses() -> None:
    if REGRESSIONS.is_dir():
        folders = {p.name for p in REGRESSIONS.iterdir() if p.is_dir()}
        assert folders <= set(HARNESS_NAMES)


# -- the judge ---------------------------------------------------------------------------------


def _raise(exc: BaseException) -> None:
    raise exc


def _spin(data: bytes) -> None:
    while True:
        pass


def test_the_judge_accepts_the_documented_error_and_names_the_rest() -> None:
    accepted = Harness("t", lambda d: _raise(ValueError("bad")), (ValueError,), "")
    assert judge(accepted, b"") is None
    crash = judge(Harness("t", lambda d: _raise(KeyError("k")), (ValueError,), ""), b"")
    assert crash is not None and crash.kind == "crash" and crash.exception == "KeyError: 'k'"
    assert "test_fuzz.py" in crash.where and "_raise" in crash.where
    oom = judge(Harness("t", lambda d: _raise(MemoryError()), (ValueError,), ""), b"")
    assert oom is not None and oom.kind == "oom"
    hang = judge(Harness("t", _spin, (ValueError,), ""), b"", time_limit=0.2)
    assert hang is not None and hang.kind == "hang"


# -- the command ---------------------------------------------------------------------------------


def test_bench_fuzz_refuses_an_unknown_harness_before_it_starts() -> None:
    with pytest.raises(BenchOptionError) as caught:
        FuzzOptions(harnesses=("nope",))
    assert caught.value.flag == "--harness" and "remoting_frame" in str(caught.value)
    result = CliRunner().invoke(app, ["bench", "fuzz", "--harness", "nope"])
    assert result.exit_code == 2, result.output


def test_bench_fuzz_lists_the_harnesses() -> None:
    result = CliRunner().invoke(app, ["bench", "fuzz", "--list"])
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == list(HARNESS_NAMES)


def test_bench_fuzz_runs_a_harness_under_atheris(tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is None:
        unavailable("atheris is not installed (pip install 'rocketq[fuzz]'; make test does)")
    findings = tmp_path / "findings"
    done = subprocess.run(
        [
            sys.executable, "-m", "rocketq", "bench", "fuzz", "--seconds", "5",
            "--harness", "ha_frame", "--findings", str(findings), "--json",
        ],
        capture_output=True, text=True, timeout=150, cwd=tmp_path,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode in (0, 1), out
    report = json.loads(done.stdout.splitlines()[-1])
    (run,) = report["harnesses"]
    assert run["harness"] == "ha_frame" and run["exit_code"] == 0 and not run["stopped"], out
    assert run["executions"] > 100 and run["exec_per_s"] > 0 and run["corpus"] > 0, out
    assert "[ha_frame] executions:" in done.stdout
    assert (findings / "ha_frame" / "fuzz.log").exists()
    assert not (findings / "ha_frame" / "tmp").exists()  # the worker's scratch, removed
    for f in run["findings"]:  # a finding's input and its exception are on disk
        assert Path(f["path"]).exists() and f["exception"]
    assert done.returncode == (1 if run["findings"] else 0), out
