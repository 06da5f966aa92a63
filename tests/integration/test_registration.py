"""Registration of a broker with many topics, on real processes: the nameserver gets the
whole table once (compressed), then only what changes; a restarted nameserver gets the
whole table again; and the topic store (snapshot + change log) survives restarts and
SIGKILL, a torn last line included."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq import Message, Producer
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.remoting.broker_tables import (
    all_topic_config_request,
    parse_all_topic_config,
)
from rocketq.remoting.transport import request_once
from rocketq.sdk.admin import Admin
from tests.integration.conftest import SMALL_STORE
from tests.integration.waiting import wait_until

SNAPSHOT_TOPICS = 9_500
LOGGED_TOPICS = 500  # on top of the snapshot, in the change log: replayed at start
TOPICS = SNAPSHOT_TOPICS + LOGGED_TOPICS


def topic_doc(name: str) -> dict[str, object]:
    return {
        "topic_name": name,
        "read_queue_nums": 4,
        "write_queue_nums": 4,
        "perm": 6,
        "topic_sys_flag": 0,
        "order": False,
    }


def write_topic_store(config_dir: Path, names: list[str]) -> None:
    """A broker's topics.json and topics.log as a broker leaves them."""
    config_dir.mkdir(parents=True)
    head, tail = names[:SNAPSHOT_TOPICS], names[SNAPSHOT_TOPICS:]
    snapshot = {"dataVersion": len(head), "topicConfigTable": {n: topic_doc(n) for n in head}}
    (config_dir / "topics.json").write_text(json.dumps(snapshot))
    with (config_dir / "topics.log").open("w") as f:
        for version, name in enumerate(tail, len(head) + 1):
            f.write(json.dumps({"dataVersion": version, "put": [topic_doc(name)], "delete": []}))
            f.write("\n")


@pytest.fixture
def big_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, list[str]]]:
    """One nameserver and one broker that starts with TOPICS topics."""
    cluster = LocalCluster(ClusterSpec(data_dir=tmp_path / "c", broker_settings=SMALL_STORE))
    names = [f"Many-{i:05d}" for i in range(TOPICS)]
    write_topic_store(cluster.brokers[0].store / "config", names)
    try:
        cluster.start()
        yield cluster, names
    finally:
        cluster.stop()


async def runtime(admin: Admin) -> dict[str, str]:
    (broker,) = await admin.cluster_list()
    return broker.runtime


async def test_many_topics_registered_once_then_only_what_changes(
    big_cluster: tuple[LocalCluster, list[str]],
) -> None:
    cluster, names = big_cluster
    async with Admin(cluster.namesrv_addr) as admin:
        listed = set(await admin.topic_list())
        assert listed >= set(names)
        before = await runtime(admin)
        assert int(before["topicCount"]) >= TOPICS
        assert before["registerFullCount"] == "1"
        full_bytes = int(before["registerFullBytes"])
        deltas = int(before["registerDeltaCount"])

        await admin.update_topic("OneMore", read_queue_nums=2, write_queue_nums=2)
        seen_after = time.monotonic()

        async def listed_now() -> bool:
            return "OneMore" in await admin.topic_list()

        await wait_until(listed_now, "the new topic on the nameserver", timeout=1.0)
        print(f"new topic on the nameserver {time.monotonic() - seen_after:.3f} s after create")
        after = await runtime(admin)
        # Only the change went: the full table was not sent again.
        assert after["registerFullCount"] == "1"
        assert int(after["registerDeltaCount"]) == deltas + 1
        assert int(after["registerLastBytes"]) < 600 < full_bytes  # header and one topic
        route = await admin.topic_route("OneMore")
        assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 2)]

    # A restarted nameserver knows nothing: the broker's new channel carries the table.
    cluster.restart("namesrv-0")
    async with Admin(cluster.namesrv_addr) as admin:

        async def all_listed() -> bool:
            return set(await admin.topic_list()) >= {*names, "OneMore"}

        await wait_until(all_listed, "every topic on the restarted nameserver")
        again = await runtime(admin)
        assert again["registerFullCount"] == "2"
        print(
            f"{again['topicCount']} topics: full registration {again['registerFullBytes']} "
            f"bytes, a new topic {after['registerLastBytes']} bytes"
        )


async def broker_topics(addr: str) -> dict[str, int]:
    """The broker's topics and their write queue numbers (GET_ALL_TOPIC_CONFIG)."""
    answer = await request_once(addr, all_topic_config_request(), 5.0)
    table = parse_all_topic_config(answer).topic_config_table
    return {name: t.write_queue_nums for name, t in table.items()}


async def test_topic_configs_survive_restart_and_sigkill(cluster: LocalCluster) -> None:
    broker = cluster.brokers[0]
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        for i in range(5):
            await admin.update_topic(f"Kept{i}", read_queue_nums=i + 1, write_queue_nums=i + 1)
    async with Producer("pg-registration", ns) as producer:
        assert (await producer.send(Message("AutoKept", b"x"))).ok

    cluster.restart(broker.name)  # graceful

    topics = await broker_topics(broker.addr)
    assert {f"Kept{i}": i + 1 for i in range(5)}.items() <= topics.items()
    assert "AutoKept" in topics

    async with Admin(ns) as admin:
        await admin.update_topic("BeforeKill", read_queue_nums=3, write_queue_nums=3)
        await admin.delete_topic("Kept0")
    cluster.kill(broker.name, signal.SIGKILL)
    log_path = broker.store / "config" / "topics.log"
    assert log_path.exists()  # the changes since the last compaction
    with log_path.open("ab") as f:  # an append the kill cut short
        f.write(b'{"dataVersion":999,"put":[{"topic_name":"Torn","read_que')
    cluster.restart(broker.name)

    topics = await broker_topics(broker.addr)
    assert topics.get("BeforeKill") == 3
    assert "Kept0" not in topics and topics.get("Kept4") == 5
    assert "Torn" not in topics
    async with Admin(ns) as admin:

        async def routed() -> bool:
            listed = set(await admin.topic_list())
            return {"BeforeKill", "Kept4", "AutoKept"} <= listed and "Kept0" not in listed

        await wait_until(routed, "the nameserver to route the recovered topics")
