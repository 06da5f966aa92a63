"""Running a server as the main job of a process: logging, uvloop, and a graceful stop on
SIGTERM or SIGINT (Ctrl-C), for ``rocketq nameserver`` and ``rocketq broker``."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Protocol


class Server(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def run_server(
    make: Callable[[], Server], on_started: Callable[[Server], Awaitable[None]] | None = None
) -> None:
    """Start the server, wait for SIGTERM/SIGINT, stop it gracefully."""

    async def main() -> None:
        server = make()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.start()
        if on_started is not None:
            await on_started(server)
        await stop.wait()
        await server.stop()

    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.Runner()
    with runner:
        runner.run(main())
