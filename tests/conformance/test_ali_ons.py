"""Conformance with a stock RocketMQ 4.x client: ali-ons, the Node.js client from npm (the
version pinned in ali_ons/package.json), against a cluster started by the launcher.

``ali_ons/conformance.js`` runs every step once for the module and prints one JSON object a
line; each test below checks one step of it: (a) sends with tags and keys, (b) a delay
level, (c) a tag subscription that commits its offsets, (d) a SQL92 subscription, (e) a
failed message that comes back once from %RETRY%, (f) a restarted consumer that gets
nothing already committed.

Needs node and ``npm ci --prefix tests/conformance/ali_ons`` (``make test`` runs both):
without them the tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, NoReturn

import pytest

from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.sdk.admin import Admin
from tests.integration.conftest import SMALL_STORE
from tests.system_deps import require_command

pytestmark = pytest.mark.remoting

HERE: Final = Path(__file__).parent / "ali_ons"
SCRIPT: Final = HERE / "conformance.js"
PINNED: Final[str] = json.loads((HERE / "package.json").read_text())["dependencies"]["ali-ons"]

QUEUES: Final = 2  # per topic
COUNT: Final = 8  # step a's tagged messages (besides its TagC and big ones)
DELAY_LEVEL: Final = 2  # "2s" in the test clusters' levels (tests/integration/conftest.py)
STEP_TIMEOUT: Final = 20.0  # seconds, each step of the script
RUN_TIMEOUT: Final = 120.0  # seconds for the whole node run; it is killed past that
BIG_BODY: Final = ("rocketq-ali-ons-" * 313)[:5000]  # as conformance.js makes it
SQL_MATCHING: Final = {"d-3", "d-4", "d-5", "d-sentinel"}  # "price >= 3"; d-1 has no price
ACL_USER: Final = "aliOns"  # the user ali-ons signs as with ACL on
ACL_SECRET: Final = "ali-ons-secret-0123"
OFFSET_MSG_ID: Final = re.compile(r"[0-9A-F]{32}")  # IPv4 store host + port + offset

Event = dict[str, Any]


def require_or_skip(why: str) -> NoReturn:
    """A missing real dependency: skip locally, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def topics(suffix: str) -> dict[str, str]:
    """The names conformance.js derives from the suffix."""
    return {
        "main": f"AliOns_{suffix}",
        "delay": f"AliOnsDelay_{suffix}",
        "sql": f"AliOnsSql_{suffix}",
        "retry": f"AliOnsRetry_{suffix}",
    }


def delay_ms(levels: str, level: int) -> int:
    """The delay of ``level`` (1-based) in a message_delay_level string such as "1s 2s"."""
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)", levels.split()[level - 1])
    assert match, f"delay level {level} of {levels!r} is not a number and a unit"
    return int(match[1]) * units[match[2]]


@dataclass(frozen=True)
class Run:
    """What one ``node conformance.js`` printed, and how it ended."""

    events: list[Event] = field(repr=False)
    returncode: int | None  # None: killed at RUN_TIMEOUT
    stderr: str = field(repr=False)
    suffix: str
    broker_addr: str
    acl: bool = False
    refusals: float = 0.0  # requests the broker refused for their credentials

    def why(self) -> str:
        """The failure as the script reported it, with the end of its stderr."""
        failed = [e for e in self.events if e["event"] == "failed"]
        if self.returncode is None:
            head = f"node conformance.js did not finish within {RUN_TIMEOUT:.0f} s"
        elif failed:
            head = f"step {failed[-1]['step']} failed: {failed[-1]['error']}"
        else:
            head = f"node conformance.js exited with {self.returncode}"
        tail = "\n".join(self.stderr.strip().splitlines()[-15:])
        return f"{head}\n--- last lines of its stderr ---\n{tail}"

    def require(self, step: str) -> Event:
        """The step's ``step_done`` event; fails with the run's reason if there is none."""
        for e in self.events:
            if e["event"] == "step_done" and e["step"] == step:
                return e
        pytest.fail(f"conformance step {step} did not finish: {self.why()}")

    def of(self, event: str, step: str) -> list[Event]:
        return [e for e in self.events if e["event"] == event and e["step"] == step]

    def by_key(self, event: str, step: str) -> dict[str, list[Event]]:
        found: dict[str, list[Event]] = {}
        for e in self.of(event, step):
            found.setdefault(e["keys"][0], []).append(e)
        return found


async def create_topics(
    namesrv: str, names: list[str], settings: dict[str, Any] | None = None
) -> None:
    # ali-ons cannot create topics: a route lookup answered TOPIC_NOT_EXIST fails its send.
    async with Admin(namesrv, **(settings or {})) as admin:
        for name in names:
            await admin.update_topic(name, read_queue_nums=QUEUES, write_queue_nums=QUEUES)


async def create_ali_ons_user(namesrv: str, settings: dict[str, Any]) -> None:
    """The user ali-ons signs as, allowed what the run does: publish, subscribe and read
    offsets on its topics and groups (rocketq asks Pub on a producer group too)."""
    async with Admin(namesrv, **settings) as admin:
        await admin.create_user(ACL_USER, ACL_SECRET)
        await admin.create_acl(
            f"User:{ACL_USER}",
            ["Topic:AliOns*", "Group:ali_ons_*"],
            ["Pub", "Sub", "Get"],
        )


def run_node(
    node: str, namesrv: str, suffix: str, credentials: tuple[str, str] | None = None
) -> tuple[list[Event], int | None, str]:
    env = {
        **os.environ,
        "CONFORMANCE_COUNT": str(COUNT),
        "CONFORMANCE_DELAY_LEVEL": str(DELAY_LEVEL),
        "CONFORMANCE_STEP_TIMEOUT_MS": str(int(STEP_TIMEOUT * 1000)),
    }
    if credentials is not None:
        env["CONFORMANCE_ACCESS_KEY"], env["CONFORMANCE_SECRET_KEY"] = credentials
    returncode: int | None
    try:
        done = subprocess.run(
            [node, str(SCRIPT), namesrv, suffix],
            cwd=HERE,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=RUN_TIMEOUT,  # subprocess.run kills the child when this passes
            check=False,
        )
        out, err, returncode = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        out, err, returncode = exc.stdout or b"", exc.stderr or b"", None
    lines = out.decode(errors="replace").splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    return events, returncode, err.decode(errors="replace")


@pytest.fixture(scope="module")
def node() -> str:
    # package.json's "engines": the Node.js ali-ons runs on.
    engines = json.loads((HERE / "package.json").read_text())["engines"]["node"]
    path = require_command("node", minimum=int(engines.removeprefix(">=")), package="nodejs")
    installed = HERE / "node_modules" / "ali-ons" / "package.json"
    fix = "run `npm ci --prefix tests/conformance/ali_ons`"
    if not installed.exists():
        require_or_skip(f"ali-ons is not installed; {fix}")
    version = json.loads(installed.read_text())["version"]
    if version != PINNED:
        require_or_skip(f"ali-ons {version} is installed but package.json pins {PINNED}; {fix}")
    return path


@pytest.fixture(scope="module", params=["plain", "acl"], ids=["no ACL", "ACL on"])
def run(
    node: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Run]:
    """The whole run, once against a cluster without auth and once against one with
    authentication and authorization on, ali-ons signing with a user's access key."""
    acl = request.param == "acl"
    settings = {**SMALL_STORE, "enable_property_filter": "true"}
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("ali-ons"), broker_settings=settings, auth=acl
    )
    suffix = uuid.uuid4().hex[:8]
    with LocalCluster(spec) as cluster:
        admin = cluster.client_settings()
        asyncio.run(create_topics(cluster.namesrv_addr, list(topics(suffix).values()), admin))
        credentials = None
        if acl:
            asyncio.run(create_ali_ons_user(cluster.namesrv_addr, admin))
            credentials = (ACL_USER, ACL_SECRET)
        events, returncode, stderr = run_node(node, cluster.namesrv_addr, suffix, credentials)
        yield Run(events, returncode, stderr, suffix, cluster.brokers[0].addr, acl)


def test_the_run_finishes_with_the_pinned_client(run: Run) -> None:
    assert run.returncode == 0, run.why()
    config = run.events[0]
    assert config["event"] == "config"
    assert config["ali_ons_version"] == PINNED
    assert config["topics"] == topics(run.suffix)
    assert config["signed"] is run.acl
    assert run.events[-1] == {"event": "done"}


def test_a_sends_get_send_ok_and_offset_message_ids(run: Run) -> None:
    done = run.require("a_produce")
    sent = run.of("sent", "a_produce")
    assert done["sent"] == len(sent) == COUNT + 2
    assert {e["status"] for e in sent} == {"SEND_OK"}
    # ali-ons sets no UNIQ_KEY: the broker's msgId is the offset id (store host + offset).
    assert all(OFFSET_MSG_ID.fullmatch(e["msg_id"]) for e in sent), sent
    assert len({e["msg_id"] for e in sent}) == len(sent)
    assert {e["broker_name"] for e in sent} == {"broker-a"}
    assert {e["queue_id"] for e in sent} <= set(range(QUEUES))
    per_queue: dict[int, list[int]] = {}
    for e in sent:
        per_queue.setdefault(e["queue_id"], []).append(e["queue_offset"])
    assert all(offsets == list(range(len(offsets))) for offsets in per_queue.values()), per_queue


def test_b_delay_level_holds_the_message(run: Run) -> None:
    done = run.require("b_delay")
    want = delay_ms(SMALL_STORE["message_delay_level"], DELAY_LEVEL)
    assert done["delay_level"] == DELAY_LEVEL
    # Never early (100 ms for clock reads), and not left behind either.
    assert want - 100 <= done["elapsed_ms"] < want + 15_000, done
    got = run.by_key("consumed", "b_delay")
    assert sorted(got) == ["b-delayed", "b-now"]
    [now], [later] = got["b-now"], got["b-delayed"]
    assert now["consumed_at_ms"] < later["consumed_at_ms"]
    assert later["topic"] == topics(run.suffix)["delay"]
    assert (later["body"], later["tags"], later["reconsume_times"]) == ("b-body-delayed", "TagD", 0)


def test_c_tag_subscription_gets_what_was_sent(run: Run) -> None:
    run.require("c_tags")
    sent = {e["keys"][0]: e for e in run.of("sent", "a_produce")}
    got = run.by_key("consumed", "c_tags")
    wanted = {k for k, e in sent.items() if e["tags"] in ("TagA", "TagB")}
    assert set(got) == wanted, "a TagA || TagB subscription gets exactly those"
    for key, deliveries in got.items():
        assert len(deliveries) == 1, f"{key} delivered {len(deliveries)} times"
        m, s = deliveries[0], sent[key]
        assert m["topic"] == topics(run.suffix)["main"]
        assert (m["body"], m["tags"], m["keys"]) == (s["body"], s["tags"], s["keys"])
        assert m["msg_id"] == s["msg_id"], "the id the send returned finds the record"
        assert (m["queue_id"], m["queue_offset"]) == (s["queue_id"], s["queue_offset"])
        assert m["reconsume_times"] == 0
        assert m["store_host"] == run.broker_addr
        assert m["born_host"].startswith("127.0.0.1:")
        if not m["sys_flag"] & 1:  # an uncompressed body: the stored CRC is over it
            assert m["body_crc"] == zlib.crc32(m["body"].encode()) & 0x7FFFFFFF, key
    big = got["a-big"][0]
    assert big["sys_flag"] & 1, "ali-ons compresses bodies of 4 KiB and more (sys flag bit 0)"
    assert (big["body_len"], big["body"]) == (len(BIG_BODY), BIG_BODY)


def test_d_sql92_subscription_is_filtered_by_the_broker(run: Run) -> None:
    done = run.require("d_sql92")
    [feature] = run.of("feature", "d_sql92")
    assert feature["supported"] is True, "ali-ons passes SQL92 selectors through (3.10+)"
    assert "skipped" not in done
    got = run.by_key("consumed", "d_sql92")
    # ali-ons does not filter SQL92 itself: every message here passed the broker's filter.
    assert set(got) == SQL_MATCHING
    assert all(len(d) == 1 for d in got.values()), got
    assert all(int(d[0]["properties"]["price"]) >= 3 for d in got.values())


def test_e_failed_message_comes_back_once_from_retry(run: Run) -> None:
    run.require("e_retry")
    [send_back] = run.of("send_back", "e_retry")
    assert send_back["ok"], f"the broker refused CONSUMER_SEND_MSG_BACK: {send_back}"
    assert send_back["delay_level"] == 0  # 0: the broker picks the level (3 + reconsume times)
    got = run.by_key("consumed", "e_retry")
    assert len(got["e-ok"]) == 1
    first, again = got["e-fail-once"]
    assert first["reconsume_times"] == 0 and again["reconsume_times"] == 1
    assert again["origin_msg_id"] == first["msg_id"] == send_back["msg_id"]
    assert again["msg_id"] != first["msg_id"], "the retry is a new record in %RETRY%group"
    topic = topics(run.suffix)["retry"]
    # ali-ons restores the topic from RETRY_TOPIC; without it the retry has no handler.
    assert first["topic"] == again["topic"] == topic
    assert again["properties"]["RETRY_TOPIC"] == topic
    assert (again["body"], again["tags"], again["keys"]) == (
        first["body"],
        first["tags"],
        first["keys"],
    )


def test_f_restarted_consumer_gets_nothing_already_committed(run: Run) -> None:
    run.require("f_restart")
    sent = {e["keys"][0] for e in run.of("sent", "f_restart")}
    assert sent == {f"f-{i}" for i in range(4)}
    got = run.by_key("consumed", "f_restart")
    assert set(got) == sent, "only the messages sent after the restart"
    assert all(len(d) == 1 for d in got.values()), got


@pytest.fixture(scope="module")
def refused_run(node: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """ali-ons signing with the right user but a wrong secret, against a cluster with ACL on."""
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("ali-ons-refused"), broker_settings=SMALL_STORE, auth=True
    )
    suffix = uuid.uuid4().hex[:8]
    with LocalCluster(spec) as cluster:
        admin = cluster.client_settings()
        asyncio.run(create_topics(cluster.namesrv_addr, list(topics(suffix).values()), admin))
        asyncio.run(create_ali_ons_user(cluster.namesrv_addr, admin))
        before = cluster_offsets(cluster.namesrv_addr, admin, topics(suffix)["main"])
        events, returncode, stderr = run_node(
            node, cluster.namesrv_addr, suffix, (ACL_USER, "not-the-secret")
        )
        after = cluster_offsets(cluster.namesrv_addr, admin, topics(suffix)["main"])
        assert before == after, "a refused client stored messages"
        refusals = unauthenticated(cluster.fetch_metrics(cluster.brokers[0]))
        run = Run(events, returncode, stderr, suffix, cluster.brokers[0].addr, True)
        return replace(run, refusals=refusals)


def unauthenticated(metrics: bytes) -> float:
    """The broker's count of requests refused for their credentials, from its metrics."""
    text = metrics.decode()
    for line in text.splitlines():
        if line.startswith("rocketq_remoting_rejected_total{") and (
            'reason="unauthenticated"' in line
        ):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("the broker's metrics have no unauthenticated refusals line")


def cluster_offsets(namesrv: str, settings: dict[str, Any], topic: str) -> list[int]:
    """The max offset of each of the topic's queues (what was stored)."""

    async def read() -> list[int]:
        async with Admin(namesrv, **settings) as admin:
            return sorted(q.max_offset for q in await admin.topic_status(topic))

    return asyncio.run(read())


def test_a_wrong_secret_is_refused_with_no_permission(refused_run: Run) -> None:
    run = refused_run
    assert run.returncode not in (0, None), run.why()
    failed = [e for e in run.events if e["event"] == "failed"]
    assert failed, run.why()
    assert "still failed" in failed[-1]["error"], run.why()  # its sends were answered, not lost
    assert not run.of("sent", "a_produce")  # nothing was acknowledged
    # ali-ons keeps the answers' codes to itself; the broker counts what it refused
    # (answered NO_PERMISSION, "authentication failed: ... signature ...").
    assert run.refusals >= 1
