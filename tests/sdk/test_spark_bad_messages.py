"""The Spark source reads bodies as consumers do: compressed ones inflated under the
consumers' cap; a bad message fails the read with failOnDataLoss (naming its offset) and
is skipped without it."""

from __future__ import annotations

import logging
import zlib

import pytest

from rocketq.common.message import MessageExt
from rocketq.sdk.spark.queues import DataLossError, QueueClient, RangeReader
from tests.sdk.test_message_body import bomb, message


def reader(*, fail_on_data_loss: bool) -> RangeReader:
    return RangeReader(
        QueueClient.__new__(QueueClient),  # not called by what is tested here
        ("T", "broker-a", 0),
        0,
        10,
        group="g",
        expression="*",
        expression_type="TAG",
        fail_on_data_loss=fail_on_data_loss,
        timeout=1.0,
    )


def batch() -> list[MessageExt]:
    return [
        message(b"plain", offset=0),
        message(zlib.compress(b"packed" * 1000), offset=1, compressed=True),
        message(bomb(64 * 1024 * 1024), offset=2, compressed=True),
        message(b"after", offset=3),
    ]


def test_compressed_bodies_are_inflated_and_a_bad_one_fails_the_read() -> None:
    with pytest.raises(DataLossError, match=r"offset 2 .*inflate_cap.*failOnDataLoss=false"):
        reader(fail_on_data_loss=True)._readable(batch())


def test_without_fail_on_data_loss_a_bad_message_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        got = reader(fail_on_data_loss=False)._readable(batch())
    assert [m.body for m in got] == [b"plain", b"packed" * 1000, b"after"]
    assert "offset 2" in caplog.text and "skipped" in caplog.text
