"""The console's pages and JSON API against a real cluster (two broker groups, started by
the launcher once for the module), through Starlette's TestClient."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.cluster.pids import wait_until
from rocketq.console.app import create_app
from rocketq.console.security import (
    CSRF_HEADER,
    ClusterClient,
    Users,
    hash_password,
    verify_password,
)
from tests.integration.conftest import SMALL_STORE


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("console"), brokers=2, broker_settings=SMALL_STORE
    )
    with LocalCluster(spec) as started:
        yield started


# The console answers only the Host names it is told of (by default its bind address and the
# loopback names), not TestClient's default "testserver".
LOCAL = "http://localhost"


@pytest.fixture(scope="module")
def client(cluster: LocalCluster) -> Iterator[TestClient]:
    with TestClient(create_app(cluster.namesrv_addr), base_url=LOCAL) as c:
        yield c


def token(client: TestClient) -> str:
    value: str = client.get("/api/session").json()["csrf_token"]
    return value


def login_token(client: TestClient) -> str:
    """The session's CSRF token as the login page carries it (what an anonymous browser
    sees once login is on)."""
    page = client.get("/login")
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert page.status_code == 200 and found is not None, page.text
    return found.group(1)


def log_in(client: TestClient, name: str, password: str) -> None:
    resp = client.post(
        "/login",
        data={"username": name, "password": password, "csrf_token": login_token(client)},
        follow_redirects=False,
    )
    assert resp.status_code == 303, resp.text


def api_post(client: TestClient, url: str, body: dict[str, object]) -> object:
    return client.post(url, json=body, headers={CSRF_HEADER: token(client)})


def test_the_cluster_page_lists_every_broker(client: TestClient) -> None:
    api_post(client, "/api/topics", {"topic": "ConsoleTps", "read_queue_nums": 1})
    before = client.get("/api/cluster").json()["brokers"]
    for i in range(4):
        api_post(client, "/api/topics/ConsoleTps/messages", {"body": f"tps-{i}"})
    data = client.get("/api/cluster").json()
    names = sorted(b["broker_name"] for b in data["brokers"])
    assert names == ["broker-a", "broker-b"] and data["down"] == [] and data["error"] is None
    # The cluster runs without authentication: every broker's config says so.
    assert data["auth"] == {"authentication": "off", "authorization": "off"}
    assert all(b["authentication"] == b["authorization"] == "off" for b in data["brokers"])
    a = next(b for b in data["brokers"] if b["broker_name"] == "broker-a")
    assert a["role"] == "ASYNC_MASTER" and a["commit_log_max"] is not None
    assert a["replication_lag"] == "no slave"
    # This cluster's brokers serve no apache.rocketmq.v2 endpoint (grpcListenPort -1).
    assert all(b["grpc_endpoint"] == "off" and b["grpc_port"] == -1 for b in data["brokers"])
    assert all(b["version"].startswith("rocketq ") for b in data["brokers"])
    # The four sends count in today's messages in and in the TPS of the last minute.
    put = sum(b["messages_in_today"] for b in data["brokers"])
    assert put - sum(b["messages_in_today"] for b in before) == 4
    assert sum(b["tps_in"] for b in data["brokers"]) > 0
    assert all(b["messages_out_today"] >= 0 and b["tps_out"] >= 0 for b in data["brokers"])
    page = client.get("/")
    assert page.status_code == 200
    assert "broker-a" in page.text and "broker-b" in page.text and "Raft" not in page.text
    assert 'Authentication: <strong class="auth-off">off</strong>' in page.text
    # Both stores take writes (the Store column, as cluster-list's).
    assert [b["store"] for b in data["brokers"]] == ["ok", "ok"]
    assert page.text.count('<td class="store store-ok">ok</td>') == 2
    for path in ("/static/console.css", "/static/console.js"):
        assert client.get(path).status_code == 200


def test_a_broker_page_shows_its_runtime_and_config(client: TestClient) -> None:
    data = client.get("/api/brokers/broker-a/0").json()
    assert data["runtime"]["brokerName"] == "broker-a"
    config = data["config"]
    assert config["broker_name"] == "broker-a" and config["broker_role"] == "ASYNC_MASTER"
    assert config["listen_port"] == data["broker"]["addr"].rsplit(":", 1)[1]
    assert config["flush_disk_type"] == "ASYNC_FLUSH" and "store_path_root_dir" in config
    page = client.get("/brokers/broker-a/0")
    assert page.status_code == 200 and 'id="config"' in page.text and "broker_role" in page.text
    assert client.get("/api/brokers/broker-z/0").status_code == 404
    missing = client.get("/brokers/broker-z/0")
    assert missing.status_code == 404 and "broker-z/0" in missing.text


def test_the_topic_list_filters_by_kind(client: TestClient) -> None:
    everything = {t["topic"]: t["kind"] for t in client.get("/api/topics").json()["topics"]}
    assert everything["TBW102"] == "system"
    system = client.get("/api/topics", params={"kind": "system"}).json()["topics"]
    assert {t["kind"] for t in system} == {"system"}
    assert client.get("/api/topics", params={"kind": "nope"}).status_code == 400
    page = client.get("/topics", params={"kind": "system"})
    assert page.status_code == 200 and "TBW102" in page.text


def test_create_then_read_a_topic(client: TestClient) -> None:
    made = api_post(
        client,
        "/api/topics",
        {"topic": "ConsoleT1", "read_queue_nums": 2, "write_queue_nums": 2, "perm": 6},
    )
    assert made.status_code == 200, made.text  # type: ignore[attr-defined]

    # Each broker registers the new topic with the nameserver on its own schedule.
    def on_both() -> bool:
        return len(client.get("/api/topics/ConsoleT1").json().get("queues", [])) == 4

    assert wait_until(on_both, time.monotonic() + 10), "ConsoleT1 not routed to both brokers"
    data = client.get("/api/topics/ConsoleT1").json()
    assert sorted((q["broker_name"], q["queue_id"]) for q in data["queues"]) == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    assert {q["perm_text"] for q in data["route"]["queue_datas"]} == {"RW"}
    assert data["groups"] == []
    # The form posts and is redirected to the topic's page.
    form = client.post(
        "/topics",
        data={
            "topic": "ConsoleT2",
            "read_queue_nums": "4",
            "write_queue_nums": "4",
            "perm": "6",
            "csrf_token": token(client),
        },
        follow_redirects=False,
    )
    assert form.status_code == 303 and form.headers["location"].endswith("/topics/ConsoleT2")
    page = client.get("/topics/ConsoleT2")
    assert page.status_code == 200 and "Send a test message" in page.text


@pytest.mark.parametrize(
    "body",
    [
        {"topic": "ConsoleBad", "read_queue_nums": 0, "write_queue_nums": 1},
        {"topic": "ConsoleBad", "read_queue_nums": 2000, "write_queue_nums": 1},
        {"topic": "ConsoleBad", "read_queue_nums": "x", "write_queue_nums": 1},
        {"topic": "ConsoleBad", "perm": 3},
        {"topic": "bad topic!"},
        {"topic": ""},
    ],
)
def test_bad_topic_settings_answer_400(client: TestClient, body: dict[str, object]) -> None:
    resp = api_post(client, "/api/topics", body)
    assert resp.status_code == 400, resp.text  # type: ignore[attr-defined]
    assert resp.json()["error"]  # type: ignore[attr-defined]


def test_an_unknown_topic_is_a_clear_404(client: TestClient) -> None:
    api = client.get("/api/topics/NoSuchConsoleTopic")
    assert api.status_code == 404 and "error" in api.json()
    page = client.get("/topics/NoSuchConsoleTopic")
    assert page.status_code == 404 and "not found" in page.text
    assert "Traceback" not in page.text
    sent = api_post(client, "/api/topics/NoSuchConsoleTopic/messages", {"body": "x"})
    assert sent.status_code == 404  # type: ignore[attr-defined]


def test_send_a_test_message(client: TestClient) -> None:
    api_post(client, "/api/topics", {"topic": "ConsoleSend", "read_queue_nums": 1})
    sent = api_post(client, "/api/topics/ConsoleSend/messages", {"body": "hi", "keys": "k1"})
    assert sent.status_code == 200, sent.text  # type: ignore[attr-defined]
    assert sent.json()["status"] == "SEND_OK"  # type: ignore[attr-defined]
    empty = api_post(client, "/api/topics/ConsoleSend/messages", {"body": ""})
    assert empty.status_code == 400  # type: ignore[attr-defined]
    form = client.post(
        "/topics/ConsoleSend/send",
        data={"body": "from the page", "tags": "t", "csrf_token": token(client)},
    )
    assert form.status_code == 200 and "SEND_OK" in form.text
    queues = client.get("/api/topics/ConsoleSend").json()["queues"]
    assert sum(q["max_offset"] for q in queues) == 2


def test_delete_asks_for_confirmation(client: TestClient) -> None:
    api_post(client, "/api/topics", {"topic": "ConsoleDel", "read_queue_nums": 1})
    confirm = client.get("/topics/ConsoleDel/delete")
    assert confirm.status_code == 200 and 'name="confirm"' in confirm.text
    wrong = client.post(
        "/topics/ConsoleDel/delete", data={"confirm": "other", "csrf_token": token(client)}
    )
    assert wrong.status_code == 400
    done = client.post(
        "/topics/ConsoleDel/delete",
        data={"confirm": "ConsoleDel", "csrf_token": token(client)},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert client.get("/api/topics/ConsoleDel").status_code == 404
    api_post(client, "/api/topics", {"topic": "ConsoleDel2", "read_queue_nums": 1})
    gone = client.delete("/api/topics/ConsoleDel2", headers={CSRF_HEADER: token(client)})
    assert gone.status_code == 200 and gone.json() == {"deleted": "ConsoleDel2"}


def test_a_post_without_the_csrf_token_is_refused(client: TestClient) -> None:
    body = {"topic": "ConsoleForged"}
    assert client.post("/api/topics", json=body).status_code == 403
    forged = client.post("/api/topics", json=body, headers={CSRF_HEADER: "forged"})
    assert forged.status_code == 403
    page = client.post("/topics", data={"topic": "ConsoleForged", "csrf_token": "forged"})
    assert page.status_code == 403 and "CSRF" in page.text
    assert client.delete("/api/topics/TBW102").status_code == 403
    # Another browser (no session) with this session's token is refused too; the check comes
    # before any cluster call, so this client need not run the app's lifespan.
    other = TestClient(client.app, base_url=LOCAL)
    stolen = other.post("/api/topics", json=body, headers={CSRF_HEADER: token(client)})
    assert stolen.status_code == 403
    assert "ConsoleForged" not in str(client.get("/api/topics").json())


def test_password_hashes() -> None:
    stored = hash_password("s3cret")
    assert stored.startswith("scrypt$") and verify_password("s3cret", stored)
    assert not verify_password("wrong", stored) and not verify_password("s3cret", "junk")
    assert hash_password("x") != hash_password("x")  # salted


def test_with_users_every_page_and_change_needs_a_login(
    cluster: LocalCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    users_file = tmp_path / "users"
    users_file.write_text(f"# console users\nalice:{hash_password('wonderland')}\n")
    assert set(Users.load(users_file).hashes) == {"alice"}
    with TestClient(create_app(cluster.namesrv_addr, users_file), base_url=LOCAL) as c:
        # Reading needs a login too: a page sends the browser to the login and back.
        first = c.get("/topics?kind=system", follow_redirects=False)
        assert first.status_code == 303
        assert first.headers["location"] == "/login?next=%2Ftopics%3Fkind%3Dsystem"
        assert c.get("/api/cluster").status_code == 401
        assert c.get("/api/session").status_code == 401
        body = {"topic": "ConsoleAuth", "read_queue_nums": 1}
        anon = c.post("/api/topics", json=body, headers={CSRF_HEADER: login_token(c)})
        assert anon.status_code == 401
        page = c.post(
            "/topics", data={**body, "csrf_token": login_token(c)}, follow_redirects=False
        )
        assert page.status_code == 303 and page.headers["location"].startswith("/login")
        bad = c.post(
            "/login",
            data={"username": "alice", "password": "no", "csrf_token": login_token(c)},
        )
        assert bad.status_code == 401
        forged = c.post("/login", data={"username": "alice", "password": "wonderland"})
        assert forged.status_code == 403
        ok = c.post(
            "/login",
            data={
                "username": "alice",
                "password": "wonderland",
                "csrf_token": login_token(c),
                "next": "/topics?kind=system",
            },
            follow_redirects=False,
        )
        assert ok.status_code == 303 and ok.headers["location"] == "/topics?kind=system"
        assert c.get("/topics?kind=system").status_code == 200
        assert c.get("/api/session").json()["user"] == "alice"
        with caplog.at_level(logging.INFO, logger="rocketq.console"):
            made = c.post("/api/topics", json=body, headers={CSRF_HEADER: token(c)})
        assert made.status_code == 200, made.text
        assert "change by alice: update-topic" in caplog.text
        out = c.post("/logout", data={"csrf_token": token(c)}, follow_redirects=False)
        assert out.status_code == 303
        again = c.delete("/api/topics/ConsoleAuth", headers={CSRF_HEADER: login_token(c)})
        assert again.status_code == 401


# Every change the console makes, as (method, path): the JSON API and the page forms.
CHANGES = [
    ("POST", "/api/topics"),
    ("POST", "/topics"),
    ("DELETE", "/api/topics/ConsoleLocked"),
    ("POST", "/topics/ConsoleLocked/delete"),
    ("POST", "/api/topics/ConsoleLocked/messages"),
    ("POST", "/topics/ConsoleLocked/send"),
    ("POST", "/api/groups/console-auth-group/reset"),
    ("POST", "/groups/console-auth-group/reset"),
    ("POST", "/api/messages/0A00000100002A9F0000000000000000/resend"),
    ("POST", "/messages/0A00000100002A9F0000000000000000/resend"),
    ("POST", "/api/dlq/console-auth-group/resend"),
    ("POST", "/dlq/console-auth-group/resend"),
]


def test_with_users_every_change_route_is_refused_without_a_session_or_token(
    cluster: LocalCluster, client: TestClient, tmp_path: Path
) -> None:
    users_file = tmp_path / "users"
    users_file.write_text(f"bob:{hash_password('builder')}\n")
    with TestClient(create_app(cluster.namesrv_addr, users_file), base_url=LOCAL) as c:
        for method, path in CHANGES:
            api = path.startswith("/api/")
            # No session: the API answers 401, a page sends the browser to the login.
            if api:
                r = c.request(method, path, json={}, headers={CSRF_HEADER: login_token(c)})
                assert r.status_code == 401, (path, r.text)
            else:
                r = c.request(
                    method, path, data={"csrf_token": login_token(c)}, follow_redirects=False
                )
                assert r.status_code == 303, (path, r.text)
                assert r.headers["location"].startswith("/login")
        log_in(c, "bob", "builder")
        assert c.get("/api/session").json()["user"] == "bob"
        for method, path in CHANGES:
            # Logged in, but the request does not carry this session's token: forged.
            if path.startswith("/api/"):
                r = c.request(method, path, json={}, headers={CSRF_HEADER: "forged"})
            else:
                r = c.request(method, path, data={"csrf_token": "forged"})
            assert r.status_code == 403, (path, r.text)
    assert "ConsoleLocked" not in str(client.get("/api/topics").json())  # nothing was made


def test_a_console_with_credentials_signs_its_calls_behind_a_login(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    users_file = tmp_path / "users"
    users_file.write_text(f"carol:{hash_password('pw')}\n")
    keys = ClusterClient(access_key="console", secret_key="console-secret")
    app = create_app(cluster.namesrv_addr, users_file, cluster_client=keys)
    with TestClient(app, base_url=LOCAL) as c:
        assert c.get("/api/cluster").status_code == 401
        log_in(c, "carol", "pw")
        assert app.state.admin.security.access_key == "console"
        data = c.get("/api/cluster").json()
        assert sorted(b["broker_name"] for b in data["brokers"]) == ["broker-a", "broker-b"]
        api_post(c, "/api/topics", {"topic": "ConsoleSigned", "read_queue_nums": 1})
        sent = api_post(c, "/api/topics/ConsoleSigned/messages", {"body": "signed"})
        assert sent.json()["status"] == "SEND_OK"  # type: ignore[attr-defined]
        assert app.state.producer.config.access_key == "console"


def test_a_bad_users_file_is_refused(tmp_path: Path) -> None:
    users_file = tmp_path / "users"
    users_file.write_text("alice:plaintext\n")
    with pytest.raises(ValueError, match="hash-password"):
        Users.load(users_file)


def test_without_login_changes_are_logged_as_anonymous(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="rocketq.console"):
        api_post(client, "/api/topics", {"topic": "ConsoleAnon", "read_queue_nums": 1})
    assert "change by anonymous: update-topic" in caplog.text


# Last: it stops a broker of the module's cluster. A killed broker unregisters at once (its
# channel to the nameserver closes) and so leaves the list; a stopped one (SIGSTOP) stays
# registered and does not answer, which is the case the page must name.
def test_a_broker_down_is_named_and_the_rest_still_shown(
    cluster: LocalCluster, client: TestClient
) -> None:
    victim = next(b for b in cluster.brokers if b.broker_name == "broker-b")
    admin = client.app.state.admin  # type: ignore[attr-defined]
    admin.timeout = 1.0  # the paused broker's silence is told in a second, not five
    cluster.pause(victim.name)
    try:
        data = client.get("/api/cluster").json()
        page = client.get("/")
    finally:
        cluster.resume(victim.name)
    rows = {b["broker_name"]: b for b in data["brokers"]}
    assert rows["broker-a"]["error"] is None and rows["broker-a"]["role"] == "ASYNC_MASTER"
    assert rows["broker-b"]["error"]
    assert data["down"] == [f"broker-b/0 ({victim.addr})"]
    assert page.status_code == 200
    assert "Not answering" in page.text and f"broker-b/0 ({victim.addr})" in page.text
    # Killed, the broker leaves the nameserver's list; the page still shows the rest.
    cluster.kill(victim.name)

    def only_a() -> bool:
        brokers = client.get("/api/cluster").json()["brokers"]
        return [b["broker_name"] for b in brokers] == ["broker-a"]

    assert wait_until(only_a, time.monotonic() + 20), "broker-b still listed after its kill"
