"""Queue allocation: every queue assigned exactly once, same input same answer, and
RocketMQ's shares on hand-written examples."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.common.message import MessageQueue
from rocketq.sdk.rebalance import (
    STRATEGIES,
    AllocateStrategy,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
    queue_key,
    ring_hash,
)

GROUP = "G"

queues_st = st.lists(
    st.builds(
        MessageQueue,
        topic=st.just("T"),
        broker_name=st.sampled_from(["broker-a", "broker-b", "broker-c"]),
        queue_id=st.integers(0, 15),
    ),
    unique=True,
    max_size=40,
)
cids_st = st.lists(
    st.text("0123456789abcdef.@", min_size=1, max_size=12), unique=True, min_size=1, max_size=12
)


def queues(n: int, brokers: tuple[str, ...] = ("broker-a",)) -> list[MessageQueue]:
    per = -(-n // len(brokers))
    return sorted(MessageQueue("T", b, i) for b in brokers for i in range(per))[:n]


def allocation(
    strategy: AllocateStrategy, mqs: list[MessageQueue], cids: list[str]
) -> dict[str, list[MessageQueue]]:
    return {cid: strategy(GROUP, cid, mqs, cids) for cid in cids}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@given(mqs=queues_st, cids=cids_st, data=st.data())
def test_every_queue_assigned_exactly_once_and_order_does_not_matter(
    name: str, mqs: list[MessageQueue], cids: list[str], data: st.DataObject
) -> None:
    strategy = STRATEGIES[name]
    shares = allocation(strategy, mqs, cids)
    assigned = Counter(mq for share in shares.values() for mq in share)
    assert set(assigned) == set(mqs)
    assert all(count == 1 for count in assigned.values())
    for share in shares.values():
        assert share == sorted(share)

    shuffled_mqs = data.draw(st.permutations(mqs))
    shuffled_cids = data.draw(st.permutations(cids))
    assert allocation(strategy, shuffled_mqs, shuffled_cids) == shares


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@given(mqs=queues_st, cids=cids_st)
def test_unknown_consumer_gets_nothing(name: str, mqs: list[MessageQueue], cids: list[str]) -> None:
    assert STRATEGIES[name](GROUP, "not-registered-#", mqs, cids) == []


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_empty_inputs(name: str) -> None:
    strategy = STRATEGIES[name]
    assert strategy(GROUP, "c1", [], ["c1"]) == []
    assert strategy(GROUP, "c1", queues(4), []) == []


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_duplicates_are_ignored(name: str) -> None:
    mqs, cids = queues(6), ["c1", "c2"]
    strategy = STRATEGIES[name]
    assert allocation(strategy, mqs + mqs, cids + cids) == allocation(strategy, mqs, cids)


@given(mqs=queues_st, cids=cids_st)
def test_averagely_sizes_differ_by_at_most_one_first_mod_bigger(
    mqs: list[MessageQueue], cids: list[str]
) -> None:
    ordered = sorted(cids)
    sizes = [len(allocate_averagely(GROUP, cid, mqs, cids)) for cid in ordered]
    n, m = len(mqs), len(ordered)
    assert max(sizes) - min(sizes) <= 1
    assert sizes == [n // m + 1] * (n % m) + [n // m] * (m - n % m)


@given(mqs=queues_st, cids=cids_st)
def test_averagely_pages_are_contiguous_in_consumer_order(
    mqs: list[MessageQueue], cids: list[str]
) -> None:
    pages = [allocate_averagely(GROUP, cid, mqs, cids) for cid in sorted(cids)]
    assert [mq for page in pages for mq in page] == sorted(mqs)


@given(mqs=queues_st, cids=cids_st)
def test_by_circle_deals_queues_round_robin(mqs: list[MessageQueue], cids: list[str]) -> None:
    ordered, m = sorted(cids), len(cids)
    for i, mq in enumerate(sorted(mqs)):
        assert mq in allocate_averagely_by_circle(GROUP, ordered[i % m], mqs, cids)


def shares(strategy: AllocateStrategy, n: int, m: int) -> list[list[MessageQueue]]:
    mqs = queues(n, ("broker-a", "broker-b"))
    return [strategy(GROUP, f"c{i}", mqs, [f"c{j}" for j in range(m)]) for i in range(m)]


def test_averagely_8_queues_2_consumers() -> None:
    mqs = queues(8, ("broker-a", "broker-b"))
    assert shares(allocate_averagely, 8, 2) == [mqs[:4], mqs[4:]]
    assert [mq.broker_name for mq in mqs[:4]] == ["broker-a"] * 4


def test_averagely_8_queues_3_consumers() -> None:
    mqs = queues(8, ("broker-a", "broker-b"))
    assert shares(allocate_averagely, 8, 3) == [mqs[:3], mqs[3:6], mqs[6:]]


def test_averagely_2_queues_3_consumers() -> None:
    mqs = queues(2, ("broker-a", "broker-b"))
    assert shares(allocate_averagely, 2, 3) == [[mqs[0]], [mqs[1]], []]


def test_averagely_spec_examples() -> None:
    assert [len(s) for s in shares(allocate_averagely, 5, 2)] == [3, 2]
    assert [len(s) for s in shares(allocate_averagely, 3, 2)] == [2, 1]
    assert [len(s) for s in shares(allocate_averagely, 3, 4)] == [1, 1, 1, 0]


def test_by_circle_8_queues_3_consumers() -> None:
    mqs = queues(8, ("broker-a", "broker-b"))
    assert shares(allocate_averagely_by_circle, 8, 3) == [mqs[0::3], mqs[1::3], mqs[2::3]]


def test_ring_hash_is_rocketmq_md5_first_four_bytes() -> None:
    # md5("") = d41d8cd98f00b204e9800998ecf8427e
    assert ring_hash("") == 0xD41D8CD9
    assert queue_key(MessageQueue("T", "broker-a", 3)) == "T@broker-a@3"


@given(mqs=queues_st, cids=cids_st.filter(lambda c: len(c) >= 2), data=st.data())
def test_consistent_hash_removing_a_consumer_moves_only_its_queues(
    mqs: list[MessageQueue], cids: list[str], data: st.DataObject
) -> None:
    gone = data.draw(st.sampled_from(cids))
    rest = [c for c in cids if c != gone]
    before = allocation(allocate_consistent_hash, mqs, cids)
    after = allocation(allocate_consistent_hash, mqs, rest)
    for cid in rest:
        assert set(before[cid]) <= set(after[cid])
        assert set(after[cid]) - set(before[cid]) <= set(before[gone])


def test_consistent_hash_example_removal() -> None:
    mqs = queues(16, ("broker-a", "broker-b"))
    cids = ["10.0.0.1@1", "10.0.0.2@1", "10.0.0.3@1"]
    before = allocation(allocate_consistent_hash, mqs, cids)
    after = allocation(allocate_consistent_hash, mqs, cids[:2])
    owner_before = {mq: cid for cid, share in before.items() for mq in share}
    owner_after = {mq: cid for cid, share in after.items() for mq in share}
    moved = [mq for mq in mqs if owner_before[mq] != owner_after[mq]]
    assert before[cids[2]]
    assert moved == before[cids[2]]


def test_consistent_hash_virtual_nodes() -> None:
    mqs, cids = queues(32, ("broker-a", "broker-b")), ["c1", "c2", "c3"]
    one = {c: allocate_consistent_hash(GROUP, c, mqs, cids, virtual_nodes=1) for c in cids}
    assert sorted(mq for share in one.values() for mq in share) == mqs
    with pytest.raises(ValueError, match="virtual_nodes"):
        allocate_consistent_hash(GROUP, "c1", mqs, cids, virtual_nodes=0)


def test_strategy_names() -> None:
    assert set(STRATEGIES) == {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"}
