"""The deadline waits never lose a cancellation and never drop a queued item."""

from __future__ import annotations

import asyncio

import pytest

from rocketq.common.aio import get_within, wait_done, wait_event


async def test_wait_event_times_out_and_sees_the_event() -> None:
    event = asyncio.Event()
    assert not await wait_event(event, 0.01)
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_event(event, 5)


async def test_cancel_arriving_with_the_event_stops_the_loop() -> None:
    """The event is set and the waiting loop cancelled in the same step: the loop ends
    (``asyncio.wait_for`` on Python 3.11 returns normally here and the loop runs on)."""
    event = asyncio.Event()
    rounds = 0

    async def loop_forever() -> None:
        nonlocal rounds
        while True:
            await wait_event(event, 10)
            event.clear()
            rounds += 1

    task = asyncio.ensure_future(loop_forever())
    await asyncio.sleep(0.01)
    event.set()
    task.cancel()
    done, _ = await asyncio.wait((task,), timeout=2)
    assert done and task.cancelled() and rounds == 0


async def test_wait_done_leaves_the_future_to_its_owner() -> None:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    assert not await wait_done(fut, 0.01)
    assert not fut.cancelled()
    fut.set_result(7)
    assert await wait_done(fut, 0.01)


async def test_get_within_returns_or_keeps_every_item() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    assert await get_within(queue, 0.01) == (False, None)
    asyncio.get_running_loop().call_later(0.01, queue.put_nowait, 1)
    assert await get_within(queue, 5) == (True, 1)
    # Cancelled in the very step the item arrives: the item stays in the queue.
    task = asyncio.ensure_future(get_within(queue, 10))
    await asyncio.sleep(0.01)
    queue.put_nowait(2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert queue.get_nowait() == 2
