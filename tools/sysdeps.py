"""The Debian packages the tests and benchmarks use: one table, and the apt line made of it.

No package is pinned to a Debian revision: Debian replaces revisions with its security
updates and the mirror drops the old ones, so a pin breaks every new machine. The line asks
for the suite's current version; the tests that use a command check the capability they need
(a minimum major version where it matters, ``tests/system_deps.py``).

    python3 tools/sysdeps.py install   # as root: apt-get install what has a command missing
    python3 tools/sysdeps.py check     # prove the whole line resolves, print the versions in use

``check`` refreshes the package lists when they are more than a day old (as root), then
asks ``apt-get install --simulate`` for the whole line as a machine without any of the
packages would (an empty dpkg status), so a package or version that vanished from the
mirror fails here, naming the package, even on a machine that has every command already.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Package:
    """A Debian package, the commands it brings and what they are for."""

    name: str
    commands: tuple[str, ...]
    why: str


PACKAGES: tuple[Package, ...] = (
    Package("iproute2", ("ip",), "network namespaces of the Raft partition and boot tests"),
    Package("nftables", ("nft",), "the rules that cut those namespaces apart"),
    Package(
        "prometheus",
        ("prometheus", "promtool"),
        "promtool for the alert rules, the server of `rocketq cluster up --monitor`",
    ),
    Package("chromium", ("chromium",), "the console's browser tests (headless)"),
    Package("chromium-driver", ("chromedriver",), "Selenium's driver of that Chromium"),
    Package("redis-server", ("redis-server",), "a peer broker of `rocketq bench peers`"),
    Package("nats-server", ("nats-server",), "a peer broker of `rocketq bench peers`"),
    Package("nodejs", ("node",), "ali-ons, the stock RocketMQ 4.x client of tests/conformance"),
    Package("npm", ("npm",), "installs ali-ons from its lockfile (npm ci)"),
)

# How each command tells its version (the first line of what it prints).
VERSION_ARGS: dict[str, tuple[str, ...]] = {
    "ip": ("-V",),
    "nft": ("--version",),
    "prometheus": ("--version",),
    "promtool": ("--version",),
    "chromium": ("--version",),
    "chromedriver": ("--version",),
    "redis-server": ("--version",),
    "nats-server": ("--version",),
    "node": ("--version",),
    "npm": ("--version",),
}

APT_OPTIONS = ("-y", "-q", "--no-install-recommends")
LISTS_DIR = Path("/var/lib/apt/lists")
# Debian's stamp of the last successful `apt-get update` (apt.systemd.daily keeps it too).
UPDATE_STAMP = Path("/var/lib/apt/periodic/update-success-stamp")
LISTS_MAX_AGE_S = 24 * 3600
VERSION_TIMEOUT_S = 20
APT_TIMEOUT_S = 900

_NUMBER = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


class SysdepsError(Exception):
    """The apt line does not resolve, or apt-get failed; the message names the packages."""


def apt_line(packages: Sequence[Package] = PACKAGES) -> list[str]:
    """The package names of the line, unpinned."""
    return [p.name for p in packages]


def missing(packages: Sequence[Package] = PACKAGES) -> list[Package]:
    """The packages with a command this machine does not have."""
    return [p for p in packages if any(shutil.which(c) is None for c in p.commands)]


def command_version(command: str) -> str | None:
    """The first line a command prints of its version, or None when it is not here."""
    path = shutil.which(command)
    if path is None:
        return None
    try:
        done = subprocess.run(
            [path, *VERSION_ARGS.get(command, ("--version",))],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(no version: {exc})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else "(no version printed)"


def version_numbers(text: str) -> tuple[int, ...] | None:
    """The first dotted version number in a version line: ``Chromium 156.0.8078.108`` ->
    (156, 0, 8078); ``nats-server: v2.9.10`` -> (2, 9, 10)."""
    found = _NUMBER.search(text)
    if found is None:
        return None
    return tuple(int(g) for g in found.groups() if g is not None)


def package_version(name: str) -> str | None:
    """The version dpkg has installed of a package, or None."""
    if shutil.which("dpkg-query") is None:
        return None
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev}${Version}", name],
        capture_output=True,
        text=True,
        timeout=VERSION_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.startswith("ii"):
        return None
    return done.stdout[3:].strip() or None


def lists_age_s(now: float | None = None) -> float:
    """Seconds since the package lists were last refreshed (inf when never)."""
    stamps = []
    for path in (UPDATE_STAMP, LISTS_DIR / "partial"):
        try:
            stamps.append(path.stat().st_mtime)
        except OSError:
            continue
    if not stamps:
        return float("inf")
    return (time.time() if now is None else now) - max(stamps)


def refresh_lists(*, force: bool = False) -> bool:
    """``apt-get update`` when the lists are older than a day (or ``force``); root only.
    True when it ran."""
    if os.geteuid() != 0 or (not force and lists_age_s() < LISTS_MAX_AGE_S):
        return False
    done = _apt("update", "-q")
    if done.returncode != 0:
        raise SysdepsError(f"apt-get update failed (exit status {done.returncode}):\n{done.stderr}")
    UPDATE_STAMP.parent.mkdir(parents=True, exist_ok=True)
    UPDATE_STAMP.touch()
    return True


_UNLOCATED = re.compile(r"Unable to locate package (\S+)")
_NO_VERSION = re.compile(r"Version '([^']*)' for '([^']*)' was not found")
_NO_CANDIDATE = re.compile(r"Package '([^']*)' has no installation candidate")
_UNMET = re.compile(r"^\s*(\S+) : (?:Depends|PreDepends|Conflicts|Breaks): (.*)$", re.MULTILINE)


def unresolved(output: str) -> list[str]:
    """Why apt could not resolve a line, one entry per package named: ``chromium: version
    '150.0.7871.100-1~deb12u1' is not in the package lists``."""
    found: list[str] = []
    for name in _UNLOCATED.findall(output):
        found.append(f"{name}: no such package in the package lists")
    for version, name in _NO_VERSION.findall(output):
        found.append(f"{name}: version {version!r} is not in the package lists")
    for name in _NO_CANDIDATE.findall(output):
        found.append(f"{name}: no installable version (only referred to by another package)")
    for name, what in _UNMET.findall(output):
        found.append(f"{name}: unmet dependency: {what.strip()}")
    return found


def simulate(line: Sequence[str]) -> str:
    """``apt-get install --simulate`` of ``line`` as on a machine with none of it installed
    (an empty dpkg status): apt's plan, or SysdepsError naming each package at fault."""
    done = _simulate(line)
    if done.returncode == 0:
        return done.stdout
    # apt stops at the first package it cannot find: ask for each alone to name them all.
    reasons: list[str] = []
    if len(line) > 1:
        for item in line:
            alone = _simulate([item])
            if alone.returncode != 0:
                reasons += unresolved(alone.stdout + alone.stderr) or [f"{item}: does not resolve"]
    output = done.stdout + done.stderr
    reasons = reasons or unresolved(output) or [s.strip() for s in output.splitlines()[-5:]]
    raise SysdepsError(
        "the apt line does not resolve (apt-get install --simulate "
        + " ".join(line)
        + "):\n  "
        + "\n  ".join(reasons)
    )


def _simulate(line: Sequence[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="rocketq-apt-") as tmp:
        status = Path(tmp) / "status"
        status.write_bytes(b"")
        return _apt(
            "install", "--simulate", *APT_OPTIONS, "-o", f"Dir::State::status={status}", *line
        )


def install(packages: Sequence[Package]) -> None:
    """``apt-get install`` of these packages in one line (after a refresh of old lists)."""
    refresh_lists()
    line = apt_line(packages)
    done = _apt("install", *APT_OPTIONS, *line)
    if done.returncode != 0:
        output = done.stdout + done.stderr
        reasons = unresolved(output) or [output.strip()[-2000:]]
        raise SysdepsError(
            f"apt-get install {' '.join(line)} failed (exit status {done.returncode}):\n  "
            + "\n  ".join(reasons)
        )


def versions_report(packages: Sequence[Package] = PACKAGES) -> list[str]:
    """One line per package: its installed version and what each of its commands says."""
    lines = []
    for package in packages:
        installed = package_version(package.name) or "not installed by dpkg"
        said = []
        for command in package.commands:
            version = command_version(command)
            said.append(f"{command}: {version if version is not None else 'missing'}")
        lines.append(f"  {package.name:<16} {installed:<32} {'; '.join(said)}")
    return lines


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    """apt-get with its output captured, in English, asking nothing."""
    return subprocess.run(
        ["apt-get", *args],
        capture_output=True,
        text=True,
        timeout=APT_TIMEOUT_S,
        check=False,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"},
    )


def _cmd_install(_: argparse.Namespace) -> int:
    todo = missing()
    if not todo:
        return 0
    names = ", ".join(p.name for p in todo)
    if shutil.which("apt-get") is None:
        print(f"sysdeps: no apt-get here; install {names} yourself", file=sys.stderr)
        return 0
    if os.geteuid() != 0:
        print(f"sysdeps: not root; {names} stay missing (run `make sysdeps` as root)")
        return 0
    print(f"sysdeps: apt-get install {' '.join(apt_line(todo))}")
    install(todo)
    return 0


def _cmd_check(_: argparse.Namespace) -> int:
    if shutil.which("apt-get") is None:
        print("sysdeps: no apt-get here: nothing proves the Debian line resolves")
    else:
        refreshed = refresh_lists()
        age = lists_age_s()
        plan = simulate(apt_line())
        count = sum(1 for line in plan.splitlines() if line.startswith("Inst "))
        how = "refreshed now" if refreshed else f"{age / 3600:.1f} h old"
        print(
            f"sysdeps: the apt line resolves ({len(PACKAGES)} packages, {count} with what "
            f"they need on a bare machine; package lists {how})"
        )
    print("sysdeps: versions in use")
    for line in versions_report():
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="apt-get install what is missing (as root)").set_defaults(
        run=_cmd_install
    )
    sub.add_parser("check", help="prove the apt line resolves; print versions").set_defaults(
        run=_cmd_check
    )
    sub.add_parser("line", help="print the apt line").set_defaults(
        run=lambda _: print(" ".join(apt_line())) or 0
    )
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
    except SysdepsError as exc:
        print(f"sysdeps: error: {exc}", file=sys.stderr)
        return 1
    return result


if __name__ == "__main__":
    sys.exit(main())
