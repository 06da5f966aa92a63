"""The HTTP port of every server process:

- ``/metrics``: the process's registry in Prometheus' text format;
- ``/healthz``: 200 when the process's event loop answers within a few seconds, else 503
  (liveness: a loop stuck for good is what a restart mends);
- ``/readyz``: 200 when the process is ready to serve, else 503 with the reason.

A WSGI server on threads of its own serves them, so the port answers however busy the loop
is, and every answer that reads the server's state is worked out on the event loop (handed
over with ``call_soon_threadsafe``): the state is read where it changes, without locks. A
scrape of a broker takes a few milliseconds of the loop per scrape interval.

The port is bounded as the remoting port is: a fixed pool of ``metrics_http_workers``
threads (a connection accepted while all are busy is answered 503 and closed at once), a
request must arrive whole within ``metrics_http_timeout_seconds`` and each write of the
answer must finish within it too, so a slowloris holds a worker for that long at most.
What was cut off is counted in :attr:`MetricsServer.rejected` by reason.

Given a :class:`~rocketq.remoting.tls.ServerTls`, the port speaks HTTPS only: each accepted
connection gets the certificate current at that moment (a rotated certificate serves the
next scrape), and a handshake that fails, such as plain HTTP sent to the port, closes the
connection (counted as ``tls_handshake``).

Given a :class:`MetricsAuth` (``metrics_bearer_token``, ``metrics_basic_auth``), ``/metrics``
answers only a request that carries one of its credentials (``Authorization: Bearer ...`` or
``Basic ...``, compared in constant time), as Prometheus' exporters ask; anything else is
answered 401 with ``WWW-Authenticate`` and counted as ``unauthorized``. ``/healthz`` and
``/readyz`` stay open: the probes of an orchestrator carry no credentials, and they tell
nothing but up or down.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import contextlib
import errno
import hmac
import io
import json
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from rocketq.common.exceptions import ConfigError
from rocketq.common.ports import PortBindError


class ServerTls(Protocol):
    """What the port reads of :class:`rocketq.remoting.tls.ServerTls` (common sits below
    remoting, so it names the shape, not the class)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def context(self) -> ssl.SSLContext: ...


@dataclass(frozen=True, slots=True)
class MetricsAuth:
    """The credentials ``/metrics`` asks for: a bearer token, a basic-auth user and password,
    or both (either one then passes). Empty values are not credentials."""

    bearer_token: str = field(default="", repr=False)
    username: str = ""
    password: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if bool(self.username) != bool(self.password):
            raise ValueError("metrics basic auth needs both a username and a password")
        if ":" in self.username:
            raise ValueError("a metrics basic-auth username cannot contain ':'")

    @property
    def enabled(self) -> bool:
        return bool(self.bearer_token or self.username)

    @classmethod
    def from_config(cls, config: object) -> MetricsAuth | None:
        """From a server config's ``metrics_bearer_token`` and ``metrics_basic_auth`` (JSON
        ``{"username", "password"}``); None when neither is set.

        Raises:
            ConfigError: ``metrics_basic_auth`` is not such an object (without echoing it).
        """
        token = str(getattr(config, "metrics_bearer_token", "") or "")
        basic = str(getattr(config, "metrics_basic_auth", "") or "")
        username = password = ""
        try:
            if basic:
                doc = json.loads(basic)
                username, password = str(doc["username"]), str(doc["password"])
            auth = cls(token, username, password)
        except (ValueError, KeyError, TypeError) as exc:
            why = exc if isinstance(exc, ValueError) and "metrics" in str(exc) else "malformed"
            raise ConfigError(
                f"metrics_basic_auth: {why}; give a JSON object "
                '{"username": "...", "password": "..."} (a username without \':\')'
            ) from None
        return auth if auth.enabled else None

    def challenge(self) -> list[tuple[str, str]]:
        """The ``WWW-Authenticate`` headers of a 401: one per scheme accepted."""
        headers = []
        if self.bearer_token:
            headers.append(("WWW-Authenticate", f'Bearer realm="{REALM}"'))
        if self.username:
            headers.append(("WWW-Authenticate", f'Basic realm="{REALM}", charset="UTF-8"'))
        return headers

    def allows(self, authorization: str) -> bool:
        """Whether an ``Authorization`` header value carries one of the credentials (each
        compared in constant time; a malformed value is a refusal)."""
        scheme, _, value = authorization.strip().partition(" ")
        scheme, value = scheme.lower(), value.strip()
        if scheme == "bearer" and self.bearer_token:
            return hmac.compare_digest(value.encode(), self.bearer_token.encode())
        if scheme == "basic" and self.username:
            try:
                given = base64.b64decode(value.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError, ValueError):
                return False
            wanted = f"{self.username}:{self.password}".encode()
            return hmac.compare_digest(given, wanted)
        return False


class _HandshakeFailedError(Exception):
    """The TLS handshake of an accepted connection failed."""


log = logging.getLogger(__name__)

# (ready, why not): what /readyz answers.
Readiness = Callable[[], tuple[bool, str]]
# How long /healthz and a scrape wait for the event loop before answering 503.
LOOP_TIMEOUT = 5.0
# The most bytes of request line and headers read (a GET has no body).
MAX_REQUEST_HEAD: Final = 16 * 1024
# Reasons, the ``reason`` label of rocketq_metrics_http_rejected_total.
WORKERS_BUSY: Final = "workers_busy"
TIMEOUT: Final = "timeout"
TOO_LARGE: Final = "too_large"
TLS_HANDSHAKE: Final = "tls_handshake"
UNAUTHORIZED: Final = "unauthorized"
# The realm a 401 names.
REALM: Final = "rocketq metrics"
_BUSY_ANSWER: Final = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 32\r\nConnection: close\r\n\r\nbusy: every worker is answering\n"
)

T = TypeVar("T")


def metrics_timeout() -> float:
    """LOOP_TIMEOUT, read when used (tests shorten it)."""
    return LOOP_TIMEOUT


StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class _QuietHandler(WSGIRequestHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # each read and write

    def handle(self) -> None:
        """Read the request line and headers within the deadline, then answer them."""
        sock: socket.socket = self.connection
        deadline = time.monotonic() + self.server.request_timeout
        head = bytearray()
        while b"\r\n\r\n" not in head:
            left = deadline - time.monotonic()
            if left <= 0:
                self.server.count(TIMEOUT, self.client_address)
                return
            sock.settimeout(left)
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                self.server.count(TIMEOUT, self.client_address)
                return
            if not chunk:
                return
            head += chunk
            if len(head) > MAX_REQUEST_HEAD:
                self.server.count(TOO_LARGE, self.client_address)
                return
        sock.settimeout(self.server.request_timeout)
        self.rfile = io.BytesIO(bytes(head))
        super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not worth a log line


class _Server(WSGIServer):
    """A WSGI server answering on a fixed pool of daemon threads."""

    # A restarted process takes its port back at once (TIME_WAIT of its last scrapes).
    allow_reuse_address = True
    request_timeout = 10.0
    tls: ServerTls | None = None

    def bound(self, workers: int, timeout: float) -> None:
        self.workers = workers
        self.request_timeout = timeout
        # Connections taken by a worker or waiting for one: at most one per worker.
        self._slots = threading.BoundedSemaphore(workers)
        self._jobs: queue.SimpleQueue[tuple[socket.socket, Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.rejected = {WORKERS_BUSY: 0, TIMEOUT: 0, TOO_LARGE: 0}
        if self.tls is not None:
            self.rejected[TLS_HANDSHAKE] = 0
        self._count_lock = threading.Lock()
        self._logged: dict[tuple[str, str], float] = {}
        self.busy = 0  # connections a worker holds or will take next

    def start_workers(self) -> None:
        for i in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"metrics-http-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop_workers(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        self._threads = []

    def count(self, reason: str, client_address: Any) -> None:
        """Count a request cut off or refused; log it at most once a minute per address."""
        host = str(client_address[0]) if isinstance(client_address, tuple) else "?"
        now = time.monotonic()
        with self._count_lock:
            self.rejected[reason] = self.rejected.get(reason, 0) + 1
            last = self._logged.get((host, reason))
            if last is not None and now - last < 60:
                return
            if len(self._logged) > 1024:
                self._logged.clear()
            self._logged[(host, reason)] = now
        if reason == UNAUTHORIZED:
            log.warning(
                "metrics HTTP port: refused /metrics to %s without the right credentials "
                "(metrics_bearer_token, metrics_basic_auth)",
                host,
            )
            return
        log.warning(
            "metrics HTTP port: cut off a request from %s [%s] (metrics_http_workers %d, "
            "metrics_http_timeout_seconds %g)",
            host,
            reason,
            self.workers,
            self.request_timeout,
        )

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.count(WORKERS_BUSY, client_address)
            if self.tls is None:  # over TLS it would take a handshake: just close
                with contextlib.suppress(OSError):
                    request.setblocking(False)
                    request.send(_BUSY_ANSWER)
            self.shutdown_request(request)
            return
        with self._count_lock:
            self.busy += 1
        self._jobs.put((request, client_address))

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            request, client_address = job
            try:
                if self.tls is not None:
                    request = self._secure(request)
                self.finish_request(request, client_address)
            except _HandshakeFailedError:
                self.count(TLS_HANDSHAKE, client_address)
            except TimeoutError:
                self.count(TIMEOUT, client_address)
            except OSError:
                pass  # the peer went away
            except Exception:
                log.exception("metrics HTTP port: answering %s failed", client_address)
            finally:
                self.shutdown_request(request)
                with self._count_lock:
                    self.busy -= 1
                self._slots.release()

    def _secure(self, request: socket.socket) -> ssl.SSLSocket:
        """The accepted connection over TLS with the current certificate (each step of the
        handshake within the request timeout). TimeoutError, or _HandshakeFailedError when
        the handshake fails (plain HTTP, an unknown CA...); the connection is closed."""
        assert self.tls is not None
        request.settimeout(self.request_timeout)
        try:
            secured = self.tls.context.wrap_socket(
                request, server_side=True, do_handshake_on_connect=False
            )
        except (OSError, ValueError) as exc:
            request.close()
            raise _HandshakeFailedError(str(exc)) from None
        try:
            secured.do_handshake()
        except TimeoutError:
            secured.close()
            raise
        except OSError as exc:  # ssl.SSLError too
            secured.close()
            raise _HandshakeFailedError(str(exc)) from None
        return secured


class _Server6(_Server):
    address_family = socket.AF_INET6


def _adopt(sock: socket.socket, server_class: type[_Server]) -> _Server:
    """A server on an already listening socket (what binding would have made)."""
    if sock.family == socket.AF_INET6:
        server_class = _Server6
    server = server_class(sock.getsockname()[:2], _QuietHandler, bind_and_activate=False)
    server.socket.close()
    sock.setblocking(True)  # socketserver waits in select, then accepts blocking
    server.socket = sock
    server.server_address = sock.getsockname()
    host, port = sock.getsockname()[:2]
    server.server_name = socket.getfqdn(str(host))
    server.server_port = port
    server.setup_environ()
    return server


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
        workers: int = 4,
        timeout: float = 10.0,
        tls: ServerTls | None = None,
        auth: MetricsAuth | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        """``sock``: a listening socket to serve on (one handed down by the process that
        started this one) instead of binding ``address:port``."""
        self.registry = registry
        self.auth = auth if auth is not None and auth.enabled else None
        self.readiness = readiness
        self._loop: asyncio.AbstractEventLoop | None = None
        server_class = _Server6 if ":" in address else _Server
        try:
            if sock is not None:
                self._server = _adopt(sock, server_class)
            else:
                self._server = server_class((address, port), _QuietHandler)
        except OSError as exc:
            why = "it is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise PortBindError(
                f"cannot serve {what} metrics on {address}:{port} ({why}); set metrics_port "
                "to a free port (0 turns the metrics server off) or metrics_bind_address",
                name="metrics",
                port=port,
                code=exc.errno,
            ) from None
        self._server.set_app(self._app)
        self._server.tls = tls if tls is not None and tls.enabled else None
        self._server.bound(workers, timeout)
        if self.auth is not None:
            self._server.rejected[UNAUTHORIZED] = 0
        self.port: int = self._server.server_port
        self._thread: threading.Thread | None = None

    @property
    def rejected(self) -> dict[str, int]:
        """Requests cut off over a bound, by reason (every reason present)."""
        return self._server.rejected

    @property
    def busy_workers(self) -> int:
        """Workers answering a connection now (or about to)."""
        return self._server.busy

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._server.start_workers()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        if self._thread is not None:
            await asyncio.to_thread(self._server.shutdown)
            self._thread.join()
        self._server.stop_workers()
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
                if self.auth is not None and not self.auth.allows(
                    str(environ.get("HTTP_AUTHORIZATION", ""))
                ):
                    self._server.count(UNAUTHORIZED, (environ.get("REMOTE_ADDR", "?"),))
                    return _answer(
                        start_response,
                        "401 Unauthorized",
                        b"unauthorized: /metrics needs the metrics credentials\n",
                        extra=self.auth.challenge(),
                    )
                body = self._on_loop(lambda: generate_latest(self.registry))
                return _answer(start_response, "200 OK", body, CONTENT_TYPE_LATEST)
            if path == "/healthz":
                self._on_loop(lambda: None)
                return _answer(start_response, "200 OK", b"ok\n")
            if path == "/readyz":
                ready, why = self._on_loop(self.readiness)
                if ready:
                    # A note (a broker refusing sends for a full disk) follows the word.
                    body = f"ready; {why}\n".encode() if why else b"ready\n"
                    return _answer(start_response, "200 OK", body)
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
    *,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    start_response(status, headers + (extra or []))
    return [body]
