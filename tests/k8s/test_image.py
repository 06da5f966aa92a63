"""The container image, without a container engine: the Dockerfile copies paths that exist,
the .dockerignore leaves everything the wheel needs in the build context, the sources the
build stage copies build the rocketq wheel, the final stage installs it with its grpc extra
(pip itself resolving the Dockerfile's command), and the image agrees with the Helm chart
(user, ports, store volume)."""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tools.gen_manifests import CHART_DIR
from tools.link_tree import package_files

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
BASE_IMAGE = "python:3.11-slim"
UID = 10001
STORE = "/home/rocketq/store"
# The wheel's extras the image installs: grpc for the apache.rocketmq.v2 endpoint.
IMAGE_EXTRAS = {"grpc"}


@dataclass
class Instruction:
    command: str  # upper case: FROM, COPY ...
    args: str


@dataclass
class Stage:
    name: str | None
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, command: str) -> list[str]:
        return [i.args for i in self.instructions if i.command == command]

    def last(self, command: str) -> str:
        found = self.all(command)
        assert found, f"stage {self.name or self.base} has no {command}"
        return found[-1]


@dataclass(frozen=True)
class Copy:
    sources: list[str]
    dest: str


def instructions(text: str) -> Iterator[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    logical = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        if logical.strip():
            command, _, args = logical.strip().partition(" ")
            yield Instruction(command.upper(), args.strip())
        logical = ""


def stages(text: str = "") -> list[Stage]:
    found: list[Stage] = []
    for ins in instructions(text or DOCKERFILE.read_text()):
        if ins.command == "FROM":
            words = ins.args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            found.append(Stage(name, words[0]))
        else:
            assert found, f"{ins.command} before FROM"
            found[-1].instructions.append(ins)
    return found


def copies(stage: Stage) -> list[Copy]:
    """The stage's COPY instructions from the build context (``--from`` ones left out)."""
    found = []
    for args in stage.all("COPY"):
        words = shlex.split(args)
        flags = [w for w in words if w.startswith("--")]
        if any(f.startswith("--from=") for f in flags):
            continue
        rest = args.split(maxsplit=len(flags))[-1] if flags else args
        paths = json.loads(rest) if rest.lstrip().startswith("[") else shlex.split(rest)
        assert len(paths) >= 2, f"COPY {args}: no destination"
        found.append(Copy(paths[:-1], paths[-1]))
    return found


def context_copies() -> list[Copy]:
    return [c for stage in stages() for c in copies(stage)]


# .dockerignore, as Docker reads it (moby/patternmatcher): patterns relative to the context
# root, `*` and `?` within one path element, `**` across any number, `!` re-includes, the
# last matching pattern wins, and a pattern matching a directory covers what it holds.


def _pattern(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif c == "*":
            out, i = out + "[^/]*", i + 1
        elif c == "?":
            out, i = out + "[^/]", i + 1
        elif c == "[":
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            if body.startswith(("!", "^")):
                body = "^" + body[1:]
            out, i = out + "[" + body + "]", end + 1
        elif c == "\\" and i + 1 < len(pattern):
            out, i = out + re.escape(pattern[i + 1]), i + 2
        else:
            out, i = out + re.escape(c), i + 1
    return re.compile(out + "$")


def ignore_patterns(text: str = "") -> list[tuple[bool, re.Pattern[str]]]:
    """(re-include?, pattern) for each line of .dockerignore."""
    found = []
    for raw in (text or DOCKERIGNORE.read_text()).splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        cleaned = line.lstrip("!").strip().lstrip("/")
        cleaned = re.sub(r"/+$", "", re.sub(r"^(\./)+", "", cleaned))
        found.append((negate, _pattern(cleaned)))
    return found


def ignored(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = Path(path).parts
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for negate, pattern in patterns:
        if any(pattern.match(p) for p in prefixes):
            result = not negate
    return result


def test_the_ignore_matcher_reads_patterns_as_docker_does() -> None:
    patterns = ignore_patterns("docs\n**/__pycache__\n*.whl\n**/*.py[cod]\n!docs/keep.md\n")
    assert ignored("docs/a.png", patterns)
    assert not ignored("docs/keep.md", patterns)
    assert ignored("broker/__pycache__/x.cpython-311.pyc", patterns)
    assert ignored("a.whl", patterns) and not ignored("dist/a.whl", patterns)
    assert not ignored("broker/broker.py", patterns)
    assert not ignored("README.md", patterns)


def test_every_copied_path_exists() -> None:
    sources = [s for c in context_copies() for s in c.sources]
    assert sources, "the Dockerfile copies nothing from the context"
    missing = [s for s in sources if not list(ROOT.glob(s.rstrip("/") or "."))]
    assert missing == []


def test_the_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    patterns = ignore_patterns()
    sources = [s.rstrip("/") for c in context_copies() for s in c.sources]
    assert [s for s in sources if ignored(s, patterns)] == []
    # Every file the wheel installs comes from a copied path and stays in the context.
    files = {str(p.relative_to(ROOT)) for p in package_files().values()}
    assert [f for f in sorted(files) if ignored(f, patterns)] == []
    assert [f for f in sorted(files) if not any(f.startswith(s + "/") for s in sources)] == []


def build_context(destination: Path) -> Path:
    """The build stage's /src: what its COPYs take from the context, minus .dockerignore."""
    patterns = ignore_patterns()
    (build,) = [s for s in stages() if s.name == "build"]
    for copy in copies(build):
        target = destination / copy.dest
        for source in copy.sources:
            path = ROOT / source
            if path.is_dir():
                # COPY dir/ dest/ copies the directory's contents into dest.
                for file in sorted(p for p in path.rglob("*") if p.is_file()):
                    relative = str(file.relative_to(ROOT))
                    if not ignored(relative, patterns):
                        out = target / file.relative_to(path)
                        out.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(file, out)
            else:
                out = target / path.name if copy.dest.endswith("/") else target
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, out)
    return destination


def test_the_build_stage_sources_build_the_wheel(tmp_path: Path) -> None:
    """What `pip wheel .` sees in the build stage builds the rocketq wheel, holding the
    files the project's own wheel holds (tests/packaging builds that one, pure, from the
    whole checkout; this one is built from the Dockerfile's copies alone) and the compiled
    hot path."""
    (build,) = [s for s in stages() if s.name == "build"]
    assert build.last("WORKDIR") == "/src"
    assert all(c.dest.endswith("/") for c in copies(build)), "COPY destinations are folders"
    context = build_context(tmp_path / "src")
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "-w", str(dist), "."],
        cwd=context,
        # Compiled without the C compiler's optimizations: the same modules, built sooner.
        env={**os.environ, "ROCKETQ_MYPYC_OPT_LEVEL": "0"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = dist.glob("rocketq-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(n for n in archive.namelist() if n.startswith("rocketq/"))
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    extensions = [n for n in names if n.endswith(suffix)]
    assert [n for n in names if n not in extensions] == sorted(package_files())
    # The hot path compiled (a C compiler is here as in the build stage), beside its source.
    compiled = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["rocketq"]["compiled"]
    assert sorted(extensions) == sorted(
        [f"rocketq/_hotpath__mypyc{suffix}"] + [m.replace(".", "/") + suffix for m in compiled]
    )


def test_the_image_runs_rocketq_as_user_10001() -> None:
    all_stages = stages()
    assert {s.base for s in all_stages} == {BASE_IMAGE}
    final = all_stages[-1]
    assert final.name != "build"
    assert final.last("USER").split(":")[0] in {str(UID), "rocketq"}
    run = " ".join(final.all("RUN"))
    assert f"--uid {UID}" in run and f"--gid {UID}" in run and "--home-dir /home/rocketq" in run
    assert json.loads(final.last("ENTRYPOINT")) == ["rocketq"]
    assert json.loads(final.last("CMD")) == ["--help"]
    assert json.loads(final.last("VOLUME")) == [STORE]
    assert "pip install" in run and "rocketq-*.whl" in run


def test_the_image_agrees_with_the_chart() -> None:
    """The chart's user is the image's, its store mount the image's volume, and every port
    it names is one the image exposes."""
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    pod = values["podSecurityContext"]
    assert pod["runAsUser"] == pod["runAsGroup"] == pod["fsGroup"] == UID
    exposed = {int(p) for p in " ".join(stages()[-1].all("EXPOSE")).split()}
    ports = {*values["nameserver"]["ports"].values(), *values["broker"]["ports"].values()}
    assert ports == exposed
    statefulset = (CHART_DIR / "templates" / "broker-statefulset.yaml").read_text()
    assert f"mountPath: {STORE}" in statefulset


@dataclass(frozen=True)
class Run:
    """A RUN instruction: its --mount flags (key=value pairs) and its shell command."""

    mounts: list[dict[str, str]]
    command: str


def runs(stage: Stage) -> list[Run]:
    """The stage's RUN instructions, their leading --flags parsed."""
    found = []
    for args in stage.all("RUN"):
        words = args.split()
        count = next((i for i, w in enumerate(words) if not w.startswith("--")), len(words))
        flags = words[:count]
        command = args.split(maxsplit=count)[-1] if count else args
        mounts = [
            dict(pair.split("=", 1) for pair in f.removeprefix("--mount=").split(","))
            for f in flags
            if f.startswith("--mount=")
        ]
        found.append(Run(mounts, command))
    return found


def wheel_install(stage: Stage) -> tuple[Run, str]:
    """The stage's RUN that installs the build stage's wheel, and where it mounts /dist."""
    for run in runs(stage):
        for mount in run.mounts:
            if mount.get("from") == "build" and mount.get("source") == "/dist":
                return run, mount["target"]
    raise AssertionError(f"stage {stage.name or stage.base} mounts no /dist of the build stage")


def stub_wheel(directory: Path, name: str, version: str, metadata: list[str]) -> Path:
    """A wheel holding only its metadata: all pip reads to resolve it."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{info}/METADATA": "\n".join(
            ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *metadata, ""]
        ),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def test_the_image_installs_the_wheel_with_the_grpc_extra(tmp_path: Path) -> None:
    """The final stage's install command, run by a shell as the image build runs it, with
    /dist holding a wheel of rocketq's name, version and extras' requirements, and `pip`
    standing for pip resolving offline from stubs (--dry-run): what it would install is
    rocketq with the grpc extra and that extra's requirements (grpcio)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    assert set(extras) >= IMAGE_EXTRAS
    assert "grpcio" in {Requirement(r).name for r in extras["grpc"]}
    run, target = wheel_install(stages()[-1])
    dist, index = tmp_path / "dist", tmp_path / "index"
    dist.mkdir()
    index.mkdir()
    declared = []
    for extra in IMAGE_EXTRAS:
        declared.append(f"Provides-Extra: {extra}")
        for line in extras[extra]:
            requirement = Requirement(line)
            declared.append(f'Requires-Dist: {line}; extra == "{extra}"')
            # A version every lower bound admits.
            assert requirement.specifier.contains("999.0"), line
            stub_wheel(index, requirement.name, "999.0", [])
    stub_wheel(dist, project["name"], project["version"], declared)
    report = tmp_path / "report.json"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_pip = bin_dir / "pip"
    fake_pip.write_text(
        "#!/bin/sh\n"
        '[ "$1" = install ] || { echo "pip $1: not an install" >&2; exit 64; }\n'
        "shift\n"
        f"exec {shlex.quote(sys.executable)} -m pip install --dry-run --ignore-installed \\\n"
        f"  --no-index --quiet --find-links {shlex.quote(str(index))} \\\n"
        f'  --report {shlex.quote(str(report))} "$@"\n'
    )
    fake_pip.chmod(0o755)
    done = subprocess.run(
        ["/bin/sh", "-c", run.command.replace(target, str(dist))],
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    installs = json.loads(report.read_text())["install"]
    found = {i["metadata"]["name"]: i for i in installs}
    wanted = {Requirement(line).name for extra in IMAGE_EXTRAS for line in extras[extra]}
    assert set(found) == {project["name"], *wanted}
    assert set(found[project["name"]]["requested_extras"]) == IMAGE_EXTRAS


@pytest.mark.parametrize("line", ["COPY --from=build /dist /dist", "COPY --link a b /x/"])
def test_copy_lines_are_parsed(line: str) -> None:
    (stage,) = stages(f"FROM {BASE_IMAGE}\n{line}\n")
    expected = [] if "--from" in line else [Copy(["a", "b"], "/x/")]
    assert copies(stage) == expected
