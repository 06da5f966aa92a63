"""Boot what the chart renders, without Kubernetes: a ``raft`` release with one broker
group, every pod of its StatefulSets a local process in a network namespace of its own
(``tests/k8s/pods.py`` plays the kubelet), the Services' and pods' DNS names in each pod's
hosts file. Once every readiness probe passes, a client pod sends through the nameserver
Service's name; the leader pod's process is SIGKILLed and started again as its
StatefulSet would; every acknowledged message must then be consumed.

Needs root (network namespaces); CI runs as root. What it cannot show: a real scheduler,
real volumes, kube-proxy and cluster DNS (the hosts files stand in for them).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocketq.chaos.netns import NetnsLab, netns_unavailable_reason
from tests.k8s.pods import Kubelet, Pod, hosts_file, pods_of, remove_hosts, write_hosts

CHART = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "helm" / "rocketq"
CLIENT = Path(__file__).resolve().parent / "boot_client.py"
RELEASE = "rocketq"
NAMESPACE = "rocketq"
TOPIC = "BootTopic"
VALUES: dict[str, Any] = {"broker": {"replication": "raft", "groups": 1}}


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


@pytest.fixture
def booted(tmp_path: Path) -> Iterator[tuple[list[dict[str, Any]], list[Pod], Kubelet, NetnsLab]]:
    need_root()
    objects = render(VALUES)
    statefulsets = [o for o in objects if o["kind"] == "StatefulSet"]
    replicas = sum(int(s["spec"]["replicas"]) for s in statefulsets)
    with NetnsLab(replicas + 1) as lab:
        pods = pods_of(objects, NAMESPACE, lab, tmp_path)
        kubelet = Kubelet(objects)
        text = hosts_file(pods, cluster_ip_services(objects, pods))
        hosts = lab.hosts
        try:
            for host in hosts:
                write_hosts(host, text)
            for pod in pods:
                kubelet.start(pod)
            yield objects, pods, kubelet, lab
        finally:
            for pod in pods:
                kubelet.kill(pod)
            remove_hosts(hosts)


def client(lab: NetnsLab, *args: str, timeout: float = 120.0) -> dict[str, Any]:
    """boot_client.py in the client pod (the lab's last host); its JSON line."""
    host = lab.hosts[-1]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"}
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


def leader(pods: list[Pod]) -> Pod:
    """The broker pod whose metrics say it leads its Raft group."""
    found = re.compile(r"^rocketq_raft_leader\{[^}]*\} 1\.0$", re.M)
    for pod in pods:
        if "broker" not in pod.name or not pod.alive():
            continue
        port = pod.port("metrics")
        try:
            with urllib.request.urlopen(f"http://{pod.host.ip}:{port}/metrics", timeout=2) as r:
                if found.search(r.read().decode()):
                    return pod
        except OSError:
            continue
    raise AssertionError("no broker pod leads")


def test_the_rendered_raft_release_boots_fails_over_and_loses_nothing(
    booted: tuple[list[dict[str, Any]], list[Pod], Kubelet, NetnsLab],
) -> None:
    objects, pods, kubelet, lab = booted
    kubelet.wait_ready(pods, timeout=90)
    namesrv = nameserver_address(objects, pods)
    first = client(lab, "send", namesrv, TOPIC, "0", "100", "60")
    assert first["failed"] == 0 and len(first["acked"]) == 100

    victim = leader(pods)
    kubelet.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    # Sends go on through the failover: the survivors elect a leader.
    second = client(lab, "send", namesrv, TOPIC, "100", "100", "60")
    assert len(second["acked"]) > 0
    # The StatefulSet starts the pod again: same name, same volumes.
    kubelet.start(victim)
    kubelet.wait_ready([victim], timeout=90)
    print(f"leader {victim.name} killed; ready again {time.monotonic() - killed_at:.1f} s later")

    acked = first["acked"] + second["acked"]
    got = client(lab, "consume", namesrv, TOPIC, "boot-consumer", "60", *acked)
    missing = set(acked) - set(got["consumed"])
    assert not missing, (
        f"{len(missing)} acknowledged messages were not consumed: {sorted(missing)[:10]}"
    )
