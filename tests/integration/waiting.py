"""Waiting on conditions with deadlines (never bare sleeps as synchronisation)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_until(
    cond: Callable[[], bool], what: str | Callable[[], str], timeout: float = 20.0
) -> None:
    """``what`` may be a function, to describe the state at the moment of failure."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {text}")
        await asyncio.sleep(0.02)
