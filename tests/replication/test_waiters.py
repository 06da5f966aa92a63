"""One heap of sends waiting for an offset: an advance completes what it covers and
nothing else, late ones time out, fail_all gives up on the rest."""

from __future__ import annotations

import asyncio

from rocketq.replication.waiters import OffsetWaiters


async def test_advance_completes_exactly_the_sends_it_covers() -> None:
    waiters = OffsetWaiters()
    tasks = [asyncio.ensure_future(waiters.wait(end, 5.0)) for end in (300, 100, 200, 400)]
    await asyncio.sleep(0)
    waiters.advance(250)
    await asyncio.sleep(0)
    assert [t.done() for t in tasks] == [False, True, True, False]
    assert tasks[1].result() is True and tasks[2].result() is True
    assert len(waiters) == 2
    waiters.advance(400)
    assert await asyncio.gather(tasks[0], tasks[3]) == [True, True]
    await waiters.close()


async def test_late_sends_time_out_and_fail_all_gives_up() -> None:
    waiters = OffsetWaiters()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await waiters.wait(100, 0.2) is None
    assert 0.2 <= loop.time() - t0 < 2.0
    pending = asyncio.ensure_future(waiters.wait(200, 30.0))
    await asyncio.sleep(0)
    waiters.fail_all()
    assert await pending is False
    await waiters.close()


async def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    waiters = OffsetWaiters()
    task = asyncio.ensure_future(waiters.wait(100, 30.0))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    waiters.advance(1000)  # a cancelled future is skipped, not set
    assert len(waiters) == 0
    await waiters.close()


async def test_callbacks_run_inside_the_advance_that_reaches_them() -> None:
    waiters = OffsetWaiters()
    seen: list[tuple[int, bool | None]] = []
    for end in (300, 100, 200):
        waiters.add(end, 5.0, lambda r, end=end: seen.append((end, r)))
    waiters.advance(250)
    assert seen == [(100, True), (200, True)]  # no loop turn in between
    waiters.add(50, 0.05, lambda r: seen.append((50, r)))
    waiters.add(60, 0.05, lambda r: seen.append((60, r)))
    waiters.advance(55)
    assert seen[-1] == (50, True)
    await asyncio.sleep(0.3)  # the sweeper gives up on 60 (and not on 300, 5 s)
    assert seen[-1] == (60, None) and len(waiters) == 1
    waiters.fail_all()
    assert seen[-1] == (300, False)
    await waiters.close()


async def test_a_failing_callback_does_not_keep_the_others_waiting() -> None:
    waiters = OffsetWaiters()
    seen: list[int] = []

    def broken(result: bool | None) -> None:
        raise RuntimeError("boom")

    waiters.add(100, 5.0, broken)
    waiters.add(200, 5.0, lambda r: seen.append(200))
    waiters.advance(300)
    assert seen == [200] and len(waiters) == 0
    await waiters.close()
