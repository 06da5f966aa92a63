"""A wall-clock bound on one decode, for the fuzz tests of this layer.

``tests/fuzz_mutations.total`` measures a decode once it returns; a decode that never
returns would hang the run instead. :func:`bounded` arms a SIGALRM timer around it as well:
the handler raises :class:`HangError` (an AssertionError, so hypothesis shrinks and reports the
example) in the middle of the loop that would not end.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final, TypeVar

from tests.fuzz_mutations import total

T = TypeVar("T")

# Far above what any decode here takes (microseconds), short enough that hypothesis can
# shrink a hanging example (each attempt waits this long) in reasonable time.
HANG_LIMIT: Final = 1.0


class HangError(AssertionError):
    """The call was still running when its time ran out."""


@contextmanager
def time_bound(seconds: float = HANG_LIMIT) -> Iterator[None]:
    """Raise :class:`HangError` inside the block if it runs past ``seconds`` (main thread only;
    elsewhere the block runs unguarded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum: int, frame: FrameType | None) -> None:
        raise HangError(f"still running after {seconds:.1f} s")

    previous = signal.signal(signal.SIGALRM, ring)
    # pytest-timeout's own alarm (its signal method) is put back, less the time spent here.
    outer, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    if outer and outer < seconds:
        signal.setitimer(signal.ITIMER_REAL, outer)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            left = max(outer - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


def bounded(
    call: Callable[[], T], errors: type[BaseException] | tuple[type[BaseException], ...]
) -> T | BaseException:
    """``total(call, errors)`` under :func:`time_bound`: the value or the documented error;
    anything else raised, a hang, a slow decode or a large allocation fails the test."""
    with time_bound():
        return total(call, errors)
