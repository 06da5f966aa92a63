"""The Helm chart's metrics token, offline: with ``metrics.auth.existingSecret`` every broker
and nameserver takes ``metrics_bearer_token`` from that Secret through the environment
(never the ConfigMap), the ServiceMonitor sends it, and the keys cannot be set in a
server's config instead; without it nothing changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import helm_python as helm
import kubernetes_validate
import pytest

from rocketq.broker.config import load_broker_config, ordinal_settings
from rocketq.common.config import load_config
from rocketq.common.metrics_server import MetricsAuth
from rocketq.nameserver.config import NameServerConfig
from tests.k8s.pods import container_env, secrets_of
from tests.k8s.test_chart import (
    CASES,
    CRD_KINDS,
    EXISTING_SECRETS,
    KUBE_VERSIONS,
    Release,
    container,
    release_of,
)
from tools.gen_manifests import CHART_DIR, load_chart, render_chart

TOKEN_SECRET: Final = {"mq-metrics": {"scrape-token": "s3cret-metrics-token"}}
WITH_TOKEN: Final = {
    **CASES["secured"],
    "metrics": {
        "serviceMonitor": {"enabled": True},
        "auth": {"existingSecret": "mq-metrics", "key": "scrape-token"},
    },
}


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    return load_chart()


@pytest.fixture(scope="module")
def with_token(chart: helm.Chart) -> Release:
    return release_of(chart, WITH_TOKEN)


def server_configs(release: Release, tmp_path: Path) -> list[tuple[str, Any, str]]:
    """(StatefulSet name, the config its server loads, its ConfigMap text) of every server."""
    secrets = {**EXISTING_SECRETS, **TOKEN_SECRET, **secrets_of([d.obj for d in release.docs])}
    found = []
    for name, sts in release.objects("StatefulSet").items():
        (text,) = release.one("ConfigMap", name)["data"].values()
        path = tmp_path / f"{name}.toml"
        path.write_text(str(text))
        c = container(sts)
        env = container_env(c, fields={"status.podIP": "10.1.2.3"}, secrets=secrets)
        if c["name"] == "nameserver":
            cfg: Any = load_config(NameServerConfig, path, env=env)
        else:
            cfg = load_broker_config(path, env=env, overrides=ordinal_settings(0))[0]
        found.append((name, cfg, str(text)))
    return found


def test_every_server_asks_for_the_token_from_the_secret(
    with_token: Release, tmp_path: Path
) -> None:
    servers = server_configs(with_token, tmp_path)
    assert {c["name"] for c in map(container, with_token.objects("StatefulSet").values())} == {
        "nameserver",
        "broker",
    }
    for name, cfg, text in servers:
        assert MetricsAuth.from_config(cfg) == MetricsAuth("s3cret-metrics-token"), name
        assert cfg.metrics_tls_enable is True, name
        assert "s3cret-metrics-token" not in text and "metrics_bearer_token" not in text


def test_the_service_monitor_sends_the_token(with_token: Release) -> None:
    (monitor,) = with_token.objects("ServiceMonitor").values()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "mq-metrics", "key": "scrape-token"},
    }


def test_without_a_token_nothing_asks_for_one(chart: helm.Chart, tmp_path: Path) -> None:
    release = release_of(chart, CASES["secured"])
    for name, cfg, _ in server_configs(release, tmp_path):
        assert MetricsAuth.from_config(cfg) is None, name
    (monitor,) = release.objects("ServiceMonitor").values()
    assert "authorization" not in monitor["spec"]["endpoints"][0]
    for sts in release_of(chart, {}).objects("StatefulSet").values():
        names = {e["name"] for e in container(sts).get("env", [])}
        assert "ROCKETQ_METRICS_BEARER_TOKEN" not in names


@pytest.mark.parametrize(
    "values",
    [
        {"broker": {"config": {"metrics_bearer_token": "in-a-configmap"}}},
        {"nameserver": {"config": {"metrics_basic_auth": '{"username": "a", "password": "b"}'}}},
    ],
)
def test_the_token_cannot_be_put_in_a_configmap(chart: helm.Chart, values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmRenderError) as caught:
        render_chart(values, chart=chart)
    assert "use metrics.auth.existingSecret" in str(caught.value)


@pytest.mark.parametrize(
    ("auth", "where"),
    [
        ({"existingSecret": "Not_A_Name"}, "/metrics/auth/existingSecret"),
        ({"key": ""}, "/metrics/auth/key"),
        ({"token": "x"}, "'token' not allowed"),
    ],
)
def test_the_schema_refuses_bad_metrics_auth_values(
    chart: helm.Chart, auth: dict[str, str], where: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        render_chart({"metrics": {"auth": auth}}, chart=chart)
    assert where in str(caught.value)


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_the_release_with_a_token_is_valid_and_lints(with_token: Release, kube: str) -> None:
    for doc in with_token.docs:
        if doc.kind in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc.obj, kube, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc.kind} {doc.name} ({doc.source}) on {kube}: {exc.message}")
    report = helm.lint(CHART_DIR, WITH_TOKEN, strict=True, kube_version=f"v{kube}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
