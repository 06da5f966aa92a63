"""The admin CLI and the blocking SDK twins against a real cluster."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

from typer.testing import CliRunner

from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin

runner = CliRunner()


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def wait_for_topic(ns: str, topic: str) -> None:
    for _ in range(50):  # the broker registers the new topic at once; give it a moment
        if topic in cli("admin", "topic-list", "-n", ns):
            return
        time.sleep(0.05)


async def broker_runtime(ns: str) -> list[dict[str, str]]:
    async with Admin(ns) as admin:
        return [b.runtime for b in await admin.cluster_list()]


def test_admin_verbs_send_and_consume(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    out = cli("admin", "update-topic", "-n", ns, "-t", "CliTopic", "-r", "2", "-w", "2")
    assert "CliTopic" in out and cluster.brokers[0].addr in out
    wait_for_topic(ns, "CliTopic")
    route = json.loads(cli("admin", "topic-route", "-n", ns, "-t", "CliTopic", "--json"))
    assert route[0]["broker"] == "broker-a" and route[0]["write_queues"] == 2
    sent = cli(
        "send", "-n", ns, "-t", "CliTopic", "-b", "from the cli", "--keys", "cli-key", "-c", "3"
    )
    assert sent.count("SEND_OK") == 3
    offset_id = sent.split("offset_msg_id=")[1].split()[0]
    status = json.loads(cli("admin", "topic-status", "-n", ns, "-t", "CliTopic", "--json"))
    assert sum(q["max_offset"] for q in status) == 3
    by_key = json.loads(
        cli("admin", "query-msg-by-key", "-n", ns, "-t", "CliTopic", "-k", "cli-key", "--json")
    )
    assert len(by_key) == 3 and by_key[0]["keys"] == ["cli-key"]
    by_id = json.loads(cli("admin", "query-msg-by-id", "-n", ns, "-i", offset_id, "--json"))
    assert by_id[0]["body"] == "from the cli #0"
    consumed = cli(
        "consume",
        "-n",
        ns,
        "-t",
        "CliTopic",
        "-g",
        "cli-group",
        "--from-first",
        "-c",
        "3",
        "--timeout",
        "20",
        "--json",
    )
    assert consumed.count("from the cli") == 3
    progress = json.loads(cli("admin", "consumer-progress", "-n", ns, "-g", "cli-group", "--json"))
    assert sum(p["consumer_offset"] for p in progress if p["topic"] == "CliTopic") == 3
    # A message's consume state per group, with its properties.
    shown = cli("admin", "query-msg-by-id", "-n", ns, "-i", offset_id)
    assert "group cli-group" in shown and "CONSUMED (consumer offset" in shown
    assert "KEYS=cli-key" in shown and "UNIQ_KEY=" in shown
    tracked = json.loads(cli("admin", "query-msg-by-id", "-n", ns, "-i", offset_id, "--json"))
    assert tracked[0]["consumed_by"][0]["group"] == "cli-group"
    reset = json.loads(
        cli(
            "admin",
            "reset-offset-by-time",
            "-n",
            ns,
            "-g",
            "cli-group",
            "-t",
            "CliTopic",
            "-s",
            "0",
            "--json",
        )
    )
    assert {r["new_offset"] for r in reset} == {0}
    rewound = json.loads(cli("admin", "query-msg-by-id", "-n", ns, "-i", offset_id, "--json"))
    assert rewound[0]["consumed_by"][0]["state"] == "NOT_ONLINE"  # offset 0, nobody online
    clusters = json.loads(cli("admin", "cluster-list", "-n", ns, "--json"))
    assert clusters[0]["role"] == "ASYNC_MASTER"
    # A master without a slave lags nobody: not its whole CommitLog as a "lag".
    assert int(clusters[0]["max_offset"]) > 0 and clusters[0]["replication_lag"] == "no slave"
    header, _, master = cli("admin", "cluster-list", "-n", ns).splitlines()
    assert master.find("no slave") == header.find("replication_lag") > 0
    runtime = asyncio.run(broker_runtime(ns))[0]  # the broker reports no lag either
    assert runtime["haSlaves"] == "0" and "haLagBytes" not in runtime
    config = json.loads(
        cli("admin", "broker-config", "-n", ns, "-b", clusters[0]["address"], "--json")
    )
    settings = {row["KEY"]: row["VALUE"] for row in config}
    assert settings["broker_role"] == "ASYNC_MASTER" and settings["auto_create_topic_enable"]


def test_consume_prints_absent_tags_and_keys_as_dashes(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    cli("admin", "update-topic", "-n", ns, "-t", "PlainTopic", "-r", "1", "-w", "1")
    wait_for_topic(ns, "PlainTopic")
    cli("send", "-n", ns, "-t", "PlainTopic", "-b", "bare")
    cli("send", "-n", ns, "-t", "PlainTopic", "-b", "tagged", "--tags", "TagA")
    cli("send", "-n", ns, "-t", "PlainTopic", "-b", "keyed", "--keys", "k1 k2")
    shown = cli(
        "consume", "-n", ns, "-t", "PlainTopic", "-g", "plain-group", "--from-first",
        "-c", "3", "--timeout", "20",
    )  # fmt: skip
    shown_tags = [
        line.removeprefix("tags / keys").strip()
        for line in shown.splitlines()
        if line.startswith("tags / keys")
    ]
    assert sorted(shown_tags) == ["- / -", "- / k1 k2", "TagA / -"], shown
    assert "None" not in shown


def test_admin_errors_are_clear_and_exit_non_zero(cluster: LocalCluster) -> None:
    result = runner.invoke(app, ["admin", "topic-route", "-n", cluster.namesrv_addr, "-t", "Nope"])
    assert result.exit_code == 1
    assert "Nope" in result.output and "Traceback" not in result.output
    bad = runner.invoke(
        app, ["admin", "update-topic", "-n", cluster.namesrv_addr, "-t", "bad topic", "-r", "2"]
    )
    assert bad.exit_code == 1 and "illegal characters" in bad.output


BLOCKING_SCRIPT = r"""
import sys, threading
from rocketq.sync import (
    Admin, ConsumeFrom, ConsumeResult, Message, Producer, PullConsumer, PushConsumer,
)

ns = sys.argv[1]
with Admin(ns) as admin:
    admin.update_topic("SyncTopic", read_queue_nums=2, write_queue_nums=2)
got, done = [], threading.Event()

def handler(msgs):  # a plain function, on the consumer's thread pool
    got.extend(msgs)
    if len(got) >= 5:
        done.set()
    return ConsumeResult.SUCCESS

with Producer("sync-pg", ns) as producer:
    assert all(producer.send(Message("SyncTopic", b"sync %d" % i)).ok for i in range(5))
consumer = PushConsumer("sync-cg", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
consumer.subscribe("SyncTopic", "*")
consumer.on_message(handler)
with consumer:
    assert done.wait(20), f"only {len(got)} of 5 consumed"
assert sorted(m.body for m in got) == [b"sync %d" % i for i in range(5)]
puller = PullConsumer("sync-pull", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
puller.subscribe("SyncTopic", "*")
polled = []
with puller:
    for _ in range(20):
        polled += puller.poll(timeout=1)
        if len(polled) >= 5:
            break
assert sorted(m.body for m in polled) == [b"sync %d" % i for i in range(5)]
print("ok")
"""


def test_blocking_twins(cluster: LocalCluster) -> None:
    """In a process of its own: the blocking twins run the SDK on a background event loop,
    from a plain thread with no loop of its own (not beside the test's live loop)."""
    result = subprocess.run(
        [sys.executable, "-c", BLOCKING_SCRIPT, cluster.namesrv_addr],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
