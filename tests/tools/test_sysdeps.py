"""tools/sysdeps.py: the Debian line is unpinned, apt's refusals name the package, the lists
are refreshed when a day old, and the versions in use are read off the commands."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.conftest import ROOT
from tests.system_deps import unavailable
from tools import sysdeps

# What apt-get 2.6 prints when a line does not resolve (trimmed from real runs).
APT_GONE_VERSION = """Reading package lists...
Building dependency tree...
E: Version '150.0.7871.100-1~deb12u1' for 'chromium' was not found
"""
APT_NO_PACKAGE = """Reading package lists...
E: Unable to locate package nosuch-server
"""
APT_HELD = (
    "Some packages could not be installed. This may mean that you have\n"
    "requested an impossible situation ...\n"
    "The following packages have unmet dependencies:\n"
    " chromium : Depends: chromium-common (= 150.0.7871.100-1~deb12u1)"
    " but it is not going to be installed\n"
    " redis-server : Depends: redis-tools (= 5:7.0.15-1~deb12u7)"
    " but 5:7.0.15-1~deb12u10 is to be installed\n"
    "E: Unable to correct problems, you have held broken packages.\n"
)


def need_apt() -> str:
    found = shutil.which("apt-get")
    if found is None:
        unavailable("apt-get is not here: the Debian line cannot be checked")
    return found


def test_the_line_pins_no_debian_revision() -> None:
    line = sysdeps.apt_line()
    assert line == [p.name for p in sysdeps.PACKAGES]
    assert not [name for name in line if "=" in name]
    makefile = (ROOT / "Makefile").read_text()
    assert "tools/sysdeps.py install" in makefile
    assert "tools/sysdeps.py check" in makefile
    assert "deb12u" not in makefile
    # `make test` starts with it: the versions head the output.
    test_line = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert test_line.split()[1] == "sysdeps"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (APT_GONE_VERSION, ["chromium: version '150.0.7871.100-1~deb12u1' is not in"]),
        (APT_NO_PACKAGE, ["nosuch-server: no such package"]),
        (
            APT_HELD,
            ["chromium: unmet dependency: chromium-common", "redis-server: unmet dependency"],
        ),
    ],
)
def test_apt_refusals_name_the_package(output: str, expected: list[str]) -> None:
    found = sysdeps.unresolved(output)
    assert len(found) == len(expected)
    for reason, start in zip(found, expected, strict=True):
        assert reason.startswith(start), reason


def test_a_vanished_version_fails_naming_the_package() -> None:
    need_apt()
    with pytest.raises(sysdeps.SysdepsError) as err:
        sysdeps.simulate(["iproute2=0.0-vanished", "nosuch-rocketq-package"])
    message = str(err.value)
    assert "the apt line does not resolve" in message
    assert "iproute2: version '0.0-vanished' is not in the package lists" in message
    assert "nosuch-rocketq-package: no such package" in message


def test_the_line_resolves_on_a_bare_machine() -> None:
    """As apt would install it where none of it is installed: every package of the line is
    in the plan."""
    need_apt()
    plan = sysdeps.simulate(sysdeps.apt_line())
    planned = {line.split()[1] for line in plan.splitlines() if line.startswith("Inst ")}
    assert set(sysdeps.apt_line()) <= planned


def test_lists_older_than_a_day_are_refreshed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamp = tmp_path / "periodic" / "update-success-stamp"
    monkeypatch.setattr(sysdeps, "UPDATE_STAMP", stamp)
    monkeypatch.setattr(sysdeps, "LISTS_DIR", tmp_path / "lists")
    assert sysdeps.lists_age_s() == float("inf")
    stamp.parent.mkdir()
    stamp.touch()
    day_old = stamp.stat().st_mtime - sysdeps.LISTS_MAX_AGE_S - 60
    os.utime(stamp, (day_old, day_old))
    ran: list[list[str]] = []

    def fake_run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(sysdeps.subprocess, "run", fake_run)
    monkeypatch.setattr(sysdeps.os, "geteuid", lambda: 0)
    assert sysdeps.refresh_lists() is True
    assert ran == [["apt-get", "update", "-q"]]
    assert sysdeps.lists_age_s() < 60  # the stamp says when
    assert sysdeps.refresh_lists() is False  # fresh now: no second update
    assert len(ran) == 1
    monkeypatch.setattr(sysdeps.os, "geteuid", lambda: 1000)
    os.utime(stamp, (day_old, day_old))
    assert sysdeps.refresh_lists() is False  # only root can


def fake_command(bin_dir: Path, name: str, prints: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\necho '{prints}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_versions_are_read_off_the_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_command(tmp_path, "redis-server", "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc")
    fake_command(tmp_path, "nats-server", "nats-server: v2.9.10")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert sysdeps.command_version(
        "redis-server",
    ) == ("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc")
    assert sysdeps.version_numbers("Redis server v=7.0.15 sha=00000000:0") == (7, 0, 15)
    assert sysdeps.version_numbers("nats-server: v2.9.10") == (2, 9, 10)
    assert sysdeps.version_numbers("Chromium 156.0.8078.108 built on Debian") == (156, 0, 8078)
    assert sysdeps.version_numbers("no digits") is None
    assert sysdeps.command_version("chromium") is None
    missing = {p.name for p in sysdeps.missing()}
    assert "redis-server" not in missing and "nats-server" not in missing
    assert "chromium" in missing
    report = "\n".join(sysdeps.versions_report())
    assert "nats-server: v2.9.10" in report
    assert "chromium: missing" in report


def test_check_prints_the_versions_in_use() -> None:
    need_apt()
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "sysdeps.py"), "check"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sysdeps: the apt line resolves" in done.stdout
    listed = done.stdout.split("sysdeps: versions in use\n")[1]
    for package in sysdeps.PACKAGES:
        assert f"  {package.name} " in listed
