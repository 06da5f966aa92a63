"""The Helm chart's tls.nodeNamePattern, offline: it reaches every server's config as
tls_node_name_pattern (which the server's TLS reads), it is absent when empty, a value with
surrounding spaces is refused, and broker.config may not set the key behind the chart."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Final

import helm_python as helm
import pytest
import trustme

from rocketq.broker.config import load_broker_config
from rocketq.remoting.tls import server_tls_from
from tests.k8s.test_chart import CASES, release_of
from tests.k8s.test_chart_security import config_text, servers
from tools.gen_manifests import load_chart, render_chart

PATTERN: Final = "spiffe://example.org/rocketq/node/*"


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    return load_chart()


def with_pattern(case: str, pattern: str) -> dict[str, Any]:
    values = dict(CASES[case])
    values["tls"] = {**values["tls"], "nodeNamePattern": pattern}
    return values


@pytest.mark.parametrize("case", ["secured", "cert-manager"])
def test_the_pattern_reaches_every_server(chart: helm.Chart, case: str) -> None:
    release = release_of(chart, with_pattern(case, PATTERN))
    for name, sts in servers(release):
        toml = tomllib.loads(config_text(release, sts))
        assert toml["tls_node_name_pattern"] == PATTERN, name
    plain = release_of(chart, CASES[case])
    for name, sts in servers(plain):
        assert "tls_node_name_pattern" not in tomllib.loads(config_text(plain, sts)), name


def test_a_broker_loads_the_pattern_into_its_tls(chart: helm.Chart, tmp_path: Path) -> None:
    release = release_of(chart, with_pattern("secured", PATTERN))
    brokers = [sts for name, sts in servers(release) if name == "broker.toml"]
    text = config_text(release, brokers[0])
    certs = tmp_path / "tls"
    certs.mkdir()
    # The server's TLS is built from files: point the chart's paths at real ones.
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(certs / "ca.crt"))
    leaf.cert_chain_pems[0].write_to_path(str(certs / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(certs / "tls.key"))
    toml = tomllib.loads(text)
    for value in toml.values():
        if isinstance(value, str) and value.startswith("/etc/rocketq-tls/"):
            text = text.replace(value, str(certs / Path(value).name))
    path = tmp_path / "broker.toml"
    path.write_text(text)
    config, _ = load_broker_config(path, env={})
    tls = server_tls_from(config)
    assert tls is not None and tls.nodes.pattern == PATTERN


def test_a_pattern_with_surrounding_spaces_is_refused(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        render_chart(with_pattern("secured", " rocketq-node"), chart=chart)
    assert "/tls/nodeNamePattern" in str(caught.value)


def test_broker_config_may_not_set_the_pattern(chart: helm.Chart) -> None:
    values = with_pattern("secured", PATTERN)
    values["broker"] = {**values["broker"], "config": {"tls_node_name_pattern": "*"}}
    with pytest.raises(helm.HelmRenderError) as caught:
        render_chart(values, chart=chart)
    assert "use tls.nodeNamePattern" in str(caught.value)
