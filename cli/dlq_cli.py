"""``rocketq admin resend-message`` and ``rocketq admin dlq list|resend|export``: a
consumer group's dead letters, and sending stored messages to a group again. The console
uses the same ``Admin`` calls, so the two never differ."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rocketq.cli.admin_cli import (
    DEFAULT_NAMESRV,
    TIME_HELP,
    JsonOut,
    Namesrv,
    _time,
    _with_admin,
    emit,
    parse_time,
    run,
)
from rocketq.common.message import message_doc

dlq_app = typer.Typer(
    help="A consumer group's dead letters (%DLQ%<group>): list, resend, export.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

Group = Annotated[str, typer.Option("--group", "-g", help="The consumer group.")]
Begin = Annotated[str, typer.Option("--begin", help=f"A time: {TIME_HELP} (default: all).")]
End = Annotated[str, typer.Option("--end", help=f"A time: {TIME_HELP} (default: now).")]
MaxNum = Annotated[int, typer.Option("--max", min=1, help="At most this many messages.")]


def _range(begin: str, end: str) -> tuple[int, int | None]:
    return (
        parse_time(begin, "--begin") if begin else 0,
        parse_time(end, "--end") if end else None,
    )


def resend_message(
    msg_id: Annotated[str, typer.Option("--msg-id", "-i", help="The message's offset id.")],
    group: Group,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    as_json: JsonOut = False,
) -> None:
    """Send a stored message to a consumer group again (through %RETRY%<group>, due now,
    its reconsume count back at 0); the group's consumers get it under its own topic."""
    copy = run(lambda: _with_admin(namesrv, lambda a: a.resend_message(msg_id, group)))
    emit([[msg_id, group, copy]], ["msg_id", "group", "resent_as"], as_json)


async def _dead_letters(admin: Any, group: str, begin: int, end: int | None, limit: int) -> Any:
    return await admin.dlq_messages(group, begin, end, max_num=limit)


@dlq_app.command("list")
def dlq_list(
    group: Group,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    begin: Begin = "",
    end: End = "",
    max_num: MaxNum = 1000,
    as_json: JsonOut = False,
) -> None:
    """The group's dead letters stored in the time range, oldest first."""
    lo, hi = _range(begin, end)
    msgs = run(lambda: _with_admin(namesrv, lambda a: _dead_letters(a, group, lo, hi, max_num)))
    rows = [
        [
            m.offset_msg_id,
            m.properties.get("RETRY_TOPIC", ""),
            m.reconsume_times,
            _time(m.store_timestamp),
            (m.keys and " ".join(m.keys)) or "-",
            m.body[:40].decode(errors="replace"),
        ]
        for m in msgs
    ]
    emit(rows, ["offset_msg_id", "topic", "reconsumed", "stored", "keys", "body"], as_json)


@dlq_app.command("resend")
def dlq_resend(
    group: Group,
    msg_ids: Annotated[
        list[str],
        typer.Option("--msg-id", "-i", help="A dead letter's offset id (repeat for several)."),
    ] = [],  # noqa: B006 - typer reads the default
    every: Annotated[
        bool, typer.Option("--all", help="Every dead letter in the time range.")
    ] = False,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    begin: Begin = "",
    end: End = "",
    as_json: JsonOut = False,
) -> None:
    """Send dead letters back to their group (each through %RETRY%<group>)."""
    if bool(msg_ids) == every:
        raise typer.BadParameter("give --msg-id (one or more) or --all", param_hint="'--msg-id'")
    lo, hi = _range(begin, end)

    async def resend(admin: Any) -> list[list[str]]:
        ids = msg_ids
        if every:
            ids = [m.offset_msg_id for m in await _dead_letters(admin, group, lo, hi, 100_000)]
        return [[i, await admin.resend_message(i, group)] for i in ids]

    rows = run(lambda: _with_admin(namesrv, resend))
    emit(rows, ["msg_id", "resent_as"], as_json)


@dlq_app.command("export")
def dlq_export(
    group: Group,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
    namesrv: Namesrv = DEFAULT_NAMESRV,
    begin: Begin = "",
    end: End = "",
    max_num: MaxNum = 100_000,
) -> None:
    """The group's dead letters as JSON lines, one message per line, oldest first."""
    lo, hi = _range(begin, end)
    msgs = run(lambda: _with_admin(namesrv, lambda a: _dead_letters(a, group, lo, hi, max_num)))
    lines = "".join(json.dumps(message_doc(m)) + "\n" for m in msgs)
    if output is None:
        sys.stdout.write(lines)
    else:
        try:
            output.write_text(lines)
        except OSError as exc:
            typer.echo(f"error: cannot write {output}: {exc.strerror}", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"{len(msgs)} dead letters of {group} written to {output}", err=True)
