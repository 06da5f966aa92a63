"""Pull: read a queue from an offset for a consumer group, hold the pull when there is
nothing new (long polling), and answer with the stored record bytes as they lie."""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.broker.config import BrokerConfig
from rocketq.broker.consumer_offset import ConsumerOffsetManager
from rocketq.broker.filter import sql_filter, tag_filter
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.metrics import BrokerCounters
from rocketq.broker.stats import BrokerStats
from rocketq.broker.subscription_group import SubscriptionGroupManager
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.common.exceptions import (
    NoPermissionError,
    RocketqSystemError,
    TopicNotExistError,
)
from rocketq.common.message import MASTER_ID, PERM_READ
from rocketq.storage.message_store import MessageStore
from rocketq.storage.results import GetStatus

MAX_PULL_BATCH = 32


def physical_memory() -> int:
    """Bytes of RAM (RocketMQ's TOTAL_PHYSICAL_MEMORY_SIZE)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024**3


class PullStatus(enum.IntEnum):
    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


@dataclass
class PullAnswer:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: bytes = b""
    suggest_which_broker_id: int = MASTER_ID
    count: int = 0  # messages in records
    held: bool = False  # waited for messages (long or short polling)


class PullProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        holds: PullRequestHoldService,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.memory = physical_memory()
        self.found = 0  # pulls answered with messages
        self.offsets = offsets
        self.holds = holds
        self.metrics: BrokerCounters | None = None  # set by the broker when metrics are on
        self.stats = BrokerStats()  # the broker's own, set by the broker

    async def pull(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_msg_nums: int = MAX_PULL_BATCH,
        subscription: str = "*",
        expression_type: str = "TAG",
        suspend_timeout_ms: int = 0,
        commit_offset: int | None = None,
    ) -> PullAnswer:
        if not self.config.broker_permission & PERM_READ:
            raise NoPermissionError(
                f"the broker[{self.config.broker_addr}] pulling message is forbidden"
            )
        group_config = self.groups.find_or_create(group)
        if not group_config.consume_enable:
            raise NoPermissionError(
                f"consumer group {group} is not allowed to consume (consume_enable)"
            )
        config = self.topics.get(topic)
        replica_only = (
            config is None
            and self.config.broker_role == "SLAVE"
            and self.store.queues.get(topic.encode(), queue_id) is not None
        )
        if replica_only:
            # A slave has the data before its next copy of the master's topic configs.
            pass
        elif config is None:
            raise TopicNotExistError(f"topic {topic!r} does not exist on this broker")
        elif not config.readable():
            raise NoPermissionError(f"the topic[{topic}] pulling message is forbidden")
        elif not 0 <= queue_id < config.read_queue_nums:
            raise RocketqSystemError(
                f"queue id {queue_id} is illegal: topic {topic} has {config.read_queue_nums} "
                "read queues on this broker"
            )
        tags = tag_filter(subscription, expression_type)
        records = sql_filter(
            subscription, expression_type, enabled=self.config.enable_property_filter
        )
        if commit_offset is not None and commit_offset >= 0 and self.config.broker_role != "SLAVE":
            self.offsets.commit(group, topic, queue_id, commit_offset)
        count = max(1, min(max_msg_nums, MAX_PULL_BATCH))
        answer = self._read(topic, queue_id, offset, count, tags, records)
        if answer.status is PullStatus.NO_NEW_MSG and suspend_timeout_ms > 0:
            wait_ms = (
                min(suspend_timeout_ms, self.config.long_polling_max_suspend_millis)
                if self.config.long_polling_enable
                else self.config.short_polling_time_mills
            )
            if await self.holds.hold(topic.encode(), queue_id, offset, wait_ms / 1000):
                answer = self._read(topic, queue_id, offset, count, tags, records)
            answer.held = True
        if answer.status is PullStatus.FOUND:
            self.stats.got(group, topic, answer.count)
        if self.metrics is not None and answer.status is PullStatus.FOUND:
            self.metrics.pulled_out(
                group, topic, queue_id, answer.count, len(answer.records), answer.next_begin_offset
            )
        return answer

    def _suggest(self, pulled_phy_offset: int) -> int:
        """Which broker of the group the consumer should read from next: slave 1 when this
        master's reader is further behind than ``access_message_in_memory_max_ratio`` of
        memory (with ``slave_read_enable``), else the master."""
        cfg = self.config
        if not cfg.slave_read_enable or cfg.broker_role == "SLAVE":
            return MASTER_ID
        behind = self.store.max_phy_offset - pulled_phy_offset
        return 1 if behind > self.memory * cfg.access_message_in_memory_max_ratio // 100 else 0

    def _read(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        count: int,
        tags: Callable[[int], bool] | None,
        records: Callable[[memoryview], bool] | None = None,
    ) -> PullAnswer:
        result = self.store.get_messages(
            topic,
            queue_id,
            offset,
            max_count=count,
            tag_filter=tags,
            record_filter=records,
        )
        s = result.status
        lo, hi = result.min_offset, result.max_offset
        try:
            if s is GetStatus.FOUND:
                self.found += 1
                return PullAnswer(
                    PullStatus.FOUND,
                    result.next_begin_offset,
                    lo,
                    hi,
                    result.to_bytes(),
                    self._suggest(result.max_phy_offset_pulling),
                    result.message_count,
                )
        finally:
            result.release()
        if s in (
            GetStatus.NO_MATCHED_MESSAGE,
            GetStatus.MESSAGE_WAS_REMOVING,
            GetStatus.OFFSET_FOUND_NULL,
        ):
            return PullAnswer(PullStatus.NO_MATCHED_MSG, result.next_begin_offset, lo, hi)
        if s is GetStatus.OFFSET_OVERFLOW_ONE:
            return PullAnswer(PullStatus.NO_NEW_MSG, offset, lo, hi)
        if s in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
            if offset == 0:
                return PullAnswer(PullStatus.NO_NEW_MSG, 0, lo, hi)
            return self._offset_moved(offset, 0, lo, hi)
        # OFFSET_TOO_SMALL or OFFSET_OVERFLOW_BADLY: the store says where to go instead.
        return self._offset_moved(offset, result.next_begin_offset, lo, hi)

    def _offset_moved(self, offset: int, moved_to: int, lo: int, hi: int) -> PullAnswer:
        """A pull at an offset this broker's queue does not have. A master moves the
        consumer (OFFSET_ILLEGAL with where to go); a slave or Raft follower does not, unless
        ``offset_check_in_slave``: its queue may just lag (a replica catching up, a new
        member), and moving a consumer to its end - or to 0 - would skip or repeat what the
        master has. It answers "nothing new" at the same offset, and the consumer asks again
        (RocketMQ's PULL_OFFSET_MOVED turned PULL_RETRY_IMMEDIATELY on a slave)."""
        if self.config.broker_role == "SLAVE" and not self.config.offset_check_in_slave:
            return PullAnswer(PullStatus.NO_NEW_MSG, offset, lo, hi)
        return PullAnswer(PullStatus.OFFSET_ILLEGAL, moved_to, lo, hi)
