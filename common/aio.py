"""Waiting with a deadline without losing a cancellation.

On Python 3.11 ``asyncio.wait_for`` returns normally when the awaited thing completes in
the same loop step as a cancellation of the caller, and the cancellation is lost: a loop
of ``wait_for(event.wait(), interval)`` then never stops, and whoever awaits it after
cancelling hangs. These helpers wait through ``asyncio.wait``, which always lets the
caller's cancellation through.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass; True if it is set."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((waiter,), timeout=timeout)
    finally:
        if not waiter.done():
            waiter.cancel()
    return event.is_set()


async def wait_done(fut: asyncio.Future[Any], timeout: float | None) -> bool:
    """Wait until ``fut`` is done or ``timeout`` seconds pass; True if it is done.

    ``fut`` is left alone on timeout (not cancelled): its owner still completes it.
    """
    if not fut.done():
        await asyncio.wait((fut,), timeout=timeout)
    return fut.done()


async def get_within(queue: asyncio.Queue[Any], timeout: float | None) -> tuple[bool, Any]:
    """(True, item) from ``queue`` within ``timeout`` seconds, else (False, None).

    An item is either returned or left in the queue, never dropped.
    """
    if not queue.empty():
        return True, queue.get_nowait()
    getter = asyncio.ensure_future(queue.get())
    try:
        await asyncio.wait((getter,), timeout=timeout)
    except BaseException:
        if getter.done() and not getter.cancelled() and getter.exception() is None:
            queue.put_nowait(getter.result())  # taken as we were cancelled: keep it
        raise
    finally:
        if not getter.done():
            getter.cancel()
    if getter.done() and not getter.cancelled():
        return True, getter.result()
    return False, None


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel every task, then wait until each has finished (its cancellation included)."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
