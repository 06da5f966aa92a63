"""The SDK's side of the hot requests, as pure functions: the header and body of a send
(SEND_MESSAGE_V2, or SEND_BATCH_MESSAGE in RocketMQ's batch encoding), of a pull, and of a
heartbeat (HeartbeatData), and the replies read back. No I/O here.

A send carries the message body as the request body and its properties in the header
(``i``); a batch carries, per message, total size, magic 0, body CRC 0, flag, body length,
body, properties length and properties, as RocketMQ 4.9's client writes it. A pull answer's
body is the stored records, decoded by ``rocketq.common.record``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from rocketq.common.exceptions import MessageIllegalError, for_code
from rocketq.common.record import encode_batch_entry, tags_hash_code
from rocketq.common.topics_batch import SegmentResult, decode_results, encode_segment
from rocketq.remoting import fastjson
from rocketq.remoting.answer import check, malformed
from rocketq.remoting.codes import PullSysFlag, RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand

# Send answers that mean "stored": SEND_OK and the three wait outcomes.
STORED_CODES: Final = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
    }
)


# -- send ------------------------------------------------------------------------------


def send_request(
    body: bytes,
    properties: str,
    *,
    group: str,
    topic: str,
    queue_id: int,
    born_timestamp: int,
    sys_flag: int = 0,
    flag: int = 0,
    default_topic: str = "TBW102",
    default_queue_nums: int = 4,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
    batch: bool = False,
) -> RemotingCommand:
    """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE with ``batch``: ``body`` is
    :func:`batch_body`'s, ``properties`` the batch's own)."""
    ext = {
        "a": group,
        "b": topic,
        "c": default_topic,
        "d": str(default_queue_nums),
        "e": str(queue_id),
        "f": str(sys_flag),
        "g": str(born_timestamp),
        "h": str(flag),
        "i": properties,
        "j": str(reconsume_times),
        "k": "false",
    }
    if max_reconsume_times is not None:
        ext["l"] = str(max_reconsume_times)
    if batch:
        ext["m"] = "true"
        return RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, ext, body)
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext, body)


def batch_body(entries: Iterable[tuple[bytes, bytes, int]]) -> bytes:
    """(body, properties, flag) of each message -> the batch body."""
    return b"".join(encode_batch_entry(body, props, flag) for body, props, flag in entries)


def topics_batch_request(
    segments: Iterable[tuple[str, int, bytes]],
    *,
    group: str,
    born_timestamp: int,
    default_topic: str = "TBW102",
    default_queue_nums: int = 4,
) -> RemotingCommand:
    """SEND_TOPICS_BATCH: (topic, queue id, batch entries) of each segment, in order."""
    body = b"".join(encode_segment(t.encode(), q, entries) for t, q, entries in segments)
    return topics_batch_command(
        body,
        group=group,
        born_timestamp=born_timestamp,
        default_topic=default_topic,
        default_queue_nums=default_queue_nums,
    )


def topics_batch_command(
    body: bytes,
    *,
    group: str,
    born_timestamp: int,
    default_topic: str = "TBW102",
    default_queue_nums: int = 4,
) -> RemotingCommand:
    """SEND_TOPICS_BATCH with its body made already (segments, :func:`encode_segment`)."""
    ext = {
        "a": group,
        "c": default_topic,
        "d": str(default_queue_nums),
        "g": str(born_timestamp),
    }
    return RemotingCommand(RocketqRequestCode.SEND_TOPICS_BATCH, ext, body)


def parse_topics_batch(answer: RemotingCommand, segments: int) -> list[SegmentResult]:
    """Each segment's result; the error class of an answer that is not SUCCESS, and a
    SYSTEM_ERROR for a body that does not hold one result per segment."""
    check(answer)
    try:
        results = decode_results(answer.body or b"")
    except MessageIllegalError as exc:
        raise malformed("topics batch", f"is not results: {exc}") from None
    if len(results) != segments:
        raise malformed("topics batch", f"holds {len(results)} results for {segments} segments")
    return results


@dataclass(frozen=True, slots=True)
class SendReply:
    code: int  # SUCCESS or one of the wait outcomes: the message was stored
    msg_ids: list[str]  # the offset id of each stored message
    queue_id: int
    queue_offset: int  # of the first message


def parse_send(answer: RemotingCommand) -> SendReply:
    """The stored send's ids and place; the error class of any other answer."""
    if answer.code not in STORED_CODES:
        check(answer)
    ext = answer.ext or {}
    ids = ext.get("msgId", "")
    try:
        return SendReply(
            answer.code,
            ids.split(",") if ids else [],
            int(ext.get("queueId", "-1")),
            int(ext.get("queueOffset", "-1")),
        )
    except ValueError:
        raise for_code(ResponseCode.SYSTEM_ERROR)(
            f"the broker's send answer has a field that is not a number: {ext}"
        ) from None


# -- pull ------------------------------------------------------------------------------


class PullOutcome(enum.IntEnum):
    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


PULL_OUTCOMES: Final = {
    ResponseCode.SUCCESS: PullOutcome.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullOutcome.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullOutcome.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullOutcome.OFFSET_ILLEGAL,
}


def pull_request(
    *,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_msg_nums: int = 32,
    commit_offset: int | None = None,
    suspend_timeout_ms: int = 0,
    subscription: str | None = None,
    expression_type: str = "TAG",
    sub_version: int = 0,
) -> RemotingCommand:
    """PULL_MESSAGE; ``commit_offset`` (when not None) is stored by the broker, a
    ``suspend_timeout_ms`` lets it hold the pull, a ``subscription`` filters it (else the
    one the group's heartbeat registered)."""
    sys_flag = 0
    if commit_offset is not None:
        sys_flag |= PullSysFlag.FLAG_COMMIT_OFFSET
    if suspend_timeout_ms > 0:
        sys_flag |= PullSysFlag.FLAG_SUSPEND
    if subscription is not None:
        sys_flag |= PullSysFlag.FLAG_SUBSCRIPTION
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_msg_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset if commit_offset is not None else 0),
        "suspendTimeoutMillis": str(suspend_timeout_ms),
        "subVersion": str(sub_version),
    }
    if subscription is not None:
        ext["subscription"] = subscription
        ext["expressionType"] = expression_type
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext)


@dataclass(frozen=True, slots=True)
class PullReply:
    outcome: PullOutcome
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    records: bytes  # the stored records, as they lie in the CommitLog


def parse_pull(answer: RemotingCommand) -> PullReply:
    outcome = PULL_OUTCOMES.get(answer.code)
    if outcome is None:
        check(answer)  # raises: the code is not SUCCESS (whose outcome is FOUND)
        raise AssertionError(f"pull answer code {answer.code}")
    ext = answer.ext or {}
    try:
        return PullReply(
            outcome,
            int(ext["nextBeginOffset"]),
            int(ext.get("minOffset", "0")),
            int(ext.get("maxOffset", "0")),
            int(ext.get("suggestWhichBrokerId", "0")),
            bytes(answer.body) if answer.body is not None else b"",
        )
    except (KeyError, ValueError):
        raise for_code(ResponseCode.SYSTEM_ERROR)(
            f"the broker's pull answer lacks its offsets: {ext}"
        ) from None


# -- heartbeat ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    expression: str = "*"
    expression_type: str = "TAG"
    version: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"  # push; CONSUME_ACTIVELY: pull
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: Sequence[SubscriptionData] = field(default_factory=tuple)


def _subscription_doc(s: SubscriptionData) -> dict[str, object]:
    tags: list[str] = []
    if s.expression_type.upper() == "TAG" and s.expression.strip() not in ("", "*"):
        tags = [t.strip() for t in s.expression.split("||") if t.strip()]
    return {
        "classFilterMode": False,
        "codeSet": [tags_hash_code(t) for t in tags],
        "expressionType": s.expression_type.upper(),
        "subString": s.expression,
        "subVersion": s.version,
        "tagsSet": tags,
        "topic": s.topic,
    }


def heartbeat_request(
    client_id: str, producer_groups: Iterable[str], consumers: Iterable[ConsumerData]
) -> RemotingCommand:
    """HEART_BEAT with its HeartbeatData body, fields as RocketMQ's fastjson writes them."""
    body = fastjson.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": c.consume_from_where,
                    "consumeType": c.consume_type,
                    "groupName": c.group,
                    "messageModel": c.message_model,
                    "subscriptionDataSet": [_subscription_doc(s) for s in c.subscriptions],
                    "unitMode": False,
                }
                for c in consumers
            ],
            "producerDataSet": [{"groupName": g} for g in producer_groups],
        }
    )
    return RemotingCommand(RequestCode.HEART_BEAT, None, body)
