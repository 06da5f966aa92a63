"""answer_stream: answers given at once go out in order, awaited ones and replied ones as
they are ready, and the stream ends only when every request was answered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from rocketq.broker.service import answer_stream


async def _requests(items: list[int], gate: asyncio.Event | None = None) -> AsyncIterator[int]:
    for item in items:
        yield item
    if gate is not None:
        await gate.wait()


async def test_direct_awaited_and_replied_answers() -> None:
    loop = asyncio.get_running_loop()
    later: dict[int, Callable[[str], None]] = {}
    slow = loop.create_future()

    def answer(req: int, reply: Callable[[str], None]) -> str | Awaitable[str] | None:
        if req % 3 == 0:
            return f"now {req}"
        if req % 3 == 1:
            later[req] = reply
            return None
        return slow if req == 2 else asyncio.sleep(0, f"awaited {req}")

    got: list[str] = []

    async def consume() -> None:
        async for resp in answer_stream(_requests([0, 1, 2, 3, 4, 5]), answer):
            got.append(resp)

    task = asyncio.ensure_future(consume())
    for _ in range(5):
        await asyncio.sleep(0)
    assert got[:2] == ["now 0", "now 3"]  # at once, in order
    assert "awaited 5" in got
    later[4]("replied 4")  # one reply arrives while another is still out
    await asyncio.sleep(0)
    assert "replied 4" in got and not task.done()
    slow.set_result("awaited 2")
    later[1]("replied 1")
    await asyncio.wait_for(task, 5)  # every request answered: the stream ends
    assert sorted(got) == sorted(
        ["now 0", "now 3", "awaited 5", "replied 4", "awaited 2", "replied 1"]
    )


async def test_a_reply_given_before_answer_returns_counts() -> None:
    def answer(req: int, reply: Callable[[int], None]) -> int | None:
        reply(req * 10)  # known at once, handed over through the callback
        return None

    got = [r async for r in answer_stream(_requests([1, 2, 3]), answer)]
    assert got == [10, 20, 30]
