"""The SDK's one event loop for code without asyncio, and the calls that cross to it.

The blocking twins (``rocketq.sync``, generated into ``sdk/blocking.py``) and code that
needs the SDK from plain threads (Spark tasks) keep their clients on one event loop that runs
in a daemon thread. A client and its connections belong to the loop that made them, so every
call crosses to that loop and waits there: a coroutine through :func:`run_blocking`, a plain
method through :func:`call_blocking`, a task started without waiting through
:func:`future_blocking`, an ``async for`` through :func:`iterate_blocking`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

_T = TypeVar("_T")
_P = ParamSpec("_P")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
# Async iterators that blocking loops let go of, dropped on the event loop at its next call
# from a blocking caller (see iterate_blocking).
_dropped: list[object] = []


def background_loop() -> asyncio.AbstractEventLoop:
    """The SDK's one event loop for blocking callers, running in a daemon thread (started on
    first use, stopped when the interpreter exits)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="rocketq-sdk", daemon=True)
            thread.start()
            atexit.register(loop.call_soon_threadsafe, loop.stop)
            _loop, _thread = loop, thread
        return _loop


def on_background_loop() -> bool:
    """Whether the caller runs on the SDK's background loop (where waiting on it would
    never end)."""
    return _thread is not None and threading.current_thread() is _thread


def _let_go() -> None:
    """On the loop: drop the async iterators blocking loops let go of (their finalizers run
    here, as they would have after an ``async for``)."""
    with _lock:
        dropped = _dropped[:]
        _dropped.clear()
    dropped.clear()


def _check_thread(what: str) -> None:
    if on_background_loop():
        raise RuntimeError(
            f"{what} from the SDK's own event loop would wait forever; from a coroutine on "
            "that loop, await the asynchronous client instead"
        )


def run_blocking(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on the SDK's background event loop and wait for its result (or its
    exception). Code that needs the SDK from plain threads calls it through here rather
    than starting loops of its own."""
    _check_thread("run_blocking")

    async def run() -> _T:
        _let_go()  # before the coroutine's first step, as its await would follow the drop
        return await coro

    return asyncio.run_coroutine_threadsafe(run(), background_loop()).result()


def call_blocking(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Call a plain function or method on the SDK's background event loop and wait for its
    result: a client's methods that are not coroutines touch its loop's state too."""
    _check_thread("call_blocking")
    done: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def call() -> None:
        if not done.set_running_or_notify_cancel():
            return
        _let_go()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            done.set_exception(exc)

    background_loop().call_soon_threadsafe(call)
    return done.result()


def future_blocking(start: Callable[[], Awaitable[_T]]) -> concurrent.futures.Future[_T]:
    """Call ``start`` on the SDK's background loop (a method that starts a task there and
    returns it, as ``Producer.send_async`` does) and return at once a
    :class:`concurrent.futures.Future` of the task's result: ``result()`` waits for it,
    ``add_done_callback`` hears of it, ``cancel()`` cancels the task."""
    loop = background_loop()
    outer: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def copy(task: asyncio.Future[_T]) -> None:
        if task.cancelled():
            outer.cancel()
        elif (exc := task.exception()) is not None:
            outer.set_exception(exc)
        else:
            outer.set_result(task.result())

    def begin() -> None:
        if not outer.set_running_or_notify_cancel():
            return
        _let_go()
        try:
            task = asyncio.ensure_future(start())
        except BaseException as exc:
            outer.set_exception(exc)
            return
        task.add_done_callback(copy)

        def cancel_task(f: concurrent.futures.Future[_T]) -> None:
            if f.cancelled():
                loop.call_soon_threadsafe(task.cancel)

        outer.add_done_callback(cancel_task)

    loop.call_soon_threadsafe(begin)
    return outer


async def _next(iterator: AsyncIterator[_T]) -> _T:
    return await anext(iterator)


def iterate_blocking(start: Callable[[], AsyncIterator[_T]]) -> Iterator[_T]:
    """A plain iterator over the async iterator ``start`` returns (``start`` is called on the
    SDK's background loop at once, so what it raises is raised here): each step waits on the
    loop for the next item, and ``StopAsyncIteration`` ends it.

    A loop left early (``break``, an exception in its body) lets go of the async iterator
    as ``async for`` would: an iterator object is finalized on the loop at once, an async
    generator is handed to the loop's finalizer just before the next call the blocking code
    makes (so a consumer's ``__exit__`` sees the loop's batch as ``__aexit__`` would, before
    the generator's ``finally`` runs)."""
    return _steps(call_blocking(start))


def _steps(iterator: AsyncIterator[_T]) -> Iterator[_T]:
    generator = inspect.isasyncgen(iterator)
    try:
        while True:
            try:
                yield run_blocking(_next(iterator))
            except StopAsyncIteration:
                return
    finally:
        with _lock:
            _dropped.append(iterator)
        del iterator
        if not generator and not on_background_loop():
            call_blocking(_let_go)
