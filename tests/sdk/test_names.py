"""Names on the client side, refused before anything is sent (no cluster is running here:
a call that got past the check would fail to connect instead): the SDK's Admin, producers
and consumers, and the Spark data source's options."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from rocketq import Producer, PullConsumer, PushConsumer
from rocketq.common.exceptions import MessageIllegalError
from rocketq.sdk.admin import Admin
from rocketq.sdk.spark.options import SparkOptionError, parse_read_options, parse_write_options

NOWHERE = "127.0.0.1:1"  # nothing listens: only a check that comes first can answer


def admin_calls(admin: Admin) -> list[tuple[Callable[[], Awaitable[Any]], str]]:
    return [
        (lambda: admin.update_topic("payments 1 1 0"), "illegal characters"),
        (lambda: admin.update_topic("x" * 128), "at most 127"),
        (lambda: admin.update_topic("SCHEDULE_TOPIC_XXXX"), "system topic"),
        (lambda: admin.update_topic("rmq_sys_mine"), "system topic"),
        (lambda: admin.delete_topic("a b"), "illegal characters"),
        (lambda: admin.topic_route("a b"), "illegal characters"),
        (lambda: admin.topic_status(""), "empty"),
        (lambda: admin.update_sub_group("bad group"), "illegal characters"),
        (lambda: admin.update_sub_group("g" * 256), "at most 255"),
        (lambda: admin.reset_offset_by_time("cg", "a@b", 0), "illegal characters"),
        (lambda: admin.reset_offset_by_time("c g", "T", 0), "illegal characters"),
        (lambda: admin.resend_message("00" * 16, "c g"), "illegal characters"),
    ]


async def test_the_admin_refuses_bad_names_before_sending() -> None:
    admin = Admin(NOWHERE, timeout=0.5)
    for call, says in admin_calls(admin):
        with pytest.raises(MessageIllegalError, match=says):
            await call()


async def test_clients_refuse_bad_group_and_topic_names() -> None:
    with pytest.raises(MessageIllegalError, match="group name"):
        await Producer("pg names", NOWHERE).start()
    consumer = PushConsumer("cg names", NOWHERE)
    with pytest.raises(MessageIllegalError, match="topic name"):
        consumer.subscribe("a b")
    consumer.subscribe("T")
    with pytest.raises(MessageIllegalError, match="group name"):
        await consumer.start()
    pull = PullConsumer("cg names", NOWHERE)
    with pytest.raises(MessageIllegalError, match="topic name"):
        pull.subscribe("T@x")
    pull.subscribe("T")
    with pytest.raises(MessageIllegalError, match="group name"):
        await pull.start()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"topic": "ok,pay ments"}, "option topic: the topic name 'pay ments'"),
        ({"topic": "T", "group": "g g"}, "option group: the group name"),
        ({"topic": "T", "startingOffsets": '{"a b": {"broker-a:0": 1}}'}, "startingOffsets"),
    ],
)
def test_spark_read_options_refuse_bad_names(options: dict[str, str], says: str) -> None:
    with pytest.raises(SparkOptionError, match=says):
        parse_read_options({"namesrv": NOWHERE, **options}, streaming=False)


def test_spark_write_options_refuse_bad_names() -> None:
    with pytest.raises(SparkOptionError, match="option topic"):
        parse_write_options({"namesrv": NOWHERE, "topic": "a/b"}, ["body"])
    with pytest.raises(SparkOptionError, match="option producerGroup"):
        parse_write_options({"namesrv": NOWHERE, "topic": "T", "producerGroup": "p g"}, ["body"])
    ok = parse_write_options({"namesrv": NOWHERE, "topic": "T"}, ["body"])
    assert ok.topic == "T" and ok.group == "rocketq-spark-writer"
