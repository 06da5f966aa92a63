"""The consumer group pages: every group the masters know with its members, consume TPS and
lag; a group's per-queue progress with each queue's owner client, its connections and
subscriptions, its config on each master, and reset offsets by time.

Consume TPS is what the masters measured over about the last minute, summed.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rocketq.common.exceptions import RocketqError
from rocketq.console.messages_view import parse_time
from rocketq.console.pages import admin_of, error_response, is_api, refuse_change, render
from rocketq.console.security import audit
from rocketq.console.topics_view import BadInputError, fields_of
from rocketq.sdk.admin import Admin


class UnknownGroupError(LookupError):
    """A group no master knows (answered 404)."""


async def groups_data(admin: Admin) -> dict[str, Any]:
    rows = []
    for group in await admin.group_list():
        conns = await admin.consumer_connections(group)
        progress = await admin.consumer_progress(group)
        tps = await admin.consume_tps(group)
        rows.append(
            {
                "group": group,
                "members": len(conns),
                "consume_tps": round(tps, 2),
                "lag": sum(p.lag for p in progress),
                "topics": sorted({p.topic for p in progress}),
            }
        )
    return {"groups": rows}


async def group_data(admin: Admin, group: str) -> dict[str, Any]:
    """Per-queue progress, connections, subscriptions and config; UnknownGroupError for a
    group that no master knows and that has no online client."""
    conns = await admin.consumer_connections(group)
    if group not in await admin.group_list() and not conns:
        raise UnknownGroupError(f"no consumer group {group!r} is known to the brokers")
    progress = await admin.consumer_progress(group)
    clients = sorted(c.client_id for c in conns)
    # The owner of a queue as AllocateMessageQueueAveragely gives it: the queues of a topic,
    # sorted, cut in contiguous runs over the sorted client ids.
    owner: dict[tuple[str, str, int], str | None] = {}
    for topic in sorted({p.topic for p in progress}):
        queues = [p for p in progress if p.topic == topic]
        for i, p in enumerate(queues):
            owner[(p.topic, p.broker_name, p.queue_id)] = (
                clients[i * len(clients) // len(queues)] if clients else None
            )
    config = await admin.group_config(group)
    return {
        "group": group,
        "lag": sum(p.lag for p in progress),
        "queues": [
            {
                "topic": p.topic,
                "broker_name": p.broker_name,
                "queue_id": p.queue_id,
                "broker_offset": p.broker_offset,
                "consumer_offset": p.consumer_offset,
                "lag": p.lag,
                "last_timestamp": p.last_timestamp_ms,
                "owner": owner.get((p.topic, p.broker_name, p.queue_id)),
            }
            for p in progress
        ],
        "topics": sorted({p.topic for p in progress}),
        "connections": [
            {
                "client_id": c.client_id,
                "client_addr": c.client_addr,
                "consume_type": c.consume_type,
                "message_model": c.message_model,
                "consume_from_where": c.consume_from_where,
                "last_update_timestamp": c.last_update_timestamp,
            }
            for c in conns
        ],
        "subscriptions": sorted(
            {
                (s.topic, s.expression_type or "TAG", s.expression or "*")
                for c in conns
                for s in c.subscriptions
            }
        ),
        "config": {
            name: {
                "consume_enable": c.consume_enable,
                "consume_broadcast_enable": c.consume_broadcast_enable,
                "retry_queue_nums": c.retry_queue_nums,
                "retry_max_times": c.retry_max_times,
                "broker_id": c.broker_id,
                "which_broker_when_consume_slowly": c.which_broker_when_consume_slowly,
                "notify_consumer_ids_changed_enable": c.notify_consumer_ids_changed_enable,
            }
            for name, c in config.items()
        },
    }


async def reset(request: Request, group: str, fields: dict[str, Any]) -> dict[str, Any]:
    admin = admin_of(request)
    known = await group_data(admin, group)
    topic = str(fields.get("topic", "")).strip()
    if not topic:
        raise BadInputError("name the topic whose offsets to reset")
    if topic not in known["topics"]:
        raise BadInputError(f"group {group} has no offsets on topic {topic}")
    timestamp = parse_time(fields.get("timestamp"), "timestamp")
    if timestamp is None:
        raise BadInputError("give the time to reset to (epoch ms or YYYY-MM-DDTHH:MM)")
    offsets = await admin.reset_offset_by_time(group, topic, timestamp)
    audit(request, "reset-offset", group=group, topic=topic, timestamp=timestamp)
    return {
        "group": group,
        "topic": topic,
        "timestamp": timestamp,
        "offsets": [
            {"broker_name": b, "queue_id": q, "consumer_offset": o}
            for (b, q), o in sorted(offsets.items())
        ],
    }


# -- handlers ------------------------------------------------------------------------------


async def groups_page(request: Request) -> Response:
    return render(request, "groups.html", await groups_data(admin_of(request)))


async def api_groups(request: Request) -> Response:
    return JSONResponse(await groups_data(admin_of(request)))


async def group_page(request: Request) -> Response:
    group = request.path_params["group"]
    try:
        data = await group_data(admin_of(request), group)
    except UnknownGroupError as exc:
        return error_response(request, 404, str(exc))
    reset_done = request.query_params.get("reset")
    return render(request, "group.html", {**data, "reset_done": reset_done})


async def api_group(request: Request) -> Response:
    try:
        data = await group_data(admin_of(request), request.path_params["group"])
    except UnknownGroupError as exc:
        return error_response(request, 404, str(exc))
    return JSONResponse(data)


async def reset_offsets(request: Request) -> Response:
    if (refused := await refuse_change(request)) is not None:
        return refused
    group = request.path_params["group"]
    try:
        result = await reset(request, group, await fields_of(request))
    except UnknownGroupError as exc:
        return error_response(request, 404, str(exc))
    except BadInputError as exc:
        return error_response(request, 400, str(exc))
    except RocketqError as exc:
        return error_response(request, 502, f"resetting {group}'s offsets failed: {exc}")
    if is_api(request):
        return JSONResponse(result)
    url = request.url_for("group_page", group=group).include_query_params(reset=result["topic"])
    return RedirectResponse(url, 303)


ROUTES: Final = [
    Route("/groups", groups_page),
    Route("/api/groups", api_groups),
    Route("/groups/{group}", group_page, name="group_page"),
    Route("/api/groups/{group}", api_group),
    Route("/groups/{group}/reset", reset_offsets, methods=["POST"]),
    Route("/api/groups/{group}/reset", reset_offsets, methods=["POST"]),
]
