"""The HTTP port of every server process (aiohttp on the process's event loop):

- ``/metrics``: the process's registry in Prometheus' text format;
- ``/healthz``: 200 whenever the event loop answers (liveness: a loop stuck for good
  does not answer, and the probe's timeout says so);
- ``/readyz``: 200 when the process is ready to serve, else 503 with the reason.

It runs on the event loop, not on a thread of its own, so a scrape reads the servers'
state where it is changed, without locks; a scrape of a broker with thousands of queues
takes a few milliseconds of the loop every scrape interval.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

# (ready, why not): what /readyz answers.
Readiness = Callable[[], tuple[bool, str]]


def bind_socket(address: str, port: int, what: str) -> socket.socket:
    """A listening socket for the metrics port, or an OSError saying which key to change."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = "it is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise OSError(
            f"cannot serve {what} metrics on {address}:{port} ({why}); set metrics_port to a "
            "free port (0 turns the metrics server off) or metrics_bind_address"
        ) from None
    sock.setblocking(False)
    return sock


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on a socket bound beforehand."""

    def __init__(
        self, sock: socket.socket, registry: CollectorRegistry, readiness: Readiness
    ) -> None:
        self.sock = sock
        self.registry = registry
        self.readiness = readiness
        self.port: int = sock.getsockname()[1]
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._started = False

    async def start(self) -> None:
        await self._runner.setup()
        await web.SockSite(self._runner, self.sock).start()
        self._started = True

    async def stop(self) -> None:
        if self._started:
            await self._runner.cleanup()
        else:
            self.sock.close()

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        await asyncio.sleep(0)  # answered by a turn of the loop, not only by the parser
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, why = self.readiness()
        if ready:
            return web.Response(text="ready\n")
        return web.Response(status=503, text=f"not ready: {why}\n")
