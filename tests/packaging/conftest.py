"""The distribution as a user installs it: a wheel built by ``pip wheel``, installed into a
virtual environment of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a build leaves beside the sources, and what is not the project's.
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", ".build", "build", "data", "*.egg-info", "__pycache__", ".*_cache", "dist"
)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    site_packages: Path

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """The environment's Python, isolated: no working directory or PYTHONPATH on the
        path, so only what the wheel installed (and its dependencies) can be imported. The
        processes it starts inherit no PYTHONPATH either."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return subprocess.run(
            [str(self.python), "-I", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="package")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the sources: an in-place build keeps a build/ directory whose
    # stale files would end up in the next wheel.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    dist = work / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = dist.glob("rocketq-*.whl")
    env = work / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The dependencies (grpcio, typer ...) come from this environment's site-packages as a
    # plain path entry: a .pth file there is not run, so this environment's editable
    # install of rocketq is not seen by the new one.
    deps = Path(
        subprocess.run(
            [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "rocketq-test-dependencies.pth").write_text(f"{deps}\n")
    yield Installed(wheel, python, site)
