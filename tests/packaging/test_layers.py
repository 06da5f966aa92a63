"""DESIGN.md's layer rule as `make lint` checks it: lint-imports with the contracts of
pyproject.toml over the linked namespace. A forbidden import or a new import cycle breaks
the check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.conftest import ROOT
from tools.link_tree import build

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    build(tmp_path / "src")
    return tmp_path / "src"


def add_module(tree: Path, name: str, text: str) -> None:
    """A new module in the linked tree only; the sources are not touched."""
    (tree / (name.replace(".", "/") + ".py")).write_text(text)


def test_the_sources_keep_every_contract(tree: Path) -> None:
    done = lint_imports(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_storage_importing_the_broker_breaks_the_check(tree: Path) -> None:
    add_module(tree, "rocketq.storage.bad", "from rocketq.broker.config import BrokerConfig\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "storage imports nothing of ours but the shared model (and no protos) BROKEN" in (
        done.stdout
    )
    assert "rocketq.storage.bad -> rocketq.broker.config (l.1)" in done.stdout


def test_the_sdk_importing_a_server_breaks_the_check(tree: Path) -> None:
    add_module(tree, "rocketq.sdk.bad", "import rocketq.storage.commitlog\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "the SDK imports no server package, only the shared model BROKEN" in done.stdout


def test_a_server_importing_the_cli_breaks_the_check(tree: Path) -> None:
    add_module(tree, "rocketq.nameserver.bad", "from rocketq.cluster import cli\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "never import the CLI BROKEN" in done.stdout


def test_storage_importing_grpc_breaks_the_check(tree: Path) -> None:
    add_module(tree, "rocketq.storage.bad", "import grpc\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "storage has no networking: no gRPC, no protobuf BROKEN" in done.stdout


def test_an_import_cycle_breaks_the_check(tree: Path) -> None:
    # Imports for type checking count: the broker's services once imported Broker that way.
    add_module(
        tree,
        "rocketq.broker.bad",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from rocketq.broker.broker import Broker\n",
    )
    broker = tree / "rocketq" / "broker" / "broker.py"
    text = broker.read_text()
    broker.unlink()  # a copy, not the link: the source stays as it is
    broker.write_text(text + "\nfrom rocketq.broker import bad\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "no import cycles between modules (imports for type checking count) BROKEN" in (
        done.stdout
    )
    assert "rocketq.broker.bad" in done.stdout and "rocketq.broker.broker" in done.stdout
