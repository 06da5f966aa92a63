"""Boot what the chart renders, without Kubernetes: a ``raft`` release with one broker
group, every pod of its StatefulSets a local process in a network namespace of its own
(``tests/k8s/pods.py`` plays the kubelet), the Services' and pods' DNS names in each pod's
hosts file. Once every readiness probe passes, a client pod sends through the nameserver
Service's name; the leader pod's process is SIGKILLed and started again as its
StatefulSet would; every acknowledged message must then be consumed.

The same release runs secured too: auth on (the super user and inner credentials in
Secrets the chart makes) and TLS enforcing on every port with a certificate from a test CA
(trustme) in the TLS Secret. There the client signs as the super user over TLS, and a
client without credentials, or without TLS, is refused. And with client certificates
required on the remoting ports (mTLS), the client showing one of the CA's. A secured
master/slave release (SYNC_MASTER) shows the slave's HA link at work.

The release's NetworkPolicies are enforced as a network plugin would (nftables in each
pod's namespace, the node admitted for the probes): the cluster must work within them,
and the client pod must not reach the Raft and metrics ports.

Needs root (network namespaces); CI runs as root. What it cannot show: a real scheduler,
real volumes, kube-proxy and cluster DNS (the hosts files stand in for them).
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from rocketq.chaos.netns import Host, NetnsLab, netns_unavailable_reason
from tests.k8s.pods import (
    Endpoint,
    Kubelet,
    Pod,
    endpoint_of,
    enforce_network_policies,
    hosts_file,
    pods_of,
    remove_hosts,
    write_hosts,
)

CHART = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "helm" / "rocketq"
CLIENT = Path(__file__).resolve().parent / "boot_client.py"
RELEASE = "rocketq"
NAMESPACE = "rocketq"
TOPIC = "BootTopic"
VALUES: dict[str, Any] = {"broker": {"replication": "raft", "groups": 1}}
SUPER_USER = {"username": "boot-admin", "password": "boot-admin-secret"}
TLS_SECRET = "rocketq-boot-tls"
SECURED: dict[str, Any] = {
    **VALUES,
    "auth": {
        "enabled": True,
        "superUser": SUPER_USER,
        "innerCredentials": {"accessKey": "boot-inner", "secretKey": "boot-inner-secret"},
    },
    "tls": {"enabled": True, "mode": "enforcing", "existingSecret": TLS_SECRET},
}
MUTUAL: dict[str, Any] = {**SECURED, "tls": {**SECURED["tls"], "clientAuth": "require"}}
# A master and a slave per group, the master answering once the slave has a message: its
# HA link signed and over TLS, within the NetworkPolicy of its group.
HA_SECURED: dict[str, Any] = {
    **SECURED,
    "broker": {"replication": "ha", "groups": 1, "role": "SYNC_MASTER", "slaves": 1},
}
RELEASES: dict[str, dict[str, Any]] = {
    "plain": VALUES,
    "mtls": MUTUAL,
    "ha-secured": HA_SECURED,
}
# The secured Raft release requires client certificates too (auth, TLS enforcing and mTLS
# in one boot); the master/slave release below runs TLS without them.
RAFT_RELEASES = ["plain", "mtls"]
# The client pod: no StatefulSet's, in the release's namespace.
CLIENT_LABELS = {"app.kubernetes.io/name": "boot-client"}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    import helm_python as helm

    chart = helm.Chart.load(CHART)
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def need_root() -> None:
    reason = netns_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the boot test needs network namespaces: {reason}")
    pytest.skip(f"the boot test needs network namespaces: {reason}")


def selects(service: dict[str, Any], pod: Pod) -> bool:
    labels = pod.statefulset["spec"]["template"]["metadata"]["labels"]
    selector = service["spec"].get("selector", {})
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def cluster_ip_services(objects: list[dict[str, Any]], pods: list[Pod]) -> dict[str, str]:
    """ClusterIP Service name -> the address of its first pod."""
    out = {}
    for svc in (o for o in objects if o["kind"] == "Service"):
        if svc["spec"].get("clusterIP") == "None":
            continue
        chosen = [p for p in pods if selects(svc, p)]
        assert chosen, f"Service {svc['metadata']['name']} selects no pod"
        out[svc["metadata"]["name"]] = chosen[0].host.ip
    return out


def nameserver_address(objects: list[dict[str, Any]], pods: list[Pod]) -> str:
    """The nameserver client Service's DNS name and port."""
    for svc in (o for o in objects if o["kind"] == "Service"):
        if svc["spec"].get("clusterIP") == "None":
            continue
        if any(selects(svc, p) and "nameserver" in p.name for p in pods):
            port = svc["spec"]["ports"][0]["port"]
            return f"{svc['metadata']['name']}.{NAMESPACE}.svc.cluster.local:{port}"
    raise AssertionError("no nameserver client Service rendered")


def tls_secret(pods: list[Pod], services: list[str], ca: trustme.CA) -> dict[str, Any]:
    """The TLS Secret a cluster's admin would make: one certificate naming every pod (by
    name and IP) and Service, tls.crt, tls.key and the CA's ca.crt."""
    names = [pod.fqdn for pod in pods] + [pod.host.ip for pod in pods]
    names += [f"{svc}.{NAMESPACE}.svc.cluster.local" for svc in services]
    cert = ca.issue_cert(*names, common_name="rocketq-boot")
    data = {
        "tls.crt": b"".join(pem.bytes() for pem in cert.cert_chain_pems),
        "tls.key": cert.private_key_pem.bytes(),
        "ca.crt": ca.cert_pem.bytes(),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": TLS_SECRET, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


@dataclass
class Booted:
    """A booted release: its objects and pods, the kubelet running them, the lab, and
    what a client needs for it (the CA file with TLS on, the super user with auth on)."""

    objects: list[dict[str, Any]]
    pods: list[Pod]
    kubelet: Kubelet
    lab: NetnsLab
    ca_file: Path | None = None
    credentials: dict[str, str] = field(default_factory=dict)
    # A client certificate and its key, when the servers require one.
    client_cert: tuple[Path, Path] | None = None


@pytest.fixture
def booted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Booted]:
    need_root()
    values = RELEASES[request.param]
    secured = request.param != "plain"
    objects = render(values)
    statefulsets = [o for o in objects if o["kind"] == "StatefulSet"]
    replicas = sum(int(s["spec"]["replicas"]) for s in statefulsets)
    with NetnsLab(replicas + 1) as lab:
        pods = pods_of(objects, NAMESPACE, lab, tmp_path)
        services = cluster_ip_services(objects, pods)
        boot = Booted(objects, pods, Kubelet(objects), lab)
        if secured:
            ca = trustme.CA()
            boot.kubelet = Kubelet([*objects, tls_secret(pods, list(services), ca)])
            boot.ca_file = tmp_path / "client-ca.crt"
            ca.cert_pem.write_to_path(boot.ca_file)
            boot.credentials = dict(SUPER_USER)
            if values["tls"].get("clientAuth", "none") == "require":
                mine = ca.issue_cert("boot-client", common_name="boot-client")
                boot.client_cert = (tmp_path / "client.crt", tmp_path / "client.key")
                mine.cert_chain_pems[0].write_to_path(boot.client_cert[0])
                mine.private_key_pem.write_to_path(boot.client_cert[1])
        text = hosts_file(pods, services)
        hosts = lab.hosts
        everyone = [endpoint_of(p) for p in pods]
        everyone.append(
            Endpoint(lab.hosts[-1], CLIENT_LABELS, {"kubernetes.io/metadata.name": NAMESPACE})
        )
        try:
            loaded = enforce_network_policies(objects, everyone, lab.gateway)
            assert set(loaded) == {p.host.name for p in pods}
            for host in hosts:
                write_hosts(host, text)
            for pod in pods:
                boot.kubelet.start(pod)
            yield boot
        finally:
            for pod in pods:
                boot.kubelet.kill(pod)
            remove_hosts(hosts)


def client(
    boot: Booted,
    *args: str,
    timeout: float = 120.0,
    credentials: bool = True,
    tls: bool = True,
) -> dict[str, Any]:
    """boot_client.py in the client pod (the lab's last host); its JSON line. With auth
    on it signs as the super user and with TLS on it connects over TLS, unless told not
    to (``credentials``, ``tls``)."""
    host = boot.lab.hosts[-1]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"}
    if credentials and boot.credentials:
        env["ROCKETQ_ACCESS_KEY"] = boot.credentials["username"]
        env["ROCKETQ_SECRET_KEY"] = boot.credentials["password"]
    if tls and boot.ca_file is not None:
        env["BOOT_TLS_CA_FILE"] = str(boot.ca_file)
    if tls and boot.client_cert is not None:
        env["BOOT_TLS_CERT_FILE"], env["BOOT_TLS_KEY_FILE"] = map(str, boot.client_cert)
    done = subprocess.run(
        [*host.exec_prefix(), sys.executable, str(CLIENT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc


def reaches(host: Host, ip: str, port: int) -> bool:
    """Whether a TCP connection from ``host`` to ip:port is accepted within 2 s."""
    probe = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2)"
    done = subprocess.run(
        [*host.exec_prefix(), sys.executable, "-c", probe, ip, str(port)],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


def metrics(pod: Pod, ca_file: Path | None) -> str:
    """A pod's /metrics (over HTTPS, checked against the CA, once TLS is on); "" when it
    does not answer."""
    context = None if ca_file is None else ssl.create_default_context(cafile=str(ca_file))
    scheme = "http" if ca_file is None else "https"
    url = f"{scheme}://{pod.host.ip}:{pod.port('metrics')}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:
            text: str = r.read().decode()
            return text
    except OSError:
        return ""


def leader(pods: list[Pod], ca_file: Path | None) -> Pod:
    """The broker pod whose metrics say it leads its Raft group."""
    found = re.compile(r"^rocketq_raft_leader\{[^}]*\} 1\.0$", re.M)
    for pod in pods:
        if "broker" in pod.name and pod.alive() and found.search(metrics(pod, ca_file)):
            return pod
    raise AssertionError("no broker pod leads")


@pytest.mark.parametrize("booted", RAFT_RELEASES, indirect=True)
def test_the_rendered_raft_release_boots_fails_over_and_loses_nothing(booted: Booted) -> None:
    pods, kubelet = booted.pods, booted.kubelet
    kubelet.wait_ready(pods, timeout=90)
    namesrv = nameserver_address(booted.objects, pods)
    # The NetworkPolicies hold: the client reaches a broker's client port and its gRPC
    # endpoint (RocketMQ 5's clients; served as the chart's broker.toml says) but not its
    # Raft or metrics port, and a nameserver does not reach the Raft port either.
    broker = next(p for p in pods if "broker" in p.name)
    nameserver = next(p for p in pods if "nameserver" in p.name)
    client_host = booted.lab.hosts[-1]
    assert reaches(client_host, broker.host.ip, broker.port("client"))
    assert reaches(client_host, broker.host.ip, broker.port("grpc"))
    assert reaches(client_host, nameserver.host.ip, nameserver.port("remoting"))
    assert not reaches(client_host, broker.host.ip, broker.port("raft"))
    assert not reaches(client_host, broker.host.ip, broker.port("metrics"))
    assert not reaches(nameserver.host, broker.host.ip, broker.port("raft"))
    if booted.credentials:
        # Auth on: a client without credentials gets nothing acknowledged.
        refused = client(booted, "send", namesrv, TOPIC, "-1", "1", "5", credentials=False)
        assert refused["acked"] == [] and refused["failed"] == 1
    if booted.ca_file is not None:
        # TLS enforcing: a plaintext client, even with credentials, neither.
        refused = client(booted, "send", namesrv, TOPIC, "-2", "1", "5", tls=False)
        assert refused["acked"] == [] and refused["failed"] == 1
    first = client(booted, "send", namesrv, TOPIC, "0", "100", "60")
    assert first["failed"] == 0 and len(first["acked"]) == 100

    victim = leader(pods, booted.ca_file)
    kubelet.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    # Sends go on through the failover: the survivors elect a leader.
    second = client(booted, "send", namesrv, TOPIC, "100", "100", "60")
    assert len(second["acked"]) > 0
    # The StatefulSet starts the pod again: same name, same volumes.
    kubelet.start(victim)
    kubelet.wait_ready([victim], timeout=90)
    print(f"leader {victim.name} killed; ready again {time.monotonic() - killed_at:.1f} s later")

    acked = first["acked"] + second["acked"]
    got = client(booted, "consume", namesrv, TOPIC, "boot-consumer", "60", *acked)
    missing = set(acked) - set(got["consumed"])
    assert not missing, (
        f"{len(missing)} acknowledged messages were not consumed: {sorted(missing)[:10]}"
    )


@pytest.mark.parametrize("booted", ["ha-secured"], indirect=True)
def test_the_rendered_ha_release_replicates_signed_over_tls(booted: Booted) -> None:
    """SYNC_MASTER acknowledges a message only once the slave has it: every send acked
    means the slave's HA link (signed hello, TLS, the group's NetworkPolicy) carries them."""
    pods, kubelet = booted.pods, booted.kubelet
    kubelet.wait_ready(pods, timeout=90)
    namesrv = nameserver_address(booted.objects, pods)
    master = next(p for p in pods if p.name.endswith("broker-a-0"))
    slave = next(p for p in pods if p.name.endswith("broker-a-1"))
    # The HA port: the group's slave reaches it, the client and the nameservers do not.
    nameserver = next(p for p in pods if "nameserver" in p.name)
    assert reaches(slave.host, master.host.ip, master.port("ha"))
    assert not reaches(booted.lab.hosts[-1], master.host.ip, master.port("ha"))
    assert not reaches(nameserver.host, master.host.ip, master.port("ha"))
    # A SYNC_MASTER refuses sends (SLAVE_NOT_AVAILABLE) until a slave is attached: wait
    # for its link, which the master's metrics list with the slave's lag.
    attached = re.compile(r"^rocketq_ha_slave_lag_bytes\{", re.M)
    deadline = time.monotonic() + 60
    while not attached.search(metrics(master, booted.ca_file)):
        assert time.monotonic() < deadline, f"no slave attached to {master.name} in 60 s"
        assert slave.alive(), f"{slave.name} exited"
        time.sleep(0.2)
    sent = client(booted, "send", namesrv, TOPIC, "0", "50", "60")
    assert sent["failed"] == 0 and len(sent["acked"]) == 50
    got = client(booted, "consume", namesrv, TOPIC, "boot-consumer", "60", *sent["acked"])
    assert set(sent["acked"]) <= set(got["consumed"])
