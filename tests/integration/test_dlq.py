"""Dead letters and resending: a consumer that fails every message fills its group's DLQ;
``Admin.dlq_messages`` lists them by time, ``Admin.resend_message`` sends one back to the
group through %RETRY%<group>, and a fixed consumer of the group consumes it under its own
topic. The CLI verbs (``rocketq admin dlq ...``, ``resend-message``) do the same."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from rocketq.cli.main import app
from rocketq.cluster.launcher import LocalCluster
from rocketq.sdk.admin import Admin
from rocketq.sdk.background_loop import run_blocking
from tests.dead_letters import consume_fixed, fill_dlq

runner = CliRunner()
GROUP = "cg-dlq"
TOPIC = "Payments"


async def test_a_resent_dead_letter_is_consumed_again(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    started = int(time.time() * 1000)
    bodies = await fill_dlq(ns, TOPIC, GROUP, 3)
    async with Admin(ns) as admin:
        dead = await admin.dlq_messages(GROUP, started)
        assert sorted(m.body.decode() for m in dead) == bodies
        assert all(m.topic == f"%DLQ%{GROUP}" for m in dead)
        assert all(m.properties["RETRY_TOPIC"] == TOPIC for m in dead)
        # A time range after them holds none.
        assert await admin.dlq_messages(GROUP, int(time.time() * 1000) + 1000) == []
        assert await admin.dlq_messages("cg-never-failed") == []
        first = next(m for m in dead if m.body == b"pay-0")
        copy = await admin.resend_message(first.offset_msg_id, GROUP)
        again = await admin.query_msg_by_id(copy)
        assert again.topic == f"%RETRY%{GROUP}" and again.reconsume_times == 0
    got = await consume_fixed(ns, TOPIC, GROUP, {"pay-0"})
    resent = next(m for m in got if m.body == b"pay-0")
    assert resent.topic == TOPIC  # the consumer sees it under its own topic


def test_the_cli_lists_exports_and_resends_dead_letters(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    bodies = run_blocking(fill_dlq(ns, TOPIC, GROUP, 2))
    listed = runner.invoke(app, ["admin", "dlq", "list", "-n", ns, "-g", GROUP, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert sorted(r["body"] for r in rows) == bodies and {r["topic"] for r in rows} == {TOPIC}

    out = tmp_path / "dlq.jsonl"
    exported = runner.invoke(app, ["admin", "dlq", "export", "-n", ns, "-g", GROUP, "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(d["body"] for d in docs) == bodies

    one = runner.invoke(
        app,
        ["admin", "resend-message", "-n", ns, "-g", GROUP, "-i", docs[0]["offset_msg_id"]],
    )
    assert one.exit_code == 0, one.output
    every = runner.invoke(app, ["admin", "dlq", "resend", "-n", ns, "-g", GROUP, "--all", "--json"])
    assert every.exit_code == 0, every.output
    assert len(json.loads(every.output)) == 2
    got = run_blocking(consume_fixed(ns, TOPIC, GROUP, set(bodies)))
    # Each dead letter was resent twice (once alone, then with --all): at least once each.
    assert {m.body.decode() for m in got} >= set(bodies)

    bad = runner.invoke(app, ["admin", "dlq", "resend", "-n", ns, "-g", GROUP])
    assert bad.exit_code == 2 and "--msg-id" in bad.output
    unknown = runner.invoke(
        app, ["admin", "resend-message", "-n", ns, "-g", GROUP, "-i", "not-an-id"]
    )
    assert unknown.exit_code == 1 and "error:" in unknown.output
