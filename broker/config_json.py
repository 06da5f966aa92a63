"""Topic and subscription group configs in the JSON RocketMQ writes them in (TopicConfig and
SubscriptionGroupConfig bodies of the admin requests, and the tables a slave copies).

What rocketq does not keep is written as RocketMQ's default (a topic's ``topicFilterType``
SINGLE_TAG, a group's ``consumeFromMinEnable`` true) and ignored when read.
"""

from __future__ import annotations

from typing import Any, Final

from rocketq.broker.subscription_group import SubscriptionGroupConfig, check_group
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.message import TopicConfig
from rocketq.common.names import check_topic_name

# SubscriptionGroupConfig's JSON names -> rocketq's fields (bools, then ints).
GROUP_BOOLS: Final = {
    "consumeEnable": "consume_enable",
    "consumeBroadcastEnable": "consume_broadcast_enable",
    "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
    "consumeMessageOrderly": "consume_message_orderly",
    "consumeFromMinEnable": None,  # not kept: rocketq's groups have no such switch
}
GROUP_INTS: Final = {
    "retryQueueNums": "retry_queue_nums",
    "retryMaxTimes": "retry_max_times",
    "brokerId": "broker_id",
    "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
}


def topic_doc(t: TopicConfig) -> dict[str, Any]:
    """TopicConfig's JSON."""
    return {
        "order": t.order,
        "perm": t.perm,
        "readQueueNums": t.read_queue_nums,
        "topicFilterType": "SINGLE_TAG",
        "topicName": t.topic_name,
        "topicSysFlag": t.topic_sys_flag,
        "writeQueueNums": t.write_queue_nums,
    }


def group_doc(g: SubscriptionGroupConfig) -> dict[str, Any]:
    """SubscriptionGroupConfig's JSON."""
    return {
        "brokerId": g.broker_id,
        "consumeBroadcastEnable": g.consume_broadcast_enable,
        "consumeEnable": g.consume_enable,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": g.consume_message_orderly,
        "groupName": g.group_name,
        "notifyConsumerIdsChangedEnable": g.notify_consumer_ids_changed_enable,
        "retryMaxTimes": g.retry_max_times,
        "retryQueueNums": g.retry_queue_nums,
        "whichBrokerWhenConsumeSlowly": g.which_broker_when_consume_slowly,
    }


def group_of(doc: dict[str, Any]) -> SubscriptionGroupConfig:
    """A SubscriptionGroupConfig body -> rocketq's config; absent fields take RocketMQ's
    defaults, a field of the wrong type is MessageIllegalError naming it."""
    name = doc.get("groupName")
    if not isinstance(name, str) or not name:
        raise MessageIllegalError("the subscription group body has no groupName")
    check_group(name)
    values: dict[str, Any] = {}
    for key, attr in GROUP_BOOLS.items():
        if key in doc:
            if not isinstance(doc[key], bool):
                raise MessageIllegalError(
                    f"the subscription group's {key} is {doc[key]!r}, not true or false"
                )
            if attr is not None:
                values[attr] = doc[key]
    for key, attr in GROUP_INTS.items():
        if key in doc:
            if isinstance(doc[key], bool) or not isinstance(doc[key], int):
                raise MessageIllegalError(
                    f"the subscription group's {key} is {doc[key]!r}, not a whole number"
                )
            values[attr] = doc[key]
    return SubscriptionGroupConfig(name, **values)


def topic_of(doc: dict[str, Any]) -> TopicConfig:
    """A TopicConfig body -> rocketq's config; MessageIllegalError naming a bad field."""
    name = doc.get("topicName")
    if not isinstance(name, str) or not name:
        raise MessageIllegalError("the topic config has no topicName")
    check_topic_name(name)
    try:
        return TopicConfig(
            name,
            int(doc.get("readQueueNums", 16)),
            int(doc.get("writeQueueNums", 16)),
            int(doc.get("perm", 6)),
            int(doc.get("topicSysFlag", 0)),
            bool(doc.get("order", False)),
        )
    except (TypeError, ValueError):
        raise MessageIllegalError(f"the config of topic {name} has a bad number") from None
