"""The HTTP port of every server process:

- ``/metrics``: the process's registry in Prometheus' text format;
- ``/healthz``: 200 when the process's event loop answers within a few seconds, else 503
  (liveness: a loop stuck for good is what a restart mends);
- ``/readyz``: 200 when the process is ready to serve, else 503 with the reason.

prometheus-client's own WSGI server (the one behind its ``start_http_server``) serves them
on a thread, so the port answers however busy the loop is, and every answer that reads the
server's state is worked out on the event loop (handed over with ``call_soon_threadsafe``):
the state is read where it changes, without locks. A scrape of a broker takes a few
milliseconds of the loop per scrape interval.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.exposition import ThreadingWSGIServer

# (ready, why not): what /readyz answers.
Readiness = Callable[[], tuple[bool, str]]
# How long /healthz and a scrape wait for the event loop before answering 503.
LOOP_TIMEOUT = 5.0

T = TypeVar("T")


def metrics_timeout() -> float:
    """LOOP_TIMEOUT, read when used (tests shorten it)."""
    return LOOP_TIMEOUT


StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not worth a log line


class _Server(ThreadingWSGIServer):
    # A restarted process takes its port back at once (TIME_WAIT of its last scrapes).
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class LoopGoneError(Exception):
    """The event loop did not answer in time (or is closed)."""


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz``; binds at construction (a clear OSError
    naming the key to change when the port is taken), serves from :meth:`start`."""

    def __init__(
        self,
        address: str,
        port: int,
        registry: CollectorRegistry,
        readiness: Readiness,
        *,
        what: str = "",
    ) -> None:
        self.registry = registry
        self.readiness = readiness
        self._loop: asyncio.AbstractEventLoop | None = None
        server_class = _Server6 if ":" in address else _Server
        try:
            self._server = make_server(
                address, port, self._app, server_class=server_class, handler_class=_QuietHandler
            )
        except OSError as exc:
            why = "it is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise OSError(
                f"cannot serve {what} metrics on {address}:{port} ({why}); set metrics_port "
                "to a free port (0 turns the metrics server off) or metrics_bind_address"
            ) from None
        self.port: int = self._server.server_port
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        if self._thread is not None:
            await asyncio.to_thread(self._server.shutdown)
            self._thread.join()
        self._server.server_close()

    def _on_loop(self, fn: Callable[[], T]) -> T:
        """``fn()`` run on the event loop; LoopGoneError if it does not get there in time."""
        loop = self._loop
        if loop is None or loop.is_closed():
            raise LoopGoneError("the event loop is not running")
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:  # handed to the server thread
                done.set_exception(exc)

        try:
            loop.call_soon_threadsafe(call)
        except RuntimeError:  # closed meanwhile
            raise LoopGoneError("the event loop is not running") from None
        try:
            return done.result(timeout=metrics_timeout())
        except concurrent.futures.TimeoutError:
            raise LoopGoneError(
                f"the event loop did not answer within {metrics_timeout():g} s"
            ) from None

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        try:
            if path == "/metrics":
                body = self._on_loop(lambda: generate_latest(self.registry))
                return _answer(start_response, "200 OK", body, CONTENT_TYPE_LATEST)
            if path == "/healthz":
                self._on_loop(lambda: None)
                return _answer(start_response, "200 OK", b"ok\n")
            if path == "/readyz":
                ready, why = self._on_loop(self.readiness)
                if ready:
                    return _answer(start_response, "200 OK", b"ready\n")
                return _answer(
                    start_response, "503 Service Unavailable", f"not ready: {why}\n".encode()
                )
        except LoopGoneError as exc:
            return _answer(start_response, "503 Service Unavailable", f"{exc}\n".encode())
        return _answer(
            start_response, "404 Not Found", b"not found: try /metrics, /healthz or /readyz\n"
        )


def _answer(
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
) -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
