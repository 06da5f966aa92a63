"""What each peer needs on this machine, and installing it when ``--install`` allows.

Servers come from Debian packages (``apt-get install``), clients from PyPI through the
``rocketq[bench]`` extra. Without ``--install`` a missing piece is reported with the
package to install and the flag that would install it; the run goes on without that
system and reports it as missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

BENCH_EXTRA: Final = "pip install 'rocketq[bench]'"
_APT_ENV: Final = {"DEBIAN_FRONTEND": "noninteractive"}


class SystemMissingError(Exception):
    """A peer cannot run here; the message says what to install and how."""


@dataclass(frozen=True)
class Requirement:
    """A server binary (from a Debian package) and Python client modules (from PyPI)."""

    binary: str  # absolute path or a name looked up on PATH
    deb_package: str
    modules: tuple[tuple[str, str], ...] = ()  # (import name, PyPI name)

    def missing_binary(self) -> bool:
        return _which(self.binary) is None

    def missing_modules(self) -> list[tuple[str, str]]:
        return [(mod, pkg) for mod, pkg in self.modules if importlib.util.find_spec(mod) is None]


def _which(binary: str) -> str | None:
    if os.path.isabs(binary):
        return binary if os.access(binary, os.X_OK) else None
    return shutil.which(binary)


Runner = Callable[[Sequence[str]], int]


def _run(argv: Sequence[str]) -> int:
    return subprocess.run(list(argv), env={**os.environ, **_APT_ENV}, check=False).returncode


@dataclass
class Installer:
    """Checks requirements; installs them only when ``allowed``. ``run`` runs a command
    and returns its exit status (tests pass a fake)."""

    allowed: bool
    echo: Callable[[str], None]
    run: Runner = _run
    _apt_updated: bool = False

    def ensure(self, system: str, req: Requirement) -> None:
        """Return when ``req`` is met (after installing, if allowed); else SystemMissingError."""
        if req.missing_binary():
            if not self.allowed:
                raise SystemMissingError(
                    f"{system}: server {req.binary} not found; install the Debian package "
                    f"{req.deb_package} (apt-get install {req.deb_package}) or run with --install"
                )
            self._apt_install(system, req.deb_package)
            if req.missing_binary():
                raise SystemMissingError(
                    f"{system}: {req.binary} still missing after installing {req.deb_package}"
                )
        missing = req.missing_modules()
        if missing:
            names = " ".join(pkg for _, pkg in missing)
            if not self.allowed:
                raise SystemMissingError(
                    f"{system}: Python client {names} not installed; {BENCH_EXTRA} "
                    f"(or pip install {names}), or run with --install"
                )
            self.echo(f"installing {names} (the rocketq[bench] extra's clients) ...")
            status = self.run([sys.executable, "-m", "pip", "install", "--quiet", *names])
            importlib.invalidate_caches()
            if status != 0 or req.missing_modules():
                raise SystemMissingError(f"{system}: pip install {names} failed; try {BENCH_EXTRA}")

    def _apt_install(self, system: str, package: str) -> None:
        if not self._apt_updated:
            self.echo("apt-get update ...")
            self.run(["apt-get", "update", "-q"])
            self._apt_updated = True
        self.echo(f"installing {package} for {system} (apt-get install {package}) ...")
        status = self.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", package])
        if status != 0:
            raise SystemMissingError(
                f"{system}: apt-get install {package} failed (status {status})"
            )
