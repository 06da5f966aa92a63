"""``rocketq admin ...`` (mqadmin's verbs in kebab-case) and ``rocketq send`` /
``rocketq consume`` for trying things by hand. Tables for people, ``--json`` for tools;
errors name the cause, exit non-zero and print no traceback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, is_dataclass
from typing import Annotated, Any, TypeVar

import typer

from rocketq.cli import cluster_list as listing
from rocketq.cli import consumer_status as status
from rocketq.cli.options import DEFAULT_NAMESRV as DEFAULT_NAMESRV  # for dlq_cli too
from rocketq.cli.options import security_settings
from rocketq.common import times
from rocketq.common.aio import wait_event
from rocketq.common.message import message_doc

T = TypeVar("T")

admin_app = typer.Typer(
    help="Administer topics, groups, offsets and messages.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

Namesrv = Annotated[
    str,
    typer.Option(
        "--namesrv",
        "-n",
        envvar="NAMESRV_ADDR",
        help="Nameserver(s), 'host:port;host:port' (env NAMESRV_ADDR).",
    ),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TIME_HELP = f"epoch ms, 'now', or ISO 8601 such as 2026-03-29T02:30:00 ({times.RULE})"
"""How a time option is given, for its help text (``rocketq.common.times`` reads it)."""


def run(make: Callable[[], Awaitable[T]]) -> T:
    """Run one async admin action; rocketq errors become a message and exit code 1."""
    from rocketq.common.exceptions import RocketqError

    try:
        return asyncio.run(make())  # type: ignore[arg-type]
    except RocketqError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def emit(rows: Sequence[Sequence[object]], header: Sequence[str], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([dict(zip(header, r, strict=True)) for r in rows], default=str))
    else:
        typer.echo(table(rows, header))


def to_jsonable(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    return obj


async def _with_admin(namesrv: str, fn: Callable[[Any], Awaitable[T]]) -> T:
    from rocketq.sdk.admin import Admin

    async with Admin(namesrv, **security_settings()) as admin:
        return await fn(admin)


@admin_app.command("update-topic")
def update_topic(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    read_queue_nums: Annotated[int, typer.Option("--read-queue-nums", "-r", min=1, max=1024)] = 8,
    write_queue_nums: Annotated[int, typer.Option("--write-queue-nums", "-w", min=1, max=1024)] = 8,
    perm: Annotated[int, typer.Option("--perm", "-p", min=0, max=7, help="2 W, 4 R, 6 RW.")] = 6,
    cluster: Annotated[str | None, typer.Option("--cluster", "-c")] = None,
    broker_addr: Annotated[str | None, typer.Option("--broker-addr", "-b")] = None,
) -> None:
    """Create or update a topic on every master of a cluster (or one broker)."""
    targets = run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.update_topic(
                topic,
                read_queue_nums=read_queue_nums,
                write_queue_nums=write_queue_nums,
                perm=perm,
                cluster=cluster,
                broker_addr=broker_addr,
            ),
        )
    )
    typer.echo(
        f"topic {topic}: {read_queue_nums} read / {write_queue_nums} write queues, perm "
        f"{perm}, on {', '.join(targets)}"
    )


@admin_app.command("delete-topic")
def delete_topic(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    cluster: Annotated[str | None, typer.Option("--cluster", "-c")] = None,
) -> None:
    """Delete a topic from the brokers and the nameservers."""
    run(lambda: _with_admin(namesrv, lambda a: a.delete_topic(topic, cluster=cluster)))
    typer.echo(f"topic {topic} deleted")


@admin_app.command("topic-list")
def topic_list(namesrv: Namesrv = DEFAULT_NAMESRV, as_json: JsonOut = False) -> None:
    """Every topic the nameserver knows."""
    topics = run(lambda: _with_admin(namesrv, lambda a: a.topic_list()))
    emit([[t] for t in topics], ["topic"], as_json)


@admin_app.command("topic-route")
def topic_route(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """Which brokers serve a topic, with how many queues."""
    route = run(lambda: _with_admin(namesrv, lambda a: a.topic_route(topic)))
    addrs = {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}
    rows = [
        [
            q.broker_name,
            q.read_queue_nums,
            q.write_queue_nums,
            q.perm,
            " ".join(f"{i}={a}" for i, a in sorted(addrs.get(q.broker_name, {}).items())),
        ]
        for q in route.queue_datas
    ]
    emit(rows, ["broker", "read_queues", "write_queues", "perm", "addresses"], as_json)


@admin_app.command("topic-status")
def topic_status(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """Min and max offset and last update of every queue of a topic."""
    queues = run(lambda: _with_admin(namesrv, lambda a: a.topic_status(topic)))
    rows = [
        [q.broker_name, q.queue_id, q.min_offset, q.max_offset, _time(q.last_update_timestamp_ms)]
        for q in queues
    ]
    emit(rows, ["broker", "queue", "min_offset", "max_offset", "last_updated"], as_json)


def _time(ms: int) -> str:
    """A stored time for a table, in UTC like the time options read it: pasted back into
    ``--timestamp`` it is the same instant."""
    if ms <= 0:
        return "-"
    if ms > times.MAX_MS:
        return str(ms)
    return times.from_ms(ms).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


@admin_app.command("cluster-list")
def cluster_list(namesrv: Namesrv = DEFAULT_NAMESRV, as_json: JsonOut = False) -> None:
    """Brokers of every cluster with role, address, CommitLog offsets and replication lag
    (Raft members also with their member id, term, leader and committed offset)."""
    brokers = run(lambda: _with_admin(namesrv, lambda a: a.cluster_list()))
    emit(listing.rows(brokers), listing.HEADER, as_json)


@admin_app.command("broker-config")
def broker_config(
    broker: Annotated[
        str, typer.Option("--broker", "-b", help="The broker's address (host:port).")
    ],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """The config a broker runs with: every broker.toml key, its and its store's."""
    config = run(lambda: _with_admin(namesrv, lambda a: a.broker_config(broker)))
    emit(sorted(config.items()), ("KEY", "VALUE"), as_json)


@admin_app.command("transfer-leader")
def transfer_leader(
    group: Annotated[str, typer.Option("--group", "-g", help="The Raft group (dledger_group).")],
    to: Annotated[str, typer.Option("--to", help="The member to lead (dledger_self_id).")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the new master.")] = 10.0,
) -> None:
    """Hand leadership of a Raft broker group to another member; waits until that member
    is registered as the master (broker id 0)."""
    addr = run(lambda: _transfer_leader(namesrv, group, to, timeout))
    typer.echo(f"group {group}: {to} ({addr}) is the master now")


async def _transfer_leader(namesrv: str, group: str, to: str, timeout: float) -> str:
    from rocketq.common.exceptions import RocketqSystemError
    from rocketq.sdk.admin import Admin, BrokerInfo

    def members(brokers: list[BrokerInfo]) -> list[BrokerInfo]:
        return [
            b
            for b in brokers
            if b.runtime.get("raftGroup") == group
            or ("raftGroup" not in b.runtime and b.broker_name == group)
        ]

    deadline = time.monotonic() + timeout
    async with Admin(namesrv, **security_settings()) as admin:
        group_members = members(await admin.cluster_list())
        if not any("raftSelfId" in b.runtime for b in group_members):
            raise RocketqSystemError(
                f"no broker of raft group {group!r} is registered; check the group with "
                "`rocketq admin cluster-list`"
            )
        target = next((b for b in group_members if b.runtime.get("raftSelfId") == to), None)
        if target is None:
            known = ", ".join(sorted(b.runtime.get("raftSelfId", "?") for b in group_members))
            raise RocketqSystemError(f"raft group {group} has no live member {to!r} ({known})")
        if target.broker_id == 0 and target.runtime.get("raftServing") == "true":
            return target.addr
        leader = next((b for b in group_members if b.broker_id == 0), None)
        if leader is None:
            raise RocketqSystemError(f"raft group {group} has no master now; try again shortly")
        await admin.transfer_leader(leader.addr, to, group)
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            now = members(await admin.cluster_list())
            if any(
                b.runtime.get("raftSelfId") == to
                and b.broker_id == 0
                and b.runtime.get("raftServing") == "true"
                for b in now
            ):
                return target.addr
        raise RocketqSystemError(
            f"{to} did not become the master of {group} within {timeout:g} s; see "
            "`rocketq admin cluster-list` and the brokers' logs"
        )


@admin_app.command("update-sub-group")
def update_sub_group(
    group: Annotated[str, typer.Option("--group", "-g")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    retry_max_times: Annotated[int, typer.Option(min=0)] = 16,
    retry_queue_nums: Annotated[int, typer.Option(min=1)] = 1,
    consume_enable: Annotated[bool, typer.Option()] = True,
    orderly: Annotated[
        bool,
        typer.Option(
            "--orderly/--not-orderly",
            help="A FIFO group (consumeMessageOrderly): RocketMQ 5's clients get a queue's "
            "next messages only once the previous ones are acknowledged.",
        ),
    ] = False,
    cluster: Annotated[str | None, typer.Option("--cluster", "-c")] = None,
) -> None:
    """Create or update a consumer group's config on every master."""
    run(
        lambda: _with_admin(
            namesrv,
            lambda a: a.update_sub_group(
                group,
                cluster=cluster,
                retry_max_times=retry_max_times,
                retry_queue_nums=retry_queue_nums,
                consume_enable=consume_enable,
                consume_message_orderly=orderly,
            ),
        )
    )
    typer.echo(f"subscription group {group} updated")


@admin_app.command("consumer-progress")
def consumer_progress(
    group: Annotated[str, typer.Option("--group", "-g")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    topic: Annotated[str, typer.Option("--topic", "-t")] = "",
    as_json: JsonOut = False,
) -> None:
    """Broker offset, consumer offset and lag of every queue a group consumes."""
    progress = run(lambda: _with_admin(namesrv, lambda a: a.consumer_progress(group, topic)))
    rows = [
        [
            p.topic,
            p.broker_name,
            p.queue_id,
            p.broker_offset,
            p.consumer_offset,
            p.lag,
            _time(p.last_timestamp_ms),
        ]
        for p in progress
    ]
    emit(
        rows,
        ["topic", "broker", "queue", "broker_offset", "consumer_offset", "lag", "last_consumed"],
        as_json,
    )
    if not as_json:
        typer.echo(f"total lag: {sum(p.lag for p in progress)}")


@admin_app.command("consumer-connection")
def consumer_connection(
    group: Annotated[str, typer.Option("--group", "-g")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """The clients of a consumer group (with the language and version each one's heartbeat
    named: PYTHON and rocketq's for the SDK) and their subscriptions."""
    from rocketq.remoting.codes import RocketqVersion

    conns = run(lambda: _with_admin(namesrv, lambda a: a.consumer_connections(group)))
    rows = [
        [
            c.client_id,
            c.client_addr,
            c.language,
            RocketqVersion.describe(c.version),
            c.message_model,
            c.consume_from_where,
            "; ".join(f"{s.topic}:{s.expression}" for s in c.subscriptions),
        ]
        for c in conns
    ]
    header = ["client_id", "address", "language", "version", "model", "consume_from"]
    emit(rows, [*header, "subscriptions"], as_json)


@admin_app.command("consumer-status")
def consumer_status(
    group: Annotated[str, typer.Option("--group", "-g")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    client_id: Annotated[
        str | None, typer.Option("--client-id", "-i", help="One client (default: all).")
    ] = None,
    jstack: Annotated[
        bool, typer.Option("--jstack", "-s", help="Dump the client's threads and tasks too.")
    ] = False,
    as_json: JsonOut = False,
) -> None:
    """A consumer's running info, asked of the client itself through a broker (mqadmin
    consumerStatus): settings, subscriptions, owned queues with offsets and cached
    messages, pull and consume RT/TPS. Without -i, every client of the group in a table,
    whether they subscribe alike and which queues look stuck, then each one's details."""
    found = run(lambda: _with_admin(namesrv, lambda a: status.gather(a, group, client_id, jstack)))
    if as_json:
        typer.echo(json.dumps(status.status_json(found, client_id)))
    else:
        typer.echo(status.status_text(found, client_id, table))


@admin_app.command("consume-message")
def consume_message(
    group: Annotated[str, typer.Option("--group", "-g")],
    client_id: Annotated[str, typer.Option("--client-id", "-i", help="The consumer client.")],
    msg_id: Annotated[str, typer.Option("--msg-id", help="The message's offset id.")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """Have one push consumer client run its listener on a stored message, as a
    diagnostic (mqadmin consumeMessageDirectly): prints CR_SUCCESS, CR_LATER,
    CR_THROW_EXCEPTION... and the time it took. The group's offsets do not move and
    nothing is sent back."""
    result = run(
        lambda: _with_admin(namesrv, lambda a: a.consume_message_directly(group, client_id, msg_id))
    )
    if as_json:
        typer.echo(json.dumps(to_jsonable(result)))
    else:
        typer.echo(table(status.direct_result_rows(result), ["field", "value"]))


@admin_app.command("reset-offset-by-time")
def reset_offset_by_time(
    group: Annotated[str, typer.Option("--group", "-g")],
    topic: Annotated[str, typer.Option("--topic", "-t")],
    timestamp: Annotated[str, typer.Option("--timestamp", "-s", help=f"A time: {TIME_HELP}.")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """Move a group's offsets of a topic to the first message stored at or after a time."""
    ms = parse_time(timestamp)
    result = run(lambda: _with_admin(namesrv, lambda a: a.reset_offset_by_time(group, topic, ms)))
    emit(
        [[b, q, o] for (b, q), o in sorted(result.items())],
        ["broker", "queue", "new_offset"],
        as_json,
    )


def parse_time(text: str, option: str = "--timestamp") -> int:
    """Epoch ms from a CLI option's time: epoch ms, 'now', or ISO 8601, UTC unless it has
    an offset (``rocketq.common.times``); a bad one is a usage error naming the option."""
    try:
        return times.parse_ms(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r}: {exc}", param_hint=f"'{option}'") from None


async def _tracks(admin: Any, msgs: list[Any]) -> list[list[Any]]:
    return [await admin.message_track(m) for m in msgs]


def _print_messages(msgs: list[Any], as_json: bool, namesrv: str | None = None) -> None:
    tracks: list[list[Any]] = [[] for _ in msgs]
    if namesrv is not None:
        tracks = run(lambda: _with_admin(namesrv, lambda a: _tracks(a, msgs)))
    if as_json:
        typer.echo(
            json.dumps(
                [
                    message_doc(m)
                    | {
                        "consumed_by": [
                            {"group": t.group, "state": t.state, "detail": t.detail} for t in track
                        ]
                    }
                    for m, track in zip(msgs, tracks, strict=True)
                ]
            )
        )
        return
    for m, track in zip(msgs, tracks, strict=True):
        rows = [
            ("msg id", m.msg_id),
            ("offset msg id", m.offset_msg_id),
            ("topic / queue / offset", f"{m.topic} / {m.queue_id} / {m.queue_offset}"),
            ("tags / keys", f"{m.tags or '-'} / {' '.join(m.keys) or '-'}"),
            ("store host / time", f"{m.store_host} / {_time(m.store_timestamp)}"),
            ("born host / time", f"{m.born_host} / {_time(m.born_timestamp)}"),
            ("reconsume times", str(m.reconsume_times)),
            ("properties", " ".join(f"{k}={v}" for k, v in sorted(m.properties.items()))),
            ("body", repr(m.body[:200])),
        ]
        rows += [(f"group {t.group}", f"{t.state} ({t.detail})") for t in track]
        for name, value in rows:
            typer.echo(f"{name:<24} {value}")
        typer.echo("")


@admin_app.command("query-msg-by-key")
def query_msg_by_key(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    key: Annotated[str, typer.Option("--key", "-k")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    max_num: Annotated[int, typer.Option(min=1)] = 32,
    as_json: JsonOut = False,
) -> None:
    """Messages of a topic by key (or unique id), newest first."""
    msgs = run(
        lambda: _with_admin(namesrv, lambda a: a.query_msg_by_key(topic, key, max_num=max_num))
    )
    _print_messages(msgs, as_json, namesrv)


@admin_app.command("query-msg-by-id")
def query_msg_by_id(
    msg_id: Annotated[str, typer.Option("--msg-id", "-i")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """A message by its offset id (store host + CommitLog offset)."""
    msg = run(lambda: _with_admin(namesrv, lambda a: a.query_msg_by_id(msg_id)))
    _print_messages([msg], as_json, namesrv)


@admin_app.command("query-msg-by-offset")
def query_msg_by_offset(
    broker_addr: Annotated[str, typer.Option("--broker-addr", "-b")],
    offset: Annotated[int, typer.Option("--offset", "-o", min=0)],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """A message by broker address and CommitLog offset."""
    msg = run(lambda: _with_admin(namesrv, lambda a: a.query_msg_by_offset(broker_addr, offset)))
    _print_messages([msg], as_json, namesrv)


@admin_app.command("trace")
def trace(
    msg_id: Annotated[str, typer.Option("--msg-id", "-i", help="The message's unique id.")],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    trace_topic: Annotated[str, typer.Option()] = "RMQ_SYS_TRACE_TOPIC",
    as_json: JsonOut = False,
) -> None:
    """A message's trace: who sent and consumed it, when, how long it took, the outcome."""
    events = run(lambda: _with_admin(namesrv, lambda a: a.trace(msg_id, topic=trace_topic)))
    if not events:
        typer.echo(
            f"no trace of {msg_id} in {trace_topic} (were the producer and consumers made "
            "with enable_trace=True?)",
            err=True,
        )
        raise typer.Exit(1)
    rows = [
        [
            e.type,
            _time(e.timestamp),
            e.group,
            e.client_id,
            e.topic,
            str(e.cost_ms),
            e.status or ("ok" if e.success else "failed"),
            str(e.reconsume_times),
        ]
        for e in events
    ]
    emit(
        rows,
        ["type", "time", "group", "client", "topic", "cost_ms", "result", "reconsume"],
        as_json,
    )


def send_cmd(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    body: Annotated[str, typer.Option("--body", "-b")] = "hello rocketq",
    namesrv: Namesrv = DEFAULT_NAMESRV,
    tags: Annotated[str | None, typer.Option("--tags")] = None,
    keys: Annotated[str | None, typer.Option("--keys", help="Space-separated keys.")] = None,
    count: Annotated[int, typer.Option("--count", "-c", min=1)] = 1,
    group: Annotated[str, typer.Option("--group", "-g")] = "rocketq-cli-producer",
) -> None:
    """Send messages (for trying things by hand)."""

    async def go() -> None:
        from rocketq import Message, Producer

        async with Producer(group=group, namesrv=namesrv, **security_settings()) as producer:
            for i in range(count):
                text = body if count == 1 else f"{body} #{i}"
                r = await producer.send(
                    Message(topic, text.encode(), tags=tags, keys=keys.split() if keys else [])
                )
                typer.echo(
                    f"{r.status.name} msg_id={r.msg_id} offset_msg_id={r.offset_msg_id} "
                    f"queue={r.queue.broker_name}/{r.queue.queue_id} "
                    f"offset={r.queue_offset}"
                )

    run(go)


def consume_cmd(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    group: Annotated[str, typer.Option("--group", "-g")] = "rocketq-cli-consumer",
    namesrv: Namesrv = DEFAULT_NAMESRV,
    expression: Annotated[str, typer.Option("--expression", "-e")] = "*",
    count: Annotated[
        int, typer.Option("--count", "-c", min=0, help="Stop after N (0: never).")
    ] = 0,
    timeout: Annotated[float, typer.Option(help="Stop after S seconds without a message.")] = 10.0,
    from_first: Annotated[
        bool, typer.Option("--from-first", help="A new group starts at the oldest message.")
    ] = False,
    as_json: JsonOut = False,
) -> None:
    """Consume and print messages (for trying things by hand)."""

    async def go() -> None:
        from rocketq import ConsumeFrom, ConsumeResult, MessageExt, PushConsumer

        seen = 0
        got = asyncio.Event()
        done = asyncio.Event()
        consumer = PushConsumer(
            group,
            namesrv,
            consume_from=ConsumeFrom.FIRST_OFFSET if from_first else ConsumeFrom.LAST_OFFSET,
            **security_settings(),
        )
        consumer.subscribe(topic, expression)

        async def handler(msgs: list[MessageExt]) -> ConsumeResult:
            nonlocal seen
            _print_messages(msgs, as_json)
            seen += len(msgs)
            got.set()
            if count and seen >= count:
                done.set()
            return ConsumeResult.SUCCESS

        consumer.on_message(handler)
        await consumer.start()
        try:
            while not done.is_set():
                got.clear()
                if not await wait_event(got, timeout):
                    break
        finally:
            await consumer.shutdown()
        typer.echo(f"consumed {seen} message(s)", err=True)

    run(go)
