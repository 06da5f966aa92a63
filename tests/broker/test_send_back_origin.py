"""A message given back must be of the topic its sender names (checked when authorization
is on): Sub on one topic and a group does not let a consumer copy any stored message onto
its retry topic by offset."""

from __future__ import annotations

import pytest

from rocketq.broker.broker import Broker
from rocketq.common.exceptions import NoPermissionError
from rocketq.common.message import TopicConfig, retry_topic
from rocketq.common.message_id import decode_offset_msg_id
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection
from tests.broker.test_wire import TOPIC, v2


async def _stored_offset(conn: Connection, topic: str) -> int:
    sent = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(topic, 0, ""), b"secret body"), 3.0
    )
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    return decode_offset_msg_id((sent.ext or {})["msgId"])[1]


async def test_only_a_message_of_the_named_topic_or_the_groups_retries_goes_back(
    wire: tuple[Broker, Connection],
) -> None:
    b, conn = wire
    b.topics.update(TopicConfig("Private", 1, 1))
    private = await _stored_offset(conn, "Private")
    mine = await _stored_offset(conn, TOPIC)
    before = b.store.max_phy_offset
    with pytest.raises(NoPermissionError, match="not of topic"):
        await b.send.send_back("g", private, 0, -1, origin_topic=TOPIC)
    with pytest.raises(NoPermissionError, match="not of topic"):
        await b.send.send_back("g", private, 0, -1, origin_topic=retry_topic("g"))
    assert b.store.max_phy_offset == before  # nothing copied
    copied = await b.send.send_back("g", mine, 0, -1, origin_topic=TOPIC)
    assert copied.end_offset > before
    # Unchecked (authorization off), as RocketMQ: the offset alone decides.
    assert (await b.send.send_back("g", private, 0, -1)).end_offset > copied.end_offset
