"""The data model every package shares: messages, queues, topic configs and system names."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

# System topics and prefixes (RocketMQ's names).
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
MASTER_ID: Final = 0

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
    """One queue of a topic on one broker group."""

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

    ``properties`` holds user properties; tags, keys and the delay level have fields of
    their own and travel as RocketMQ's system properties.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0


@dataclass(slots=True)
class MessageExt:
    """A stored message, decoded from its CommitLog record."""

    topic: str
    body: bytes
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    sys_flag: int
    flag: int
    body_crc: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    offset_msg_id: str

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @property
    def msg_id(self) -> str:
        """The client unique id (UNIQ_KEY) when the producer set one, else the offset id."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self.offset_msg_id)

    @property
    def delay_level(self) -> int:
        raw = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(raw) if raw else 0

    def user_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties.items() if k not in SYSTEM_PROPERTY_NAMES}
