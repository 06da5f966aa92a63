"""The attacks of issue 32, tried against real processes started by the launcher with
authentication and authorization on (``ClusterSpec(auth=True, tls=True)``), as anyone on
the network would try them: each is refused and leaves nothing changed.

- Nameserver: a REGISTER_BROKER naming an existing broker at 6.6.6.6:10911 — unsigned,
  signed by an unknown user, by a normal user, by a super user who is not the broker's
  identity — never replaces the broker's address in a topic's route, nor does an
  UNREGISTER_BROKER of the real broker take it out; DELETE_TOPIC_IN_NAMESRV and
  PUT_KV_CONFIG unsigned are refused.
- Broker: without credentials, creating and deleting topics, disabling a group,
  resetting and committing another group's offsets, pulling as another group,
  unregistering another client, releasing another client's queue locks, ending another
  producer's transaction, TRANSFER_LEADER and RESEND_MESSAGE are refused with
  NO_PERMISSION and change nothing; a normal user with the right ACL may do them.
- HA port: a hello without a signature, or signed with another secret, or replayed,
  streams no CommitLog and is closed; a forged acknowledgement does not complete a
  SYNC_MASTER's send; the real slave replicates on.
- Raft port: a frame naming another member, on a link that has not proved it is that
  member (no handshake, a handshake with another secret or of another member, a replayed
  one), is refused and moves no member's term; the group serves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any, Final

import pytest

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.auth.credentials import Credentials
from rocketq.chaos.hostile import listening_ports
from rocketq.cluster.launcher import LocalCluster, Node, raft_member_id
from rocketq.common.exceptions import NoPermissionError
from rocketq.common.message import MessageQueue
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.common.record import encode_batch_entry as batch_entry
from rocketq.remoting.broker_tables import SubscriptionGroupConfig, TopicConfigData
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import connect
from rocketq.replication.ha import wire as ha_wire
from rocketq.replication.raft import wire as raft_wire
from rocketq.replication.raft.node import VoteRequest
from rocketq.sdk import admin_wire as aw
from rocketq.sdk import client_wire as cw
from rocketq.sdk.admin import Admin
from rocketq.sdk.producer import SendStatus
from rocketq.sdk.transaction import TransactionProducer, TransactionState
from rocketq.sdk.wire import (
    ConsumerData,
    SubscriptionData,
    heartbeat_request,
    parse_topics_batch,
    pull_request,
    send_request,
    topics_batch_request,
)
from tests.integration.security_helpers import (
    CLUSTER_NAME,
    TIMEOUT,
    as_sender,
    ask,
    ask_super,
    broker_topics,
    committed_offset,
    inner_credentials,
    read_until_closed,
    route_addrs,
    running,
    runtime,
    secure_spec,
    settings_for,
    super_credentials,
)
from tests.integration.test_raft import FAST_RAFT
from tests.integration.waiting import wait_until

LEDGER: Final = "Ledger"  # the victims' topic
READERS: Final = "ledger-readers"  # a group whose offsets the super user commits
VICTIMS: Final = "victims"  # a group with a live consumer
ALICE: Final = Credentials("alice", "alice-secret-1")  # a normal user with an ACL
BOB: Final = Credentials("bob", "bob-secret-1")  # a normal user without one
MALLORY: Final = Credentials("mallory", "mallory-secret")  # nobody's user
IMPOSTOR_ADDR: Final = "6.6.6.6:10911"
NO_PERMISSION: Final = ResponseCode.NO_PERMISSION


# -- the shared cluster ----------------------------------------------------------------------


class Victims:
    """What the module's cluster holds for the attacks to aim at."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.broker = cluster.brokers[0]
        self.ledger_offsets: list[int] = []  # CommitLog offsets of LEDGER's messages


async def _prepare(cluster: LocalCluster, victims: Victims) -> None:
    settings = cluster.client_settings()
    async with Admin(cluster.namesrv_addr, **settings) as admin:
        await admin.update_topic(LEDGER, read_queue_nums=4, write_queue_nums=4)
        await admin.update_sub_group(VICTIMS)
        await admin.create_user(ALICE.access_key, ALICE.secret_key)
        await admin.create_user(BOB.access_key, BOB.secret_key)
        await admin.create_acl(
            f"User:{ALICE.access_key}",
            ["Topic:Alice*", "Group:alice-*", f"Cluster:{CLUSTER_NAME}"],
            ["All"],
        )
    async with Producer("ledger-writers", cluster.namesrv_addr, **settings) as producer:
        for i in range(8):
            result = await producer.send(Message(LEDGER, b"secret-%d" % i))
            assert result.status is SendStatus.SEND_OK
            victims.ledger_offsets.append(decode_offset_msg_id(result.offset_msg_id)[1])
    broker = cluster.brokers[0]
    for queue_id in range(4):
        answer = await ask_super(
            cluster, broker.addr, cw.update_offset_request(READERS, LEDGER, queue_id, 1)
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark


@pytest.fixture(scope="module")
def victims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Victims]:
    # No transaction check while the tests run: it would write the half message again.
    spec = secure_spec(
        tmp_path_factory.mktemp("attacks"),
        tls=True,
        broker_settings={"transaction_timeout": "600000"},
    )
    with running(spec) as cluster:
        v = Victims(cluster)
        asyncio.run(_prepare(cluster, v))
        yield v


@contextlib.asynccontextmanager
async def live_consumer(cluster: LocalCluster, group: str, topic: str) -> Any:
    """A push consumer of the super user's, started and registered with the broker."""
    consumer = PushConsumer(
        group,
        cluster.namesrv_addr,
        consume_from=ConsumeFrom.FIRST_OFFSET,
        rebalance_interval=1.0,
        **cluster.client_settings(),
    )
    consumer.subscribe(topic, "*")

    async def handler(msgs: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.SUCCESS

    consumer.on_message(handler)
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.shutdown()


async def consumer_ids(cluster: LocalCluster, node: Node, group: str) -> list[str]:
    answer = await ask_super(cluster, node.addr, cw.consumer_list_request(group))
    if answer.code != ResponseCode.SUCCESS:
        return []
    return cw.parse_consumer_list(answer)


# -- the nameserver ---------------------------------------------------------------------


def register_request(broker: Node, addr: str, topic: str) -> RemotingCommand:
    """A REGISTER_BROKER as a broker sends it: ``broker``'s name and id, at ``addr``,
    holding ``topic``."""
    body = {
        "topicConfigSerializeWrapper": {
            "topicConfigTable": {
                topic: {
                    "topicName": topic,
                    "readQueueNums": 4,
                    "writeQueueNums": 4,
                    "perm": 6,
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": 0,
                    "order": False,
                }
            },
            "dataVersion": {"counter": 10**6, "timestamp": 1},
        },
        "filterServerList": [],
    }
    return RemotingCommand(
        RequestCode.REGISTER_BROKER,
        {
            "clusterName": CLUSTER_NAME,
            "brokerName": broker.broker_name,
            "brokerAddr": addr,
            "brokerId": str(broker.broker_id),
            "haServerAddr": "6.6.6.6:10912",
            "compressed": "false",
        },
        json.dumps(body).encode(),
    )


def unregister_request(broker: Node) -> RemotingCommand:
    return RemotingCommand(
        RequestCode.UNREGISTER_BROKER,
        {
            "clusterName": CLUSTER_NAME,
            "brokerName": broker.broker_name,
            "brokerAddr": broker.addr,
            "brokerId": str(broker.broker_id),
        },
    )


def impostors(cluster: LocalCluster) -> dict[str, Credentials | None]:
    return {
        "unsigned": None,
        "an unknown user": MALLORY,
        "a normal user": ALICE,
        "a super user who is not the broker": super_credentials(cluster),
    }


async def test_route_hijack_is_refused(victims: Victims) -> None:
    cluster, broker = victims.cluster, victims.broker
    real = {broker.broker_name: {broker.broker_id: broker.addr}}
    assert await route_addrs(cluster, LEDGER) == real
    ns = cluster.nameservers[0].addr
    for who, creds in impostors(cluster).items():
        answer = await ask(cluster, ns, register_request(broker, IMPOSTOR_ADDR, LEDGER), creds)
        assert answer.code == NO_PERMISSION, f"REGISTER_BROKER {who}: {answer.code} {answer.remark}"
        # The impostor's connection is closed by now: the route is still the real one.
        assert await route_addrs(cluster, LEDGER) == real, f"after REGISTER_BROKER {who}"
        answer = await ask(cluster, ns, unregister_request(broker), creds)
        assert answer.code == NO_PERMISSION, (
            f"UNREGISTER_BROKER {who}: {answer.code} {answer.remark}"
        )
        assert await route_addrs(cluster, LEDGER) == real, f"after UNREGISTER_BROKER {who}"
    # Nor a heartbeat-kind registration (no body: it only refreshes what is there).
    beat = register_request(broker, IMPOSTOR_ADDR, LEDGER)
    assert beat.ext is not None
    beat.ext["registerKind"] = "HEARTBEAT"
    beat.body = None
    for who, creds in impostors(cluster).items():
        answer = await ask(cluster, ns, beat, creds)
        assert answer.code == NO_PERMISSION, f"a heartbeat {who}: {answer.code} {answer.remark}"
    assert await route_addrs(cluster, LEDGER) == real
    # A broker of a new name, holding the victims' topic or a new one, needs a super user.
    evil = Node("evil", "broker", cluster.data_dir, broker_name="broker-evil", broker_id=0)
    for who, creds in impostors(cluster).items():
        if creds == super_credentials(cluster):
            continue
        for topic in (LEDGER, "Planted"):
            answer = await ask(cluster, ns, register_request(evil, IMPOSTOR_ADDR, topic), creds)
            assert answer.code == NO_PERMISSION, f"broker-evil {who}: {answer.remark}"
    assert await route_addrs(cluster, LEDGER) == real
    assert await route_addrs(cluster, "Planted") is None


async def test_nameserver_admin_requests_unsigned_are_refused(victims: Victims) -> None:
    cluster, broker = victims.cluster, victims.broker
    ns = cluster.nameservers[0].addr
    delete = RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": LEDGER})
    answer = await ask(cluster, ns, delete, None)
    assert answer.code == NO_PERMISSION, answer.remark
    assert await route_addrs(cluster, LEDGER) == {broker.broker_name: {0: broker.addr}}
    put = RemotingCommand(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": LEDGER, "value": "x:1"},
    )
    answer = await ask(cluster, ns, put, None)
    assert answer.code == NO_PERMISSION, answer.remark
    get = RemotingCommand(
        RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": LEDGER}
    )
    answer = await ask_super(cluster, ns, get)
    assert answer.code == ResponseCode.QUERY_NOT_FOUND, (answer.code, answer.ext)


# -- the broker -------------------------------------------------------------------------------


async def test_broker_attacks_without_credentials_are_refused(victims: Victims) -> None:
    cluster, broker = victims.cluster, victims.broker
    addr = broker.addr
    queues = [MessageQueue(LEDGER, broker.broker_name, q) for q in range(4)]
    # A queue lock held by another client.
    held = await ask_super(cluster, addr, cw.lock_batch_request(READERS, "holder@1", queues))
    assert cw.parse_lock_batch(held) == {(LEDGER, q) for q in range(4)}
    # A half message of another producer's transaction.

    class Undecided:
        def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
            return TransactionState.UNKNOWN

        def check_local_transaction(self, msg: MessageExt) -> TransactionState:
            return TransactionState.UNKNOWN

    async with (
        live_consumer(cluster, VICTIMS, LEDGER),
        TransactionProducer(
            "tx-writers", cluster.namesrv_addr, listener=Undecided(), **cluster.client_settings()
        ) as tx,
    ):
        half = (await tx.send_message_in_transaction(Message(LEDGER, b"half"), None)).send_result

        async def registered() -> bool:
            return bool(await consumer_ids(cluster, broker, VICTIMS))

        await wait_until(registered, "the victims' consumer to register")
        victim_ids = await consumer_ids(cluster, broker, VICTIMS)
        before = await runtime(cluster, broker)
        offsets_before = [
            await committed_offset(cluster, broker, READERS, LEDGER, q) for q in range(4)
        ]
        half_offset = decode_offset_msg_id(half.offset_msg_id)[1]

        def attacks() -> dict[str, RemotingCommand]:
            return {
                "create a topic": aw.update_and_create_topic_request(
                    TopicConfigData("Hijacked", 4, 4)
                ),
                "delete a topic": aw.delete_topic_request(LEDGER),
                "disable a group": aw.update_subscription_group_request(
                    SubscriptionGroupConfig(VICTIMS, consume_enable=False)
                ),
                "reset a group's offsets": aw.reset_offset_by_time_request(READERS, LEDGER, 0),
                "pull as another group": pull_request(
                    group=READERS, topic=LEDGER, queue_id=0, offset=0
                ),
                "commit another group's offset": cw.update_offset_request(
                    READERS, LEDGER, 0, 999999
                ),
                "unregister another client": cw.unregister_request(
                    victim_ids[0], consumer_group=VICTIMS
                ),
                "release another client's locks": cw.unlock_batch_request(
                    READERS, "holder@1", queues
                ),
                "end another producer's transaction": cw.end_transaction_request(
                    "tx-writers",
                    commit_log_offset=half_offset,
                    tran_state_table_offset=half.queue_offset,
                    msg_id=half.msg_id,
                    transaction_id=half.msg_id,
                    commit_or_rollback=cw.TRANSACTION_COMMIT,
                    from_transaction_check=False,
                ),
                "send into the topic": send_request(
                    b"forged", "", group="forgers", topic=LEDGER, queue_id=0, born_timestamp=0
                ),
                "send into the topic in a topics batch": topics_batch_request(
                    [(LEDGER, 0, batch_entry(b"forged", b""))], group="forgers", born_timestamp=0
                ),
                "join the victims' group": heartbeat_request(
                    "forger@1",
                    [],
                    [ConsumerData(VICTIMS, subscriptions=(SubscriptionData(LEDGER),))],
                ),
                "transfer leadership": aw.transfer_leader_request("n1"),
                "resend a stored message": aw.resend_message_request(
                    READERS, victims.ledger_offsets[0]
                ),
            }

        for what, cmd in attacks().items():
            answer = await ask(cluster, addr, cmd, None)
            assert answer.code == NO_PERMISSION, f"{what}: {answer.code} {answer.remark}"
            assert not answer.body, f"{what}: the refusal carries a body"
        # Oneway, as clients send some of them (END_TRANSACTION, offset commits, unlocks):
        # refused without an answer. A request after them on the same connection is
        # answered once they were handled.
        conn = await connect(addr, {}, timeout=TIMEOUT, security=as_sender(cluster, None))
        try:
            for cmd in attacks().values():
                conn.invoke_oneway(cmd)
            last = await conn.invoke(aw.broker_runtime_info_request(), TIMEOUT)
            assert last.code == NO_PERMISSION
        finally:
            conn.close()
        # Nothing changed.
        topics = await broker_topics(cluster, broker)
        assert b'"Hijacked"' not in topics
        assert f'"{LEDGER}"'.encode() in topics
        assert await route_addrs(cluster, LEDGER) == {broker.broker_name: {0: addr}}
        async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
            assert all(c.consume_enable for c in (await admin.group_config(VICTIMS)).values())
        assert [
            await committed_offset(cluster, broker, READERS, LEDGER, q) for q in range(4)
        ] == offsets_before
        assert await consumer_ids(cluster, broker, VICTIMS) == victim_ids
        thief = await ask_super(cluster, addr, cw.lock_batch_request(READERS, "thief@1", queues))
        assert cw.parse_lock_batch(thief) == set(), "the holder's locks were released"
        after = await runtime(cluster, broker)
        # No transaction committed, no message resent: the CommitLog did not grow.
        assert after["commitLogMaxOffset"] == before["commitLogMaxOffset"]
        # A user without an ACL gets no further than nobody.
        for what in ("delete a topic", "commit another group's offset", "pull as another group"):
            answer = await ask(cluster, addr, attacks()[what], BOB)
            assert answer.code == NO_PERMISSION, f"{what} as bob: {answer.code} {answer.remark}"
        assert f'"{LEDGER}"'.encode() in await broker_topics(cluster, broker)


async def test_a_user_with_the_acl_may_do_them(victims: Victims) -> None:
    cluster, broker = victims.cluster, victims.broker
    addr = broker.addr
    topic, group = "AliceOrders", "alice-readers"

    async def as_alice(what: str, cmd: RemotingCommand, *ok: int) -> RemotingCommand:
        answer = await ask(cluster, addr, cmd, ALICE)
        assert answer.code in (ok or (ResponseCode.SUCCESS,)), (
            f"{what}: {answer.code} {answer.remark}"
        )
        return answer

    await as_alice(
        "create a topic", aw.update_and_create_topic_request(TopicConfigData(topic, 4, 4))
    )
    assert f'"{topic}"'.encode() in await broker_topics(cluster, broker)

    async def routed() -> bool:
        return await route_addrs(cluster, topic) is not None

    await wait_until(routed, "alice's topic to be routed")
    async with Producer("alice-writers", cluster.namesrv_addr, **settings_for(cluster, ALICE)) as p:
        sent = await p.send(
            Message(topic, b"alice's own"), queue=MessageQueue(topic, broker.broker_name, 0)
        )
        assert sent.status is SendStatus.SEND_OK
    pulled = await as_alice("pull", pull_request(group=group, topic=topic, queue_id=0, offset=0))
    assert b"alice's own" in bytes(pulled.body or b"")
    await as_alice("commit an offset", cw.update_offset_request(group, topic, 0, 1))
    assert await committed_offset(cluster, broker, group, topic, 0) == 1
    await as_alice("reset offsets", aw.reset_offset_by_time_request(group, topic, 0))
    await wait_until(
        lambda: _offset_is(cluster, broker, group, topic, 0), "the reset offset to be stored"
    )
    await as_alice(
        "disable a group",
        aw.update_subscription_group_request(SubscriptionGroupConfig(group, consume_enable=False)),
    )
    async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
        assert not any(c.consume_enable for c in (await admin.group_config(group)).values())
    queues = [MessageQueue(topic, broker.broker_name, 0)]
    locked = await as_alice("lock", cw.lock_batch_request(group, "alice@1", queues))
    assert cw.parse_lock_batch(locked) == {(topic, 0)}
    await as_alice("unlock", cw.unlock_batch_request(group, "alice@1", queues))
    thief = await ask_super(cluster, addr, cw.lock_batch_request(group, "other@1", queues))
    assert cw.parse_lock_batch(thief) == {(topic, 0)}, "alice's unlock released nothing"
    await as_alice("unregister a client", cw.unregister_request("alice@1", consumer_group=group))
    resent = await as_alice(
        "resend", aw.resend_message_request(group, decode_offset_msg_id(sent.offset_msg_id)[1])
    )
    assert aw.parse_resend_message(resent)
    # Not a Raft broker: refused for that, not for who asks.
    answer = await ask(cluster, addr, aw.transfer_leader_request("n1"), ALICE)
    assert answer.code != NO_PERMISSION, answer.remark
    # Alice's policies do not reach the victims' topic.
    answer = await ask(cluster, addr, aw.delete_topic_request(LEDGER), ALICE)
    assert answer.code == NO_PERMISSION, answer.remark
    await as_alice("delete a topic", aw.delete_topic_request(topic))
    assert f'"{topic}"'.encode() not in await broker_topics(cluster, broker)


async def test_a_topics_batch_reaches_only_the_topics_its_sender_may_publish_to(
    victims: Victims,
) -> None:
    """Alice may publish to her topics only: a topics batch naming the victims' topic
    beside hers is refused whole (nothing stored), one of hers alone is stored, and her
    producer's concurrent sends to both get their own answers (hers stored, the others
    refused one by one)."""
    cluster, broker = victims.cluster, victims.broker
    addr = broker.addr
    topic = "AliceMixed"
    async with Admin(cluster.namesrv_addr, **settings_for(cluster, ALICE)) as admin:
        await admin.update_topic(topic, read_queue_nums=4, write_queue_nums=4)

    async def routed() -> bool:
        return await route_addrs(cluster, topic) is not None

    await wait_until(routed, "alice's topic to be routed")
    before = await runtime(cluster, broker)
    mixed = topics_batch_request(
        [(topic, 0, batch_entry(b"mine", b"")), (LEDGER, 0, batch_entry(b"forged", b""))],
        group="alice-writers",
        born_timestamp=0,
    )
    answer = await ask(cluster, addr, mixed, ALICE)
    assert answer.code == NO_PERMISSION, answer.remark
    assert (await runtime(cluster, broker))["commitLogMaxOffset"] == before["commitLogMaxOffset"]
    own = topics_batch_request(
        [(topic, 0, batch_entry(b"mine", b"")), (topic, 1, batch_entry(b"mine too", b""))],
        group="alice-writers",
        born_timestamp=0,
    )
    answer = await ask(cluster, addr, own, ALICE)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert [r.code for r in parse_topics_batch(answer, 2)] == [ResponseCode.SUCCESS] * 2
    async with Producer("alice-writers", cluster.namesrv_addr, **settings_for(cluster, ALICE)) as p:
        await p.send(Message(topic, b"first"))
        with pytest.raises(NoPermissionError):  # and both routes are known from now on
            await p.send(Message(LEDGER, b"refused"))

        async def announced() -> bool:
            return bool(p.client.topics_batch)

        await wait_until(announced, "the broker to announce topics batches")
        outcomes = await asyncio.gather(
            *(p.send(Message(topic if i % 2 else LEDGER, b"m-%d" % i)) for i in range(64)),
            return_exceptions=True,
        )
        assert p.batcher is not None and p.batcher.topics_batches_sent > 0
    for i, outcome in enumerate(outcomes):
        if i % 2:
            assert not isinstance(outcome, BaseException), outcome
            assert outcome.status is SendStatus.SEND_OK and outcome.queue.topic == topic
        else:
            assert isinstance(outcome, NoPermissionError), outcome
    for queue_id in range(4):
        pulled = await ask_super(
            cluster, addr, pull_request(group="g", topic=LEDGER, queue_id=queue_id, offset=0)
        )
        body = bytes(pulled.body or b"")
        assert not any(part in body for part in (b"forged", b"refused", b"m-0")), queue_id


async def _offset_is(
    cluster: LocalCluster, broker: Node, group: str, topic: str, want: int
) -> bool:
    return await committed_offset(cluster, broker, group, topic, 0) == want


# -- the HA port ------------------------------------------------------------------------------

SYNC_MASTER: Final = {
    "broker_role": "SYNC_MASTER",
    "flush_disk_type": "SYNC_FLUSH",
    "sync_flush_timeout": "1500",
}


def ha_port(node: Node) -> int:
    """The master's HA port: the one it listens on besides remoting (no metrics here)."""
    ports = listening_ports(node.pid) - {node.port, node.metrics_port}
    assert len(ports) == 1, f"{node.name} listens on {sorted(ports)} besides {node.port}"
    return ports.pop()


async def _ha_hello(port: int, hello: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(hello)
    await writer.drain()
    return reader, writer


async def test_ha_port_refuses_forged_hellos_and_acknowledgements(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    spec = secure_spec(tmp_path_factory.mktemp("ha"), replication="ha", broker_settings=SYNC_MASTER)
    with running(spec) as cluster:
        master, slave = cluster.brokers
        settings = cluster.client_settings()
        async with Admin(cluster.namesrv_addr, **settings) as admin:
            await admin.update_topic("Replicated", read_queue_nums=2, write_queue_nums=2)

        async def slave_connected() -> bool:
            return (await runtime(cluster, master)).get("haSlaves") == "1"

        await wait_until(slave_connected, "the slave to connect to its master")
        port = ha_port(master)
        forged = ha_wire.Hello(broker_id=1, max_offset=0, broker_addr=IMPOSTOR_ADDR)
        stranger = ha_wire.sign_hello(forged, Credentials("rocketq-inner", "not-the-secret"))
        for what, hello in {
            "a hello without a signature": ha_wire.encode_hello(forged),
            "a hello signed with another secret": ha_wire.encode_hello(stranger),
        }.items():
            reader, writer = await _ha_hello(port, hello)
            try:
                data, closed = await read_until_closed(reader, 5)  # refused at once
            finally:
                writer.close()
            assert closed, f"{what}: the connection stays open"
            assert data == b"", f"{what}: the master sent {len(data)} bytes"

        async with Producer(
            "ha-writers", cluster.namesrv_addr, retry_times_when_send_failed=0, **settings
        ) as producer:
            assert (
                await producer.send(Message("Replicated", b"before"))
            ).status is SendStatus.SEND_OK
            cluster.pause(slave.name)  # only a forged acknowledgement could complete a send now
            writers = []
            try:
                # Unsigned hello, then an acknowledgement of everything there will ever be.
                reader, writer = await _ha_hello(port, ha_wire.encode_hello(forged))
                writers.append(writer)
                with contextlib.suppress(ConnectionError, OSError):
                    writer.write(ha_wire.REPORT.pack(2**60))
                    await writer.drain()
                # A node's own credentials (an insider), acknowledging past what was sent:
                # the master closes that link.
                signed = ha_wire.sign_hello(forged, inner_credentials(cluster))
                reader2, writer2 = await _ha_hello(port, ha_wire.encode_hello(signed))
                writers.append(writer2)
                writer2.write(ha_wire.REPORT.pack(2**60))
                await writer2.drain()
                _, closed = await read_until_closed(reader2, 10)
                assert closed, "an acknowledgement past what the master sent keeps its link"
                # The same signed hello again (sniffed off the wire): a replay.
                reader3, writer3 = await _ha_hello(port, ha_wire.encode_hello(signed))
                writers.append(writer3)
                data, closed = await read_until_closed(reader3, 5)
                assert closed and data == b"", f"a replayed hello got {len(data)} bytes"
                result = await producer.send(Message("Replicated", b"unreplicated"), timeout=10)
                assert result.status in (
                    SendStatus.FLUSH_SLAVE_TIMEOUT,
                    SendStatus.SLAVE_NOT_AVAILABLE,
                ), result.status
                info = await runtime(cluster, master)
                assert int(info["haSlaveAckOffset"]) <= int(info["commitLogMaxOffset"]), info
            finally:
                for w in writers:
                    w.close()
                cluster.resume(slave.name)
            await wait_until(slave_connected, "the slave to be connected again")
            result = await producer.send(Message("Replicated", b"after"), timeout=10)
            assert result.status is SendStatus.SEND_OK

        async def slave_has_it() -> bool:
            mine, theirs = await runtime(cluster, master), await runtime(cluster, slave)
            return theirs["commitLogMaxOffset"] == mine["commitLogMaxOffset"]

        await wait_until(slave_has_it, "the slave's CommitLog to reach the master's end")


# -- the Raft port ----------------------------------------------------------------------------


async def _raft_terms(cluster: LocalCluster) -> dict[str, int]:
    return {n.name: int((await runtime(cluster, n))["raftTerm"]) for n in cluster.brokers}


async def test_raft_port_refuses_frames_naming_another_member(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    spec = secure_spec(
        tmp_path_factory.mktemp("raft"), replication="raft", broker_settings=FAST_RAFT
    )
    with running(spec) as cluster:
        settings = cluster.client_settings()
        async with Admin(cluster.namesrv_addr, **settings) as admin:
            await admin.update_topic("Voted", read_queue_nums=2, write_queue_nums=2)

        async def leader() -> Node | None:
            for n in cluster.brokers:
                info = await runtime(cluster, n)
                if info.get("raftServing") == "true":
                    return n
            return None

        async def has_leader() -> bool:
            return await leader() is not None

        await wait_until(has_leader, "a serving leader")
        serving = await leader()
        target = next(n for n in cluster.brokers if n is not serving)
        others = [raft_member_id(n) for n in cluster.brokers if n is not target]
        terms = await _raft_terms(cluster)
        forged_term = max(terms.values()) + 1000
        vote = raft_wire.encode(
            others[0], VoteRequest(forged_term, others[0], last_index=10**9, last_term=forged_term)
        )
        me = raft_member_id(target)
        inner = inner_credentials(cluster)

        def handshake(member: str, creds: Credentials = inner) -> bytes:
            return raft_wire.encode_handshake(raft_wire.sign_handshake(member, me, creds))

        stranger = Credentials(inner.access_key, "not-the-secret")
        replayed = handshake(others[1])
        as_others1 = raft_wire.encode(
            others[1], VoteRequest(forged_term, others[1], last_index=10**9, last_term=forged_term)
        )
        stale = raft_wire.encode(others[1], VoteRequest(0, others[1], 0, 0, pre=True))

        async def link(frames: bytes, wait: float) -> tuple[bytes, bool]:
            reader, writer = await asyncio.open_connection("127.0.0.1", target.raft_port)
            try:
                writer.write(frames)
                await writer.drain()
                return await read_until_closed(reader, wait)
            finally:
                writer.close()

        # The control: a link that proved it is a member, speaking as that member, is kept.
        _, closed = await link(replayed + stale, 3)
        assert not closed, "a signed handshake and a frame of its own member were refused"
        for what, frames in {
            "a vote naming another member, without a handshake": vote,
            "a handshake signed with another secret": handshake(others[0], stranger) + vote,
            # Proved to be one member, then speaking as another.
            f"a vote naming {others[0]} on {others[1]}'s link": handshake(others[1]) + vote,
            "a replayed handshake": replayed + as_others1,
        }.items():
            data, closed = await link(frames, 5)  # refused at once, not timed out
            assert closed, f"{what}: the connection stays open"
            assert data == b"", f"{what}: answered with {len(data)} bytes"
        after = await _raft_terms(cluster)
        assert all(t < forged_term for t in after.values()), after
        async with Producer("raft-writers", cluster.namesrv_addr, **settings) as producer:
            result = await producer.send(Message("Voted", b"still serving"), timeout=10)
            assert result.status is SendStatus.SEND_OK


async def test_a_user_who_manages_the_cluster_cannot_make_itself_super(victims: Victims) -> None:
    """Alice's policies allow everything on the cluster (so she may manage users and
    ACLs), yet only a super user may create, change or delete a super user, and nobody
    but a super user reads the users' secrets a replica copies."""
    cluster = victims.cluster
    sup = super_credentials(cluster)
    async with Admin(cluster.namesrv_addr, **settings_for(cluster, ALICE)) as alice:
        with pytest.raises(NoPermissionError):
            await alice.create_user("eve", "eve-secret-1", "Super")
        with pytest.raises(NoPermissionError):
            await alice.update_user(ALICE.access_key, user_type="Super")
        with pytest.raises(NoPermissionError):
            await alice.update_user(sup.access_key, password="taken-over")
        with pytest.raises(NoPermissionError):
            await alice.delete_user(sup.access_key)
    for who in (None, ALICE, BOB, MALLORY):
        answer = await ask(
            cluster, victims.broker.addr, RemotingCommand(RocketqRequestCode.GET_AUTH_METADATA), who
        )
        assert answer.code == NO_PERMISSION, (who, answer.code, answer.remark)
        assert not answer.body
    async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
        users = {u.username: u for u in await admin.list_users()}
    assert "eve" not in users
    assert users[ALICE.access_key].user_type == "Normal"
    assert users[sup.access_key].user_type == "Super"
