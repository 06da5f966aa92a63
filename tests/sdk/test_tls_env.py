"""The SDK reads ``ROCKETQ_TLS`` and ``ROCKETQ_TLS_CA_FILE`` / ``_CERT_FILE`` / ``_KEY_FILE``
when a client is not told ``tls`` or a TLS file, as the CLI does: the producer, the
consumers, Admin and the Spark data source alike (one place, ``sdk/security.py``). A
``tls=False`` given wins over the environment; a bad value is a clear error. (Against a
real TLS cluster: tests/integration/test_private_data.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from rocketq import Admin, Producer, PullConsumer, PushConsumer
from rocketq.common.exceptions import ConfigError
from rocketq.sdk.consumer_config import ConsumerConfig
from rocketq.sdk.producer_config import ProducerConfig
from rocketq.sdk.security import SecurityConfig, client_security, tls_from_env, tls_settings
from rocketq.sdk.spark.options import SparkOptionError, parse_security_options

NS = "127.0.0.1:1"  # never reached: the clients are made, not started


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tls-env")
    ca = trustme.CA()
    leaf = ca.issue_cert("client.example")
    files = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    leaf.cert_chain_pems[0].write_to_path(str(files["cert"]))
    leaf.private_key_pem.write_to_path(str(files["key"]))
    return files


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ROCKETQ_TLS", "ROCKETQ_TLS_CA_FILE", "ROCKETQ_TLS_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ROCKETQ_TLS_KEY_FILE", raising=False)


@pytest.mark.parametrize("value", ["true", "1", "yes", "on", "TRUE", " On "])
def test_rocketq_tls_true_turns_tls_on(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("ROCKETQ_TLS", value)
    assert tls_from_env("Producer") is True
    security = client_security(ProducerConfig(), "Producer")
    assert security is not None and security.ssl is not None


@pytest.mark.parametrize("value", ["", "false", "0", "no", "off"])
def test_rocketq_tls_false_or_unset_is_plaintext(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("ROCKETQ_TLS", value)
    assert client_security(ProducerConfig(), "Producer") is None


def test_a_bad_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETQ_TLS", "maybe")
    with pytest.raises(ConfigError, match=r"Producer: ROCKETQ_TLS='maybe' is neither true"):
        Producer("pg", NS)


def test_the_files_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tls_files: dict[str, Path]
) -> None:
    monkeypatch.setenv("ROCKETQ_TLS", "true")
    monkeypatch.setenv("ROCKETQ_TLS_CA_FILE", str(tls_files["ca"]))
    monkeypatch.setenv("ROCKETQ_TLS_CERT_FILE", str(tls_files["cert"]))
    monkeypatch.setenv("ROCKETQ_TLS_KEY_FILE", str(tls_files["key"]))
    tls, files = tls_settings(SecurityConfig(), "Admin")
    assert tls and files == {
        "tls_ca_file": str(tls_files["ca"]),
        "tls_cert_file": str(tls_files["cert"]),
        "tls_key_file": str(tls_files["key"]),
    }
    # A file given wins over the environment's.
    _, files = tls_settings(SecurityConfig(tls_ca_file="/given/ca.pem"), "Admin")
    assert files["tls_ca_file"] == "/given/ca.pem"
    # The CA is the one trusted: a context loaded from it holds one CA certificate.
    security = client_security(SecurityConfig(), "Admin")
    assert security is not None and security.ssl is not None
    assert len(security.ssl.get_ca_certs()) == 1


def test_a_missing_file_named_by_the_environment_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ROCKETQ_TLS", "true")
    monkeypatch.setenv("ROCKETQ_TLS_CA_FILE", str(tmp_path / "nope.pem"))
    with pytest.raises(ConfigError, match=r"tls_ca_file .*nope\.pem.* does not exist"):
        Admin(NS)


def test_tls_false_given_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, tls_files: dict[str, Path]
) -> None:
    monkeypatch.setenv("ROCKETQ_TLS", "true")
    monkeypatch.setenv("ROCKETQ_TLS_CA_FILE", str(tls_files["ca"]))
    assert client_security(ProducerConfig(tls=False), "Producer") is None
    assert Admin(NS, tls=False).client.nameserver.remoting.security is None


def test_a_file_in_the_environment_without_tls_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tls_files: dict[str, Path]
) -> None:
    monkeypatch.setenv("ROCKETQ_TLS_CA_FILE", str(tls_files["ca"]))
    with pytest.raises(ConfigError, match="ROCKETQ_TLS_CA_FILE set but TLS is off"):
        client_security(ConsumerConfig(), "PushConsumer")


def test_every_client_reads_it(monkeypatch: pytest.MonkeyPatch, tls_files: dict[str, Path]) -> None:
    monkeypatch.setenv("ROCKETQ_TLS", "yes")
    monkeypatch.setenv("ROCKETQ_TLS_CA_FILE", str(tls_files["ca"]))
    clients = [
        Producer("pg", NS).client,
        PushConsumer("cg", NS).client,
        PullConsumer("cg", NS).client,
        Admin(NS).client,
    ]
    for client in clients:
        security = client.nameserver.remoting.security
        assert security is not None and security.ssl is not None, client
    # The Spark data source: no tls option, TLS from the environment (checked on the driver).
    assert parse_security_options({}).tls is None
    security = client_security(parse_security_options({}), "the rocketq data source")
    assert security is not None and security.ssl is not None
    assert client_security(parse_security_options({"tls": "false"}), "spark") is None
    monkeypatch.setenv("ROCKETQ_TLS_CA_FILE", "/nowhere/ca.pem")
    with pytest.raises(SparkOptionError, match="ca"):
        parse_security_options({})
