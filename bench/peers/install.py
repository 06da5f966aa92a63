"""What each peer needs on this machine, and installing it when ``--install`` allows.

Servers come from Debian packages (``apt-get install``), clients from PyPI, pinned as the
``rocketq[bench]`` extra pins them (``redis>=5`` ...; tests/bench checks that the systems'
pins and pyproject.toml's extra are the same list) and installed by this interpreter's pip,
so the run that installed them can import them. Without ``--install`` a missing piece is
reported with the package to install and the flag that would install it; the run goes on
without that system and reports it as missing.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import shutil
import site
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

BENCH_EXTRA: Final = "pip install 'rocketq[bench]'"
_APT_ENV: Final = {"DEBIAN_FRONTEND": "noninteractive"}
# Debian puts some servers (nats-server) in sbin, which a user's PATH often leaves out.
_SBIN_DIRS: Final = ("/usr/local/sbin", "/usr/sbin", "/sbin")
# The exit status of a command that could not be started (as a shell reports it).
NOT_FOUND_STATUS: Final = 127


class SystemMissingError(Exception):
    """A peer cannot run here; the message says what to install and how."""


@dataclass(frozen=True)
class Client:
    """A Python client of a peer: the module it imports and the requirement that installs
    it, as pyproject.toml's ``bench`` extra writes it (``Client("nats", "nats-py>=2.7")``)."""

    module: str
    requirement: str


@dataclass(frozen=True)
class Requirement:
    """A server binary (from a Debian package) and Python clients (from PyPI)."""

    binary: str  # absolute path, or a name looked up on PATH and then in the sbin dirs
    deb_package: str
    clients: tuple[Client, ...] = ()

    def server_path(self) -> str | None:
        """Where the server binary is; None if it is not installed."""
        return _which(self.binary)

    def missing_binary(self) -> bool:
        return self.server_path() is None

    def missing_clients(self) -> list[Client]:
        return [c for c in self.clients if importlib.util.find_spec(c.module) is None]


def _which(binary: str) -> str | None:
    if os.path.isabs(binary):
        return binary if os.access(binary, os.X_OK) else None
    return shutil.which(binary) or shutil.which(binary, path=os.pathsep.join(_SBIN_DIRS))


def pip_install_argv(requirements: Sequence[str]) -> list[str]:
    """This interpreter's pip installing ``requirements``, one argument each."""
    return [sys.executable, "-m", "pip", "install", "--quiet", *requirements]


def _refresh_import_paths() -> None:
    """Let this process import what pip just installed: forget the import system's
    directory listings, and take in the user site dir if pip created it just now (pip
    installs there when site-packages is not writable)."""
    importlib.invalidate_caches()
    if site.ENABLE_USER_SITE:
        user_site = site.getusersitepackages()
        if os.path.isdir(user_site) and user_site not in sys.path:
            site.addsitedir(user_site)


Runner = Callable[[Sequence[str]], int]


def _run(argv: Sequence[str]) -> int:
    try:
        return subprocess.run(list(argv), env={**os.environ, **_APT_ENV}, check=False).returncode
    except OSError:  # no such command (no apt-get on this machine)
        return NOT_FOUND_STATUS


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
                    f"{system}: {req.binary} still missing after apt-get installed "
                    f"{req.deb_package}; is it on PATH?"
                )
        missing = req.missing_clients()
        if missing:
            self._pip_install(system, missing, req)

    def _pip_install(self, system: str, missing: list[Client], req: Requirement) -> None:
        modules = ", ".join(c.module for c in missing)
        argv = pip_install_argv([c.requirement for c in missing])
        command = shlex.join(argv)
        if not self.allowed:
            raise SystemMissingError(
                f"{system}: Python client {modules} not installed; {BENCH_EXTRA} "
                f"(or {shlex.join(['pip', 'install', *(c.requirement for c in missing)])}), "
                "or run with --install"
            )
        self.echo(f"installing the Python client of {system} (rocketq[bench]): {command} ...")
        status = self.run(argv)
        _refresh_import_paths()
        if status != 0:
            raise SystemMissingError(
                f"{system}: {command} failed (exit status {status}); see pip's output above, "
                f"or install the clients yourself ({BENCH_EXTRA})"
            )
        still = [c.module for c in req.missing_clients()]
        if still:
            raise SystemMissingError(
                f"{system}: pip installed {' '.join(c.requirement for c in missing)}, but "
                f"{sys.executable} still cannot import {', '.join(still)}; pip may have put "
                "them outside this interpreter's sys.path (PIP_TARGET, PIP_PREFIX?)"
            )

    def _apt_install(self, system: str, package: str) -> None:
        if not self._apt_updated:
            self.echo("apt-get update ...")
            self.run(["apt-get", "update", "-q"])
            self._apt_updated = True
        self.echo(f"installing {package} for {system} (apt-get install {package}) ...")
        status = self.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", package])
        if status == 0:
            return
        if status == NOT_FOUND_STATUS:
            hint = f"there is no apt-get here: install {system}'s server yourself"
        elif os.geteuid() != 0:
            hint = f"apt-get needs root: run as root, or sudo apt-get install {package}"
        else:
            hint = "see apt-get's output above"
        raise SystemMissingError(
            f"{system}: apt-get install {package} failed (exit status {status}); {hint}"
        )
