"""Link the ``rocketq`` namespace into one directory tree, as the wheel lays it out.

The source folders (``cluster/``, ``storage/``, ``sdk/`` ...) stay at the top of the
repository and setuptools installs them as ``rocketq.cluster``, ``rocketq.storage`` ...
(``[tool.setuptools] packages`` and ``package-dir`` in pyproject.toml). The editable
install reaches them through an import hook, which tools that read files rather than
import them (mypy, import-linter) cannot see. This script builds ``.build/src/rocketq/``:
real directories, one symbolic link per source file, from the same two settings, so those
tools see exactly the names the wheel installs.

    python tools/link_tree.py [--out .build/src]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / ".build" / "src"
# What a package directory contributes: modules, stubs, the typing marker and package data.
SUFFIXES = (".py", ".pyi", ".proto")
MARKERS = ("py.typed",)


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Every package of the distribution and the folder it comes from."""
    tool = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = tool["package-dir"]
    found: dict[str, Path] = {}
    for package in tool["packages"]:
        prefix = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
        rest = package[len(prefix) :].lstrip(".").replace(".", "/")
        found[package] = root / mapping[prefix] / rest
    return found


def package_data(root: Path = ROOT) -> dict[str, list[str]]:
    """``[tool.setuptools.package-data]``: package -> glob patterns under its folder."""
    tool = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    data: dict[str, list[str]] = tool.get("package-data", {})
    return data


def package_files(root: Path = ROOT) -> dict[str, Path]:
    """Installed path (``rocketq/storage/commitlog.py``) -> source file, for every file
    (package data in sub-folders too, such as the console's templates)."""
    files: dict[str, Path] = {}
    data = package_data(root)
    for package, folder in package_dirs(root).items():
        if not (folder / "__init__.py").is_file():
            raise SystemExit(f"package {package}: {folder} has no __init__.py")
        prefix = package.replace(".", "/")
        for path in sorted(folder.iterdir()):
            if path.is_file() and (path.suffix in SUFFIXES or path.name in MARKERS):
                files[f"{prefix}/{path.name}"] = path
        for pattern in data.get(package, []):
            for path in sorted(folder.glob(pattern)):
                if path.is_file():
                    files[f"{prefix}/{path.relative_to(folder).as_posix()}"] = path
    return files


def build(out: Path = DEFAULT_OUT, root: Path = ROOT) -> int:
    """(Re)build the tree under ``out``; returns the number of files linked."""
    files = package_files(root)
    if out.exists():
        shutil.rmtree(out)
    for installed, source in files.items():
        target = out / installed
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(source, target.parent), target)
    return len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to build the tree")
    args = parser.parse_args()
    count = build(args.out.resolve())
    print(f"linked {count} files of the rocketq namespace under {args.out}")


if __name__ == "__main__":
    main()
