"""Waiting on conditions with deadlines (never bare sleeps as synchronisation)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_until(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)
