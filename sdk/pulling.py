"""What the push consumer and the lite pull consumer share about pulling: where a queue is
read from, the PULL_MESSAGE request and its wait, and what is done to a pull's answer
before anyone sees it (records decoded up to the first that does not decode, bodies
checked and inflated, retried messages given their topic back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketq.common.exceptions import TopicNotExistError
from rocketq.common.message import (
    MASTER_ID,
    PROPERTY_RETRY_TOPIC,
    MessageExt,
    MessageQueue,
    retry_topic,
)
from rocketq.sdk.client import ClientInstance
from rocketq.sdk.consumer_types import MessageSelector
from rocketq.sdk.message_body import (
    MAX_BODY_INFLATE_RATIO,
    MAX_MESSAGE_SIZE,
    BadMessageError,
    check_messages,
    decode_pulled,
)
from rocketq.sdk.wire import PullReply, pull_request

# Seconds a queue's pull loop waits after a failed pull before it pulls again.
PULL_DELAY_WHEN_EXCEPTION: Final = 3.0
# A pull waits for the broker's answer this many seconds longer than the broker may hold it.
PULL_TIMEOUT_MARGIN: Final = 15.0


def finish_pulled(
    msgs: list[MessageExt],
    group: str,
    *,
    max_body_bytes: int = MAX_MESSAGE_SIZE * MAX_BODY_INFLATE_RATIO,
    check_crc: bool = True,
) -> tuple[list[MessageExt], list[BadMessageError]]:
    """Undo what the store saw: check each body's CRC and inflate compressed bodies (to
    at most ``max_body_bytes``), and give retried messages their topic back.

    Returns:
        The good messages, and the errors of the bad ones (their messages left as stored).
    """
    good, bad = check_messages(msgs, max_body_bytes=max_body_bytes, check_crc=check_crc)
    retry = retry_topic(group)
    for msg in good:
        if msg.topic == retry:
            real = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if real:
                msg.topic = real
    return good, bad


def after_broken(
    mq: MessageQueue, records: list[MessageExt], requested: int, broken: Exception
) -> tuple[int, BadMessageError | None]:
    """Where to pull next when a pull's answer holds a record that does not decode after
    ``records``: from that record (it comes first next time), or, when it came first,
    one past the offset pulled, with the error that reports the skip."""
    if records:
        return records[-1].queue_offset + 1, None
    return requested + 1, BadMessageError.undecodable(mq.topic, mq.queue_id, requested, str(broken))


def finish_messages(
    msgs: list[MessageExt],
    group: str,
    *,
    max_body_bytes: int = MAX_MESSAGE_SIZE * MAX_BODY_INFLATE_RATIO,
    check_crc: bool = True,
) -> list[MessageExt]:
    """:func:`finish_pulled`'s good messages; raises the first bad message's
    BadMessageError."""
    good, bad = finish_pulled(msgs, group, max_body_bytes=max_body_bytes, check_crc=check_crc)
    if bad:
        raise bad[0]
    return good


@dataclass(slots=True)
class Found:
    """What a FOUND pull brought, ready to hand over.

    Attributes:
        messages: The good messages, in queue order, bodies checked and inflated.
        bad: The errors of the messages (or the record) that cannot be delivered.
        next_offset: Where the queue is read from next.
    """

    messages: list[MessageExt]
    bad: list[BadMessageError]
    next_offset: int


def read_found(
    reply: PullReply,
    mq: MessageQueue,
    requested: int,
    group: str,
    *,
    max_body_bytes: int,
    check_crc: bool,
) -> Found:
    """Decode and check a FOUND pull's records (pulled from offset ``requested``); a record
    that does not decode ends them, and the next pull starts at it (or past it when it came
    first, reported among ``bad``)."""
    records, broken = decode_pulled(reply.records)
    msgs, bad = finish_pulled(records, group, max_body_bytes=max_body_bytes, check_crc=check_crc)
    next_offset = reply.next_begin_offset
    if broken is not None:
        next_offset, skipped = after_broken(mq, records, requested, broken)
        if skipped is not None:
            bad.append(skipped)
    return Found(msgs, bad, next_offset)


async def read_address(client: ClientInstance, mq: MessageQueue, preferred: int = MASTER_ID) -> str:
    """The broker to pull ``mq`` from (the one of id ``preferred``, else the master, else a
    slave), looking the route up again when the broker group is not known; raises
    TopicNotExistError when it has left the topic's route."""
    addr = client.read_addr(mq.broker_name, preferred)
    if addr is None:
        await client.update_route(mq.topic)
        addr = client.read_addr(mq.broker_name, preferred)
    if addr is None:
        raise TopicNotExistError(f"broker {mq.broker_name} has left the route of {mq.topic}")
    return addr


async def pull(
    client: ClientInstance,
    addr: str,
    *,
    group: str,
    mq: MessageQueue,
    offset: int,
    selector: MessageSelector,
    batch_size: int,
    suspend: float,
    commit_offset: int | None = None,
) -> PullReply:
    """One PULL_MESSAGE of ``mq`` from ``offset`` at the broker ``addr``, which may hold it
    up to ``suspend`` seconds waiting for messages (sent as milliseconds)."""
    req = pull_request(
        group=group,
        topic=mq.topic,
        queue_id=mq.queue_id,
        offset=offset,
        max_msg_nums=batch_size,
        commit_offset=commit_offset,
        suspend_timeout_ms=round(suspend * 1000),
        subscription=selector.expression,
        expression_type=selector.type,
    )
    return await client.broker(addr).pull(req, suspend + PULL_TIMEOUT_MARGIN)
