"""The broker calling a client (broker/client_channels.py and the two handlers of
broker/wire/admin.py that forward to one): an admin's GET_CONSUMER_RUNNING_INFO and
CONSUME_MESSAGE_DIRECTLY go to the consumer over the connection its heartbeat came on and
the client's answer comes back as it gave it; a client that is not there, a bad message
id, a client that does not answer, a client without a consumer. Also what the heartbeat's
command header says of the client (language, version) in the connection list, and the
CLUSTER property the broker adds to what it stores."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rocketq.broker.broker import Broker
from rocketq.broker.client_channels import client_channels
from rocketq.common.exceptions import ConsumeMsgTimeoutError
from rocketq.common.message_id import decode_offset_msg_id, encode_offset_msg_id
from rocketq.common.record import decode_records
from rocketq.remoting import fastjson
from rocketq.remoting.codes import (
    LanguageCode,
    MQVersion,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import Connection, Handler, connect
from rocketq.sdk.client import ClientInstance, consumer_heartbeat
from tests.broker.test_wire import TOPIC, heartbeat, v2
from tests.integration.waiting import wait_until

RESULT = b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":2}'


class FakeConsumer:
    """A client connection that answers what the broker forwards with canned answers and
    keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[RemotingCommand] = []
        self.answers: dict[int, RemotingCommand] = {}
        self.silent = False

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.answer,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.answer,
        }

    def answer(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        self.asked.append(cmd)
        if self.silent:
            return None
        canned = self.answers[cmd.code]
        return cmd.response(canned.code, canned.ext, canned.body, canned.remark)


@pytest.fixture
async def consumer(
    wire: tuple[Broker, Connection],
) -> AsyncIterator[tuple[FakeConsumer, Connection]]:
    """A consumer of group cg1 (client c1@1) heartbeating to the broker like a Java client:
    binary header, language JAVA, version 4.9.8."""
    b, _ = wire
    fake = FakeConsumer()
    client = await connect(f"127.0.0.1:{b.port}", fake.handlers())
    beat = RemotingCommand(
        RequestCode.HEART_BEAT,
        None,
        heartbeat("c1@1", "cg1"),
        language=LanguageCode.JAVA,
        version=MQVersion.V4_9_8,
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert (await client.invoke(beat, 5.0)).code == ResponseCode.SUCCESS
    try:
        yield fake, client
    finally:
        client.close()


async def ask(conn: Connection, code: int, **ext: str) -> RemotingCommand:
    return await conn.invoke(RemotingCommand(code, ext), 15.0)


async def test_running_info_is_the_clients_answer(
    wire: tuple[Broker, Connection], consumer: tuple[FakeConsumer, Connection]
) -> None:
    _b, admin = wire
    fake, _ = consumer
    body = b'{"mqTable":{},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}'
    fake.answers[RequestCode.GET_CONSUMER_RUNNING_INFO] = RemotingCommand(0, None, body)
    answer = await ask(
        admin,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        consumerGroup="cg1",
        clientId="c1@1",
        jstackEnable="true",
    )
    assert (answer.code, bytes(answer.body or b"")) == (ResponseCode.SUCCESS, body)
    (asked,) = fake.asked
    assert asked.code == RequestCode.GET_CONSUMER_RUNNING_INFO
    assert asked.ext == {"consumerGroup": "cg1", "clientId": "c1@1", "jstackEnable": "true"}
    # The client's own error goes back as it gave it.
    fake.answers[RequestCode.GET_CONSUMER_RUNNING_INFO] = RemotingCommand(
        ResponseCode.SYSTEM_ERROR, remark="The Consumer Group <cg1> not exist in this consumer"
    )
    refused = await ask(
        admin, RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="cg1", clientId="c1@1"
    )
    assert refused.code == ResponseCode.SYSTEM_ERROR and "not exist" in str(refused.remark)


async def test_the_connection_list_names_the_clients_language_and_version(
    wire: tuple[Broker, Connection], consumer: tuple[FakeConsumer, Connection]
) -> None:
    _b, admin = wire
    listed = await ask(admin, RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="cg1")
    (connection,) = fastjson.loads(bytes(listed.body or b""))["connectionSet"]
    assert (connection["language"], connection["version"]) == ("JAVA", MQVersion.V4_9_8)


async def test_a_stored_message_goes_to_the_client_to_consume(
    wire: tuple[Broker, Connection], consumer: tuple[FakeConsumer, Connection]
) -> None:
    b, admin = wire
    fake, _ = consumer
    fake.answers[RequestCode.CONSUME_MESSAGE_DIRECTLY] = RemotingCommand(0, None, RESULT)
    sent = await admin.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 0, "TAGS\x01TagA\x02"), b"hi"), 5
    )
    msg_id = (sent.ext or {})["msgId"]
    answer = await ask(
        admin,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        consumerGroup="cg1",
        clientId="c1@1",
        msgId=msg_id,
    )
    assert (answer.code, bytes(answer.body or b"")) == (ResponseCode.SUCCESS, RESULT)
    (asked,) = fake.asked
    assert asked.ext == {
        "consumerGroup": "cg1",
        "clientId": "c1@1",
        "msgId": msg_id,
        "brokerName": b.config.broker_name,
    }
    (msg,) = decode_records(bytes(asked.body or b""))
    assert (msg.body, msg.tags, msg.offset_msg_id) == (b"hi", "TagA", msg_id)
    assert msg.properties["CLUSTER"] == b.config.broker_cluster_name
    # A direct consume is a diagnostic: the broker keeps no offset for it.
    assert b.offsets.query("cg1", TOPIC, 0) < 0


async def test_what_cannot_be_forwarded_is_refused_clearly(
    wire: tuple[Broker, Connection], consumer: tuple[FakeConsumer, Connection]
) -> None:
    b, admin = wire
    fake, client = consumer
    code = RequestCode.GET_CONSUMER_RUNNING_INFO
    unknown_group = await ask(admin, code, consumerGroup="nobody", clientId="c1@1")
    assert unknown_group.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert "The Consumer <nobody> <c1@1> not online" in str(unknown_group.remark)
    assert "group nobody has no client connected to this broker" in str(unknown_group.remark)
    unknown_client = await ask(admin, code, consumerGroup="cg1", clientId="c9@9")
    assert unknown_client.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert "clients of cg1 are c1@1" in str(unknown_client.remark)
    missing = await ask(admin, code, consumerGroup="cg1")
    assert missing.code == ResponseCode.MESSAGE_ILLEGAL and "clientId" in str(missing.remark)
    direct = RequestCode.CONSUME_MESSAGE_DIRECTLY
    not_an_id = await ask(admin, direct, consumerGroup="cg1", clientId="c1@1", msgId="zz")
    assert not_an_id.code == ResponseCode.MESSAGE_ILLEGAL
    assert "not hex" in str(not_an_id.remark) and "offset_msg_id" in str(not_an_id.remark)
    nowhere = encode_offset_msg_id(b.store.commitlog.store_host, b.store.max_phy_offset + 4096)
    past = await ask(admin, direct, consumerGroup="cg1", clientId="c1@1", msgId=nowhere)
    assert past.code == ResponseCode.QUERY_NOT_FOUND and nowhere in str(past.remark)
    assert fake.asked == []
    # A client whose connection closed is no longer there to ask.
    client.close()
    await wait_until(lambda: client_channels(b.consumers).get("c1@1") is None, "the close")
    gone = await ask(admin, code, consumerGroup="cg1", clientId="c1@1")
    assert gone.code == ResponseCode.CONSUMER_NOT_ONLINE


async def test_a_client_that_does_not_answer_times_out(
    wire: tuple[Broker, Connection], consumer: tuple[FakeConsumer, Connection]
) -> None:
    b, _ = wire
    fake, _ = consumer
    fake.silent = True
    request = RemotingCommand(
        RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "cg1", "clientId": "c1@1"}
    )
    with pytest.raises(ConsumeMsgTimeoutError, match="did not answer GET_CONSUMER_RUNNING_INFO"):
        await client_channels(b.consumers).call("cg1", "c1@1", request, timeout=0.2)
    assert len(fake.asked) == 1


async def test_a_client_without_a_consumer_says_so(wire: tuple[Broker, Connection]) -> None:
    b, admin = wire
    addr = f"127.0.0.1:{b.port}"
    client = ClientInstance("127.0.0.1:1", client_id="bare@1")  # no consumer sets on_request
    try:
        beat = consumer_heartbeat(
            client.client_id, "cg2", consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET", subscriptions={TOPIC: ("*", "TAG")},
        )  # fmt: skip
        await client.broker(addr).request(beat, 5.0)
        # The PYTHON language and rocketq's version of the SDK's heartbeat.
        channel = client_channels(b.consumers).get("bare@1")
        assert channel is not None and channel.language_name == "PYTHON"
        answer = await ask(
            admin, RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="cg2", clientId="bare@1"
        )
        assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "client bare@1 has no consumer (of group cg2)" in str(answer.remark)
    finally:
        await client.shutdown()


async def test_every_stored_message_names_the_cluster(wire: tuple[Broker, Connection]) -> None:
    b, conn = wire
    bare = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 1, ""), b"x"), 5
    )
    no_end = await conn.invoke(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, v2(TOPIC, 1, "KEYS\x01k"), b"y"), 5
    )
    records = []
    for sent in (bare, no_end):
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        view = b.store.message_by_offset(decode_offset_msg_id((sent.ext or {})["msgId"])[1])
        assert view is not None
        records.append(bytes(view))
        view.release()
    first, second = (decode_records(r)[0] for r in records)
    assert first.properties == {"CLUSTER": "DefaultCluster"}
    assert second.properties == {"KEYS": "k", "CLUSTER": "DefaultCluster"}
    assert second.user_properties() == {}  # a system property, as RocketMQ's
