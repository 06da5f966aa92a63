"""The compiled hot path: setuptools builds the modules named under ``[tool.rocketq]
compiled`` in pyproject.toml with mypyc, from the same sources the pure package installs,
when it can; everything else is declared in pyproject.toml.

- ``pip wheel .`` / ``pip install .`` (and the Dockerfile) compile when a C compiler and mypy
  are present (mypy is a build requirement) and ``ROCKETQ_PURE`` is not set; without a
  compiler the package installs as Python alone, and works the same.
- ``make compiled`` builds the extensions in place beside the sources
  (``python setup.py build_ext --inplace``) and records which sources they came from in
  ``rocketq/_compiled.json``: ``rocketq`` refuses to import over extensions older than their
  sources (``make compiled`` rebuilds them, ``make pure`` removes them).

mypyc derives module names from file paths, and the source folders sit at the top of the
repository (``remoting/`` is ``rocketq.remoting``): the build links them into one tree under
``build/mypyc/src`` first, as the wheel lays them out.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The compiled modules share one C library, rocketq/_hotpath__mypyc.
GROUP = "rocketq._hotpath"
MARKER = "_compiled.json"


def compiled_modules() -> list[str]:
    """The modules the compiled build compiles (``[tool.rocketq] compiled``)."""
    modules: list[str] = PYPROJECT["tool"]["rocketq"]["compiled"]
    return modules


def source_of(module: str) -> Path:
    """A module's source file in the repository (``rocketq.remoting.command`` ->
    ``remoting/command.py``), through ``[tool.setuptools.package-dir]``."""
    mapping: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
    package, _, name = module.rpartition(".")
    prefix = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
    rest = package[len(prefix) :].lstrip(".").replace(".", "/")
    return ROOT / mapping[prefix] / rest / f"{name}.py"


def _compiler_present() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


def _link_tree(out: Path) -> None:
    """``out/rocketq/...``: one symbolic link per package folder, named as installed."""
    if out.exists():
        shutil.rmtree(out)
    mapping: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
    top = out / "rocketq"
    top.mkdir(parents=True)
    for path in (ROOT / mapping["rocketq"]).glob("*.py"):
        os.symlink(path, top / path.name)
    for package, folder in mapping.items():
        if package != "rocketq":
            os.symlink(ROOT / folder, out / package.replace(".", "/"), target_is_directory=True)


def extensions() -> list[Any]:
    """mypyc's extensions of the compiled modules, or none for a pure build."""
    if os.environ.get("ROCKETQ_PURE"):
        return []
    if not _compiler_present():
        print("rocketq: no C compiler: building the pure-Python package", file=sys.stderr)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("rocketq: mypyc is missing: building the pure-Python package", file=sys.stderr)
        return []
    build = ROOT / "build" / "mypyc"
    tree = build / "src"
    _link_tree(tree)
    paths = [str(tree / (m.replace(".", "/") + ".py")) for m in compiled_modules()]
    cwd = os.getcwd()
    os.chdir(tree)  # mypy names the modules from the tree
    try:
        extensions = list(
            mypycify(
                [os.path.relpath(p, tree) for p in paths],
                opt_level=os.environ.get("ROCKETQ_MYPYC_OPT_LEVEL", "3"),
                target_dir=str(build / "c"),
                multi_file=True,  # one C file per module, compiled side by side
                group_name=GROUP,
            )
        )
    finally:
        os.chdir(cwd)
    # With a group inside a package, mypyc writes the group's header under the package's
    # folder and the modules' C files beside it, including it by its bare name.
    for ext in extensions:
        ext.include_dirs.append(str(build / "c" / GROUP.rpartition(".")[0]))
    return extensions


def _drop_stale_extensions() -> None:
    """Remove the extensions an earlier in-place build left beside the source of a module
    no longer compiled: Python would import them instead of the source."""
    keep = {source_of(m).with_suffix("") for m in compiled_modules()}
    mapping: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
    for folder in mapping.values():
        for path in (ROOT / folder).rglob("*.so"):
            module = path.parent / path.name.split(".", 1)[0]
            if module not in keep and not path.name.startswith("_hotpath__mypyc"):
                print(f"rocketq: removing {path.relative_to(ROOT)} (no longer compiled)")
                path.unlink()


class BuildExt(build_ext):
    """An in-place build also writes ``rocketq/_compiled.json``: each compiled module's
    source and its modification time, which ``rocketq`` checks at import."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # one C file per module: compile them side by side
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        super().run()
        if self.inplace and self.extensions:
            _drop_stale_extensions()
            stamps = {}
            for module in compiled_modules():
                source = source_of(module)
                stamps[module] = {"source": str(source), "mtime_ns": source.stat().st_mtime_ns}
            (ROOT / "rocketq" / MARKER).write_text(json.dumps(stamps, indent=1) + "\n")


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
