"""Replacing a Raft member on real processes: a fourth member on a new port joins through
``rocketq admin raft add-member`` and catches up byte for byte, a failed member is removed,
sends commit with the new membership, and still after the leader is killed; every
acknowledged message can be consumed."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
from typer.testing import CliRunner

from rocketq import Message, Producer
from rocketq.cli.main import app
from rocketq.cli.raft_cli import ask
from rocketq.cluster.launcher import raft_member_id
from rocketq.common.exceptions import ServiceNotAvailableError
from rocketq.remoting.codes import RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk.admin import Admin
from tests.integration.conftest import MakeCluster
from tests.integration.test_raft import (
    commitlog_bytes,
    consume_all,
    make_topic,
    members,
    raft_cluster,
    wait_leader,
)
from tests.integration.waiting import wait_until

TOPIC = "RaftMembers"


async def cli(*args: str) -> tuple[int, str]:
    result = await asyncio.to_thread(CliRunner().invoke, app, ["admin", "raft", *args])
    return result.exit_code, result.output


async def send(ns: str, start: int, count: int) -> set[bytes]:
    acked = set()
    async with Producer("pg-members", ns) as producer:
        for i in range(start, start + count):
            body = b"r%05d" % i
            if (await producer.send(Message(TOPIC, body), timeout=5)).ok:
                acked.add(body)
    return acked


async def test_a_member_is_replaced_at_run_time(make_cluster: MakeCluster) -> None:
    cluster = raft_cluster(make_cluster)
    ns = cluster.namesrv_addr
    await make_topic(ns, TOPIC)
    leader = await wait_leader(cluster)
    acked = await send(ns, 0, 100)
    assert len(acked) == 100

    # A new host: a fourth member on a port of its own joins and catches up.
    new = await asyncio.to_thread(cluster.add_raft_member, "broker-a")
    new_id = raft_member_id(new)
    code, out = await cli(
        "add-member", "-n", ns, "--broker-name", "broker-a", "--id", new_id,
        "--address", f"{new.host}:{new.raft_port}", "--wait", "20",
    )  # fmt: skip
    assert code == 0, out
    assert f"{new_id} ({new.host}:{new.raft_port}) added" in out

    async def caught_up() -> bool:
        info = await members(ns)
        lead, mine = info.get(leader.addr, {}), info.get(new.addr, {})
        return mine.get("commitLogMaxOffset") == lead.get("commitLogMaxOffset") and mine.get(
            "raftCommittedOffset"
        ) == lead.get("raftCommittedOffset")

    await wait_until(caught_up, "the new member to catch up", timeout=20)
    end = int((await members(ns))[leader.addr]["commitLogMaxOffset"])
    assert end > 0 and commitlog_bytes(new, end) == commitlog_bytes(leader, end)

    # Clear errors: the same id again, another member's address, an unknown member.
    code, out = await cli(
        "add-member", "-n", ns, "--broker-name", "broker-a", "--id", new_id,
        "--address", "127.0.0.1:1",
    )  # fmt: skip
    assert code == 1 and f"{new_id} is a member already" in out, out
    code, out = await cli(
        "add-member", "-n", ns, "--broker-name", "broker-a", "--id", "n9",
        "--address", f"{new.host}:{new.raft_port}",
    )  # fmt: skip
    assert code == 1 and f"is member {new_id}'s already" in out, out
    code, out = await cli("remove-member", "-n", ns, "--broker-name", "broker-a", "--id", "n9")
    assert code == 1 and "'n9' is not a member" in out, out
    # A member that is not the leader refuses, naming the leader.
    follower = next(b for b in cluster.brokers if b is not leader and b is not new)
    async with Admin(ns) as admin:
        request = RemotingCommand(RocketqRequestCode.RAFT_REMOVE_MEMBER, {"member": new_id})
        with pytest.raises(
            ServiceNotAvailableError, match=rf"follower \(the leader is {raft_member_id(leader)}\)"
        ):
            await ask(admin, follower.addr, request)

    # A failed host: killed, then removed; sends commit with the new membership.
    failed = next(b for b in cluster.brokers if b is not leader and b is not new)
    cluster.kill(failed.name, signal.SIGKILL)
    code, out = await cli(
        "remove-member", "-n", ns, "--broker-name", "broker-a", "--id", raft_member_id(failed)
    )
    assert code == 0, out
    acked |= await send(ns, 100, 100)
    assert len(acked) == 200

    code, out = await cli("members", "-n", ns, "--broker-name", "broker-a", "--json")
    assert code == 0, out
    view = json.loads(out)
    states = {r["id"]: r["state"] for r in view["members"]}
    survivors = sorted({raft_member_id(leader), new_id, raft_member_id(next(
        b for b in cluster.brokers if b not in (leader, new, failed)
    ))})  # fmt: skip
    assert states == dict.fromkeys(survivors, "voter"), view
    assert view["changeCommitted"] and view["leader"] == raft_member_id(leader)
    row = next(r for r in view["members"] if r["id"] == new_id)
    assert row["role"] == "FOLLOWER" and row["lagEntries"] <= 2, row
    code, out = await cli("members", "-n", ns, "--broker-name", "broker-a")
    assert code == 0 and f"{new_id}  {new.host}:{new.raft_port}  voter" in out, out

    # The leader dies: the two members left (one of them the new one) elect and commit.
    cluster.kill(leader.name, signal.SIGKILL)
    second = await wait_leader(cluster, not_=leader)
    assert second is not failed
    acked |= await send(ns, 200, 100)
    assert len(acked) == 300
    got = await consume_all(ns, "cg-members", TOPIC, acked)
    assert acked <= got

    # The old leader comes back: its stored membership wins over its dledger_peers (which
    # still name the removed member), and it follows the new leader.
    assert json.loads((leader.store / "dledger" / "members.json").read_text())["configs"]
    await asyncio.to_thread(cluster.restart, leader.name)

    async def rejoined() -> bool:
        info = await members(ns)
        back, lead = info.get(leader.addr, {}), info.get(second.addr, {})
        return (
            back.get("raftMembership") == "voter"
            and back.get("raftRole") == "FOLLOWER"
            and back.get("commitLogMaxOffset") == lead.get("commitLogMaxOffset")
        )

    await wait_until(rejoined, "the old leader to follow with the new membership", timeout=15)
    async with Admin(ns) as admin:  # its own view, not the leader's
        answer = await ask(admin, leader.addr, RemotingCommand(RocketqRequestCode.RAFT_MEMBERS))
    view = json.loads(bytes(answer.body or b""))
    assert {r["id"] for r in view["members"]} == set(survivors), view
