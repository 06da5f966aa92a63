"""Small JSON state files (configs, offsets) written atomically: temp file, fsync, rename;
private to their owner (0600 in a folder made 0700, as every server file: common/file_modes.py)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.file_modes import private_dir


def write_json_atomic(path: Path, doc: Any) -> None:
    """A crash leaves either the old file or the new one, never a torn one."""
    private_dir(path.parent)
    data = json.dumps(doc, indent=1, sort_keys=True).encode()
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_json(path: Path, what: str) -> Any:
    """The file's JSON, None if it does not exist; a clear error if it is damaged."""
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise StoreCorruptError(
            f"{path}: cannot read the {what} ({exc}); restore it from a backup or move it "
            "away to start without it"
        ) from None
