"""A cluster made by ``rocketq cluster up --auth --tls --console`` keeps its data private and
its HTTP ports closed to strangers, on real processes:

- every folder under the data dir is 0700 and every file 0600 (stores, secrets,
  certificates, cluster.json), the logs 0640;
- a broker store an older version left 0755/0644 is narrowed when the broker starts again,
  and its log says so;
- every metrics port serves HTTPS only, and its /metrics asks for the cluster's metrics
  token (a broker given ``metrics_basic_auth`` takes that too): 401 with WWW-Authenticate
  without them, while /healthz and /readyz stay open for probes;
- the console serves HTTPS only, with the cluster's certificate;
- the SDK finds the cluster from the environment ``cluster up`` prints (``ROCKETQ_TLS``,
  ``ROCKETQ_TLS_CA_FILE``, ``ROCKETQ_CREDENTIALS_FILE``, ``NAMESRV_ADDR``), nothing passed;
- ``--monitor``'s Prometheus scrapes every node over HTTPS with the token.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shlex
import ssl
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from rocketq import Admin, Message, Producer, SendStatus
from rocketq.cluster.console_launch import load_console
from rocketq.cluster.launcher import LocalCluster
from rocketq.cluster.monitor import start_monitor, stop_monitor
from tests.integration.waiting import wait_until

BASIC: Final = {"username": "scraper", "password": "scrape-pass-1"}
TIMEOUT: Final = 10.0
TOPIC: Final = "Private"


def rocketq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketq.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


@dataclass
class Up:
    cluster: LocalCluster
    stdout: str

    @property
    def env(self) -> dict[str, str]:
        """What ``cluster up`` told clients to export."""
        line = next(ln for ln in self.stdout.splitlines() if ln.startswith("clients of"))
        words = shlex.split(line.split("export ", 1)[1])
        return dict(word.split("=", 1) for word in words)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    data = tmp_path_factory.mktemp("private") / "cluster"
    started = rocketq(
        "cluster", "up", "--data-dir", str(data), "--namesrv-port", "0",
        "--auth", "--tls", "--console",
        "--set", f"metrics_basic_auth={json.dumps(BASIC)}",
        "--set", "mapped_file_size_commit_log=1048576",
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        cluster = LocalCluster.load(data)
        with asyncio.Runner() as runner:
            runner.run(warm_up(cluster))
        yield Up(cluster, started.stdout)
    finally:
        down = rocketq("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr


async def warm_up(cluster: LocalCluster) -> None:
    """A topic and a message with a key: CommitLog, queues and index have files."""
    settings = cluster.client_settings()
    async with Admin(cluster.namesrv_addr, **settings) as admin:
        await admin.update_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg-private", cluster.namesrv_addr, **settings) as producer:
        result = await producer.send(Message(TOPIC, b"warm-up", keys=["k1"]))
    assert result.status is SendStatus.SEND_OK


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_data_dir_is_private_and_the_logs_0640(up: Up) -> None:
    data = up.cluster.data_dir
    logs = {data / "logs" / f"{n.name}.{kind}" for n in up.cluster.nodes for kind in ("log", "out")}
    logs.add(data / "console" / "console.log")
    seen: dict[str, int] = {}
    wrong: dict[str, str] = {}
    assert mode(data) == 0o700
    for folder, dirs, files in os.walk(data):
        for name in dirs:
            path = Path(folder) / name
            if mode(path) != 0o700:
                wrong[str(path.relative_to(data))] = oct(mode(path))
        for name in files:
            path = Path(folder) / name
            # Logs (the nodes', the console's, a Prometheus's) may be read by the group.
            want = 0o640 if up.cluster.is_log(path) else 0o600
            seen[str(path.relative_to(data))] = mode(path)
            if mode(path) & ~want or (path in logs and mode(path) != 0o640):
                wrong[str(path.relative_to(data))] = oct(mode(path))
    assert wrong == {}
    assert all(str(log.relative_to(data)) in seen for log in logs)
    # What must be private is there: messages, queues, index, state, secrets, keys.
    store = up.cluster.brokers[0].store.relative_to(data)
    for part in ("commitlog", "consumequeue", "index", "checkpoint", "config"):
        assert any(p.startswith(f"{store}/{part}") for p in seen), f"no {part} in the store"
    for must in ("secrets/admin.credentials", "secrets/metrics.token", "tls/server.key"):
        assert seen.get(must) == 0o600, must
    assert seen.get("cluster.json") == 0o600
    assert all(p in {str(lg.relative_to(data)) for lg in logs} for p in seen if p.endswith(".out"))


def test_an_old_store_is_narrowed_when_the_broker_starts_again(up: Up) -> None:
    cluster = up.cluster
    broker = cluster.brokers[0]
    cluster.kill(broker.name)
    for path in [broker.store, *broker.store.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    offset = broker.log.stat().st_size
    cluster.restart(broker.name)
    loose = {
        str(p): oct(mode(p)) for p in [broker.store, *broker.store.rglob("*")] if mode(p) & 0o077
    }
    assert loose == {}
    said = broker.log.read_text(errors="replace")[offset:]
    assert re.search(r"store: \d+ files and folders under .* now private", said), said[-2000:]


def get(
    url: str, context: ssl.SSLContext | None, headers: dict[str, str] | None = None
) -> tuple[int, bytes, list[str]]:
    """Status, body and WWW-Authenticate values of a GET."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as answer:
            return answer.status, answer.read(), []
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read(), refused.headers.get_all("WWW-Authenticate") or []


def test_metrics_are_https_and_need_the_token(up: Up) -> None:
    cluster = up.cluster
    context = cluster.metrics_context()
    assert context is not None
    assert cluster.secrets is not None
    token_file = cluster.secrets.metrics_token_file
    assert f"/metrics asks for the bearer token in {token_file}" in up.stdout
    for node in cluster.nodes:
        assert node.metrics_url.startswith("https://"), node.metrics_url
        status, body, challenge = get(node.metrics_url, context)
        assert status == 401 and b"rocketq_" not in body, node.name
        assert 'Bearer realm="rocketq metrics"' in challenge
        wrong = {"Authorization": "Bearer not-the-token"}
        assert get(node.metrics_url, context, wrong)[0] == 401
        status, body, _ = get(node.metrics_url, context, cluster.metrics_headers())
        assert status == 200 and b"rocketq_" in body, node.name
        assert b"rocketq_metrics_http_rejected_total" in body
        for probe in ("/healthz", "/readyz"):
            assert get(node.metrics_base + probe, context)[0] == 200, (node.name, probe)
        plain = node.metrics_base.replace("https://", "http://") + "/healthz"
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(plain, timeout=TIMEOUT)


def test_a_broker_given_basic_auth_takes_it_too(up: Up) -> None:
    cluster = up.cluster
    context = cluster.metrics_context()
    broker, nameserver = cluster.brokers[0], cluster.nameservers[0]
    token = base64.b64encode(f"{BASIC['username']}:{BASIC['password']}".encode()).decode()
    basic = {"Authorization": f"Basic {token}"}
    status, body, _ = get(broker.metrics_url, context, basic)
    assert status == 200 and b"rocketq_" in body
    assert get(nameserver.metrics_url, context, basic)[0] == 401  # given to the brokers only
    bad = base64.b64encode(f"{BASIC['username']}:nope".encode()).decode()
    status, _, challenge = get(broker.metrics_url, context, {"Authorization": f"Basic {bad}"})
    assert status == 401 and any(c.startswith("Basic ") for c in challenge)


def test_the_console_serves_https_only(up: Up) -> None:
    console = load_console(up.cluster.data_dir)
    assert console is not None and console.alive()
    assert console.url.startswith("https://") and f"console: {console.url}" in up.stdout
    assert up.cluster.certs is not None
    context = ssl.create_default_context(cafile=str(up.cluster.certs.ca_file))
    status, page, _ = get(console.url + "/login", context)
    assert status == 200 and b"password" in page.lower()
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(console.url.replace("https://", "http://") + "/login", timeout=5)


async def test_the_sdk_finds_the_cluster_from_the_printed_environment(
    up: Up, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = up.env
    assert env["ROCKETQ_TLS"] == "true" and env["ROCKETQ_TLS_CA_FILE"].endswith("ca.pem")
    for name in ("ROCKETQ_ACCESS_KEY", "ROCKETQ_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    async with Producer("pg-from-env") as producer:  # nothing passed: all from the environment
        assert producer.client.nameserver.remoting.security is not None
        result = await producer.send(Message(TOPIC, b"from the environment"))
    assert result.status is SendStatus.SEND_OK


def brokers_up(url: str) -> list[str]:
    """The nodes Prometheus scraped successfully (``up == 1``)."""
    from tests.monitoring.conftest import series

    return sorted(s["metric"]["rocketq_node"] for s in series(url, "up == 1"))


async def test_prometheus_scrapes_every_node_over_https_with_the_token(up: Up) -> None:
    from tests.monitoring.conftest import need_prometheus

    need_prometheus()
    cluster = up.cluster
    prometheus = start_monitor(cluster, scrape_interval="1s")
    try:
        config = (prometheus.home / "prometheus.yml").read_text()
        assert cluster.secrets is not None and cluster.secrets.metrics_token not in config
        assert mode(prometheus.home / "prometheus.yml") == 0o600
        names = sorted(n.name for n in cluster.nodes)
        await wait_until(
            lambda: brokers_up(prometheus.url) == names,
            lambda: f"every node up in Prometheus (up: {brokers_up(prometheus.url)})",
            timeout=30,
        )
    finally:
        stop_monitor(cluster.data_dir)
