"""Consumer group configs (RocketMQ's SubscriptionGroupManager), persisted in
config/subscriptionGroup.json.

A group's name follows :func:`rocketq.common.names.check_group_name`; an entry of the file
that is not a group config (a bad name, a field of the wrong type) is logged and skipped, so
one bad entry never keeps a broker from starting."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rocketq.common.exceptions import (
    MessageIllegalError,
    StoreCorruptError,
    SubscriptionGroupNotExistError,
)
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.common.names import check_group_name

log = logging.getLogger(__name__)


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
    """``group`` if it is a valid group name; otherwise SubscriptionGroupNotExistError (the
    code a broker answers a request for a group it cannot have) saying what is wrong."""
    try:
        return check_group_name(group)
    except MessageIllegalError as exc:
        raise SubscriptionGroupNotExistError(f"group name is not valid: {exc}") from None


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(SubscriptionGroupConfig)}


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def config_from_file(name: object, fields: object) -> SubscriptionGroupConfig:
    """One entry of subscriptionGroup.json; ValueError naming what is wrong with it."""
    if not isinstance(name, str) or not isinstance(fields, dict):
        raise ValueError("not a group name and an object of its fields")
    try:
        check_group_name(name)
    except MessageIllegalError as exc:
        raise ValueError(str(exc)) from None
    values: dict[str, Any] = {}
    for key, value in fields.items():
        kind = _FIELD_TYPES.get(key)
        if kind is None:
            raise ValueError(f"unknown field {_show(key)}")
        if kind == "str" and not isinstance(value, str):
            raise ValueError(f"{key} is {_show(value)}, not a text")
        if kind == "bool" and not isinstance(value, bool):
            raise ValueError(f"{key} is {_show(value)}, not true or false")
        if kind == "int" and (type(value) is not int or not -(1 << 31) <= value < 1 << 31):
            raise ValueError(f"{key} is {_show(value)}, not a 32-bit whole number")
        values[key] = value
    if values.get("group_name", name) != name:
        raise ValueError(f"it holds the config of {_show(values['group_name'])}")
    values["group_name"] = name
    return SubscriptionGroupConfig(**values)


class SubscriptionGroupManager:
    def __init__(self, path: Path, *, auto_create: bool) -> None:
        self.path = path
        self.auto_create = auto_create
        self.groups: dict[str, SubscriptionGroupConfig] = {}

    def load(self) -> None:
        """Read the file: an entry that is not a group config is logged and skipped; a file
        that is not a group table at all is StoreCorruptError naming it."""
        doc = read_json(self.path, "subscription groups")
        if doc is None:
            return
        table = doc.get("subscriptionGroupTable", {}) if isinstance(doc, dict) else None
        if not isinstance(table, dict):
            raise StoreCorruptError(
                f"{self.path}: not a subscription group table (no subscriptionGroupTable "
                "object); restore it from a backup or move it away to start without it"
            )
        for name, fields in table.items():
            try:
                self.groups[name] = config_from_file(name, fields)
            except ValueError as exc:
                log.error(
                    "%s: skipping the entry %s, not a subscription group (%s): %s",
                    self.path,
                    _show(name),
                    exc,
                    _show(fields),
                )

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
