"""Nodes prove themselves as nodes: against real secured clusters (``cluster up --auth
--tls`` with ``tls_server_need_client_auth = "optional"``), a client certificate that the
cluster's own CA issued a user (CN=alice) proves no node, while the launcher's node
certificate (common name ``rocketq-node``, the nodes' ``tls_node_name_pattern``) does.

- HA port: an unsigned hello over alice's certificate streams nothing and is closed; the
  same hello over the node certificate is streamed the CommitLog; the real slave
  replicates on.
- Raft port: a VoteRequest claiming another member at a huge term over alice's
  certificate is refused and moves no term, the leader stays; a link over the node
  certificate is kept; the group serves on.
- Remoting ports: alice's certificate, and a user's certificate named after the inner
  access key, unsigned, are at most a user (no super request passes, no registration at
  the nameserver); the node certificate is a node's (super) identity.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Final

import pytest
import trustme

from rocketq import Message, Producer
from rocketq.cluster.launcher import LocalCluster, Node, raft_member_id
from rocketq.cluster.security import INNER_ACCESS_KEY
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.tls import ClientSecurity, client_context
from rocketq.remoting.transport import request_once
from rocketq.replication.ha import wire as ha_wire
from rocketq.replication.raft import wire as raft_wire
from rocketq.replication.raft.node import VoteRequest
from rocketq.sdk import admin_wire as aw
from rocketq.sdk.admin import Admin
from rocketq.sdk.producer import SendStatus
from tests.integration.security_helpers import (
    TIMEOUT,
    read_until_closed,
    route_addrs,
    running,
    runtime,
    secure_spec,
)
from tests.integration.test_raft import FAST_RAFT
from tests.integration.test_security_attacks import _raft_terms, ha_port, register_request
from tests.integration.waiting import wait_until

# Client certificates asked for, not required: the SDK's clients show none.
OPTIONAL: Final = {"tls_server_need_client_auth": "optional"}
# Where a forged slave claims to be (nothing listens there: a call back fails at once).
NOWHERE: Final = "127.0.0.1:1"


class Identities:
    """Client TLS contexts for one cluster: alice's certificate, a user's certificate
    named after the inner access key, and the nodes' own certificate."""

    def __init__(self, cluster: LocalCluster, folder: Path) -> None:
        certs = cluster.certs
        assert certs is not None and certs.ca_key_file is not None, "the launcher keeps its CA"
        self.ca_file = str(certs.ca_file)
        ca = trustme.CA.from_pem(certs.ca_file.read_bytes(), certs.ca_key_file.read_bytes())
        self.alice = self._user(ca, folder, "alice")
        self.inner_named = self._user(ca, folder, INNER_ACCESS_KEY)
        self.node = client_context(self.ca_file, str(certs.cert_file), str(certs.key_file))

    def _user(self, ca: trustme.CA, folder: Path, name: str) -> ssl.SSLContext:
        leaf = ca.issue_cert(f"{name}.users.test", common_name=name)
        cert, key = folder / f"{name}.pem", folder / f"{name}.key"
        cert.write_bytes(b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
        key.write_bytes(leaf.private_key_pem.bytes())
        return client_context(self.ca_file, str(cert), str(key))


async def tls_link(
    port: int, ctx: ssl.SSLContext, frames: bytes, wait: float
) -> tuple[bytes, bool]:
    """Send ``frames`` on a new TLS link to ``port`` made with ``ctx``; what came back
    within ``wait`` seconds and whether the peer closed the link."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1"),
        TIMEOUT,
    )
    try:
        writer.write(frames)
        await writer.drain()
        return await read_until_closed(reader, wait)
    finally:
        writer.close()


async def unsigned(node: Node, ctx: ssl.SSLContext, cmd: RemotingCommand) -> RemotingCommand:
    """``cmd`` to ``node`` without any AccessKey, over a link showing ``ctx``'s certificate."""
    return await request_once(node.addr, cmd, TIMEOUT, security=ClientSecurity(ssl=ctx))


async def test_a_user_certificate_is_no_node_on_the_ha_and_remoting_ports(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    spec = secure_spec(
        tmp_path_factory.mktemp("ha-nodes"),
        tls=True,
        replication="ha",
        broker_settings=OPTIONAL,
        nameserver_settings=OPTIONAL,
    )
    with running(spec) as cluster:
        ids = Identities(cluster, tmp_path_factory.mktemp("ha-users"))
        master, slave = cluster.brokers
        async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
            await admin.update_topic("NodeProof", read_queue_nums=2, write_queue_nums=2)
            await admin.create_user("alice", "alice-secret-1")
        async with Producer("node-proof", cluster.namesrv_addr, **cluster.client_settings()) as p:
            result = await p.send(Message("NodeProof", b"secret ledger line"))
            assert result.status is SendStatus.SEND_OK

        async def slave_connected() -> bool:
            return (await runtime(cluster, master)).get("haSlaves") == "1"

        await wait_until(slave_connected, "the slave to connect to its master")
        port = ha_port(master)
        hello = ha_wire.encode_hello(ha_wire.Hello(broker_id=1, max_offset=0, broker_addr=NOWHERE))
        for who, ctx in {"alice": ids.alice, INNER_ACCESS_KEY: ids.inner_named}.items():
            data, closed = await tls_link(port, ctx, hello, 5)  # refused at once
            assert closed, f"an unsigned hello over {who}'s certificate stays open"
            assert data == b"", f"an unsigned hello over {who}'s certificate got {len(data)} bytes"
        # The node certificate proves a node: the same unsigned hello is streamed the log.
        data, closed = await tls_link(port, ids.node, hello, 3)
        assert data, f"an unsigned hello over the node certificate got nothing ({closed=})"

        # Remoting: alice's certificate is alice, no more; the node certificate is a node's.
        info = aw.broker_runtime_info_request()
        for who, ctx in {"alice": ids.alice, INNER_ACCESS_KEY: ids.inner_named}.items():
            answer = await unsigned(master, ctx, info)
            assert answer.code == ResponseCode.NO_PERMISSION, (who, answer.code, answer.remark)
        answer = await unsigned(master, ids.node, info)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        nameserver = cluster.nameservers[0]
        topics = RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        impostor = register_request(master, "6.6.6.6:10911", "NodeProof")
        for who, ctx in {"alice": ids.alice, INNER_ACCESS_KEY: ids.inner_named}.items():
            for cmd in (topics, impostor):
                answer = await unsigned(nameserver, ctx, cmd)
                assert answer.code == ResponseCode.NO_PERMISSION, (who, cmd.code, answer.remark)
        assert (await unsigned(nameserver, ids.node, topics)).code == ResponseCode.SUCCESS
        route = await route_addrs(cluster, "NodeProof")
        assert route is not None and route[master.broker_name][0] == master.addr, route

        # The real slave replicates on.
        async with Producer("node-proof", cluster.namesrv_addr, **cluster.client_settings()) as p:
            result = await p.send(Message("NodeProof", b"after the attempts"))
            assert result.status is SendStatus.SEND_OK

        async def slave_has_it() -> bool:
            mine, theirs = await runtime(cluster, master), await runtime(cluster, slave)
            return theirs["commitLogMaxOffset"] == mine["commitLogMaxOffset"]

        await wait_until(slave_has_it, "the slave's CommitLog to reach the master's end")


async def test_a_user_certificate_cannot_speak_for_a_raft_member(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    spec = secure_spec(
        tmp_path_factory.mktemp("raft-nodes"),
        tls=True,
        replication="raft",
        broker_settings={**FAST_RAFT, **OPTIONAL},
        nameserver_settings=OPTIONAL,
    )
    with running(spec) as cluster:
        ids = Identities(cluster, tmp_path_factory.mktemp("raft-users"))
        settings = cluster.client_settings()
        async with Admin(cluster.namesrv_addr, **settings) as admin:
            await admin.update_topic("Elected", read_queue_nums=2, write_queue_nums=2)

        async def leader() -> Node | None:
            for n in cluster.brokers:
                if (await runtime(cluster, n)).get("raftServing") == "true":
                    return n
            return None

        async def has_leader() -> bool:
            return await leader() is not None

        await wait_until(has_leader, "a serving leader")
        serving = await leader()
        assert serving is not None
        me = raft_member_id(serving)
        other = next(raft_member_id(n) for n in cluster.brokers if n is not serving)
        terms = await _raft_terms(cluster)
        forged_term = max(terms.values()) + 1000
        vote = raft_wire.encode(
            other, VoteRequest(forged_term, other, last_index=10**9, last_term=forged_term)
        )
        for who, ctx in {"alice": ids.alice, INNER_ACCESS_KEY: ids.inner_named}.items():
            data, closed = await tls_link(serving.raft_port, ctx, vote, 5)  # refused at once
            assert closed, f"a vote over {who}'s certificate: the connection stays open"
            assert data == b"", f"a vote over {who}'s certificate: answered with {len(data)} bytes"
        after = await _raft_terms(cluster)
        assert all(t < forged_term for t in after.values()), after
        assert after[serving.name] == terms[serving.name], (terms, after)
        assert await leader() is serving, "the leader stepped down"
        # The node certificate proves a node: its link, speaking as a member, is kept.
        keepalive = raft_wire.encode(other, VoteRequest(0, other, 0, 0, pre=True))
        _, closed = await tls_link(serving.raft_port, ids.node, keepalive, 3)
        assert not closed, f"a link over the node certificate to {me} was refused"
        async with Producer("raft-writers", cluster.namesrv_addr, **settings) as producer:
            result = await producer.send(Message("Elected", b"still serving"), timeout=10)
            assert result.status is SendStatus.SEND_OK
