"""Pop state on real processes: a three-member Raft group's leader is killed between a pop
and the end of the popped messages' invisible time. The new leader rebuilds the pops'
check points and acknowledgements from the replicated revive log: the messages not
acknowledged come back to the group, the acknowledged one does not."""

from __future__ import annotations

import asyncio
import signal

from rocketq.broker.pop import PROPERTY_POP_CK, ExtraInfo
from rocketq.common.message import Message, MessageExt
from rocketq.common.record import decode_records
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, connect
from rocketq.sdk.producer import Producer
from tests.integration.conftest import MakeCluster
from tests.integration.test_raft import make_topic, raft_cluster, wait_leader
from tests.integration.waiting import wait_until

TOPIC = "PopRaft"
GROUP = "pop-raft-cg"


async def pop(conn: Connection, invisible: int) -> list[MessageExt]:
    header = {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "32",
        "invisibleTime": str(invisible), "pollTime": "0", "bornTime": "0", "initMode": "0",
    }  # fmt: skip
    answer = await conn.invoke(RemotingCommand(RequestCode.POP_MESSAGE, header), 5.0)
    assert answer.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), answer.remark
    return decode_records(bytes(answer.body or b""))


async def committed_offsets(addr: str) -> int:
    """The group's offsets on a member, summed over the topic's queues."""
    conn = await connect(addr, {})
    try:
        total = 0
        for q in range(2):
            header = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(q)}
            answer = await conn.invoke(
                RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, header), 5.0
            )
            if answer.code == ResponseCode.SUCCESS:
                total += int((answer.ext or {}).get("offset", "0"))
        return total
    finally:
        conn.close()


async def test_a_new_leader_revives_what_was_popped_and_not_acknowledged(
    make_cluster: MakeCluster,
) -> None:
    cluster = raft_cluster(make_cluster)
    ns = cluster.namesrv_addr
    await make_topic(ns, TOPIC, queues=2)
    leader = await wait_leader(cluster)
    async with Producer("pop-raft-pg", ns) as producer:
        for body in (b"acked", b"lost-1", b"lost-2"):
            assert (await producer.send(Message(TOPIC, body))).ok
    conn = await connect(leader.addr, {})
    try:
        popped: list[MessageExt] = []

        async def all_popped() -> bool:
            popped.extend(await pop(conn, invisible=4_000))
            return len(popped) >= 3

        await wait_until(all_popped, "the three messages popped", timeout=15)
        acked = next(m for m in popped if m.body == b"acked")
        info = ExtraInfo.parse(acked.properties[PROPERTY_POP_CK])
        header = {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(info.queue_id),
            "extraInfo": acked.properties[PROPERTY_POP_CK], "offset": str(info.queue_offset),
        }  # fmt: skip
        answer = await conn.invoke(RemotingCommand(RequestCode.ACK_MESSAGE, header), 5.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    finally:
        conn.close()
    # The followers copy the group's offsets every dledger_sync_interval: once they have
    # them, the leader goes.
    followers = [n for n in cluster.brokers if n is not leader]

    async def offsets_copied() -> bool:
        return all([await committed_offsets(n.addr) == 3 for n in followers])

    await wait_until(offsets_copied, "the followers' copy of the group's offsets", timeout=15)
    cluster.kill(leader.name, signal.SIGKILL)
    new = await wait_leader(cluster, not_=leader)
    conn = await connect(new.addr, {})
    try:
        back: list[MessageExt] = []

        async def revived() -> bool:
            back.extend(await pop(conn, invisible=60_000))
            return len(back) >= 2

        await wait_until(revived, "the unacknowledged messages back", timeout=30)
        assert sorted(m.body for m in back) == [b"lost-1", b"lost-2"]
        assert all(m.reconsume_times == 1 and m.topic == TOPIC for m in back)
        # A few revive turns more: the acknowledged message stays acknowledged.
        deadline = asyncio.get_running_loop().time() + 3
        while asyncio.get_running_loop().time() < deadline:
            assert [m.body for m in await pop(conn, invisible=60_000)] == []
            await asyncio.sleep(0.5)
    finally:
        conn.close()
