"""What a fuzz harness is and how one input is judged.

A harness feeds bytes to one decoder of outside bytes the way its caller does. The decoder
may return anything or raise the error it documents for bad input (``accepted``); any
other exception is a *crash* finding, an input that takes more than ``time_limit`` seconds
of CPU is a *hang* finding and one that runs out of the memory the process may use
(``MemoryError``) an *oom* finding. :func:`judge` applies these rules to one input in this
process, with no fuzzer: the tests feed the checked-in corpus through it, and the atheris
worker (``worker.py``) calls it for every input it generates.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import signal
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_TIME_LIMIT: Final = 1.0  # seconds of CPU per input before it is a hang


@dataclass(frozen=True, slots=True)
class Harness:
    """One decoder under fuzzing: ``target`` takes the input bytes and calls the decoder;
    ``accepted`` are the errors the decoder documents for bad input."""

    name: str
    target: Callable[[bytes], object]
    accepted: tuple[type[BaseException], ...]
    summary: str
    # Made once per process before the first input (a broker), and undone at the end.
    setup: Callable[[], None] | None = None
    teardown: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """An input the decoder did not handle: ``kind`` is crash, hang or oom."""

    kind: str
    exception: str  # "ValueError: invalid literal..."
    where: str  # the innermost frame: "common/message.py:336 in delay_level"
    trace: str

    @property
    def signature(self) -> str:
        """What makes two findings the same bug: kind, exception type and where."""
        return f"{self.kind} {self.exception.split(':', 1)[0]} at {self.where}"


class HangError(BaseException):
    """Raised by the CPU timer inside a slow input (a BaseException, so that no decoder's
    ``except Exception`` can swallow it)."""


def _on_timer(signum: int, frame: object) -> None:
    raise HangError


@contextmanager
def cpu_time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`HangError` in this (main) thread once the process has used
    ``seconds`` of CPU (ITIMER_PROF: a busy machine does not make an input a hang, and it
    leaves SIGALRM to libFuzzer's and pytest-timeout's timers)."""
    previous = signal.signal(signal.SIGPROF, _on_timer)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    parts = last.filename.replace("\\", "/").split("/")
    short = "/".join(parts[-2:])
    return f"{short}:{last.lineno} in {last.name}"


def _finding(kind: str, exc: BaseException) -> Finding:
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > 500:
        text = text[:500] + "..."
    trace = "".join(traceback.format_exception(exc))
    return Finding(kind, text, _where(exc), trace)


def judge(
    harness: Harness, data: bytes, *, time_limit: float = DEFAULT_TIME_LIMIT
) -> Finding | None:
    """Run one input; None when the decoder answered or refused it as it documents."""
    try:
        with cpu_time_limit(time_limit):
            harness.target(data)
    except harness.accepted:
        return None
    except HangError as exc:
        return _finding("hang", exc)
    except MemoryError as exc:
        return _finding("oom", exc)
    except Exception as exc:
        return _finding("crash", exc)
    return None


def input_name(kind: str, data: bytes) -> str:
    """The file name of a finding's input, as libFuzzer names its artifacts."""
    return f"{kind}-{hashlib.sha1(data).hexdigest()}"


def close_loop(loop: asyncio.AbstractEventLoop, directory: Path | None) -> None:
    """The end of a harness that serves on its own event loop: what is still running on
    the loop cancelled and awaited, the loop closed, its data directory removed."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending))
    loop.close()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
