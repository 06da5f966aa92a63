"""No name splits a nameserver's routes: a registration whose topic line carries more
fields than a topic line has (the table of a broker that auto-created ``payments 1 1 0``)
is refused whole and leaves every route as it was; a JSON registration of such a name
too; a route query for a name that is not valid is MESSAGE_ILLEGAL; and the decoder reads
a topic line exactly or not at all (a hypothesis property over any line)."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketq.common.message import TopicConfig
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.register_body import (
    RegisterBodyError,
    crc32,
    decode_body,
    topic_line,
)
from tests.nameserver.test_server import Harness, register_request

I32 = struct.Struct(">i")


def raw_table(lines: list[bytes], version: int = 2) -> bytes:
    """A compressed registration table with the given topic lines as they are (what a
    broker without a name check would have sent)."""

    def chunk(data: bytes) -> bytes:
        return I32.pack(len(data)) + data

    head = chunk(json.dumps({"counter": version, "timestamp": 0}).encode())
    table = head + I32.pack(len(lines)) + b"".join(map(chunk, lines)) + chunk(b"[]")
    return zlib.compress(table)


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        await h.close()


async def test_a_table_split_by_a_name_is_refused_and_the_route_stays(servers: Harness) -> None:
    ns = await servers.start()
    broker, client = await servers.broker(ns), await servers.client(ns)
    assert (await broker.register(register_request(topics=("payments",)))).code == 0
    before = await client.route("payments")
    assert before.queue_datas[0].perm == 6 and before.queue_datas[0].write_queue_nums == 4

    # The line an unchecked 'payments 1 1 0' made: split at its spaces it read as the
    # topic payments with 1/1 queues and perm 0.
    split = b"payments 1 1 0 4 4 6 SINGLE_TAG 0 false"
    good = topic_line(TopicConfig("payments", 4, 4, 6))
    body = raw_table([good, split])
    req = register_request(topics=("payments",), data_version=2)
    assert req.ext is not None
    req.ext["bodyCrc32"] = str(crc32(body))
    answer = await broker.register(RemotingCommand(RequestCode.REGISTER_BROKER, req.ext, body))

    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "10 fields" in (answer.remark or ""), answer.remark
    after = await client.route("payments")
    assert after.queue_datas == before.queue_datas
    assert "payments 1 1 0" not in await client.topic_list()


async def test_a_json_registration_of_a_bad_name_is_refused(servers: Harness) -> None:
    ns = await servers.start()
    broker, client = await servers.broker(ns), await servers.client(ns)
    table = {
        "payments": {"topicName": "payments", "readQueueNums": 4, "writeQueueNums": 4},
        "payments 1 1 0": {"topicName": "payments 1 1 0", "readQueueNums": 1},
    }
    body = json.dumps(
        {"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": {}}}
    ).encode()
    req = register_request(topics=())
    assert req.ext is not None
    ext = {k: v for k, v in req.ext.items() if k not in ("compressed", "bodyCrc32")}
    answer = await broker.register(RemotingCommand(RequestCode.REGISTER_BROKER, ext, body))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "not a valid topic name" in (answer.remark or "")
    assert await client.route_code("payments") == ResponseCode.TOPIC_NOT_EXIST


@pytest.mark.parametrize("topic", ["payments 1 1 0", "a@b", "x" * 128, ""])
async def test_a_route_query_for_a_bad_name_is_message_illegal(
    servers: Harness, topic: str
) -> None:
    ns = await servers.start()
    client = await servers.client(ns)
    answer = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL, answer
    assert "topic name" in (answer.remark or "")


FIELD = st.one_of(
    st.from_regex(r"-?[0-9]{1,11}", fullmatch=True),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG", "true", "false", "", "+1", "01", "1_0"]),
    st.from_regex(r"[%|a-zA-Z0-9_-]{1,8}", fullmatch=True),
    st.text(max_size=6),
)


@settings(max_examples=400, deadline=2000)
@given(st.lists(FIELD, min_size=1, max_size=11))
@example(["payments", "1", "1", "-0", "SINGLE_TAG"])  # "-0" would read back as "0"
@example(["payments", "1", "1", "0", "4", "4", "6", "SINGLE_TAG", "0", "false"])
def test_a_topic_line_is_read_exactly_or_refused(fields: list[str]) -> None:
    """Whatever a line holds, the decoder either refuses it or reads a topic whose own line
    is that line byte for byte (the 5-field form, RocketMQ's, gains rocketq's two)."""
    line = " ".join(fields).encode()
    body = raw_table([line])
    try:
        got = decode_body(body, compressed=True, crc=0)
    except RegisterBodyError:
        return
    (topic,) = got.topics
    again = topic_line(topic).split(b" ")
    parts = line.split(b" ")
    if len(parts) == 5:
        parts += [b"0", b"false"]
    # Every field as it came; the filter type, which rocketq does not keep, aside.
    assert again[:4] + again[5:] == parts[:4] + parts[5:]
    assert parts[4] in (b"SINGLE_TAG", b"MULTI_TAG")
