"""The dead letter page: a group's DLQ (%DLQ%<group>) by time range, resending one or a
selection back to the group (each through %RETRY%<group>), and the export as JSON lines with
the fields `rocketq admin dlq export` writes."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rocketq.common.exceptions import RocketqError
from rocketq.common.message import MessageExt, message_doc
from rocketq.console.messages_view import parse_time
from rocketq.console.pages import admin_of, error_response, is_api, refuse_change, render
from rocketq.console.security import audit
from rocketq.console.topics_view import BadInputError
from rocketq.sdk.admin import Admin

MAX_DEAD: Final = 1000


async def dead_letters(admin: Admin, group: str, begin: object, end: object) -> list[MessageExt]:
    return await admin.dlq_messages(
        group,
        parse_time(begin, "begin") or 0,
        parse_time(end, "end"),
        max_num=MAX_DEAD,
    )


async def dlq_data(admin: Admin, params: dict[str, str]) -> dict[str, Any]:
    group = params.get("group", "").strip()
    out: dict[str, Any] = {"group": group, "params": params, "messages": []}
    if group:
        found = await dead_letters(admin, group, params.get("begin"), params.get("end"))
        out["messages"] = [message_doc(m) for m in found]
    return out


async def resend_ids(request: Request, group: str, ids: list[str]) -> list[dict[str, str]]:
    """Resend each dead letter of ``group`` named in ``ids``; only ids of the group's DLQ."""
    if not ids:
        raise BadInputError("select at least one dead letter to resend")
    admin = admin_of(request)
    dead = {m.offset_msg_id for m in await admin.dlq_messages(group, max_num=MAX_DEAD)}
    unknown = [i for i in ids if i not in dead]
    if unknown:
        raise BadInputError(f"not dead letters of {group}: {', '.join(unknown)}")
    out = []
    for msg_id in ids:
        copy = await admin.resend_message(msg_id, group)
        audit(request, "dlq-resend", group=group, msg_id=msg_id, copy=copy)
        out.append({"offset_msg_id": msg_id, "copy": copy})
    return out


# -- handlers ------------------------------------------------------------------------------


async def dlq_page(request: Request) -> Response:
    try:
        data = await dlq_data(admin_of(request), dict(request.query_params))
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    return render(request, "dlq.html", {**data, "resent": request.query_params.get("resent")})


async def api_dlq(request: Request) -> Response:
    group = request.path_params["group"]
    params = {**request.query_params, "group": group}
    try:
        return JSONResponse(await dlq_data(admin_of(request), params))
    except BadInputError as exc:
        return error_response(request, 400, str(exc))


async def resend(request: Request) -> Response:
    """Form: ``id`` once per checked box. JSON: ``{"ids": [...]}``."""
    if (refused := await refuse_change(request)) is not None:
        return refused
    group = request.path_params["group"]
    try:
        if is_api(request):
            try:
                doc = json.loads(await request.body() or b"{}")
            except ValueError:
                raise BadInputError("the body is not JSON") from None
            raw = doc.get("ids") if isinstance(doc, dict) else None
            if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
                raise BadInputError('the body must be {"ids": ["<offset msg id>", ...]}')
            ids = list(raw)
        else:
            ids = [v for v in (await request.form()).getlist("id") if isinstance(v, str)]
        done = await resend_ids(request, group, ids)
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    except RocketqError as exc:
        return error_response(request, 502, f"resending to {group} failed: {exc}")
    if is_api(request):
        return JSONResponse({"group": group, "resent": done})
    url = request.url_for("dlq_page").include_query_params(group=group, resent=len(done))
    return RedirectResponse(url, 303)


async def export(request: Request) -> Response:
    """The group's dead letters in the range as JSON lines, one message per line."""
    group = request.path_params["group"]
    try:
        found = await dead_letters(
            admin_of(request),
            group,
            request.query_params.get("begin"),
            request.query_params.get("end"),
        )
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", group)
    lines = "".join(json.dumps(message_doc(m)) + "\n" for m in found)
    return Response(
        lines,
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="dlq-{safe}.jsonl"'},
    )


ROUTES: Final = [
    Route("/dlq", dlq_page, name="dlq_page"),
    Route("/api/dlq/{group}", api_dlq),
    Route("/api/dlq/{group}/export", export),
    Route("/dlq/{group}/resend", resend, methods=["POST"]),
    Route("/api/dlq/{group}/resend", resend, methods=["POST"]),
]
