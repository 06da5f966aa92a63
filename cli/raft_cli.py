"""``rocketq admin raft ...``: the membership of a Raft broker group at run time (replace a
failed host with a new one at another address: add the new member, then remove the old).

Changes go to the group's leader, found through the nameserver (the broker registered as
id 0 that serves); should leadership move meanwhile, the request is sent again once to the
new leader. A member that is not the leader answers naming the leader it knows."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rocketq.cli.admin_cli import DEFAULT_NAMESRV, JsonOut, Namesrv, emit, run
from rocketq.cli.options import security_settings
from rocketq.common.exceptions import (
    NotLeaderError,
    RocketqError,
    RocketqSystemError,
    ServiceNotAvailableError,
)
from rocketq.remoting.codes import RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk import admin_wire as aw

if TYPE_CHECKING:
    from rocketq.sdk.admin import Admin, BrokerInfo

raft_app = typer.Typer(
    help="Membership of a Raft broker group: list, add and remove members.",
    no_args_is_help=True,
)

BrokerName = Annotated[
    str, typer.Option("--broker-name", "-b", help="The broker group (broker_name) to change.")
]
MemberId = Annotated[str, typer.Option("--id", help="The member id (dledger_self_id).")]
HEADER = ("ID", "ADDRESS", "STATE", "ROLE", "TERM", "MATCH", "LAG_ENTRIES", "LAG_BYTES", "LAST_ACK")


async def group_members(admin: Admin, broker_name: str) -> list[BrokerInfo]:
    """The registered brokers of group ``broker_name`` (a clear error when none runs Raft)."""
    brokers = [b for b in await admin.cluster_list() if b.broker_name == broker_name]
    if not brokers:
        raise RocketqSystemError(
            f"no broker named {broker_name!r} is registered; see `rocketq admin cluster-list`"
        )
    if not any("raftSelfId" in b.runtime for b in brokers):
        raise RocketqSystemError(
            f"broker group {broker_name} does not run Raft (enable_dledger_commit_log is off)"
        )
    return brokers


def leader_of(brokers: list[BrokerInfo], broker_name: str) -> BrokerInfo:
    leader = next(
        (b for b in brokers if b.broker_id == 0 and b.runtime.get("raftServing") == "true"),
        None,
    )
    if leader is None:
        known = ", ".join(sorted(b.runtime.get("raftSelfId", b.addr) for b in brokers))
        raise RocketqSystemError(
            f"raft group {broker_name} has no leader now (registered: {known}); try again shortly"
        )
    return leader


async def ask(admin: Admin, addr: str, request: RemotingCommand) -> RemotingCommand:
    answer = await admin.client.broker(addr).invoke(request, admin.timeout)
    aw.check(answer)
    return answer


async def change_members(
    admin: Admin, broker_name: str, member: str, address: str | None
) -> tuple[str, int]:
    """Add ``member`` at Raft ``address`` to group ``broker_name`` (None: remove it), at the
    group's leader, asked once more if leadership moved meanwhile; -> (the leader's member
    id, the change's raft index). For tools too (the chaos harness), with an Admin made
    with the cluster's credentials."""
    ext = {"member": member}
    code = RocketqRequestCode.RAFT_REMOVE_MEMBER
    if address is not None:
        ext["address"] = address
        code = RocketqRequestCode.RAFT_ADD_MEMBER
    for attempt in range(2):
        leader = leader_of(await group_members(admin, broker_name), broker_name)
        try:
            answer = await ask(admin, leader.addr, RemotingCommand(code, dict(ext)))
            break
        except RocketqError as exc:
            # (a broker answers a member that does not lead SERVICE_NOT_AVAILABLE)
            moved = isinstance(exc, NotLeaderError | ServiceNotAvailableError)
            if attempt or not moved:
                raise
            await asyncio.sleep(1.0)  # leadership moved: the nameserver learns it
    index = int((answer.ext or {}).get("index", "0"))
    return leader.runtime.get("raftSelfId", leader.addr), index


async def change(
    namesrv: str, broker_name: str, member: str, address: str | None, wait: float
) -> tuple[str, int]:
    """:func:`change_members` with the CLI's credentials; with ``wait`` > 0 an added
    member is waited for until it is a voter."""
    from rocketq.sdk.admin import Admin

    async with Admin(namesrv, **security_settings()) as admin:
        leader, index = await change_members(admin, broker_name, member, address)
        if address is not None and wait > 0:
            await wait_voter(admin, broker_name, member, wait)
        return leader, index


async def wait_voter(admin: Admin, broker_name: str, member: str, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            view = await members_view(admin, broker_name)
            row = next((r for r in view["members"] if r["id"] == member), None)
            if row is not None and row["state"] == "voter" and view["changeCommitted"]:
                return
        except RocketqError:
            pass  # the leader is changing: ask again
        if time.monotonic() > deadline:
            raise RocketqSystemError(
                f"{member} is not a voter of {broker_name} after {wait:g} s (still catching "
                f"up?); see `rocketq admin raft members --broker-name {broker_name}`"
            )
        await asyncio.sleep(0.5)


async def members_view(admin: Admin, broker_name: str) -> dict[str, Any]:
    """The leader's view of the membership (another member's when there is no leader),
    each row with the member's own term when it is registered."""
    brokers = await group_members(admin, broker_name)
    try:
        source = leader_of(brokers, broker_name)
    except RocketqSystemError:
        source = brokers[0]
    answer = await ask(admin, source.addr, RemotingCommand(RocketqRequestCode.RAFT_MEMBERS, {}))
    try:
        view: dict[str, Any] = json.loads(bytes(answer.body or b"{}"))
        rows = view["members"]
    except (ValueError, KeyError, TypeError):
        raise RocketqSystemError(f"{source.addr} answered RAFT_MEMBERS with no members") from None
    terms = {b.runtime.get("raftSelfId"): b.runtime.get("raftTerm") for b in brokers}
    for row in rows:
        row["term"] = terms.get(row.get("id"))
    return view


def rows_of(view: dict[str, Any]) -> list[list[object]]:
    def cell(value: object) -> object:
        return "-" if value is None else value

    return [
        [
            r.get("id"),
            r.get("address"),
            r.get("state"),
            cell(r.get("role")),
            cell(r.get("term")),
            cell(r.get("matchIndex")),
            cell(r.get("lagEntries")),
            cell(r.get("lagBytes")),
            "-" if r.get("lastAckSecondsAgo") is None else f"{r['lastAckSecondsAgo']}s ago",
        ]
        for r in view["members"]
    ]


@raft_app.command("members")
def members(
    broker_name: BrokerName, namesrv: Namesrv = DEFAULT_NAMESRV, as_json: JsonOut = False
) -> None:
    """The group's members as its leader sees them: each one's state (voter, learner),
    role, term, match index and lag."""

    async def go() -> dict[str, Any]:
        from rocketq.sdk.admin import Admin

        async with Admin(namesrv, **security_settings()) as admin:
            return await members_view(admin, broker_name)

    view = run(go)
    if as_json:
        typer.echo(json.dumps(view))
        return
    change = "committed" if view.get("changeCommitted") else "IN PROGRESS"
    typer.echo(
        f"group {view.get('group')}: seen by {view.get('self')} ({view.get('role')}, term "
        f"{view.get('term')}), leader {view.get('leader') or '-'}, commit index "
        f"{view.get('commitIndex')}, last membership change at entry "
        f"{view.get('configIndex')} ({change})"
    )
    emit(rows_of(view), HEADER, False)


@raft_app.command("add-member")
def add_member(
    broker_name: BrokerName,
    member: MemberId,
    address: Annotated[
        str, typer.Option("--address", help="The new member's Raft port, host:port.")
    ],
    namesrv: Namesrv = DEFAULT_NAMESRV,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait until it is a voter (0: do not wait).")
    ] = 0.0,
) -> None:
    """Add a member (started beforehand with dledger_peers naming the group's members and
    itself). It joins as a learner and becomes a voter once its log has caught up."""
    leader, index = run(lambda: change(namesrv, broker_name, member, address, wait))
    state = "a voter now" if wait > 0 else "a learner until it has caught up"
    typer.echo(
        f"group {broker_name}: {member} ({address}) added by {leader} at entry {index}; {state}"
    )


@raft_app.command("remove-member")
def remove_member(
    broker_name: BrokerName, member: MemberId, namesrv: Namesrv = DEFAULT_NAMESRV
) -> None:
    """Remove a member (a failed host, or one being replaced). Removing the leader makes it
    step down once the change is committed."""
    leader, index = run(lambda: change(namesrv, broker_name, member, None, 0.0))
    typer.echo(f"group {broker_name}: {member} removed by {leader} at entry {index}")
