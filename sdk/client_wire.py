"""The SDK's side of what a client asks a broker besides sends, pulls and heartbeats, and
of what a broker tells or asks a client, as pure functions: RocketMQ 4.9's request codes and
header field names (ConsumerManageProcessor, ClientManageProcessor, the lock and send-back
requests, END_TRANSACTION), the three notices a broker sends over a client's connection
(NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET, CHECK_TRANSACTION_STATE) read
into small frozen dataclasses, and the two requests a broker forwards to a consumer for an
admin (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY: RocketMQ's
ClientRemotingProcessor) read, and answered. No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common.message import MessageQueue
from rocketq.common.record import record_properties
from rocketq.remoting import fastjson
from rocketq.remoting.answer import body_doc, check, header_int, int_field, malformed
from rocketq.remoting.codes import MessageSysFlag, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk.running_info import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    direct_result_body,
    running_info_body,
)

# END_TRANSACTION's commitOrRollback: MessageSysFlag's transaction types.
TRANSACTION_UNKNOWN: Final = MessageSysFlag.TRANSACTION_NOT_TYPE
TRANSACTION_COMMIT: Final = MessageSysFlag.TRANSACTION_COMMIT_TYPE
TRANSACTION_ROLLBACK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


def _queue_request(code: int, topic: str, queue_id: int, **more: str) -> RemotingCommand:
    return RemotingCommand(code, {"topic": topic, "queueId": str(queue_id), **more})


# -- offsets and queue ends ---------------------------------------------------------------


def query_offset_request(group: str, topic: str, queue_id: int) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET (QueryConsumerOffsetRequestHeader)."""
    return _queue_request(RequestCode.QUERY_CONSUMER_OFFSET, topic, queue_id, consumerGroup=group)


def update_offset_request(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    """UPDATE_CONSUMER_OFFSET (UpdateConsumerOffsetRequestHeader)."""
    return _queue_request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        topic,
        queue_id,
        consumerGroup=group,
        commitOffset=str(offset),
    )


def max_offset_request(topic: str, queue_id: int) -> RemotingCommand:
    return _queue_request(RequestCode.GET_MAX_OFFSET, topic, queue_id)


def min_offset_request(topic: str, queue_id: int) -> RemotingCommand:
    return _queue_request(RequestCode.GET_MIN_OFFSET, topic, queue_id)


def search_offset_request(topic: str, queue_id: int, timestamp_ms: int) -> RemotingCommand:
    return _queue_request(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic, queue_id, timestamp=str(timestamp_ms)
    )


def parse_offset(answer: RemotingCommand, what: str = "offset") -> int:
    """The ``offset`` of a SUCCESS answer (query, max, min and search answer alike)."""
    check(answer)
    return header_int(answer, "offset", what)


def parse_ok(answer: RemotingCommand) -> None:
    check(answer)


# -- group members, unregistering ----------------------------------------------------------


def consumer_list_request(group: str) -> RemotingCommand:
    return RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})


def parse_consumer_list(answer: RemotingCommand) -> list[str]:
    doc = body_doc(answer, "consumer list")
    ids = doc.get("consumerIdList") or []
    if not isinstance(ids, list):
        raise malformed("consumer list", "has a consumerIdList that is not a list")
    return [str(i) for i in ids]


def unregister_request(
    client_id: str, producer_group: str = "", consumer_group: str = ""
) -> RemotingCommand:
    """UNREGISTER_CLIENT (UnregisterClientRequestHeader)."""
    ext = {"clientID": client_id}
    if producer_group:
        ext["producerGroup"] = producer_group
    if consumer_group:
        ext["consumerGroup"] = consumer_group
    return RemotingCommand(RequestCode.UNREGISTER_CLIENT, ext)


# -- queue locks (orderly consumers) ---------------------------------------------------------


def _lock_body(group: str, client_id: str, queues: Iterable[MessageQueue]) -> bytes:
    return fastjson.dumps(
        {
            "clientId": client_id,
            "consumerGroup": group,
            "mqSet": [
                {"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic}
                for q in queues
            ],
        }
    )


def lock_batch_request(
    group: str, client_id: str, queues: Iterable[MessageQueue]
) -> RemotingCommand:
    """LOCK_BATCH_MQ with its LockBatchRequestBody."""
    return RemotingCommand(RequestCode.LOCK_BATCH_MQ, None, _lock_body(group, client_id, queues))


def unlock_batch_request(
    group: str, client_id: str, queues: Iterable[MessageQueue]
) -> RemotingCommand:
    """UNLOCK_BATCH_MQ with its UnlockBatchRequestBody."""
    return RemotingCommand(RequestCode.UNLOCK_BATCH_MQ, None, _lock_body(group, client_id, queues))


def parse_lock_batch(answer: RemotingCommand) -> set[tuple[str, int]]:
    """The (topic, queue id) pairs the broker locked for us (LockBatchResponseBody)."""
    doc = body_doc(answer, "lock")
    held = doc.get("lockOKMQSet") or []
    if not isinstance(held, list):
        raise malformed("lock", "has a lockOKMQSet that is not a list")
    out = set()
    for q in held:
        if not isinstance(q, dict) or not isinstance(q.get("topic"), str):
            raise malformed("lock", f"has {q!r} in lockOKMQSet, not a MessageQueue")
        out.add((q["topic"], int_field(q, "queueId", "lock")))
    return out


# -- giving a message back, ending a transaction ---------------------------------------------


def send_back_request(
    group: str,
    commit_log_offset: int,
    *,
    delay_level: int,
    origin_msg_id: str,
    origin_topic: str,
    max_reconsume_times: int,
) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK (ConsumerSendMsgBackRequestHeader)."""
    return RemotingCommand(
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {
            "offset": str(commit_log_offset),
            "group": group,
            "delayLevel": str(delay_level),
            "originMsgId": origin_msg_id,
            "originTopic": origin_topic,
            "unitMode": "false",
            "maxReconsumeTimes": str(max_reconsume_times),
        },
    )


def end_transaction_request(
    producer_group: str,
    *,
    commit_log_offset: int,
    tran_state_table_offset: int,
    msg_id: str,
    transaction_id: str,
    commit_or_rollback: int,
    from_transaction_check: bool,
) -> RemotingCommand:
    """END_TRANSACTION (EndTransactionRequestHeader); ``commit_or_rollback`` is one of
    TRANSACTION_UNKNOWN, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK."""
    return RemotingCommand(
        RequestCode.END_TRANSACTION,
        {
            "producerGroup": producer_group,
            "tranStateTableOffset": str(tran_state_table_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(commit_or_rollback),
            "fromTransactionCheck": "true" if from_transaction_check else "false",
            "msgId": msg_id,
            "transactionId": transaction_id,
        },
    )


# -- what a broker tells a client ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupChanged:
    """NOTIFY_CONSUMER_IDS_CHANGED: the group's members changed; rebalance now."""

    group: str


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """RESET_CONSUMER_CLIENT_OFFSET: the group's offsets of the topic were reset; the
    broker's new offsets by (broker name, queue id)."""

    group: str
    topic: str
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TransactionCheck:
    """CHECK_TRANSACTION_STATE: how did this half message's transaction end? ``group`` is
    the producer group the half message names (its PGROUP property)."""

    group: str
    commit_log_offset: int
    tran_state_table_offset: int
    msg_id: str
    transaction_id: str
    record: bytes  # the half message as stored


Notice = GroupChanged | OffsetReset | TransactionCheck
NOTICE_CODES: Final = (
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
    RequestCode.CHECK_TRANSACTION_STATE,
)


def _ext_int(ext: dict[str, str], key: str, what: str) -> int:
    try:
        return int(ext[key])
    except (KeyError, ValueError):
        raise malformed(what, f"has {key}={ext.get(key)!r}, not a whole number") from None


def parse_notice(cmd: RemotingCommand) -> Notice:
    """A broker's notice; RocketqSystemError when it is not the shape RocketMQ gives."""
    ext = cmd.ext or {}
    if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
        return GroupChanged(ext.get("consumerGroup", ""))
    if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
        offsets: dict[tuple[str, int], int] = {}
        if cmd.body:
            try:
                doc: Any = fastjson.loads(bytes(cmd.body))
            except ValueError as exc:
                raise malformed("offset reset", f"is not JSON: {exc}") from None
            table = doc.get("offsetTable") if isinstance(doc, dict) else None
            for key, offset in (table or {}).items():
                if not isinstance(key, fastjson.ObjectKey | dict) or not isinstance(offset, int):
                    raise malformed("offset reset", f"has {key!r}: {offset!r} in its offsetTable")
                name = key.get("brokerName")
                offsets[(str(name), int_field(key, "queueId", "offset reset"))] = offset
        return OffsetReset(ext.get("group", ""), ext.get("topic", ""), offsets)
    if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
        what = "transaction check"
        record = bytes(cmd.body or b"")
        props = record_properties(record) if record else {}
        return TransactionCheck(
            props.get("PGROUP", ""),
            _ext_int(ext, "commitLogOffset", what),
            _ext_int(ext, "tranStateTableOffset", what),
            ext.get("msgId", ""),
            ext.get("transactionId", "") or props.get("UNIQ_KEY", ""),
            record,
        )
    raise malformed("notice", f"has code {cmd.code}, not a notice a client handles")


# -- what a broker asks a consumer for an admin ----------------------------------------------


@dataclass(frozen=True, slots=True)
class RunningInfoRequest:
    """GET_CONSUMER_RUNNING_INFO (GetConsumerRunningInfoRequestHeader): the group's
    running info, with a dump of the process's threads and tasks when ``jstack``."""

    group: str
    client_id: str
    jstack: bool


@dataclass(frozen=True, slots=True)
class DirectConsumeRequest:
    """CONSUME_MESSAGE_DIRECTLY (ConsumeMessageDirectlyResultRequestHeader): run the
    group's listener on the stored message the broker put in the body (``record``), read
    from broker ``broker_name`` by its offset id ``msg_id``."""

    group: str
    client_id: str
    msg_id: str
    broker_name: str
    record: bytes


ConsumerRequest = RunningInfoRequest | DirectConsumeRequest
CONSUMER_REQUEST_CODES: Final = (
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
)


def parse_consumer_request(cmd: RemotingCommand) -> ConsumerRequest:
    """What a broker asks; RocketqSystemError when it is not the shape RocketMQ gives."""
    ext = cmd.ext or {}
    group = ext.get("consumerGroup", "")
    if not group:
        raise malformed("consumer request", f"{cmd.code} has no consumerGroup")
    if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
        jstack = ext.get("jstackEnable", "false").strip().lower() == "true"
        return RunningInfoRequest(group, ext.get("clientId", ""), jstack)
    if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
        if not cmd.body:
            raise malformed("consume-directly request", "has no message in its body")
        return DirectConsumeRequest(
            group,
            ext.get("clientId", ""),
            ext.get("msgId", ""),
            ext.get("brokerName", ""),
            bytes(cmd.body),
        )
    raise malformed("consumer request", f"has code {cmd.code}, not one a consumer answers")


def running_info_answer(cmd: RemotingCommand, info: ConsumerRunningInfo) -> RemotingCommand:
    """SUCCESS with the ConsumerRunningInfo body."""
    return cmd.response(ResponseCode.SUCCESS, None, running_info_body(info))


def direct_result_answer(
    cmd: RemotingCommand, result: ConsumeMessageDirectlyResult
) -> RemotingCommand:
    """SUCCESS with the ConsumeMessageDirectlyResult body."""
    return cmd.response(ResponseCode.SUCCESS, None, direct_result_body(result))


def group_not_here_answer(cmd: RemotingCommand, group: str, client_id: str) -> RemotingCommand:
    """SYSTEM_ERROR, as RocketMQ's client answers for a group it has no consumer of."""
    return cmd.response(
        ResponseCode.SYSTEM_ERROR,
        remark=f"The Consumer Group <{group}> not exist in this consumer: client {client_id} "
        "consumes for another group; list the group's clients with "
        f"`rocketq admin consumer-connection -g {group}`",
    )


def no_consumer_answer(cmd: RemotingCommand, client_id: str) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED: a client with no consumer in it (a producer, an admin)
    has no running info and no listener."""
    name = RequestCode.NAMES.get(cmd.code, str(cmd.code))
    group = (cmd.ext or {}).get("consumerGroup", "")
    return cmd.response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        remark=f"client {client_id} has no consumer (of group {group or '?'}) to answer {name}; "
        "it is a producer or an admin client",
    )
