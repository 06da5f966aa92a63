"""The numbers of RocketMQ 4.9's remoting protocol.

Request and response codes, the language and serialize-type codes of the command header,
the bits of the command's ``flag`` word, and the bit flags carried inside requests
(``MessageSysFlag`` in send headers and CommitLog records, ``PullSysFlag`` in pull headers,
``PermName`` in topic configs). Names are RocketMQ's own, so a code can be looked up in
either code base; every class of codes has a ``NAMES`` map from number to name for logs.

Values are those of RocketMQ 4.9.8 (``rocketmq-all-4.9.8``); the few that changed within
4.9.x say so in a comment. A 5.x-only code is not listed.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed_version
from typing import ClassVar, Final


def _names(cls: type) -> dict[int, str]:
    """number -> name for the upper-case int attributes of ``cls``; a number used twice fails."""
    names: dict[int, str] = {}
    for name, value in vars(cls).items():
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool):
            if value in names:
                raise RuntimeError(f"{cls.__name__}: {value} is both {names[value]} and {name}")
            names[value] = name
    return names


class RequestCode:
    """``RemotingCommand.code`` of a request (RocketMQ's ``RequestCode``)."""

    # client <-> broker: messages, offsets, heartbeats, transactions, order locks
    SEND_MESSAGE: Final = 10
    PULL_MESSAGE: Final = 11
    QUERY_MESSAGE: Final = 12
    QUERY_BROKER_OFFSET: Final = 13
    QUERY_CONSUMER_OFFSET: Final = 14
    UPDATE_CONSUMER_OFFSET: Final = 15
    UPDATE_AND_CREATE_TOPIC: Final = 17
    GET_ALL_TOPIC_CONFIG: Final = 21
    GET_TOPIC_CONFIG_LIST: Final = 22
    GET_TOPIC_NAME_LIST: Final = 23
    UPDATE_BROKER_CONFIG: Final = 25
    GET_BROKER_CONFIG: Final = 26
    TRIGGER_DELETE_FILES: Final = 27
    GET_BROKER_RUNTIME_INFO: Final = 28
    SEARCH_OFFSET_BY_TIMESTAMP: Final = 29
    GET_MAX_OFFSET: Final = 30
    GET_MIN_OFFSET: Final = 31
    GET_EARLIEST_MSG_STORETIME: Final = 32
    VIEW_MESSAGE_BY_ID: Final = 33
    HEART_BEAT: Final = 34
    UNREGISTER_CLIENT: Final = 35
    CONSUMER_SEND_MSG_BACK: Final = 36
    END_TRANSACTION: Final = 37
    GET_CONSUMER_LIST_BY_GROUP: Final = 38
    CHECK_TRANSACTION_STATE: Final = 39  # broker -> producer, oneway
    NOTIFY_CONSUMER_IDS_CHANGED: Final = 40  # broker -> consumer, oneway
    LOCK_BATCH_MQ: Final = 41
    UNLOCK_BATCH_MQ: Final = 42
    GET_ALL_CONSUMER_OFFSET: Final = 43
    GET_ALL_DELAY_OFFSET: Final = 45
    CHECK_CLIENT_CONFIG: Final = 46
    UPDATE_AND_CREATE_ACL_CONFIG: Final = 50
    DELETE_ACL_CONFIG: Final = 51
    GET_BROKER_CLUSTER_ACL_INFO: Final = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: Final = 53
    GET_BROKER_CLUSTER_ACL_CONFIG: Final = 54  # in 4.9.0 to 4.9.7, dropped in 4.9.8

    # nameserver
    PUT_KV_CONFIG: Final = 100
    GET_KV_CONFIG: Final = 101
    DELETE_KV_CONFIG: Final = 102
    REGISTER_BROKER: Final = 103
    UNREGISTER_BROKER: Final = 104
    GET_ROUTEINFO_BY_TOPIC: Final = 105
    GET_BROKER_CLUSTER_INFO: Final = 106

    # administration (broker, nameserver, and broker -> client)
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: Final = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG: Final = 201
    GET_TOPIC_STATS_INFO: Final = 202
    GET_CONSUMER_CONNECTION_LIST: Final = 203
    GET_PRODUCER_CONNECTION_LIST: Final = 204
    WIPE_WRITE_PERM_OF_BROKER: Final = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER: Final = 206
    DELETE_SUBSCRIPTIONGROUP: Final = 207
    GET_CONSUME_STATS: Final = 208
    SUSPEND_CONSUMER: Final = 209
    RESUME_CONSUMER: Final = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER: Final = 211
    RESET_CONSUMER_OFFSET_IN_BROKER: Final = 212
    ADJUST_CONSUMER_THREAD_POOL: Final = 213
    WHO_CONSUME_THE_MESSAGE: Final = 214
    DELETE_TOPIC_IN_BROKER: Final = 215
    DELETE_TOPIC_IN_NAMESRV: Final = 216
    GET_KVLIST_BY_NAMESPACE: Final = 219
    RESET_CONSUMER_CLIENT_OFFSET: Final = 220  # broker -> consumer, oneway
    GET_CONSUMER_STATUS_FROM_CLIENT: Final = 221  # broker -> consumer
    INVOKE_BROKER_TO_RESET_OFFSET: Final = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS: Final = 223
    GET_TOPICS_BY_CLUSTER: Final = 224

    QUERY_TOPIC_CONSUME_BY_WHO: Final = 300
    REGISTER_FILTER_SERVER: Final = 301
    REGISTER_MESSAGE_FILTER_CLASS: Final = 302
    QUERY_CONSUME_TIME_SPAN: Final = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS: Final = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER: Final = 305
    CLEAN_EXPIRED_CONSUMEQUEUE: Final = 306
    GET_CONSUMER_RUNNING_INFO: Final = 307  # admin -> broker, and broker -> consumer
    QUERY_CORRECTION_OFFSET: Final = 308
    CONSUME_MESSAGE_DIRECTLY: Final = 309  # admin -> broker, and broker -> consumer
    SEND_MESSAGE_V2: Final = 310
    GET_UNIT_TOPIC_LIST: Final = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST: Final = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: Final = 313
    CLONE_GROUP_OFFSET: Final = 314
    VIEW_BROKER_STATS_DATA: Final = 315
    CLEAN_UNUSED_TOPIC: Final = 316
    GET_BROKER_CONSUME_STATS: Final = 317
    UPDATE_NAMESRV_CONFIG: Final = 318
    GET_NAMESRV_CONFIG: Final = 319
    SEND_BATCH_MESSAGE: Final = 320
    QUERY_CONSUME_QUEUE: Final = 321
    QUERY_DATA_VERSION: Final = 322
    RESUME_CHECK_HALF_MESSAGE: Final = 323
    SEND_REPLY_MESSAGE: Final = 324
    SEND_REPLY_MESSAGE_V2: Final = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT: Final = 326  # broker -> requesting client
    ADD_WRITE_PERM_OF_BROKER: Final = 327  # since 4.9.2
    GET_ALL_PRODUCER_INFO: Final = 328  # since 4.9.4
    DELETE_EXPIRED_COMMITLOG: Final = 329  # since 4.9.4
    # ACL 2.0's users and policies (RocketMQ 5.3; mqadmin's user and acl commands).
    AUTH_CREATE_USER: Final = 3001
    AUTH_UPDATE_USER: Final = 3002
    AUTH_DELETE_USER: Final = 3003
    AUTH_GET_USER: Final = 3004
    AUTH_LIST_USER: Final = 3005
    AUTH_CREATE_ACL: Final = 3006
    AUTH_UPDATE_ACL: Final = 3007
    AUTH_DELETE_ACL: Final = 3008
    AUTH_GET_ACL: Final = 3009
    AUTH_LIST_ACL: Final = 3010
    # Pop consumption (RocketMQ 5): the broker picks the messages, hides them for an
    # invisible time and takes them back unless acknowledged. Above 32767: these go in
    # JSON headers only (the binary header holds the code in an int16, as in RocketMQ).
    POP_MESSAGE: Final = 200050
    ACK_MESSAGE: Final = 200051
    CHANGE_MESSAGE_INVISIBLETIME: Final = 200053
    BATCH_ACK_MESSAGE: Final = 200151

    NAMES: ClassVar[dict[int, str]]


RequestCode.NAMES = _names(RequestCode)


class RocketqRequestCode:
    """Request codes of rocketq's own calls, which RocketMQ has no code for: these are
    rocketq's own and unknown to RocketMQ (a stock broker answers them
    REQUEST_CODE_NOT_SUPPORTED). They start at 30000, far above RocketMQ's, and stay below
    32768: the ROCKETMQ binary header holds the code in an int16.

    Header fields are named in RocketMQ's camelCase style.
    """

    # Raft mode: hand leadership of the broker's Raft group to another member.
    # Header: ``group`` (the Raft group; blank: the broker's own), ``to`` (the member id).
    # -> resp: SUCCESS, no header, no body.
    TRANSFER_LEADER: Final = 30000
    # Store a copy of the message at a CommitLog offset (typically a dead letter) on
    # %RETRY%<group>, due at once. Header: ``group``, ``commitLogOffset``.
    # -> resp header: ``msgId`` (the copy's offset message id), ``queueOffset``,
    # ``commitLogOffset`` (where the copy was written).
    RESEND_MESSAGE: Final = 30001
    # A replica's copy of its master's (or Raft leader's) users and ACL policies, asked
    # with the inner credentials. No header. -> resp header ``version`` (the metadata's
    # version), body: the users and ACLs as JSON (auth/metadata.py's snapshot).
    GET_AUTH_METADATA: Final = 30002
    # A client that signs asks whether this connection may send its later requests
    # unsigned (a server with stateful authentication remembers the sender a signed
    # request verified). Signed or not (anyone may ask), no header. -> resp header
    # ``ttlSeconds``: how long the server remembers this connection's verified sender
    # ("0": sign every request), ``keyless`` ("true": meanwhile requests without any
    # AccessKey are that sender's; absent: they carry the AccessKey alone),
    # ``strongSignature`` ("accepted" or "required": the server takes rocketq's strong
    # signature, auth/strong_signature.py), ``signatureAudience`` (with auth on: the
    # Audience a strong signature names, drawn at the server's start) and
    # ``statefulSeconds`` (with stateful authentication: how long a sender is remembered
    # once a signed request verifies).
    AUTH_SESSION: Final = 30003
    # Raft mode: membership of the broker's Raft group, at run time (DLedger's
    # addPeer/removePeer; RocketMQ has no request code for them: its controller's codes are
    # about master/slave groups). Sent to the group's leader; another member answers
    # SERVICE_NOT_AVAILABLE (as to a send) naming the leader it knows, and a change it
    # cannot make SYSTEM_ERROR saying why. Header ``group`` (the Raft group; blank: the
    # broker's own), ``member`` (the member id) and, to add, ``address`` (its Raft
    # ``host:port``). -> resp: SUCCESS, header ``index`` (the change's raft entry).
    RAFT_ADD_MEMBER: Final = 30010
    RAFT_REMOVE_MEMBER: Final = 30011
    # Header ``group`` (optional). -> resp body: JSON, the group's members as this broker
    # sees them (on the leader with each member's match index and lag).
    RAFT_MEMBERS: Final = 30012
    # Messages of many topics to one broker in one request (rocketq's SDK, natural
    # batching, only to a broker whose HEART_BEAT answer has ``topicsBatch``). Header
    # as SEND_MESSAGE_V2's: ``a`` (producer group), ``c`` and ``d`` (the topic and queue
    # count a topic is auto-created from), ``g`` (born timestamp);
    # body: segments of (topic, queue id, RocketMQ batch entries), common/topics_batch.py.
    # -> resp: SUCCESS, body: each segment's result (stored: its offset message ids and
    # queue offset; refused: the error's code and remark).
    SEND_TOPICS_BATCH: Final = 30020

    NAMES: ClassVar[dict[int, str]]


RocketqRequestCode.NAMES = _names(RocketqRequestCode)


class ResponseCode:
    """``RemotingCommand.code`` of a response: RocketMQ's ``RemotingSysResponseCode`` (0-4)
    and ``ResponseCode`` (the rest)."""

    SUCCESS: Final = 0
    SYSTEM_ERROR: Final = 1
    SYSTEM_BUSY: Final = 2
    REQUEST_CODE_NOT_SUPPORTED: Final = 3
    TRANSACTION_FAILED: Final = 4

    FLUSH_DISK_TIMEOUT: Final = 10
    SLAVE_NOT_AVAILABLE: Final = 11
    FLUSH_SLAVE_TIMEOUT: Final = 12
    MESSAGE_ILLEGAL: Final = 13
    SERVICE_NOT_AVAILABLE: Final = 14
    VERSION_NOT_SUPPORTED: Final = 15
    NO_PERMISSION: Final = 16
    TOPIC_NOT_EXIST: Final = 17
    TOPIC_EXIST_ALREADY: Final = 18
    PULL_NOT_FOUND: Final = 19  # pull: no new message (PullStatus.NO_NEW_MSG)
    PULL_RETRY_IMMEDIATELY: Final = 20  # pull: nothing matched the filter (NO_MATCHED_MSG)
    PULL_OFFSET_MOVED: Final = 21  # pull: offset out of range (OFFSET_ILLEGAL)
    QUERY_NOT_FOUND: Final = 22
    SUBSCRIPTION_PARSE_FAILED: Final = 23
    SUBSCRIPTION_NOT_EXIST: Final = 24
    SUBSCRIPTION_NOT_LATEST: Final = 25
    SUBSCRIPTION_GROUP_NOT_EXIST: Final = 26
    FILTER_DATA_NOT_EXIST: Final = 27
    FILTER_DATA_NOT_LATEST: Final = 28

    TRANSACTION_SHOULD_COMMIT: Final = 200
    TRANSACTION_SHOULD_ROLLBACK: Final = 201
    TRANSACTION_STATE_UNKNOW: Final = 202  # sic: RocketMQ's spelling
    TRANSACTION_STATE_GROUP_WRONG: Final = 203
    NO_BUYER_ID: Final = 204
    NOT_IN_CURRENT_UNIT: Final = 205
    CONSUMER_NOT_ONLINE: Final = 206
    CONSUME_MSG_TIMEOUT: Final = 207
    NO_MESSAGE: Final = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED: Final = 209
    DELETE_ACL_CONFIG_FAILED: Final = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: Final = 211
    FLOW_CONTROL: Final = 215  # since 4.9.5

    NAMES: ClassVar[dict[int, str]]


ResponseCode.NAMES = _names(ResponseCode)


class LanguageCode:
    """The client language of a command: the code goes in the ROCKETMQ binary header (one
    byte), the name in the JSON header (``"language":"JAVA"``)."""

    JAVA: Final = 0
    CPP: Final = 1
    DOTNET: Final = 2
    PYTHON: Final = 3
    DELPHI: Final = 4
    ERLANG: Final = 5
    RUBY: Final = 6
    OTHER: Final = 7
    HTTP: Final = 8
    GO: Final = 9
    PHP: Final = 10
    OMS: Final = 11
    RUST: Final = 12  # since 4.9.4

    BY_CODE: ClassVar[dict[int, str]]
    BY_NAME: ClassVar[dict[str, int]]


LanguageCode.BY_CODE = _names(LanguageCode)
LanguageCode.BY_NAME = {name: code for code, name in LanguageCode.BY_CODE.items()}


class SerializeType:
    """How a command header is written; the code is the high byte of the header-length word,
    the name is ``serializeTypeCurrentRPC`` in a JSON header."""

    JSON: Final = 0
    ROCKETMQ: Final = 1

    BY_CODE: ClassVar[dict[int, str]]
    BY_NAME: ClassVar[dict[str, int]]


SerializeType.BY_CODE = _names(SerializeType)
SerializeType.BY_NAME = {name: code for code, name in SerializeType.BY_CODE.items()}


# The command's ``flag`` word: bit numbers as RocketMQ names them, and the masks.
RPC_TYPE: Final = 0  # bit set: the command is a response
RPC_ONEWAY: Final = 1  # bit set: a request that gets no response
RESPONSE_FLAG: Final = 1 << RPC_TYPE
ONEWAY_FLAG: Final = 1 << RPC_ONEWAY


class MessageSysFlag:
    """The ``sysFlag`` of a message: send headers, CommitLog records, pulled records."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x1 << 1
    # bits 2-3: the transaction type (mask TRANSACTION_ROLLBACK_TYPE)
    TRANSACTION_NOT_TYPE: Final = 0
    TRANSACTION_PREPARED_TYPE: Final = 0x1 << 2
    TRANSACTION_COMMIT_TYPE: Final = 0x2 << 2
    TRANSACTION_ROLLBACK_TYPE: Final = 0x3 << 2
    TRANSACTION_TYPE_MASK: Final = 0x3 << 2
    # the born host / store host in the record is IPv6 (16-byte address) instead of IPv4
    BORNHOST_V6_FLAG: Final = 0x1 << 4
    STOREHOSTADDRESS_V6_FLAG: Final = 0x1 << 5
    # since 4.9.4
    NEED_UNWRAP_FLAG: Final = 0x1 << 6
    INNER_BATCH_FLAG: Final = 0x1 << 7
    # bits 8-10, since 4.9.4: the codec of a COMPRESSED body; 0 (older clients) means zlib
    COMPRESSION_LZ4_TYPE: Final = 0x1 << 8
    COMPRESSION_ZSTD_TYPE: Final = 0x2 << 8
    COMPRESSION_ZLIB_TYPE: Final = 0x3 << 8
    COMPRESSION_TYPE_COMPARATOR: Final = 0x7 << 8


class PullSysFlag:
    """The ``sysFlag`` of a PULL_MESSAGE request header."""

    FLAG_COMMIT_OFFSET: Final = 0x1  # commitOffset in the header is to be stored
    FLAG_SUSPEND: Final = 0x1 << 1  # the broker may hold the pull (long polling)
    FLAG_SUBSCRIPTION: Final = 0x1 << 2  # subscription/expressionType in the header count
    FLAG_CLASS_FILTER: Final = 0x1 << 3
    FLAG_LITE_PULL_MESSAGE: Final = 0x1 << 4


class PermName:
    """The ``perm`` bits of a topic or a broker."""

    PERM_INHERIT: Final = 0x1
    PERM_WRITE: Final = 0x1 << 1
    PERM_READ: Final = 0x1 << 2
    PERM_PRIORITY: Final = 0x1 << 3


class TopicSysFlag:
    """The ``topicSysFlag`` of a topic config or route queue."""

    FLAG_UNIT: Final = 0x1
    FLAG_UNIT_SUB: Final = 0x1 << 1


class MQVersion:
    """Ordinals of RocketMQ's ``MQVersion.Version`` enum: the ``version`` field of a command.

    Only the ones 4.9's servers compare against, and the 4.9 releases."""

    V3_0_7_SNAPSHOT: Final = 28  # broker: oldest client sent RESET_CONSUMER_CLIENT_OFFSET
    V3_0_11: Final = 37  # nameserver: REGISTER_BROKER with filter servers and RegisterBrokerBody
    V3_1_8_SNAPSHOT: Final = 62  # broker: oldest client asked for running info / direct consume
    V3_4_9: Final = 121  # broker: maxReconsumeTimes in send headers is honoured
    V4_0_0: Final = 213
    V4_1_0_SNAPSHOT: Final = 232  # client: oldest broker it sends SQL92 subscriptions to
    V4_9_0: Final = 393
    V4_9_4: Final = 401  # nameserver: GET_ROUTEINFO_BY_TOPIC answers in standard JSON
    V4_9_8: Final = 409  # MQVersion.CURRENT_VERSION of 4.9.8


class RocketqVersion:
    """rocketq's ``version`` numbers, the one place they are defined.

    RocketMQ writes its release as the ordinal of ``MQVersion.Version`` (4.9.8 is 409) in
    every command's ``version`` field; brokers keep the one of a client's heartbeat and list
    it with the client's connections. rocketq's processes write their own release instead,
    so a connection list tells rocketq's SDK from RocketMQ's clients: ``BASE + major * 1000
    + minor * 10 + patch`` of the rocketq release (0.1.0 is 10010), for major releases up
    to 21, minor ones up to 99 and patches up to 9. The numbers lie far above RocketMQ's
    ordinals (below 700 in 5.x) and inside the int16 the binary header holds them in; a
    RocketMQ server reads any of them as a version newer than its own (``HIGHER_VERSION``),
    so every check a 4.9 server makes against a client's version (standard JSON routes from
    V4_9_4 on, running info from V3_1_8_SNAPSHOT on) passes.
    """

    BASE: Final = 10000
    # RocketMQ 4.x and 5.x: release M.m.p is 213 + 200 * (M - 4) + 20 * m + 2 * p, its
    # SNAPSHOT the ordinal before; HIGHER_VERSION follows V5_9_9 (611).
    _V4_0_0: Final = 213
    _HIGHER: Final = 612

    @staticmethod
    def of(release: str) -> int:
        """The number of a rocketq release ("0.1.0", "1.2.3.dev4": its first three parts)."""
        parts = [int(p) for p in re.findall(r"\d+", release)[:3]]
        major, minor, patch = [*parts, 0, 0, 0][:3]
        if minor > 99 or patch > 9 or major > 21:
            raise ValueError(
                f"rocketq release {release!r} has no version number (see RocketqVersion)"
            )
        return RocketqVersion.BASE + major * 1000 + minor * 10 + patch

    @staticmethod
    def describe(version: int) -> str:
        """A command's version for people: "rocketq 0.1.0", or RocketMQ's name ("V4_9_8",
        "V5_0_0_SNAPSHOT", "HIGHER_VERSION"), or the bare number for a 3.x client."""
        if version >= RocketqVersion.BASE:
            d = version - RocketqVersion.BASE
            return f"rocketq {d // 1000}.{d % 1000 // 10}.{d % 10}"
        if version >= RocketqVersion._HIGHER:
            return "HIGHER_VERSION"
        if version >= RocketqVersion._V4_0_0:
            release = version + (version - RocketqVersion._V4_0_0) % 2
            d = (release - RocketqVersion._V4_0_0) // 2
            name = f"V{4 + d // 100}_{d % 100 // 10}_{d % 10}"
            return name if release == version else name + "_SNAPSHOT"
        return _MQ_NAMES.get(version, str(version))

    CURRENT: ClassVar[int]


def _release() -> str:
    try:
        return _installed_version("rocketq")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0"


_MQ_NAMES: Final = {
    v: n for n, v in vars(MQVersion).items() if n.startswith("V") and isinstance(v, int)
}
# The version every command of this rocketq writes (cluster.remoting.command.VERSION).
RocketqVersion.CURRENT = RocketqVersion.of(_release())
