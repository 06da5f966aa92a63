"""One import namespace: the wheel installs ``rocketq`` and nothing else at the top level,
and the wheel, the editable install and the tree mypy and import-linter read
(``make tree``) hold the same modules."""

from __future__ import annotations

import importlib.util
import json
import os
import zipfile
from pathlib import Path

from tests.packaging.conftest import ROOT, Installed
from tools.link_tree import build, package_files

GENERIC = (
    "cli",
    "cluster",
    "common",
    "remoting",
    "sdk",
    "storage",
    "broker",
    "bench",
    "replication",
    "nameserver",
    "chaos",
    "console",
)

# Imports every module of the installed package and reports where each came from.
WALK = r"""
import importlib, importlib.util, json, pkgutil, sys
import rocketq
found = {}
for info in pkgutil.walk_packages(rocketq.__path__, "rocketq."):
    module = importlib.import_module(info.name)
    found[info.name] = module.__file__
generic = {n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]}
print(json.dumps({"rocketq": rocketq.__file__, "modules": found, "generic": generic}))
"""


def module_names(installed_paths: list[str]) -> set[str]:
    """Module names of installed file paths (``rocketq/sdk/producer.py`` ...)."""
    names = set()
    for path in installed_paths:
        if not path.endswith(".py"):
            continue
        parts = path[: -len(".py")].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.add(".".join(parts))
    return names


def test_the_wheel_holds_rocketq_alone(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"rocketq", "rocketq-0.1.0.dist-info"}
    assert "rocketq/py.typed" in names
    assert "rocketq/common/proto/rocketq/v1/rocketq.proto" in names
    # Exactly the files the link tree (and so mypy and import-linter) sees.
    files = sorted(n for n in names if n.startswith("rocketq/"))
    assert files == sorted(package_files())


def test_import_rocketq_from_the_installed_wheel(installed: Installed, tmp_path: Path) -> None:
    done = installed.run("-c", WALK, *GENERIC, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rocketq"].startswith(str(installed.site_packages))
    assert report["generic"] == dict.fromkeys(GENERIC, False)
    modules = report["modules"]
    assert all(path.startswith(str(installed.site_packages)) for path in modules.values())
    assert set(modules) | {"rocketq"} == module_names(list(package_files()))


def test_the_editable_install_resolves_the_same_names_to_the_sources() -> None:
    files = package_files()
    for name in sorted(module_names(list(files))):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        installed = name.replace(".", "/") + (
            "/__init__.py" if spec.submodule_search_locations is not None else ".py"
        )
        source = files[installed]
        if not spec.origin.endswith(".py"):  # compiled (make compiled): beside its source
            assert list(source.parent.glob(f"{source.stem}.*.so")), name
            continue
        assert Path(spec.origin).resolve() == source.resolve(), name


def test_the_link_tree_mirrors_the_wheel_layout(tmp_path: Path) -> None:
    count = build(tmp_path / "src")
    linked = sorted(
        str(Path(dirpath, f).relative_to(tmp_path / "src"))
        for dirpath, _, filenames in os.walk(tmp_path / "src")
        for f in filenames
    )
    assert count == len(linked)
    assert linked == sorted(package_files())
    commitlog = tmp_path / "src" / "rocketq" / "storage" / "commitlog.py"
    assert commitlog.resolve() == (ROOT / "storage" / "commitlog.py").resolve()


def test_python_m_rocketq_runs_the_cli(installed: Installed, tmp_path: Path) -> None:
    done = installed.run("-m", "rocketq", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Usage: rocketq" in done.stdout
    script = installed.python.parent / "rocketq"
    assert script.exists()
    assert "rocketq.cli.main" in script.read_text()


def test_the_installed_wheel_runs_a_local_cluster(installed: Installed, tmp_path: Path) -> None:
    """`rocketq cluster up` from the wheel: its nodes run the environment's interpreter and
    import the installed package, not a source tree."""
    data = tmp_path / "cluster"
    up = installed.run("-m", "rocketq", "cluster", "up", "--data-dir", str(data), cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        doc = json.loads((data / "cluster.json").read_text())
        pids = [node["pid"] for node in doc["nameservers"] + doc["brokers"]]
        assert pids
        for pid in pids:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert cmdline[0].decode() == str(installed.python), cmdline
            assert b"rocketq.cli.main" in cmdline
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert not any(e.startswith(b"PYTHONPATH=") for e in env), env
        status = installed.run(
            "-m", "rocketq", "cluster", "status", "--data-dir", str(data), cwd=tmp_path
        )
        assert status.returncode == 0, status.stderr
        assert "broker-a" in status.stdout
    finally:
        down = installed.cluster_down(data, cwd=tmp_path)
        assert down.returncode == 0, down.stdout + down.stderr
