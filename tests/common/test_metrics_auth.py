"""The metrics port's credentials: ``/metrics`` needs the bearer token or the basic-auth
user when one is configured (401 with ``WWW-Authenticate`` otherwise, counted as
``unauthorized``), ``/healthz`` and ``/readyz`` stay open for probes, over HTTPS as over
HTTP; a malformed ``Authorization`` value is a refusal, never an error."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter

from rocketq.common.config import ServerSecurityConfig
from rocketq.common.exceptions import ConfigError
from rocketq.common.metrics_server import MetricsAuth, MetricsServer
from rocketq.remoting.tls import ServerTls, client_context
from tests.integration.waiting import wait_until
from tests.remoting.tls_certs import Certs, make_certs

TOKEN = "s3cret-token"
BASIC = MetricsAuth(username="prom", password="pa:ss")


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- the credentials alone ----------------------------------------------------------------


def test_the_bearer_token_passes_and_nothing_else() -> None:
    auth = MetricsAuth(bearer_token=TOKEN)
    assert auth.allows(f"Bearer {TOKEN}")
    assert auth.allows(f"bearer   {TOKEN} ")  # the scheme is case-insensitive (RFC 7235)
    for wrong in ("", "Bearer", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", basic("a", TOKEN)):
        assert not auth.allows(wrong), wrong


def test_basic_auth_passes_with_the_user_and_password_only() -> None:
    assert BASIC.allows(basic("prom", "pa:ss"))
    for wrong in (
        basic("prom", "pa:sS"),
        basic("Prom", "pa:ss"),
        basic("prom", ""),
        "Basic !!!not-base64",
        "Basic " + base64.b64encode(b"prom").decode(),
        "Bearer pa:ss",
    ):
        assert not BASIC.allows(wrong), wrong


def test_either_credential_passes_when_both_are_set() -> None:
    both = MetricsAuth(bearer_token=TOKEN, username="prom", password="pw")
    assert both.allows(f"Bearer {TOKEN}") and both.allows(basic("prom", "pw"))
    assert [value for _, value in both.challenge()] == [
        'Bearer realm="rocketq metrics"',
        'Basic realm="rocketq metrics", charset="UTF-8"',
    ]


@given(st.text(max_size=200))
def test_any_header_value_is_an_answer_not_an_error(value: str) -> None:
    both = MetricsAuth(bearer_token=TOKEN, username="prom", password="pw")
    allowed = both.allows(value)
    assert isinstance(allowed, bool)
    if TOKEN not in value and base64.b64encode(b"prom:pw").decode() not in value:
        assert not allowed


def test_from_config_reads_the_keys() -> None:
    assert MetricsAuth.from_config(ServerSecurityConfig()) is None
    cfg = ServerSecurityConfig(
        metrics_bearer_token=TOKEN,
        metrics_basic_auth=json.dumps({"username": "prom", "password": "pw"}),
    )
    assert MetricsAuth.from_config(cfg) == MetricsAuth(TOKEN, "prom", "pw")
    assert TOKEN not in repr(MetricsAuth.from_config(cfg))


def test_a_bad_basic_auth_value_is_a_clear_error_without_the_password() -> None:
    bad = SimpleNamespace(metrics_basic_auth=json.dumps({"username": "a:b", "password": "hunter2"}))
    with pytest.raises(ConfigError, match="metrics_basic_auth") as caught:
        MetricsAuth.from_config(bad)
    assert "hunter2" not in str(caught.value)
    with pytest.raises(ValueError, match="both"):
        MetricsAuth(username="prom")


# -- a real metrics port --------------------------------------------------------------------


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture(params=["http", "https"])
async def served(
    request: pytest.FixtureRequest, certs: Certs
) -> AsyncIterator[tuple[MetricsServer, str, ssl.SSLContext | None]]:
    registry = CollectorRegistry(auto_describe=False)
    Counter("rocketq_test_scrapes", "A counter the scrape must show.", registry=registry).inc()
    tls = None
    if request.param == "https":
        tls = ServerTls("enforcing", certs.server.cert, certs.server.key)
    server = MetricsServer(
        "127.0.0.1", 0, registry, lambda: (True, ""), what="test", workers=2, timeout=2.0,
        tls=tls, auth=MetricsAuth(TOKEN, "prom", "pw"),
    )  # fmt: skip
    await server.start()
    try:
        context = client_context(certs.ca) if tls is not None else None
        yield server, f"{request.param}://127.0.0.1:{server.port}", context
    finally:
        await server.stop()


def fetch(
    url: str, context: ssl.SSLContext | None, authorization: str | None = None
) -> tuple[int, bytes, list[str]]:
    """Status, body and WWW-Authenticate values of a GET."""
    request = urllib.request.Request(url)
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status, answer.read(), []
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read(), refused.headers.get_all("WWW-Authenticate") or []


async def test_metrics_need_the_credentials_and_probes_do_not(
    served: tuple[MetricsServer, str, ssl.SSLContext | None],
) -> None:
    server, base, context = served
    status, body, challenge = await asyncio.to_thread(fetch, base + "/metrics", context)
    assert status == 401 and b"rocketq_test" not in body
    assert challenge == [
        'Bearer realm="rocketq metrics"',
        'Basic realm="rocketq metrics", charset="UTF-8"',
    ]
    status, body, _ = await asyncio.to_thread(fetch, base + "/metrics", context, "Bearer nope")
    assert status == 401
    for good in (f"Bearer {TOKEN}", basic("prom", "pw")):
        status, body, _ = await asyncio.to_thread(fetch, base + "/metrics", context, good)
        assert status == 200 and b"rocketq_test_scrapes_total 1.0" in body
    assert (await asyncio.to_thread(fetch, base + "/healthz", context))[:2] == (200, b"ok\n")
    assert (await asyncio.to_thread(fetch, base + "/readyz", context))[:2] == (200, b"ready\n")
    await wait_until(lambda: server.rejected["unauthorized"] == 2, "the refusals counted")


async def test_without_credentials_configured_metrics_stay_open(certs: Certs) -> None:
    registry = CollectorRegistry(auto_describe=False)
    server = MetricsServer("127.0.0.1", 0, registry, lambda: (True, ""), auth=MetricsAuth())
    await server.start()
    try:
        status, _, _ = await asyncio.to_thread(
            fetch, f"http://127.0.0.1:{server.port}/metrics", None
        )
        assert status == 200 and "unauthorized" not in server.rejected
    finally:
        await server.stop()
