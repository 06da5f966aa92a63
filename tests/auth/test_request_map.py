"""The request map: every code a real broker and nameserver answer has its requirement, each
requirement is the one the table promises for requests as the SDK writes them, the names
checked are the names the handlers act on (a heartbeat sent to a real broker registers
exactly the groups its requirement names), and no header or body makes the map raise or
hand out a requirement that names nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.auth import request_map
from rocketq.auth.model import Action, Gate, Requirement, Resource, ResourceType
from rocketq.auth.request_map import (
    AUTH_CODES,
    BROKER_CODES,
    CLIENT_INNER_PRODUCER,
    GET_AUTH_METADATA,
    NAMESERVER_CODES,
    broker_requirement,
    nameserver_requirement,
)
from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig
from rocketq.common.config import StoreConfig
from rocketq.common.message import MessageQueue
from rocketq.common.pop_body import BatchAck, encode_batch_acks
from rocketq.common.record import encode_batch_entry as batch_entry
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting import fastjson
from rocketq.remoting.broker_tables import (
    SubscriptionGroupConfig,
    TopicConfigData,
    all_consumer_offset_request,
    all_delay_offset_request,
    all_subscription_group_config_request,
    all_topic_config_request,
)
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import connect
from rocketq.sdk import admin_wire as aw
from rocketq.sdk import client_wire as cw
from rocketq.sdk.wire import (
    ConsumerData,
    SubscriptionData,
    batch_body,
    heartbeat_request,
    pull_request,
    send_request,
    topics_batch_request,
)
from tests.integration.waiting import wait_until

TOPIC: Final = "Orders"
GROUP: Final = "order-readers"
PRODUCER: Final = "order-writers"
CLUSTER: Final = "DefaultCluster"
TIMEOUT: Final = 5.0

PUB, SUB, GET = Action.PUB, Action.SUB, Action.GET
CREATE, UPDATE, DELETE = Action.CREATE, Action.UPDATE, Action.DELETE
SUPER: Final = Requirement(Gate.SUPER)
USER: Final = Requirement(Gate.USER)
OPEN: Final = Requirement(Gate.OPEN)


def topic(name: str = TOPIC) -> Resource:
    return Resource.topic(name)


def group(name: str = GROUP) -> Resource:
    return Resource.group(name)


def cluster() -> Resource:
    return Resource.cluster(CLUSTER)


def policy(*needs: tuple[Resource, Action]) -> Requirement:
    return Requirement(Gate.POLICY, needs)


def required(cmd: RemotingCommand) -> Requirement:
    return broker_requirement(cmd, cluster=CLUSTER)


def name_of(code: int) -> str:
    return (
        RequestCode.NAMES.get(code)
        or RocketqRequestCode.NAMES.get(code)
        or ("GET_AUTH_METADATA" if code == GET_AUTH_METADATA else str(code))
    )


def names(codes: set[int] | frozenset[int]) -> list[str]:
    return sorted(name_of(c) for c in codes)


# -- the codes the servers answer ----------------------------------------------------------


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[Broker, NameServer]]:
    """A nameserver and a broker registered with it, in this process on free ports."""
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    b = Broker(
        BrokerConfig(
            listen_port=0, ha_listen_port=0, metrics_port=0, namesrv_addr=f"127.0.0.1:{ns.port}"
        ),
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
        ),
    )
    try:
        await b.start()
        await wait_until(lambda: all(b.registration.registered.values()), "registration")
        yield b, ns
    finally:
        await b.stop()
        await ns.stop()


async def test_broker_codes_are_every_code_a_broker_answers(
    servers: tuple[Broker, NameServer],
) -> None:
    broker, _ = servers
    answered = set(broker.remoting.handlers)
    assert names(answered - BROKER_CODES) == [], "codes the broker answers with no requirement"
    # The user and ACL requests (and the replicas' copy of them) come with the auth work
    # on the broker: mapped here before the broker answers them.
    assert names(BROKER_CODES - answered - AUTH_CODES - {GET_AUTH_METADATA}) == []


async def test_nameserver_codes_are_every_code_a_nameserver_answers(
    servers: tuple[Broker, NameServer],
) -> None:
    _, ns = servers
    assert ns.server is not None
    answered = set(ns.server.handlers)
    assert names(answered - AUTH_CODES) == names(NAMESERVER_CODES)


def test_auth_codes_are_rocketmqs() -> None:
    assert sorted(AUTH_CODES) == list(range(3001, 3011))
    assert AUTH_CODES <= BROKER_CODES
    assert not AUTH_CODES & NAMESERVER_CODES
    # rocketq's own code, defined here until the codes module has it.
    assert getattr(RocketqRequestCode, "GET_AUTH_METADATA", GET_AUTH_METADATA) == 30002


def test_the_docstring_names_every_code() -> None:
    doc = request_map.__doc__ or ""
    missing = [n for n in names(BROKER_CODES | NAMESERVER_CODES) if n not in doc]
    assert missing == []


# -- the broker's table, for requests as the SDK writes them ---------------------------------


def _v1_send(topic_name: str, producer: str = PRODUCER) -> RemotingCommand:
    """SEND_MESSAGE as a RocketMQ 4.x client writes it (full field names)."""
    return RemotingCommand(
        RequestCode.SEND_MESSAGE,
        {"producerGroup": producer, "topic": topic_name, "queueId": "0", "sysFlag": "0"},
        b"hello",
    )


def _v2_send(topic_name: str, producer: str = PRODUCER, *, batch: bool = False) -> RemotingCommand:
    body = batch_body([(b"one", b"", 0), (b"two", b"", 0)]) if batch else b"hello"
    return send_request(
        body, "", group=producer, topic=topic_name, queue_id=0, born_timestamp=0, batch=batch
    )


QUEUES: Final = [MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)]

# code -> a request as rocketq's SDK (or a 4.x client) writes it, and what it requires.
BROKER_TABLE: Final[dict[int, tuple[RemotingCommand, Requirement]]] = {
    RequestCode.SEND_MESSAGE: (_v1_send(TOPIC), policy((topic(), PUB))),
    RequestCode.SEND_MESSAGE_V2: (_v2_send(TOPIC), policy((topic(), PUB))),
    RequestCode.SEND_BATCH_MESSAGE: (_v2_send(TOPIC, batch=True), policy((topic(), PUB))),
    RocketqRequestCode.SEND_TOPICS_BATCH: (
        topics_batch_request(
            [(TOPIC, 0, batch_entry(b"a", b"")), (f"%RETRY%{GROUP}", 0, batch_entry(b"b", b""))],
            group=PRODUCER,
            born_timestamp=0,
        ),
        policy((topic(), PUB), (group(), SUB)),
    ),
    RequestCode.PULL_MESSAGE: (
        pull_request(group=GROUP, topic=TOPIC, queue_id=0, offset=0),
        policy((topic(), SUB), (group(), SUB)),
    ),
    RequestCode.POP_MESSAGE: (
        RemotingCommand(
            RequestCode.POP_MESSAGE,
            {
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": "-1",
                "maxMsgNums": "1",
                "invisibleTime": "60000",
                "pollTime": "0",
                "bornTime": "0",
                "initMode": "0",
            },
        ),
        policy((topic(), SUB), (group(), SUB)),
    ),
    RequestCode.ACK_MESSAGE: (
        RemotingCommand(
            RequestCode.ACK_MESSAGE,
            {
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": "0",
                "extraInfo": "0 1700000000000 60000 0 0 broker-a 0 0",
                "offset": "0",
            },
        ),
        policy((topic(), SUB), (group(), SUB)),
    ),
    RequestCode.BATCH_ACK_MESSAGE: (
        RemotingCommand(
            RequestCode.BATCH_ACK_MESSAGE,
            {},
            encode_batch_acks(
                "broker-a", [BatchAck(GROUP, TOPIC, False, 0, 0, 0, 1700000000000, 60000, (0,))]
            ),
        ),
        policy((topic(), SUB), (group(), SUB)),
    ),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: (
        RemotingCommand(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            {
                "consumerGroup": GROUP,
                "topic": TOPIC,
                "queueId": "0",
                "extraInfo": "0 1700000000000 60000 0 0 broker-a 0 0",
                "offset": "0",
                "invisibleTime": "1000",
            },
        ),
        policy((topic(), SUB), (group(), SUB)),
    ),
    RequestCode.QUERY_CONSUMER_OFFSET: (
        cw.query_offset_request(GROUP, TOPIC, 0),
        policy((topic(), SUB), (group(), SUB)),
    ),
    RequestCode.UPDATE_CONSUMER_OFFSET: (
        cw.update_offset_request(GROUP, TOPIC, 0, 7),
        policy((topic(), SUB), (group(), SUB)),
    ),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: (
        cw.consumer_list_request(GROUP),
        policy((group(), SUB)),
    ),
    RequestCode.HEART_BEAT: (
        heartbeat_request(
            "10.0.0.1@1",
            [PRODUCER, CLIENT_INNER_PRODUCER],
            [
                ConsumerData(
                    GROUP,
                    subscriptions=(SubscriptionData(TOPIC), SubscriptionData("%RETRY%" + GROUP)),
                )
            ],
        ),
        policy((group(PRODUCER), PUB), (group(), SUB), (topic(), SUB)),
    ),
    RequestCode.LOCK_BATCH_MQ: (
        cw.lock_batch_request(GROUP, "10.0.0.1@1", QUEUES),
        policy((group(), SUB), (topic(), SUB)),
    ),
    RequestCode.UNLOCK_BATCH_MQ: (
        cw.unlock_batch_request(GROUP, "10.0.0.1@1", QUEUES),
        policy((group(), SUB), (topic(), SUB)),
    ),
    RequestCode.CONSUMER_SEND_MSG_BACK: (
        cw.send_back_request(
            GROUP,
            1234,
            delay_level=0,
            origin_msg_id="0A00000100002A9F0000000000000000",
            origin_topic=TOPIC,
            max_reconsume_times=16,
        ),
        policy((group(), SUB), (topic(), SUB)),
    ),
    RequestCode.END_TRANSACTION: (
        cw.end_transaction_request(
            PRODUCER,
            commit_log_offset=1234,
            tran_state_table_offset=0,
            msg_id="0A00000100002A9F0000000000000000",
            transaction_id="tx-1",
            commit_or_rollback=8,
            from_transaction_check=False,
        ),
        policy((group(PRODUCER), PUB)),
    ),
    RequestCode.GET_MAX_OFFSET: (cw.max_offset_request(TOPIC, 0), policy((topic(), GET))),
    RequestCode.GET_MIN_OFFSET: (cw.min_offset_request(TOPIC, 0), policy((topic(), GET))),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: (
        cw.search_offset_request(TOPIC, 0, 1_700_000_000_000),
        policy((topic(), GET)),
    ),
    RequestCode.GET_EARLIEST_MSG_STORETIME: (
        RemotingCommand(RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": TOPIC, "queueId": "0"}),
        policy((topic(), GET)),
    ),
    RequestCode.UPDATE_AND_CREATE_TOPIC: (
        aw.update_and_create_topic_request(TopicConfigData(TOPIC, 4, 4)),
        policy((topic(), CREATE)),
    ),
    RequestCode.DELETE_TOPIC_IN_BROKER: (aw.delete_topic_request(TOPIC), policy((topic(), DELETE))),
    RequestCode.GET_TOPIC_STATS_INFO: (aw.topic_stats_request(TOPIC), policy((topic(), GET))),
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: (
        aw.query_topic_consume_by_who_request(TOPIC),
        policy((topic(), GET)),
    ),
    RequestCode.QUERY_MESSAGE: (aw.query_message_request(TOPIC, "k1"), policy((topic(), GET))),
    RequestCode.GET_CONSUME_STATS: (
        aw.consume_stats_request(GROUP, TOPIC),
        policy((group(), GET), (topic(), GET)),
    ),
    RequestCode.GET_CONSUMER_CONNECTION_LIST: (
        aw.consumer_connection_list_request(GROUP),
        policy((group(), GET)),
    ),
    RequestCode.GET_CONSUMER_RUNNING_INFO: (
        aw.consumer_running_info_request(GROUP, "10.0.0.1@1"),
        policy((group(), GET)),
    ),
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: (
        aw.reset_offset_by_time_request(GROUP, TOPIC, -1),
        policy((topic(), UPDATE), (group(), UPDATE)),
    ),
    RequestCode.VIEW_MESSAGE_BY_ID: (aw.view_message_request(1234), policy((cluster(), GET))),
    RequestCode.GET_ALL_TOPIC_CONFIG: (all_topic_config_request(), policy((cluster(), GET))),
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (
        all_subscription_group_config_request(),
        policy((cluster(), GET)),
    ),
    RequestCode.GET_ALL_CONSUMER_OFFSET: (all_consumer_offset_request(), policy((cluster(), GET))),
    RequestCode.GET_ALL_DELAY_OFFSET: (all_delay_offset_request(), policy((cluster(), GET))),
    RequestCode.GET_BROKER_RUNTIME_INFO: (
        aw.broker_runtime_info_request(),
        policy((cluster(), GET)),
    ),
    RequestCode.GET_BROKER_CONFIG: (aw.broker_config_request(), policy((cluster(), GET))),
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: (
        aw.update_subscription_group_request(SubscriptionGroupConfig(GROUP)),
        policy((cluster(), UPDATE)),
    ),
    RequestCode.UNREGISTER_CLIENT: (
        cw.unregister_request("10.0.0.1@1", consumer_group=GROUP),
        USER,
    ),
    RequestCode.CONSUME_MESSAGE_DIRECTLY: (
        aw.consume_message_directly_request(
            GROUP, "10.0.0.1@1", "0A00000100002A9F00000000000004D2"
        ),
        policy((cluster(), UPDATE)),
    ),
    RocketqRequestCode.TRANSFER_LEADER: (
        aw.transfer_leader_request("n1"),
        policy((cluster(), UPDATE)),
    ),
    RocketqRequestCode.RESEND_MESSAGE: (
        aw.resend_message_request(GROUP, 1234),
        policy((cluster(), UPDATE)),
    ),
    RocketqRequestCode.RAFT_ADD_MEMBER: (
        RemotingCommand(
            RocketqRequestCode.RAFT_ADD_MEMBER, {"member": "n3", "address": "10.0.0.4:40911"}
        ),
        policy((cluster(), UPDATE)),
    ),
    RocketqRequestCode.RAFT_REMOVE_MEMBER: (
        RemotingCommand(RocketqRequestCode.RAFT_REMOVE_MEMBER, {"member": "n0"}),
        policy((cluster(), UPDATE)),
    ),
    RocketqRequestCode.RAFT_MEMBERS: (
        RemotingCommand(RocketqRequestCode.RAFT_MEMBERS, {}),
        policy((cluster(), GET)),
    ),
    GET_AUTH_METADATA: (RemotingCommand(GET_AUTH_METADATA), SUPER),
    RocketqRequestCode.AUTH_SESSION: (RemotingCommand(RocketqRequestCode.AUTH_SESSION), OPEN),
    **{
        code: (RemotingCommand(code, {"username": "alice"}), policy((cluster(), action)))
        for code, action in [
            (RequestCode.AUTH_CREATE_USER, UPDATE),
            (RequestCode.AUTH_UPDATE_USER, UPDATE),
            (RequestCode.AUTH_DELETE_USER, UPDATE),
            (RequestCode.AUTH_GET_USER, GET),
            (RequestCode.AUTH_LIST_USER, GET),
            (RequestCode.AUTH_CREATE_ACL, UPDATE),
            (RequestCode.AUTH_UPDATE_ACL, UPDATE),
            (RequestCode.AUTH_DELETE_ACL, UPDATE),
            (RequestCode.AUTH_GET_ACL, GET),
            (RequestCode.AUTH_LIST_ACL, GET),
        ]
    },
}


def test_the_table_covers_every_broker_code() -> None:
    assert names(set(BROKER_TABLE)) == names(BROKER_CODES)


@pytest.mark.parametrize("code", sorted(BROKER_TABLE), ids=name_of)
def test_broker_requirement(code: int) -> None:
    cmd, expected = BROKER_TABLE[code]
    assert cmd.code == code
    assert required(cmd) == expected


@pytest.mark.parametrize(
    "code",
    sorted(
        c
        for c, (_, r) in BROKER_TABLE.items()
        if any(res.type is not ResourceType.CLUSTER for res, _ in r.needs)
    ),
    ids=name_of,
)
def test_a_request_that_names_no_resource_needs_a_super_user(code: int) -> None:
    """Without the header fields (and body) naming its topic or group, a request that acts
    on one can only be a super user's: its handler refuses it anyway."""
    assert required(RemotingCommand(code)) == SUPER
    assert required(RemotingCommand(code, {"topic": "", "consumerGroup": " ", "b": ""})) == SUPER


def test_the_cluster_resource_is_the_brokers_cluster() -> None:
    cmd = aw.broker_config_request()
    assert broker_requirement(cmd, cluster="east") == policy((Resource.cluster("east"), GET))
    assert broker_requirement(cmd) == policy((Resource.cluster(""), GET))


@pytest.mark.parametrize(
    "code", [RequestCode.CHECK_TRANSACTION_STATE, RequestCode.UPDATE_NAMESRV_CONFIG, 0, -1, 29999]
)
def test_an_unknown_code_needs_a_super_user(code: int) -> None:
    cmd = RemotingCommand(code, {"topic": TOPIC, "consumerGroup": GROUP})
    assert required(cmd) == SUPER
    assert nameserver_requirement(cmd) == SUPER


# -- retry topics, the field names of each header ---------------------------------------------


def test_a_send_to_a_retry_topic_needs_sub_on_its_group_whatever_the_producer_group() -> None:
    for cmd in (
        _v1_send("%RETRY%victims", producer=GROUP),
        _v2_send("%RETRY%victims", producer=GROUP),
        _v2_send("%RETRY%victims", producer="", batch=True),
    ):
        assert required(cmd) == policy((group("victims"), SUB))


def test_a_pull_of_a_retry_topic_needs_sub_on_that_topics_group_too() -> None:
    own = pull_request(group=GROUP, topic="%RETRY%" + GROUP, queue_id=0, offset=0)
    assert required(own) == policy((group(), SUB))
    other = pull_request(group=GROUP, topic="%RETRY%victims", queue_id=0, offset=0)
    assert required(other) == policy((group("victims"), SUB), (group(), SUB))


def test_an_admin_action_on_a_retry_topic_is_that_action_on_its_group() -> None:
    cmd = aw.update_and_create_topic_request(TopicConfigData("%RETRY%" + GROUP, 1, 1))
    assert required(cmd) == policy((group(), CREATE))
    assert required(aw.delete_topic_request("%RETRY%" + GROUP)) == policy((group(), DELETE))


def test_a_retry_topic_without_a_group_needs_a_super_user() -> None:
    assert required(_v2_send("%RETRY%")) == SUPER
    assert required(_v2_send("%RETRY%  ")) == SUPER


def test_a_dead_letter_topic_is_a_topic() -> None:
    assert required(_v2_send("%DLQ%" + GROUP)) == policy((topic("%DLQ%" + GROUP), PUB))


def test_each_send_header_is_read_by_its_own_field_names() -> None:
    """SEND_MESSAGE names its topic ``topic``; V2 and batch ``b``: the other name is not
    read, as the broker does not read it."""
    v1 = RemotingCommand(RequestCode.SEND_MESSAGE, {"topic": TOPIC, "b": "Other"})
    assert required(v1) == policy((topic(), PUB))
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        v2 = RemotingCommand(code, {"topic": "Other", "b": TOPIC})
        assert required(v2) == policy((topic(), PUB))


def test_end_transaction_with_a_topic_needs_pub_on_it_and_on_the_producer_group() -> None:
    cmd = RemotingCommand(RequestCode.END_TRANSACTION, {"producerGroup": PRODUCER, "topic": TOPIC})
    assert required(cmd) == policy((topic(), PUB), (group(PRODUCER), PUB))
    no_group = RemotingCommand(RequestCode.END_TRANSACTION, {"topic": TOPIC})
    assert required(no_group) == SUPER


def test_consume_stats_without_a_topic_needs_get_on_the_group() -> None:
    assert required(aw.consume_stats_request(GROUP)) == policy((group(), GET))


def test_send_back_without_an_origin_topic_needs_sub_on_the_group() -> None:
    cmd = RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": GROUP, "offset": "5"})
    assert required(cmd) == policy((group(), SUB))


# -- bodies: heartbeats and queue locks ---------------------------------------------------------


def _heartbeat(doc: Any) -> RemotingCommand:
    return RemotingCommand(RequestCode.HEART_BEAT, None, fastjson.dumps(doc))


def test_a_heartbeat_needs_sub_on_each_consumer_group_and_topic_and_pub_on_producer_groups() -> (
    None
):
    cmd = heartbeat_request(
        "10.0.0.1@1",
        ["p1", "p2", CLIENT_INNER_PRODUCER],
        [
            ConsumerData("g1", subscriptions=(SubscriptionData("T1"), SubscriptionData("T2"))),
            ConsumerData(
                "g2", subscriptions=(SubscriptionData("T1"), SubscriptionData("%RETRY%g2"))
            ),
        ],
    )
    assert required(cmd) == policy(
        (group("p1"), PUB),
        (group("p2"), PUB),
        (group("g1"), SUB),
        (topic("T1"), SUB),
        (topic("T2"), SUB),
        (group("g2"), SUB),
    )


def test_a_heartbeat_naming_no_group_needs_any_user() -> None:
    assert required(heartbeat_request("10.0.0.1@1", [], [])) == USER
    assert required(heartbeat_request("10.0.0.1@1", [CLIENT_INNER_PRODUCER], [])) == USER
    assert required(_heartbeat({"clientID": "c", "producerDataSet": None})) == USER


def test_a_heartbeat_skips_producer_entries_the_broker_skips() -> None:
    doc = {"clientID": "c", "producerDataSet": [1, None, {}, {"groupName": ""}, {"groupName": "p"}]}
    assert required(_heartbeat(doc)) == policy((group("p"), PUB))


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'"text"',
        b"\xff\xfe",
        b"[" * 5000,
        fastjson.dumps({"consumerDataSet": {"groupName": "g"}}),
        fastjson.dumps({"consumerDataSet": [{"groupName": ""}]}),
        fastjson.dumps({"consumerDataSet": [{"groupName": 7}]}),
        fastjson.dumps({"consumerDataSet": ["g"]}),
        fastjson.dumps({"consumerDataSet": [{"groupName": "g", "subscriptionDataSet": [{}]}]}),
        fastjson.dumps({"consumerDataSet": [{"groupName": "g", "subscriptionDataSet": ["T"]}]}),
        fastjson.dumps({"consumerDataSet": [{"groupName": "g", "subscriptionDataSet": 3}]}),
        fastjson.dumps({"producerDataSet": [{"groupName": ["p"]}]}),
        fastjson.dumps({"producerDataSet": "p"}),
    ],
)
def test_a_damaged_heartbeat_needs_a_super_user(body: bytes) -> None:
    assert required(RemotingCommand(RequestCode.HEART_BEAT, None, body)) == SUPER


@pytest.mark.parametrize("code", [RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ])
def test_queue_locks_read_their_body(code: int) -> None:
    def lock(doc: Any) -> Requirement:
        return required(RemotingCommand(code, None, fastjson.dumps(doc)))

    mqs = [{"brokerName": "b", "queueId": 0, "topic": "T1"}, {"queueId": 1, "topic": "%RETRY%g2"}]
    assert lock({"consumerGroup": "g", "clientId": "c", "mqSet": mqs}) == policy(
        (group("g"), SUB), (topic("T1"), SUB), (group("g2"), SUB)
    )
    assert lock({"consumerGroup": "g", "mqSet": None}) == policy((group("g"), SUB))
    for damaged in (
        {"mqSet": mqs},
        {"consumerGroup": "", "mqSet": mqs},
        {"consumerGroup": "g", "mqSet": {"topic": "T"}},
        {"consumerGroup": "g", "mqSet": [{"queueId": 0}]},
        {"consumerGroup": "g", "mqSet": [{"topic": 5, "queueId": 0}]},
        {"consumerGroup": "g", "mqSet": ["T"]},
        ["g"],
    ):
        assert lock(damaged) == SUPER, damaged
    assert required(RemotingCommand(code, None, b"{")) == SUPER


async def test_a_heartbeat_names_the_groups_the_broker_registers(
    servers: tuple[Broker, NameServer],
) -> None:
    """The names checked are the names acted on: the broker registers exactly the groups
    the heartbeat's requirement names."""
    broker, _ = servers
    cmd = heartbeat_request(
        "10.0.0.9@42",
        ["p-one", "p-two"],
        [
            ConsumerData("g-one", subscriptions=(SubscriptionData("TopicA"),)),
            ConsumerData("g-two", subscriptions=(SubscriptionData("TopicB"),)),
        ],
    )
    needs = required(cmd).needs
    conn = await connect(f"127.0.0.1:{broker.remoting.port}", {})
    try:
        answer = await conn.invoke(cmd, TIMEOUT)
    finally:
        conn.close()
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    consumers = broker.consumers
    producers = {g for g, clients in consumers.producer_groups.items() if "10.0.0.9@42" in clients}
    assert {r.name for r, a in needs if a is PUB} == producers == {"p-one", "p-two"}
    assert {r.name for r, a in needs if r.type is ResourceType.GROUP and a is SUB} == {
        g for g, info in consumers.groups.items() if "10.0.0.9@42" in info.clients
    }
    assert {r.name for r, _ in needs if r.type is ResourceType.TOPIC} == {
        t for g in ("g-one", "g-two") for t in consumers.groups[g].subscriptions
    }


# -- the nameserver -------------------------------------------------------------------------------

NAMESERVER_TABLE: Final[dict[int, Requirement]] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: OPEN,
    RequestCode.GET_BROKER_CLUSTER_INFO: OPEN,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: SUPER,
    RequestCode.GET_TOPICS_BY_CLUSTER: SUPER,
    RequestCode.GET_KV_CONFIG: SUPER,
    RequestCode.GET_KVLIST_BY_NAMESPACE: SUPER,
    RequestCode.REGISTER_BROKER: SUPER,
    RequestCode.UNREGISTER_BROKER: SUPER,
    RequestCode.QUERY_DATA_VERSION: SUPER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: SUPER,
    RequestCode.PUT_KV_CONFIG: SUPER,
    RequestCode.DELETE_KV_CONFIG: SUPER,
    RocketqRequestCode.AUTH_SESSION: OPEN,
}


def test_the_nameserver_table_covers_every_nameserver_code() -> None:
    assert names(set(NAMESERVER_TABLE)) == names(NAMESERVER_CODES)


@pytest.mark.parametrize("code", sorted(NAMESERVER_TABLE), ids=name_of)
def test_nameserver_requirement(code: int) -> None:
    for ext in (None, {"topic": TOPIC, "brokerName": "broker-a", "clusterName": CLUSTER}):
        assert nameserver_requirement(RemotingCommand(code, ext, b"{}")) == NAMESERVER_TABLE[code]


# -- any request ---------------------------------------------------------------------------------

_KEYS: Final = [
    "topic",
    "b",
    "a",
    "consumerGroup",
    "producerGroup",
    "group",
    "originTopic",
    "clientID",
    "groupName",
]
_NAMES: Final = st.sampled_from(
    ["", " ", "T", "%RETRY%", "%RETRY%g", "%DLQ%g", "*", "é"]
) | st.text(max_size=12)
_JSON_KEYS: Final = st.sampled_from(
    [
        "producerDataSet",
        "consumerDataSet",
        "subscriptionDataSet",
        "groupName",
        "topic",
        "mqSet",
        "consumerGroup",
        "clientID",
        "queueId",
    ]
) | st.text(max_size=6)
_JSON: Final = st.recursive(
    st.none() | st.booleans() | st.integers() | _NAMES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_JSON_KEYS, inner, max_size=5),
    max_leaves=25,
)
_BODIES: Final = st.none() | st.binary(max_size=300) | _JSON.map(fastjson.dumps)
_CODES: Final = st.sampled_from(sorted(BROKER_CODES | NAMESERVER_CODES)) | st.integers(
    -(1 << 15), (1 << 15) - 1
)


def _well_formed(r: Requirement) -> bool:
    """A requirement the access check can hold a request to: POLICY names at least one
    resource, every one with a name (a Cluster may be the empty default); other gates name
    none."""
    if r.gate is not Gate.POLICY:
        return r.needs == ()
    return bool(r.needs) and all(
        isinstance(res, Resource)
        and isinstance(action, Action)
        and res.type in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER)
        and (res.type is ResourceType.CLUSTER or res.name.strip() != "")
        and not res.name.startswith("%RETRY%")
        for res, action in r.needs
    )


@settings(max_examples=600, deadline=None)
@given(
    code=_CODES,
    ext=st.none()
    | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=8), _NAMES, max_size=8),
    body=_BODIES,
)
def test_any_request_gets_a_requirement(
    code: int, ext: dict[str, str] | None, body: bytes | None
) -> None:
    cmd = RemotingCommand(code, ext, body)
    for r in (broker_requirement(cmd, cluster=CLUSTER), nameserver_requirement(cmd)):
        assert isinstance(r, Requirement)
        assert _well_formed(r), r
    if code not in BROKER_CODES:
        assert broker_requirement(cmd) == SUPER
    if code not in NAMESERVER_CODES:
        assert nameserver_requirement(cmd) == SUPER


_GROUP_NAMES: Final = st.text(
    st.characters(codec="utf-8", exclude_characters="%"), min_size=1, max_size=10
).filter(lambda s: s.strip() != "")


@settings(max_examples=200, deadline=None)
@given(
    producers=st.lists(_GROUP_NAMES, max_size=4),
    consumers=st.dictionaries(
        _GROUP_NAMES,
        st.lists(_GROUP_NAMES | _GROUP_NAMES.map(lambda g: "%RETRY%" + g), max_size=4),
        max_size=4,
    ),
)
def test_a_heartbeat_needs_exactly_its_groups_and_topics(
    producers: list[str], consumers: dict[str, list[str]]
) -> None:
    cmd = heartbeat_request(
        "c",
        producers,
        [
            ConsumerData(g, subscriptions=tuple(SubscriptionData(t) for t in topics))
            for g, topics in consumers.items()
        ],
    )
    expected = {(group(p), PUB) for p in producers if p != CLIENT_INNER_PRODUCER}
    for g, topics in consumers.items():
        expected.add((group(g), SUB))
        for t in topics:
            retry = t.startswith("%RETRY%")
            expected.add((group(t[len("%RETRY%") :]) if retry else topic(t), SUB))
    r = required(cmd)
    assert set(r.needs) == expected
    assert len(r.needs) == len(expected)  # each once
    assert r.gate is (Gate.POLICY if expected else Gate.USER)


@settings(max_examples=200, deadline=None)
@given(name=_GROUP_NAMES, code=st.sampled_from(sorted(BROKER_CODES)))
def test_a_retry_topic_is_never_checked_as_a_topic(name: str, code: int) -> None:
    """Whatever field carries it, ``%RETRY%<g>`` is checked as group ``g``."""
    retry = "%RETRY%" + name
    ext = {k: retry for k in _KEYS}
    body = fastjson.dumps(
        {
            "consumerGroup": retry,
            "mqSet": [{"topic": retry, "queueId": 0}],
            "consumerDataSet": [{"groupName": name, "subscriptionDataSet": [{"topic": retry}]}],
        }
    )
    r = required(RemotingCommand(code, ext, body))
    assert all(res.type is not ResourceType.TOPIC for res, _ in r.needs), r


def test_batch_entries_are_not_read() -> None:
    """A batch's topic is its header's: its entries carry none, and a body that is not a
    batch changes nothing here."""
    good = _v2_send(TOPIC, batch=True)
    bad = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, good.ext, b"\x00" * 3)
    assert required(good) == required(bad) == policy((topic(), PUB))


def test_a_topics_batch_needs_pub_on_every_topic_its_body_names_or_a_super_user() -> None:
    """The resources are in the body: a retry topic among them stands for its group, and
    a body that names no topic it can be held to needs a super user."""
    cmd = topics_batch_request(
        [(TOPIC, 0, batch_entry(b"a", b"")), ("%RETRY%" + GROUP, 0, batch_entry(b"b", b""))],
        group=PRODUCER,
        born_timestamp=0,
    )
    assert required(cmd) == policy((topic(), PUB), (group(), SUB))
    for body in (b"", b"\x00\x05Topic", cmd.body[:-1] if cmd.body else b""):
        cut = RemotingCommand(RocketqRequestCode.SEND_TOPICS_BATCH, cmd.ext, body)
        assert required(cut) == SUPER
