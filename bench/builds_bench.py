"""The compiled build against the pure package in one run (``rocketq bench builds``).

Any other benchmark runs as a child ``rocketq bench <args> --json``, in rounds that
alternate the two builds (the first of each round takes turns): the compiled build as
installed, and the pure package (``ROCKETQ_PURE=1``: every compiled module loads from its
source, in the child and in every server it starts). Each round's compiled/pure ratio of the
chosen figure, and their median, are the result.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from rocketq.bench.report import BenchOptionError

BUILDS: Final = ("compiled", "pure")
# Where each benchmark's JSON line keeps its headline rate.
DEFAULT_METRIC: Final = "msgs_per_s"


class BuildsError(RuntimeError):
    """A child benchmark that failed, ran too long or printed no usable result."""


# A probe of the compiled build: the remoting codec is in every list.
PROBE: Final = "rocketq.remoting.command"


def compiled_build() -> bool:
    """Whether this installation runs compiled modules (``make compiled`` or a compiled
    wheel) and ``ROCKETQ_PURE`` is not set."""
    module = importlib.import_module(PROBE)
    return str(module.__file__).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def _figure(doc: Any, metric: str) -> float:
    """``metric`` of a JSON result: a top-level key, or a dotted path (``results.0.tps``)."""
    value = doc
    for part in metric.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise BenchOptionError("--metric", f"the benchmark's JSON has no {metric!r}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchOptionError("--metric", f"{metric!r} is {value!r}, not a number")
    return float(value)


def run_once(args: Sequence[str], build: str, timeout: float) -> dict[str, Any]:
    """One child benchmark on ``build``; its JSON result (the last line it printed)."""
    env = {k: v for k, v in os.environ.items() if k != "ROCKETQ_PURE"}
    if build == "pure":
        env["ROCKETQ_PURE"] = "1"
    argv = [sys.executable, "-m", "rocketq", "bench", *args]
    if "--json" not in args:
        argv.append("--json")
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise BuildsError(
            f"`rocketq bench {' '.join(args)}` on the {build} build ran past {timeout:.0f} s"
        ) from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise BuildsError(
            f"`rocketq bench {' '.join(args)}` on the {build} build failed "
            f"(exit {done.returncode}): {(done.stderr or done.stdout).strip()[-600:]}"
        )
    try:
        doc = json.loads(lines[-1])
    except ValueError:
        raise BuildsError(
            f"`rocketq bench {' '.join(args)}` printed no JSON result last: {lines[-1][:200]!r}"
        ) from None
    if not isinstance(doc, dict):
        raise BuildsError("the benchmark's JSON result is not an object")
    return doc


def run(
    args: Sequence[str],
    *,
    rounds: int,
    metric: str = DEFAULT_METRIC,
    timeout: float = 900.0,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """``rounds`` rounds of the benchmark on both builds; per-round figures and ratios."""
    if not args or args[0] in ("builds",):
        raise BenchOptionError("--", "name the benchmark to compare: `-- produce --embedded`")
    if rounds < 1:
        raise BenchOptionError("--rounds", "--rounds must be at least 1")
    if not compiled_build():
        raise BuildsError(
            "this installation has no compiled build to compare (build it with `make "
            "compiled`, or install a compiled wheel), or ROCKETQ_PURE is set"
        )
    figures: dict[str, list[float]] = {b: [] for b in BUILDS}
    ratios: list[float] = []
    for i in range(rounds):
        order = BUILDS if i % 2 == 0 else BUILDS[::-1]
        got: dict[str, float] = {}
        for build in order:
            got[build] = _figure(run_once(args, build, timeout), metric)
            figures[build].append(got[build])
            echo(f"round {i + 1}/{rounds} {build:<8} {metric} {got[build]:,.1f}")
        ratio = got["compiled"] / got["pure"] if got["pure"] else float("inf")
        ratios.append(ratio)
        echo(f"round {i + 1}/{rounds} compiled / pure {ratio:.3f}")
    result = {
        "bench": "builds",
        "args": list(args),
        "metric": metric,
        "rounds": rounds,
        "compiled": figures["compiled"],
        "pure": figures["pure"],
        "ratios": [round(r, 3) for r in ratios],
        "median_ratio": round(statistics.median(ratios), 3),
    }
    echo(
        f"compiled / pure ({metric}): median {result['median_ratio']:.3f} of {rounds} rounds; "
        f"compiled median {statistics.median(figures['compiled']):,.1f}, "
        f"pure median {statistics.median(figures['pure']):,.1f}"
    )
    return result
