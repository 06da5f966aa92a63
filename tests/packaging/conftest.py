"""The distribution as a user installs it: a wheel built by ``pip wheel``, installed into a
virtual environment of its own."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
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
    ".git",
    ".venv",
    ".build",
    "build",
    "data",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    "dist",
    "*.so",
    "_compiled.json",
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

    def cluster_down(self, data: Path, *, cwd: Path) -> subprocess.CompletedProcess[str]:
        """``rocketq cluster down`` for the cluster kept in ``data``; then every node its
        cluster.json names that still runs this environment's Python is killed by pid, so a
        failed stop leaves no server behind."""
        down = self.run("-m", "rocketq", "cluster", "down", "--data-dir", str(data), cwd=cwd)
        try:
            doc = json.loads((data / "cluster.json").read_text())
        except (OSError, ValueError):
            return down
        for node in doc.get("nameservers", []) + doc.get("brokers", []):
            pid = int(node.get("pid") or 0)
            with contextlib.suppress(OSError):
                argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if pid > 0 and argv0.decode() == str(self.python):
                    os.kill(pid, signal.SIGKILL)
        return down


@pytest.fixture(scope="package")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds of the sources."""
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the sources: an in-place build keeps a build/ directory whose
    # stale files would end up in the next wheel.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    dist = work / "dist"
    # The pure wheel: tests/k8s/test_image.py builds the compiled one, from the Dockerfile's
    # build context.
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
        env={**os.environ, "ROCKETQ_PURE": "1"},
        check=True,
        timeout=300,
    )
    (built,) = dist.glob("rocketq-*.whl")
    return built


def purelib(python: Path | str) -> Path:
    """An environment's site-packages."""
    return Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )


def new_env(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A new virtual environment without pip; its Python."""
    env = tmp_path_factory.mktemp(name) / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    return env / "bin" / "python"


def pip_install(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This environment's pip installing into another one."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="package")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The wheel alone in a new environment that borrows this one's packages."""
    python = new_env(tmp_path_factory, "installed")
    done = pip_install(python, "--no-deps", "--no-index", str(wheel))
    assert done.returncode == 0, done.stdout + done.stderr
    site = purelib(python)
    # The dependencies (typer, protobuf ...) come from this environment's site-packages as a
    # plain path entry: a .pth file there is not run, so this environment's editable
    # install of rocketq is not seen by the new one.
    (site / "rocketq-test-dependencies.pth").write_text(f"{purelib(sys.executable)}\n")
    yield Installed(wheel, python, site)


@pytest.fixture(scope="package")
def clean(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """``pip install <the wheel>`` in a new environment with nothing else: the wheel's own
    dependencies, resolved by pip as a user's install resolves them (no extras)."""
    python = new_env(tmp_path_factory, "clean")
    done = pip_install(python, "--disable-pip-version-check", str(wheel))
    assert done.returncode == 0, done.stdout + done.stderr
    return Installed(wheel, python, purelib(python))
