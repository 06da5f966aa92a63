"""Consumer group configs (RocketMQ's SubscriptionGroupManager), persisted in
config/subscriptionGroup.json."""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from rocketq.common.exceptions import SubscriptionGroupNotExistError
from rocketq.common.json_file import read_json, write_json_atomic

log = logging.getLogger(__name__)

GROUP_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]{1,255}$")


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    # RocketMQ 5's consumeMessageOrderly: a FIFO group. Its v5 clients get each queue
    # apart and a queue's next messages only once the previous ones are acknowledged.
    consume_message_orderly: bool = False


def check_group(group: str) -> str:
    if not GROUP_PATTERN.match(group):
        raise SubscriptionGroupNotExistError(
            f"group name {group!r} is not valid: use 1-255 letters, digits, '%', '|', '-', '_'"
        )
    return group


class SubscriptionGroupManager:
    def __init__(self, path: Path, *, auto_create: bool) -> None:
        self.path = path
        self.auto_create = auto_create
        self.groups: dict[str, SubscriptionGroupConfig] = {}

    def load(self) -> None:
        doc = read_json(self.path, "subscription groups")
        if doc is not None:
            for name, fields in doc.get("subscriptionGroupTable", {}).items():
                self.groups[name] = SubscriptionGroupConfig(**fields)

    def persist(self) -> None:
        write_json_atomic(
            self.path,
            {"subscriptionGroupTable": {n: asdict(g) for n, g in sorted(self.groups.items())}},
        )

    def find_or_create(self, group: str) -> SubscriptionGroupConfig:
        check_group(group)
        found = self.groups.get(group)
        if found is not None:
            return found
        if not self.auto_create:
            raise SubscriptionGroupNotExistError(
                f"consumer group {group!r} does not exist on this broker; create it with "
                "`rocketq admin update-sub-group`"
            )
        config = SubscriptionGroupConfig(group)
        self.groups[group] = config
        self.persist()
        log.info("auto-created subscription group %s", group)
        return config

    def update(self, config: SubscriptionGroupConfig) -> None:
        check_group(config.group_name)
        self.groups[config.group_name] = config
        self.persist()

    def delete(self, group: str) -> bool:
        if self.groups.pop(group, None) is None:
            return False
        self.persist()
        return True
