"""Consumer offsets (RocketMQ's ConsumerOffsetManager): "topic@group" -> queue -> next
offset, persisted in config/consumerOffset.json every few seconds and at shutdown."""

from __future__ import annotations

from pathlib import Path

from rocketq.cluster.json_file import read_json, write_json_atomic

SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    def load(self) -> None:
        doc = read_json(self.path, "consumer offsets")
        if doc is not None:
            self.table = {
                key: {int(q): int(o) for q, o in queues.items()}
                for key, queues in doc.get("offsetTable", {}).items()
            }

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
