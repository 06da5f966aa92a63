"""Topic and consumer/producer group names: what a valid one is, and which topics are the
cluster's own (RocketMQ's ``TopicValidator`` and the client's ``Validators``).

A name is 1 to 127 (a topic) or 255 (a group) characters of ``[%|a-zA-Z0-9_-]``. Nothing
else: no spaces, no ``@`` (the consumer offset table's ``topic@group`` keys), no control
characters, no non-ASCII letters. Every text format that carries names (the nameserver
registration's topic lines, the state files) relies on it, so a name is checked wherever it
enters: a request, an admin call, a console form, a state file being loaded.

*Reserved* topics are the cluster's own: the system topics (``TBW102``,
``SCHEDULE_TOPIC_XXXX``, the transaction and trace topics ...), any ``rmq_sys_`` topic, and a
group's ``%RETRY%`` and ``%DLQ%`` topics. The broker creates them itself; a client's send
never auto-creates one and an admin may not create the system ones.
"""

from __future__ import annotations

import re
from typing import Final

from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRACE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

TOPIC_MAX_LENGTH: Final = 127
GROUP_MAX_LENGTH: Final = 255
NAME_PATTERN: Final = re.compile(r"[%|a-zA-Z0-9_-]+")
ALLOWED_CHARACTERS: Final = "letters, digits, '%', '|', '-' and '_'"

SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC_V2: Final = "SCHEDULE_TOPIC_XXXX_V2"

# RocketMQ's TopicValidator.SYSTEM_TOPIC_SET (its BenchmarkTest left out: rocketq's
# benchmarks create and use it as an ordinary topic).
SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        SCHEDULE_TOPIC_V2,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TRACE_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        TIMER_TOPIC,
    }
)
# Prefixes of topics the broker makes for itself: the system topics' and a group's retry
# and dead-letter topics.
RESERVED_PREFIXES: Final = (SYSTEM_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)


def _show(name: object) -> str:
    """A name for an error message, cut short (a request may carry megabytes)."""
    text = repr(name)
    return text if len(text) <= 80 else text[:70] + "...'"


def _check(name: str, what: str, max_length: int) -> str:
    if not isinstance(name, str):
        raise MessageIllegalError(f"the {what} name {_show(name)} is not a text")
    if not name:
        raise MessageIllegalError(f"the {what} name is empty; give a {what} name")
    if len(name) > max_length:
        raise MessageIllegalError(
            f"the {what} name {_show(name)} is {len(name)} characters; at most {max_length} "
            "are allowed"
        )
    if NAME_PATTERN.fullmatch(name) is None:
        bad = sorted({c for c in name if NAME_PATTERN.fullmatch(c) is None})
        shown = ", ".join(repr(c) for c in bad[:5])
        raise MessageIllegalError(
            f"the {what} name {_show(name)} has illegal characters ({shown}); use only "
            f"{ALLOWED_CHARACTERS}"
        )
    return name


def check_topic_name(name: str) -> str:
    """``name`` if it is a valid topic name (1-127 characters of ``[%|a-zA-Z0-9_-]``);
    otherwise MessageIllegalError saying what is wrong."""
    return _check(name, "topic", TOPIC_MAX_LENGTH)


def check_group_name(name: str) -> str:
    """``name`` if it is a valid consumer or producer group name (1-255 characters of
    ``[%|a-zA-Z0-9_-]``); otherwise MessageIllegalError saying what is wrong."""
    return _check(name, "group", GROUP_MAX_LENGTH)


def is_valid_topic_name(name: str) -> bool:
    """Whether :func:`check_topic_name` takes ``name``."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= TOPIC_MAX_LENGTH
        and NAME_PATTERN.fullmatch(name) is not None
    )


def is_valid_group_name(name: str) -> bool:
    """Whether :func:`check_group_name` takes ``name``."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= GROUP_MAX_LENGTH
        and NAME_PATTERN.fullmatch(name) is not None
    )


def is_reserved_topic(name: str) -> bool:
    """Whether ``name`` is one of the cluster's own topics: a system topic, an ``rmq_sys_``
    topic, or a group's retry or dead-letter topic."""
    return name in SYSTEM_TOPICS or name.startswith(RESERVED_PREFIXES)


def is_system_topic(name: str) -> bool:
    """RocketMQ's ``TopicValidator.isSystemTopic``: the system topics and ``rmq_sys_*``
    (not the groups' retry and dead-letter topics, which an admin may create)."""
    return name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIX)


def check_user_topic(name: str) -> str:
    """``name`` if it is a valid topic a client may create (by a send's auto-create, a v2
    route query or the like): :func:`check_topic_name`, and not reserved."""
    check_topic_name(name)
    if is_reserved_topic(name):
        if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
            why = "a consumer group's retry topic, which the broker creates"
        elif name.startswith(DLQ_GROUP_TOPIC_PREFIX):
            why = "a consumer group's dead-letter topic, which the broker creates"
        else:
            why = "a system topic of the cluster"
        raise MessageIllegalError(f"the topic name {name!r} is reserved: it is {why}")
    return name
