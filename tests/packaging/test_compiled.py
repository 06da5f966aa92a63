"""The compiled hot path and the pure package are one source: a build in place
(``make compiled``, which ``make test`` runs first) compiles exactly the modules listed under
``[tool.rocketq] compiled``; a copy of the sources without the extensions imports the same
names and passes the codec, store and natural batching tests on real processes; extensions
older than their sources are refused at import."""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.packaging.conftest import ROOT
from tools.link_tree import build, package_files

COMPILED: list[str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["rocketq"][
    "compiled"
]
MARKER = ROOT / "rocketq" / "_compiled.json"
EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)

# Each compiled module's public names, as the interpreter running it sees them.
NAMES = r"""
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    out[name] = {"file": module.__file__,
                 "names": sorted(n for n in dir(module) if not n.startswith("_"))}
print(json.dumps(out))
"""


def _public_names(env: dict[str, str] | None = None, cwd: Path = ROOT) -> dict[str, dict]:
    done = subprocess.run(
        [sys.executable, "-c", NAMES, *COMPILED],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, dict] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def pure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as the pure build installs it: its source files (links), no extension."""
    out = tmp_path_factory.mktemp("pure") / "src"
    build(out)
    return out


def _pure_env(pure: Path) -> dict[str, str]:
    # The copy first; the repository after it for the tests package alone (its rocketq
    # folder is shadowed by the copy's).
    return {**os.environ, "PYTHONPATH": f"{pure}{os.pathsep}{ROOT}"}


def test_the_listed_modules_are_compiled_and_no_other() -> None:
    """With a build in place (make test's), exactly the listed modules are compiled;
    without one, none is."""
    if os.environ.get("CI"):
        assert MARKER.exists(), "make test builds the compiled modules first (`make compiled`)"
    found = _public_names()
    runs_compiled = MARKER.exists() and not os.environ.get("ROCKETQ_PURE")
    for name in COMPILED:
        assert found[name]["file"].endswith(EXTENSIONS) == runs_compiled, name
    compiled = {
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*.so")
        if not p.is_relative_to(ROOT / ".venv") and not p.is_relative_to(ROOT / "build")
    }
    # One extension per listed module, beside its source, and the library they share.
    installed = {v.resolve().relative_to(ROOT).as_posix(): k for k, v in package_files().items()}
    modules = set()
    for path in compiled:
        stem = path.split(".", 1)[0]
        if stem == "rocketq/_hotpath__mypyc":
            continue
        source = installed[stem + ".py"]
        modules.add(source[: -len(".py")].replace("/", "."))
    assert modules == (set(COMPILED) if MARKER.exists() else set())


def test_a_build_in_place_removes_extensions_of_modules_no_longer_compiled(
    tmp_path: Path,
) -> None:
    """What an earlier in-place build left beside the source of a module dropped from the
    list would be imported instead of that source: the next build removes it, and keeps
    the listed modules' extensions and their shared library."""
    setup_py = ROOT / "setup.py"
    namespace: dict[str, object] = {"__file__": str(setup_py), "__name__": "setup_parts"}
    # setup.py's helpers, without its setup() call; pointed at a tree of our own.
    exec(setup_py.read_text().split("\nclass BuildExt")[0], namespace)
    namespace["ROOT"] = tmp_path
    suffix = EXTENSIONS[0]
    kept_module = (tmp_path / "storage" / "commitlog").with_suffix(suffix)
    stale = (tmp_path / "storage" / "no_longer_compiled").with_suffix(suffix)
    library = (tmp_path / "rocketq" / "_hotpath__mypyc").with_suffix(suffix)
    for path in (kept_module, stale, library):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    drop = namespace["_drop_stale_extensions"]
    assert callable(drop)
    drop()
    assert kept_module.exists() and library.exists()
    assert not stale.exists()


def test_the_pure_package_has_the_same_names(pure: Path) -> None:
    pure_names = _public_names(_pure_env(pure), cwd=pure)
    here = _public_names()
    for name in COMPILED:
        assert pure_names[name]["file"].endswith(".py"), pure_names[name]["file"]
        assert pure_names[name]["names"] == here[name]["names"], name


def test_the_pure_package_passes_the_hot_path_tests(pure: Path) -> None:
    check = pure / "test_pure.py"
    check.write_text(
        "import importlib\n\n\ndef test_pure() -> None:\n"
        f"    for name in {COMPILED!r}:\n"
        "        assert importlib.import_module(name).__file__.endswith('.py')\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            f"--basetemp={pure.parent / 'basetemp'}",
            "-c",
            str(ROOT / "pyproject.toml"),
            str(check),
            str(ROOT / "tests/remoting/test_command.py"),
            str(ROOT / "tests/storage/test_commitlog.py"),
            str(ROOT / "tests/sdk/test_natural_batch.py"),
            str(ROOT / "tests/integration/test_natural_batch.py")
            + "::test_concurrent_sends_leave_in_batches_each_with_its_own_result",
        ],
        cwd=pure,
        env=_pure_env(pure),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_extensions_older_than_their_sources_are_refused(pure: Path, tmp_path: Path) -> None:
    tree = tmp_path / "src"
    shutil.copytree(pure / "rocketq", tree / "rocketq", ignore=shutil.ignore_patterns("test_*"))
    source = tree / "rocketq" / "remoting" / "command.py"
    marker = tree / "rocketq" / "_compiled.json"
    stamp = {"source": str(source), "mtime_ns": source.stat().st_mtime_ns}

    def import_rocketq() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "import rocketq"],
            cwd=tmp_path,
            env={
                **{k: v for k, v in os.environ.items() if k != "ROCKETQ_PURE"},
                "PYTHONPATH": str(tree),
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    marker.write_text(json.dumps({"rocketq.remoting.command": stamp}))
    assert import_rocketq().returncode == 0
    os.utime(source, ns=(stamp["mtime_ns"] + 10**9, stamp["mtime_ns"] + 10**9))
    done = import_rocketq()
    assert done.returncode != 0
    assert "the compiled rocketq.remoting.command is older than the source" in done.stderr
    assert "make compiled" in done.stderr
    marker.write_text("{not json")
    done = import_rocketq()
    assert done.returncode != 0 and "is unreadable" in done.stderr
