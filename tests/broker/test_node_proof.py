"""A broker with authentication on refuses to start unless its HA and Raft ports can tell
the group's members from anyone: inner credentials, or required client certificates with a
node pattern (a certificate from the trusted CA alone may be a user's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.auth.model import Requirement
from rocketq.auth.server_security import MemoryAuthMetadata, server_security
from rocketq.broker.broker import check_nodes_prove_identity
from rocketq.broker.config import BrokerConfig
from rocketq.common.exceptions import ConfigError
from rocketq.remoting.command import RemotingCommand
from tests.remoting.tls_certs import make_certs

INNER = '{"accessKey": "rocketq-inner", "secretKey": "inner-secret-1"}'


def requirement(cmd: RemotingCommand) -> Requirement:
    raise AssertionError("no request is checked here")


def check(**keys: object) -> None:
    config = BrokerConfig(authentication_enabled=True, **keys)  # type: ignore[arg-type]
    check_nodes_prove_identity(config, server_security(config, MemoryAuthMetadata(), requirement))


def test_certificates_prove_nodes_only_with_a_node_pattern(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    mutual = {
        "tls_server_mode": "enforcing",
        "tls_server_cert_path": certs.server.cert,
        "tls_server_key_path": certs.server.key,
        "tls_server_trust_cert_path": certs.ca,
        "tls_server_need_client_auth": "require",
    }
    with pytest.raises(ConfigError, match="tls_node_name_pattern"):
        check(**mutual)
    check(**mutual, tls_node_name_pattern="broker-*")
    # Optional client certificates prove nothing (a peer may show none): credentials needed.
    with pytest.raises(ConfigError, match="inner_client_authentication_credentials"):
        check(**{**mutual, "tls_server_need_client_auth": "optional"}, tls_node_name_pattern="b*")
    check(**mutual, inner_client_authentication_credentials=INNER)


def test_without_tls_the_inner_credentials_are_needed() -> None:
    with pytest.raises(ConfigError, match="inner_client_authentication_credentials"):
        check()
    check(inner_client_authentication_credentials=INNER)
