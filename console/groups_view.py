"""The consumer group pages: every group the masters know with its members, consume TPS and
lag; a group's per-queue progress with each queue's owner client, its connections (each
with its language, version, consume mode and protocol: a RocketMQ 5 client of the brokers'
apache.rocketmq.v2 endpoint is a pop consumer over gRPC), subscriptions, its config on
each master with its FIFO switch (``consume_message_orderly``), and reset offsets by time.

Consume TPS is what the masters measured over about the last minute, summed.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from rocketq.common.exceptions import MessageIllegalError, RocketqError
from rocketq.common.names import check_topic_name, is_valid_group_name
from rocketq.console.messages_view import parse_time
from rocketq.console.pages import admin_of, error_response, is_api, refuse_change, render
from rocketq.console.security import audit
from rocketq.console.topics_view import BadInputError, fields_of
from rocketq.remoting.broker_tables import SubscriptionGroupConfig
from rocketq.remoting.codes import RocketqVersion
from rocketq.sdk.admin import Admin
from rocketq.sdk.admin_wire import ConsumerConnection

# The consume type brokers list a RocketMQ 5 (apache.rocketmq.v2, gRPC) consumer with, as
# RocketMQ 5's proxy registers its clients: remoting clients say CONSUME_ACTIVELY (pull)
# or CONSUME_PASSIVELY (push).
CONSUME_POP: Final = "CONSUME_POP"
GRPC: Final = "grpc"
REMOTING: Final = "remoting"


class UnknownGroupError(LookupError):
    """A group no master knows (answered 404)."""


def consume_mode(consume_type: str) -> str | None:
    """How a consume type consumes: "pop", "pull" or "push", as the brokers' metrics label
    it (``consume_mode`` of ``rocketmq_consumer_connections``); None when not said."""
    if consume_type == CONSUME_POP:
        return "pop"
    if "ACTIVELY" in consume_type:
        return "pull"
    if "PASSIVELY" in consume_type:
        return "push"
    return None


def connection_row(c: ConsumerConnection) -> dict[str, Any]:
    """One online client: who it is, its language and version, and how it consumes. The
    consume type is the group's (brokers keep one per group, as RocketMQ does), so the
    protocol follows it: a pop consumer is a client of the v2 gRPC endpoint."""
    mode = consume_mode(c.consume_type)
    protocol = GRPC if c.consume_type == CONSUME_POP else REMOTING
    return {
        "client_id": c.client_id,
        "client_addr": c.client_addr,
        "language": c.language or None,
        # A remoting client's heartbeat names its release; a v5 client has none (0).
        "version": RocketqVersion.describe(c.version) if c.version > 0 else None,
        "protocol": protocol,
        "consume_mode": mode,
        "consume_type": c.consume_type,
        "message_model": c.message_model,
        "consume_from_where": c.consume_from_where,
        "last_update_timestamp": c.last_update_timestamp,
    }


def fifo_state(configs: dict[str, SubscriptionGroupConfig]) -> str | None:
    """The group's FIFO switch over the masters (``consume_message_orderly``: RocketMQ 5's
    clients get a queue's next messages only once the previous ones are acknowledged):
    "on", "off", "mixed" when they differ, None when no master holds a config for it."""
    states = {c.consume_message_orderly for c in configs.values()}
    if not states:
        return None
    if len(states) > 1:
        return "mixed"
    return "on" if states.pop() else "off"


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
    group that no master knows and that has no online client, or whose name is not valid
    (nothing is asked of the brokers then)."""
    if not is_valid_group_name(group):
        raise UnknownGroupError(
            f"{group[:80]!r} is not a valid consumer group name (1-255 letters, digits, "
            "'%', '|', '-' and '_')"
        )
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
        "connections": [connection_row(c) for c in conns],
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
                "consume_message_orderly": c.consume_message_orderly,
            }
            for name, c in config.items()
        },
        "fifo": fifo_state(config),
    }


async def reset(request: Request, group: str, fields: dict[str, Any]) -> dict[str, Any]:
    admin = admin_of(request)
    known = await group_data(admin, group)
    topic = str(fields.get("topic", "")).strip()
    if not topic:
        raise BadInputError("name the topic whose offsets to reset")
    try:
        check_topic_name(topic)
    except MessageIllegalError as exc:
        raise BadInputError(str(exc)) from None
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
