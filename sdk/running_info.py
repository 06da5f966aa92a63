"""What a consumer answers when a broker forwards it an admin's request: its running info
(GET_CONSUMER_RUNNING_INFO: RocketMQ's ConsumerRunningInfo) and the outcome of running its
listener on one message (CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResult), as
frozen dataclasses, written and read as RocketMQ 4.9's fastjson has them. The consumer
writes them (``sdk/client_wire.py``), an admin reads them (``sdk/admin_wire.py``).

fastjson writes a bean's fields in name order and leaves null ones out; ``mqTable`` is
keyed by bare MessageQueue objects, ``subscriptionSet`` is a TreeSet of SubscriptionData
(ordered by ``topic@subString``), ``statusTable`` a TreeMap by topic. Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common.message import MessageQueue
from rocketq.remoting import fastjson
from rocketq.remoting.answer import bool_field, int_field, malformed, text_field
from rocketq.sdk.wire import SubscriptionData, _subscription_doc

# ConsumerRunningInfo's property names (besides the consumer's settings by their names).
PROP_NAMESERVER_ADDR: Final = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE: Final = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY: Final = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE: Final = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION: Final = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP: Final = "PROP_CONSUMER_START_TIMESTAMP"

# CMResult: how the listener took a message consumed directly.
CR_SUCCESS: Final = "CR_SUCCESS"
CR_LATER: Final = "CR_LATER"
CR_ROLLBACK: Final = "CR_ROLLBACK"
CR_COMMIT: Final = "CR_COMMIT"
CR_THROW_EXCEPTION: Final = "CR_THROW_EXCEPTION"
CR_RETURN_NULL: Final = "CR_RETURN_NULL"
CM_RESULTS: Final = (
    CR_SUCCESS,
    CR_LATER,
    CR_ROLLBACK,
    CR_COMMIT,
    CR_THROW_EXCEPTION,
    CR_RETURN_NULL,
)


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo:
    """One owned queue as the consumer holds it: the offset it would commit, the messages
    pulled and not yet consumed (``cached_*``), the batch an orderly consumer is consuming
    now (``transaction_*``, RocketMQ's name), its lock, and when it last pulled and
    consumed (epoch ms; 0: never)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    dropped: bool = False  # "droped" on the wire (sic)
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumeStatus:
    """A topic's figures over the last minute: average pull and consume times (ms),
    messages pulled, consumed and failed per second; failed messages over the last hour."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """A consumer's settings and state: ``properties`` (its settings by RocketMQ's names and
    the PROP_* figures), its subscriptions, every queue it owns, each subscribed topic's
    figures, and a dump of its threads and tasks when asked for (``jstack``)."""

    properties: dict[str, str] = field(default_factory=dict)
    subscriptions: tuple[SubscriptionData, ...] = ()
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    @property
    def consume_type(self) -> str:
        """CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)."""
        return self.properties.get(PROP_CONSUME_TYPE, "")

    @property
    def orderly(self) -> bool:
        return self.properties.get(PROP_CONSUME_ORDERLY, "false").lower() == "true"


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult:
    """How the listener took one message: ``consume_result`` is a CMResult name (CR_SUCCESS,
    CR_LATER, ...; None where RocketMQ's is null), ``remark`` the exception when it raised,
    ``spent_time_mills`` how long it ran (ms). ``order``: an orderly listener."""

    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None
    remark: str | None = None
    spent_time_mills: int = 0


# -- writing ----------------------------------------------------------------------------


def _queue_key(mq: MessageQueue) -> fastjson.ObjectKey:
    return fastjson.ObjectKey.of(
        {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}
    )


def _process_queue_doc(q: ProcessQueueInfo) -> dict[str, Any]:
    return {
        "cachedMsgCount": q.cached_msg_count,
        "cachedMsgMaxOffset": q.cached_msg_max_offset,
        "cachedMsgMinOffset": q.cached_msg_min_offset,
        "cachedMsgSizeInMiB": q.cached_msg_size_in_mib,
        "commitOffset": q.commit_offset,
        "droped": q.dropped,
        "lastConsumeTimestamp": q.last_consume_timestamp,
        "lastLockTimestamp": q.last_lock_timestamp,
        "lastPullTimestamp": q.last_pull_timestamp,
        "locked": q.locked,
        "transactionMsgCount": q.transaction_msg_count,
        "transactionMsgMaxOffset": q.transaction_msg_max_offset,
        "transactionMsgMinOffset": q.transaction_msg_min_offset,
        "tryUnlockTimes": q.try_unlock_times,
    }


def _status_doc(s: ConsumeStatus) -> dict[str, Any]:
    return {
        "consumeFailedMsgs": s.consume_failed_msgs,
        "consumeFailedTPS": float(s.consume_failed_tps),
        "consumeOKTPS": float(s.consume_ok_tps),
        "consumeRT": float(s.consume_rt),
        "pullRT": float(s.pull_rt),
        "pullTPS": float(s.pull_tps),
    }


def running_info_body(info: ConsumerRunningInfo) -> bytes:
    """ConsumerRunningInfo's JSON."""
    doc: dict[str, Any] = {}
    if info.jstack is not None:
        doc["jstack"] = info.jstack
    doc["mqTable"] = {
        _queue_key(mq): _process_queue_doc(q) for mq, q in sorted(info.mq_table.items())
    }
    doc["properties"] = dict(sorted(info.properties.items()))
    doc["statusTable"] = {t: _status_doc(s) for t, s in sorted(info.status_table.items())}
    subs = sorted(info.subscriptions, key=lambda s: f"{s.topic}@{s.expression}")
    doc["subscriptionSet"] = [_subscription_doc(s) for s in subs]
    return fastjson.dumps(doc)


def direct_result_body(result: ConsumeMessageDirectlyResult) -> bytes:
    """ConsumeMessageDirectlyResult's JSON."""
    doc: dict[str, Any] = {"autoCommit": result.auto_commit}
    if result.consume_result is not None:
        doc["consumeResult"] = result.consume_result
    doc["order"] = result.order
    if result.remark is not None:
        doc["remark"] = result.remark
    doc["spentTimeMills"] = result.spent_time_mills
    return fastjson.dumps(doc)


# -- reading ----------------------------------------------------------------------------


def _number(doc: dict[Any, Any], key: str, what: str) -> float:
    value = doc.get(key, 0.0)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise malformed(what, f"has {key}={value!r}, not a number")
    return float(value)


def _object(value: Any, what: str, name: str) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise malformed(what, f"has a {name} that is not an object")
    return value


def _subscription(doc: Any, what: str) -> SubscriptionData:
    if not isinstance(doc, dict):
        raise malformed(what, f"has {doc!r} in its subscriptionSet, not a SubscriptionData")
    return SubscriptionData(
        text_field(doc, "topic"),
        text_field(doc, "subString", "*"),
        text_field(doc, "expressionType", "TAG"),
        int_field(doc, "subVersion", what, 0),
    )


def _process_queue(doc: Any, what: str) -> ProcessQueueInfo:
    q = _object(doc, what, "ProcessQueueInfo")

    def n(key: str) -> int:
        return int_field(q, key, what, 0)

    return ProcessQueueInfo(
        commit_offset=n("commitOffset"),
        cached_msg_min_offset=n("cachedMsgMinOffset"),
        cached_msg_max_offset=n("cachedMsgMaxOffset"),
        cached_msg_count=n("cachedMsgCount"),
        cached_msg_size_in_mib=n("cachedMsgSizeInMiB"),
        transaction_msg_min_offset=n("transactionMsgMinOffset"),
        transaction_msg_max_offset=n("transactionMsgMaxOffset"),
        transaction_msg_count=n("transactionMsgCount"),
        locked=bool_field(q, "locked", what, False),
        try_unlock_times=n("tryUnlockTimes"),
        last_lock_timestamp=n("lastLockTimestamp"),
        dropped=bool_field(q, "droped", what, False),
        last_pull_timestamp=n("lastPullTimestamp"),
        last_consume_timestamp=n("lastConsumeTimestamp"),
    )


def _status(doc: Any, what: str) -> ConsumeStatus:
    s = _object(doc, what, "ConsumeStatus")
    return ConsumeStatus(
        pull_rt=_number(s, "pullRT", what),
        pull_tps=_number(s, "pullTPS", what),
        consume_rt=_number(s, "consumeRT", what),
        consume_ok_tps=_number(s, "consumeOKTPS", what),
        consume_failed_tps=_number(s, "consumeFailedTPS", what),
        consume_failed_msgs=int_field(s, "consumeFailedMsgs", what, 0),
    )


def parse_running_info_doc(doc: dict[Any, Any], what: str) -> ConsumerRunningInfo:
    """ConsumerRunningInfo from its JSON object (as :func:`fastjson.loads` reads it)."""
    mq_table = {}
    for key, value in _object(doc.get("mqTable"), what, "mqTable").items():
        if not isinstance(key, fastjson.ObjectKey):
            raise malformed(what, f"has mqTable keyed by {key!r}, not by a MessageQueue object")
        topic, broker = key.get("topic"), key.get("brokerName")
        if not isinstance(topic, str) or not isinstance(broker, str):
            raise malformed(what, f"has a MessageQueue without topic or brokerName: {key!r}")
        mq = MessageQueue(topic, broker, int_field(key, "queueId", what))
        mq_table[mq] = _process_queue(value, what)
    subs = doc.get("subscriptionSet") or []
    if not isinstance(subs, list):
        raise malformed(what, "has a subscriptionSet that is not an array")
    jstack = doc.get("jstack")
    return ConsumerRunningInfo(
        properties={
            str(k): "" if v is None else str(v)
            for k, v in _object(doc.get("properties"), what, "properties").items()
        },
        subscriptions=tuple(_subscription(s, what) for s in subs),
        mq_table=dict(sorted(mq_table.items())),
        status_table={
            str(t): _status(s, what)
            for t, s in sorted(_object(doc.get("statusTable"), what, "statusTable").items())
        },
        jstack=None if jstack is None else str(jstack),
    )


def parse_direct_result_doc(doc: dict[Any, Any], what: str) -> ConsumeMessageDirectlyResult:
    """ConsumeMessageDirectlyResult from its JSON object."""
    result = doc.get("consumeResult")
    if result is not None and result not in CM_RESULTS:
        raise malformed(what, f"has consumeResult={result!r}, not one of {', '.join(CM_RESULTS)}")
    remark = doc.get("remark")
    return ConsumeMessageDirectlyResult(
        order=bool_field(doc, "order", what, False),
        auto_commit=bool_field(doc, "autoCommit", what, True),
        consume_result=result,
        remark=None if remark is None else str(remark),
        spent_time_mills=int_field(doc, "spentTimeMills", what, 0),
    )
