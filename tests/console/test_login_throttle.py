"""Failed console logins lock out the address they come from, never the user: five wrong
passwords for alice from one address refuse that address (even alice's right password sent
from it) while alice logs in from her own; an IPv6 client is counted by its /64; the
addresses remembered are bounded."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.testclient import TestClient

from rocketq.console.app import create_app, uvicorn_config
from rocketq.console.security import LoginLimiter, hash_password, login_key
from tests.console.test_api import LOCAL, login_token

NS = "127.0.0.1:1"  # never called: these tests do not run the app's lifespan
PASSWORD = "wonderland"
ATTACKER = ("203.0.113.9", 40000)
ALICE = ("198.51.100.7", 50000)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console-users") / "users"
    path.write_text(f"alice:{hash_password(PASSWORD)}\n")
    return path


def attempt(c: TestClient, name: str, password: str) -> httpx.Response:
    response: httpx.Response = c.post(
        "/login",
        data={"username": name, "password": password, "csrf_token": login_token(c)},
        follow_redirects=False,
    )
    return response


def clients(app: Starlette, *addresses: tuple[str, int]) -> list[TestClient]:
    return [TestClient(app, base_url=LOCAL, client=address) for address in addresses]


def test_failures_lock_the_address_not_the_user(users_file: Path) -> None:
    clock = FakeClock()
    app = create_app(NS, users_file, login_limiter=LoginLimiter(clock=clock))
    attacker, alice = clients(app, ATTACKER, ALICE)
    for _ in range(5):
        assert attempt(attacker, "alice", "guess").status_code == 401
        clock.now += 1
    # The attacker's address is refused, even with the right password...
    refused = attempt(attacker, "alice", PASSWORD)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "55"
    # ...while alice, from her own address, logs in during the lockout.
    assert attempt(alice, "alice", PASSWORD).status_code == 303
    assert alice.get("/api/session").json()["user"] == "alice"
    # The lockout ends with the window.
    clock.now += 55
    assert attempt(attacker, "alice", PASSWORD).status_code == 303


def test_a_users_own_failures_count_only_against_her_address(users_file: Path) -> None:
    clock = FakeClock()
    limiter = LoginLimiter(clock=clock)
    app = create_app(NS, users_file, login_limiter=limiter)
    attacker, alice = clients(app, ATTACKER, ALICE)
    for _ in range(4):
        assert attempt(alice, "alice", "typo").status_code == 401
    for _ in range(4):
        assert attempt(attacker, "alice", "guess").status_code == 401
    assert sorted(limiter._failures) == ["address:198.51.100.7", "address:203.0.113.9"]
    assert attempt(alice, "alice", "typo").status_code == 401  # her fifth
    assert attempt(alice, "alice", PASSWORD).status_code == 429
    assert attempt(attacker, "alice", PASSWORD).status_code == 303  # only four from there


def request_from(host: str) -> Request:
    return Request({"type": "http", "client": (host, 1), "headers": [], "method": "GET"})


def test_an_ipv6_client_counts_by_its_64_network() -> None:
    assert login_key(request_from("2001:db8::1")) == "address:2001:db8::/64"
    assert login_key(request_from("2001:db8::ffff:1")) == "address:2001:db8::/64"
    assert login_key(request_from("2001:db8:0:1::1")) == "address:2001:db8:0:1::/64"
    assert login_key(request_from("::ffff:192.0.2.1")) == "address:192.0.2.1"
    assert login_key(request_from("192.0.2.1")) == "address:192.0.2.1"
    assert login_key(request_from("testclient")) == "address:testclient"


def test_one_64_network_is_locked_as_one_address(users_file: Path) -> None:
    clock = FakeClock()
    app = create_app(NS, users_file, login_limiter=LoginLimiter(clock=clock))
    hosts = [(f"2001:db8::{i:x}", 40000) for i in range(1, 7)]
    rotating = clients(app, *hosts)
    for c in rotating[:5]:
        assert attempt(c, "alice", "guess").status_code == 401
    assert attempt(rotating[5], "alice", PASSWORD).status_code == 429
    (other,) = clients(app, ("2001:db8:0:1::1", 40000))
    assert attempt(other, "alice", PASSWORD).status_code == 303


def test_the_addresses_remembered_are_bounded(users_file: Path) -> None:
    clock = FakeClock()
    limiter = LoginLimiter(clock=clock, max_keys=8)
    app = create_app(NS, users_file, login_limiter=limiter)
    for i in range(20):
        (c,) = clients(app, (f"192.0.2.{i}", 40000))
        assert attempt(c, "alice", "guess").status_code == 401
        assert len(limiter) <= 8
    assert "address:192.0.2.19" in limiter._failures
    assert "address:192.0.2.0" not in limiter._failures  # the least recent went first


def test_the_console_counts_the_peer_not_a_forwarded_header(users_file: Path) -> None:
    """uvicorn would take X-Forwarded-For from 127.0.0.1 as the client: anyone on the host
    could then send each guess from a new address."""
    config = uvicorn_config(create_app(NS, users_file), host="127.0.0.1", port=0)
    assert config.proxy_headers is False
