"""``rocketq cluster up --auth --tls`` and ``--console``: the secrets and certificates a
local cluster makes once and keeps, what it prints for clients, and a console whose login
is the super user's, all against real processes."""

from __future__ import annotations

import os
import re
import ssl
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx

from rocketq.cluster.launcher import LocalCluster
from rocketq.cluster.security import cluster_certificates, cluster_secrets


def test_secrets_are_made_once_readable_by_their_owner_only(tmp_path: Path) -> None:
    first = cluster_secrets(tmp_path)
    again = cluster_secrets(tmp_path)
    assert (again.username, again.password, again.inner_json) == (
        first.username,
        first.password,
        first.inner_json,
    )
    for path in (first.admin_file, first.inner_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700
    admin = tomllib.loads(first.admin_file.read_text())
    assert admin == {"access_key": "rocketq", "secret_key": first.password}
    env = first.node_env()
    assert env["ROCKETQ_AUTHENTICATION_ENABLED"] == env["ROCKETQ_AUTHORIZATION_ENABLED"] == "true"
    assert first.password in env["ROCKETQ_INIT_AUTHENTICATION_USER"]


def test_damaged_secrets_are_a_clear_error(tmp_path: Path) -> None:
    made = cluster_secrets(tmp_path)
    made.admin_file.write_text("not = [toml")
    try:
        cluster_secrets(tmp_path)
    except ValueError as exc:
        assert "cannot be read" in str(exc) and "remove the folder" in str(exc)
    else:
        raise AssertionError("a damaged secrets file was read")


def test_certificates_are_made_once(tmp_path: Path) -> None:
    certs = cluster_certificates(tmp_path)
    pem = certs.cert_file.read_bytes()
    assert cluster_certificates(tmp_path).cert_file.read_bytes() == pem
    assert stat.S_IMODE(certs.key_file.stat().st_mode) == 0o600
    assert certs.node_settings()["tls_server_mode"] == "enforcing"


def _rocketq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketq", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_cluster_up_with_auth_tls_and_console(tmp_path: Path) -> None:
    data = tmp_path / "secure"
    up = _rocketq(
        "cluster", "up", "--auth", "--tls", "--console", "--data-dir", str(data),
        "--namesrv-port", "0",
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        line = next(x for x in up.stdout.splitlines() if x.startswith("clients of this cluster"))
        env = dict(re.findall(r"(\w+)=(\S+)", line))
        assert env["ROCKETQ_CREDENTIALS_FILE"] == str(data / "secrets" / "admin.credentials")
        assert env["ROCKETQ_TLS_CA_FILE"] == str(data / "tls" / "ca.pem")
        # The printed environment is all a CLI client needs; without it, it is refused.
        sent = _rocketq("send", "-t", "SecuredUp", "-b", "hi", env=env)
        assert sent.returncode == 0 and "SEND_OK" in sent.stdout, sent.stderr
        plain = _rocketq("send", "-t", "SecuredUp", "-n", env["NAMESRV_ADDR"])
        assert plain.returncode != 0 and "enforces TLS" in plain.stderr, plain.stderr
        # The console: HTTPS only (the cluster's certificate), nothing without a login, and
        # the super user's login works.
        url = re.search(r"console: (https://\S+)", up.stdout)
        assert url is not None, up.stdout
        ca = ssl.create_default_context(cafile=env["ROCKETQ_TLS_CA_FILE"])
        with httpx.Client(base_url=url[1], verify=ca) as web:
            assert web.get("/api/cluster").status_code == 401
            form = web.get("/login").text
            token = re.search(r'name="csrf_token" value="([^"]+)"', form)
            assert token is not None
            password = tomllib.loads(Path(env["ROCKETQ_CREDENTIALS_FILE"]).read_text())
            login = web.post(
                "/login",
                data={
                    "username": "rocketq",
                    "password": password["secret_key"],
                    "csrf_token": token[1],
                },
            )
            assert login.status_code == 303
            users = web.get("/api/users")
            assert users.status_code == 200, users.text
            assert [u["username"] for u in users.json()["users"]] == ["rocketq"]
        # A restart keeps the secrets: the same super user still signs.
        cluster = LocalCluster.load(data)
        cluster.restart("broker-a-0")
        again = _rocketq("send", "-t", "SecuredUp", "-b", "again", env=env)
        assert again.returncode == 0, again.stderr
        unsigned = {k: v for k, v in env.items() if k != "ROCKETQ_CREDENTIALS_FILE"}
        refused = _rocketq("send", "-t", "SecuredUp", "-b", "unsigned", env=unsigned)
        assert "authentication failed" in refused.stderr, refused.stderr  # auth still on
    finally:
        down = _rocketq("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr
