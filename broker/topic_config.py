"""The broker's topics (RocketMQ's TopicConfigManager), persisted in config/topics.json."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from rocketq.cluster.errors import MessageIllegalError, TopicNotExistError
from rocketq.cluster.json_file import read_json, write_json_atomic
from rocketq.cluster.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TopicConfig,
)
from rocketq.cluster.record import check_topic

log = logging.getLogger(__name__)

DELAY_LEVELS = 18


class TopicConfigManager:
    def __init__(self, path: Path, *, auto_create: bool, default_queue_nums: int) -> None:
        self.path = path
        self.auto_create = auto_create
        self.default_queue_nums = default_queue_nums
        self.topics: dict[str, TopicConfig] = {}
        self.data_version = 0
        # Called after every change (the broker re-registers with the nameservers at once).
        self.on_change: Callable[[], None] = lambda: None

    def load(self) -> None:
        doc = read_json(self.path, "topic configs")
        if doc is not None:
            for name, fields in doc.get("topicConfigTable", {}).items():
                self.topics[name] = TopicConfig(**fields)
            self.data_version = int(doc.get("dataVersion", 0))
        self._system_topics()

    def _system_topics(self) -> None:
        system = [
            TopicConfig(SCHEDULE_TOPIC, DELAY_LEVELS, DELAY_LEVELS),
            TopicConfig(TRANS_HALF_TOPIC, 1, 1),
            TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1),
        ]
        if self.auto_create:
            n = self.default_queue_nums
            system.append(
                TopicConfig(
                    AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_INHERIT | PERM_READ | PERM_WRITE
                )
            )
        else:
            self.topics.pop(AUTO_CREATE_TOPIC_KEY_TOPIC, None)
        for t in system:
            self.topics.setdefault(t.topic_name, t)

    def _changed(self) -> None:
        self.data_version += 1
        self.persist()
        self.on_change()

    def persist(self) -> None:
        write_json_atomic(
            self.path,
            {
                "dataVersion": self.data_version,
                "topicConfigTable": {n: asdict(t) for n, t in sorted(self.topics.items())},
            },
        )

    def get(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def update(self, config: TopicConfig) -> TopicConfig:
        check_topic(config.topic_name)
        if config.topic_name == AUTO_CREATE_TOPIC_KEY_TOPIC:
            raise MessageIllegalError(
                f"topic {config.topic_name} is the auto-create template; choose another name"
            )
        if not (1 <= config.read_queue_nums <= 1024 and 1 <= config.write_queue_nums <= 1024):
            raise MessageIllegalError(
                f"topic {config.topic_name}: read and write queue counts must be 1-1024 "
                f"(got {config.read_queue_nums}/{config.write_queue_nums})"
            )
        if not 0 <= config.perm <= 7:
            raise MessageIllegalError(f"topic {config.topic_name}: perm must be 0-7")
        self.topics[config.topic_name] = config
        self._changed()
        log.info("topic %s updated: %s", config.topic_name, config)
        return config

    def delete(self, topic: str) -> bool:
        if self.topics.pop(topic, None) is None:
            return False
        self._changed()
        log.info("topic %s deleted", topic)
        return True

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int) -> TopicConfig:
        """The topic of a send, created from the default topic (TBW102) when allowed."""
        found = self.topics.get(topic)
        if found is not None:
            return found
        template = self.topics.get(default_topic or AUTO_CREATE_TOPIC_KEY_TOPIC)
        if not self.auto_create or template is None or not template.perm & PERM_INHERIT:
            raise TopicNotExistError(
                f"topic {topic!r} does not exist on this broker and auto_create_topic_enable "
                "is off; create it first with `rocketq admin update-topic`"
            )
        n = max(1, min(queue_nums or self.default_queue_nums, template.write_queue_nums))
        config = TopicConfig(topic, n, n, template.perm & ~PERM_INHERIT)
        log.info("auto-creating topic %s from %s with %d queues", topic, template.topic_name, n)
        self.topics[topic] = config
        self._changed()
        return config

    def create_system(self, topic: str, queue_nums: int, perm: int) -> TopicConfig:
        """Retry and DLQ topics, created on demand."""
        found = self.topics.get(topic)
        if found is not None:
            return found
        config = TopicConfig(topic, queue_nums, queue_nums, perm)
        self.topics[topic] = config
        self._changed()
        log.info("created topic %s with %d queues", topic, queue_nums)
        return config

    def registrable(self) -> list[TopicConfig]:
        return list(self.topics.values())
