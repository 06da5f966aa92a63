"""What ``rocketq admin consumer-status`` and ``rocketq admin consume-message`` show: a
consumer client's running info in mqadmin's sections (properties, subscriptions, owned
queues, RT and TPS, the thread dump) as tables, the checks mqadmin makes over a group's
clients (the same subscriptions everywhere, queues that stopped consuming or lost their
lock), a direct consume's outcome, and the JSON of each for ``--json``. Pure functions over
the SDK's results; the CLI prints them."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from rocketq.common.exceptions import ConsumerNotOnlineError, RocketqError
from rocketq.remoting.codes import RocketqVersion

if TYPE_CHECKING:
    from rocketq.sdk.admin import Admin
    from rocketq.sdk.admin_wire import ConsumerConnection
    from rocketq.sdk.running_info import ConsumeMessageDirectlyResult, ConsumerRunningInfo

Rows: TypeAlias = list[list[object]]
# A table: its title, its header and its rows.
Section: TypeAlias = tuple[str, list[str], Rows]
# What consumer-status found: per client its connection (None when asked for one client by
# id) and its running info, or why it has none.
Found: TypeAlias = list[tuple["ConsumerConnection | None", "ConsumerRunningInfo | RocketqError"]]
Table: TypeAlias = Callable[[Sequence[Sequence[object]], Sequence[str]], str]

BLOCKED_AFTER_MS: Final = 60_000  # mqadmin: messages cached and nothing consumed for a minute
QUEUE_HEADER: Final = [
    "topic", "broker", "queue", "commit_offset", "cached", "cached_offsets", "cached_mib",
    "consuming", "locked", "dropped", "last_pull", "last_consume",
]  # fmt: skip
STATUS_HEADER: Final = [
    "topic", "pull_rt_ms", "pull_tps", "consume_rt_ms", "consume_ok_tps", "consume_failed_tps",
    "failed_msgs_in_hour",
]  # fmt: skip


def _time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def sections(info: ConsumerRunningInfo) -> list[Section]:
    """The running info as mqadmin's formatString has it, one table per section."""
    queues: Rows = [
        [
            mq.topic,
            mq.broker_name,
            mq.queue_id,
            q.commit_offset,
            q.cached_msg_count,
            f"{q.cached_msg_min_offset}-{q.cached_msg_max_offset}" if q.cached_msg_count else "-",
            q.cached_msg_size_in_mib,
            q.transaction_msg_count,
            "yes" if q.locked else "no",
            "yes" if q.dropped else "no",
            _time(q.last_pull_timestamp),
            _time(q.last_consume_timestamp),
        ]
        for mq, q in info.mq_table.items()
    ]
    status: Rows = [
        [
            topic,
            f"{s.pull_rt:.2f}",
            f"{s.pull_tps:.2f}",
            f"{s.consume_rt:.2f}",
            f"{s.consume_ok_tps:.2f}",
            f"{s.consume_failed_tps:.2f}",
            s.consume_failed_msgs,
        ]
        for topic, s in info.status_table.items()
    ]
    return [
        ("#Consumer Properties#", ["key", "value"], [[k, v] for k, v in info.properties.items()]),
        (
            "#Consumer Subscription#",
            ["topic", "expression", "type"],
            [[s.topic, s.expression, s.expression_type] for s in info.subscriptions],
        ),
        ("#Consumer Offset and MQ Detail#", QUEUE_HEADER, queues),
        ("#Consumer RT&TPS#", STATUS_HEADER, status),
    ]


def same_subscriptions(infos: dict[str, ConsumerRunningInfo]) -> bool:
    """Every client of the group subscribes to the same topics with the same expressions
    (mqadmin's analyzeSubscription)."""
    subs = {
        frozenset((s.topic, s.expression, s.expression_type) for s in i.subscriptions)
        for i in infos.values()
    }
    return len(subs) <= 1


def warnings(client_id: str, info: ConsumerRunningInfo, now_ms: int) -> list[str]:
    """A push consumer's queues that look stuck (mqadmin's analyzeProcessQueue): orderly
    ones without their lock, others with messages waiting and nothing consumed for a
    minute."""
    if info.consume_type != "CONSUME_PASSIVELY":
        return []
    out = []
    for mq, q in info.mq_table.items():
        name = f"{mq.topic}/{mq.broker_name}/{mq.queue_id}"
        if info.orderly and not q.locked:
            since = now_ms - q.last_lock_timestamp if q.last_lock_timestamp else 0
            out.append(f"{client_id} {name} can't lock for a while, {since} ms")
        elif not info.orderly and q.cached_msg_count > 0:
            idle = now_ms - q.last_consume_timestamp
            if idle > BLOCKED_AFTER_MS:
                out.append(
                    f"{client_id} {name} can't consume for a while, maybe blocked, {idle} ms"
                )
    return out


def running_info_json(info: ConsumerRunningInfo) -> dict[str, Any]:
    return {
        "properties": info.properties,
        "subscriptions": [asdict(s) for s in info.subscriptions],
        "queues": [
            {"topic": mq.topic, "broker_name": mq.broker_name, "queue_id": mq.queue_id} | asdict(q)
            for mq, q in info.mq_table.items()
        ],
        "status": {topic: asdict(s) for topic, s in info.status_table.items()},
        "jstack": info.jstack,
    }


def direct_result_rows(result: ConsumeMessageDirectlyResult) -> Rows:
    return [
        ["consume_result", result.consume_result or "-"],
        ["order", "true" if result.order else "false"],
        ["auto_commit", "true" if result.auto_commit else "false"],
        ["spent_ms", result.spent_time_mills],
        ["remark", result.remark or "-"],
    ]


async def gather(admin: Admin, group: str, client_id: str | None, jstack: bool) -> Found:
    """One client's running info, or every online client's (one that cannot answer is
    kept with its error)."""
    if client_id is not None:
        return [(None, await admin.consumer_running_info(group, client_id, jstack=jstack))]
    conns = await admin.consumer_connections(group)
    if not conns:
        raise ConsumerNotOnlineError(
            f"consumer group {group!r} has no online client; is its consumer running?"
        )
    found: Found = []
    for c in conns:
        try:
            found.append((c, await admin.consumer_running_info(group, c.client_id, jstack=jstack)))
        except RocketqError as exc:
            found.append((c, exc))
    return found


def _infos(found: Found, client_id: str | None) -> dict[str, ConsumerRunningInfo]:
    return {
        c.client_id if c is not None else client_id or "": i
        for c, i in found
        if not isinstance(i, RocketqError)
    }


def status_json(found: Found, client_id: str | None) -> dict[str, Any]:
    """One client's running info; or every client with its address, language, version
    and running info (or error), and whether they subscribe alike."""
    infos = _infos(found, client_id)
    if client_id is not None:
        return running_info_json(infos[client_id])
    return {
        "clients": [
            {
                "client_id": c.client_id,
                "address": c.client_addr,
                "language": c.language,
                "version": RocketqVersion.describe(c.version),
                "running_info": None if isinstance(i, RocketqError) else running_info_json(i),
                "error": str(i) if isinstance(i, RocketqError) else None,
            }
            for c, i in found
            if c is not None
        ],
        "same_subscription": same_subscriptions(infos),
    }


def status_text(found: Found, client_id: str | None, table: Table) -> str:
    """For people: without a client id the group's clients and mqadmin's checks first;
    then each client's sections."""
    infos = _infos(found, client_id)
    out = []
    if client_id is None:
        rows = [
            [
                n, c.client_id, c.client_addr, c.language, RocketqVersion.describe(c.version),
                f"error: {i}" if isinstance(i, RocketqError) else "ok",
            ]
            for n, (c, i) in enumerate(found, 1)
            if c is not None
        ]  # fmt: skip
        out.append(table(rows, ["#", "client_id", "address", "language", "version", "status"]))
        if infos:
            out.append(
                "\nSame subscription in the group"
                if same_subscriptions(infos)
                else "\nWARN: the group's clients subscribe differently"
            )
            now = int(time.time() * 1000)
            out += [f"WARN: {w}" for cid, info in infos.items() for w in warnings(cid, info, now)]
    for cid, info in infos.items():
        if client_id is None:
            out.append(f"\n== {cid} ==")
        for title, header, rows in sections(info):
            out.append(f"\n{title}\n{table(rows, header)}")
        if info.jstack is not None:
            out.append(f"\n#Consumer jstack#\n{info.jstack}")
    return "\n".join(out).lstrip("\n")
