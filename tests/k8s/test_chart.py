"""The Helm chart deploy/k8s/helm/rocketq, offline: Helm's own engine renders it
(helm-python-sdk), `helm lint --strict` passes, every object is valid for the oldest and the
newest Kubernetes the chart supports (kubernetes-validate's schemas, strict), and the
objects say what the brokers and nameservers need: who is who in a group, where the
nameservers and Raft peers are, probes, volumes, security, monitoring."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from rocketq.broker.config import load_broker_config, ordinal_settings
from rocketq.cli.main import app
from rocketq.common.config import load_config
from rocketq.nameserver.config import NameServerConfig
from tests.k8s.pods import container_env, secrets_of
from tools.gen_manifests import (
    CHART_DIR,
    NAMESPACE,
    RELEASE,
    Document,
    documents,
    load_chart,
    manifests,
    render_chart,
    stale,
)
from tools.promql import DASHBOARD_DIR, RULES_FILE

# The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion) and the newest one
# kubernetes-validate knows.
KUBE_VERSIONS: Final = ("1.27.0", "1.37.0")
# Custom resources of the Prometheus Operator and cert-manager: no schema in
# kubernetes-validate, their shape is asserted below and in test_chart_security.py.
MONITORING_KINDS: Final = {"ServiceMonitor", "PrometheusRule"}
CRD_KINDS: Final = MONITORING_KINDS | {"Certificate"}
DOMAIN: Final = f"{NAMESPACE}.svc.cluster.local"
MONITORING: Final = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {"enabled": True},
    "dashboards": {"enabled": True, "annotations": {"grafana_folder": "RocketQ"}},
}
CASES: Final[dict[str, dict[str, Any]]] = {
    "default": {},
    "ha": {"broker": {"replication": "ha", "groups": 2, "role": "SYNC_MASTER", "slaves": 1}},
    "raft": {"broker": {"replication": "raft", "groups": 2}},
    "monitoring": {"metrics": MONITORING},
    # Named groups, broker keys, no volumes, required anti-affinity, no gRPC endpoint.
    "custom": {
        "broker": {
            "groups": ["orders", "payments"],
            "grpc": {"enabled": False},
            "config": {
                "flush_disk_type": "SYNC_FLUSH",
                "auto_create_topic_enable": False,
                "max_message_size": 8388608,
                "disk_space_clean_forcibly_ratio": 0.8,
                "message_delay_level": "1s 5s 10s",
            },
            "persistence": {"enabled": False},
            "antiAffinity": "hard",
        },
        "nameserver": {
            "replicas": 3,
            "persistence": {"enabled": False},
            "config": {"order_message_enable": True},
        },
    },
}
# broker.replication -> pods per group.
MEMBERS: Final = {"none": 1, "ha": 2, "raft": 3}
# The apache.rocketmq.v2 endpoint's port (broker.ports.grpc), RocketMQ 5's proxy port.
GRPC_PORT: Final = 8081
# The secured cases: auth from Secrets the chart makes (values) or the user's own, TLS from
# a Secret or cert-manager.
SUPER_USER: Final = {"username": "admin", "password": "admin-secret-1"}
INNER: Final = {"accessKey": "rocketq-inner", "secretKey": "inner-secret-1"}
CASES["secured"] = {
    "auth": {"enabled": True, "superUser": SUPER_USER, "innerCredentials": INNER},
    "tls": {"enabled": True, "existingSecret": "rocketq-tls", "clientAuth": "require"},
    "broker": {"replication": "ha", "groups": 2},
    "metrics": MONITORING,
}
CASES["cert-manager"] = {
    "auth": {
        "enabled": True,
        "superUser": {"existingSecret": "mq-super-user"},
        "innerCredentials": {"existingSecret": "mq-inner"},
    },
    "tls": {
        "enabled": True,
        "mode": "permissive",
        "certManager": {"enabled": True, "issuerRef": {"name": "mq-ca", "kind": "ClusterIssuer"}},
    },
    "broker": {"replication": "raft"},
    "networkPolicy": {
        "clientSelector": {"namespaceSelector": {"matchLabels": {"team": "shop"}}},
        "monitoringNamespaceSelector": {"matchLabels": {"name": "prometheus"}},
    },
}
# The environment variables the chart gives servers with auth on, in order.
AUTH_ENV: Final = [
    "RQ_SUPER_USER_NAME",
    "RQ_SUPER_USER_PASSWORD",
    "ROCKETQ_INIT_AUTHENTICATION_USER",
    "RQ_INNER_ACCESS_KEY",
    "RQ_INNER_SECRET_KEY",
    "ROCKETQ_INNER_CLIENT_AUTHENTICATION_CREDENTIALS",
]
TLS_DIR: Final = "/etc/rocketq-tls"
# The Secrets the cert-manager case names (made by the cluster's admin, not the chart).
EXISTING_SECRETS: Final = {
    "mq-super-user": {"username": "root", "password": "root-secret-2"},
    "mq-inner": {"accessKey": "mq-inner", "secretKey": "mq-inner-secret-2"},
}


@dataclass(frozen=True)
class Release:
    """A rendered release: its objects and NOTES.txt."""

    values: dict[str, Any]
    docs: list[Document]
    notes: str

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        return {d.name: d.obj for d in self.docs if d.kind == kind}

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = self.objects(kind)
        assert name in found, f"no {kind} {name}; there are {sorted(found)}"
        return found[name]

    @property
    def groups(self) -> list[str]:
        return sorted(
            o["metadata"]["labels"]["rocketq/group"]
            for o in self.objects("StatefulSet").values()
            if o["metadata"]["labels"]["app.kubernetes.io/component"] == "broker"
        )

    def broker_toml(self, group: str) -> dict[str, Any]:
        data = self.one("ConfigMap", f"{RELEASE}-{group}")["data"]
        return tomllib.loads(data["broker.toml"])

    def nameserver_toml(self) -> dict[str, Any]:
        data = self.one("ConfigMap", f"{RELEASE}-nameserver")["data"]
        return tomllib.loads(data["nameserver.toml"])

    def pod_env(self, statefulset: str, ip: str = "10.1.2.3") -> dict[str, str]:
        """The environment of the StatefulSet's container as the kubelet makes it (the
        release's Secrets and those named in EXISTING_SECRETS)."""
        secrets = {**EXISTING_SECRETS, **secrets_of([d.obj for d in self.docs])}
        sts = self.one("StatefulSet", statefulset)
        return container_env(container(sts), fields={"status.podIP": ip}, secrets=secrets)


def broker_values(values: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(yaml.safe_load((CHART_DIR / "values.yaml").read_text())["broker"])
    merged.update(values.get("broker", {}))
    return merged


def release_of(chart: helm.Chart, values: dict[str, Any]) -> Release:
    rendered = render_chart(values, chart=chart)
    notes = next((t for p, t in rendered.items() if p.endswith("NOTES.txt")), "")
    return Release(values, documents(rendered), notes)


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    return load_chart()


@pytest.fixture(scope="module")
def releases(chart: helm.Chart) -> dict[str, Release]:
    return {case: release_of(chart, values) for case, values in CASES.items()}


def container(statefulset: Mapping[str, Any]) -> dict[str, Any]:
    (only,) = statefulset["spec"]["template"]["spec"]["containers"]
    return dict(only)


def port_names(c: Mapping[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in c["ports"]}


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and In/Exists expressions) against labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        value = labels.get(expr["key"])
        if expr["operator"] == "In" and value not in expr["values"]:
            return False
        if expr["operator"] == "Exists" and value is None:
            return False
    return True


# Helm and Kubernetes.


def test_versions_match_the_chart_and_the_schemas() -> None:
    meta = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2"
    assert meta["kubeVersion"] == f">={KUBE_VERSIONS[0]}-0"
    assert kubernetes_validate.utils.latest_version() == KUBE_VERSIONS[-1]


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_helm_lint_strict_passes(case: str, kube: str) -> None:
    report = helm.lint(CHART_DIR, CASES[case], strict=True, kube_version=f"v{kube}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_every_object_is_valid_kubernetes(
    releases: dict[str, Release], case: str, kube: str
) -> None:
    docs = releases[case].docs
    assert docs
    for doc in docs:
        if doc.kind in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc.obj, kube, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc.kind} {doc.name} ({doc.source}) on {kube}: {exc.message}")


def test_only_monitoring_and_cert_manager_render_custom_resources(
    releases: dict[str, Release],
) -> None:
    for case, release in releases.items():
        kinds = {d.kind for d in release.docs}
        expected = MONITORING_KINDS if "metrics" in CASES[case] else set()
        if CASES[case].get("tls", {}).get("certManager", {}).get("enabled"):
            expected = expected | {"Certificate"}
        assert kinds & CRD_KINDS == expected, case


# The nameservers.


@pytest.mark.parametrize("case", CASES)
def test_nameservers(releases: dict[str, Release], case: str) -> None:
    release = releases[case]
    replicas = CASES[case].get("nameserver", {}).get("replicas", 2)
    sts = release.one("StatefulSet", f"{RELEASE}-nameserver")
    assert sts["spec"]["replicas"] == replicas
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["serviceName"] == f"{RELEASE}-nameserver-headless"
    c = container(sts)
    assert c["args"] == ["nameserver", "--config", "/etc/rocketq/nameserver.toml"]
    assert port_names(c) == {"remoting": 9876, "metrics": 9877}

    headless = release.one("Service", f"{RELEASE}-nameserver-headless")["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    client = release.one("Service", f"{RELEASE}-nameserver")["spec"]
    assert "clusterIP" not in client
    assert [(p["name"], p["port"], p["targetPort"]) for p in client["ports"]] == [
        ("remoting", 9876, "remoting")
    ]
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert selects({"matchLabels": client["selector"]}, pod_labels)
    assert selects({"matchLabels": headless["selector"]}, pod_labels)

    toml = release.nameserver_toml()
    assert toml["listen_port"] == 9876 and toml["metrics_port"] == 9877
    assert toml["bind_address"] == "0.0.0.0"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert Path(toml["kv_config_path"]).parent == Path(mounts["data"])


def test_the_nameserver_toml_loads(releases: dict[str, Release], tmp_path: Path) -> None:
    for case, release in releases.items():
        path = tmp_path / f"{case}.toml"
        path.write_text(
            release.one("ConfigMap", f"{RELEASE}-nameserver")["data"]["nameserver.toml"]
        )
        cfg = load_config(NameServerConfig, path, env=release.pod_env(f"{RELEASE}-nameserver"))
        assert cfg.kv_config_path == "/home/rocketq/namesrv/kvConfig.json"
    custom = releases["custom"].nameserver_toml()
    assert custom["order_message_enable"] is True


# The broker groups.


@pytest.mark.parametrize("case", CASES)
def test_broker_groups(releases: dict[str, Release], case: str) -> None:
    release = releases[case]
    b = broker_values(CASES[case])
    count = b["groups"]
    names = sorted(count) if isinstance(count, list) else [f"broker-{c}" for c in "abcd"[:count]]
    assert release.groups == names
    for group in names:
        sts = release.one("StatefulSet", f"{RELEASE}-{group}")
        spec = sts["spec"]
        assert spec["replicas"] == MEMBERS[b["replication"]]
        assert spec["podManagementPolicy"] == "Parallel"
        assert spec["serviceName"] == f"{RELEASE}-{group}-headless"
        c = container(sts)
        assert c["image"] == "rocketq:0.1.0"
        assert c["args"] == [
            "broker",
            "--config",
            "/etc/rocketq/broker.toml",
            "--ordinal-from-hostname",
        ]
        assert c["env"][0] == {
            "name": "ROCKETQ_BROKER_IP1",
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
        }
        auth = CASES[case].get("auth", {}).get("enabled", False)
        assert [e["name"] for e in c["env"][1:]] == (AUTH_ENV if auth else [])
        replication_port = {"raft": 40911} if b["replication"] == "raft" else {"ha": 10912}
        grpc_port = {"grpc": GRPC_PORT} if b["grpc"]["enabled"] else {}
        assert port_names(c) == {
            "client": 10911,
            "metrics": 10913,
            **replication_port,
            **grpc_port,
        }
        headless = release.one("Service", f"{RELEASE}-{group}-headless")["spec"]
        assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
        assert {p["name"]: p["port"] for p in headless["ports"]} == port_names(c)
        assert selects(
            {"matchLabels": headless["selector"]}, spec["template"]["metadata"]["labels"]
        )
        # Another group's pods are not this group's.
        for other in names:
            if other != group:
                other_pods = release.one("StatefulSet", f"{RELEASE}-{other}")["spec"]["template"]
                assert not selects(spec["selector"], other_pods["metadata"]["labels"])


def nameserver_addresses(replicas: int) -> list[str]:
    return [
        f"{RELEASE}-nameserver-{n}.{RELEASE}-nameserver-headless.{DOMAIN}:9876"
        for n in range(replicas)
    ]


@pytest.mark.parametrize("case", CASES)
def test_broker_toml(releases: dict[str, Release], case: str) -> None:
    release = releases[case]
    b = broker_values(CASES[case])
    replicas = CASES[case].get("nameserver", {}).get("replicas", 2)
    for group in release.groups:
        toml = release.broker_toml(group)
        assert toml["namesrv_addr"].split(";") == nameserver_addresses(replicas)
        assert toml["broker_cluster_name"] == "DefaultCluster"
        assert toml["broker_name"] == group
        assert toml["bind_address"] == "0.0.0.0"
        assert toml["store_path_root_dir"] == "/home/rocketq/store"
        assert (toml["listen_port"], toml["metrics_port"]) == (10911, 10913)
        assert toml["grpc_listen_port"] == (GRPC_PORT if b["grpc"]["enabled"] else -1)
        for key, value in b["config"].items():
            assert toml[key] == value, key
        if b["replication"] == "raft":
            assert toml["enable_dledger_commit_log"] is True
            assert toml["dledger_group"] == group
            headless = f"{RELEASE}-{group}-headless"
            assert toml["dledger_peers"].split(";") == [
                f"n{n}-{RELEASE}-{group}-{n}.{headless}.{DOMAIN}:40911" for n in range(3)
            ]
            assert "broker_role" not in toml and "ha_listen_port" not in toml
        else:
            assert toml["broker_role"] == b["role"]
            assert toml["ha_listen_port"] == 10912
            assert not any(k.startswith("dledger") or k.startswith("enable_dl") for k in toml)


@pytest.mark.parametrize("case", ["default", "ha", "raft", "custom", "secured", "cert-manager"])
def test_every_pod_loads_its_broker_toml(
    releases: dict[str, Release], case: str, tmp_path: Path
) -> None:
    """What each pod's broker makes of the ConfigMap, its IP and its ordinal (what
    `--ordinal-from-hostname` takes from the pod's name)."""
    release = releases[case]
    replication = broker_values(CASES[case])["replication"]
    grpc = broker_values(CASES[case])["grpc"]["enabled"]
    for group in release.groups:
        path = tmp_path / f"{group}.toml"
        path.write_text(release.one("ConfigMap", f"{RELEASE}-{group}")["data"]["broker.toml"])
        members = release.one("StatefulSet", f"{RELEASE}-{group}")["spec"]["replicas"]
        for ordinal in range(members):
            broker, store = load_broker_config(
                path,
                env=release.pod_env(f"{RELEASE}-{group}"),
                overrides=ordinal_settings(ordinal),
            )
            assert broker.broker_addr == "10.1.2.3:10911"
            assert broker.grpc_listen_port == (GRPC_PORT if grpc else -1)
            assert store.store_path_root_dir == "/home/rocketq/store"
            assert broker.broker_id == ordinal
            if replication == "raft":
                pod = f"{RELEASE}-{group}-{ordinal}"
                assert broker.raft_peers[broker.dledger_self_id].startswith(f"{pod}.")
            elif ordinal == 0:
                assert broker.broker_role == broker_values(CASES[case])["role"]
            else:
                assert broker.broker_role == "SLAVE"


def test_strings_are_quoted_as_toml(chart: helm.Chart) -> None:
    text = 'a "quoted" \\ back\tslash <&> ü\n'
    release = release_of(chart, {"broker": {"config": {"message_delay_level": text}}})
    assert release.broker_toml("broker-a")["message_delay_level"] == text


def test_ha_groups_are_a_master_and_its_slaves(releases: dict[str, Release]) -> None:
    release = releases["ha"]
    assert release.groups == ["broker-a", "broker-b"]
    for group in release.groups:
        assert release.one("StatefulSet", f"{RELEASE}-{group}")["spec"]["replicas"] == 2
        assert release.broker_toml(group)["broker_role"] == "SYNC_MASTER"


def client_rule(policy: Mapping[str, Any]) -> dict[str, Any]:
    """The ingress rule of a broker group's NetworkPolicy that admits clients (port 10911)."""
    (rule,) = [
        r for r in policy["spec"]["ingress"] if {"protocol": "TCP", "port": 10911} in r["ports"]
    ]
    return dict(rule)


def test_the_grpc_endpoint_is_served_where_its_port_says(chart: helm.Chart) -> None:
    """Every broker serves RocketMQ 5's clients on broker.ports.grpc: its broker.toml, its
    container's and headless Service's port grpc, and its NetworkPolicy admitting clients
    there as on the client port; NOTES.txt gives the endpoint."""
    values = {"broker": {"groups": 2, "replication": "ha", "ports": {"grpc": 18081}}}
    release = release_of(chart, values)
    for group in release.groups:
        assert release.broker_toml(group)["grpc_listen_port"] == 18081
        sts = release.one("StatefulSet", f"{RELEASE}-{group}")
        assert port_names(container(sts))["grpc"] == 18081
        headless = release.one("Service", f"{RELEASE}-{group}-headless")["spec"]
        (port,) = [p for p in headless["ports"] if p["name"] == "grpc"]
        assert port == {"name": "grpc", "port": 18081, "targetPort": "grpc"}
        rule = client_rule(release.one("NetworkPolicy", f"{RELEASE}-{group}"))
        assert rule["ports"] == [
            {"protocol": "TCP", "port": 10911},
            {"protocol": "TCP", "port": 18081},
        ]
    endpoint = f"{RELEASE}-broker-a-headless.{DOMAIN}:18081"
    assert "RocketMQ 5's clients (gRPC, apache.rocketmq.v2)" in release.notes
    assert f"\n  {endpoint}\n" in release.notes


def test_without_the_grpc_endpoint_nothing_names_its_port(chart: helm.Chart) -> None:
    release = release_of(chart, {"broker": {"replication": "raft", "grpc": {"enabled": False}}})
    for group in release.groups:
        assert release.broker_toml(group)["grpc_listen_port"] == -1
        sts = release.one("StatefulSet", f"{RELEASE}-{group}")
        assert "grpc" not in port_names(container(sts))
        headless = release.one("Service", f"{RELEASE}-{group}-headless")["spec"]
        assert "grpc" not in {p["name"] for p in headless["ports"]}
        rule = client_rule(release.one("NetworkPolicy", f"{RELEASE}-{group}"))
        assert rule["ports"] == [{"protocol": "TCP", "port": 10911}]
    # The port is nowhere but in the (unused) values.
    assert [d.name for d in release.docs if str(GRPC_PORT) in d.text] == []
    assert "gRPC" not in release.notes and str(GRPC_PORT) not in release.notes


def test_the_cli_knows_the_options_the_chart_gives(releases: dict[str, Release]) -> None:
    for sts in statefulsets(releases["raft"]):
        args = container(sts)["args"]
        done = CliRunner().invoke(app, [args[0], "--help"], env={"COLUMNS": "200"})
        assert done.exit_code == 0, done.output
        for option in (a for a in args if a.startswith("--")):
            assert option in done.output, f"rocketq {args[0]} has no {option}"


# Probes, volumes, security, scheduling.


def statefulsets(release: Release) -> list[dict[str, Any]]:
    return list(release.objects("StatefulSet").values())


@pytest.mark.parametrize("case", CASES)
def test_probes(releases: dict[str, Release], case: str) -> None:
    for sts in statefulsets(releases[case]):
        c = container(sts)
        probes = {k: c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe")}
        paths = {k: (p["httpGet"]["path"], p["httpGet"]["port"]) for k, p in probes.items()}
        assert paths == {
            "startupProbe": ("/readyz", "metrics"),
            "readinessProbe": ("/readyz", "metrics"),
            "livenessProbe": ("/healthz", "metrics"),
        }
        # The metrics port serves HTTPS once TLS is on.
        tls = CASES[case].get("tls", {}).get("enabled", False)
        assert {p["httpGet"]["scheme"] for p in probes.values()} == {"HTTPS" if tls else "HTTP"}
        # /healthz itself waits up to 5 s for the event loop.
        assert probes["livenessProbe"]["timeoutSeconds"] > 5
        startup = probes["startupProbe"]
        grace = sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        if container(sts)["name"] == "broker":
            # Minutes for a store's recovery; a minute for a graceful stop.
            assert startup["periodSeconds"] * startup["failureThreshold"] >= 300
            assert grace >= 60
        else:
            assert startup["periodSeconds"] * startup["failureThreshold"] >= 60
            assert grace >= 30


@pytest.mark.parametrize("case", CASES)
def test_volumes(releases: dict[str, Release], case: str) -> None:
    values = CASES[case]
    for sts in statefulsets(releases[case]):
        c = container(sts)
        component = c["name"]
        data = "store" if component == "broker" else "data"
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        tls = values.get("tls", {}).get("enabled", False)
        assert mounts == {
            "config": "/etc/rocketq",
            "tmp": "/tmp",
            data: "/home/rocketq/store" if component == "broker" else "/home/rocketq/namesrv",
            **({"tls": TLS_DIR} if tls else {}),
        }
        pod = sts["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["config"]["configMap"]["name"] == sts["metadata"]["name"]
        assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}
        persistent = values.get(component, {}).get("persistence", {}).get("enabled", True)
        if persistent:
            (claim,) = sts["spec"]["volumeClaimTemplates"]
            assert claim["metadata"]["name"] == data and data not in volumes
            assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
            size = "20Gi" if component == "broker" else "1Gi"
            assert claim["spec"]["resources"]["requests"]["storage"] == size
            assert "storageClassName" not in claim["spec"]
        else:
            assert "volumeClaimTemplates" not in sts["spec"]
            assert volumes[data] == {"name": data, "emptyDir": {}}


def test_a_storage_class_is_passed_on(chart: helm.Chart) -> None:
    values = {"broker": {"persistence": {"storageClass": "fast", "size": "100Gi"}}}
    release = release_of(chart, values)
    (claim,) = release.one("StatefulSet", f"{RELEASE}-broker-a")["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["spec"]["resources"]["requests"]["storage"] == "100Gi"


@pytest.mark.parametrize("case", CASES)
def test_security_context(releases: dict[str, Release], case: str) -> None:
    for sts in statefulsets(releases[case]):
        pod = sts["spec"]["template"]["spec"]
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert container(sts)["securityContext"] == {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
        # Service links would put ROCKETQ_NAMESERVER_SERVICE_HOST ... in the environment,
        # which the broker reads as (unknown) config keys.
        assert pod["enableServiceLinks"] is False
        assert pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize("case", CASES)
def test_anti_affinity_spreads_each_group(releases: dict[str, Release], case: str) -> None:
    for sts in statefulsets(releases[case]):
        component = container(sts)["name"]
        mode = CASES[case].get(component, {}).get("antiAffinity", "soft")
        anti = sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        if mode == "soft":
            (preferred,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
            assert preferred["weight"] == 100
            term = preferred["podAffinityTerm"]
        else:
            (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        # The term selects exactly this StatefulSet's pods.
        assert term["labelSelector"] == sts["spec"]["selector"]


def test_affinity_nodes_and_tolerations_are_passed_on(chart: helm.Chart) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                ]
            }
        }
    }
    tolerations = [{"key": "mq", "operator": "Exists", "effect": "NoSchedule"}]
    scheduling = {"affinity": affinity, "nodeSelector": {"pool": "mq"}, "tolerations": tolerations}
    release = release_of(chart, {"broker": scheduling, "nameserver": scheduling})
    for sts in statefulsets(release):
        pod = sts["spec"]["template"]["spec"]
        assert pod["affinity"] == affinity
        assert pod["nodeSelector"] == {"pool": "mq"}
        assert pod["tolerations"] == tolerations


@pytest.mark.parametrize("case", CASES)
def test_disruption_budgets(releases: dict[str, Release], case: str) -> None:
    release = releases[case]
    pdbs = release.objects("PodDisruptionBudget")
    sts = release.objects("StatefulSet")
    assert set(pdbs) == set(sts)
    for name, pdb in pdbs.items():
        assert pdb["spec"] == {"maxUnavailable": 1, "selector": sts[name]["spec"]["selector"]}


# Monitoring.


def test_service_monitor_scrapes_each_job_once(releases: dict[str, Release]) -> None:
    release = releases["monitoring"]
    (monitor,) = release.objects("ServiceMonitor").values()
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert spec["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    services = release.objects("Service")
    scraped = {
        name: svc["metadata"]["labels"][spec["jobLabel"]]
        for name, svc in services.items()
        if selects(spec["selector"], svc["metadata"]["labels"])
    }
    assert scraped == {
        f"{RELEASE}-nameserver-headless": "rocketq-nameserver",
        f"{RELEASE}-broker-a-headless": "rocketq-broker",
    }
    for name in scraped:
        assert "metrics" in {p["name"] for p in services[name]["spec"]["ports"]}
    # The jobs are those the alert rules read.
    assert 'up{job="rocketq-broker"}' in RULES_FILE.read_text()
    assert 'up{job="rocketq-nameserver"}' in RULES_FILE.read_text()


def test_prometheus_rule_is_the_rules_file(releases: dict[str, Release]) -> None:
    (rule,) = releases["monitoring"].objects("PrometheusRule").values()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == yaml.safe_load(RULES_FILE.read_text())


def test_dashboard_configmaps_are_the_json_files(releases: dict[str, Release]) -> None:
    maps = {
        name: cm
        for name, cm in releases["monitoring"].objects("ConfigMap").items()
        if "grafana_dashboard" in cm["metadata"]["labels"]
    }
    files = sorted(DASHBOARD_DIR.glob("*.json"))
    assert len(files) == 3
    assert sorted(maps) == [f"{RELEASE}-dashboard-{f.stem}" for f in files]
    for file in files:
        cm = maps[f"{RELEASE}-dashboard-{file.stem}"]
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "RocketQ"}
        assert cm["data"] == {file.name: file.read_text()}
        json.loads(cm["data"][file.name])


def test_the_dashboard_label_is_configurable(chart: helm.Chart) -> None:
    dashboards = {"enabled": True, "label": "dashboards", "labelValue": "rocketq"}
    release = release_of(chart, {"metrics": {"dashboards": dashboards}})
    labelled = [
        cm
        for cm in release.objects("ConfigMap").values()
        if cm["metadata"]["labels"].get("dashboards") == "rocketq"
    ]
    assert len(labelled) == 3


def test_the_chart_links_to_the_rules_and_dashboards() -> None:
    """Helm reads files inside the chart only: files/ holds links to the canonical files
    (Helm's loader follows them), not copies."""
    rules = CHART_DIR / "files" / "rules.yml"
    dashboards = CHART_DIR / "files" / "dashboards"
    assert rules.is_symlink() and rules.resolve() == RULES_FILE.resolve()
    assert dashboards.is_symlink() and dashboards.resolve() == DASHBOARD_DIR.resolve()
    # Relative, so they hold in any checkout.
    assert not Path(os.readlink(rules)).is_absolute()
    assert not Path(os.readlink(dashboards)).is_absolute()


def test_helm_loads_the_linked_files(chart: helm.Chart) -> None:
    files = {f["name"]: f["data"] for f in chart.files}
    assert files["files/rules.yml"] == RULES_FILE.read_text()
    for path in DASHBOARD_DIR.glob("*.json"):
        assert files[f"files/dashboards/{path.name}"] == path.read_text()


# Values: bad ones, names, scale-out.


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"broker": {"replication": "bogus"}}, ["/broker/replication", "'none', 'ha', 'raft'"]),
        ({"broker": {"groups": 0}}, ["/broker/groups", "minimum: got 0, want 1"]),
        ({"broker": {"groups": []}}, ["/broker/groups", "minItems"]),
        ({"broker": {"groups": ["Broker_A"]}}, ["/broker/groups/0", "does not match pattern"]),
        ({"broker": {"role": "SLAVE"}}, ["/broker/role", "'ASYNC_MASTER', 'SYNC_MASTER'"]),
        ({"broker": {"grups": 2}}, ["/broker", "'grups' not allowed"]),
        ({"nameserver": {"replicas": 0}}, ["/nameserver/replicas", "minimum"]),
        ({"broker": {"config": {"x": [1]}}}, ["/broker/config/x", "got array"]),
        ({"broker": {"ports": {"grpc": 0}}}, ["/broker/ports/grpc", "minimum: got 0, want 1"]),
        ({"broker": {"grpc": {"enabled": "yes"}}}, ["/broker/grpc/enabled", "got string"]),
        ({"broker": {"grpc": {"port": 8081}}}, ["/broker/grpc", "'port' not allowed"]),
    ],
)
def test_the_schema_refuses_bad_values(
    chart: helm.Chart, values: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        render_chart(values, chart=chart)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (
            {"broker": {"role": "SYNC_MASTER"}},
            ["SYNC_MASTER without a slave", "broker.replication=ha"],
        ),
        (
            {"broker": {"config": {"broker_name": "x"}}},
            ["broker.config.broker_name", "use broker.groups"],
        ),
        (
            {"broker": {"config": {"dledger_peers": "n0-a:1"}}},
            ["broker.config.dledger_peers", "the chart sets this key"],
        ),
        (
            {"nameserver": {"config": {"listen_port": 1}}},
            ["nameserver.config.listen_port", "nameserver.ports.remoting"],
        ),
        (
            {"broker": {"config": {"grpc_listen_port": 9090}}},
            ["broker.config.grpc_listen_port", "use broker.grpc.enabled and broker.ports.grpc"],
        ),
    ],
)
def test_the_templates_refuse_values_that_cannot_work(
    chart: helm.Chart, values: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(helm.HelmRenderError) as caught:
        render_chart(values, chart=chart)
    for word in words:
        assert word in str(caught.value)


@pytest.fixture(scope="module")
def schemaless(tmp_path_factory: pytest.TempPathFactory) -> helm.Chart:
    """The chart without values.schema.json, as `helm install --skip-schema-validation`
    renders it (the links under files/ copied as files)."""
    copy = tmp_path_factory.mktemp("chart") / "rocketq"
    shutil.copytree(CHART_DIR, copy)
    (copy / "values.schema.json").unlink()
    return helm.Chart.load(copy)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"broker": {"replication": "bogus"}}, ['broker.replication: "bogus"', "none, ha, raft"]),
        ({"broker": {"groups": 0}}, ["broker.groups: 0 is not a number of groups from 1"]),
        ({"broker": {"groups": []}}, ["broker.groups: the list is empty"]),
        ({"broker": {"groups": ["a", "a"]}}, ['broker.groups: "a" is listed twice']),
        ({"broker": {"groups": ["Broker_A"]}}, ['broker.groups: "Broker_A" is not a group name']),
        ({"broker": {"role": "SLAVE"}}, ['broker.role: "SLAVE" is not ASYNC_MASTER']),
    ],
)
def test_without_the_schema_the_templates_refuse_the_same_values(
    schemaless: helm.Chart, values: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(helm.HelmRenderError) as caught:
        render_chart(values, chart=schemaless)
    for word in words:
        assert word in str(caught.value)


def test_names_follow_the_release(chart: helm.Chart) -> None:
    other = render_chart({}, release="mq", chart=chart)
    names = {(d.kind, d.name) for d in documents(other)}
    assert ("StatefulSet", "mq-rocketq-broker-a") in names
    assert ("StatefulSet", "mq-rocketq-nameserver") in names
    with pytest.raises(helm.HelmRenderError, match="longer than 30 characters"):
        render_chart({}, release="a-very-long-release-name-for-mq", chart=chart)


@pytest.mark.parametrize("replication", ["none", "ha", "raft"])
def test_scale_out_adds_a_group_and_changes_nothing_else(
    chart: helm.Chart, replication: str
) -> None:
    def objects(groups: int) -> dict[tuple[str, str], dict[str, Any]]:
        values = {"broker": {"groups": groups, "replication": replication}}
        return {(d.kind, d.name): d.obj for d in release_of(chart, values).docs}

    one, two = objects(1), objects(2)
    added = set(two) - set(one)
    assert added == {
        ("ConfigMap", f"{RELEASE}-broker-b"),
        ("Service", f"{RELEASE}-broker-b-headless"),
        ("StatefulSet", f"{RELEASE}-broker-b"),
        ("PodDisruptionBudget", f"{RELEASE}-broker-b"),
        ("NetworkPolicy", f"{RELEASE}-broker-b"),
    }
    assert set(one) <= set(two)
    assert [key for key in one if one[key] != two[key]] == []


def test_notes_say_how_to_send_a_first_message(releases: dict[str, Release]) -> None:
    notes = releases["default"].notes
    assert f"kubectl -n {NAMESPACE} port-forward svc/{RELEASE}-nameserver 9876:9876" in notes
    assert f"rocketq send -n {RELEASE}-nameserver:9876 -t Hello" in notes
    assert f"exec -it {RELEASE}-broker-a-0" in notes
    assert "kubectl -n rocketq run" in notes
    assert "--image=rocketq:0.1.0" in notes
    # RocketMQ 5's clients: a broker's gRPC port, by a name the broker certificates carry.
    assert f"\n  {RELEASE}-broker-a-headless.{DOMAIN}:{GRPC_PORT}\n" in notes
    assert "remoting and gRPC ports admit" in notes


# The plain manifests.


def test_the_committed_manifests_are_what_the_chart_renders() -> None:
    assert stale() == [], "run `python tools/gen_manifests.py`"


def test_check_names_what_drifted(tmp_path: Path) -> None:
    files = manifests()
    assert list(files)[-1] == "kustomization.yaml"
    assert yaml.safe_load(files["kustomization.yaml"])["resources"] == list(files)[:-1]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert stale(tmp_path) == []
    (tmp_path / "statefulset.yaml").write_text(files["statefulset.yaml"] + "# edited\n")
    (tmp_path / "extra.yaml").write_text("{}\n")
    (tmp_path / "service.yaml").unlink()
    assert stale(tmp_path) == ["extra.yaml", "service.yaml", "statefulset.yaml"]
