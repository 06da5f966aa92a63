"""Block allocation for store files: a segment gets its disk blocks when it is made, not
when a byte lands on a page the file system cannot back.

A file made with ``ftruncate`` alone is sparse: its blocks are taken as it is written.
Written through the descriptor, a full disk is an ENOSPC the writer sees; written through
a mapping (ConsumeQueues, index files), it is a SIGBUS that ends the process. So the store
allocates blocks with ``posix_fallocate`` before it writes: a CommitLog segment whole when
it is created (0.3 ms for 1 GiB on ext4, 120-250 ms on tmpfs, which zeroes its pages), a
mapping-written file a step ahead of its write position (tens of thousands of ConsumeQueues
of 6 MB each would take their whole size on disk at once otherwise).

A file system without ``fallocate`` (EOPNOTSUPP, EINVAL: some network and FUSE file
systems) leaves the files sparse, as before; that is said once in the log.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Final

from rocketq.common.exceptions import DiskFullError

log = logging.getLogger(__name__)

# What a file system answers when it cannot allocate ahead (the file stays sparse).
_UNSUPPORTED: Final = frozenset({errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS})
# What it answers when the space is not there.
NO_SPACE: Final = frozenset({errno.ENOSPC, errno.EDQUOT})

_said_unsupported = False
_said_lock = threading.Lock()


def allocate(fd: int, offset: int, length: int, path: str) -> bool:
    """Give ``fd``'s bytes [offset, offset + length) their blocks. -> False when the file
    system cannot (the range stays sparse; said once in the log). Raises
    :class:`DiskFullError` when the space is not there, and any other OSError as it is."""
    global _said_unsupported
    if length <= 0:
        return True
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise DiskFullError(
                f"no space left on the device to allocate {length} bytes of {path}"
            ) from exc
        if exc.errno not in _UNSUPPORTED:
            raise
        with _said_lock:
            if not _said_unsupported:
                _said_unsupported = True
                log.warning(
                    "the file system of %s cannot allocate blocks ahead (fallocate: %s); store "
                    "files stay sparse, so a full disk is found only when a write fails",
                    path,
                    os.strerror(exc.errno or 0),
                )
        return False
    return True
