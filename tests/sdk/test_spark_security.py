"""The data source's credential and TLS options: accessKey, secretKey, credentialsFile, tls,
tlsCaFile, tlsCertFile, tlsKeyFile and tlsVerifyHostname reach the read's and the write's
clients, and a bad one is refused on the driver with the option's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.auth.signature import ACCESS_KEY
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.sdk.security import SecurityConfig
from rocketq.sdk.spark.options import (
    SparkOptionError,
    parse_read_options,
    parse_write_options,
    security_options,
)
from rocketq.sdk.spark.queues import QueueClient
from tests.remoting.tls_certs import make_certs

BASE = {"namesrv": "127.0.0.1:1", "topic": "Orders"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ROCKETQ_ACCESS_KEY", "ROCKETQ_SECRET_KEY", "ROCKETQ_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_read_and_write_options_carry_credentials_and_tls(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    options = {
        **BASE,
        "accessKey": "ak",
        "secretKey": "sk",
        "tls": "true",
        "tlsCaFile": certs.ca,
        "tlsVerifyHostname": "false",
    }
    want = SecurityConfig(
        access_key="ak", secret_key="sk", tls=True, tls_ca_file=certs.ca, tls_verify_hostname=False
    )
    assert parse_read_options(options, streaming=False).security == want
    assert parse_write_options(options, ["body"]).security == want


def test_no_options_no_security() -> None:
    assert parse_read_options(BASE, streaming=True).security == SecurityConfig()


def test_queue_client_signs_with_the_options() -> None:
    security = parse_read_options({**BASE, "accessKey": "ak", "secretKey": "sk"}, streaming=False)
    client = QueueClient("127.0.0.1:1", security=security.security)
    hook = client.client.nameserver.remoting.security
    assert hook is not None and hook.sign is not None and hook.ssl is None
    cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"})
    hook.sign(cmd)
    assert cmd.ext is not None and cmd.ext[ACCESS_KEY] == "ak" and "Signature" in cmd.ext
    assert QueueClient("127.0.0.1:1").client.nameserver.remoting.security is None


def test_bad_options_are_refused_on_the_driver(tmp_path: Path) -> None:
    with pytest.raises(SparkOptionError, match="access key but no secret key"):
        parse_read_options({**BASE, "accessKey": "ak"}, streaming=False)
    missing = str(tmp_path / "ca.pem")
    with pytest.raises(SparkOptionError, match=r"tlsCaFile '.*ca\.pem' does not exist"):
        parse_write_options({**BASE, "tls": "true", "tlsCaFile": missing}, ["body"])
    with pytest.raises(SparkOptionError, match="tlsCaFile set but option tls is not true"):
        parse_read_options({**BASE, "tlsCaFile": missing}, streaming=False)
    with pytest.raises(SparkOptionError, match="option tls must be true or false"):
        parse_read_options({**BASE, "tls": "maybe"}, streaming=False)


def test_client_settings_as_options_round_trip() -> None:
    settings = {
        "access_key": "ak",
        "secret_key": "sk",
        "credentials_file": None,
        "tls": True,
        "tls_ca_file": "/ca.pem",
        "tls_cert_file": "",
        "tls_key_file": "",
        "tls_verify_hostname": False,
    }
    options = security_options(settings)
    assert options == {
        "accessKey": "ak",
        "secretKey": "sk",
        "tls": "true",
        "tlsCaFile": "/ca.pem",
        "tlsVerifyHostname": "false",
    }
    assert security_options({"tls": False, "tls_verify_hostname": True}) == {}
