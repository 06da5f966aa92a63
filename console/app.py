"""The console's Starlette application: ``create_app(namesrv, users_file)``, and
:func:`serve`, which runs it under uvicorn (over HTTPS with a certificate and key).

One :class:`~rocketq.sdk.admin.Admin` per application, started in the lifespan on the
server's event loop and shut down with it; it and the console's producer sign their
requests when the console is given credentials, and use TLS when told to. Every page has a
JSON twin under ``/api/``; both call the same data functions (cluster_view, dashboard_view,
topics_view, groups_view, messages_view, dlq_view, acl_view). The dashboard's sampler runs
on the same loop, from startup to shutdown.

Every request must name an allowed host (else 400: a DNS-rebound name never reaches a
page). Every POST carries the session's CSRF token. Login is on with ``users_file`` and
whenever the console signs its cluster calls: then every page and API call but the login
page and the static files needs a logged-in user, and failed logins are limited per client
address (never per user name, so nobody can lock the real user out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from rocketq.common.exceptions import MessageIllegalError, RocketqError, TopicNotExistError
from rocketq.console import (
    acl_view,
    cluster_view,
    dashboard_view,
    dlq_view,
    groups_view,
    messages_view,
    topics_view,
)
from rocketq.console.pages import HERE, error_response, render
from rocketq.console.sampler import DEFAULT_INTERVAL, Sampler
from rocketq.console.security import (
    ClusterClient,
    LoginLimiter,
    LoginRequired,
    Users,
    actor,
    csrf_ok,
    csrf_token,
    login_key,
    retry_after_header,
    safe_next,
)
from rocketq.remoting.tls import files_stamp
from rocketq.sdk.admin import Admin

log = logging.getLogger(__name__)

# -- login -------------------------------------------------------------------------------


async def login_page(request: Request) -> Response:
    if request.app.state.users is None:
        return render(request, "login.html", {"message": "Login is off (no --users file)."})
    target = safe_next(request.query_params.get("next", "/"))
    return render(request, "login.html", {"next": target})


async def login_post(request: Request) -> Response:
    """Check a name and password (scrypt, in a worker thread). After too many failures from
    one address within the limiter's window, that address gets 429 with Retry-After
    whatever it sends; other addresses, the real user's among them, log in as before."""
    if not await csrf_ok(request):
        return error_response(request, 403, "the request carries no valid CSRF token")
    users: Users | None = request.app.state.users
    limiter: LoginLimiter = request.app.state.login_limiter
    form = await request.form()
    name, password = str(form.get("username", "")), str(form.get("password", ""))
    target = safe_next(str(form.get("next", "/")))
    key = login_key(request)
    wait = limiter.retry_after(key)
    if wait is not None:
        response = render(
            request,
            "login.html",
            {"next": target, "message": "Too many failed logins: try again later."},
            429,
        )
        response.headers.update(retry_after_header(wait))
        return response
    # Counted as a failure before the check, so that attempts sent at the same time cannot
    # all pass the limit while their passwords are checked; taken back on success.
    limiter.failed(key)
    if users is None or not await users.check_async(name, password):
        return render(
            request, "login.html", {"next": target, "message": "Wrong name or password."}, 401
        )
    limiter.take_back(key)
    request.session.clear()
    request.session["user"] = name
    return RedirectResponse(target, status_code=303)


async def logout(request: Request) -> Response:
    if not await csrf_ok(request):
        return error_response(request, 403, "the request carries no valid CSRF token")
    request.session.clear()
    return RedirectResponse("/", status_code=303)


async def api_session(request: Request) -> Response:
    """The session's CSRF token and user, for scripts and the pages' JavaScript."""
    return JSONResponse(
        {
            "csrf_token": csrf_token(request),
            "user": actor(request),
            "login_on": request.app.state.login_on,
        }
    )


# -- errors ------------------------------------------------------------------------------


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(request, exc.status_code, str(exc.detail))


async def not_found_topic(request: Request, exc: Exception) -> Response:
    return error_response(request, 404, str(exc) or "no such topic")


async def bad_name(request: Request, exc: Exception) -> Response:
    """A topic or group name in the address that is not valid: refused before any call."""
    return error_response(request, 400, str(exc))


async def cluster_error(request: Request, exc: Exception) -> Response:
    return error_response(request, 502, f"the cluster answered with an error: {exc}")


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
SESSION_SECONDS = 12 * 3600  # a session idle this long is logged out


def allowed_hosts_for(bind: str, extra: Sequence[str] = ()) -> list[str]:
    """The Host header values the console answers: its bind address, the loopback names and
    ``extra`` (``*.example.com`` matches subdomains; ``*`` turns the check off)."""
    hosts = [f"[{bind}]" if ":" in bind else bind, *LOOPBACK_HOSTS, *extra]
    return list(dict.fromkeys(h.strip().lower() for h in hosts if h.strip()))


def create_app(
    namesrv: str,
    users_file: str | Path | None = None,
    *,
    secret: str | None = None,
    sample_interval: float = DEFAULT_INTERVAL,
    bind: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    https: bool = False,
    cluster_client: ClusterClient | None = None,
    login_limiter: LoginLimiter | None = None,
) -> Starlette:
    """The console for the cluster whose nameserver(s) are ``namesrv``.

    ``users_file`` turns login on; ``secret`` signs session cookies (random per process
    when not given); ``sample_interval`` is the dashboard's seconds between samples;
    ``bind`` and ``allowed_hosts`` make the Host check's list (:func:`allowed_hosts_for`);
    ``https`` marks the session cookie ``Secure`` (set it when serving over TLS);
    ``cluster_client`` is the credentials and TLS settings of the console's own cluster
    calls (by default the environment's credentials, if any). A console that signs its
    calls needs ``users_file``: ValueError without it. ``login_limiter`` counts failed
    logins (5 a minute per client address by default).
    """
    users = Users.load(users_file) if users_file is not None else None
    client = cluster_client if cluster_client is not None else ClusterClient()
    credentials = client.credentials()
    if credentials is not None and users is None:
        raise ValueError(
            "the console signs its cluster calls with an access key, so anyone reaching it "
            "would act as that key: give --users FILE to require a login"
        )
    sdk_settings: dict[str, Any] = client.sdk_settings(credentials)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watching = getattr(app.state, "certificate", None)
        watch = asyncio.ensure_future(watching.watch()) if watching is not None else None
        try:
            async with _cluster_clients(app):
                yield
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    @contextlib.asynccontextmanager
    async def _cluster_clients(app: Starlette) -> AsyncIterator[None]:
        admin = Admin(namesrv, **sdk_settings)
        await admin.start()
        app.state.admin = admin
        sampler = Sampler(admin, interval=sample_interval)
        app.state.sampler = sampler
        sampler.start()
        try:
            yield
        finally:
            await sampler.stop()
            await topics_view.close_producer(app)
            await admin.shutdown()

    routes = [
        Route("/", cluster_view.cluster_page),
        Route("/api/cluster", cluster_view.api_cluster),
        Route("/brokers/{name}/{broker_id:int}", cluster_view.broker_page),
        Route("/api/brokers/{name}/{broker_id:int}", cluster_view.api_broker),
        *dashboard_view.ROUTES,
        *topics_view.ROUTES,
        *groups_view.ROUTES,
        *messages_view.ROUTES,
        *dlq_view.ROUTES,
        *acl_view.ROUTES,
        Route("/login", login_page),
        Route("/login", login_post, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/api/session", api_session),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    login_on = users is not None
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts_for(bind, allowed_hosts)),
        Middleware(
            SessionMiddleware,
            secret_key=secret or secrets.token_hex(32),
            session_cookie="rocketq_console",
            same_site="strict",
            https_only=https,
            max_age=SESSION_SECONDS,
        ),
    ]
    if users is not None:
        middleware.append(Middleware(LoginRequired, users=users))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            HTTPException: http_error,
            TopicNotExistError: not_found_topic,
            MessageIllegalError: bad_name,
            RocketqError: cluster_error,
        },
        lifespan=lifespan,
    )
    app.state.namesrv = namesrv
    app.state.users = users
    app.state.login_on = login_on
    app.state.login_limiter = login_limiter if login_limiter is not None else LoginLimiter()
    app.state.sdk_settings = sdk_settings
    app.state.producer = None
    return app


def uvicorn_config(
    app: Starlette,
    *,
    host: str,
    port: int,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    log_level: str = "info",
) -> Any:
    """uvicorn's config for the console: HTTPS when given a certificate and its key (both or
    neither: ValueError). The client address is the connection's peer, never what an
    ``X-Forwarded-For`` header claims (uvicorn would believe one sent from 127.0.0.1): failed
    logins are counted per address, and a header anyone may send would evade the count."""
    import uvicorn

    if (tls_cert is None) != (tls_key is None):
        raise ValueError("HTTPS needs both --tls-cert and --tls-key")
    ssl: dict[str, Any] = {}
    if tls_cert is not None and tls_key is not None:
        for label, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
            if not Path(path).is_file():
                raise ValueError(f"{label} {path}: no such file")
        ssl = {"ssl_certfile": str(tls_cert), "ssl_keyfile": str(tls_key)}
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, proxy_headers=False, **ssl
    )
    if ssl:
        app.state.certificate = CertificateWatch(config, str(tls_cert), str(tls_key))
    return config


class CertificateWatch:
    """Reloads the console's HTTPS certificate and key into the server's TLS context when
    their files change (checked every ``interval`` seconds): new connections get the new
    certificate, open ones keep theirs. Files that do not load leave the old certificate in
    use, and say so once."""

    def __init__(self, config: Any, cert: str, key: str, interval: float = 5.0) -> None:
        self.config = config  # uvicorn's: its ``ssl`` context exists once the server runs
        self.cert = cert
        self.key = key
        self.interval = interval
        self.reloads = 0
        self.refused = 0  # changed files that did not load
        self._stamp = files_stamp((cert, key))
        self._failed: tuple[bytes | None, ...] | None = None

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            stamp = await asyncio.to_thread(files_stamp, (self.cert, self.key))
            if stamp != self._stamp:
                self.reload(stamp)

    def reload(self, stamp: tuple[bytes | None, ...]) -> bool:
        """Load the files into the live context (on the server's loop); True if they did."""
        ctx = getattr(self.config, "ssl", None)
        if ctx is None:
            return False
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            if stamp != self._failed:
                self._failed = stamp
                self.refused += 1
                log.error(
                    "HTTPS: the changed certificate %s and key %s do not load, so the "
                    "previous certificate stays in use: %s",
                    self.cert,
                    self.key,
                    exc,
                )
            return False
        self._stamp, self._failed = stamp, None
        self.reloads += 1
        log.info("HTTPS: loaded the changed certificate %s", self.cert)
        return True


def serve(
    namesrv: str,
    users_file: str | Path | None = None,
    *,
    bind: str = "127.0.0.1",
    port: int = 8080,
    allowed_hosts: Sequence[str] = (),
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    cluster_client: ClusterClient | None = None,
    secret: str | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Run the console until interrupted: :func:`create_app` under uvicorn, over HTTPS (and
    with ``Secure`` cookies) when given ``tls_cert`` and ``tls_key``; on ``sock``, a
    listening socket handed down by the process that started this one, when given.
    Raises ValueError or OSError for bad options or files before listening."""
    import uvicorn

    app = create_app(
        namesrv,
        users_file,
        secret=secret,
        bind=bind,
        allowed_hosts=allowed_hosts,
        https=tls_cert is not None,
        cluster_client=cluster_client,
    )
    config = uvicorn_config(app, host=bind, port=port, tls_cert=tls_cert, tls_key=tls_key)
    uvicorn.Server(config).run(sockets=None if sock is None else [sock])
