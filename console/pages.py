"""What every page of the console shares: the layout's context, rendering, clear errors
(HTML or JSON) and the guard every change passes (CSRF token, login)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from rocketq.console.security import CSRF_FIELD, csrf_ok, csrf_token, current_user
from rocketq.sdk.admin import Admin

HERE: Final = Path(__file__).resolve().parent
TEMPLATES: Final = Jinja2Templates(directory=str(HERE / "templates"))
NAV: Final = (
    ("/", "Cluster"),
    ("/dashboard", "Dashboard"),
    ("/topics", "Topics"),
    ("/groups", "Consumer groups"),
    ("/messages", "Messages"),
    ("/dlq", "Dead letters"),
    ("/acl", "Users & ACL"),
)


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def render(
    request: Request, name: str, context: dict[str, Any] | None = None, status: int = 200
) -> Response:
    """A page, with what the layout needs: the nav, the user and the CSRF token."""
    ctx = {
        "nav": NAV,
        "path": request.url.path,
        "user": current_user(request),
        "login_on": request.app.state.login_on,
        "csrf_field": CSRF_FIELD,
        "csrf_token": csrf_token(request),
        **(context or {}),
    }
    return TEMPLATES.TemplateResponse(request, name, ctx, status_code=status)


def error_response(request: Request, status: int, message: str) -> Response:
    """A clear error: JSON under /api/, else an HTML page (never a traceback)."""
    if is_api(request):
        return JSONResponse({"error": message}, status_code=status)
    return render(request, "error.html", {"status": status, "message": message}, status)


def admin_of(request: Request) -> Admin:
    admin: Admin = request.app.state.admin
    return admin


async def refuse_change(request: Request) -> Response | None:
    """None when a change may go ahead: a valid CSRF token and, with login on, a user."""
    if not await csrf_ok(request):
        return error_response(request, 403, "the request carries no valid CSRF token")
    if request.app.state.login_on and current_user(request) is None:
        if is_api(request):
            return JSONResponse({"error": "log in first"}, status_code=401)
        return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
    return None
