"""Cutting a long list of messages into legal batches."""

from __future__ import annotations

import pytest

from rocketq import split_batches
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.message import Message
from rocketq.sdk.producer import estimated_size


def test_batches_keep_order_and_stay_under_the_limit() -> None:
    msgs = [Message("T", b"x" * 1000, keys=[f"k{i}"]) for i in range(100)]
    batches = split_batches(msgs, limit=20_000)
    assert [m for b in batches for m in b] == msgs
    assert all(sum(estimated_size(m) for m in b) <= 20_000 for b in batches)
    assert len(batches) == 6  # about 1,100 bytes each: 18 to a batch


def test_a_message_bigger_than_a_batch_is_named() -> None:
    with pytest.raises(MessageIllegalError, match="message 1 alone"):
        split_batches([Message("T", b"a"), Message("T", b"x" * 5000)], limit=4096)


def test_nothing_in_nothing_out() -> None:
    assert split_batches([]) == []
