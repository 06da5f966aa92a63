"""Waiting on conditions with deadlines (never bare sleeps as synchronisation)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable


async def wait_until(
    cond: Callable[[], bool | Awaitable[bool]],
    what: str | Callable[[], str],
    timeout: float = 20.0,
) -> None:
    """``cond`` may be a coroutine function; ``what`` may be a function, to describe the
    state at the moment of failure."""
    deadline = time.monotonic() + timeout

    async def holds() -> bool:
        result = cond()
        return bool(await result) if inspect.isawaitable(result) else bool(result)

    while not await holds():
        if time.monotonic() > deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {text}")
        await asyncio.sleep(0.02)
