"""Running a server as the main job of a process: logging, uvloop, short garbage
collections, a private umask (0077: the files a server makes are its user's alone, as
common/file_modes.py says), and a graceful stop on SIGTERM or SIGINT (Ctrl-C), for
``rocketq nameserver`` and ``rocketq broker``.

Garbage collection: CPython's full (oldest-generation) collection walks every tracked
object, and a server holds a few objects per topic queue for as long as it runs. With
10,000 topics (40,000 queues) one full collection stopped the event loop for longer than
the broker's 200 ms send-queue limit (sends were refused with TIMEOUT_CLEAN_QUEUE while
topics were created).
So the state a server has built is moved out of the collector's sight with
``gc.freeze()`` once it has started, and again whenever ``FREEZE_AFTER`` more objects have
lived into the oldest generation; a full collection then walks only what is newer. Frozen
objects are still freed by reference counting; only reference cycles among objects that
were alive at a freeze and die later stay (a few in-flight requests' worth per freeze, and
freezes stop once the state stops growing).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from rocketq.common.file_modes import use_private_umask

FREEZE_AFTER: Final = 50_000  # unfrozen objects in the oldest generation
FREEZE_CHECK_INTERVAL: Final = 5.0  # s


class Server(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def freeze_long_lived() -> None:
    """Collect, then freeze what survived: later full collections skip it."""
    gc.collect()
    gc.freeze()


async def keep_collections_short(
    interval: float = FREEZE_CHECK_INTERVAL, threshold: int = FREEZE_AFTER
) -> None:
    """Freeze again whenever ``threshold`` objects have lived into the oldest generation
    since the last freeze (the state grew: topics, queues, clients)."""
    while True:
        await asyncio.sleep(interval)
        if len(gc.get_objects(generation=2)) > threshold:
            freeze_long_lived()


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def run_server(
    make: Callable[[], Server], on_started: Callable[[Server], Awaitable[None]] | None = None
) -> None:
    """Start the server (with the private umask), wait for SIGTERM/SIGINT, stop it
    gracefully."""
    use_private_umask()

    async def main() -> None:
        server = make()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.start()
        freeze_long_lived()
        keeper = loop.create_task(keep_collections_short())
        if on_started is not None:
            await on_started(server)
        await stop.wait()
        keeper.cancel()
        await server.stop()

    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.Runner()
    with runner:
        runner.run(main())
