"""The data model every package shares: messages, queues, topic configs and system names."""

from __future__ import annotations

import enum
import functools
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common.message_id import encode_offset_msg_id

# System topics and prefixes (RocketMQ's names).
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
# The pops' check points and acknowledgements (rmq_sys_REVIVE_LOG_<cluster>): broker only.
REVIVE_TOPIC_PREFIX: Final = "rmq_sys_REVIVE_LOG_"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
TRACE_PRODUCER_GROUP: Final = "_INNER_TRACE_PRODUCER"
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
MASTER_ID: Final = 0

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

# Message property names (RocketMQ's MessageConst).
PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
PROPERTY_CLUSTER: Final = "CLUSTER"  # the storing broker's cluster, set by the broker
KEY_SEPARATOR: Final = " "

# Names the SDK sets itself; a user property with one of these names is refused.
SYSTEM_PROPERTY_NAMES: Final = frozenset(
    {
        PROPERTY_KEYS,
        PROPERTY_TAGS,
        PROPERTY_WAIT_STORE_MSG_OK,
        PROPERTY_DELAY_TIME_LEVEL,
        PROPERTY_RETRY_TOPIC,
        PROPERTY_REAL_TOPIC,
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_TRANSACTION_PREPARED,
        PROPERTY_PRODUCER_GROUP,
        PROPERTY_MIN_OFFSET,
        PROPERTY_MAX_OFFSET,
        PROPERTY_ORIGIN_MESSAGE_ID,
        PROPERTY_RECONSUME_TIME,
        PROPERTY_MAX_RECONSUME_TIMES,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
        PROPERTY_TRANSACTION_CHECK_TIMES,
        PROPERTY_TIMER_DELIVER_MS,
        PROPERTY_CLUSTER,
    }
)

# Topic permissions (RocketMQ's PermName bits).
PERM_PRIORITY: Final = 0x8
PERM_READ: Final = 0x4
PERM_WRITE: Final = 0x2
PERM_INHERIT: Final = 0x1


class SysFlag(enum.IntFlag):
    """Bits of a record's SYSFLAG field (RocketMQ's MessageSysFlag)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20


TRANSACTION_TYPE_MASK: Final = 0xC


def transaction_type(sys_flag: int) -> int:
    """The transaction bits of a sys flag: 0 (not a transaction), 0x4, 0x8 or 0xC."""
    return sys_flag & TRANSACTION_TYPE_MASK


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


# Topics only the broker writes, and why a client may not (RocketMQ's
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET, plus the timer topic and the groups' retry and
# dead-letter topics). The trace topic takes sends from trace writers only.
_NOT_ALLOWED_SEND: Final = {
    SCHEDULE_TOPIC: "the broker's delay topic; set delay_level on the message instead",
    TRANS_HALF_TOPIC: "the broker's transaction topic; send with a TransactionProducer",
    TRANS_OP_HALF_TOPIC: "the broker's transaction topic; send with a TransactionProducer",
    TRANS_CHECK_MAX_TIME_TOPIC: (
        "where the broker keeps transactions it stopped checking; send with a TransactionProducer"
    ),
    TIMER_TOPIC: "the broker's timer topic; set deliver_at on the message instead",
}


def send_forbidden_reason(topic: str, producer_group: str) -> str | None:
    """Why a client may not send to ``topic``, or None when it may."""
    reason = _NOT_ALLOWED_SEND.get(topic)
    if reason is not None:
        return reason
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return (
            "a consumer group's retry topic; a consumer retries a message by returning "
            "RECONSUME_LATER"
        )
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return (
            "a consumer group's dead-letter topic; the broker moves a message there after "
            "max_reconsume_times failed deliveries"
        )
    if topic.startswith(REVIVE_TOPIC_PREFIX):
        return "the pop revive log; the broker writes the pops' check points and acknowledgements"
    if topic == TRACE_TOPIC and producer_group != TRACE_PRODUCER_GROUP:
        return "the message trace topic; producers and consumers with enable_trace=True write it"
    return None


def is_system_topic(topic: str) -> bool:
    return topic in (
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
    ) or topic.startswith("rmq_sys_")


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker group.

    Attributes:
        topic: The topic.
        broker_name: The broker group holding the queue (``broker-a``).
        queue_id: The queue's number within the topic on that group.
    """

    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class TopicConfig:
    """A topic as one broker group holds it (RocketMQ's TopicConfig and its defaults)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False

    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


@dataclass(slots=True)
class Message:
    """A message as a producer builds it.

    ``properties`` holds user properties; tags, keys, the delay level and the delivery
    time have fields of their own and travel as RocketMQ's system properties.
    ``deliver_at`` (epoch ms, 0 for none) delivers the message at that time (RocketMQ 5's
    timer messages); it excludes ``delay_level``.

    Attributes:
        topic: The topic to send to.
        body: The payload, bytes.
        tags: One tag consumers can filter on (``TagA``), or None.
        keys: Keys to find the message by (``rocketq admin query-msg-by-key``).
        properties: User properties (what SQL92 filters read).
        flag: A number the application may use; RocketMQ carries it unread.
        delay_level: A delay level (1-18: 1 s ... 2 h), 0 for none.
        deliver_at: Deliver at this epoch millisecond, 0 for none.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0
    deliver_at: int = 0


def decode_properties(raw: bytes | memoryview) -> dict[str, str]:
    """Encoded properties (``name\x01value\x02`` pairs) -> a dict."""
    text = bytes(raw).decode(errors="replace")
    out: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        if pair:
            k, _, v = pair.partition(NAME_VALUE_SEPARATOR)
            out[k] = v
    return out


@functools.lru_cache(maxsize=1024)
def decode_host(raw: bytes) -> str:
    """8 bytes (IPv4 + port) -> "a.b.c.d:port" (cached: a few hosts recur endlessly)."""
    ip, port = raw[:4], struct.unpack(">i", raw[4:8])[0]
    return f"{socket.inet_ntoa(ip)}:{port}"


class MessageExt:
    """A stored message, decoded from its CommitLog record.

    Properties, hosts and the offset id are decoded on first use: a consumer going
    through thousands of records a second seldom needs every field of each.

    Attributes:
        topic: The topic (a retry or dead-letter topic for messages stored there).
        body: The payload, bytes (inflated if the producer compressed it).
        queue_id: The queue the message is in.
        queue_offset: Its place in that queue (what consumer offsets count).
        commit_log_offset: Where its record starts in the broker's CommitLog.
        store_size: The record's size in bytes.
        sys_flag: RocketMQ's system flag bits (compression, transaction state...).
        flag: The number the producer set in ``Message.flag``.
        body_crc: The CRC32 of the body the broker stored.
        born_timestamp: When the producer sent it, epoch ms.
        store_timestamp: When the broker stored it, epoch ms.
        reconsume_times: How many times it was delivered again after a failure.
        prepared_transaction_offset: For a transactional message, its half message's
            CommitLog offset.
    """

    __slots__ = (
        "_born_host",
        "_properties",
        "_properties_raw",
        "_store_host",
        "body",
        "body_crc",
        "born_timestamp",
        "commit_log_offset",
        "flag",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_size",
        "store_timestamp",
        "sys_flag",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        body: bytes,
        properties_raw: bytes,
        queue_id: int,
        queue_offset: int,
        commit_log_offset: int,
        store_size: int,
        sys_flag: int,
        flag: int,
        body_crc: int,
        born_timestamp: int,
        born_host: bytes,
        store_timestamp: int,
        store_host: bytes,
        reconsume_times: int,
        prepared_transaction_offset: int,
    ) -> None:
        self.topic = topic
        self.body = body
        self._properties_raw = properties_raw
        self._properties: dict[str, str] | None = None
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.store_size = store_size
        self.sys_flag = sys_flag
        self.flag = flag
        self.body_crc = body_crc
        self.born_timestamp = born_timestamp
        self._born_host = born_host
        self.store_timestamp = store_timestamp
        self._store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset

    @property
    def properties(self) -> dict[str, str]:
        """Every property of the record: RocketMQ's system ones and the user's."""
        props = self._properties
        if props is None:
            props = self._properties = decode_properties(self._properties_raw)
        return props

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        self._properties = value

    @property
    def properties_raw(self) -> bytes:
        """The properties as the record holds them (``name\\x01value\\x02`` pairs), for
        readers that decode many messages' properties at once (the Spark source, with
        Arrow); what was assigned to ``properties`` since is not in it."""
        return self._properties_raw

    @property
    def born_host(self) -> str:
        """``ip:port`` of the producer that sent the message."""
        return decode_host(self._born_host)

    @property
    def born_host_bytes(self) -> bytes:
        """The born host as the record holds it (IPv4 4 + port 4)."""
        return self._born_host

    @property
    def store_host(self) -> str:
        """``ip:port`` of the broker that stored the message."""
        return decode_host(self._store_host)

    @property
    def offset_msg_id(self) -> str:
        """The broker's id of the record: store host and CommitLog offset."""
        return encode_offset_msg_id(self._store_host, self.commit_log_offset)

    @property
    def tags(self) -> str | None:
        """The message's tag, None when it has none."""
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        """The message's keys (its KEYS property split at spaces)."""
        raw = self.properties.get(PROPERTY_KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @property
    def msg_id(self) -> str:
        """The client unique id (UNIQ_KEY) when the producer set one, else the offset id."""
        uniq = self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return uniq if uniq is not None else self.offset_msg_id

    @property
    def delay_level(self) -> int:
        """The DELAY property as a number; 0 when absent or not a number (a record's
        properties are whatever its producer wrote)."""
        raw = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        if not raw:
            return 0
        try:
            return int(raw)
        except ValueError:
            return 0

    def user_properties(self) -> dict[str, str]:
        """The properties the producer set, without RocketMQ's system ones."""
        return {k: v for k, v in self.properties.items() if k not in SYSTEM_PROPERTY_NAMES}

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, msg_id={self.msg_id!r}, "
            f"reconsume_times={self.reconsume_times}, body={self.body[:32]!r})"
        )


def message_doc(m: MessageExt) -> dict[str, Any]:
    """A message as JSON (what ``rocketq admin dlq export`` and the console write): ids,
    place, tags and keys, times, properties, the body as text."""
    return {
        "msg_id": m.msg_id,
        "offset_msg_id": m.offset_msg_id,
        "topic": m.topic,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "tags": m.tags,
        "keys": m.keys,
        "reconsume_times": m.reconsume_times,
        "store_timestamp": m.store_timestamp,
        "store_host": m.store_host,
        "properties": m.properties,
        "body": m.body.decode(errors="replace"),
    }
