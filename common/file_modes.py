"""Who may read what a server keeps on disk: its data is its owner's alone, as PostgreSQL
keeps its data directory.

- Data (the store root and everything under it: CommitLog, ConsumeQueues, index files,
  checkpoint, abort file, config, the Raft log, the timer log, a nameserver's KV config)
  is created with :data:`PRIVATE_DIR` (0700) folders and :data:`PRIVATE_FILE` (0600)
  files: messages, user names and ACLs are nobody else's business.
- Logs are :data:`LOG_FILE` (0640): the owner's group (an operator's log shipper) may read
  them, others may not.

A server process runs with the umask :data:`SERVER_UMASK` (0077, set by
:func:`use_private_umask` when it starts), so whatever it creates is private whatever mode
the code asks for; the places that create files also ask for the private modes
themselves, so an embedded store (tests, tools) is private too. :func:`tighten` takes the
group and other bits off what an older version created (0755 folders, 0644 files) when a
store opens, and logs once what it changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

PRIVATE_DIR: Final = 0o700
PRIVATE_FILE: Final = 0o600
LOG_FILE: Final = 0o640
# The bits a server's files never get: every group and other bit.
SERVER_UMASK: Final = 0o077
# The group and other bits a private file or folder must not have.
_NOT_PRIVATE: Final = 0o077
# A log may keep group read, nothing more.
_NOT_LOG: Final = 0o037


def use_private_umask() -> int:
    """Give this process the umask :data:`SERVER_UMASK`; the umask it had."""
    return os.umask(SERVER_UMASK)


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` made as a private folder, its missing parents too (``mkdir -p`` would give
    them the umask's mode), or narrowed to private if it exists with group or other bits;
    ``path`` as a Path."""
    path = Path(path)
    missing = []
    here = path
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another thread
            folder.mkdir(mode=PRIVATE_DIR)
    _narrow(path, _NOT_PRIVATE)
    return path


def open_log(path: Path) -> int:
    """A file descriptor appending to the log file ``path`` (made 0640, or narrowed to at
    most 0640 when it exists), in a folder made private (:func:`private_dir`)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_FILE)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & _NOT_LOG:
            os.fchmod(fd, mode & ~_NOT_LOG)
    except OSError:
        os.close(fd)
        raise
    return fd


def _narrow(path: Path, bits: int) -> bool:
    """Take ``bits`` off ``path``'s mode (not following a symlink); whether it changed."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return False
    mode = stat.S_IMODE(st.st_mode)
    if not mode & bits:
        return False
    os.chmod(path, mode & ~bits)
    return True


def tighten(root: Path, what: str, *, is_log: Callable[[Path], bool] | None = None) -> int:
    """Take the group and other bits off ``root`` and everything under it, symlinks not
    followed; the files ``is_log`` names keep group read (at most 0640). Logs one line
    naming ``what`` when anything changed; the number of files and folders changed. A file
    that vanishes meanwhile is skipped; one that cannot be changed is logged and skipped
    (the server still starts)."""
    if not root.exists():
        return 0
    changed = 0
    failed: list[str] = []

    def narrow(path: Path, bits: int) -> None:
        nonlocal changed
        try:
            changed += _narrow(path, bits)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if len(failed) < 3:
                failed.append(f"{path}: {exc.strerror}")

    narrow(root, _NOT_PRIVATE)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in dirs:
            narrow(here / name, _NOT_PRIVATE)
        for name in files:
            path = here / name
            narrow(path, _NOT_LOG if is_log is not None and is_log(path) else _NOT_PRIVATE)
    if changed:
        log.warning(
            "%s: %d files and folders under %s could be read by other users; they are now "
            "private to this user (folders 0700, files 0600, logs 0640)",
            what,
            changed,
            root,
        )
    if failed:
        log.warning("%s: could not make private: %s", what, "; ".join(failed))
    return changed
