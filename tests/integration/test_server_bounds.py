"""The bounds of real nameserver and broker processes, started by the launcher that
``rocketq cluster up`` uses, with short timeouts set through their config keys: peers that
send half a frame, say nothing, or announce a frame past the limit are cut off, clients go
on sending and looking up routes, and each crossing shows in the process's
``rocketq_remoting_rejected_total{reason}``."""

from __future__ import annotations

import asyncio
import struct
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from rocketq import Message, Producer, SendStatus
from rocketq.cluster.launcher import Node
from rocketq.cluster.remoting.command import RemotingCommand, encode
from tests.integration.conftest import MakeCluster
from tests.integration.waiting import wait_until


def rejected(node: Node) -> dict[str, float]:
    """The node's rocketq_remoting_rejected_total, by reason."""
    with urllib.request.urlopen(node.metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "rocketq_remoting_rejected":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[sample.labels["reason"]] = sample.value
    return out


async def open_raw(node: Node) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(node.host, node.port)


async def cut_off(reader: asyncio.StreamReader, timeout: float) -> float:
    """Seconds until the server closes the connection (AssertionError past ``timeout``)."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(65536):
                pass
    except ConnectionError:
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open {timeout:g} s") from None
    return time.monotonic() - started


async def send_one(namesrv: str, topic: str) -> None:
    async with Producer(group="pg-bounds", namesrv=namesrv) as producer:
        result = await producer.send(Message(topic, b"still served"))
        assert result.status is SendStatus.SEND_OK


async def test_real_servers_cut_off_slow_idle_and_oversized_peers(
    make_cluster: MakeCluster,
) -> None:
    bounds = {
        "server_frame_read_timeout_seconds": "0.5",
        "server_channel_max_idle_time_seconds": "2",
    }
    # (The nameserver keeps its idle timeout: the broker registers every 30 s.)
    cluster = make_cluster(
        broker_settings=bounds,
        nameserver_settings={"server_frame_read_timeout_seconds": "0.5"},
    )
    broker, namesrv = cluster.brokers[0], cluster.nameservers[0]
    before = rejected(broker)
    assert before["frame_read_timeout"] == 0 and before["idle"] == 0

    # Half a frame to the broker, and nothing more: cut off after the read timeout.
    slow_reader, slow_writer = await open_raw(broker)
    slow_writer.write(encode(RemotingCommand(10, body=b"x" * 4000))[:1000])
    await slow_writer.drain()
    # A peer that says nothing at all: cut off after the idle timeout.
    idle_reader, idle_writer = await open_raw(broker)
    # A frame announced past the nameserver's limit (16 MiB): cut off at its length.
    big_reader, big_writer = await open_raw(namesrv)
    big_writer.write(struct.pack(">I", 64 * 1024 * 1024) + b"\0" * 64)
    await big_writer.drain()

    assert 0.4 <= await cut_off(slow_reader, 10) < 10
    assert await cut_off(big_reader, 10) < 10
    # Meanwhile clients are served: a route from the nameserver, a send to the broker.
    await send_one(cluster.namesrv_addr, "BoundsTopic")
    await cut_off(idle_reader, 15)
    for writer in (slow_writer, idle_writer, big_writer):
        writer.close()

    await wait_until(
        lambda: rejected(broker)["frame_read_timeout"] >= 1 and rejected(broker)["idle"] >= 1,
        lambda: f"the broker's counters to move: {rejected(broker)}",
    )
    await wait_until(
        lambda: rejected(namesrv)["frame_too_large"] == 1,
        lambda: f"the nameserver's counter to move: {rejected(namesrv)}",
    )
    await send_one(cluster.namesrv_addr, "BoundsTopic")  # and still served after
