"""The console's Starlette application: ``create_app(namesrv, users_file)``.

One :class:`~rocketq.sdk.admin.Admin` per application, started in the lifespan on the
server's event loop and shut down with it. Every page has a JSON twin under ``/api/``; both
call the same data functions (cluster_view, dashboard_view, topics_view, groups_view,
messages_view, dlq_view). The dashboard's sampler runs on the same loop, from startup to
shutdown. Every POST carries the session's CSRF token; with ``users_file`` every change
needs a logged-in user too.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from rocketq.common.exceptions import RocketqError, TopicNotExistError
from rocketq.console import (
    cluster_view,
    dashboard_view,
    dlq_view,
    groups_view,
    messages_view,
    topics_view,
)
from rocketq.console.pages import HERE, error_response, render
from rocketq.console.sampler import DEFAULT_INTERVAL, Sampler
from rocketq.console.security import Users, actor, csrf_ok, csrf_token
from rocketq.sdk.admin import Admin

# -- login -------------------------------------------------------------------------------


async def login_page(request: Request) -> Response:
    if request.app.state.users is None:
        return render(request, "login.html", {"message": "Login is off (no --users file)."})
    return render(request, "login.html", {"next": request.query_params.get("next", "/")})


async def login_post(request: Request) -> Response:
    if not await csrf_ok(request):
        return error_response(request, 403, "the request carries no valid CSRF token")
    users: Users | None = request.app.state.users
    form = await request.form()
    name, password = str(form.get("username", "")), str(form.get("password", ""))
    target = str(form.get("next", "/"))
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    if users is None or not users.check(name, password):
        return render(
            request, "login.html", {"next": target, "message": "Wrong name or password."}, 401
        )
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
            "login_on": request.app.state.users is not None,
        }
    )


# -- errors ------------------------------------------------------------------------------


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(request, exc.status_code, str(exc.detail))


async def not_found_topic(request: Request, exc: Exception) -> Response:
    return error_response(request, 404, str(exc) or "no such topic")


async def cluster_error(request: Request, exc: Exception) -> Response:
    return error_response(request, 502, f"the cluster answered with an error: {exc}")


def create_app(
    namesrv: str,
    users_file: str | Path | None = None,
    *,
    secret: str | None = None,
    sample_interval: float = DEFAULT_INTERVAL,
) -> Starlette:
    """The console for the cluster whose nameserver(s) are ``namesrv``. ``users_file`` turns
    login on; ``secret`` signs session cookies (random per process when not given);
    ``sample_interval`` is the dashboard's seconds between samples."""
    users = Users.load(users_file) if users_file is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        admin = Admin(namesrv)
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
        Route("/login", login_page),
        Route("/login", login_post, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/api/session", api_session),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                SessionMiddleware,
                secret_key=secret or secrets.token_hex(32),
                session_cookie="rocketq_console",
                same_site="strict",
            )
        ],
        exception_handlers={
            HTTPException: http_error,
            TopicNotExistError: not_found_topic,
            RocketqError: cluster_error,
        },
        lifespan=lifespan,
    )
    app.state.namesrv = namesrv
    app.state.users = users
    app.state.producer = None
    return app
