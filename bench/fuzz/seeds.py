"""The seed corpus: small valid inputs for each harness, made by the project's own
encoders (the SDK's request builders, the record and body encoders, the config dumper).

The checked-in corpus under ``bench/fuzz/corpus/<harness>/`` is exactly what
:func:`write_corpus` makes (``tests/bench/test_fuzz.py`` checks it); regenerate it with

    python -m rocketq.bench.fuzz.seeds

Seed files are named after their content (``seed-<what>``), and nothing in them depends
on the machine or the clock.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from rocketq.auth.credentials import Credentials
from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.model import acl_to_doc, encode_acl_info, encode_acl_infos, encode_user_info
from rocketq.auth.model import encode_user_infos as encode_users
from rocketq.bench.fuzz.server_targets import TOPIC
from rocketq.bench.fuzz.targets import (
    ALICE_ACL,
    AUDIENCE,
    AUTH_READERS,
    AUTH_USERS,
    FILE_SEPARATOR,
    INNER,
    RAFT_RECEIVER,
    SDK_READERS,
    SECRETS,
    SIGNED_AT,
)
from rocketq.broker.config import BrokerConfig
from rocketq.broker.config_json import group_doc, topic_doc
from rocketq.broker.registration import full_body
from rocketq.broker.subscription_group import SubscriptionGroupConfig as BrokerGroupConfig
from rocketq.broker.topic_config import config_doc, snapshot_doc
from rocketq.common.config import StoreConfig, dump_toml
from rocketq.common.message import Message as ProducerMessage
from rocketq.common.message import MessageQueue, TopicConfig
from rocketq.common.record import encode_message, encode_properties, encode_record
from rocketq.nameserver.config import NameServerConfig
from rocketq.remoting import fastjson
from rocketq.remoting.broker_tables import (
    SubscriptionGroupConfig,
    TopicConfigData,
    subscription_group_doc,
)
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode, SerializeType
from rocketq.remoting.command import RemotingCommand, encode
from rocketq.remoting.register_body import crc32, encode_body
from rocketq.remoting.route_data import (
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
    cluster_info_body,
)
from rocketq.remoting.route_data import route_body as encode_route
from rocketq.replication.ha.wire import (
    MAX_ADDR,
    Hello,
    encode_hello,
    encode_transfer_head,
    sign_hello,
)
from rocketq.replication.raft import wire as raft_wire
from rocketq.replication.raft.node import (
    AppendRequest,
    AppendResponse,
    Entry,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from rocketq.sdk import admin_wire, client_wire
from rocketq.sdk.wire import (
    ConsumerData,
    SubscriptionData,
    batch_body,
    heartbeat_request,
    pull_request,
    send_request,
)
from rocketq.storage.checkpoint import Checkpoint, CheckpointFile
from rocketq.storage.queue_ends import QueueEnd, StoreEnds
from rocketq.storage.queue_ends import encode as encode_queue_ends

CORPUS: Final = Path(__file__).resolve().parent / "corpus"
REGRESSIONS: Final = Path(__file__).resolve().parent / "regressions"

BORN_TS: Final = 1_700_000_000_000
HOST: Final = b"\x7f\x00\x00\x01\x00\x00\x27\x1f"  # 127.0.0.1:10015
STORE_HOST: Final = b"\x0a\x00\x00\x01\x00\x00\x2a\x9f"  # 10.0.0.1:10911
PROPS: Final = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AC110001000018B4AAC2\x02"
COMPRESSED: Final = 0x1  # MessageSysFlag.COMPRESSED_FLAG


def _frame(cmd: RemotingCommand) -> bytes:
    """A frame without its length word (what the transport passes to decode)."""
    return encode(cmd)[4:]


def _both(name: str, cmd: RemotingCommand) -> dict[str, bytes]:
    """The frame with a JSON header and with RocketMQ's binary header."""
    json_frame = _frame(cmd)
    cmd.serialize_type = SerializeType.ROCKETMQ
    binary = _frame(cmd)
    cmd.serialize_type = SerializeType.JSON
    return {f"{name}-json": json_frame, f"{name}-binary": binary}


def remoting_frame() -> dict[str, bytes]:
    seeds: dict[str, bytes] = {}
    seeds |= _both("empty", RemotingCommand(105))
    seeds |= _both(
        "send",
        send_request(b"hello", PROPS, group="pg", topic=TOPIC, queue_id=1, born_timestamp=BORN_TS),
    )
    answer = RemotingCommand(310, {"queueId": "1"}, opaque=7).response(0, {"msgId": "AB"}, b"x")
    answer.remark = "ok"
    seeds |= _both("response", answer)
    return seeds


def fastjson_body() -> dict[str, bytes]:
    route = TopicRouteData(
        [QueueData("broker-a", 4, 4, 6)],
        [BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})],
    )
    key = fastjson.ObjectKey.of({"brokerName": "broker-a", "queueId": 0, "topic": TOPIC})
    return {
        "route-fastjson": encode_route(route, standard=False),
        "route-standard": encode_route(route, standard=True),
        "object-keys": fastjson.dumps({"offsetTable": {key: {"brokerOffset": 5}}}),
        "scalars": fastjson.dumps([1, -2.5e10, True, None, 'a\u00e9\n"\\', {}, []]),
    }


def broker_requests() -> dict[str, bytes]:
    sub = SubscriptionData(TOPIC, "TagA || TagB")
    sql = SubscriptionData(TOPIC, "a > 1 AND b = 'x'", "SQL92")
    consumer = ConsumerData("cg", subscriptions=(sub,))
    sql_consumer = ConsumerData("sql", subscriptions=(sql,))
    mq = [MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)]
    batch = batch_body([(b"one", b"KEYS\x01a\x02", 0), (b"two", b"", 0)])
    commands = {
        "send-v2": send_request(
            b"hello", PROPS, group="pg", topic=TOPIC, queue_id=1, born_timestamp=BORN_TS
        ),
        "send-batch": send_request(
            batch, "", group="pg", topic=TOPIC, queue_id=0, born_timestamp=BORN_TS, batch=True
        ),
        "pull": pull_request(group="cg", topic=TOPIC, queue_id=0, offset=0, commit_offset=0),
        "pull-sql": pull_request(
            group="cg",
            topic=TOPIC,
            queue_id=1,
            offset=0,
            subscription=sql.expression,
            expression_type="SQL92",
        ),
        "heartbeat": heartbeat_request("127.0.0.1@1", ["pg"], [consumer, sql_consumer]),
        "query-offset": client_wire.query_offset_request("cg", TOPIC, 0),
        "update-offset": client_wire.update_offset_request("cg", TOPIC, 0, 1),
        "max-offset": client_wire.max_offset_request(TOPIC, 0),
        "search-offset": client_wire.search_offset_request(TOPIC, 0, BORN_TS),
        "lock": client_wire.lock_batch_request("cg", "127.0.0.1@1", mq),
        "unlock": client_wire.unlock_batch_request("cg", "127.0.0.1@1", mq),
        "consumer-list": client_wire.consumer_list_request("cg"),
        "send-back": client_wire.send_back_request(
            "cg",
            0,
            delay_level=0,
            origin_msg_id="0A00000100002A9F0000000000000000",
            origin_topic=TOPIC,
            max_reconsume_times=16,
        ),
        "end-transaction": client_wire.end_transaction_request(
            "pg",
            commit_log_offset=0,
            tran_state_table_offset=0,
            msg_id="AB",
            transaction_id="t1",
            commit_or_rollback=8,
            from_transaction_check=False,
        ),
        "create-topic": admin_wire.update_and_create_topic_request(TopicConfigData("Fuzz2", 2, 2)),
        "update-group": admin_wire.update_subscription_group_request(SubscriptionGroupConfig("cg")),
        "consume-stats": admin_wire.consume_stats_request("cg", TOPIC),
        "topic-stats": admin_wire.topic_stats_request(TOPIC),
        "query-message": admin_wire.query_message_request(TOPIC, "k1"),
        "view-message": admin_wire.view_message_request(0),
        "reset-offset": admin_wire.reset_offset_by_time_request("cg", TOPIC, -1),
        "connections": admin_wire.consumer_connection_list_request("cg"),
        "consume-by-who": admin_wire.query_topic_consume_by_who_request(TOPIC),
    }
    seeds: dict[str, bytes] = {}
    for name, cmd in commands.items():
        seeds |= _both(name, cmd)
    return seeds


def nameserver_requests() -> dict[str, bytes]:
    topics = [TopicConfig(TOPIC, 4, 4), TopicConfig("Ordered", 2, 2, 6, 0, True)]
    body, crc = full_body(topics, 2)
    identity = {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerAddr": "10.0.0.1:10911",
        "haServerAddr": "10.0.0.1:10912",
        "maxPhyOffset": "0",
    }
    register = {
        **identity, "dataVersion": "2", "bodyCrc32": str(crc), "compressed": "true",
        "registerKind": "FULL",
    }  # fmt: skip
    delta_body = encode_body([TopicConfig("New", 1, 1)], 3, deleted=["Ordered"])
    delta = {
        **register, "dataVersion": "3", "baseVersion": "2", "registerKind": "DELTA",
        "bodyCrc32": str(crc32(delta_body)),
    }  # fmt: skip
    commands = {
        "register-full": RemotingCommand(RequestCode.REGISTER_BROKER, register, body),
        "register-delta": RemotingCommand(RequestCode.REGISTER_BROKER, delta, delta_body),
        "heartbeat": RemotingCommand(
            RequestCode.REGISTER_BROKER,
            {**identity, "dataVersion": "3", "registerKind": "HEARTBEAT"},
        ),
        "unregister": RemotingCommand(RequestCode.UNREGISTER_BROKER, identity),
        "route": RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
        "cluster-info": RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO),
        "put-kv": RemotingCommand(
            RequestCode.PUT_KV_CONFIG,
            {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC, "value": "broker-a:4"},
        ),
        "kv-list": RemotingCommand(
            RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"}
        ),
        "delete-topic": RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Gone"}),
    }
    seeds: dict[str, bytes] = {}
    for name, cmd in commands.items():
        seeds |= _both(name, cmd)
    return seeds


def sdk_answers() -> dict[str, bytes]:
    readers = [name for name, _ in SDK_READERS]

    def answer(reader: str, cmd: RemotingCommand) -> tuple[str, bytes]:
        return reader, bytes((readers.index(reader),)) + _frame(cmd)

    ok = RemotingCommand(ResponseCode.SUCCESS, flag=1)
    mq = fastjson.ObjectKey.of({"brokerName": "broker-a", "queueId": 0, "topic": TOPIC})
    cases = [
        answer(
            "send",
            ok.response(
                ResponseCode.SUCCESS,
                {"msgId": "0A00000100002A9F0000000000000000", "queueId": "1", "queueOffset": "0"},
            ),
        ),
        answer(
            "pull",
            ok.response(
                ResponseCode.SUCCESS,
                {
                    "nextBeginOffset": "1",
                    "minOffset": "0",
                    "maxOffset": "1",
                    "suggestWhichBrokerId": "0",
                },
                _record(b"stored", PROPS),
            ),
        ),
        answer("offset", ok.response(ResponseCode.SUCCESS, {"offset": "5"})),
        answer(
            "consumer_list",
            ok.response(ResponseCode.SUCCESS, None, fastjson.dumps({"consumerIdList": ["a@1"]})),
        ),
        answer(
            "lock_batch",
            ok.response(
                ResponseCode.SUCCESS, None, fastjson.dumps({"lockOKMQSet": [mq.as_dict()]})
            ),
        ),
        answer(
            "notice",
            RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"}),
        ),
        answer(
            "consumer_request",
            RemotingCommand(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": "cg", "clientId": "a@1", "jstackEnable": "false"},
            ),
        ),
        answer(
            "consumer_offsets",
            ok.response(
                ResponseCode.SUCCESS,
                None,
                fastjson.dumps({"offsetTable": {f"{TOPIC}@cg": {0: 5, 1: 7}}}),
            ),
        ),
        answer(
            "trace_events",
            ok.response(ResponseCode.SUCCESS, None, b'{"type":"Pub","topic":"T"}\n'),
        ),
    ]
    named = dict(cases)
    for reader in readers:  # an empty object for the rest
        if reader not in named:
            named[reader] = answer(reader, ok.response(ResponseCode.SUCCESS, None, b"{}"))[1]
    return named


def send_batch() -> dict[str, bytes]:
    one = batch_body([(b"hello", PROPS.encode(), 0)])
    two = batch_body([(b"a", b"", 1), (b"", b"KEYS\x01k\x02", 0), (b"\xff" * 40, b"", 0)])
    return {"one": b"\x00" + one, "three-with-header-props": b"\x01" + two}


def _record(body: bytes, props: str, *, sys_flag: int = 0, offset: int = 0) -> bytes:
    return encode_record(
        topic=TOPIC.encode(),
        body=body,
        properties=props.encode(),
        born_timestamp=BORN_TS,
        born_host=HOST,
        queue_id=1,
        sys_flag=sys_flag,
        queue_offset=offset,
        physical_offset=offset * 200,
        store_timestamp=BORN_TS + 5,
        store_host=STORE_HOST,
    )


def records() -> dict[str, bytes]:
    message = encode_message(
        ProducerMessage(TOPIC, b"hello", tags="TagA", keys=["k1"], properties={"a": "1"}),
        born_timestamp=BORN_TS,
        born_host=HOST,
        uniq_id="AC110001000018B4AAC2",
    )
    stored = _record(b"stored", PROPS, offset=3)
    retried = _record(b"again", PROPS + "RETRY_TOPIC\x01Real\x02DELAY\x013\x02")
    inflated = _record(zlib.compress(b"z" * 200), PROPS, sys_flag=COMPRESSED)
    return {
        "producer-record": message,
        "stored-record": stored,
        "three-records": stored + retried + inflated,
    }


def message_properties() -> dict[str, bytes]:
    return {
        "system": PROPS.encode(),
        "user": encode_properties({"a": "1", "b": "\u00e9t\u00e9", "DELAY": "3"}),
    }


def register_body() -> dict[str, bytes]:
    topics = [TopicConfig(TOPIC, 4, 4), TopicConfig("Ordered", 2, 2, 6, 0, True)]
    compressed = encode_body(topics, 3, deleted=["Gone"])
    doc = {
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": 3, "timestamp": 0},
            "topicConfigTable": {t.topic_name: topic_doc(t) for t in topics},
        },
        "filterServerList": [],
    }
    return {"compressed": b"\x01" + compressed, "json": b"\x00" + fastjson.dumps(doc)}


def route_body() -> dict[str, bytes]:
    broker = BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})
    route = TopicRouteData([QueueData("broker-a", 4, 4, 6)], [broker])
    info = ClusterInfo({"broker-a": broker}, {"DefaultCluster": ["broker-a"]})
    return {
        "route": b"\x00" + encode_route(route, standard=False),
        "route-standard": b"\x00" + encode_route(route, standard=True),
        "cluster-info": b"\x01" + cluster_info_body(info),
    }


def topic_body() -> dict[str, bytes]:
    topic = TopicConfig(TOPIC, 4, 4)
    group = BrokerGroupConfig("cg")
    one = fastjson.dumps({**topic_doc(topic), **group_doc(group)})
    topics = {
        "dataVersion": {"counter": 2, "timestamp": 0},
        "topicConfigTable": {TOPIC: topic_doc(topic)},
    }
    groups = {
        "dataVersion": {"counter": 1, "timestamp": 0},
        "subscriptionGroupTable": {"cg": subscription_group_doc(SubscriptionGroupConfig("cg"))},
    }
    return {
        "topic-and-group": b"\x00" + one,
        "all-topics": b"\x01" + fastjson.dumps(topics),
        "all-groups": b"\x02" + fastjson.dumps(groups),
    }


def sql92() -> dict[str, bytes]:
    expressions = [
        "a > 1 AND b = 'x'",
        "TAGS IN ('TagA', 'TagB') OR c IS NOT NULL",
        "a BETWEEN -5 AND 5.5 AND NOT (b <> 'y')",
        "c IS NULL OR b <> 'y'",
    ]
    return {f"expr-{i}": e.encode() for i, e in enumerate(expressions)}


NONCE: Final = bytes(range(16))  # a signed hello's nonce (random when a node signs one)


def ha_frame() -> dict[str, bytes]:
    hello = Hello(1, 4096, "10.0.0.2:10911")
    signed = sign_hello(hello, INNER, timestamp_ms=SIGNED_AT, nonce=NONCE)
    other = Credentials(INNER.access_key, "another-secret")
    longest = Hello(1, 4096, "a" * (MAX_ADDR - 6) + ":10911")
    return {
        "hello": b"\x00" + encode_hello(hello),
        "hello-signed": b"\x00" + encode_hello(signed),
        "hello-signed-other-secret": b"\x00"
        + encode_hello(sign_hello(hello, other, timestamp_ms=SIGNED_AT, nonce=NONCE)),
        "hello-signed-longest-address": b"\x00"
        + encode_hello(sign_hello(longest, INNER, timestamp_ms=SIGNED_AT, nonce=NONCE)),
        "transfer": b"\x01" + encode_transfer_head(4096, 8192, 100),
        "truncate": b"\x01" + encode_transfer_head(0, 0, 0, 1),
    }


def raft_frame() -> dict[str, bytes]:
    messages: dict[str, Message] = {
        "append": AppendRequest(3, "n0", 10, 2, (Entry(3, b"abc"), Entry(3, b"")), 9),
        "heartbeat": AppendRequest(3, "n0", 10, 2, (), 9),
        "ack": AppendResponse(3, "n1", True, 12),
        "nack": AppendResponse(3, "n1", False, 0, 5, "log mismatch"),
        "vote": VoteRequest(4, "n2", 12, 3, pre=True),
        "vote-answer": VoteResponse(4, "n1", False, reason="has a leader"),
        "timeout-now": TimeoutNow(5, "n0"),
    }
    frames = {name: raft_wire.encode("n0", msg)[4:] for name, msg in messages.items()}
    handshake = raft_wire.sign_handshake(
        "n0", RAFT_RECEIVER, INNER, timestamp_ms=SIGNED_AT, nonce=NONCE
    )
    frames["handshake"] = raft_wire.encode_handshake(handshake)[4:]
    to_other = raft_wire.sign_handshake("n0", "n2", INNER, timestamp_ms=SIGNED_AT, nonce=NONCE)
    frames["handshake-for-another-member"] = raft_wire.encode_handshake(to_other)[4:]
    return frames


def auth_body() -> dict[str, bytes]:
    readers = [name for name, _ in AUTH_READERS]
    no_subject = {k: v for k, v in acl_to_doc(ALICE_ACL).items() if k != "subject"}
    bodies = {
        "user_info": encode_user_info(AUTH_USERS[0]),
        "user_infos": encode_users(AUTH_USERS, with_password=False),
        "acl_info": encode_acl_info(ALICE_ACL),
        "acl_info_subject": json.dumps(no_subject).encode(),
        "acl_infos": encode_acl_infos([ALICE_ACL]),
        "resource": b"Topic:order*",
        "subject": b"User:alice",
    }
    return {name: bytes((readers.index(name),)) + body for name, body in bodies.items()}


def plain_acl() -> dict[str, bytes]:
    # RocketMQ 4.9's distribution/conf/plain_acl.yml, in its shape.
    sample = """globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - '%RETRY%groupC=SUB'

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""
    flow = (
        "{globalWhiteRemoteAddresses: '10.0.0.1-9,192.168.1.{1,2}', accounts: "
        "[{accessKey: a, secretKey: s, topicPerms: 't=ANY;u=SUB|PUB', admin: 'false'}]}"
    )
    anchors = """shared: &perms [topicA=PUB, topicB=SUB]
accounts:
  - &base {accessKey: one, secretKey: secret-one, topicPerms: *perms}
  - {<<: *base, accessKey: two, defaultGroupPerm: 'SUB|PUB'}
"""
    return {"sample": sample.encode(), "flow-style": flow.encode(), "anchors": anchors.encode()}


def auth_metadata() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        metadata = AuthMetadata(Path(tmp))
        for user in AUTH_USERS:
            metadata.create_user(user)
        metadata.update_acl(ALICE_ACL)
        users = metadata.users_path.read_bytes()
        acls = metadata.acls_path.read_bytes()
        return {
            "snapshot": b"\x00" + metadata.snapshot(),
            "files": b"\x01" + users + FILE_SEPARATOR + acls,
            "users-only": b"\x01" + users,
        }


def _signed(cmd: RemotingCommand, access_key: str) -> RemotingCommand:
    Credentials(access_key, SECRETS[access_key]).sign(cmd)
    return cmd


def _signed_strong(cmd: RemotingCommand, access_key: str) -> RemotingCommand:
    """Signed with rocketq's strong signature at a fixed time and nonce (the harness signs
    it again, stamped when it runs)."""
    credentials = Credentials(access_key, SECRETS[access_key])
    credentials.sign_strong(cmd, AUDIENCE, now_ms=1_700_000_000_000, nonce="seed-nonce-0123456789")
    return cmd


def access_check() -> dict[str, bytes]:
    nameserver, re_sign = 0x01, 0x80
    authz_only, authn_only, whitelisted = 0x02, 0x04, 0x06
    peer_192, certificate_alice = 0x08, 0x20
    send = send_request(b"hello", PROPS, group="pg", topic=TOPIC, queue_id=1, born_timestamp=1)
    pull = pull_request(group="cg", topic=TOPIC, queue_id=0, offset=0, commit_offset=0)
    heartbeat = heartbeat_request(
        "127.0.0.1@1", ["pg"], [ConsumerData("cg", subscriptions=(SubscriptionData(TOPIC),))]
    )
    register = RemotingCommand(
        RequestCode.REGISTER_BROKER,
        {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0"},
    )
    cases: dict[str, tuple[int, RemotingCommand]] = {
        "send-alice": (re_sign, _signed(send, "alice")),
        "pull-alice": (re_sign, _signed(pull, "alice")),
        "heartbeat-alice-authz-only": (authz_only, _signed(heartbeat, "alice")),
        "max-offset-alice-from-192": (
            re_sign | peer_192,
            _signed(client_wire.max_offset_request("secret", 0), "alice"),
        ),
        "create-topic-admin": (
            re_sign | authn_only,
            _signed(
                admin_wire.update_and_create_topic_request(TopicConfigData("F2", 2, 2)), "admin"
            ),
        ),
        "auth-metadata-inner": (
            re_sign,
            _signed(RemotingCommand(RocketqRequestCode.GET_AUTH_METADATA), INNER.access_key),
        ),
        "disabled-user": (re_sign, _signed(client_wire.consumer_list_request("cg"), "bob")),
        "unsigned-whitelisted": (whitelisted | peer_192, client_wire.consumer_list_request("cg")),
        "certificate": (certificate_alice, client_wire.query_offset_request("cg", TOPIC, 0)),
        "nameserver-route": (
            nameserver,
            RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
        ),
        "nameserver-register-inner": (nameserver | re_sign, _signed(register, INNER.access_key)),
        "pull-alice-strong": (
            re_sign,
            _signed_strong(
                pull_request(group="cg", topic=TOPIC, queue_id=0, offset=0, commit_offset=0),
                "alice",
            ),
        ),
        "delete-topic-admin-strong": (
            re_sign | authn_only,
            _signed_strong(admin_wire.delete_topic_request("F2"), "admin"),
        ),
    }
    seeds: dict[str, bytes] = {}
    for name, (mode, cmd) in cases.items():
        seeds |= {k: bytes((mode,)) + v for k, v in _both(name, cmd).items()}
    return seeds


def v2_receipt() -> dict[str, bytes]:
    """Receipt handles as the v2 endpoint writes them (``ckOffset popTime invisibleTime
    reviveQid retry brokerName queueId queueOffset commitLogOffset``) and near misses."""
    handles = {
        "pending-shape": "0 1700000000000 3600000 0 0 broker-a 0 0 0",
        "retry-topic": "3 1700000000000 60000 1 1 broker-a 1 5 1024",
        "orderly": "0 1700000000000 60000 999 0 broker-a 1 0 0",
        "forged-secret-offset": "0 0 60000 0 0 broker-a 0 0 4096",
        "no-commitlog-offset": "0 0 60000 0 0 broker-a 0 0",
        "negative": "-1 -1 -1 -1 0 broker-a -1 -1 -1",
        "extra-fields": "0 0 60000 0 0 broker-a 0 0 0 0 0",
    }
    return {name: text.encode() for name, text in handles.items()}


def v2_telemetry() -> dict[str, bytes]:
    """Telemetry settings frames (first byte 0: alice's, 1: the super user's): a producer's
    and a consumer's, on alice's topic and group and on others."""
    from rocketq.broker.grpc_v2 import definition_pb2 as d
    from rocketq.broker.grpc_v2 import service_pb2 as sv

    def publishing(*topics: str) -> bytes:
        settings = d.Settings(
            client_type=d.ClientType.PRODUCER,
            publishing=d.Publishing(topics=[d.Resource(name=t) for t in topics]),
        )
        return bytes(sv.TelemetryCommand(settings=settings).SerializeToString(deterministic=True))

    def subscription(group: str, *topics: str) -> bytes:
        entries = [
            d.SubscriptionEntry(
                topic=d.Resource(name=t),
                expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
            )
            for t in topics
        ]
        settings = d.Settings(
            client_type=d.ClientType.PUSH_CONSUMER,
            subscription=d.Subscription(group=d.Resource(name=group), subscriptions=entries),
        )
        return bytes(sv.TelemetryCommand(settings=settings).SerializeToString(deterministic=True))

    return {
        "alice-publishes-hers": b"\x00" + publishing("FuzzV2"),
        "alice-publishes-secret": b"\x00" + publishing("FuzzV2", "FuzzSecret"),
        "alice-subscribes-hers": b"\x00" + subscription("fuzz-v2", "FuzzV2"),
        "alice-subscribes-other-group": b"\x00" + subscription("secret-cg", "FuzzV2"),
        "root-subscribes": b"\x01" + subscription("fuzz-root", "FuzzSecret"),
        "root-publishes": b"\x01" + publishing("FuzzSecret"),
    }


def checkpoint() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkpoint"
        cp = CheckpointFile(path)
        cp.write(Checkpoint(BORN_TS, BORN_TS, BORN_TS, 4096, 4096, 4096, 4096, 4096, 0))
        cp.close()
        full = path.read_bytes()
    return {"clean-shutdown": full.rstrip(b"\0").ljust(72, b"\0"), "old-layout": full[:48]}


def queue_ends() -> dict[str, bytes]:
    data = encode_queue_ends(
        StoreEnds(1 << 20, 0, 4096, 4096),
        [((TOPIC.encode(), 0), QueueEnd(0, 10, 4000, 90, 0)), ((b"B", 3), QueueEnd(0, 0, 0, 0, 0))],
    )
    return {"as-written": b"\x00" + data, "checksum-fixed-up": b"\x01" + data[:-4]}


def topics_files() -> dict[str, bytes]:
    topics = {TOPIC: TopicConfig(TOPIC, 4, 4), "B": TopicConfig("B", 1, 1)}
    snapshot = json.dumps(snapshot_doc(topics, 2), separators=(",", ":")).encode()
    change = {"dataVersion": 3, "put": [config_doc(TopicConfig("C", 2, 2))], "delete": ["B"]}
    log = json.dumps(change, separators=(",", ":")).encode() + b"\n"
    return {
        "snapshot-only": snapshot,
        "snapshot-and-log": snapshot + FILE_SEPARATOR + log,
        "log-only": FILE_SEPARATOR + log,
    }


def config_toml() -> dict[str, bytes]:
    broker = BrokerConfig(broker_name="broker-a", namesrv_addr="10.0.0.1:9876")
    store = StoreConfig(store_path_root_dir="/var/lib/rocketq/store")
    nameserver = NameServerConfig(kv_config_path="/var/lib/rocketq/namesrv/kv.json")
    return {
        "broker": b"\x00" + (dump_toml(broker) + dump_toml(store)).encode(),
        "nameserver": b"\x01" + dump_toml(nameserver).encode(),
    }


SEEDS: Final[dict[str, Callable[[], dict[str, bytes]]]] = {
    "remoting_frame": remoting_frame,
    "fastjson": fastjson_body,
    "broker_requests": broker_requests,
    "nameserver_requests": nameserver_requests,
    "send_batch": send_batch,
    "records": records,
    "message_properties": message_properties,
    "register_body": register_body,
    "route_body": route_body,
    "topic_body": topic_body,
    "sql92": sql92,
    "sdk_answers": sdk_answers,
    "ha_frame": ha_frame,
    "raft_frame": raft_frame,
    "auth_body": auth_body,
    "plain_acl": plain_acl,
    "auth_metadata": auth_metadata,
    "access_check": access_check,
    "v2_receipt": v2_receipt,
    "v2_telemetry": v2_telemetry,
    "checkpoint": checkpoint,
    "queue_ends": queue_ends,
    "topics_files": topics_files,
    "config_toml": config_toml,
}


def corpus(harness: str) -> dict[str, bytes]:
    """File name -> bytes of one harness's seed corpus."""
    return {f"seed-{name}": data for name, data in SEEDS[harness]().items()}


def write_corpus(root: Path = CORPUS) -> int:
    """(Re)write every harness's corpus folder under ``root``; the number of files."""
    written = 0
    for harness in SEEDS:
        folder = root / harness
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, data in corpus(harness).items():
            (folder / name).write_bytes(data)
            written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=CORPUS, help="Corpus root to (re)write.")
    args = parser.parse_args()
    print(f"{write_corpus(args.out)} seed files under {args.out}")


if __name__ == "__main__":
    main()
