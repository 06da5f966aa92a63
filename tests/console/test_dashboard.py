"""The console's dashboard: the sampler's arithmetic on plain samples, then the page and
``/api/dashboard`` against a real cluster (one broker group, started by the launcher once
for the module) sampled every 0.3 s."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.cluster.pids import wait_until
from rocketq.console.app import create_app
from rocketq.console.sampler import Sample, point_between, points_of, top_topics
from rocketq.sdk.admin import Admin
from rocketq.sdk.background_loop import run_blocking
from tests.console.test_api import LOCAL
from tests.integration.conftest import SMALL_STORE

TOPIC = "ConsoleDash"
GROUP = "cg-console-dash"
URL = re.compile(r"https?://")


# -- the arithmetic, no cluster ------------------------------------------------------------


def sample(
    mono: float, put: dict[tuple[str, str], int], broker_put: dict[str, int], got: dict[str, int]
) -> Sample:
    return Sample(int(mono * 1000), mono, put, broker_put, got)


def test_tps_is_the_difference_over_the_seconds_between_samples() -> None:
    a = sample(0.0, {("T", "b-a"): 100, ("U", "b-a"): 5}, {"b-a": 105}, {"b-a": 40})
    b = sample(
        2.0,
        {("T", "b-a"): 120, ("U", "b-a"): 5, ("New", "b-a"): 900},
        {"b-a": 125, "b-new": 7},
        {"b-a": 50},
    )
    p = point_between(a, b)
    assert p.topic_in == {"T": 10.0, "U": 0.0}  # a key new in b has no rate yet
    assert p.broker_in == {"b-a": 10.0} and p.broker_out == {"b-a": 5.0}


def test_a_total_that_went_down_counts_as_zero_and_top_topics_rank_by_average() -> None:
    a = sample(0.0, {("T", "b"): 50, ("U", "b"): 0}, {"b": 50}, {"b": 10})
    b = sample(1.0, {("T", "b"): 10, ("U", "b"): 4}, {"b": 14}, {"b": 0})  # b restarted
    c = sample(2.0, {("T", "b"): 12, ("U", "b"): 8}, {"b": 20}, {"b": 0})
    points = points_of([a, b, c])
    assert [p.topic_in["T"] for p in points] == [0.0, 2.0]
    assert [p.broker_out["b"] for p in points] == [0.0, 0.0]
    assert top_topics(points) == [("U", 4.0), ("T", 1.0)]
    assert top_topics(points, 1) == [("U", 4.0)] and top_topics([]) == []


# -- against a real cluster ----------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("console-dash"), brokers=1, broker_settings=SMALL_STORE
    )
    with LocalCluster(spec) as started:
        yield started


def test_before_two_samples_the_page_says_it_is_collecting(cluster: LocalCluster) -> None:
    with TestClient(
        create_app(cluster.namesrv_addr, sample_interval=60.0), base_url=LOCAL
    ) as client:
        data = client.get("/api/dashboard").json()
        assert data["samples"] <= 1 and data["timestamps"] == [] and data["interval_seconds"] == 60
        page = client.get("/dashboard")
        assert page.status_code == 200
        assert "Collecting samples (first figures after 60.0 s)" in page.text
        assert "<svg" not in page.text and "kept in\nmemory only" in page.text
        assert 'href="/dashboard"' in client.get("/").text


async def start_consumer(ns: str) -> PushConsumer:
    async with Admin(ns) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    consumer = PushConsumer(
        GROUP, ns, consume_from=ConsumeFrom.FIRST_OFFSET, persist_consumer_offset_interval=0.2
    )
    consumer.subscribe(TOPIC, "*")

    async def keep(msgs: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.SUCCESS

    consumer.on_message(keep)
    await consumer.start()
    return consumer


async def send(ns: str, count: int) -> None:
    async with Producer("pg-console-dash", ns) as producer:
        for i in range(count):
            await producer.send(Message(TOPIC, f"dash-{i}".encode()))


def test_the_dashboard_charts_broker_and_topic_tps(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    consumer = run_blocking(start_consumer(ns))
    try:
        with TestClient(create_app(ns, sample_interval=0.3), base_url=LOCAL) as client:
            run_blocking(send(ns, 50))

            def figures() -> dict[str, Any]:
                data: dict[str, Any] = client.get("/api/dashboard").json()
                return data

            def moved() -> bool:
                data = figures()
                broker = data["brokers"].get("broker-a", {})
                return (
                    max(data["topics"].get(TOPIC, {}).get("tps_in", [0]), default=0) > 0
                    and max(broker.get("tps_in", [0]), default=0) > 0
                    and max(broker.get("tps_out", [0]), default=0) > 0
                )

            assert wait_until(moved, time.monotonic() + 15), figures()
            data = figures()
            assert data["samples"] >= 2
            assert len(data["timestamps"]) == len(data["topics"][TOPIC]["tps_in"]) >= 1
            assert data["timestamps"] == sorted(data["timestamps"])
            assert data["topics"][TOPIC]["average"] > 0 and len(data["topics"]) <= 10
            page = client.get("/dashboard")
            assert page.status_code == 200 and "Collecting samples" not in page.text
            assert page.text.count("<svg") == 2
            assert "<path" in page.text and TOPIC in page.text and "broker-a in" in page.text
            assert not URL.search(page.text), URL.findall(page.text)
            assert "<script" not in page.text.split("<main>", 1)[1].split("</main>", 1)[0]
    finally:
        run_blocking(consumer.shutdown())
