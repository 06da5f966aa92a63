"""Consumer offsets (RocketMQ's ConsumerOffsetManager): "topic@group" -> queue -> next
offset, persisted in config/consumerOffset.json every few seconds and at shutdown.

A key is split at its ``@``, so neither name may hold one: :meth:`commit` takes only valid
names (:mod:`rocketq.common.names`). An entry of the file that is not a valid key with its
queue offsets is logged and skipped; a file that is not an offset table at all is a
StoreCorruptError naming it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.common.names import (
    check_group_name,
    check_topic_name,
    is_valid_group_name,
    is_valid_topic_name,
)

log = logging.getLogger(__name__)

SEPARATOR = "@"
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1


def _queue_id(text: str) -> int:
    if not (text.isascii() and text.lstrip("-").isdigit() and len(text) <= 11):
        raise ValueError(f"queue id {text[:20]!r} is not a number")
    return int(text)


def _offset(value: object) -> int:
    if type(value) is not int or not _LONG_MIN <= value <= _LONG_MAX:
        raise ValueError(f"offset {str(value)[:20]} is not a whole number")
    return value


def is_valid_key(key: object) -> bool:
    """Whether ``key`` is ``topic@group`` of a valid topic and group name."""
    if not isinstance(key, str):
        return False
    topic, sep, group = key.partition(SEPARATOR)
    return bool(sep) and is_valid_topic_name(topic) and is_valid_group_name(group)


def _check_key(key: str) -> None:
    if not is_valid_key(key):
        raise ValueError(f"{key[:80]!r} is not a valid topic@group")


class ConsumerOffsetManager:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    def load(self) -> None:
        """Read the file; StoreCorruptError naming it when it is not an offset table."""
        doc = read_json(self.path, "consumer offsets")
        if doc is None:
            return
        table: dict[str, dict[int, int]] = {}
        offsets = doc.get("offsetTable", {}) if isinstance(doc, dict) else None
        if not isinstance(offsets, dict):
            raise StoreCorruptError(
                f"{self.path}: not a consumer offset table (no offsetTable object); restore "
                "it from a backup or move it away to start without it (groups then start "
                "where their consume-from-where setting says)"
            )
        for key, queues in offsets.items():
            try:
                _check_key(key)
                if not isinstance(queues, dict):
                    raise ValueError(f"{key[:80]!r} holds no queue -> offset object")
                table[key] = {_queue_id(q): _offset(o) for q, o in queues.items()}
            except ValueError as exc:
                log.error(
                    "%s: skipping the entry %r, not a group's offsets (%s); that group starts "
                    "on those queues where its consume-from-where setting says",
                    self.path,
                    key[:80],
                    exc,
                )
        self.table = table

    def persist(self) -> None:
        write_json_atomic(
            self.path,
            {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}},
        )
        self.dirty = False

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Keep ``offset`` as the group's next offset of the queue; a name that is not valid
        is MessageIllegalError (it could not be read back from its key)."""
        key = topic + SEPARATOR + group
        if key not in self.table:
            check_topic_name(topic)
            check_group_name(group)
        self.table.setdefault(key, {})[queue_id] = offset
        self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one."""
        return self.table.get(topic + SEPARATOR + group, {}).get(queue_id, -1)

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(topic + SEPARATOR + group, {}))

    def groups_of(self, topic: str) -> list[str]:
        return sorted(
            k.split(SEPARATOR, 1)[1] for k in self.table if k.split(SEPARATOR, 1)[0] == topic
        )

    def topics_of(self, group: str) -> list[str]:
        return sorted(
            k.split(SEPARATOR, 1)[0] for k in self.table if k.split(SEPARATOR, 1)[1] == group
        )

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.split(SEPARATOR, 1)[0] == topic]:
            del self.table[key]
        self.dirty = True
