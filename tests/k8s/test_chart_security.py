"""The Helm chart's auth, TLS and NetworkPolicy, offline: what a pod's server makes of its
rendered config and environment with auth and TLS on (from the chart's own Secrets or the
user's, from a TLS Secret or cert-manager Certificates), which peers each NetworkPolicy
lets reach which port, and the values refused because they would leave a cluster open or
without a certificate. Every secured release is also linted and validated against the
Kubernetes schemas by test_chart.py (its "secured" and "cert-manager" cases)."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import helm_python as helm
import pytest
import trustme
from typer.testing import CliRunner

from rocketq.auth.credentials import Credentials
from rocketq.broker.config import load_broker_config, ordinal_settings
from rocketq.chaos.netns import Host
from rocketq.cli.main import app
from rocketq.common.config import load_config
from rocketq.common.exceptions import ConfigError
from rocketq.nameserver.config import NameServerConfig
from rocketq.remoting.tls import client_tls_from, server_tls_from
from tests.k8s.pods import Endpoint, container_env, network_policy_rules
from tests.k8s.test_chart import (
    CASES,
    EXISTING_SECRETS,
    INNER,
    SUPER_USER,
    TLS_DIR,
    Release,
    container,
    release_of,
    selects,
)
from tools.gen_manifests import CHART_DIR, NAMESPACE, RELEASE, load_chart, render_chart

SECURED: Final = ("secured", "cert-manager")
DOMAIN: Final = f"{NAMESPACE}.svc.cluster.local"
TLS_KEYS: Final = (
    "tls_server_mode",
    "tls_server_cert_path",
    "tls_server_key_path",
    "tls_server_trust_cert_path",
    "tls_server_need_client_auth",
    "tls_client_enable",
    "tls_client_cert_path",
    "tls_client_key_path",
    "tls_client_trust_cert_path",
    "tls_client_verify_hostname",
    "metrics_tls_enable",
)


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    return load_chart()


@pytest.fixture(scope="module")
def releases(chart: helm.Chart) -> dict[str, Release]:
    return {
        case: release_of(chart, CASES[case]) for case in (*SECURED, "default", "raft", "custom")
    }


def servers(release: Release) -> list[tuple[str, dict[str, Any]]]:
    """(config file name, StatefulSet) of every server: the nameservers and each group."""
    return [
        ("nameserver.toml" if container(s)["name"] == "nameserver" else "broker.toml", s)
        for s in release.objects("StatefulSet").values()
    ]


def config_text(release: Release, sts: Mapping[str, Any]) -> str:
    name = sts["metadata"]["name"]
    data = release.one("ConfigMap", name)["data"]
    (text,) = data.values()
    return str(text)


def expected_credentials(case: str) -> tuple[dict[str, str], dict[str, str]]:
    """The super user and inner credentials the case's pods should be given."""
    auth = CASES[case]["auth"]
    if auth["superUser"].get("existingSecret"):
        return (
            EXISTING_SECRETS[auth["superUser"]["existingSecret"]],
            EXISTING_SECRETS[auth["innerCredentials"]["existingSecret"]],
        )
    return dict(SUPER_USER), dict(INNER)


# Auth: the keys and the environment each server gets.


@pytest.mark.parametrize("case", SECURED)
def test_every_server_gets_auth_on_the_super_user_and_the_inner_credentials(
    releases: dict[str, Release], case: str, tmp_path: Path
) -> None:
    release = releases[case]
    user, inner = expected_credentials(case)
    for file, sts in servers(release):
        name = sts["metadata"]["name"]
        path = tmp_path / f"{name}.toml"
        path.write_text(config_text(release, sts))
        env = release.pod_env(name)
        if file == "broker.toml":
            cfg: Any = load_broker_config(path, env=env, overrides=ordinal_settings(0))[0]
        else:
            cfg = load_config(NameServerConfig, path, env=env)
        assert cfg.authentication_enabled is True, name
        assert cfg.authorization_enabled is True, name
        assert json.loads(cfg.init_authentication_user) == user, name
        assert json.loads(cfg.inner_client_authentication_credentials) == inner, name
        signer = Credentials.from_json(cfg.inner_client_authentication_credentials)
        assert (signer.access_key, signer.secret_key) == (inner["accessKey"], inner["secretKey"])
        # Secrets reach the pod through the environment only, never the ConfigMap.
        text = config_text(release, sts)
        assert user["password"] not in text and inner["secretKey"] not in text


def test_auth_off_sets_no_auth_key_and_no_secret(releases: dict[str, Release]) -> None:
    for case in ("default", "raft"):
        release = releases[case]
        assert release.objects("Secret") == {}
        for _, sts in servers(release):
            toml = tomllib.loads(config_text(release, sts))
            assert not any(k.startswith(("authentication", "authorization", "tls_")) for k in toml)
            assert "metrics_tls_enable" not in toml
            names = [e["name"] for e in container(sts).get("env", [])]
            assert not any("AUTH" in n or n.startswith("RQ_") for n in names)


def test_the_chart_makes_the_secrets_only_when_none_is_named(
    releases: dict[str, Release],
) -> None:
    made = releases["secured"].objects("Secret")
    assert set(made) == {f"{RELEASE}-super-user", f"{RELEASE}-inner-credentials"}
    for secret in made.values():
        assert secret["type"] == "Opaque"
        assert set(secret["data"]) in ({"username", "password"}, {"accessKey", "secretKey"})
    # The user's own Secrets: the chart makes none and refers to theirs.
    assert releases["cert-manager"].objects("Secret") == {}
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for _, sts in servers(releases["cert-manager"])
        for e in container(sts)["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs == set(EXISTING_SECRETS)


def nameserver_config(release: Release, secrets: Mapping[str, Mapping[str, str]], tmp: Path) -> Any:
    """The first nameserver's config as it loads with these Secrets in the cluster."""
    sts = release.one("StatefulSet", f"{RELEASE}-nameserver")
    env = container_env(container(sts), fields={}, secrets=secrets)
    path = tmp / "nameserver.toml"
    path.write_text(config_text(release, sts))
    return load_config(NameServerConfig, path, env=env)


def test_any_printable_character_but_quote_and_backslash_survives_into_the_json(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    """Kubernetes puts the Secret's values into the JSON as they are: what JSON takes
    unescaped reaches the server unchanged (a $(NAME) inside a value is not expanded)."""
    odd = "p$(RQ_SUPER_USER_NAME) ü {}'<&> :,%$$"
    secrets = {**EXISTING_SECRETS, "mq-super-user": {"username": "root", "password": odd}}
    cfg = nameserver_config(releases["cert-manager"], secrets, tmp_path)
    assert json.loads(cfg.init_authentication_user) == {"username": "root", "password": odd}


def test_a_quote_in_an_existing_secret_stops_the_server_with_the_reason(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    secrets = {**EXISTING_SECRETS, "mq-super-user": {"username": "root", "password": 'a"b'}}
    with pytest.raises(ConfigError, match="ROCKETQ_INIT_AUTHENTICATION_USER"):
        nameserver_config(releases["cert-manager"], secrets, tmp_path)


# TLS: the keys, the mounted Secret, the certificates.


def certificate_secret(release: Release, sts: Mapping[str, Any]) -> str:
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    secret = volumes["tls"]["secret"]
    assert secret["defaultMode"] == 0o440
    return str(secret["secretName"])


@pytest.mark.parametrize("case", SECURED)
def test_every_server_reads_its_certificate_from_the_mounted_secret(
    releases: dict[str, Release], case: str
) -> None:
    release = releases[case]
    tls = CASES[case]["tls"]
    for _, sts in servers(release):
        toml = tomllib.loads(config_text(release, sts))
        assert toml["tls_server_mode"] == tls.get("mode", "enforcing")
        assert toml["tls_server_need_client_auth"] == tls.get("clientAuth", "none")
        assert toml["tls_client_enable"] is True and toml["metrics_tls_enable"] is True
        assert toml["tls_client_verify_hostname"] is False
        for key in TLS_KEYS:
            if key.endswith("_path"):
                assert Path(toml[key]).parent == Path(TLS_DIR), key
                assert Path(toml[key]).name in {"tls.crt", "tls.key", "ca.crt"}
        c = container(sts)
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "tls"]
        # The whole Secret, read-only: a subPath mount would never see a renewed file.
        assert mount == {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}
        secret = certificate_secret(release, sts)
        if "existingSecret" in tls:
            assert secret == tls["existingSecret"]
        else:
            assert secret == f"{sts['metadata']['name']}-tls"
        # Renewed certificates are loaded by the running servers: no restart on a change.
        annotations = sts["spec"]["template"]["metadata"]["annotations"]
        assert list(annotations) == ["checksum/config"]


def wildcard_match(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        first, _, rest = host.partition(".")
        return bool(first) and rest == pattern[2:]
    return pattern == host


def hosts_in(address_list: str) -> list[str]:
    """Host names of "host:port;host:port" (a Raft peer "nN-host:port" too)."""
    hosts = []
    for address in address_list.split(";"):
        host = address.rsplit(":", 1)[0]
        hosts.append(re.sub(r"^n\d+-", "", host))
    return hosts


def test_cert_manager_certificates_name_every_address_the_servers_dial(
    releases: dict[str, Release],
) -> None:
    release = releases["cert-manager"]
    certificates = release.objects("Certificate")
    assert set(certificates) == {f"{RELEASE}-nameserver", f"{RELEASE}-broker-a"}
    for _, sts in servers(release):
        name = sts["metadata"]["name"]
        cert = certificates[name]
        assert cert["apiVersion"] == "cert-manager.io/v1"
        spec = cert["spec"]
        assert spec["secretName"] == certificate_secret(release, sts)
        assert spec["issuerRef"] == {
            "name": "mq-ca",
            "kind": "ClusterIssuer",
            "group": "cert-manager.io",
        }
        assert {"server auth", "client auth"} <= set(spec["usages"])
        assert spec["privateKey"]["rotationPolicy"] == "Always"
        names = spec["dnsNames"]
        # Every pod's stable name.
        for ordinal in range(sts["spec"]["replicas"]):
            pod = f"{name}-{ordinal}.{sts['spec']['serviceName']}.{DOMAIN}"
            assert any(wildcard_match(n, pod) for n in names), pod
        # The name the ServiceMonitor checks.
        assert f"{RELEASE}.{DOMAIN}" in names
    # What the brokers dial: the nameservers and the Raft peers, by name.
    ns_names = certificates[f"{RELEASE}-nameserver"]["spec"]["dnsNames"]
    toml = release.broker_toml("broker-a")
    for host in hosts_in(toml["namesrv_addr"]):
        assert any(wildcard_match(n, host) for n in ns_names), host
    broker_names = certificates[f"{RELEASE}-broker-a"]["spec"]["dnsNames"]
    for host in hosts_in(toml["dledger_peers"]):
        assert any(wildcard_match(n, host) for n in broker_names), host
    # And the clients, by the nameserver Service's names.
    for host in (f"{RELEASE}-nameserver", f"{RELEASE}-nameserver.{NAMESPACE}.svc"):
        assert host in ns_names
    # A broker group's certificate is that group's identity (mTLS), not another's.
    assert certificates[f"{RELEASE}-broker-a"]["spec"]["commonName"] == "broker-a"


def test_no_certificate_without_cert_manager(releases: dict[str, Release]) -> None:
    assert releases["secured"].objects("Certificate") == {}


def test_the_remoting_layer_accepts_the_tls_keys(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    """The rendered keys with real certificate files where the Secret is mounted: the
    server's TLS and its own connections' TLS are built from them."""
    ca = trustme.CA()
    cert = ca.issue_cert(f"*.{RELEASE}-nameserver-headless.{DOMAIN}")
    mount = tmp_path / "tls"
    mount.mkdir()
    cert.cert_chain_pems[0].write_to_path(mount / "tls.crt")
    for extra in cert.cert_chain_pems[1:]:
        extra.write_to_path(mount / "tls.crt", append=True)
    cert.private_key_pem.write_to_path(mount / "tls.key")
    ca.cert_pem.write_to_path(mount / "ca.crt")
    for case in SECURED:
        release = releases[case]
        sts = release.one("StatefulSet", f"{RELEASE}-nameserver")
        path = tmp_path / f"{case}.toml"
        path.write_text(config_text(release, sts).replace(TLS_DIR, str(mount)))
        cfg = load_config(NameServerConfig, path, env=release.pod_env(f"{RELEASE}-nameserver"))
        server = server_tls_from(cfg)
        assert server is not None and server.mode == CASES[case]["tls"].get("mode", "enforcing")
        assert client_tls_from(cfg) is not None


def test_tls_off_keeps_plain_http_probes_and_no_tls_volume(
    releases: dict[str, Release],
) -> None:
    for _, sts in servers(releases["default"]):
        c = container(sts)
        assert all(c[p]["httpGet"]["scheme"] == "HTTP" for p in ("readinessProbe", "livenessProbe"))
        assert "tls" not in {v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]}


def test_the_service_monitor_scrapes_https_checking_the_ca(
    releases: dict[str, Release], chart: helm.Chart
) -> None:
    (monitor,) = releases["secured"].objects("ServiceMonitor").values()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "rocketq-tls", "key": "ca.crt"}},
        "serverName": f"{RELEASE}.{DOMAIN}",
    }
    own = {"insecureSkipVerify": False, "serverName": "metrics.example"}
    values = dict(CASES["secured"])
    values["metrics"] = {"serviceMonitor": {"enabled": True, "tlsConfig": own}}
    (monitor,) = release_of(chart, values).objects("ServiceMonitor").values()
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == own


# NetworkPolicy.


def peers_of(policy: Mapping[str, Any], port: int) -> list[dict[str, Any]]:
    """The peers a policy admits on a TCP port (all rules naming it)."""
    found: list[dict[str, Any]] = []
    for rule in policy["spec"]["ingress"]:
        if any(p["port"] == port and p["protocol"] == "TCP" for p in rule["ports"]):
            found += rule["from"]
    return found


def admits(
    peers: list[dict[str, Any]], pod_labels: Mapping[str, str], ns_labels: Mapping[str, str]
) -> bool:
    """Whether a pod with these labels in a namespace with these labels is one of the
    peers (a podSelector alone means the policy's own namespace, ``NAMESPACE``)."""
    for peer in peers:
        pod_ok = "podSelector" not in peer or selects(peer["podSelector"], pod_labels)
        if "namespaceSelector" in peer:
            ns_ok = selects(peer["namespaceSelector"], ns_labels)
        else:
            ns_ok = ns_labels.get("kubernetes.io/metadata.name") == NAMESPACE
        if pod_ok and ns_ok:
            return True
    return False


def pod_labels(sts: Mapping[str, Any]) -> dict[str, str]:
    return dict(sts["spec"]["template"]["metadata"]["labels"])


OWN_NS: Final = {"kubernetes.io/metadata.name": NAMESPACE}
OTHER_NS: Final = {"kubernetes.io/metadata.name": "shop", "team": "shop"}
STRANGER_NS: Final = {"kubernetes.io/metadata.name": "elsewhere"}
APP: Final = {"app": "shop-frontend"}


@pytest.mark.parametrize("case", ["default", "raft", "custom", *SECURED])
def test_each_port_admits_only_its_peers(releases: dict[str, Release], case: str) -> None:
    release = releases[case]
    policies = release.objects("NetworkPolicy")
    statefulsets = release.objects("StatefulSet")
    assert set(policies) == set(statefulsets)
    np_values = CASES[case].get("networkPolicy", {})
    monitoring_ns = (
        {"kubernetes.io/metadata.name": "monitoring"}
        if "monitoringNamespaceSelector" not in np_values
        else {"kubernetes.io/metadata.name": "prom", "name": "prometheus"}
    )
    restricted_clients = bool(np_values.get("clientSelector"))
    for name, policy in policies.items():
        sts = statefulsets[name]
        labels = pod_labels(sts)
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress"]
        # It guards exactly this StatefulSet's pods.
        assert spec["podSelector"] == sts["spec"]["selector"]
        ports = {p["name"]: p["containerPort"] for p in container(sts)["ports"]}
        covered = {p["port"] for rule in spec["ingress"] for p in rule["ports"]}
        assert covered == set(ports.values()), name
        own_pods = [pod_labels(s) for s in statefulsets.values()]
        for port_name, port in ports.items():
            peers = peers_of(policy, port)
            if port_name in ("client", "remoting", "grpc"):
                # Clients (RocketMQ 5's on the gRPC port): any pod (or those of
                # clientSelector), and the release's own.
                assert all(admits(peers, other, OWN_NS) for other in own_pods)
                assert admits(peers, APP, OTHER_NS)
                # Restricted to clientSelector's namespaces: no other namespace.
                assert admits(peers, APP, STRANGER_NS) is not restricted_clients
            elif port_name in ("ha", "raft"):
                # The group's own pods, nobody else: not the nameservers, not another
                # group, not a client, not another namespace's pod with the same labels.
                for other in statefulsets.values():
                    same = other["metadata"]["name"] == name
                    assert admits(peers, pod_labels(other), OWN_NS) is same
                assert not admits(peers, APP, OWN_NS)
                assert not admits(peers, labels, OTHER_NS)
            else:
                assert port_name == "metrics"
                assert admits(peers, {"app": "prometheus"}, monitoring_ns)
                assert not admits(peers, labels, OWN_NS)
                assert not admits(peers, APP, OTHER_NS)


def test_network_policies_can_be_left_out(chart: helm.Chart) -> None:
    release = release_of(chart, {"networkPolicy": {"enabled": False}})
    assert release.objects("NetworkPolicy") == {}


# Values that would leave a cluster open or without a certificate.

AUTH_ON: Final = {"enabled": True}


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (
            {"auth": AUTH_ON},
            [
                "auth.enabled is true but auth.superUser (the initial super user) is missing",
                "auth.superUser.existingSecret",
                "auth.superUser.username and auth.superUser.password",
            ],
        ),
        (
            {"auth": {"enabled": True, "superUser": {"username": "admin"}}},
            ["auth.superUser (the initial super user) is missing"],
        ),
        (
            {"auth": {"enabled": True, "superUser": {"existingSecret": "su"}}},
            ["auth.innerCredentials", "is missing", "auth.innerCredentials.existingSecret"],
        ),
        (
            {
                "auth": {
                    "enabled": True,
                    "superUser": {"existingSecret": "su", "password": "x"},
                    "innerCredentials": {"existingSecret": "inner"},
                }
            },
            ['auth.superUser: existingSecret "su" and username/password are both given'],
        ),
        (
            {"tls": {"enabled": True}},
            ["tls.enabled is true but no certificate is given", "tls.existingSecret"],
        ),
        (
            {"tls": {"enabled": True, "certManager": {"enabled": True}}},
            ["tls.certManager.issuerRef.name is empty"],
        ),
        (
            {"tls": {"enabled": True, "existingSecret": "t", "certManager": {"enabled": True}}},
            ["existingSecret and certManager.enabled are both given"],
        ),
        (
            {"broker": {"config": {"authentication_enabled": False}}},
            ["broker.config.authentication_enabled", "use auth.enabled"],
        ),
        (
            {"nameserver": {"config": {"tls_server_mode": "disabled"}}},
            ["nameserver.config.tls_server_mode", "use tls.enabled and tls.mode"],
        ),
    ],
)
def test_the_templates_refuse_an_open_or_certificate_less_cluster(
    chart: helm.Chart, values: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(helm.HelmRenderError) as caught:
        render_chart(values, chart=chart)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"tls": {"mode": "disabled"}}, ["/tls/mode", "'permissive', 'enforcing'"]),
        ({"tls": {"clientAuth": "yes"}}, ["/tls/clientAuth", "'none', 'optional', 'require'"]),
        ({"auth": {"superUser": {"password": "a\\b"}}}, ["/auth/superUser/password"]),
        ({"auth": {"superUser": {"password": 'a"b'}}}, ["/auth/superUser/password"]),
        ({"auth": {"innerCredentials": {"secretKey": "a\tb"}}}, ["/auth/innerCredentials"]),
        ({"auth": {"enable": True}}, ["/auth", "'enable' not allowed"]),
        ({"networkPolicy": {"clientSelector": {"ipBlock": {}}}}, ["'ipBlock' not allowed"]),
        (
            {"tls": {"certManager": {"issuerRef": {"kind": "Cluster"}}}},
            ["/tls/certManager/issuerRef/kind"],
        ),
    ],
)
def test_the_schema_refuses_bad_security_values(
    chart: helm.Chart, values: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        render_chart(values, chart=chart)
    for word in words:
        assert word in str(caught.value)


@pytest.fixture(scope="module")
def schemaless(tmp_path_factory: pytest.TempPathFactory) -> helm.Chart:
    copy = tmp_path_factory.mktemp("chart") / "rocketq"
    shutil.copytree(CHART_DIR, copy)
    (copy / "values.schema.json").unlink()
    return helm.Chart.load(copy)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"auth": AUTH_ON}, ["auth.superUser (the initial super user) is missing"]),
        (
            {
                "auth": {
                    "enabled": True,
                    "superUser": {"username": "admin", "password": 'pa"ss'},
                    "innerCredentials": {"existingSecret": "inner"},
                }
            },
            ["auth.superUser: username and password may not hold '\"', '\\' or control"],
        ),
        (
            {
                "auth": {
                    "enabled": True,
                    "superUser": {"existingSecret": "su"},
                    "innerCredentials": {"accessKey": "inner", "secretKey": "line\nbreak"},
                }
            },
            ["auth.innerCredentials: accessKey and secretKey may not hold"],
        ),
        ({"tls": {"enabled": True, "mode": "disabled", "existingSecret": "t"}}, ["tls.mode"]),
        (
            {"tls": {"enabled": True, "clientAuth": "yes", "existingSecret": "t"}},
            ["tls.clientAuth"],
        ),
    ],
)
def test_without_the_schema_auth_and_tls_are_still_checked(
    schemaless: helm.Chart, values: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(helm.HelmRenderError) as caught:
        render_chart(values, chart=schemaless)
    for word in words:
        assert word in str(caught.value)


# NOTES.txt.


def test_notes_give_commands_the_cli_takes_with_auth_and_tls(
    releases: dict[str, Release],
) -> None:
    notes = releases["secured"].notes
    assert "Auth is on" in notes and f"Secret\n{RELEASE}-super-user" in notes
    assert "TLS is enforcing" in notes
    assert "get secret rocketq-tls -o jsonpath='{.data.ca\\.crt}'" in notes
    commands = re.findall(r"sh -c 'rocketq (send|admin [a-z-]+) ([^']*)'", notes)
    assert {c for c, _ in commands} == {"send", "admin cluster-list", "admin update-topic"}
    for command, args in commands:
        # The credentials come from the variables the chart gives the broker pods.
        assert '--access-key "$RQ_SUPER_USER_NAME"' in args
        assert '--secret-key "$RQ_SUPER_USER_PASSWORD"' in args
        assert f"--tls-ca-file {TLS_DIR}/ca.crt" in args
        sts = releases["secured"].one("StatefulSet", f"{RELEASE}-broker-a")
        env = {e["name"] for e in container(sts)["env"]}
        assert {"RQ_SUPER_USER_NAME", "RQ_SUPER_USER_PASSWORD"} <= env
        done = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": "200"})
        assert done.exit_code == 0, done.output
        for option in re.findall(r"--[a-z-]+", args):
            assert option in done.output, f"rocketq {command} has no {option}"
    plain = releases["default"].notes
    assert "sh -c" not in plain and "--tls" not in plain and "Auth is on" not in plain


def test_the_boot_labs_network_plugin_reads_the_policies_as_kubernetes_does(
    releases: dict[str, Release],
) -> None:
    """The nftables rules the boot test loads for the raft release: a member's Raft port
    only from its group's pods, the client and gRPC ports from everyone, metrics from
    nobody but the node (there is no monitoring namespace in the lab)."""
    release = releases["raft"]
    objects = [d.obj for d in release.docs]
    sts = {s["metadata"]["name"]: s for s in release.objects("StatefulSet").values()}
    ns = {"kubernetes.io/metadata.name": NAMESPACE}
    endpoints = {
        "ns0": Endpoint(Host("ns0", "10.0.0.1"), pod_labels(sts[f"{RELEASE}-nameserver"]), ns),
        "b0": Endpoint(Host("b0", "10.0.0.2"), pod_labels(sts[f"{RELEASE}-broker-a"]), ns),
        "b1": Endpoint(Host("b1", "10.0.0.3"), pod_labels(sts[f"{RELEASE}-broker-a"]), ns),
        "client": Endpoint(Host("client", "10.0.0.9"), APP, ns),
        "far": Endpoint(Host("far", "10.0.0.10"), APP, STRANGER_NS),
    }
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    everyone = list(endpoints.values())
    rules = network_policy_rules(policies, endpoints["b0"], everyone, "10.0.0.254")
    assert rules is not None
    assert "ip saddr 10.0.0.254 accept" in rules
    assert "tcp dport 40911 ip saddr { 10.0.0.2, 10.0.0.3 } accept" in rules
    for client_port in (10911, 8081):
        assert (
            f"tcp dport {client_port} ip saddr "
            "{ 10.0.0.1, 10.0.0.10, 10.0.0.2, 10.0.0.3, 10.0.0.9 } accept"
        ) in rules
    assert "10913" not in rules
    assert rules.rstrip().endswith("ct state new drop\n  }\n}")
    assert network_policy_rules(policies, endpoints["client"], everyone, "10.0.0.254") is None
