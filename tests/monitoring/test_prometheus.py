"""The dashboards and alert rules against a real Prometheus.

A Raft group of three and a nameserver run under a short load: sends (single, batch,
delayed, transactional), a consumer group that keeps up, one that lags, one whose messages
end in its dead-letter queue. Prometheus (started the way ``rocketq cluster up --monitor``
starts it) scrapes them every second. Then every PromQL expression of every dashboard panel
must return at least one series, and every alert rule must run without error with its
measure returning a series: a panel that shows nothing is a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.cluster.monitor import RULES, Monitor, start_monitor
from rocketq.sdk.admin import Admin
from rocketq.sdk.background_loop import run_blocking
from rocketq.sdk.pull_consumer import PullConsumer
from rocketq.sdk.transaction import TransactionProducer, TransactionState
from tests.integration.conftest import SMALL_STORE
from tests.integration.waiting import wait_until
from tests.monitoring.conftest import need_prometheus, query, series, wait_for_series
from tools.promql import alert_measures, dashboard_queries

TOPIC = "Orders"


class _Commit:
    async def execute_local_transaction(self, msg: Message, arg: Any) -> TransactionState:
        return TransactionState.COMMIT

    def check_local_transaction(self, msg: MessageExt) -> TransactionState:
        return TransactionState.COMMIT


async def _load(ns: str) -> None:
    """Traffic of every kind the dashboards show; consumers left running where a gauge
    needs them (connections)."""
    async with Admin(ns) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    fast: list[MessageExt] = []

    async def keep(msgs: list[MessageExt]) -> ConsumeResult:
        fast.extend(msgs)
        return ConsumeResult.SUCCESS

    async def refuse(msgs: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.RECONSUME_LATER

    consumer = PushConsumer("cg-fast", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(TOPIC, "*")
    consumer.on_message(keep)
    # Every message it refuses goes straight to %DLQ%cg-dlq.
    dead = PushConsumer("cg-dlq", ns, consume_from=ConsumeFrom.FIRST_OFFSET, max_reconsume_times=0)
    dead.subscribe(TOPIC, "*")
    dead.on_message(refuse)
    await consumer.start()
    await dead.start()
    async with Producer("pg-monitor", ns) as producer:
        for i in range(40):
            await producer.send(Message(TOPIC, b"order-%d" % i, keys=[f"k{i}"]))
        await producer.send_batch([Message(TOPIC, b"batch-%d" % i) for i in range(8)])
        await producer.send(Message(TOPIC, b"later", delay_level=2))
    async with TransactionProducer("tpg-monitor", ns, listener=_Commit()) as tp:
        await tp.send_message_in_transaction(Message(TOPIC, b"paid"))
    await wait_until(lambda: len(fast) >= 48, "cg-fast to consume")
    # cg-slow reads a little, commits it and stops: it lags behind from then on.
    slow = PullConsumer("cg-slow", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
    slow.subscribe(TOPIC, "*")
    async with slow:
        got: list[MessageExt] = []

        async def polled() -> bool:
            got.extend(await slow.poll(timeout=0.5))
            return len(got) > 0

        await wait_until(polled, "cg-slow to get messages")
        await slow.commit()
    async with Admin(ns) as admin:

        async def dead_lettered() -> bool:
            try:
                return bool(await admin.consumer_progress("cg-dlq", TOPIC))
            except Exception:
                return False

        await wait_until(dead_lettered, "cg-dlq to consume")
    # The consumers stay: their connections are on the dashboards.
    _RUNNING.extend([consumer, dead])


_RUNNING: list[PushConsumer] = []


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Monitor]]:
    need_prometheus()
    data: Path = tmp_path_factory.mktemp("monitored")
    spec = ClusterSpec(data_dir=data, replication="raft", broker_settings=SMALL_STORE)
    with LocalCluster(spec) as cluster:
        monitor = start_monitor(cluster, scrape_interval="1s", rules=RULES)
        try:
            run_blocking(_load(cluster.namesrv_addr))
            yield cluster, monitor
        finally:
            for c in _RUNNING:
                run_blocking(c.shutdown())
            _RUNNING.clear()
            monitor.stop()


def test_prometheus_scrapes_every_node(monitored: tuple[LocalCluster, Monitor]) -> None:
    cluster, monitor = monitored
    up = wait_for_series(monitor.url, "count(up == 1) >= 4")
    assert up
    targets = series(monitor.url, "up")
    assert {t["metric"]["job"] for t in targets} == {"rocketq-broker", "rocketq-nameserver"}
    assert len(targets) == len(cluster.nodes)


def test_every_dashboard_panel_shows_data(monitored: tuple[LocalCluster, Monitor]) -> None:
    _, monitor = monitored
    # Rates need two scrapes after the load, and the lagging group's lag its own samples.
    wait_for_series(monitor.url, "count_over_time(rocketmq_messages_out_total[1m]) >= 3")
    wait_for_series(monitor.url, "count_over_time(rocketmq_send_to_dlq_messages_total[1m]) >= 3")
    empty, failed = [], []
    queries = dashboard_queries()
    assert len(queries) >= 20
    for panel, expr in queries:
        doc = query(monitor.url, expr)
        if doc.get("status") != "success":
            failed.append(f"{panel}: {expr}: {doc.get('error')}")
        elif not doc["data"]["result"]:
            empty.append(f"{panel}: {expr}")
    assert not failed, "queries Prometheus refused:\n" + "\n".join(failed)
    assert not empty, "panels that show nothing:\n" + "\n".join(empty)


def test_every_alert_rule_runs_and_measures_something(
    monitored: tuple[LocalCluster, Monitor],
) -> None:
    _, monitor = monitored
    wait_for_series(monitor.url, "count_over_time(rocketq_raft_leader[1m]) >= 3")
    problems = []
    for name, expr, measure in alert_measures():
        doc = query(monitor.url, expr)
        if doc.get("status") != "success":
            problems.append(f"{name}: {expr}: {doc.get('error')}")
            continue
        doc = query(monitor.url, measure)
        if doc.get("status") != "success" or not doc["data"]["result"]:
            problems.append(f"{name}: its measure {measure} returns nothing")
    assert not problems, "\n".join(problems)
    # Prometheus loaded the rules and evaluates them: a healthy cluster fires nothing
    # critical (the lagging group may warn).
    rules = query(monitor.url, 'ALERTS{severity="critical"}')
    assert rules["status"] == "success"
    firing = [a["metric"]["alertname"] for a in rules["data"]["result"]]
    assert not firing, firing


def test_the_rules_are_loaded(monitored: tuple[LocalCluster, Monitor]) -> None:
    import json
    import urllib.request

    _, monitor = monitored
    with urllib.request.urlopen(monitor.url + "/api/v1/rules", timeout=10) as resp:
        doc = json.loads(resp.read())
    names = {r["name"] for g in doc["data"]["groups"] for r in g["rules"]}
    assert names == {name for name, _, _ in alert_measures()}
