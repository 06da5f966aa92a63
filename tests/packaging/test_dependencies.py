"""The dependencies say what the code uses: every runtime dependency is imported by the code
it serves, every third-party import of the package is declared (in the core, or in the extra
of the module that imports it), nothing of the runtime is pinned exactly, and the wheel
installed alone in a clean environment runs a cluster, a send and a consume without the
console's packages."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.packaging.conftest import ROOT, Installed
from tools.link_tree import package_dirs

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CORE = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
EXTRAS = {
    name: [Requirement(r) for r in reqs]
    for name, reqs in PYPROJECT["project"]["optional-dependencies"].items()
}

# The modules that make up an extra: what they import may come from that extra.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "console": ("rocketq.console", "rocketq.cli.console_cli"),
    "spark": ("rocketq.sdk.spark", "rocketq.bench.spark_bench"),
    "bench": ("rocketq.bench.peers.systems",),
    "chart": ("rocketq.bench.peers.chart", "rocketq.chaos.report"),
    "fuzz": ("rocketq.bench.fuzz.worker", "rocketq.bench.fuzz.v2_targets"),
    "tls": ("rocketq.cluster.security",),
    "profile": ("rocketq.bench.profiling",),
    "grpc": ("rocketq.broker.grpc_v2",),
    "v5client": ("rocketq.bench.v5_driver", "rocketq.chaos.v5_workload"),
}

# Dependencies the code reaches through another package, each with the import of ours that
# needs it (checked to be there): starlette imports these only when asked for the feature.
THROUGH: dict[str, tuple[str, str]] = {
    "jinja2": ("console", "starlette.templating"),
    "itsdangerous": ("console", "starlette.middleware.sessions"),
    # Request.form() parses a form with python-multipart (starlette.formparsers).
    "python-multipart": ("console", "request.form()"),
    # The v2 endpoint's harnesses start the endpoint, which serves with grpcio.
    "grpcio": ("fuzz", "endpoint_class()"),
    # A program, not a module: bench/profiling.py finds and runs it.
    "py-spy": ("profile", "find_py_spy()"),
}

# Import names of distributions not installed here (the dev environment has every extra,
# so this stays empty unless an extra is left out of `make test`).
IMPORT_NAMES_OF_ABSENT: dict[str, str] = {}


@dataclass(frozen=True)
class Use:
    module: str  # rocketq.console.app
    path: Path
    name: str  # the imported top-level name: starlette


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.AST) -> list[str]:
    """The absolute imports of a module (``if TYPE_CHECKING:`` blocks left out)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def runtime_modules() -> dict[str, Path]:
    """Every module the wheel installs, by name."""
    modules = {}
    for package, folder in package_dirs().items():
        for path in sorted(folder.glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            modules[name] = path
    return modules


def third_party_uses() -> list[Use]:
    uses = []
    for module, path in runtime_modules().items():
        for imported in _imports(ast.parse(path.read_text())):
            top = imported.split(".")[0]
            if top in sys.stdlib_module_names or top == "rocketq":
                continue
            uses.append(Use(module, path, imported))
    return uses


def extra_of(module: str) -> str | None:
    for extra, prefixes in EXTRA_MODULES.items():
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return extra
    return None


@functools.cache
def _providers() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def distributions_of(import_name: str) -> set[str]:
    """The distributions (canonical names) that provide a top-level import name."""
    found = _providers().get(import_name, [])
    names = {canonicalize_name(d) for d in found}
    if import_name in IMPORT_NAMES_OF_ABSENT:
        names.add(canonicalize_name(IMPORT_NAMES_OF_ABSENT[import_name]))
    return names


def names(requirements: list[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in requirements}


def test_every_third_party_import_is_declared_where_its_module_is() -> None:
    core = names(CORE)
    undeclared = []
    for use in third_party_uses():
        top = use.name.split(".")[0]
        provided = distributions_of(top)
        assert provided, f"{use.module} imports {top}, which no installed distribution provides"
        extra = extra_of(use.module)
        allowed = core | (names(EXTRAS[extra]) if extra else set())
        if not provided & allowed:
            where = f"the {extra} extra" if extra else "the core dependencies"
            undeclared.append(f"{use.module} imports {top} ({sorted(provided)}), not in {where}")
    assert not undeclared, "\n".join(undeclared)


def test_every_declared_dependency_is_used() -> None:
    by_module: dict[str, set[str]] = defaultdict(set)
    for use in third_party_uses():
        by_module[use.module].add(use.name)
    sources = {m: p.read_text() for m, p in runtime_modules().items()}

    def imported_by(modules: list[str]) -> set[str]:
        found = set()
        for module in modules:
            for name in by_module[module]:
                found |= distributions_of(name.split(".")[0])
        return found

    core_modules = [m for m in runtime_modules() if extra_of(m) is None]
    unused = sorted(names(CORE) - imported_by(core_modules))
    assert not unused, f"core dependencies no runtime module imports: {unused}"
    for extra, requirements in EXTRAS.items():
        modules = [m for m in runtime_modules() if extra_of(m) == extra]
        used = imported_by(modules)
        for name in sorted(names(requirements) - used):
            assert name in THROUGH, f"the {extra} extra's {name} is imported by none of {modules}"
            needed_by, via = THROUGH[name]
            assert needed_by == extra, name
            if via.endswith("()"):
                assert any(via in sources[m] for m in modules), f"{name}: no {via} in {extra}"
            else:
                assert any(via in by_module[m] for m in modules), f"{name}: no import of {via}"


def test_runtime_dependencies_have_no_exact_pins() -> None:
    for requirement in CORE + [r for reqs in EXTRAS.values() for r in reqs]:
        for spec in requirement.specifier:
            assert spec.operator not in ("==", "==="), f"{requirement} pins a runtime dependency"
        assert any(s.operator == ">=" for s in requirement.specifier), (
            f"{requirement} has no lower bound"
        )


def test_the_dev_tools_are_dependency_groups_that_make_test_installs() -> None:
    groups = PYPROJECT["dependency-groups"]
    assert {"lint", "test", "dev"} <= set(groups)
    assert "dev" not in PYPROJECT["project"]["optional-dependencies"]
    makefile = (ROOT / "Makefile").read_text()
    extras = ",".join(EXTRAS)
    assert f'-e ".[{extras}]" --group dev' in makefile
    # `make run` installs what it starts, the console and the brokers' v2 endpoint, and
    # what the README's secured cluster needs besides (`rocketq cluster up --tls`).
    assert re.search(r'install --quiet -e "\.\[console,tls,grpc\]"', makefile)
    assert re.search(r"cluster up .*--console --grpc", makefile)


def test_the_code_needing_the_generator_is_not_installed() -> None:
    """grpcio-tools generates the checked-in protobuf modules; no installed module uses it
    and it is a dependency group, not a runtime dependency. grpc itself is used only by the
    apache.rocketmq.v2 endpoint (the ``grpc`` extra)."""
    assert not any(u.name.split(".")[0] == "grpc_tools" for u in third_party_uses())
    users = {u.module for u in third_party_uses() if u.name.split(".")[0] == "grpc"}
    assert users and all(m.startswith("rocketq.broker.grpc_v2") for m in users), users
    assert any("grpcio-tools" in str(r) for r in PYPROJECT["dependency-groups"]["proto"])


# A send and a consume through the installed SDK and CLI.
def _cli(clean: Installed, cwd: Path, *args: str) -> str:
    done = clean.run("-m", "rocketq", *args, cwd=cwd)
    assert done.returncode == 0, f"rocketq {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_the_wheel_alone_runs_a_cluster_a_send_and_a_consume(
    clean: Installed, tmp_path: Path
) -> None:
    listed = clean.run(
        "-c",
        "import importlib.metadata as m, json;"
        "print(json.dumps(sorted(d.metadata['Name'].lower() for d in m.distributions())))",
        cwd=tmp_path,
    )
    have = set(json.loads(listed.stdout))
    for absent in ("starlette", "uvicorn", "jinja2", "pygal", "grpcio", "grpcio-tools"):
        assert absent not in have, f"pip install rocketq brought {absent}"
    assert "Usage: rocketq" in _cli(clean, tmp_path, "--help")
    console = clean.run("-m", "rocketq", "console", cwd=tmp_path)
    assert console.returncode == 1
    assert "pip install 'rocketq[console]'" in console.stderr
    data = tmp_path / "cluster"
    up = clean.run(
        "-m", "rocketq", "cluster", "up", "--data-dir", str(data), "--namesrv-port", "0",
        cwd=tmp_path,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        (addr,) = re.findall(r"namesrv addr: (\S+)", up.stdout)
        sent = _cli(clean, tmp_path, "send", "-n", addr, "-t", "Wheel", "-b", "hi", "-c", "3")
        assert sent.count("SEND_OK") == 3, sent
        got = _cli(
            clean, tmp_path, "consume", "-n", addr, "-t", "Wheel", "-g", "wheel",
            "--from-first", "-c", "3", "--timeout", "30", "--json",
        )  # fmt: skip
        docs = [d for line in got.splitlines() if line[:1] == "[" for d in json.loads(line)]
        bodies = sorted(d["body"] for d in docs)
        assert bodies == ["hi #0", "hi #1", "hi #2"], got
        refused = clean.run(
            "-m", "rocketq", "cluster", "up", "--data-dir", str(tmp_path / "other"),
            "--namesrv-port", "0", "--console",
            cwd=tmp_path,
        )  # fmt: skip
        assert refused.returncode == 1
        assert "pip install 'rocketq[console]'" in refused.stderr
        assert not (tmp_path / "other" / "cluster.json").exists()
    finally:
        down = clean.cluster_down(data, cwd=tmp_path)
        assert down.returncode == 0, down.stdout + down.stderr
