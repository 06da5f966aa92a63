"""The console's topic form and group pages refuse names that are not valid (and the
system topics' on the form) before asking the cluster anything."""

from __future__ import annotations

from typing import Any

import pytest

from rocketq.console.groups_view import UnknownGroupError, group_data
from rocketq.console.topics_view import BadInputError, topic_settings


@pytest.mark.parametrize(
    ("topic", "says"),
    [
        ("payments 1 1 0", "illegal characters"),
        ("", "empty"),
        ("TBW102", "system topic"),
        ("RMQ_SYS_TRACE_TOPIC", "system topic"),
    ],
)
def test_the_console_topic_form_refuses_bad_names(topic: str, says: str) -> None:
    with pytest.raises(BadInputError, match=says):
        topic_settings({"topic": topic})
    assert topic_settings({"topic": "orders"})["topic"] == "orders"


async def test_the_console_group_page_refuses_a_bad_name_before_asking() -> None:
    nobody: Any = None  # a call to the admin would fail with AttributeError
    with pytest.raises(UnknownGroupError, match="not a valid consumer group name"):
        await group_data(nobody, "bad group")
