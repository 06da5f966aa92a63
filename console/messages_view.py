"""The message pages: search by topic and time range (paged), by key, or by offset id; a
message's detail (every property, the body as text, pretty JSON or hex, each group's consume
state, the trace as a timeline) and resending it to a group.

Times in forms and query strings are epoch milliseconds or ISO 8601 ``YYYY-MM-DDTHH:MM[:SS]``
(what a ``datetime-local`` input sends), read as UTC unless they end in an offset: the same
rule as the CLI and the pipeline (``rocketq.common.times``), whatever zone the console runs in.
"""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rocketq.common import times
from rocketq.common.exceptions import QueryNotFoundError, RocketqError, TopicNotExistError
from rocketq.common.message import MessageExt, message_doc
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.console.pages import admin_of, error_response, is_api, refuse_change, render
from rocketq.console.security import audit
from rocketq.console.topics_view import BadInputError, fields_of
from rocketq.sdk.admin import Admin

PAGE_SIZE: Final = 20
MAX_RESULTS: Final = 1000
MODES: Final = ("time", "key", "id")


def parse_time(raw: object, name: str) -> int | None:
    """Epoch ms from a form or query field ``name``: epoch ms, ``now``, or ISO 8601 (what a
    ``datetime-local`` input sends), UTC unless it has an offset (``rocketq.common.times``);
    None when empty. A bad one is a BadInputError naming the field."""
    text = str(raw if raw is not None else "").strip()
    if not text:
        return None
    try:
        return times.parse_ms(text)
    except ValueError as exc:
        raise BadInputError(f"{name} must be a time, got {text!r}: {exc}") from None


def body_view(body: bytes) -> dict[str, str]:
    """The body as pretty JSON when it parses, as text when it is UTF-8, else as hex."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return {"format": "hex", "text": body.hex(" ")}
    try:
        return {"format": "json", "text": json.dumps(json.loads(text), indent=2)}
    except ValueError:
        return {"format": "text", "text": text}


async def search(admin: Admin, params: dict[str, str]) -> dict[str, Any]:
    """The search the query string asks for (none when it names no mode)."""
    mode = params.get("mode", "")
    out: dict[str, Any] = {"mode": mode, "params": params, "messages": [], "page": 0}
    if not mode:
        return out
    if mode not in MODES:
        raise BadInputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "id":
        msg_id = params.get("msg_id", "").strip()
        if not msg_id:
            raise BadInputError("give an offset message id")
        m = await find_message(admin, msg_id)
        out["messages"] = [] if m is None else [message_doc(m)]
        return out
    topic = params.get("topic", "").strip()
    if not topic:
        raise BadInputError("give a topic")
    if mode == "key":
        key = params.get("key", "").strip()
        if not key:
            raise BadInputError("give a message key")
        found = await admin.query_msg_by_key(topic, key, max_num=64)
        out["messages"] = [message_doc(m) for m in found]
        return out
    begin = parse_time(params.get("begin"), "begin") or 0
    end = parse_time(params.get("end"), "end")
    try:
        page = int(params.get("page", "0") or 0)
    except ValueError:
        raise BadInputError("page must be a whole number") from None
    if page < 0 or (page + 1) * PAGE_SIZE > MAX_RESULTS:
        raise BadInputError(f"page must be between 0 and {MAX_RESULTS // PAGE_SIZE - 1}")
    found = await admin.messages_by_time(topic, begin, end, max_num=(page + 1) * PAGE_SIZE + 1)
    out["messages"] = [message_doc(m) for m in found[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]]
    out["page"] = page
    out["has_next"] = len(found) > (page + 1) * PAGE_SIZE
    return out


async def find_message(admin: Admin, offset_msg_id: str) -> MessageExt | None:
    """The message an offset id names, or None when the id is malformed, names no broker of
    the cluster, or no message there."""
    try:
        addr, _ = decode_offset_msg_id(offset_msg_id)
    except ValueError:
        return None
    if addr not in await admin.broker_addrs():
        return None
    try:
        return await admin.query_msg_by_id(offset_msg_id)
    except (QueryNotFoundError, IndexError):
        return None
    except RocketqError:
        return None  # an offset inside a record: the store finds no message there


async def message_detail(admin: Admin, offset_msg_id: str) -> dict[str, Any] | None:
    m = await find_message(admin, offset_msg_id)
    if m is None:
        return None
    try:
        events = await admin.trace(m.msg_id)
    except TopicNotExistError:
        events = []  # no client traced yet: the trace topic is made with the first event
    tracks = await admin.message_track(m)
    return {
        "message": message_doc(m),
        "body": body_view(m.body),
        "tracks": [{"group": t.group, "state": t.state, "detail": t.detail} for t in tracks],
        "trace": [
            {
                "type": e.type,
                "timestamp": e.timestamp,
                "group": e.group,
                "client_id": e.client_id,
                "store_host": e.store_host,
                "cost_ms": e.cost_ms,
                "status": e.status,
                "success": e.success,
                "reconsume_times": e.reconsume_times,
            }
            for e in events
        ],
    }


# -- handlers ------------------------------------------------------------------------------


async def messages_page(request: Request) -> Response:
    params = dict(request.query_params)
    try:
        data = await search(admin_of(request), params)
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    return render(request, "messages.html", data)


async def api_messages(request: Request) -> Response:
    try:
        data = await search(admin_of(request), dict(request.query_params))
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    return JSONResponse(data)


def no_message(request: Request, offset_msg_id: str) -> Response:
    return error_response(request, 404, f"no message with offset id {offset_msg_id!r}")


async def message_page(request: Request) -> Response:
    msg_id = request.path_params["offset_msg_id"]
    data = await message_detail(admin_of(request), msg_id)
    if data is None:
        return no_message(request, msg_id)
    return render(request, "message.html", {**data, "resent": request.query_params.get("resent")})


async def api_message(request: Request) -> Response:
    msg_id = request.path_params["offset_msg_id"]
    data = await message_detail(admin_of(request), msg_id)
    if data is None:
        return no_message(request, msg_id)
    return JSONResponse(data)


async def resend(request: Request) -> Response:
    """Send the message to a group again (through %RETRY%<group>)."""
    if (refused := await refuse_change(request)) is not None:
        return refused
    msg_id = request.path_params["offset_msg_id"]
    admin = admin_of(request)
    try:
        group = str((await fields_of(request)).get("group", "")).strip()
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    if not group:
        return error_response(request, 400, "name the consumer group to resend to")
    if await find_message(admin, msg_id) is None:
        return no_message(request, msg_id)
    try:
        copy = await admin.resend_message(msg_id, group)
    except RocketqError as exc:
        return error_response(request, 502, f"resending {msg_id} to {group} failed: {exc}")
    audit(request, "resend-message", msg_id=msg_id, group=group, copy=copy)
    if is_api(request):
        return JSONResponse({"offset_msg_id": msg_id, "group": group, "copy": copy})
    url = request.url_for("message_page", offset_msg_id=msg_id).include_query_params(resent=group)
    return RedirectResponse(url, 303)


ROUTES: Final = [
    Route("/messages", messages_page),
    Route("/api/messages", api_messages),
    Route("/messages/{offset_msg_id}", message_page, name="message_page"),
    Route("/api/messages/{offset_msg_id}", api_message),
    Route("/messages/{offset_msg_id}/resend", resend, methods=["POST"]),
    Route("/api/messages/{offset_msg_id}/resend", resend, methods=["POST"]),
]
