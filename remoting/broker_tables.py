"""A broker's tables as a peer reads them: its topic configs (GET_ALL_TOPIC_CONFIG), its
subscription group configs (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), its consumer offsets
(GET_ALL_CONSUMER_OFFSET) and its delay offsets (GET_ALL_DELAY_OFFSET): the four requests
RocketMQ's SlaveSynchronize makes of the master, and what the admin reads groups and
configs from. Request builders and answer parsers, pure.

The bodies are JSON as fastjson writes them: beans with their fields in name order, a
``dataVersion`` object (``{"counter":..,"timestamp":..}``), queue ids and delay levels as
bare number keys. Here in the shared model so that both the broker (its slave sync) and
the SDK (its admin) use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from rocketq.remoting.answer import (
    body_doc,
    bool_field,
    int_field,
    malformed,
    object_field,
    text_field,
)
from rocketq.remoting.codes import PermName, RequestCode
from rocketq.remoting.command import RemotingCommand

READ_WRITE: Final = PermName.PERM_READ | PermName.PERM_WRITE


@dataclass(frozen=True, slots=True)
class DataVersion:
    counter: int = 0
    timestamp: int = 0


@dataclass(frozen=True, slots=True)
class TopicConfigData:
    """A topic's config (RocketMQ's TopicConfig and its defaults)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = READ_WRITE
    topic_sys_flag: int = 0
    order: bool = False
    topic_filter_type: str = "SINGLE_TAG"  # or MULTI_TAG (rocketq's brokers keep SINGLE_TAG)


@dataclass(frozen=True, slots=True)
class TopicConfigWrapper:
    """TopicConfigSerializeWrapper: a broker's topics and their version."""

    data_version: DataVersion
    topic_config_table: dict[str, TopicConfigData]


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """A consumer group's config (RocketMQ's SubscriptionGroupConfig and its defaults)."""

    group_name: str
    consume_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_from_min_enable: bool = True  # RocketMQ's; rocketq's brokers do not keep it
    consume_message_orderly: bool = False  # RocketMQ 5's: a FIFO group for v5 clients


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """SubscriptionGroupManager's JSON: a broker's groups and their version."""

    data_version: DataVersion
    subscription_group_table: dict[str, SubscriptionGroupConfig]


@dataclass(frozen=True, slots=True)
class ConsumerOffsetTable:
    """ConsumerOffsetManager's JSON: "topic@group" -> queue id -> offset."""

    offset_table: dict[str, dict[int, int]]

    @property
    def groups(self) -> frozenset[str]:
        """The groups with a committed offset."""
        return frozenset(k.split("@", 1)[1] for k in self.offset_table if "@" in k)


@dataclass(frozen=True, slots=True)
class DelayOffsetTable:
    """ScheduleMessageService's JSON: delay level -> offset in its SCHEDULE_TOPIC_XXXX queue."""

    offset_table: dict[int, int]


def data_version(doc: Any, what: str) -> DataVersion:
    """A DataVersion object; absent: (0, 0)."""
    if doc is None:
        return DataVersion()
    if not isinstance(doc, dict):
        raise malformed(what, f"has a dataVersion that is not an object: {doc!r}")
    return DataVersion(int_field(doc, "counter", what, 0), int_field(doc, "timestamp", what, 0))


# -- topics -------------------------------------------------------------------------------


def all_topic_config_request() -> RemotingCommand:
    """GET_ALL_TOPIC_CONFIG: no header."""
    return RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG)


def topic_config(name: str, doc: Any, what: str) -> TopicConfigData:
    """A TopicConfig bean; absent fields take RocketMQ's defaults."""
    if not isinstance(doc, dict):
        raise malformed(what, f"has topic {name!r} that is not an object")
    return TopicConfigData(
        text_field(doc, "topicName", name),
        int_field(doc, "readQueueNums", what, 16),
        int_field(doc, "writeQueueNums", what, 16),
        int_field(doc, "perm", what, READ_WRITE),
        int_field(doc, "topicSysFlag", what, 0),
        bool_field(doc, "order", what, False),
        text_field(doc, "topicFilterType", "SINGLE_TAG"),
    )


def parse_all_topic_config(answer: RemotingCommand) -> TopicConfigWrapper:
    what = "topic config"
    doc = body_doc(answer, what)
    table = object_field(doc, "topicConfigTable", what)
    return TopicConfigWrapper(
        data_version(doc.get("dataVersion"), what),
        {str(n): topic_config(str(n), t, what) for n, t in table.items()},
    )


# -- subscription groups ------------------------------------------------------------------


def subscription_group_doc(config: SubscriptionGroupConfig) -> dict[str, Any]:
    """The SubscriptionGroupConfig bean's JSON, fields in name order."""
    return {
        "brokerId": config.broker_id,
        "consumeBroadcastEnable": config.consume_broadcast_enable,
        "consumeEnable": config.consume_enable,
        "consumeFromMinEnable": config.consume_from_min_enable,
        "consumeMessageOrderly": config.consume_message_orderly,
        "groupName": config.group_name,
        "notifyConsumerIdsChangedEnable": config.notify_consumer_ids_changed_enable,
        "retryMaxTimes": config.retry_max_times,
        "retryQueueNums": config.retry_queue_nums,
        "whichBrokerWhenConsumeSlowly": config.which_broker_when_consume_slowly,
    }


def subscription_group(name: str, doc: Any, what: str) -> SubscriptionGroupConfig:
    """A SubscriptionGroupConfig bean; absent fields take RocketMQ's defaults."""
    if not isinstance(doc, dict):
        raise malformed(what, f"has group {name!r} that is not an object")
    return SubscriptionGroupConfig(
        text_field(doc, "groupName", name),
        bool_field(doc, "consumeEnable", what, True),
        bool_field(doc, "consumeBroadcastEnable", what, True),
        int_field(doc, "retryQueueNums", what, 1),
        int_field(doc, "retryMaxTimes", what, 16),
        int_field(doc, "brokerId", what, 0),
        int_field(doc, "whichBrokerWhenConsumeSlowly", what, 1),
        bool_field(doc, "notifyConsumerIdsChangedEnable", what, True),
        bool_field(doc, "consumeFromMinEnable", what, True),
        bool_field(doc, "consumeMessageOrderly", what, False),
    )


def all_subscription_group_config_request() -> RemotingCommand:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: no header."""
    return RemotingCommand(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)


def parse_all_subscription_group_config(answer: RemotingCommand) -> SubscriptionGroupWrapper:
    what = "subscription group config"
    doc = body_doc(answer, what)
    table = object_field(doc, "subscriptionGroupTable", what)
    return SubscriptionGroupWrapper(
        data_version(doc.get("dataVersion"), what),
        {str(n): subscription_group(str(n), g, what) for n, g in table.items()},
    )


# -- offsets ------------------------------------------------------------------------------


def _offsets(table: dict[Any, Any], what: str) -> dict[int, int]:
    out = {}
    for key, offset in table.items():
        try:
            number = int(key)  # bare, as fastjson writes it; quoted, as standard JSON would
        except (TypeError, ValueError):
            raise malformed(what, f"has key {key!r}, not a number") from None
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise malformed(what, f"has offset {offset!r} at {key!r}, not a whole number")
        out[number] = offset
    return dict(sorted(out.items()))


def all_consumer_offset_request() -> RemotingCommand:
    """GET_ALL_CONSUMER_OFFSET: no header."""
    return RemotingCommand(RequestCode.GET_ALL_CONSUMER_OFFSET)


def parse_all_consumer_offset(answer: RemotingCommand) -> ConsumerOffsetTable:
    what = "consumer offset"
    table = object_field(body_doc(answer, what), "offsetTable", what)
    out = {}
    for key, queues in table.items():
        if not isinstance(queues, dict):
            raise malformed(what, f"has {key!r} -> {queues!r}, not a map of queue offsets")
        out[str(key)] = _offsets(queues, what)
    return ConsumerOffsetTable(out)


def all_delay_offset_request() -> RemotingCommand:
    """GET_ALL_DELAY_OFFSET: no header."""
    return RemotingCommand(RequestCode.GET_ALL_DELAY_OFFSET)


def parse_all_delay_offset(answer: RemotingCommand) -> DelayOffsetTable:
    what = "delay offset"
    table = object_field(body_doc(answer, what), "offsetTable", what)
    return DelayOffsetTable(_offsets(table, what))
