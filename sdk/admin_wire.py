"""The SDK's side of the admin requests, as pure functions: each admin request that
``sdk/admin.py`` makes, as RocketMQ 4.9's request (its code and header field names, or
rocketq's own code for RESEND_MESSAGE and TRANSFER_LEADER), and its answer read back into
frozen dataclasses with the snake_case attributes ``sdk/admin.py``'s callers read
(``queues``, ``consume_tps``, ``groups``, ``connections``, ``records``, ``table``...).
No I/O here.

Bodies are JSON as fastjson writes it: a map keyed by a MessageQueue has the queue as a
bare object key, queue ids and delay levels as map keys are bare numbers
(:mod:`rocketq.remoting.fastjson` reads both). A non-SUCCESS answer raises the
error class of its code with the broker's remark; a SUCCESS answer whose body is not the
shape RocketMQ gives raises :class:`~rocketq.common.exceptions.RocketqSystemError` naming it.

Two requests go on to one consumer client (the broker forwards them over the client's
connection): GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY; their answers are the
client's bodies (``sdk/running_info.py``, re-exported here).

Two reads have no RocketMQ request of their own: one group's config is
GET_ALL_SUBSCRIPTIONGROUP_CONFIG with the group picked out (:func:`parse_subscription_group`),
and a broker's tables are four requests (GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET,
GET_ALL_DELAY_OFFSET, GET_ALL_SUBSCRIPTIONGROUP_CONFIG), as RocketMQ's SlaveSynchronize
makes them. Those four live in the shared model (``rocketq.remoting.broker_tables``),
where the broker's slave sync can use them too (the broker may not import the SDK); they are
re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common.exceptions import QueryNotFoundError
from rocketq.remoting import fastjson
from rocketq.remoting.answer import (
    body_doc,
    check,
    header_int,
    int_field,
    malformed,
    object_field,
    text_field,
)
from rocketq.remoting.broker_tables import (
    ConsumerOffsetTable,
    DataVersion,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfigData,
    TopicConfigWrapper,
    all_consumer_offset_request,
    all_delay_offset_request,
    all_subscription_group_config_request,
    all_topic_config_request,
    data_version,
    parse_all_consumer_offset,
    parse_all_delay_offset,
    parse_all_subscription_group_config,
    parse_all_topic_config,
    subscription_group_doc,
)
from rocketq.remoting.codes import RequestCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk.running_info import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
    parse_direct_result_doc,
    parse_running_info_doc,
)
from rocketq.sdk.wire import SubscriptionData

__all__ = [
    "BrokerConfig", "ConsumeMessageDirectlyResult", "ConsumeStats", "ConsumeStatus",
    "ConsumerConnection", "ConsumerConnectionList", "ConsumerOffsetTable",
    "ConsumerRunningInfo", "DataVersion", "DelayOffsetTable", "GroupList", "ProcessQueueInfo",
    "QueryMessageResult", "QueueStats", "ResendResult", "ResetOffsetResult", "RuntimeInfo",
    "SubscriptionData", "SubscriptionGroupConfig", "SubscriptionGroupResult",
    "SubscriptionGroupWrapper", "TopicConfigData", "TopicConfigWrapper", "TopicStats",
    "ViewMessageResult", "all_consumer_offset_request", "all_delay_offset_request",
    "all_subscription_group_config_request", "all_topic_config_request",
    "broker_config_request", "broker_runtime_info_request", "check",
    "consume_message_directly_request", "consume_stats_request",
    "consumer_connection_list_request", "consumer_running_info_request", "delete_topic_request",
    "parse_all_consumer_offset", "parse_all_delay_offset",
    "parse_all_subscription_group_config", "parse_all_topic_config", "parse_broker_config",
    "parse_broker_runtime_info", "parse_consume_message_directly", "parse_consume_stats",
    "parse_consumer_connection_list", "parse_consumer_running_info", "parse_delete_topic",
    "parse_ok", "parse_query_message", "parse_query_topic_consume_by_who",
    "parse_resend_message", "parse_reset_offset_by_time", "parse_subscription_group",
    "parse_topic_stats", "parse_transfer_leader", "parse_update_and_create_topic",
    "parse_update_subscription_group", "parse_view_message", "query_message_request",
    "query_topic_consume_by_who_request", "resend_message_request",
    "reset_offset_by_time_request", "topic_stats_request", "transfer_leader_request",
    "update_and_create_topic_request", "update_subscription_group_request",
]  # fmt: skip

DEFAULT_TOPIC: Final = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
LONG_MAX: Final = 2**63 - 1  # the end of a query's time range when none is given (mqadmin's)
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG


# -- results ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of a topic's stats, a group's consume stats or an offset reset; what the
    answer does not carry is 0 (consume stats have no ``min_offset``, a reset only the new
    ``consumer_offset``)."""

    topic: str
    queue_id: int
    min_offset: int = 0
    max_offset: int = 0  # the next offset to be written (ConsumeStats' brokerOffset)
    last_update_timestamp: int = 0  # stats: last message's store time; consume: last consumed
    consumer_offset: int = 0
    broker_name: str = ""  # the MessageQueue key's brokerName


@dataclass(frozen=True, slots=True)
class TopicStats:
    queues: tuple[QueueStats, ...]


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    queues: tuple[QueueStats, ...]
    consume_tps: float


@dataclass(frozen=True, slots=True)
class ResetOffsetResult:
    queues: tuple[QueueStats, ...]  # consumer_offset: the group's offset now


@dataclass(frozen=True, slots=True)
class GroupList:
    groups: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscriptionGroupResult:
    config: SubscriptionGroupConfig


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """One online client of a group; the group's consume type, model, start point and
    subscriptions are the same for each (RocketMQ keeps them per group)."""

    client_id: str
    client_addr: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: tuple[SubscriptionData, ...]
    last_update_timestamp: int = 0  # not on the wire: RocketMQ does not send it
    language: str = ""
    version: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerConnectionList:
    connections: tuple[ConsumerConnection, ...]  # by client id


@dataclass(frozen=True, slots=True)
class QueryMessageResult:
    records: bytes  # the stored records, one after another (rocketq.common.record)
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(frozen=True, slots=True)
class ViewMessageResult:
    records: bytes  # the one stored record


@dataclass(frozen=True, slots=True)
class ResendResult:
    msg_id: str  # the copy's offset message id
    queue_offset: int
    wrote_offset: int  # the copy's CommitLog offset
    store_host: bytes  # 8 bytes (IPv4 + port) or 20 (IPv6 + port), from msg_id


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    table: dict[str, str]


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    table: dict[str, str]
    version: DataVersion = field(default_factory=DataVersion)


# -- reading answers ----------------------------------------------------------------------


def _queue(key: Any, what: str) -> tuple[str, str, int]:
    """A MessageQueue map key -> (topic, broker name, queue id)."""
    if not isinstance(key, fastjson.ObjectKey):
        raise malformed(what, f"is keyed by {key!r}, not by a MessageQueue object")
    topic, broker = key.get("topic"), key.get("brokerName")
    if not isinstance(topic, str) or not isinstance(broker, str):
        raise malformed(what, f"has a MessageQueue without topic or brokerName: {key!r}")
    return topic, broker, int_field(key, "queueId", what)


def _sorted(queues: list[QueueStats]) -> tuple[QueueStats, ...]:
    return tuple(sorted(queues, key=lambda q: (q.topic, q.broker_name, q.queue_id)))


def parse_ok(answer: RemotingCommand) -> None:
    """An answer with nothing in it but its code."""
    check(answer)


# -- topics -------------------------------------------------------------------------------


def update_and_create_topic_request(
    config: TopicConfigData, *, default_topic: str = DEFAULT_TOPIC
) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (CreateTopicRequestHeader)."""
    return RemotingCommand(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": config.topic_name,
            "defaultTopic": default_topic,
            "readQueueNums": str(config.read_queue_nums),
            "writeQueueNums": str(config.write_queue_nums),
            "perm": str(config.perm),
            "topicFilterType": config.topic_filter_type,
            "topicSysFlag": str(config.topic_sys_flag),
            "order": "true" if config.order else "false",
        },
    )


parse_update_and_create_topic = parse_ok


def delete_topic_request(topic: str) -> RemotingCommand:
    """DELETE_TOPIC_IN_BROKER (the nameservers are told apart)."""
    return RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})


parse_delete_topic = parse_ok


def topic_stats_request(topic: str) -> RemotingCommand:
    """GET_TOPIC_STATS_INFO."""
    return RemotingCommand(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})


def parse_topic_stats(answer: RemotingCommand) -> TopicStats:
    """TopicStatsTable: each queue's min and max offset and its last message's store time."""
    what = "topic stats"
    queues = []
    for key, doc in object_field(body_doc(answer, what), "offsetTable", what).items():
        topic, broker, qid = _queue(key, what)
        queues.append(
            QueueStats(
                topic,
                qid,
                min_offset=int_field(doc, "minOffset", what, 0),
                max_offset=int_field(doc, "maxOffset", what, 0),
                last_update_timestamp=int_field(doc, "lastUpdateTimestamp", what, 0),
                broker_name=broker,
            )
        )
    return TopicStats(_sorted(queues))


# -- subscription groups ------------------------------------------------------------------


def update_subscription_group_request(config: SubscriptionGroupConfig) -> RemotingCommand:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: no header, the config as its JSON body (bean
    fields in name order, as fastjson writes them)."""
    body = fastjson.dumps(subscription_group_doc(config))
    return RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)


parse_update_subscription_group = parse_ok


def parse_subscription_group(answer: RemotingCommand, group: str) -> SubscriptionGroupResult:
    """The one group's config out of GET_ALL_SUBSCRIPTIONGROUP_CONFIG's answer;
    QueryNotFoundError when the broker has none."""
    config = parse_all_subscription_group_config(answer).subscription_group_table.get(group)
    if config is None:
        raise QueryNotFoundError(f"no subscription group {group!r} on this broker")
    return SubscriptionGroupResult(config)


# -- consumption and offsets --------------------------------------------------------------


def consume_stats_request(group: str, topic: str = "") -> RemotingCommand:
    """GET_CONSUME_STATS; no topic: every topic the group has offsets on or subscribes."""
    ext = {"consumerGroup": group}
    if topic:
        ext["topic"] = topic
    return RemotingCommand(RequestCode.GET_CONSUME_STATS, ext)


def parse_consume_stats(answer: RemotingCommand) -> ConsumeStats:
    """ConsumeStats: per read queue the broker's max offset (``max_offset``), the group's
    offset and the store time of the last message it consumed."""
    what = "consume stats"
    doc = body_doc(answer, what)
    queues = []
    for key, q in object_field(doc, "offsetTable", what).items():
        topic, broker, qid = _queue(key, what)
        queues.append(
            QueueStats(
                topic,
                qid,
                max_offset=int_field(q, "brokerOffset", what, 0),
                last_update_timestamp=int_field(q, "lastTimestamp", what, 0),
                consumer_offset=int_field(q, "consumerOffset", what, 0),
                broker_name=broker,
            )
        )
    tps = doc.get("consumeTps", 0.0)
    if isinstance(tps, bool) or not isinstance(tps, int | float):
        raise malformed(what, f"has consumeTps={tps!r}, not a number")
    return ConsumeStats(_sorted(queues), float(tps))


def reset_offset_by_time_request(
    group: str, topic: str, timestamp: int, *, force: bool = True
) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET (ResetOffsetRequestHeader): each read queue's offset at
    ``timestamp`` (-1: its end) becomes the group's; without ``force`` a group offset
    already behind it is kept."""
    return RemotingCommand(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        {
            "topic": topic,
            "group": group,
            "timestamp": str(timestamp),
            "isForce": "true" if force else "false",
        },
    )


def parse_reset_offset_by_time(answer: RemotingCommand) -> ResetOffsetResult:
    """ResetOffsetBody: MessageQueue -> the group's offset now."""
    what = "reset offset"
    queues = []
    for key, offset in object_field(body_doc(answer, what), "offsetTable", what).items():
        topic, broker, qid = _queue(key, what)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise malformed(what, f"has offset {offset!r} for queue {qid}, not a whole number")
        queues.append(QueueStats(topic, qid, consumer_offset=offset, broker_name=broker))
    return ResetOffsetResult(_sorted(queues))


def query_topic_consume_by_who_request(topic: str) -> RemotingCommand:
    """QUERY_TOPIC_CONSUME_BY_WHO."""
    return RemotingCommand(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})


def parse_query_topic_consume_by_who(answer: RemotingCommand) -> GroupList:
    """GroupList: the groups with offsets on the topic or online subscribing it, sorted."""
    what = "consumed-by-who"
    groups = body_doc(answer, what).get("groupList") or []
    if not isinstance(groups, list):
        raise malformed(what, "has a groupList that is not an array")
    return GroupList(tuple(sorted(str(g) for g in groups)))


def consumer_connection_list_request(group: str) -> RemotingCommand:
    """GET_CONSUMER_CONNECTION_LIST."""
    return RemotingCommand(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})


def _subscription(topic: str, doc: Any, what: str) -> SubscriptionData:
    if not isinstance(doc, dict):
        raise malformed(what, f"has a subscription to {topic!r} that is not an object")
    return SubscriptionData(
        text_field(doc, "topic", topic),
        text_field(doc, "subString", "*"),
        text_field(doc, "expressionType", "TAG"),
        int_field(doc, "subVersion", what, 0),
    )


def parse_consumer_connection_list(answer: RemotingCommand) -> ConsumerConnectionList:
    """ConsumerConnection: one entry per online client, each with the group's consume type,
    model, start point and subscriptions (by topic). An enum the clients did not state is
    absent from the body and "" here."""
    what = "consumer connection"
    doc = body_doc(answer, what)
    subs = tuple(
        _subscription(str(t), s, what)
        for t, s in sorted(object_field(doc, "subscriptionTable", what).items())
    )
    conns = doc.get("connectionSet") or []
    if not isinstance(conns, list) or not all(isinstance(c, dict) for c in conns):
        raise malformed(what, "has a connectionSet that is not an array of objects")
    out = [
        ConsumerConnection(
            text_field(c, "clientId"),
            text_field(c, "clientAddr"),
            text_field(doc, "consumeType"),
            text_field(doc, "messageModel"),
            text_field(doc, "consumeFromWhere"),
            subs,
            language=text_field(c, "language"),
            version=int_field(c, "version", what, 0),
        )
        for c in conns
    ]
    return ConsumerConnectionList(tuple(sorted(out, key=lambda c: c.client_id)))


# -- one consumer client, through the broker ------------------------------------------------


def consumer_running_info_request(
    group: str, client_id: str, *, jstack: bool = False
) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO (GetConsumerRunningInfoRequestHeader)."""
    return RemotingCommand(
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        {
            "consumerGroup": group,
            "clientId": client_id,
            "jstackEnable": "true" if jstack else "false",
        },
    )


def parse_consumer_running_info(answer: RemotingCommand) -> ConsumerRunningInfo:
    """The client's ConsumerRunningInfo, or the error of the broker (not online, timed
    out) or of the client (not a consumer of the group)."""
    what = "consumer running info"
    return parse_running_info_doc(body_doc(answer, what), what)


def consume_message_directly_request(group: str, client_id: str, msg_id: str) -> RemotingCommand:
    """CONSUME_MESSAGE_DIRECTLY (ConsumeMessageDirectlyResultRequestHeader) to the broker
    that holds the message ``msg_id`` (an offset id) names; it adds ``brokerName`` and the
    stored message."""
    return RemotingCommand(
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        {"consumerGroup": group, "clientId": client_id, "msgId": msg_id},
    )


def parse_consume_message_directly(answer: RemotingCommand) -> ConsumeMessageDirectlyResult:
    what = "consume message directly"
    return parse_direct_result_doc(body_doc(answer, what), what)


# -- messages -----------------------------------------------------------------------------


def query_message_request(
    topic: str,
    key: str,
    *,
    max_num: int = 32,
    begin_timestamp: int = 0,
    end_timestamp: int = LONG_MAX,
    unique_key: bool = False,
) -> RemotingCommand:
    """QUERY_MESSAGE by a key in KEYS, or (``unique_key``) by a message's UNIQ_KEY."""
    return RemotingCommand(
        RequestCode.QUERY_MESSAGE,
        {
            "topic": topic,
            "key": key,
            "maxNum": str(max_num),
            "beginTimestamp": str(begin_timestamp),
            "endTimestamp": str(end_timestamp),
            UNIQUE_KEY_QUERY: "true" if unique_key else "false",
        },
    )


def parse_query_message(answer: RemotingCommand) -> QueryMessageResult:
    """The records found (QUERY_NOT_FOUND: none) and how far the broker's index reaches."""
    check(answer)
    what = "query message"
    return QueryMessageResult(
        bytes(answer.body or b""),
        header_int(answer, "indexLastUpdateTimestamp", what),
        header_int(answer, "indexLastUpdatePhyoffset", what),
    )


def view_message_request(commit_log_offset: int) -> RemotingCommand:
    """VIEW_MESSAGE_BY_ID: the record at a CommitLog offset (from an offset message id)."""
    return RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(commit_log_offset)})


def parse_view_message(answer: RemotingCommand) -> ViewMessageResult:
    check(answer)
    if not answer.body:
        raise malformed("view message", "has no record")
    return ViewMessageResult(bytes(answer.body))


def resend_message_request(group: str, commit_log_offset: int) -> RemotingCommand:
    """rocketq's RESEND_MESSAGE: a copy of the stored message on %RETRY%<group>."""
    return RemotingCommand(
        RocketqRequestCode.RESEND_MESSAGE,
        {"group": group, "commitLogOffset": str(commit_log_offset)},
    )


def parse_resend_message(answer: RemotingCommand) -> ResendResult:
    check(answer)
    what = "resend message"
    msg_id = (answer.ext or {}).get("msgId") or ""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raw = b""
    if len(raw) not in (16, 28):
        raise malformed(what, f"has msgId={msg_id!r}, not an offset message id")
    return ResendResult(
        msg_id,
        header_int(answer, "queueOffset", what),
        header_int(answer, "commitLogOffset", what),
        raw[:-8],
    )


# -- the broker ---------------------------------------------------------------------------


def broker_runtime_info_request() -> RemotingCommand:
    """GET_BROKER_RUNTIME_INFO."""
    return RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO)


def parse_broker_runtime_info(answer: RemotingCommand) -> RuntimeInfo:
    """KVTable: the broker's runtime figures, every value a string."""
    what = "runtime info"
    table = object_field(body_doc(answer, what), "table", what)
    return RuntimeInfo({str(k): "" if v is None else str(v) for k, v in table.items()})


def broker_config_request() -> RemotingCommand:
    """GET_BROKER_CONFIG."""
    return RemotingCommand(RequestCode.GET_BROKER_CONFIG)


def parse_broker_config(answer: RemotingCommand) -> BrokerConfig:
    """A properties text of ``key=value`` lines (MixAll.properties2String: values as they
    are, unescaped) and the config's DataVersion in the header's ``version``."""
    check(answer)
    what = "broker config"
    try:
        text = bytes(answer.body or b"").decode()
    except UnicodeDecodeError as exc:
        raise malformed(what, f"is not UTF-8: {exc}") from None
    table = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        table[key.strip()] = value
    version = (answer.ext or {}).get("version")
    if not version:
        return BrokerConfig(table)
    try:
        doc = fastjson.loads(version)
    except ValueError as exc:
        raise malformed(what, f"header's version is not JSON: {exc}") from None
    return BrokerConfig(table, data_version(doc, what))


def transfer_leader_request(to: str, group: str = "") -> RemotingCommand:
    """rocketq's TRANSFER_LEADER: Raft leadership of ``group`` (blank: the broker's own) to
    member ``to``."""
    ext = {"to": to}
    if group:
        ext["group"] = group
    return RemotingCommand(RocketqRequestCode.TRANSFER_LEADER, ext)


parse_transfer_leader = parse_ok
