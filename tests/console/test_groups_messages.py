"""The console's consumer group, message and dead letter pages against a real cluster (two
broker groups, started by the launcher once for the module), through Starlette's TestClient;
the producers and consumers run on the SDK's background loop (``run_blocking``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from rocketq import ConsumeFrom, ConsumeResult, Message, MessageExt, Producer, PushConsumer
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.console.app import create_app
from rocketq.console.security import CSRF_HEADER
from rocketq.sdk.admin import Admin
from rocketq.sdk.background_loop import run_blocking
from tests.console.test_api import LOCAL, token
from tests.dead_letters import consume_fixed, fill_dlq
from tests.integration.conftest import SMALL_STORE
from tests.integration.waiting import wait_until

GROUP = "cg-console-dlq"
TOPIC = "ConsolePay"
MSG_TOPIC = "ConsoleMsgs"
BAD_ID = "00" * 16  # well formed: 0.0.0.0:0, offset 0 (no broker of the cluster)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("console-gm"), brokers=2, broker_settings=SMALL_STORE
    )
    with LocalCluster(spec) as started:
        yield started


@pytest.fixture(scope="module")
def client(cluster: LocalCluster) -> Iterator[TestClient]:
    with TestClient(create_app(cluster.namesrv_addr), base_url=LOCAL) as c:
        yield c


def post_json(client: TestClient, url: str, body: object) -> object:
    return client.post(url, json=body, headers={CSRF_HEADER: token(client)})


async def send_all(ns: str, messages: list[Message]) -> list[str]:
    async with Producer("pg-console-msgs", ns) as producer:
        return [(await producer.send(m)).offset_msg_id for m in messages]


def group_lag(client: TestClient, topic: str) -> int:
    queues = client.get(f"/api/groups/{GROUP}").json()["queues"]
    return sum(q["lag"] for q in queues if q["topic"] == topic)


def test_dead_letters_listed_exported_resent_and_consumed(
    cluster: LocalCluster, client: TestClient
) -> None:
    ns = cluster.namesrv_addr
    started = int(time.time() * 1000)
    bodies = run_blocking(fill_dlq(ns, TOPIC, GROUP, 3))

    # The group is listed; its page has the per-queue progress and its config.
    groups = {g["group"]: g for g in client.get("/api/groups").json()["groups"]}
    assert GROUP in groups and groups[GROUP]["members"] == 0
    assert groups[GROUP]["consume_tps"] > 0  # the failing consumer pulled them, minutes ago at most
    assert client.get("/groups").status_code == 200 and GROUP in client.get("/groups").text
    data = client.get(f"/api/groups/{GROUP}").json()
    assert TOPIC in data["topics"] and set(data["config"]) == {"broker-a", "broker-b"}
    assert data["config"]["broker-a"]["retry_max_times"] == 16
    assert {(q["broker_name"], q["queue_id"]) for q in data["queues"] if q["topic"] == TOPIC} == {
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
        ("broker-b", 1),
    }
    page = client.get(f"/groups/{GROUP}")
    assert page.status_code == 200 and "Reset offsets by time" in page.text

    # The DLQ page and API list the dead letters; the export is JSON lines.
    listed = client.get(f"/api/dlq/{GROUP}", params={"begin": started}).json()["messages"]
    assert sorted(m["body"] for m in listed) == bodies
    assert {m["properties"]["RETRY_TOPIC"] for m in listed} == {TOPIC}
    page = client.get("/dlq", params={"group": GROUP})
    assert page.status_code == 200 and all(m["offset_msg_id"] in page.text for m in listed)
    assert 'type="checkbox"' in page.text
    later = client.get(f"/api/dlq/{GROUP}", params={"begin": int(time.time() * 1000) + 60_000})
    assert later.json()["messages"] == []
    export = client.get(f"/api/dlq/{GROUP}/export")
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("application/x-ndjson")
    docs = [json.loads(line) for line in export.text.splitlines()]
    assert sorted(d["body"] for d in docs) == bodies
    assert set(docs[0]) == {
        "msg_id", "offset_msg_id", "topic", "queue_id", "queue_offset", "tags", "keys",
        "reconsume_times", "store_timestamp", "store_host", "properties", "body",
    }  # fmt: skip

    # Bad input: nothing selected, an id that is no dead letter of the group, no token.
    url = f"/dlq/{GROUP}/resend"
    assert client.post(url, data={"csrf_token": token(client)}).status_code == 400
    other = client.post(url, data={"id": BAD_ID, "csrf_token": token(client)})
    assert other.status_code == 400 and "not dead letters" in other.text
    assert client.post(url, data={"id": listed[0]["offset_msg_id"]}).status_code == 403
    bad_body = post_json(client, f"/api/dlq/{GROUP}/resend", {"ids": "x"})
    assert bad_body.status_code == 400  # type: ignore[attr-defined]
    assert client.get("/api/dlq/G/export", params={"begin": "yesterday"}).status_code == 400

    # Resend a selection of one through the page's form; a fixed consumer gets it.
    first = next(m for m in listed if m["body"] == "pay-0")
    done = client.post(
        url,
        data={"id": first["offset_msg_id"], "csrf_token": token(client)},
        follow_redirects=False,
    )
    assert done.status_code == 303 and "resent=1" in done.headers["location"]
    got = run_blocking(consume_fixed(ns, TOPIC, GROUP, {"pay-0"}))
    assert next(m for m in got if m.body == b"pay-0").topic == TOPIC
    # And the JSON twin resends the rest.
    rest = [m["offset_msg_id"] for m in listed if m["body"] != "pay-0"]
    resent = post_json(client, f"/api/dlq/{GROUP}/resend", {"ids": rest})
    assert resent.status_code == 200, resent.text  # type: ignore[attr-defined]
    assert len(resent.json()["resent"]) == 2  # type: ignore[attr-defined]


def test_reset_offsets_by_time_changes_the_lag(cluster: LocalCluster, client: TestClient) -> None:
    # After the first test the group has consumed TOPIC (failed, then resent and consumed).
    deadline_lag = group_lag(client, TOPIC)
    assert deadline_lag == 0
    reset = post_json(client, f"/api/groups/{GROUP}/reset", {"topic": TOPIC, "timestamp": 0})
    assert reset.status_code == 200, reset.text  # type: ignore[attr-defined]
    assert {o["consumer_offset"] for o in reset.json()["offsets"]} == {0}  # type: ignore[attr-defined]
    assert group_lag(client, TOPIC) == 3
    # The form resets to a time after every message: the lag is back to 0.
    form = client.post(
        f"/groups/{GROUP}/reset",
        data={
            "topic": TOPIC,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 60)),
            "csrf_token": token(client),
        },
        follow_redirects=False,
    )
    assert form.status_code == 303 and "reset=" in form.headers["location"]
    assert group_lag(client, TOPIC) == 0
    # Bad input.
    cases = [
        ({"timestamp": 0}, 400),
        ({"topic": "NotItsTopic", "timestamp": 0}, 400),
        ({"topic": TOPIC}, 400),
        ({"topic": TOPIC, "timestamp": "soon"}, 400),
    ]
    for body, status in cases:
        resp = post_json(client, f"/api/groups/{GROUP}/reset", body)
        assert resp.status_code == status, (body, resp.text)  # type: ignore[attr-defined]
    unknown = post_json(client, "/api/groups/cg-nobody/reset", {"topic": TOPIC, "timestamp": 0})
    assert unknown.status_code == 404  # type: ignore[attr-defined]
    forged = client.post(f"/api/groups/{GROUP}/reset", json={"topic": TOPIC, "timestamp": 0})
    assert forged.status_code == 403


def test_an_unknown_group_is_a_clear_404(client: TestClient) -> None:
    assert client.get("/api/groups/cg-nobody").status_code == 404
    page = client.get("/groups/cg-nobody")
    assert page.status_code == 404 and "cg-nobody" in page.text and "Traceback" not in page.text


def test_find_messages_by_key_id_and_time_and_see_the_detail(
    cluster: LocalCluster, client: TestClient
) -> None:
    ns = cluster.namesrv_addr
    made = post_json(
        client, "/api/topics", {"topic": MSG_TOPIC, "read_queue_nums": 1, "write_queue_nums": 1}
    )
    assert made.status_code == 200  # type: ignore[attr-defined]
    begin = int(time.time() * 1000) - 1000
    json_id, text_id, bin_id = run_blocking(
        send_all(
            ns,
            [
                Message(MSG_TOPIC, b'{"amount": 5, "to": "bob"}', tags="j", keys=["order-1"]),
                Message(MSG_TOPIC, b"plain words", tags="t", keys=["order-2"]),
                Message(MSG_TOPIC, bytes([0xFF, 0x00, 0x10]), keys=["order-3"]),
            ],
        )
    )
    by_key = client.get(
        "/api/messages", params={"mode": "key", "topic": MSG_TOPIC, "key": "order-1"}
    )
    assert [m["offset_msg_id"] for m in by_key.json()["messages"]] == [json_id]
    page = client.get("/messages", params={"mode": "key", "topic": MSG_TOPIC, "key": "order-2"})
    assert page.status_code == 200 and text_id in page.text
    by_id = client.get("/api/messages", params={"mode": "id", "msg_id": bin_id}).json()
    assert [m["keys"] for m in by_id["messages"]] == [["order-3"]]
    by_time = client.get(
        "/api/messages", params={"mode": "time", "topic": MSG_TOPIC, "begin": begin}
    )
    found = by_time.json()
    assert {m["offset_msg_id"] for m in found["messages"]} == {json_id, text_id, bin_id}
    assert found["page"] == 0 and found["has_next"] is False
    assert client.get("/messages", params={"mode": "time", "topic": MSG_TOPIC}).status_code == 200

    detail = client.get(f"/api/messages/{json_id}").json()
    assert detail["body"] == {"format": "json", "text": '{\n  "amount": 5,\n  "to": "bob"\n}'}
    assert detail["message"]["properties"]["KEYS"] == "order-1"
    assert detail["trace"] == []  # the producer did not trace
    assert client.get(f"/api/messages/{text_id}").json()["body"]["format"] == "text"
    assert client.get(f"/api/messages/{bin_id}").json()["body"] == {
        "format": "hex",
        "text": "ff 00 10",
    }
    page = client.get(f"/messages/{json_id}")
    assert page.status_code == 200 and "&#34;amount&#34;: 5" in page.text and "order-1" in page.text
    assert "No trace" in page.text

    # Resend to a group (through its retry topic).
    resent = post_json(client, f"/api/messages/{text_id}/resend", {"group": "cg-console-msgs"})
    assert resent.status_code == 200, resent.text  # type: ignore[attr-defined]
    copy = client.get(f"/api/messages/{resent.json()['copy']}").json()  # type: ignore[attr-defined]
    assert copy["message"]["topic"] == "%RETRY%cg-console-msgs"
    form = client.post(
        f"/messages/{text_id}/resend",
        data={"group": "cg-console-msgs", "csrf_token": token(client)},
        follow_redirects=False,
    )
    assert form.status_code == 303 and "resent=" in form.headers["location"]
    assert post_json(client, f"/api/messages/{text_id}/resend", {}).status_code == 400  # type: ignore[attr-defined]
    no_token = client.post(f"/api/messages/{text_id}/resend", json={"group": "g"})
    assert no_token.status_code == 403


@pytest.mark.parametrize(
    "params",
    [
        {"mode": "nope"},
        {"mode": "key", "topic": MSG_TOPIC},
        {"mode": "key", "key": "k"},
        {"mode": "id"},
        {"mode": "time", "topic": MSG_TOPIC, "begin": "not a time"},
        {"mode": "time", "topic": MSG_TOPIC, "page": "-1"},
        {"mode": "time", "topic": MSG_TOPIC, "page": "999"},
    ],
)
def test_bad_searches_answer_400(client: TestClient, params: dict[str, str]) -> None:
    assert client.get("/api/messages", params=params).status_code == 400
    assert client.get("/messages", params=params).status_code == 400


def test_unknown_and_malformed_message_ids_are_404(client: TestClient) -> None:
    for msg_id in ("nothex", "abcd", BAD_ID):
        api = client.get(f"/api/messages/{msg_id}")
        assert api.status_code == 404 and "error" in api.json()
        page = client.get(f"/messages/{msg_id}")
        assert page.status_code == 404 and "Traceback" not in page.text
        gone = post_json(client, f"/api/messages/{msg_id}/resend", {"group": "g"})
        assert gone.status_code == 404  # type: ignore[attr-defined]
    empty = client.get("/api/messages", params={"mode": "id", "msg_id": BAD_ID})
    assert empty.status_code == 200 and empty.json()["messages"] == []
    unknown_topic = {"mode": "key", "topic": "NoSuchConsoleTopic", "key": "k"}
    assert client.get("/api/messages", params=unknown_topic).status_code == 404


def test_every_page_of_the_nav_answers(client: TestClient) -> None:
    page = client.get("/")
    for href in ("/dashboard", "/topics", "/groups", "/messages", "/dlq"):
        assert f'href="{href}"' in page.text and client.get(href).status_code == 200
    assert client.get("/messages").text.count("not built yet") == 0


async def traced_round_trip(ns: str) -> str:
    """A traced producer sends one message and a traced consumer consumes it -> its offset
    id, once the trace holds send, store and consume."""
    async with Admin(ns) as admin:
        await admin.update_topic("ConsoleTraced", read_queue_nums=1, write_queue_nums=1)
    got: list[MessageExt] = []
    consumer = PushConsumer(
        "cg-console-traced", ns, consume_from=ConsumeFrom.FIRST_OFFSET, enable_trace=True
    )
    consumer.subscribe("ConsoleTraced", "*")

    async def keep(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        return ConsumeResult.SUCCESS

    consumer.on_message(keep)
    await consumer.start()
    try:
        async with Producer("pg-console-traced", ns, enable_trace=True) as producer:
            sent = await producer.send(Message("ConsoleTraced", b"follow me", keys=["tr-1"]))
        await wait_until(lambda: len(got) >= 1, "the traced consumer")
    finally:
        await consumer.shutdown()  # writes its pending trace events
    async with Admin(ns) as admin:

        async def traced() -> bool:
            kinds = {e.type for e in await admin.trace(sent.msg_id)}
            return kinds >= {"Pub", "SubBefore", "SubAfter"}

        await wait_until(traced, "the message's trace")
    return sent.offset_msg_id


def test_the_detail_shows_the_trace_as_a_timeline_and_the_consume_state(
    cluster: LocalCluster, client: TestClient
) -> None:
    offset_id = run_blocking(traced_round_trip(cluster.namesrv_addr))
    detail = client.get(f"/api/messages/{offset_id}").json()
    assert [e["type"] for e in detail["trace"]][:1] == ["Pub"]
    assert {e["type"] for e in detail["trace"]} == {"Pub", "SubBefore", "SubAfter"}
    assert {"group": "cg-console-traced", "state": "CONSUMED"}.items() <= next(
        t for t in detail["tracks"] if t["group"] == "cg-console-traced"
    ).items()
    page = client.get(f"/messages/{offset_id}")
    assert page.status_code == 200 and 'class="timeline"' in page.text
    assert "send + store" in page.text and "consume end" in page.text


def test_the_time_search_pages(cluster: LocalCluster, client: TestClient) -> None:
    post_json(
        client,
        "/api/topics",
        {"topic": "ConsolePaged", "read_queue_nums": 1, "write_queue_nums": 1},
    )
    run_blocking(
        send_all(cluster.namesrv_addr, [Message("ConsolePaged", b"m%d" % i) for i in range(25)])
    )
    params = {"mode": "time", "topic": "ConsolePaged"}
    first = client.get("/api/messages", params=params).json()
    assert len(first["messages"]) == 20 and first["has_next"] is True
    second = client.get("/api/messages", params={**params, "page": "1"}).json()
    assert len(second["messages"]) == 5 and second["has_next"] is False
    ids = {m["offset_msg_id"] for m in first["messages"] + second["messages"]}
    assert len(ids) == 25
    page = client.get("/messages", params=params)
    assert page.status_code == 200 and "page=1" in page.text and "next" in page.text
