"""Small disks for a chaos run's brokers, and the files that fill them.

``disk-full`` needs a filesystem per broker small enough to fill in a moment: as root,
:class:`SmallDisks` mounts a tmpfs of ``size_mib`` MiB on each broker's home (the directory
that holds its ``store``) before the broker first starts, and unmounts each on
:meth:`SmallDisks.close`, which the run calls on every way out. A tmpfs backs
``fallocate`` and reports ENOSPC as a real disk does, and costs memory only for what is
written to it. :class:`Filler` writes a file beside the store until the filesystem says
ENOSPC, keeps it full (the broker's retention frees space by deleting old segments, which
the filler takes again), and deletes it when the fault heals.

``wipe-member`` deletes a stopped member's store (:func:`wipe_store`), as if its disk had
been replaced.

Everything is done by path: a mount is undone only where this object made it, a filler
file only at the path it created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Final

from rocketq.chaos.history import ChaosError

DEFAULT_DISK_MIB: Final = 96
MIN_DISK_MIB: Final = 16
FILLER_NAME: Final = "chaos-filler"
CHUNK: Final = 1 << 20  # the filler writes MiB by MiB, then 4 KiB blocks for the last bit
SMALL_CHUNK: Final = 4096
MOUNT_TIMEOUT_S: Final = 20.0
UNMOUNT_ATTEMPTS: Final = 10
UNMOUNT_PAUSE_S: Final = 0.3
TMPFS_SOURCE: Final = "rocketq-chaos"  # the name `findmnt` and /proc/mounts show


def small_disks_unavailable_reason() -> str | None:
    """Why this machine cannot mount the run's small disks, or None when it can."""
    if os.geteuid() != 0:
        return "mounting a tmpfs on each broker's store needs root"
    for tool in ("mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool!r} is not installed"
    return None


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S)


class SmallDisks:
    """The tmpfs mounts of one run, each by its path; :meth:`close` undoes all of them."""

    def __init__(self, size_mib: int = DEFAULT_DISK_MIB) -> None:
        if size_mib < MIN_DISK_MIB:
            raise ChaosError(
                f"--disk-mib: a broker's disk must be at least {MIN_DISK_MIB} MiB, got {size_mib}"
            )
        reason = small_disks_unavailable_reason()
        if reason is not None:
            raise ChaosError(f"disk-full: {reason}; run as root, or leave disk-full out")
        self.size_mib = size_mib
        self.mounts: list[Path] = []

    def mount(self, path: Path) -> None:
        """A tmpfs of ``size_mib`` MiB on ``path`` (made if missing; must be empty, so no
        file of the broker's is hidden under the mount)."""
        path.mkdir(parents=True, exist_ok=True)
        if os.path.ismount(path):
            raise ChaosError(f"{path} is already a mount point; give the run a new --data-dir")
        if any(path.iterdir()):
            raise ChaosError(f"{path} is not empty: a small disk is mounted before the broker")
        done = _run(
            [
                "mount", "-t", "tmpfs", "-o", f"size={self.size_mib}m,mode=0700",
                TMPFS_SOURCE, str(path),
            ]
        )  # fmt: skip
        if done.returncode != 0:
            raise ChaosError(f"could not mount a tmpfs on {path}: {done.stderr.strip()}")
        self.mounts.append(path)

    def close(self) -> list[str]:
        """Unmount every mount made (after the processes using them stopped); -> what could
        not be undone. A mount still busy after a few tries is detached lazily (the
        kernel frees it once its last user is gone)."""
        problems = []
        for path in reversed(self.mounts):
            problem = unmount(path)
            if problem is not None:
                problems.append(problem)
        self.mounts = []
        return problems


def unmount(path: Path) -> str | None:
    """Unmount ``path`` if it is a mount point; -> what went wrong, or None."""
    for _ in range(UNMOUNT_ATTEMPTS):
        if not os.path.ismount(path):
            return None
        done = _run(["umount", str(path)])
        if done.returncode == 0:
            return None
        time.sleep(UNMOUNT_PAUSE_S)
    done = _run(["umount", "-l", str(path)])
    if done.returncode != 0 and os.path.ismount(path):
        return f"could not unmount {path}: {done.stderr.strip()}"
    return None


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still write on the filesystem of ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class Filler:
    """A file on ``directory``'s filesystem grown until the filesystem is full."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILLER_NAME
        self.written = 0
        self.full_seen = False  # ENOSPC was reached at least once
        self._fd = -1

    def fill(self) -> int:
        """Write until ENOSPC (creating the file the first time); -> bytes written now.
        Called again while the fault holds, it takes back what the broker freed."""
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        written = 0
        for size in (CHUNK, SMALL_CHUNK):
            block = b"\0" * size
            while True:
                try:
                    n = os.write(self._fd, block)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    self.full_seen = True
                    break
                written += n
                if n < size:  # a short write: the filesystem is at its end
                    self.full_seen = True
                    break
        self.written += written
        return written

    def remove(self) -> None:
        """Close and delete the file (nothing if it was never made)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def wipe_store(store: Path) -> int:
    """Delete everything in a (stopped) member's store, as a disk replaced by a new one;
    the directory itself stays (it may be a mount point). -> entries removed."""
    if not store.is_dir():
        return 0
    removed = 0
    for entry in list(store.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed += 1
    return removed
