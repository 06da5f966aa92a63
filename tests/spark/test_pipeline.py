"""The archive/replay pipeline: a topic archived to files by store date and hour, then
replayed into a new topic with the same bodies, keys, tags and properties; the CLI's
commands as a user runs them, and what they say when something is missing."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from typer.testing import CliRunner

from rocketq import Message, Producer
from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin
from rocketq.sdk.spark.pipeline import archived, replay, start_archive
from tests.spark.conftest import wait_for


async def _fill(namesrv: str, topic: str, n: int) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=4, write_queue_nums=4)
    async with Producer("pg-archive", namesrv) as producer:
        for i in range(n):
            msg = Message(
                topic,
                f"archived-{i}".encode(),
                tags=f"T{i % 3}",
                keys=[f"a{i}", f"b{i}"],
                properties={"i": str(i)},
            )
            assert (await producer.send(msg)).ok


def _content(rows: list) -> collections.Counter[tuple[object, ...]]:  # type: ignore[type-arg]
    return collections.Counter(
        (
            bytes(r.body),
            tuple(r.keys),
            r.tags,
            tuple(sorted((k, v) for k, v in r.properties.items() if k == "i")),
        )
        for r in rows
    )


def read_topic(spark: SparkSession, namesrv: str, topic: str) -> list:  # type: ignore[type-arg]
    return (
        spark.read.format("rocketq").option("namesrv", namesrv).option("topic", topic).load()
    ).collect()


def test_archive_then_replay_into_a_new_topic(
    spark: SparkSession, two_groups: LocalCluster, tmp_path: Path
) -> None:
    ns = two_groups.namesrv_addr
    asyncio.run(_fill(ns, "ArchiveMe", 300))
    to = tmp_path / "archive"
    query = start_archive(spark, namesrv=ns, topic="ArchiveMe", to=to, trigger="1s")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    dates = sorted(p.name for p in to.glob("date=*"))
    assert dates and all(len(d) == len("date=2026-11-25") for d in dates)
    assert any(to.glob("date=*/hour=*/part-*.parquet"))
    original = read_topic(spark, ns, "ArchiveMe")
    kept = archived(spark, to).collect()
    assert _content(kept) == _content(original)
    assert {r.msg_id for r in kept} == {r.msg_id for r in original}

    asyncio.run(_make(ns, "Replayed"))
    assert replay(spark, namesrv=ns, source=to, topic="Replayed") == 300
    back = read_topic(spark, ns, "Replayed")
    assert _content(back) == _content(original)
    assert {r.properties["SPARK_ROW_KEY"] for r in back} == {r.msg_id for r in original}

    # A window of store time replays what was stored in it only.
    stamps = sorted(r.store_timestamp for r in original)
    since, until = stamps[100], stamps[200]
    asyncio.run(_make(ns, "ReplayedWindow"))
    count = replay(spark, namesrv=ns, source=to, topic="ReplayedWindow", since=since, until=until)
    assert count == sum(1 for s in stamps if since <= s < until)
    assert len(read_topic(spark, ns, "ReplayedWindow")) == count


async def _make(namesrv: str, topic: str) -> None:
    async with Admin(namesrv) as admin:
        await admin.update_topic(topic, read_queue_nums=4, write_queue_nums=4)


def test_the_commands_archive_until_ctrl_c_and_replay(
    spark: SparkSession, two_groups: LocalCluster, tmp_path: Path
) -> None:
    ns = two_groups.namesrv_addr
    asyncio.run(_fill(ns, "ArchiveCli", 120))
    to = tmp_path / "archive-json"
    rocketq = [sys.executable, "-m", "rocketq.cli.main", "pipeline"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen(
        [
            *rocketq,
            "archive",
            "--namesrv",
            ns,
            "--topic",
            "ArchiveCli",
            "--to",
            str(to),
            "--format",
            "json",
            "--trigger",
            "1s",
            "--master",
            "local[1]",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def archived_lines() -> int:
            return sum(
                len(p.read_text().splitlines()) for p in to.glob("date=*/hour=*/part-*.json")
            )

        wait_for(lambda: archived_lines() >= 120 or proc.poll() is not None, "the archive", 150)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert archived_lines() == 120
    first = json.loads(next(iter(to.glob("date=*/hour=*/part-*.json"))).read_text().splitlines()[0])
    assert first["topic"] == "ArchiveCli" and first["body"]

    asyncio.run(_make(ns, "ReplayedCli"))
    done = subprocess.run(
        [
            *rocketq,
            "replay",
            "--namesrv",
            ns,
            "--from",
            str(to),
            "--topic",
            "ReplayedCli",
            "--master",
            "local[1]",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "replayed 120 message(s)" in done.stdout
    assert _content(read_topic(spark, ns, "ReplayedCli")) == _content(
        read_topic(spark, ns, "ArchiveCli")
    )


def test_the_commands_say_what_is_missing(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    result = runner.invoke(app, ["pipeline", "archive", "--topic", "T", "--to", str(tmp_path)])
    assert result.exit_code == 1
    assert "needs Java 17 or later" in result.output and "no java on PATH" in result.output
    monkeypatch.undo()
    result = runner.invoke(
        app, ["pipeline", "replay", "--from", str(tmp_path / "nowhere"), "--topic", "T"]
    )
    assert result.exit_code == 1 and "no such directory" in result.output
    result = runner.invoke(
        app,
        ["pipeline", "replay", "--from", str(tmp_path), "--topic", "T", "--since", "yesterday"],
    )
    assert result.exit_code == 1 and "is not a time" in result.output
    result = runner.invoke(
        app, ["pipeline", "archive", "--topic", "T", "--to", str(tmp_path), "--trigger", "soon"]
    )
    assert result.exit_code == 1 and "is not an interval" in result.output
