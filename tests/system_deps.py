"""The commands of Debian's packages a test needs (``tools/sysdeps.py`` installs them as root,
unpinned), checked for the capability the test relies on: present, and at least the major
version that has it. Missing or too old: the test skips, and fails when ``CI`` is set."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

from tools.sysdeps import command_version, version_numbers


def unavailable(why: str) -> NoReturn:
    """A missing real dependency: skip locally, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def require_command(command: str, *, minimum: int | None = None, package: str) -> str:
    """The path of ``command`` after checking that its major version is at least
    ``minimum``; the version line is returned through ``command_version`` when needed."""
    path = shutil.which(command)
    if path is None:
        unavailable(
            f"{command} is not installed (Debian package {package}: `make sysdeps` as root)"
        )
    if minimum is not None:
        said = command_version(command) or ""
        numbers = version_numbers(said)
        if numbers is None:
            unavailable(f"{command} printed no version ({said!r}); {minimum} or newer is needed")
        if numbers[0] < minimum:
            unavailable(
                f"{command} {'.'.join(map(str, numbers))} is too old: the tests need "
                f"{minimum} or newer (Debian package {package})"
            )
    return path


def major_version(command: str) -> int | None:
    """The major version a command prints, or None."""
    numbers = version_numbers(command_version(command) or "")
    return numbers[0] if numbers else None
