"""The console's guards without a cluster: login on every route, the Host check, the limit on
failed logins, Secure cookies over HTTPS, scrypt off the event loop, the cluster page's
authentication switches and the Users & ACL page (over a fake Admin: the app's lifespan is
not run, so no cluster call is made but the fake's)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
import uvicorn
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

import rocketq.console.security as security
from rocketq.common.exceptions import RocketqError
from rocketq.console.app import allowed_hosts_for, create_app, uvicorn_config
from rocketq.console.security import (
    CSRF_HEADER,
    ClusterClient,
    LoginLimiter,
    anonymous_allowed,
    hash_password,
    safe_next,
)
from rocketq.sdk.admin_types import BrokerInfo
from tests.console.test_api import LOCAL, log_in, login_token

NS = "127.0.0.1:1"  # never called: these tests do not run the app's lifespan
PASSWORD = "wonderland"


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console-users") / "users"
    path.write_text(f"alice:{hash_password(PASSWORD)}\nbob:{hash_password('builder')}\n")
    return path


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeAdmin:
    """The Admin methods the console's pages call, answering from memory."""

    users: list[Any] = field(default_factory=list)
    acls: list[Any] = field(default_factory=list)
    brokers: list[BrokerInfo] = field(default_factory=list)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    refuse_lists: bool = False

    async def list_users(self, filter: str = "") -> list[Any]:
        if self.refuse_lists:
            raise RocketqError("NO_PERMISSION: alice may not list users")
        return self.users

    async def list_acls(self, subject_filter: str = "", resource_filter: str = "") -> list[Any]:
        if self.refuse_lists:
            raise RocketqError("NO_PERMISSION: alice may not list ACLs")
        return self.acls

    async def create_user(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("create_user", args, kwargs))

    async def delete_user(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("delete_user", args, kwargs))

    async def create_acl(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("create_acl", args, kwargs))

    async def delete_acl(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("delete_acl", args, kwargs))

    async def cluster_list(self) -> list[BrokerInfo]:
        return self.brokers

    async def broker_config(self, addr: str) -> dict[str, str]:
        if addr not in self.configs:
            raise RocketqError(f"{addr} does not answer")
        return self.configs[addr]


# -- login on every route ----------------------------------------------------------------

SAMPLES = {"int": "0", "str": "x", "path": "x/y"}


def concrete(path: str) -> str:
    """A route's path with a sample value for each parameter."""
    return re.sub(r"\{(\w+)(?::(\w+))?\}", lambda m: SAMPLES.get(m.group(2) or "str", "x"), path)


def every_request(app: Any) -> Iterator[tuple[str, str]]:
    """(method, path) for every route and method the app answers, and for its mounts a
    file that is not the style sheet or script."""
    for route in app.routes:
        if isinstance(route, Route):
            for method in sorted(route.methods or {"GET"}):
                yield method, concrete(route.path)
        elif isinstance(route, Mount):
            yield "GET", route.path + "/console.css.map"
            yield "GET", route.path + "/../app.py"
        else:  # a new kind of route must be added here
            raise AssertionError(f"unexpected route {route!r}")


def test_every_route_refuses_anonymous_access_once_login_is_on(users_file: Path) -> None:
    app = create_app(NS, users_file)
    c = TestClient(app, base_url=LOCAL)
    token = login_token(c)
    requests = list(every_request(app))
    assert len(requests) > 40  # every view's routes are there
    for method, path in requests:
        if path == "/login":
            continue
        api = path.startswith("/api/")
        headers = {CSRF_HEADER: token}
        data = None if api or method in ("GET", "HEAD") else {"csrf_token": token}
        r = c.request(method, path, headers=headers, data=data, follow_redirects=False)
        if api:
            assert r.status_code == 401, (method, path, r.status_code)
            assert method == "HEAD" or r.json() == {"error": "log in first"}, (method, path)
        else:
            assert r.status_code == 303, (method, path, r.status_code)
            assert r.headers["location"].startswith("/login?next="), (method, path)
    # The login page, its POST and the static style sheet and script stay open.
    assert c.get("/login").status_code == 200
    assert c.get("/static/console.css").status_code == 200
    assert c.get("/static/console.js").status_code == 200
    failed = c.post("/login", data={"username": "alice", "password": "no", "csrf_token": token})
    assert failed.status_code == 401


def test_what_anyone_may_reach_and_where_a_login_may_lead() -> None:
    assert anonymous_allowed("/login") and anonymous_allowed("/static/console.js")
    for path in ("/", "/api/session", "/login/", "/static/x.map", "/static/../app.py.css"):
        assert not anonymous_allowed(path), path
    assert safe_next("/topics?kind=dlq") == "/topics?kind=dlq"
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example", ""):
        assert safe_next(target) == "/", target


def test_without_users_nothing_asks_for_a_login() -> None:
    c = TestClient(create_app(NS), base_url=LOCAL)
    assert c.get("/api/session").json()["login_on"] is False
    assert c.get("/login").status_code == 200


def test_a_console_that_signs_its_calls_requires_users(users_file: Path) -> None:
    keys = ClusterClient(access_key="console", secret_key="s3cret", tls=True, tls_ca_file="ca")
    with pytest.raises(ValueError, match="--users"):
        create_app(NS, cluster_client=keys)
    app = create_app(NS, users_file, cluster_client=keys)
    assert app.state.sdk_settings == {
        "access_key": "console",
        "secret_key": "s3cret",
        "tls": True,
        "tls_ca_file": "ca",
        "tls_verify_hostname": True,
    }
    c = TestClient(app, base_url=LOCAL)
    assert c.get("/api/cluster").status_code == 401
    # The environment's credentials count as well; half a pair is an error.
    env = {"ROCKETQ_ACCESS_KEY": "ak", "ROCKETQ_SECRET_KEY": "sk"}
    creds = ClusterClient().credentials(environ=env)
    assert creds is not None and creds.access_key == "ak"
    assert ClusterClient().sdk_settings(None) == {}
    # The CLI's credential and TLS options, as the SDK's keyword settings.
    cli = {"access_key": None, "tls": True, "tls_ca_file": "", "tls_verify_hostname": False}
    assert ClusterClient.from_settings({**cli, "unknown": 1}) == ClusterClient(
        tls=True, tls_verify_hostname=False
    )
    assert ClusterClient(tls=True, tls_verify_hostname=False).sdk_settings(None) == {
        "tls": True,
        "tls_verify_hostname": False,
    }
    with pytest.raises(ValueError):
        ClusterClient(access_key="only-half").credentials(environ={})


# -- Host check ----------------------------------------------------------------------------


def test_a_request_for_another_host_is_refused() -> None:
    app = create_app(NS, bind="10.1.2.3", allowed_hosts=["console.example.com"])
    for base in (
        "http://localhost:8080",
        "http://127.0.0.1",
        "http://10.1.2.3:8080",
        "http://console.example.com",
        "http://[::1]:8080",
    ):
        assert TestClient(app, base_url=base).get("/login").status_code == 200, base
    for base in ("http://testserver", "http://rebound.attacker.example", "http://10.1.2.4"):
        r = TestClient(app, base_url=base).get("/login")
        assert r.status_code == 400 and "host" in r.text.lower(), base
    # A rebound name is refused even for the API, before any login or cluster call.
    r = TestClient(app, base_url="http://attacker.example").get("/api/cluster")
    assert r.status_code == 400
    assert allowed_hosts_for("::1") == ["[::1]", "localhost", "127.0.0.1"]
    assert "*.example.com" in allowed_hosts_for("0.0.0.0", ["*.Example.com"])


# -- failed logins -------------------------------------------------------------------------


def attempt(c: TestClient, name: str, password: str) -> httpx.Response:
    response: httpx.Response = c.post(
        "/login",
        data={"username": name, "password": password, "csrf_token": login_token(c)},
        follow_redirects=False,
    )
    return response


def test_after_five_failures_an_address_is_refused_until_the_window_passes(
    users_file: Path,
) -> None:
    clock = FakeClock()
    app = create_app(NS, users_file, login_limiter=LoginLimiter(clock=clock))
    c = TestClient(app, base_url=LOCAL)
    for _ in range(5):
        assert attempt(c, "alice", "guess").status_code == 401
        clock.now += 1
    refused = attempt(c, "alice", PASSWORD)  # even the right password: the address is locked
    assert refused.status_code == 429 and refused.headers["retry-after"] == "55"
    assert "Too many failed logins" in refused.text
    clock.now += 54.5
    again = attempt(c, "alice", PASSWORD)
    assert again.status_code == 429 and again.headers["retry-after"] == "1"
    clock.now += 0.5  # the first failure is a minute old
    assert attempt(c, "alice", PASSWORD).status_code == 303
    assert c.get("/api/session").json()["user"] == "alice"


def test_after_five_failures_an_address_is_refused_whatever_the_name(users_file: Path) -> None:
    clock = FakeClock()
    app = create_app(NS, users_file, login_limiter=LoginLimiter(clock=clock))
    c = TestClient(app, base_url=LOCAL)
    for i in range(5):
        assert attempt(c, f"nobody{i}", "guess").status_code == 401
    refused = attempt(c, "bob", "builder")
    assert refused.status_code == 429 and refused.headers["retry-after"] == "60"
    clock.now += 60
    assert attempt(c, "bob", "builder").status_code == 303


def test_the_limiter_forgets_old_keys_and_keeps_its_memory_bounded() -> None:
    clock = FakeClock()
    limiter = LoginLimiter(max_failures=3, window=10, max_keys=100, clock=clock)
    for i in range(10_000):
        limiter.failed(f"address:{i}")
        limiter.failed("user:alice")
    assert len(limiter) <= 100
    assert limiter.retry_after("user:alice") == 10
    assert limiter.retry_after("address:9999") is None  # one failure only
    limiter.forget("user:alice")
    assert limiter.retry_after("user:alice") is None
    for _ in range(3):
        limiter.failed("user:bob")
    clock.now += 10
    assert limiter.retry_after("user:bob") is None and "user:bob" not in limiter._failures


# -- scrypt off the event loop -------------------------------------------------------------


async def test_scrypt_runs_in_a_worker_thread_and_the_loop_keeps_serving(
    users_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    seen: dict[str, object] = {}
    real = security.verify_password

    def slow_verify(password: str, stored: str) -> bool:
        try:
            asyncio.get_running_loop()
            seen["on_loop"] = True
        except RuntimeError:
            seen["on_loop"] = False
        entered.set()
        seen["released"] = release.wait(10)
        return real(password, stored)

    monkeypatch.setattr(security, "verify_password", slow_verify)
    app = create_app(NS, users_file)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as c:
        page = await c.get("/login")
        token = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert token is not None
        form = {"username": "alice", "password": PASSWORD, "csrf_token": token.group(1)}
        login = asyncio.create_task(c.post("/login", data=form))
        assert await asyncio.to_thread(entered.wait, 10), "the password check never started"
        # While scrypt is held in its thread, the loop answers another request.
        other = await c.get("/static/console.css")
        assert other.status_code == 200
        release.set()
        done = await login
    assert done.status_code == 303
    assert seen == {"on_loop": False, "released": True}


async def test_attempts_sent_at_the_same_time_cannot_pass_the_limit(
    users_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checking = threading.Semaphore(0)
    release = threading.Event()
    real = security.verify_password

    def held_verify(password: str, stored: str) -> bool:
        checking.release()
        release.wait(10)
        return real(password, stored)

    monkeypatch.setattr(security, "verify_password", held_verify)
    app = create_app(NS, users_file)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=LOCAL) as c:
        page = await c.get("/login")
        token = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert token is not None
        form = {"username": "alice", "password": "guess", "csrf_token": token.group(1)}
        tasks = [asyncio.create_task(c.post("/login", data=form)) for _ in range(10)]
        # Five checks are held in their threads; the other five are refused at once.
        pending: set[asyncio.Task[httpx.Response]] = set(tasks)
        while len(pending) > 5:
            _, pending = await asyncio.wait(pending, timeout=10, return_when="FIRST_COMPLETED")
            assert pending, "every attempt finished while five checks were held"
        assert all(t.result().status_code == 429 for t in tasks if t.done())
        release.set()
        statuses = sorted(r.status_code for r in await asyncio.gather(*tasks))
    assert statuses == [401] * 5 + [429] * 5
    assert [checking.acquire(blocking=False) for _ in range(6)] == [True] * 5 + [False]


def test_a_login_takes_back_its_address_count(users_file: Path) -> None:
    clock = FakeClock()
    limiter = LoginLimiter(clock=clock)
    c = TestClient(create_app(NS, users_file, login_limiter=limiter), base_url=LOCAL)
    for _ in range(4):
        assert attempt(c, "alice", "guess").status_code == 401
    assert attempt(c, "alice", PASSWORD).status_code == 303
    assert list(limiter._failures) == ["address:testclient"]  # never the user name
    assert len(limiter._failures["address:testclient"]) == 4
    assert attempt(c, "bob", "guess").status_code == 401  # the fifth failure of the address
    assert attempt(c, "bob", "builder").status_code == 429


# -- HTTPS ---------------------------------------------------------------------------------


def cookie_of(response: httpx.Response) -> str:
    cookie: str = response.headers.get("set-cookie", "")
    assert cookie.startswith("rocketq_console="), response.headers
    return cookie.lower()


def test_the_session_cookie_is_secure_under_https(users_file: Path) -> None:
    secure = TestClient(create_app(NS, users_file, https=True), base_url="https://localhost")
    cookie = cookie_of(secure.get("/login"))
    assert "; secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    plain = TestClient(create_app(NS, users_file), base_url=LOCAL)
    cookie = cookie_of(plain.get("/login"))
    assert "secure" not in cookie and "httponly" in cookie and "samesite=strict" in cookie


@contextlib.contextmanager
def _serving(config: Any) -> Iterator[int]:
    """The console of a uvicorn ``config`` served on a free loopback port (yielded) until
    the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "the console did not start"
            time.sleep(0.02)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _fetch_login(port: int, ca: trustme.CA) -> Any:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return urllib.request.urlopen(f"https://localhost:{port}/login", context=context, timeout=10)


def test_uvicorn_serves_the_console_over_https(users_file: Path, tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    for blob in cert.cert_chain_pems[1:]:
        blob.write_to_path(str(cert_file), append=True)
    cert.private_key_pem.write_to_path(str(key_file))
    with pytest.raises(ValueError, match="both"):
        uvicorn_config(create_app(NS), host="127.0.0.1", port=0, tls_cert=cert_file)
    app = create_app(NS, users_file, https=True)
    config = uvicorn_config(
        app, host="127.0.0.1", port=0, tls_cert=cert_file, tls_key=key_file, log_level="warning"
    )
    with _serving(config) as port:
        with _fetch_login(port, ca) as resp:
            assert resp.status == 200
            cookie = resp.headers["set-cookie"].lower()
        assert "; secure" in cookie and "httponly" in cookie
        # Plain HTTP gets no page: the TLS layer drops it.
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://localhost:{port}/login", timeout=10)


def test_the_https_certificate_reloads_when_its_files_change(
    users_file: Path, tmp_path: Path
) -> None:
    old_ca, new_ca = trustme.CA(), trustme.CA()
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"

    def install(ca: trustme.CA) -> None:
        cert = ca.issue_cert("localhost", "127.0.0.1")
        cert_file.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
        key_file.write_bytes(cert.private_key_pem.bytes())

    def status(port: int, ca: trustme.CA) -> int:
        with _fetch_login(port, ca) as resp:
            return int(resp.status)

    def wait_for(cond: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 20
        while not cond():
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    install(old_ca)
    app = create_app(NS, users_file, https=True)
    config = uvicorn_config(
        app, host="127.0.0.1", port=0, tls_cert=cert_file, tls_key=key_file, log_level="warning"
    )
    watch = app.state.certificate
    watch.interval = 0.1
    with _serving(config) as port:
        assert status(port, old_ca) == 200
        # Files that do not load: the old certificate stays in use.
        key_file.write_bytes(b"not a key")
        wait_for(lambda: watch.refused == 1, "the broken files were not seen")
        assert status(port, old_ca) == 200 and watch.reloads == 0
        install(new_ca)
        wait_for(lambda: watch.reloads == 1, "the new certificate was not loaded")
        assert status(port, new_ca) == 200
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            status(port, old_ca)


# -- the cluster page's switches and the Users & ACL page ----------------------------------


def broker(name: str, addr: str, error: str | None = None) -> BrokerInfo:
    runtime = {"brokerRole": "ASYNC_MASTER"} if error is None else {"error": error}
    return BrokerInfo("DefaultCluster", name, 0, addr, runtime)


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        (
            [{"authentication_enabled": "true", "authorization_enabled": "true"}] * 2,
            {"authentication": "on", "authorization": "on"},
        ),
        (
            [{"authentication_enabled": "true", "authorization_enabled": "false"}] * 2,
            {"authentication": "on", "authorization": "off"},
        ),
        (
            [
                {"authentication_enabled": "true", "authorization_enabled": "false"},
                {"authentication_enabled": "false", "authorization_enabled": "false"},
            ],
            {"authentication": "mixed", "authorization": "off"},
        ),
        ([{"broker_name": "a"}, {}], {"authentication": "unknown", "authorization": "unknown"}),
    ],
)
def test_the_cluster_page_says_whether_auth_is_on(
    configs: list[dict[str, str]], expected: dict[str, str]
) -> None:
    fake = FakeAdmin(
        brokers=[broker("broker-a", "a:1"), broker("broker-b", "b:1")],
        configs={"a:1": configs[0], "b:1": configs[1]},
    )
    app = create_app(NS)
    app.state.admin = fake
    c = TestClient(app, base_url=LOCAL)
    assert c.get("/api/cluster").json()["auth"] == expected
    page = c.get("/")
    shown = f'Authentication: <strong class="auth-{expected["authentication"]}">'
    assert page.status_code == 200 and shown in page.text


def test_a_broker_that_does_not_answer_leaves_its_switches_unknown() -> None:
    fake = FakeAdmin(
        brokers=[broker("broker-a", "a:1"), broker("broker-b", "b:1", error="timeout")],
        configs={"a:1": {"authentication_enabled": "true", "authorization_enabled": "true"}},
    )
    app = create_app(NS)
    app.state.admin = fake
    data = TestClient(app, base_url=LOCAL).get("/api/cluster").json()
    assert data["auth"] == {"authentication": "mixed", "authorization": "mixed"}
    assert [b["authentication"] for b in data["brokers"]] == ["on", "unknown"]


@dataclass(frozen=True)
class ModelSubject:
    name: str

    @property
    def key(self) -> str:
        return f"User:{self.name}"


def acl_app(users_file: Path, fake: FakeAdmin) -> TestClient:
    app = create_app(NS, users_file)
    app.state.admin = fake
    c = TestClient(app, base_url=LOCAL)
    log_in(c, "alice", PASSWORD)
    return c


def test_the_users_and_acl_page_lists_and_changes_them(users_file: Path) -> None:
    fake = FakeAdmin(
        users=[
            {"username": "ops", "password": "never-shown", "userType": "Super"},
            {"username": "app1", "password": "never-shown-either", "userType": "Normal"},
        ],
        acls=[
            {
                "subject": "User:app1",
                "policies": [
                    {
                        "policyType": "Custom",
                        "entries": [
                            {
                                "resource": "Topic:orders",
                                "actions": ["Pub", "Sub"],
                                "sourceIps": ["10.0.0.0/8"],
                                "decision": "Allow",
                            },
                            {"resource": "Group:*", "actions": ["Sub"], "decision": "Deny"},
                        ],
                    }
                ],
            },
            {"subject": ModelSubject("ops"), "policies": []},
        ],
    )
    c = acl_app(users_file, fake)
    page = c.get("/acl")
    assert page.status_code == 200
    assert "ops" in page.text and "app1" in page.text and "Super" in page.text
    assert "never-shown" not in page.text
    assert "Topic:orders" in page.text and "10.0.0.0/8" in page.text and "Deny" in page.text
    assert 'href="/acl"' in c.get("/").text or 'href="/acl"' in page.text
    users = c.get("/api/users").json()["users"]
    assert [u["username"] for u in users] == ["app1", "ops"]
    assert all("password" not in u for u in users)
    acls = c.get("/api/acls").json()["acls"]
    assert [(a["subject"], a["resource"], a["actions"], a["decision"]) for a in acls] == [
        ("User:app1", "Topic:orders", ["Pub", "Sub"], "Allow"),
        ("User:app1", "Group:*", ["Sub"], "Deny"),
    ]
    token = login_token(c)
    # The page's forms.
    made = c.post(
        "/acl/users",
        data={"username": "app2", "password": "pw", "user_type": "Normal", "csrf_token": token},
        follow_redirects=False,
    )
    assert made.status_code == 303 and made.headers["location"] == "/acl"
    policy = c.post(
        "/acl/policies",
        data={
            "subject": "app2",
            "resources": "Topic:orders Group:billing",
            "actions": ["Sub", "Pub"],
            "source_ips": "",
            "decision": "Allow",
            "csrf_token": token,
        },
        follow_redirects=False,
    )
    assert policy.status_code == 303, policy.text
    gone = c.post(
        "/acl/policies/delete",
        data={"subject": "User:app1", "resource": "Group:*", "csrf_token": token},
        follow_redirects=False,
    )
    assert gone.status_code == 303
    assert c.post("/acl/users/app1/delete", data={"csrf_token": token}).status_code == 200
    # The JSON twins.
    headers = {CSRF_HEADER: token}
    body = {"username": "svc", "password": "pw", "user_type": "Super"}
    assert c.post("/api/users", json=body, headers=headers).json() == {
        "created": "svc",
        "user_type": "Super",
    }
    acl = {"subject": "User:svc", "resources": ["Cluster:*"], "actions": ["All"]}
    assert c.post("/api/acls", json=acl, headers=headers).status_code == 200
    assert c.delete("/api/acls/User:svc", headers=headers).json()["resource"] is None
    assert c.delete("/api/users/svc", headers=headers).json() == {"deleted": "svc"}
    assert fake.calls == [
        ("create_user", ("app2", "pw"), {"user_type": "Normal"}),
        (
            "create_acl",
            ("User:app2", ["Topic:orders", "Group:billing"], ["Pub", "Sub"]),
            {"source_ips": [], "decision": "Allow"},
        ),
        ("delete_acl", ("User:app1",), {"resource": "Group:*"}),
        ("delete_user", ("app1",), {}),
        ("create_user", ("svc", "pw"), {"user_type": "Super"}),
        (
            "create_acl",
            ("User:svc", ["Cluster:*"], ["All"]),
            {"source_ips": [], "decision": "Allow"},
        ),
        ("delete_acl", ("User:svc",), {"resource": None}),
        ("delete_user", ("svc",), {}),
    ]


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/users", {"username": "", "password": "pw"}),
        ("/api/users", {"username": "bad name", "password": "pw"}),
        ("/api/users", {"username": "ok", "password": ""}),
        ("/api/users", {"username": "ok", "password": "pw", "user_type": "Root"}),
        ("/api/acls", {"subject": "Group:g", "resources": ["*"], "actions": ["Pub"]}),
        ("/api/acls", {"subject": "User:a", "resources": [], "actions": ["Pub"]}),
        ("/api/acls", {"subject": "User:a", "resources": ["Queue:q"], "actions": ["Pub"]}),
        ("/api/acls", {"subject": "User:a", "resources": ["Topic:a*b"], "actions": ["Pub"]}),
        ("/api/acls", {"subject": "User:a", "resources": ["*"], "actions": ["Fly"]}),
        ("/api/acls", {"subject": "User:a", "resources": ["*"], "actions": []}),
        (
            "/api/acls",
            {"subject": "User:a", "resources": ["*"], "actions": ["Pub"], "decision": "Maybe"},
        ),
    ],
)
def test_bad_user_and_acl_requests_answer_400(
    users_file: Path, url: str, body: dict[str, object]
) -> None:
    fake = FakeAdmin()
    c = acl_app(users_file, fake)
    r = c.post(url, json=body, headers={CSRF_HEADER: login_token(c)})
    assert r.status_code == 400 and r.json()["error"], r.text
    assert fake.calls == []


def test_a_cluster_that_refuses_the_lists_shows_why(users_file: Path) -> None:
    c = acl_app(users_file, FakeAdmin(refuse_lists=True))
    page = c.get("/acl")
    assert page.status_code == 200
    assert "may not list users" in page.text and "may not list ACLs" in page.text
    assert 'id="create-user"' in page.text  # the forms stay
    assert c.get("/api/users").status_code == 502


def test_changes_on_the_acl_page_need_the_csrf_token(users_file: Path) -> None:
    fake = FakeAdmin()
    c = acl_app(users_file, fake)
    body = {"username": "x", "password": "pw"}
    assert c.post("/api/users", json=body).status_code == 403
    assert c.post("/acl/users", data={**body, "csrf_token": "forged"}).status_code == 403
    assert c.delete("/api/users/alice", headers={CSRF_HEADER: "forged"}).status_code == 403
    assert fake.calls == []


def test_a_user_taken_out_of_the_users_file_is_out_whatever_cookie_they_keep(
    users_file: Path, tmp_path: Path
) -> None:
    before = TestClient(create_app(NS, users_file, secret="kept"), base_url=LOCAL)
    log_in(before, "bob", "builder")
    assert before.get("/api/session").json()["user"] == "bob"
    fewer = tmp_path / "users"
    fewer.write_text(f"alice:{hash_password(PASSWORD)}\n")
    after = TestClient(create_app(NS, fewer, secret="kept"), base_url=LOCAL)
    after.cookies.update(before.cookies)
    assert after.get("/api/session").status_code == 401
    # The same cookie on a console that still lists bob is a valid session.
    again = TestClient(create_app(NS, users_file, secret="kept"), base_url=LOCAL)
    again.cookies.update(before.cookies)
    assert again.get("/api/session").json()["user"] == "bob"


def test_an_unknown_name_costs_one_scrypt_like_a_wrong_password(
    users_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = security.Users.load(users_file)
    users.check("nobody", "x")  # the first one may make the stand-in hash
    calls: list[int] = []
    real = security.hashlib.scrypt

    def counted(*args: Any, **kwargs: Any) -> bytes:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(security.hashlib, "scrypt", counted)
    assert not users.check("nobody", "x") and len(calls) == 1
    assert not users.check("alice", "x") and len(calls) == 2
    assert users.check("alice", PASSWORD) and len(calls) == 3
