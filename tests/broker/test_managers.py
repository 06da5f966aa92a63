"""The broker's managers and helpers on their own (no network)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketq.broker.consumer_manager import ConsumerManager
from rocketq.broker.consumer_offset import ConsumerOffsetManager
from rocketq.broker.filter import parse_tags, tag_filter
from rocketq.broker.flow_control import FlowControl
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.subscription_group import SubscriptionGroupManager
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.common.exceptions import (
    MessageIllegalError,
    StoreCorruptError,
    SubscriptionGroupNotExistError,
    SubscriptionParseFailedError,
    SystemBusyError,
    TopicNotExistError,
)
from rocketq.common.message import PERM_INHERIT, TopicConfig
from rocketq.common.record import tags_hash_code


def test_topics_auto_create_from_tbw102_and_persist(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    topics = TopicConfigManager(path, auto_create=True, default_queue_nums=4)
    topics.load()
    assert topics.get("TBW102") is not None and topics.get("TBW102").perm & PERM_INHERIT
    changes: list[int] = []
    topics.on_change = lambda: changes.append(topics.data_version)
    created = topics.create_in_send("New", "TBW102", 8)
    assert (created.write_queue_nums, created.perm & PERM_INHERIT) == (4, 0)
    topics.update(TopicConfig("Admin", 2, 2))
    assert changes == [1, 2]
    again = TopicConfigManager(path, auto_create=True, default_queue_nums=4)
    again.load()
    assert again.get("New") == created and again.data_version == 2
    with pytest.raises(MessageIllegalError, match="queue counts"):
        topics.update(TopicConfig("Bad", 0, 2))
    with pytest.raises(MessageIllegalError, match="auto-create template"):
        topics.update(TopicConfig("TBW102", 2, 2))


def test_topics_without_auto_create_refuse_unknown(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path / "t.json", auto_create=False, default_queue_nums=4)
    topics.load()
    assert topics.get("TBW102") is None
    with pytest.raises(TopicNotExistError, match="create it first"):
        topics.create_in_send("Unknown", "TBW102", 4)


def test_corrupt_state_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text("{not json")
    with pytest.raises(StoreCorruptError, match=r"consumerOffset\.json"):
        ConsumerOffsetManager(path).load()


def test_offsets_round_trip(tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "o.json")
    assert offsets.query("g", "T", 0) == -1
    offsets.commit("g", "T", 0, 5)
    offsets.commit("g", "U", 1, 7)
    offsets.persist()
    again = ConsumerOffsetManager(tmp_path / "o.json")
    again.load()
    assert again.query("g", "T", 0) == 5 and again.topics_of("g") == ["T", "U"]
    again.remove_topic("T")
    assert again.query("g", "T", 0) == -1


def test_groups_are_checked_and_auto_created(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(tmp_path / "g.json", auto_create=True)
    assert groups.find_or_create("cg").retry_max_times == 16
    with pytest.raises(SubscriptionGroupNotExistError, match="not valid"):
        groups.find_or_create("bad group")
    strict = SubscriptionGroupManager(tmp_path / "g2.json", auto_create=False)
    with pytest.raises(SubscriptionGroupNotExistError, match="update-sub-group"):
        strict.find_or_create("cg")


def test_a_fifo_group_is_kept_and_read_from_rocketmq_5_json(tmp_path: Path) -> None:
    from rocketq.broker.config_json import group_doc, group_of
    from rocketq.remoting.broker_tables import subscription_group, subscription_group_doc

    path = tmp_path / "g.json"
    path.write_text('{"subscriptionGroupTable": {"old": {"group_name": "old"}}}')
    groups = SubscriptionGroupManager(path, auto_create=True)
    groups.load()  # a file written before the field existed
    assert not groups.find_or_create("old").consume_message_orderly
    config = group_of({"groupName": "fifo", "consumeMessageOrderly": True})
    assert config.consume_message_orderly and group_doc(config)["consumeMessageOrderly"]
    groups.groups["fifo"] = config
    groups.persist()
    again = SubscriptionGroupManager(path, auto_create=True)
    again.load()
    assert again.find_or_create("fifo").consume_message_orderly
    # What an admin client reads and writes: RocketMQ 5's field, false when absent.
    read = subscription_group("fifo", group_doc(config), "a group")
    assert read.consume_message_orderly
    assert subscription_group_doc(read)["consumeMessageOrderly"] is True
    assert not subscription_group("x", {"groupName": "x"}, "a group").consume_message_orderly


def test_tag_expressions() -> None:
    assert parse_tags("*") is None and parse_tags("") is None
    assert parse_tags("A || B") == {tags_hash_code("A"), tags_hash_code("B")}
    f = tag_filter("A || B")
    assert f is not None and f(tags_hash_code("A")) and not f(tags_hash_code("C"))
    with pytest.raises(SubscriptionParseFailedError, match="TagA"):
        parse_tags("A ||")
    assert tag_filter("a > 1", "SQL92") is None  # SQL92 filters records, not tag codes
    with pytest.raises(SubscriptionParseFailedError, match="use TAG or SQL92"):
        tag_filter("a", "CLASS")


def test_flow_control_answers_system_busy() -> None:
    flow = FlowControl(capacity=2, max_wait_ms=200, enabled=True)
    flow.check()
    flow.in_flight = 2
    with pytest.raises(SystemBusyError, match="OVERLOAD"):
        flow.check()
    flow.in_flight = 0
    flow.loop_lag = 0.5
    with pytest.raises(SystemBusyError, match="TIMEOUT_CLEAN_QUEUE"):
        flow.check()
    assert flow.rejected == 2
    FlowControl(capacity=0, max_wait_ms=1, enabled=False).check()


async def test_long_polling_wakes_on_arrival_and_times_out() -> None:
    holds = PullRequestHoldService()
    waiter = asyncio.ensure_future(holds.hold(b"T", 0, 5, timeout=5))
    await asyncio.sleep(0)
    holds.notify(b"T", 0, 5, 0)  # nothing past offset 5 yet
    holds.notify(b"T", 1, 9, 0)  # another queue
    await asyncio.sleep(0)
    assert not waiter.done() and holds.held_count == 1
    holds.notify(b"T", 0, 6, 0)
    assert await waiter is True and holds.held_count == 0
    assert await holds.hold(b"T", 0, 6, timeout=0.01) is False


async def test_consumers_join_leave_and_are_told() -> None:
    now = [0.0]
    cm = ConsumerManager(clock=lambda: now[0])
    q1 = cm.open_channel("c1")
    kw = {
        "client_addr": "",
        "consume_type": "",
        "message_model": "CLUSTERING",
        "consume_from_where": "",
        "subscriptions": [],
    }
    assert cm.register_consumer("g", "c1", **kw)  # type: ignore[arg-type]
    assert cm.register_consumer("g", "c2", **kw)  # type: ignore[arg-type]
    assert not cm.register_consumer("g", "c2", **kw)  # type: ignore[arg-type]
    assert cm.client_ids("g") == ["c1", "c2"]
    events = [q1.get_nowait() for _ in range(q1.qsize())]
    assert events == [("ids", "g"), ("ids", "g")]
    now[0] = 200.0
    cm.register_consumer("g", "c1", **kw)  # type: ignore[arg-type]
    cm.scan_not_active(120_000)
    assert cm.client_ids("g") == ["c1"]
    cm.close_channel("c1", q1)  # its stream broke: gone at once
    assert cm.client_ids("g") == []
