"""A broker whose store sits on a real small file system (a 48 MiB tmpfs) that fills under
sends: the process stays up, sends are refused with RocketMQ's code 14 and text, every
acknowledged message can still be pulled, cluster-list, /readyz and /metrics say so; once
space is freed the broker takes sends again by itself and nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq import Admin, ConsumeFrom, Message, Producer, PullConsumer
from rocketq.chaos.disk import SmallDisks, small_disks_unavailable_reason
from rocketq.cli.cluster_list import HEADER, rows
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.common.exceptions import RocketqError
from tests.integration.waiting import wait_until
from tests.system_deps import unavailable

DISK_MIB = 48
FILLER_MIB = 20
BODY = 48 * 1024
TOPIC = "DiskFull"
SETTINGS = {
    "mapped_file_size_commit_log": str(4 * 1024 * 1024),
    "max_hash_slot_num": "4096",
    "max_index_num": "16384",
    # The timer that measures the disk (and takes sends again) runs every second, and
    # retention does not delete segments to make room: the test frees space itself.
    "clean_resource_interval": "1000",
    "disk_space_clean_forcibly_ratio": "1.0",
    "disk_max_used_space_ratio": "95",
}


@contextlib.contextmanager
def small_disk(path: Path, mib: int) -> Iterator[Path]:
    """A tmpfs of ``mib`` MiB mounted on ``path`` (root only; the chaos harness's small
    disks), unmounted on the way out."""
    reason = small_disks_unavailable_reason()
    if reason is not None:
        unavailable(reason)
    disks = SmallDisks(mib)
    disks.mount(path)
    try:
        yield path
    finally:
        disks.close()


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_a_full_disk_refuses_sends_keeps_reads_and_recovers_by_itself(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "cluster"
    spec = ClusterSpec(data_dir=data_dir, broker_settings=SETTINGS)
    cluster = LocalCluster(spec)
    broker = next(n for n in cluster.nodes if n.role == "broker")
    with small_disk(broker.home, DISK_MIB):
        filler = broker.home / "filler"
        filler.write_bytes(bytes(FILLER_MIB * 1024 * 1024))
        cluster.start()
        try:
            await scenario(cluster, filler)
        finally:
            cluster.stop()


async def scenario(cluster: LocalCluster, filler: Path) -> None:
    ns = cluster.namesrv_addr
    broker = next(n for n in cluster.nodes if n.role == "broker")
    acked: list[bytes] = []
    refused: RocketqError | None = None
    async with Producer("pg-disk-full", ns, retry_times_when_send_failed=0) as producer:
        for i in range(2000):  # 48 MiB hold fewer than 1000 of these
            body = b"%06d" % i + os.urandom(BODY - 6)  # random: the client compresses zeros
            try:
                await producer.send(Message(TOPIC, body), timeout=10)
            except RocketqError as exc:
                refused = exc
                break
            acked.append(body[:6])
        assert refused is not None, "the disk never filled"
        assert len(acked) > 100, f"refused after only {len(acked)} sends: {refused}"
        assert refused.code == 14, refused
        text = str(refused)
        assert "service not available now" in text and "the broker's disk is full [CL:" in text
        assert cluster.is_alive(broker.name), "the broker process ended"
        # Refused again (a state, not one failure), and the process is still there.
        with pytest.raises(RocketqError) as again:
            await producer.send(Message(TOPIC, b"refused"), timeout=10)
        assert again.value.code == 14
        assert cluster.is_alive(broker.name)

        # cluster-list, /readyz and /metrics say so; the broker stays ready to serve reads.
        async with Admin(ns) as admin:
            brokers = await admin.cluster_list()
        row = dict(zip(HEADER, rows(brokers)[0], strict=True))
        assert str(row["store"]).startswith("disk-full"), row
        status, body = http_get(broker.metrics_base + "/readyz")
        assert status == 200 and "disk-full" in body, body
        _, metrics = http_get(broker.metrics_url)
        assert write_state(metrics) == "1.0"

        # Every acknowledged message can be pulled while the disk is full.
        assert await pulled(ns, "cg-full", len(acked)) == sorted(acked)

        # Space comes back: sends are taken again within seconds, with no one acting.
        filler.unlink()

        async def takes_sends() -> bool:
            try:
                await producer.send(Message(TOPIC, b"999999"), timeout=5)
            except RocketqError:
                return False
            acked.append(b"999999")
            return True

        await wait_until(takes_sends, "the broker to take sends again", timeout=10)
    _, metrics = http_get(broker.metrics_url)
    assert write_state(metrics) == "0.0"
    assert await pulled(ns, "cg-after", len(acked)) == sorted(acked)
    assert cluster.is_alive(broker.name)


def write_state(metrics: str) -> str:
    found = re.search(r"^rocketq_store_write_state(?:\{[^}]*\})? (\S+)$", metrics, re.M)
    assert found is not None, "no rocketq_store_write_state in /metrics"
    return found.group(1)


async def pulled(ns: str, group: str, count: int) -> list[bytes]:
    """The first six bytes of each message of the topic, from the start, in queue order
    per queue, sorted (the send order across queues is by number)."""
    got: list[bytes] = []
    consumer = PullConsumer(group, ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(TOPIC)
    async with asyncio.timeout(30), consumer:
        while len(got) < count:
            got.extend(m.body[:6] for m in await consumer.poll(timeout=2))
    return sorted(got)
