"""rocketq's strong remoting signature against real processes: a cluster started by the
launcher with authentication, authorization and ``authentication_require_strong_signature``
on. The nodes' own signed calls (registrations, a slave's replica sync) get through; the
SDK's producer, consumer and admin work (they sign with the strong signature once the
servers announce it); RocketMQ's signature is refused; a captured strong-signed
DELETE_TOPIC_IN_BROKER neither replays on a new connection, nor at another broker, nor
re-cuts into a delete of another topic, and the topics survive."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Final

import pytest

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.auth.credentials import Credentials
from rocketq.cluster.launcher import LocalCluster
from rocketq.remoting.broker_tables import all_topic_config_request, parse_all_topic_config
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import request_once
from rocketq.sdk import admin_wire as aw
from rocketq.sdk.admin import Admin
from rocketq.sdk.auth_wire import get_user_request
from rocketq.sdk.producer import SendStatus
from tests.integration.security_helpers import (
    CLUSTER_NAME,
    TIMEOUT,
    running,
    secure_spec,
    super_credentials,
)
from tests.integration.waiting import wait_until

STRONG: Final = {"authentication_require_strong_signature": "true"}
ALICE: Final = Credentials("alice", "alice-secret-1")
VICTIM: Final = "victim"
PADDED: Final = "zzvictim"  # "zz" + VICTIM: what RocketMQ's signature cannot tell apart


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = secure_spec(
        tmp_path_factory.mktemp("strong"),
        replication="ha",  # a slave: its replica sync is the inner credentials' too
        broker_settings=STRONG,
        nameserver_settings=STRONG,
    )
    with running(spec) as c:
        asyncio.run(_prepare(c))
        yield c


async def _prepare(cluster: LocalCluster) -> None:
    async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
        for topic in (VICTIM, PADDED, "Orders"):
            await admin.update_topic(topic, read_queue_nums=1, write_queue_nums=1)
        await admin.create_user(ALICE.access_key, ALICE.secret_key)
        await admin.create_acl(
            f"User:{ALICE.access_key}", ["Topic:Orders", "Group:orders-*"], ["Pub", "Sub"]
        )


def strong(who: Credentials) -> ClientSecurity:
    """A connection signing as the SDK does: strong where announced, RocketMQ's elsewhere."""
    return ClientSecurity(sign=who.sign, sign_strong=who.sign_strong)


async def topics(cluster: LocalCluster) -> set[str]:
    """The broker's topics, asked as the super user (strong-signed)."""
    broker = cluster.brokers[0]
    answer = await request_once(
        broker.addr,
        all_topic_config_request(),
        TIMEOUT,
        security=strong(super_credentials(cluster)),
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return set(parse_all_topic_config(answer).topic_config_table)


async def send_as_captured(
    cluster: LocalCluster, cmd: RemotingCommand, addr: str | None = None
) -> RemotingCommand:
    """Send a request exactly as it is (already signed), on a new connection that adds
    nothing, to the master (or ``addr``): what someone who captured it off the network can
    do."""
    copy = RemotingCommand(cmd.code, dict(cmd.ext or {}), cmd.body, version=cmd.version)
    return await request_once(addr or cluster.brokers[0].addr, copy, TIMEOUT)


async def announced_audience(cluster: LocalCluster) -> str:
    """The audience the master announces (AUTH_SESSION, asked unsigned)."""
    answer = await request_once(
        cluster.brokers[0].addr, RemotingCommand(RocketqRequestCode.AUTH_SESSION), TIMEOUT
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert (answer.ext or {}).get("strongSignature") == "required"
    return (answer.ext or {})["signatureAudience"]


async def test_the_nodes_and_the_sdk_work_with_the_strong_signature_required(
    cluster: LocalCluster,
) -> None:
    # The cluster came up: the brokers' inner-signed registrations were accepted.
    async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
        names = {b.broker_name for b in await admin.cluster_list()}
        assert names == {b.broker_name for b in cluster.brokers}
        assert "Orders" in await admin.topic_list()
    settings = {**cluster.client_settings(), "access_key": "alice", "secret_key": "alice-secret-1"}
    got: list[bytes] = []
    consumer = PushConsumer(
        "orders-cg", cluster.namesrv_addr, consume_from=ConsumeFrom.FIRST_OFFSET, **settings
    )
    consumer.subscribe("Orders", "*")

    async def handle(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(handle)
    await consumer.start()
    try:
        async with Producer("orders-pg", cluster.namesrv_addr, **settings) as producer:
            for i in range(3):
                result = await producer.send(Message("Orders", b"order-%d" % i))
                assert result.status is SendStatus.SEND_OK
        await wait_until(lambda: len(got) >= 3, lambda: f"3 messages consumed, got {got}")
    finally:
        await consumer.shutdown()
    assert sorted(got) == [b"order-0", b"order-1", b"order-2"]
    # The slave copies its master's users (GET_AUTH_METADATA, signed by the inner
    # credentials, which the master takes only with the strong signature).
    slave = next(b for b in cluster.brokers if b.broker_id > 0)
    root = strong(super_credentials(cluster))

    async def slave_knows_alice() -> bool:
        answer = await request_once(slave.addr, get_user_request("alice"), TIMEOUT, security=root)
        return answer.code == ResponseCode.SUCCESS

    await wait_until(slave_knows_alice, "the slave's copy of user alice")


async def test_rocketmqs_signature_is_refused(cluster: LocalCluster) -> None:
    root = super_credentials(cluster)
    legacy = aw.delete_topic_request(VICTIM)
    root.sign(legacy)
    answer = await send_as_captured(cluster, legacy)
    assert answer.code == ResponseCode.NO_PERMISSION
    assert "authentication_require_strong_signature = true" in (answer.remark or "")
    # At the nameserver too (a registration as the nodes signed them before).
    listing = RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    root.sign(listing)
    answer = await request_once(cluster.nameservers[0].addr, listing, TIMEOUT)
    assert answer.code == ResponseCode.NO_PERMISSION
    assert VICTIM in await topics(cluster)


async def test_a_captured_delete_neither_replays_nor_recuts(cluster: LocalCluster) -> None:
    root = super_credentials(cluster)
    captured = aw.delete_topic_request(PADDED)
    root.sign_strong(captured, await announced_audience(cluster))
    # The super user's own delete goes through once ...
    answer = await send_as_captured(cluster, captured)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert PADDED not in await topics(cluster)
    async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
        await admin.update_topic(
            PADDED, read_queue_nums=1, write_queue_nums=1, cluster=CLUSTER_NAME
        )
    assert PADDED in await topics(cluster)
    # ... and its capture, sent again on a new connection, is refused.
    answer = await send_as_captured(cluster, captured)
    assert answer.code == ResponseCode.NO_PERMISSION
    assert "reuses a Nonce" in (answer.remark or "")
    # Nor at another broker, which never saw the nonce: it was signed for the master.
    slave = next(b for b in cluster.brokers if b.broker_id > 0)
    answer = await send_as_captured(cluster, captured, slave.addr)
    assert answer.code == ResponseCode.NO_PERMISSION
    assert "signed for another server" in (answer.remark or "")
    # Re-cut into {ZZ: "zz", topic: "victim"} (RocketMQ's signature would match): refused.
    recut = RemotingCommand(captured.code, dict(captured.ext or {}), captured.body)
    assert recut.ext is not None
    recut.ext |= {"ZZ": "zz", "topic": VICTIM}
    answer = await send_as_captured(cluster, recut)
    assert answer.code == ResponseCode.NO_PERMISSION
    assert "strong signature of access key" in (answer.remark or "")
    assert {VICTIM, PADDED} <= await topics(cluster)
