"""An admin asking a running consumer, through its broker, on real processes: its running
info (Admin.consumer_running_info, ``rocketq admin consumer-status``), its listener run
once on a stored message (Admin.consume_message_directly, ``rocketq admin
consume-message``) without moving the group's offsets, the language and version its
connection shows, and the errors for a group, client or message id that is not there."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from typer.testing import CliRunner

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster
from rocketq.common.exceptions import RequestCodeNotSupportedError
from rocketq.remoting.codes import RocketqVersion
from rocketq.sdk.admin import Admin
from rocketq.sdk.pull_consumer import PullConsumer
from tests.integration.waiting import wait_until

TOPIC = "StatusTopic"
GROUP = "status-group"
runner = CliRunner()


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


async def in_thread(*args: str, code: int = 0) -> str:
    """The CLI runs its own event loop: off this test's loop, in a thread."""
    return await asyncio.to_thread(cli, *args, code=code)


def listener(seen: list[bytes], later: list[bool]) -> Callable[[list[MessageExt]], object]:
    async def handle(msgs: list[MessageExt]) -> ConsumeResult:
        seen.extend(m.body for m in msgs)
        return ConsumeResult.RECONSUME_LATER if later else ConsumeResult.SUCCESS

    return handle


async def test_an_admin_asks_a_running_push_consumer(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
        async with Producer("status-pg", ns) as producer:
            sent = [await producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(8)]
        seen: list[bytes] = []
        later: list[bool] = []
        consumer = PushConsumer(
            GROUP, ns, consume_from=ConsumeFrom.FIRST_OFFSET, persist_consumer_offset_interval=0.2
        )
        consumer.subscribe(TOPIC, "*")
        consumer.on_message(listener(seen, later))
        await consumer.start()
        try:
            await wait_until(lambda: len(seen) >= 8, lambda: f"8 messages consumed, got {seen}")
            progress = {}

            async def committed() -> bool:
                progress.update(
                    {
                        (p.broker_name, p.queue_id): p.consumer_offset
                        for p in await admin.consumer_progress(GROUP, TOPIC)
                    }
                )
                return sum(progress.values()) == 8

            await wait_until(committed, lambda: f"offsets committed: {progress}")
            cid = consumer.client.client_id

            # -- running info ----------------------------------------------------------
            info = await admin.consumer_running_info(GROUP, cid)
            props = info.properties
            assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
            assert props["messageModel"] == "CLUSTERING"
            assert props["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
            assert props["PROP_NAMESERVER_ADDR"] == f"{ns};"
            assert props["PROP_CLIENT_VERSION"] == RocketqVersion.describe(RocketqVersion.CURRENT)
            assert props["pullBatchSize"] == "32" and props["PROP_CONSUMEORDERLY"] == "false"
            assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) == consumer.started_ms > 0
            assert {(s.topic, s.expression) for s in info.subscriptions} == {
                (TOPIC, "*"),
                (f"%RETRY%{GROUP}", "*"),
            }
            # Every owned queue, with the offset the consumer would commit.
            assert set(info.mq_table) == set(consumer.process_queues)
            owned = {mq.queue_id: q for mq, q in info.mq_table.items() if mq.topic == TOPIC}
            assert sorted(owned) == [0, 1, 2, 3]
            assert {(b, q): owned[q].commit_offset for b, q in progress} == progress
            assert all(q.cached_msg_count == 0 and not q.dropped for q in owned.values())
            assert all(q.last_pull_timestamp > 0 for q in owned.values())
            assert sum(1 for q in owned.values() if q.last_consume_timestamp > 0) >= 1
            status = info.status_table[TOPIC]
            assert status.pull_tps > 0 and status.consume_ok_tps > 0 and status.pull_rt >= 0
            assert status.consume_failed_msgs == 0 and info.jstack is None
            dumped = await admin.consumer_running_info(GROUP, cid, jstack=True)
            assert dumped.jstack is not None and '"MainThread"' in dumped.jstack

            # -- the connection says who the client is -----------------------------------
            (conn,) = await admin.consumer_connections(GROUP)
            assert (conn.language, conn.version) == ("PYTHON", RocketqVersion.CURRENT)

            # -- the CLI shows it -------------------------------------------------------------
            table = await in_thread("admin", "consumer-status", "-n", ns, "-g", GROUP)
            assert cid in table and "PYTHON" in table and "rocketq " in table
            assert "Same subscription in the group" in table
            assert "#Consumer Offset and MQ Detail#" in table and TOPIC in table
            assert "#Consumer RT&TPS#" in table
            one = json.loads(
                await in_thread(
                    "admin", "consumer-status", "-n", ns, "-g", GROUP, "-i", cid, "--json"
                )
            )
            assert one["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
            assert sum(q["commit_offset"] for q in one["queues"] if q["topic"] == TOPIC) == 8
            listing = json.loads(
                await in_thread("admin", "consumer-status", "-n", ns, "-g", GROUP, "--json")
            )
            (client,) = listing["clients"]
            assert (client["client_id"], client["language"]) == (cid, "PYTHON")
            assert client["running_info"]["status"][TOPIC]["pull_tps"] > 0

            # -- the listener once on a stored message, nothing committed or sent back -------
            msg_id = sent[3].offset_msg_id
            before = dict(consumer.offsets.table)
            done = json.loads(
                await in_thread(
                    "admin", "consume-message", "-n", ns, "-g", GROUP, "-i", cid,
                    "--msg-id", msg_id, "--json",
                )
            )  # fmt: skip
            assert (done["consume_result"], done["order"]) == ("CR_SUCCESS", False)
            assert seen.count(b"m3") == 2  # once consumed, once directly
            later.append(True)
            shown = await in_thread(
                "admin", "consume-message", "-n", ns, "-g", GROUP, "-i", cid, "--msg-id", msg_id
            )
            assert "CR_LATER" in shown and seen.count(b"m3") == 3
            assert consumer.offsets.table == before
            await consumer.offsets.persist_all(list(consumer.process_queues))
            after = {
                (p.broker_name, p.queue_id): p.consumer_offset
                for p in await admin.consumer_progress(GROUP, TOPIC)
            }
            assert after == progress
            retried = await admin.topic_status(f"%RETRY%{GROUP}")
            assert sum(q.max_offset for q in retried) == 0  # nothing was sent back
            direct = await admin.consume_message_directly(GROUP, cid, sent[0].offset_msg_id)
            assert direct.consume_result == "CR_LATER" and direct.spent_time_mills >= 0

            # -- what is not there ------------------------------------------------------------
            args = ("admin", "consumer-status", "-n", ns)
            nobody = await in_thread(*args, "-g", "no-such-group", code=1)
            assert "no-such-group" in nobody and "no online client" in nobody
            stranger = await in_thread(*args, "-g", GROUP, "-i", "10.0.0.9@1#0", code=1)
            assert "not an online client" in stranger and cid in stranger
            bad_id = await in_thread(
                "admin", "consume-message", "-n", ns, "-g", GROUP, "-i", cid, "--msg-id", "xyz",
                code=1,
            )  # fmt: skip
            assert "not hex" in bad_id and "offset_msg_id" in bad_id
        finally:
            await consumer.shutdown()


async def test_pull_and_orderly_consumers_answer_too(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    async with Admin(ns) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
        async with Producer("status-pg", ns) as producer:
            sent = await producer.send(Message(TOPIC, b"one"))
        pull = PullConsumer("status-pull", ns, consume_from=ConsumeFrom.FIRST_OFFSET)
        pull.subscribe(TOPIC, "*")
        seen: list[bytes] = []
        orderly = PushConsumer(
            "status-orderly", ns, consume_from=ConsumeFrom.FIRST_OFFSET, orderly=True
        )
        orderly.subscribe(TOPIC, "*")
        orderly.on_message(listener(seen, []))
        await pull.start()
        await orderly.start()
        try:
            polled: list[MessageExt] = []

            async def got_one() -> bool:
                polled.extend(await pull.poll(0.2))
                return bool(polled)

            await wait_until(got_one, "a polled message")
            assert polled[0].properties["CLUSTER"] == "DefaultCluster"  # the broker's cluster
            info = await admin.consumer_running_info("status-pull", pull.client.client_id)
            assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
            assert {mq.queue_id for mq in info.mq_table if mq.topic == TOPIC} == {0, 1}
            assert info.status_table[TOPIC].pull_tps > 0
            assert info.status_table[TOPIC].consume_ok_tps == 0  # not its to measure
            try:
                await admin.consume_message_directly(
                    "status-pull", pull.client.client_id, sent.offset_msg_id
                )
                raise AssertionError("a pull consumer ran a listener it does not have")
            except RequestCodeNotSupportedError as exc:
                assert "pull consumer" in str(exc)
            await wait_until(lambda: seen == [b"one"], lambda: f"the orderly consumer: {seen}")
            direct = await admin.consume_message_directly(
                "status-orderly", orderly.client.client_id, sent.offset_msg_id
            )
            assert (direct.consume_result, direct.order) == ("CR_SUCCESS", True)
            assert seen == [b"one", b"one"]
            info = await admin.consumer_running_info("status-orderly", orderly.client.client_id)
            assert info.orderly and all(q.locked for q in info.mq_table.values())
        finally:
            await orderly.shutdown()
            await pull.shutdown()
