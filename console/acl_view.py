"""The Users & ACL page (``/acl``): the cluster's users and ACL policies (RocketMQ 5.3's
ACL 2.0, as ``rocketq admin user|acl`` manages them), with forms to create and delete
users and policy entries. The JSON twins: ``GET /api/users``, ``GET /api/acls``,
``POST /api/users``, ``DELETE /api/users/{username}``, ``POST /api/acls``,
``DELETE /api/acls/{subject}?resource=``.

Changes go to every broker of the cluster through the SDK's Admin; a user's password is
never shown or returned.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rocketq.auth.model import ResourceType
from rocketq.common.exceptions import RocketqError
from rocketq.console.pages import admin_of, error_response, is_api, refuse_change, render
from rocketq.console.security import audit
from rocketq.console.topics_view import BadInputError, fields_of

USER_TYPES: Final = ("Normal", "Super")
ACTIONS: Final = ("Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All")
DECISIONS: Final = ("Allow", "Deny")
RESOURCE_TYPES: Final = tuple(t.value for t in ResourceType if t is not ResourceType.ANY)
_NAME: Final = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_SPLIT: Final = re.compile(r"[\s,]+")


class AuthAdmin(Protocol):
    """What the page asks of the SDK's Admin (its user and ACL methods)."""

    async def list_users(self, filter: str = "") -> Sequence[Any]: ...

    async def list_acls(
        self, subject_filter: str = "", resource_filter: str = ""
    ) -> Sequence[Any]: ...

    async def create_user(
        self, username: str, password: str, user_type: str = "Normal"
    ) -> object: ...

    async def delete_user(self, username: str) -> object: ...

    async def create_acl(
        self,
        subject: str,
        resources: Sequence[str],
        actions: Sequence[str],
        source_ips: Sequence[str] = (),
        decision: str = "Allow",
    ) -> object: ...

    async def delete_acl(self, subject: str, resource: str | None = None) -> object: ...


def auth_admin(request: Request) -> AuthAdmin:
    return cast(AuthAdmin, admin_of(request))


# -- what the SDK returns, as plain rows -------------------------------------------------


def _field(obj: object, *names: str) -> Any:
    """A field by any of its names (snake_case attribute, or camelCase JSON key)."""
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return None


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def _list(value: object) -> list[Any]:
    if value is None or isinstance(value, str | bytes):
        return [] if not value else [value]
    if isinstance(value, Mapping):
        return [value]
    try:
        return list(cast(Sequence[Any], value))
    except TypeError:
        return [value]


def resource_text(resource: object) -> str:
    """A resource as RocketMQ writes it: ``Topic:orders``, ``Topic:order*``, ``Topic:*``,
    ``*``."""
    if isinstance(resource, str):
        return resource
    if isinstance(key := getattr(resource, "key", None), str):
        return key
    kind = _text(_field(resource, "type", "resourceType"))
    name = _text(_field(resource, "name", "resourceName"))
    pattern = _text(_field(resource, "pattern", "resourcePattern")).upper()
    if kind in ("", "Any") and pattern in ("", "ANY"):
        return "*"
    if pattern == "ANY":
        return f"{kind}:*"
    if pattern == "PREFIXED":
        return f"{kind}:{name}*"
    return f"{kind}:{name}"


def subject_text(subject: object) -> str:
    if isinstance(subject, str):
        return subject
    if isinstance(key := getattr(subject, "key", None), str):
        return key
    kind, name = _field(subject, "type", "subjectType"), _field(subject, "name", "subjectName")
    if name is None:
        return _text(subject)
    return f"{_text(kind) or 'User'}:{_text(name)}"


def user_row(user: object) -> dict[str, str]:
    """A user's name, type and status (never the password)."""
    return {
        "username": _text(_field(user, "username", "name")),
        "user_type": _text(_field(user, "user_type", "userType")) or "Normal",
        "user_status": _text(_field(user, "user_status", "userStatus")) or "enable",
    }


def acl_rows(acl: object) -> list[dict[str, Any]]:
    """One row per policy entry of a subject's ACL."""
    subject = subject_text(_field(acl, "subject"))
    rows = []
    for policy in _list(_field(acl, "policies")):
        policy_type = _text(_field(policy, "policy_type", "policyType")) or "Custom"
        for entry in _list(_field(policy, "entries")):
            resources = _list(_field(entry, "resource", "resources"))
            for resource in resources:
                rows.append(
                    {
                        "subject": subject,
                        "policy_type": policy_type,
                        "resource": resource_text(resource),
                        "actions": sorted(_text(a) for a in _list(_field(entry, "actions"))),
                        "source_ips": [
                            _text(ip) for ip in _list(_field(entry, "source_ips", "sourceIps"))
                        ],
                        "decision": _text(_field(entry, "decision")) or "Allow",
                    }
                )
    return rows


async def acl_data(admin: object) -> dict[str, Any]:
    """Users and ACL entries; a list the cluster refuses (or an SDK without user
    management) leaves its error beside the other."""
    out: dict[str, Any] = {"users": [], "acls": [], "users_error": None, "acls_error": None}
    if not hasattr(admin, "list_users") or not hasattr(admin, "list_acls"):
        message = "this SDK's Admin cannot manage users and ACLs"
        return {**out, "users_error": message, "acls_error": message}
    api = cast(AuthAdmin, admin)
    try:
        users = [user_row(u) for u in await api.list_users()]
        out["users"] = sorted(users, key=lambda u: u["username"])
    except RocketqError as exc:
        out["users_error"] = str(exc)
    try:
        out["acls"] = [row for acl in await api.list_acls() for row in acl_rows(acl)]
    except RocketqError as exc:
        out["acls_error"] = str(exc)
    return out


# -- what a form or a JSON body asks for -------------------------------------------------


def _words(value: object) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return [w for w in _SPLIT.split(str(value or "")) if w]


def new_user(fields: Mapping[str, Any]) -> dict[str, str]:
    username = str(fields.get("username", "")).strip()
    if not _NAME.fullmatch(username):
        raise BadInputError("username: 1 to 64 letters, digits or _.@-")
    password = str(fields.get("password", ""))
    if not password:
        raise BadInputError("the password is empty")
    user_type = str(fields.get("user_type", "Normal")) or "Normal"
    if user_type not in USER_TYPES:
        raise BadInputError(f"user_type must be one of {', '.join(USER_TYPES)}")
    return {"username": username, "password": password, "user_type": user_type}


def check_subject(text: str) -> str:
    subject = text.strip()
    if subject and ":" not in subject:
        subject = f"User:{subject}"
    kind, _, name = subject.partition(":")
    if kind != "User" or not _NAME.fullmatch(name):
        raise BadInputError("subject: User:<name> (or just the user name)")
    return subject


def check_resource(text: str) -> str:
    if text == "*":
        return text
    kind, sep, name = text.partition(":")
    if not sep or kind not in RESOURCE_TYPES or not name or "*" in name[:-1]:
        raise BadInputError(
            f"resource {text!r}: write *, or Type:name, Type:prefix* or Type:* with Type one "
            f"of {', '.join(RESOURCE_TYPES)}"
        )
    return text


def new_acl(fields: Mapping[str, Any], form_actions: list[str] | None = None) -> dict[str, Any]:
    subject = check_subject(str(fields.get("subject", "")))
    resources = [check_resource(r) for r in _words(fields.get("resources", ""))]
    if not resources:
        raise BadInputError("name at least one resource")
    actions = form_actions if form_actions is not None else _words(fields.get("actions", ""))
    if not actions or any(a not in ACTIONS for a in actions):
        raise BadInputError(f"actions: one or more of {', '.join(ACTIONS)}")
    source_ips = _words(fields.get("source_ips", ""))
    decision = str(fields.get("decision", "Allow")) or "Allow"
    if decision not in DECISIONS:
        raise BadInputError("decision must be Allow or Deny")
    return {
        "subject": subject,
        "resources": resources,
        "actions": sorted(set(actions), key=ACTIONS.index),
        "source_ips": source_ips,
        "decision": decision,
    }


# -- handlers ------------------------------------------------------------------------------


def _done(request: Request, body: dict[str, Any]) -> Response:
    if is_api(request):
        return JSONResponse(body)
    return RedirectResponse("/acl", 303)


async def acl_page(request: Request) -> Response:
    data = await acl_data(admin_of(request))
    context = {
        **data,
        "user_types": USER_TYPES,
        "actions": ACTIONS,
        "decisions": DECISIONS,
    }
    return render(request, "acl.html", context)


async def api_users(request: Request) -> Response:
    data = await acl_data(admin_of(request))
    if data["users_error"]:
        return error_response(request, 502, data["users_error"])
    return JSONResponse({"users": data["users"]})


async def api_acls(request: Request) -> Response:
    data = await acl_data(admin_of(request))
    if data["acls_error"]:
        return error_response(request, 502, data["acls_error"])
    return JSONResponse({"acls": data["acls"]})


async def create_user(request: Request) -> Response:
    if (refused := await refuse_change(request)) is not None:
        return refused
    try:
        user = new_user(await fields_of(request))
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    await auth_admin(request).create_user(
        user["username"], user["password"], user_type=user["user_type"]
    )
    audit(request, "create-user", username=user["username"], user_type=user["user_type"])
    return _done(request, {"created": user["username"], "user_type": user["user_type"]})


async def delete_user(request: Request) -> Response:
    if (refused := await refuse_change(request)) is not None:
        return refused
    username = request.path_params["username"]
    await auth_admin(request).delete_user(username)
    audit(request, "delete-user", username=username)
    return _done(request, {"deleted": username})


async def create_acl(request: Request) -> Response:
    if (refused := await refuse_change(request)) is not None:
        return refused
    try:
        fields = await fields_of(request)
        form_actions = None
        if not is_api(request):
            form_actions = [str(a) for a in (await request.form()).getlist("actions")]
        acl = new_acl(fields, form_actions)
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    await auth_admin(request).create_acl(
        acl["subject"],
        acl["resources"],
        acl["actions"],
        source_ips=acl["source_ips"],
        decision=acl["decision"],
    )
    audit(request, "create-acl", **acl)
    return _done(request, {"created": acl})


async def delete_acl(request: Request) -> Response:
    """Delete a subject's policy for one resource, or its whole ACL without one."""
    if (refused := await refuse_change(request)) is not None:
        return refused
    if is_api(request):
        subject, resource = request.path_params["subject"], request.query_params.get("resource")
    else:
        fields = await fields_of(request)
        subject, resource = str(fields.get("subject", "")), fields.get("resource")
    try:
        subject = check_subject(subject)
        resource = check_resource(str(resource).strip()) if resource else None
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    await auth_admin(request).delete_acl(subject, resource=resource)
    audit(request, "delete-acl", subject=subject, resource=resource)
    return _done(request, {"deleted": subject, "resource": resource})


ROUTES: Final = [
    Route("/acl", acl_page),
    Route("/api/users", api_users),
    Route("/api/acls", api_acls),
    Route("/acl/users", create_user, methods=["POST"]),
    Route("/api/users", create_user, methods=["POST"]),
    Route("/acl/users/{username}/delete", delete_user, methods=["POST"]),
    Route("/api/users/{username}", delete_user, methods=["DELETE"]),
    Route("/acl/policies", create_acl, methods=["POST"]),
    Route("/api/acls", create_acl, methods=["POST"]),
    Route("/acl/policies/delete", delete_acl, methods=["POST"]),
    Route("/api/acls/{subject}", delete_acl, methods=["DELETE"]),
]
