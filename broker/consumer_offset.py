"""Consumer offsets (RocketMQ's ConsumerOffsetManager): "topic@group" -> queue -> next
offset, persisted in config/consumerOffset.json every few seconds and at shutdown."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from rocketq.common.exceptions import StoreCorruptError
from rocketq.common.json_file import read_json, write_json_atomic

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
        try:
            offsets = doc.get("offsetTable", {}) if isinstance(doc, dict) else None
            if not isinstance(offsets, dict):
                raise ValueError("no offsetTable object")
            for key, queues in offsets.items():
                if not isinstance(queues, dict):
                    raise ValueError(f"{key!r} holds no queue -> offset object")
                table[key] = {_queue_id(q): _offset(o) for q, o in queues.items()}
        except ValueError as exc:
            raise StoreCorruptError(
                f"{self.path}: not a consumer offset table ({exc}); restore it from a backup "
                "or move it away to start without it (groups then start where their "
                "consume-from-where setting says)"
            ) from None
        self.table = table

    def persist(self) -> None:
        write_json_atomic(
            self.path,
            {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}},
        )
        self.dirty = False

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(topic + SEPARATOR + group, {})[queue_id] = offset
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
