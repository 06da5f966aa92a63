"""DESIGN.md's layer rule as `make lint` checks it: lint-imports with the contracts of
pyproject.toml over the linked namespace. An import up a floor, between packages of one
floor, into a forbidden module, or a new import cycle breaks the check."""

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


FLOORS = "The floors, from the shared kernel up to the CLI BROKEN"


def test_every_package_is_on_a_floor() -> None:
    """A new folder must be given its floor: the layers contract names every package the
    wheel installs under rocketq (the facade's own modules aside)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (floors,) = [c for c in contracts if c["type"] == "layers"]
    on_floors = {name.strip() for layer in floors["layers"] for name in layer.split("|")}
    installed = {
        package.split(".")[1]
        for package in config["tool"]["setuptools"]["packages"]
        if package.count(".") >= 1
    }
    assert installed <= on_floors, installed - on_floors


@pytest.mark.parametrize(
    ("module", "text", "arrow"),
    [
        # the shared kernel reaching up to the wire
        (
            "rocketq.common.bad",
            "from rocketq.remoting.codes import RequestCode\n",
            "rocketq.common.bad -> rocketq.remoting.codes",
        ),
        # storage reaching up to the broker
        (
            "rocketq.storage.bad",
            "from rocketq.broker.config import BrokerConfig\n",
            "rocketq.storage.bad -> rocketq.broker.config",
        ),
        # a server reaching up to the CLI
        ("rocketq.nameserver.bad", "from rocketq.cli import main\n", "rocketq.cli.main"),
        # the launcher reaching up to the chaos harness, only while type checking
        (
            "rocketq.cluster.bad",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from rocketq.chaos.runner import ChaosOptions\n",
            "rocketq.cluster.bad -> rocketq.chaos.runner",
        ),
    ],
)
def test_an_upward_import_breaks_the_check(tree: Path, module: str, text: str, arrow: str) -> None:
    add_module(tree, module, text)
    done = lint_imports(tree)
    assert done.returncode == 1
    assert FLOORS in done.stdout
    assert arrow in done.stdout


def test_packages_on_one_floor_do_not_import_each_other(tree: Path) -> None:
    add_module(tree, "rocketq.sdk.bad", "from rocketq.nameserver.config import NameServerConfig\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert FLOORS in done.stdout
    assert "rocketq.sdk.bad -> rocketq.nameserver.config" in done.stdout


def test_the_sdk_importing_the_store_breaks_the_check(tree: Path) -> None:
    # Below the SDK's floor, but a client never reaches into the store.
    add_module(tree, "rocketq.sdk.bad", "import rocketq.storage.commitlog\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "clients and the nameserver never import the store or the broker BROKEN" in done.stdout


def test_storage_importing_grpc_breaks_the_check(tree: Path) -> None:
    add_module(tree, "rocketq.storage.bad", "import grpc\n")
    done = lint_imports(tree)
    assert done.returncode == 1
    assert "storage has no networking: no remoting, no gRPC, no protobuf BROKEN" in done.stdout


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


def test_the_architecture_page_draws_the_floors_of_the_contract() -> None:
    """docs/img/floors.svg names the floors of the layers contract, top to bottom."""
    import re
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (floors,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    svg = (ROOT / "docs" / "img" / "floors.svg").read_text()
    drawn = re.findall(r'<text [^>]*font-weight="bold"[^>]*>([^<]+)</text>', svg)
    assert drawn == floors["layers"]
