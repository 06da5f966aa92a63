"""Topic and group names on real processes started by the launcher.

- A SEND with auto-create to ``payments 1 1 0`` (the name that once split the broker's
  registration, so that the nameserver read ``payments`` as perm 0 with 1/1 queues) is
  refused and creates nothing; so are sends auto-creating reserved topics
  (``%DLQ%secret-cg``, ``rmq_sys_mine``) and a heartbeat naming a bad group or topic.
  ``payments`` keeps its route and takes messages.
- A broker whose topics.log, subscriptionGroup.json and consumerOffset.json hold a bad
  entry each (what an older broker could have written) starts, logs each entry once
  naming its file, and serves everything else.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq import Message, Producer
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.errors import TopicNotExistError
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import request_once
from rocketq.sdk.admin import Admin
from rocketq.sdk.client import consumer_heartbeat, producer_heartbeat
from rocketq.sdk.wire import send_request
from tests.integration.security_helpers import running
from tests.integration.waiting import wait_until

SPLITTING: str = "payments 1 1 0"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(data_dir=tmp_path_factory.mktemp("names"), metrics=False)
    with running(spec) as c:
        yield c


async def raw_send(cluster: LocalCluster, topic: str) -> RemotingCommand:
    """A SEND that auto-creates its topic from TBW102, as a client skipping the SDK sends it."""
    request = send_request(
        b"x", "", group="pg-names", topic=topic, queue_id=0, born_timestamp=int(time.time())
    )
    return await request_once(cluster.brokers[0].addr, request, 5.0)


async def route_perm_and_queues(ns: str, topic: str) -> tuple[int, int, int]:
    async with Admin(ns) as admin:
        (q,) = (await admin.topic_route(topic)).queue_datas
    return q.perm, q.read_queue_nums, q.write_queue_nums


async def topic_list(ns: str) -> list[str]:
    async with Admin(ns) as admin:
        return await admin.topic_list()


async def test_a_send_with_a_splitting_name_creates_nothing_and_payments_stays_writable(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic("payments", read_queue_nums=4, write_queue_nums=4)
    assert await route_perm_and_queues(ns, "payments") == (6, 4, 4)

    answer = await raw_send(cluster, SPLITTING)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL, answer
    assert "illegal characters" in (answer.remark or "")
    for reserved in ("%DLQ%secret-cg", "%RETRY%secret-cg", "rmq_sys_mine", "SELF_TEST_TOPIC"):
        answer = await raw_send(cluster, reserved)
        assert answer.code in (ResponseCode.NO_PERMISSION, ResponseCode.MESSAGE_ILLEGAL), (
            reserved,
            answer,
        )
    # A heartbeat naming a bad group, or a group subscribing to a bad topic, registers
    # nothing (not even the good producer group beside it).
    for heartbeat in (
        consumer_heartbeat(
            "cid-names",
            "bad group",
            consume_type="CONSUME_PASSIVELY",
            message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscriptions={"payments": ("*", "TAG")},
        ),
        consumer_heartbeat(
            "cid-names",
            "cg-names",
            consume_type="CONSUME_PASSIVELY",
            message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscriptions={"pay@ments": ("*", "TAG")},
        ),
        producer_heartbeat("cid-names", "pg names"),
    ):
        answer = await request_once(cluster.brokers[0].addr, heartbeat, 5.0)
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL, answer
        assert "illegal characters" in (answer.remark or "")

    # A good auto-create after them: once the nameserver has it, it has the broker's
    # table as it is after every call above.
    assert (await raw_send(cluster, "after-names")).code == ResponseCode.SUCCESS
    await wait_until(lambda: _listed(ns, "after-names"), "after-names in the nameserver's topics")
    topics = await topic_list(ns)
    for refused in (SPLITTING, "%DLQ%secret-cg", "%RETRY%secret-cg", "rmq_sys_mine"):
        assert refused not in topics
    async with Admin(ns) as admin:
        assert "cg-names" not in await admin.group_list()
        assert "bad group" not in await admin.group_list()
        with pytest.raises(TopicNotExistError):
            await admin.topic_route("%DLQ%secret-cg")
    assert await route_perm_and_queues(ns, "payments") == (6, 4, 4)
    async with Producer("pg-names", ns) as producer:
        assert (await producer.send(Message("payments", b"still writable"))).ok


async def _listed(ns: str, topic: str) -> bool:
    return topic in await topic_list(ns)


def _table_version(config_dir: Path) -> int:
    """The topic table's version as the broker left it: its snapshot's, or the last line
    of its log."""
    snapshot = config_dir / "topics.json"
    version = json.loads(snapshot.read_text())["dataVersion"] if snapshot.exists() else 0
    log = config_dir / "topics.log"
    if log.exists():
        for line in log.read_bytes().splitlines():
            version = max(version, int(json.loads(line)["dataVersion"]))
    return version


async def test_a_bad_entry_in_each_state_file_is_skipped_and_the_broker_starts(
    cluster: LocalCluster,
) -> None:
    ns = cluster.namesrv_addr
    broker = cluster.brokers[0]
    async with Admin(ns) as admin:
        await admin.update_topic("payments", read_queue_nums=4, write_queue_nums=4)
        await admin.update_sub_group("cg-kept")
    cluster.kill(broker.name, signal.SIGTERM)

    config_dir = broker.store / "config"
    version = _table_version(config_dir)
    bad = {
        "dataVersion": version + 1,
        "put": [{"topic_name": SPLITTING, "read_queue_nums": 1, "write_queue_nums": 1}],
        "delete": [],
    }
    good = {
        "dataVersion": version + 2,
        "put": [{"topic_name": "restored", "read_queue_nums": 2, "write_queue_nums": 2}],
        "delete": [],
    }
    with (config_dir / "topics.log").open("ab") as f:
        f.write(json.dumps(bad).encode() + b"\n" + json.dumps(good).encode() + b"\n")
    groups_path = config_dir / "subscriptionGroup.json"
    groups = json.loads(groups_path.read_text())
    groups["subscriptionGroupTable"]["bad group"] = {"group_name": "bad group"}
    groups_path.write_text(json.dumps(groups))
    offsets_path = config_dir / "consumerOffset.json"
    offsets = json.loads(offsets_path.read_text()) if offsets_path.exists() else {}
    offsets.setdefault("offsetTable", {})["pay ments@cg-kept"] = {"0": 5}
    offsets["offsetTable"]["payments@cg-kept"] = {"0": 0}
    offsets_path.write_text(json.dumps(offsets))

    await asyncio.to_thread(cluster.restart, broker.name)

    log = broker.log.read_text(errors="replace")
    assert "topics.log: line" in log and SPLITTING in log, log[-3000:]
    assert "subscriptionGroup.json: skipping the entry 'bad group'" in log
    assert "consumerOffset.json: skipping the entry 'pay ments@cg-kept'" in log
    await wait_until(lambda: _listed(ns, "restored"), "the restored topic in the nameserver")
    assert SPLITTING not in await topic_list(ns)
    assert await route_perm_and_queues(ns, "payments") == (6, 4, 4)
    assert await route_perm_and_queues(ns, "restored") == (6, 2, 2)
    async with Admin(ns) as admin:
        assert "cg-kept" in await admin.group_list()
    async with Producer("pg-names", ns) as producer:
        assert (await producer.send(Message("payments", b"after restart"))).ok
    # The table was compacted without the bad entry: the next start logs nothing of it.
    assert SPLITTING not in (config_dir / "topics.json").read_text()
