"""Running a test again on the pure package: compiled code calls its own functions
directly, past any patch, and keeps no class docstrings, so a test that patches the hot path
or reads those docstrings runs in a child pytest with ``ROCKETQ_PURE=1`` (every compiled
module loads from its source) when the build in place is compiled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def compiled(module_file: str | None) -> bool:
    """Whether a module was loaded from a compiled extension."""
    return not str(module_file or ".py").endswith(".py")


def ran_pure(request: pytest.FixtureRequest, module: ModuleType) -> bool:
    """When ``module`` is compiled (its code calls its own functions and classes directly,
    past any patch), run the requesting test on the pure package instead -> True: the
    caller returns. False: the module is the source, run the test here."""
    if not compiled(module.__file__):
        return False
    rerun_pure(request)
    return True


def rerun_pure(request: pytest.FixtureRequest) -> None:
    """Run the requesting test in a child pytest on the pure package; fail with its output
    if it fails there."""
    # Its temporary files under this test's own: a child with a base of its own would
    # rotate pytest's numbered base directories and delete those of the running suite.
    basetemp = request.getfixturevalue("tmp_path_factory").mktemp("pure-rerun")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            # Hypothesis's pytest plugin costs the child about a second to load; a test
            # with @given runs without it all the same.
            "-p",
            "no:hypothesispytest",
            f"--basetemp={basetemp}",
            request.node.nodeid,
        ],
        cwd=ROOT,
        env={**os.environ, "ROCKETQ_PURE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout, done.stdout[-2000:]
