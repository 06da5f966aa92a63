"""The topic pages: the list with a kind filter, create/update, a topic's queues, route and
consuming groups, a test message, and delete (after a confirmation page).

Pages post HTML forms and redirect; the JSON twins under ``/api/topics`` take JSON bodies
with the CSRF token in the ``X-CSRF-Token`` header.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rocketq.common.exceptions import MessageIllegalError, RocketqError
from rocketq.common.message import (
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    TRACE_TOPIC,
    Message,
    is_system_topic,
)
from rocketq.common.names import check_topic_name
from rocketq.common.names import is_system_topic as is_reserved_system_topic
from rocketq.console.pages import admin_of, error_response, is_api, refuse_change, render
from rocketq.console.security import audit
from rocketq.sdk.admin import Admin
from rocketq.sdk.producer import Producer

KINDS: Final = ("normal", "retry", "dlq", "system")
MAX_QUEUES: Final = 1024
PERMS: Final = {PERM_WRITE: "write only", PERM_READ: "read only", PERM_READ | PERM_WRITE: "RW"}
CONSOLE_PRODUCER_GROUP: Final = "rocketq-console-producer"


class BadInputError(ValueError):
    """What a form or a JSON body got wrong (answered 400)."""


def topic_kind(topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    if is_system_topic(topic) or topic == TRACE_TOPIC:
        return "system"
    return "normal"


async def topics_data(admin: Admin, kind: str | None) -> dict[str, Any]:
    if kind is not None and kind not in KINDS:
        raise BadInputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    rows = [{"topic": t, "kind": topic_kind(t)} for t in sorted(await admin.topic_list())]
    if kind is not None:
        rows = [r for r in rows if r["kind"] == kind]
    return {"topics": rows, "kind": kind, "kinds": KINDS}


def topic_settings(fields: dict[str, Any]) -> dict[str, Any]:
    """Check a create/update request: the name (valid, and not a system topic's), queue
    numbers in 1..1024, a permission."""
    topic = str(fields.get("topic", "")).strip()
    try:
        check_topic_name(topic)
    except MessageIllegalError as exc:
        raise BadInputError(str(exc)) from None
    if is_reserved_system_topic(topic):
        raise BadInputError(
            f"the topic name {topic!r} is reserved: it is a system topic of the cluster"
        )
    out: dict[str, Any] = {"topic": topic}
    for key in ("read_queue_nums", "write_queue_nums"):
        raw = fields.get(key, 8)
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise BadInputError(f"{key} must be a whole number, got {raw!r}") from None
        if not 1 <= value <= MAX_QUEUES:
            raise BadInputError(f"{key} must be between 1 and {MAX_QUEUES}, got {value}")
        out[key] = value
    raw_perm = fields.get("perm", PERM_READ | PERM_WRITE)
    try:
        perm = int(raw_perm)
    except (TypeError, ValueError):
        perm = -1
    if perm not in PERMS:
        raise BadInputError(f"perm must be one of {sorted(PERMS)} (2 write, 4 read, 6 both)")
    out["perm"] = perm
    return out


async def topic_data(admin: Admin, topic: str) -> dict[str, Any]:
    """Queues (min, max, last update), route and consuming groups with their lag; raises
    TopicNotExistError (answered 404) for an unknown topic."""
    route = await admin.topic_route(topic)
    queues = [
        {
            "broker_name": q.broker_name,
            "queue_id": q.queue_id,
            "min_offset": q.min_offset,
            "max_offset": q.max_offset,
            "last_update_timestamp": q.last_update_timestamp_ms,
        }
        for q in await admin.topic_status(topic)
    ]
    groups = []
    for group in await admin.topic_consumers(topic):
        progress = await admin.consumer_progress(group, topic)
        groups.append(
            {"group": group, "lag": sum(p.lag for p in progress), "queues": len(progress)}
        )
    return {
        "topic": topic,
        "kind": topic_kind(topic),
        "queues": queues,
        "route": {
            "queue_datas": [
                {
                    "broker_name": q.broker_name,
                    "read_queue_nums": q.read_queue_nums,
                    "write_queue_nums": q.write_queue_nums,
                    "perm": q.perm,
                    "perm_text": PERMS.get(q.perm, str(q.perm)),
                }
                for q in route.queue_datas
            ],
            "broker_datas": [
                {
                    "cluster": b.cluster,
                    "broker_name": b.broker_name,
                    "broker_addrs": {str(k): v for k, v in sorted(b.broker_addrs.items())},
                }
                for b in route.broker_datas
            ],
        },
        "groups": groups,
        "perms": PERMS,
    }


async def producer_of(app: Starlette) -> Producer:
    """The console's one producer, started on first use."""
    if app.state.producer is None:
        lock: asyncio.Lock = app.state.__dict__.setdefault("producer_lock", asyncio.Lock())
        async with lock:
            if app.state.producer is None:
                started = Producer(
                    group=CONSOLE_PRODUCER_GROUP,
                    namesrv=app.state.namesrv,
                    **app.state.sdk_settings,
                )
                await started.start()
                app.state.producer = started
    producer: Producer = app.state.producer
    return producer


async def close_producer(app: Starlette) -> None:
    if app.state.producer is not None:
        await app.state.producer.shutdown()
        app.state.producer = None


async def send_test(request: Request, topic: str, fields: dict[str, Any]) -> dict[str, Any]:
    await admin_of(request).topic_route(topic)  # 404 for an unknown topic, no auto-create
    body = str(fields.get("body", ""))
    if not body:
        raise BadInputError("the message body is empty")
    tags = str(fields.get("tags", "")).strip() or None
    keys = str(fields.get("keys", "")).split()
    producer = await producer_of(request.app)
    result = await producer.send(Message(topic, body.encode(), tags=tags, keys=keys))
    audit(request, "send", topic=topic, msg_id=result.msg_id)
    return {
        "status": result.status.name,
        "msg_id": result.msg_id,
        "offset_msg_id": result.offset_msg_id,
        "broker_name": result.queue.broker_name,
        "queue_id": result.queue.queue_id,
        "queue_offset": result.queue_offset,
    }


async def fields_of(request: Request) -> dict[str, Any]:
    if is_api(request):
        try:
            doc = json.loads(await request.body() or b"{}")
        except ValueError:
            raise BadInputError("the body is not JSON") from None
        if not isinstance(doc, dict):
            raise BadInputError("the body must be a JSON object")
        return doc
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


# -- handlers ------------------------------------------------------------------------------


async def topics_page(request: Request) -> Response:
    try:
        data = await topics_data(admin_of(request), request.query_params.get("kind") or None)
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    return render(request, "topics.html", {**data, "perms": PERMS})


async def api_topics(request: Request) -> Response:
    try:
        data = await topics_data(admin_of(request), request.query_params.get("kind") or None)
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    return JSONResponse(data)


async def save_topic(request: Request) -> Response:
    """Create or update a topic on every master (form or JSON)."""
    if (refused := await refuse_change(request)) is not None:
        return refused
    try:
        settings = topic_settings(await fields_of(request))
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    brokers = await admin_of(request).update_topic(
        settings["topic"],
        read_queue_nums=settings["read_queue_nums"],
        write_queue_nums=settings["write_queue_nums"],
        perm=settings["perm"],
    )
    audit(request, "update-topic", **settings)
    if is_api(request):
        return JSONResponse({**settings, "brokers": brokers})
    return RedirectResponse(request.url_for("topic_page", topic=settings["topic"]), 303)


async def topic_page(request: Request) -> Response:
    data = await topic_data(admin_of(request), request.path_params["topic"])
    sent = {k[5:]: v for k, v in request.query_params.items() if k.startswith("sent_")}
    return render(request, "topic.html", {**data, "sent": sent})


async def api_topic(request: Request) -> Response:
    return JSONResponse(await topic_data(admin_of(request), request.path_params["topic"]))


async def send_message(request: Request) -> Response:
    if (refused := await refuse_change(request)) is not None:
        return refused
    topic = request.path_params["topic"]
    try:
        result = await send_test(request, topic, await fields_of(request))
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    if is_api(request):
        return JSONResponse(result)
    url = request.url_for("topic_page", topic=topic).include_query_params(
        **{f"sent_{k}": v for k, v in result.items()}
    )
    return RedirectResponse(url, 303)


async def delete_confirm_page(request: Request) -> Response:
    topic = request.path_params["topic"]
    await admin_of(request).topic_route(topic)
    return render(request, "topic_delete.html", {"topic": topic})


async def delete_topic(request: Request) -> Response:
    """Delete on every master and the nameservers; the form must repeat the topic's name."""
    if (refused := await refuse_change(request)) is not None:
        return refused
    topic = request.path_params["topic"]
    admin = admin_of(request)
    await admin.topic_route(topic)  # 404 for an unknown topic
    if not is_api(request):
        fields = await fields_of(request)
        if fields.get("confirm") != topic:
            return error_response(
                request, 400, f"type the topic's name ({topic}) to confirm the deletion"
            )
    try:
        await admin.delete_topic(topic)
    except RocketqError as exc:
        return error_response(request, 502, f"deleting {topic} failed: {exc}")
    audit(request, "delete-topic", topic=topic)
    if is_api(request):
        return JSONResponse({"deleted": topic})
    return RedirectResponse("/topics", 303)


ROUTES: Final = [
    Route("/topics", topics_page),
    Route("/topics", save_topic, methods=["POST"]),
    Route("/api/topics", api_topics),
    Route("/api/topics", save_topic, methods=["POST"]),
    Route("/topics/{topic}", topic_page, name="topic_page"),
    Route("/api/topics/{topic}", api_topic),
    Route("/api/topics/{topic}", delete_topic, methods=["DELETE"]),
    Route("/topics/{topic}/send", send_message, methods=["POST"]),
    Route("/api/topics/{topic}/messages", send_message, methods=["POST"]),
    Route("/topics/{topic}/delete", delete_confirm_page),
    Route("/topics/{topic}/delete", delete_topic, methods=["POST"]),
]
