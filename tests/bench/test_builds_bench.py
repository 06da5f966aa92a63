"""``rocketq bench builds``: a benchmark on the compiled build and on the pure package in one
run, the child processes told apart by ``ROCKETQ_PURE``, and clear errors for what cannot
run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocketq.bench import builds_bench
from rocketq.bench.report import BenchOptionError


def test_figures_are_read_by_key_or_dotted_path() -> None:
    doc = {"msgs_per_s": 10.5, "cases": {"remoting": {"round_trips_per_s": 7}}, "l": [{"x": 1}]}
    assert builds_bench._figure(doc, "msgs_per_s") == 10.5
    assert builds_bench._figure(doc, "cases.remoting.round_trips_per_s") == 7.0
    assert builds_bench._figure(doc, "l.0.x") == 1.0
    for metric, says in (("nope", "has no 'nope'"), ("cases", "not a number"), ("l.5.x", "has no")):
        with pytest.raises(BenchOptionError, match=says) as info:
            builds_bench._figure(doc, metric)
        assert info.value.flag == "--metric"


def test_what_cannot_run_is_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(BenchOptionError, match="name the benchmark"):
        builds_bench.run([], rounds=1)
    with pytest.raises(BenchOptionError, match="at least 1"):
        builds_bench.run(["transport"], rounds=0)
    monkeypatch.setattr(builds_bench, "compiled_build", lambda: False)
    with pytest.raises(builds_bench.BuildsError, match="no compiled build"):
        builds_bench.run(["transport"], rounds=1)


def test_a_failing_benchmark_is_reported_with_its_output() -> None:
    with pytest.raises(builds_bench.BuildsError, match="on the pure build failed"):
        builds_bench.run_once(["no-such-benchmark"], "pure", timeout=60)


def test_both_builds_run_in_one_command(tmp_path: Path) -> None:
    """On a compiled build (make test's) both builds run; on a pure one (no compiler, or
    before `make compiled`) the command says there is nothing to compare."""
    compiled = builds_bench.compiled_build()
    if os.environ.get("CI"):
        assert compiled, "make test runs on the compiled build (`make compiled`)"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocketq",
            "bench",
            "builds",
            "--rounds",
            "1",
            "--metric",
            "cases.remoting.round_trips_per_s",
            "--json",
            "--",
            "transport",
            "--duration",
            "0.2",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if not compiled:
        assert done.returncode == 1
        assert "this installation has no compiled build to compare" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bench"] == "builds" and result["rounds"] == 1
    assert len(result["compiled"]) == len(result["pure"]) == len(result["ratios"]) == 1
    assert result["compiled"][0] > 0 and result["pure"][0] > 0
    assert "compiled / pure (cases.remoting.round_trips_per_s): median" in done.stdout
