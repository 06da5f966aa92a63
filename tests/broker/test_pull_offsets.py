"""Where a pull at an offset the queue lacks sends the consumer: a master moves it, a slave
or Raft follower keeps it (its queue may only lag), unless offset_check_in_slave."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from rocketq.broker.config import BrokerConfig
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.pull_processor import PullProcessor, PullStatus
from rocketq.storage.results import GetResult, GetStatus


def processor(config: BrokerConfig, result: GetResult) -> PullProcessor:
    store: Any = SimpleNamespace(get_messages=lambda *_a, **_k: result, max_phy_offset=0)
    return PullProcessor(
        config,
        store,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        PullRequestHoldService(),  # a compiled PullProcessor takes no other
    )


CASES = [
    # (store answer, next offset the store suggests, the request's offset)
    (GetStatus.OFFSET_OVERFLOW_BADLY, 0, 11920),  # a lagging queue starting at 0
    (GetStatus.OFFSET_OVERFLOW_BADLY, 500, 11920),
    (GetStatus.OFFSET_TOO_SMALL, 300, 10),
    (GetStatus.NO_MESSAGE_IN_QUEUE, 0, 42),
    (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 42),
]


@pytest.mark.parametrize(("status", "moved_to", "offset"), CASES)
def test_a_master_moves_the_consumer(status: GetStatus, moved_to: int, offset: int) -> None:
    pull = processor(BrokerConfig(broker_role="SYNC_MASTER"), GetResult(status, moved_to, 0, 9))
    answer = pull._read("T", 0, offset, 32, None)
    assert (answer.status, answer.next_begin_offset) == (PullStatus.OFFSET_ILLEGAL, moved_to)


@pytest.mark.parametrize(("status", "moved_to", "offset"), CASES)
def test_a_slave_keeps_the_consumer_where_it_is(
    status: GetStatus, moved_to: int, offset: int
) -> None:
    slave = BrokerConfig(broker_role="SLAVE")
    pull = processor(slave, GetResult(status, moved_to, 0, 9))
    answer = pull._read("T", 0, offset, 32, None)
    assert (answer.status, answer.next_begin_offset) == (PullStatus.NO_NEW_MSG, offset)
    checking = processor(
        replace(slave, offset_check_in_slave=True), GetResult(status, moved_to, 0, 9)
    )
    moved = checking._read("T", 0, offset, 32, None)
    assert (moved.status, moved.next_begin_offset) == (PullStatus.OFFSET_ILLEGAL, moved_to)
