"""What a kubelet would do with the chart's StatefulSets, done with local processes: each
pod in a network namespace of its own on a bridge (``chaos.netns.NetnsLab``), its
ConfigMap and Secret volumes written as files and its other volumes made as directories
under a temporary root, its container's command, args and env (field and Secret
references, ``$(NAME)`` expansion) run as a process, and the
cluster's DNS names in the pod's ``/etc/netns/<namespace>/hosts`` (which ``ip netns exec``
puts in place of ``/etc/hosts``). What a network plugin makes of the NetworkPolicies,
nftables rules in each selected pod's namespace (:func:`enforce_network_policies`).

Paths the container would see (``/etc/rocketq/broker.toml``, ``/home/rocketq/store``)
are the mount's directory under the root: the args and the ConfigMap files are rewritten
to say so. The image's entrypoint ``rocketq`` is this interpreter's
``-m rocketq.cli.main``.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketq.chaos.netns import Host, NetnsLab

CLUSTER_DOMAIN = "svc.cluster.local"
ETC_NETNS = Path("/etc/netns")
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(NAME)`` in an env value replaced by the variable defined before it, as Kubernetes
    does: ``$$`` is a ``$``, a reference to an undefined variable stays as written."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(one, text)


def secrets_of(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Secret name -> its keys' decoded values (``data`` base64, ``stringData`` as is)."""
    out: dict[str, dict[str, str]] = {}
    for secret in (o for o in objects if o["kind"] == "Secret"):
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        data.update(secret.get("stringData") or {})
        out[secret["metadata"]["name"]] = data
    return out


def container_env(
    container: Mapping[str, Any],
    *,
    fields: Mapping[str, str],
    secrets: Mapping[str, Mapping[str, str]],
) -> dict[str, str]:
    """The variables a container's ``env`` gives it, in order: values (with ``$(NAME)``
    expanded), pod fields and Secret keys. A missing Secret or key fails, as the kubelet
    refuses to start such a container."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        name = item["name"]
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
        elif "fieldRef" in item["valueFrom"]:
            env[name] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            if ref["name"] not in secrets or ref["key"] not in secrets[ref["name"]]:
                raise AssertionError(f"{name}: no key {ref['key']} in Secret {ref['name']}")
            env[name] = secrets[ref["name"]][ref["key"]]
    return env


@dataclass
class Pod:
    name: str
    namespace: str
    statefulset: dict[str, Any]
    ordinal: int
    host: Host
    root: Path  # the pod's files: <root>/<mount path>
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.statefulset["spec"]["template"]["spec"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        container: dict[str, Any] = self.spec["containers"][0]
        return container

    @property
    def service(self) -> str:
        service: str = self.statefulset["spec"]["serviceName"]
        return service

    @property
    def fqdn(self) -> str:
        return f"{self.name}.{self.service}.{self.namespace}.{CLUSTER_DOMAIN}"

    def port(self, name_or_number: str | int) -> int:
        if isinstance(name_or_number, int):
            return name_or_number
        for p in self.container.get("ports", []):
            if p.get("name") == name_or_number:
                return int(p["containerPort"])
        raise KeyError(f"{self.name} has no port named {name_or_number!r}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def pods_of(objects: list[dict[str, Any]], namespace: str, lab: NetnsLab, root: Path) -> list[Pod]:
    """A pod for every replica of every StatefulSet, on the lab's hosts in order."""
    pods = []
    hosts = iter(lab.hosts)
    for sts in (o for o in objects if o["kind"] == "StatefulSet"):
        for ordinal in range(int(sts["spec"].get("replicas", 1))):
            name = f"{sts['metadata']['name']}-{ordinal}"
            pods.append(
                Pod(name, namespace, sts, ordinal, next(hosts), root / name, root / f"{name}.log")
            )
    return pods


@dataclass(frozen=True)
class Endpoint:
    """Someone on the lab's network a NetworkPolicy decides about: a pod, or a client pod
    that is no StatefulSet's, with its labels and its namespace's labels."""

    host: Host
    labels: Mapping[str, str]
    namespace_labels: Mapping[str, str]


def endpoint_of(pod: Pod) -> Endpoint:
    labels = pod.statefulset["spec"]["template"]["metadata"]["labels"]
    return Endpoint(pod.host, labels, {"kubernetes.io/metadata.name": pod.namespace})


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions) against labels; {} matches all."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        value, op = labels.get(expr["key"]), expr["operator"]
        if op == "In" and value not in expr["values"]:
            return False
        if op == "NotIn" and value in expr["values"]:
            return False
        if op == "Exists" and value is None:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
    return True


def _peer_admits(peer: Mapping[str, Any], who: Endpoint, namespace: str) -> bool:
    """A NetworkPolicy peer of a policy in ``namespace``: a podSelector alone means pods of
    that namespace; with a namespaceSelector, pods of the namespaces it selects."""
    if "ipBlock" in peer:
        raise AssertionError("ipBlock peers are not simulated")
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], who.namespace_labels):
            return False
    elif who.namespace_labels.get("kubernetes.io/metadata.name") != namespace:
        return False
    return selector_matches(peer.get("podSelector") or {}, who.labels)


def network_policy_rules(
    policies: list[dict[str, Any]], target: Endpoint, everyone: list[Endpoint], node_ip: str
) -> str | None:
    """The nftables ruleset enforcing, in ``target``'s namespace, the ingress of the
    policies that select it (None when none does: all traffic admitted). The node (the
    kubelet's probes) is admitted, as the common network plugins do."""
    namespace = target.namespace_labels["kubernetes.io/metadata.name"]
    selecting = [
        p
        for p in policies
        if p["metadata"].get("namespace", namespace) == namespace
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and selector_matches(p["spec"]["podSelector"], target.labels)
    ]
    if not selecting:
        return None
    lines = [
        "ct state established,related accept",
        'iif "lo" accept',
        f"ip saddr {node_ip} accept",
    ]
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from")
            if peers is None:
                sources = None  # anyone
            else:
                sources = sorted(
                    {
                        who.host.ip
                        for who in everyone
                        if any(_peer_admits(peer, who, namespace) for peer in peers)
                    }
                )
                if not sources:
                    continue
            match = "" if sources is None else f" ip saddr {{ {', '.join(sources)} }}"
            for port in rule.get("ports") or [{}]:
                assert port.get("protocol", "TCP") == "TCP", port
                assert "port" not in port or isinstance(port["port"], int), port
                dport = f"tcp dport {port['port']}" if "port" in port else "meta l4proto tcp"
                lines.append(f"{dport}{match} accept")
    lines.append("ct state new drop")
    body = "\n    ".join(lines)
    return (
        "table inet rocketq_netpol {\n"
        "  chain input {\n"
        f"    type filter hook input priority 0; policy accept;\n    {body}\n"
        "  }\n"
        "}\n"
    )


def enforce_network_policies(
    objects: list[dict[str, Any]], everyone: list[Endpoint], node_ip: str
) -> dict[str, str]:
    """Load each endpoint's rules into its namespace; host name -> the ruleset loaded."""
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    loaded = {}
    for target in everyone:
        rules = network_policy_rules(policies, target, everyone, node_ip)
        if rules is None:
            continue
        done = subprocess.run(
            [*target.host.exec_prefix(), "nft", "-f", "-"],
            input=rules,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, f"nft in {target.host.name}: {done.stderr}\n{rules}"
        loaded[target.host.name] = rules
    return loaded


def hosts_file(pods: list[Pod], services: dict[str, str]) -> str:
    """/etc/hosts of every pod: each pod by its stable names, and each ClusterIP Service's
    names at the address of one of its pods (as kube-proxy would pick one)."""
    lines = ["127.0.0.1 localhost"]
    for pod in pods:
        short = f"{pod.name}.{pod.service}"
        lines.append(f"{pod.host.ip} {pod.fqdn} {short}.{pod.namespace} {short} {pod.name}")
    for service, ip in services.items():
        namespace = pods[0].namespace
        lines.append(f"{ip} {service}.{namespace}.{CLUSTER_DOMAIN} {service}.{namespace} {service}")
    return "\n".join(lines) + "\n"


def write_hosts(host: Host, text: str) -> Path:
    directory = ETC_NETNS / host.name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts").write_text(text)
    return directory


def remove_hosts(hosts: list[Host]) -> None:
    for host in hosts:
        shutil.rmtree(ETC_NETNS / host.name, ignore_errors=True)


class Kubelet:
    """Starts, kills and probes the pods' processes."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.configmaps = {
            o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"
        }
        self.secrets = secrets_of(objects)

    def mounts(self, pod: Pod) -> dict[str, Path]:
        """Mount path -> its directory under the pod's root; ConfigMap volumes written."""
        volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
        claims = {
            c["metadata"]["name"] for c in pod.statefulset["spec"].get("volumeClaimTemplates", [])
        }
        out: dict[str, Path] = {}
        written: list[Path] = []
        for mount in pod.container.get("volumeMounts", []):
            path = pod.root / mount["mountPath"].lstrip("/")
            path.mkdir(parents=True, exist_ok=True)
            out[mount["mountPath"]] = path
            volume = volumes.get(mount["name"])
            if volume is not None and "configMap" in volume:
                data = self.configmaps[volume["configMap"]["name"]]
                items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    (path / item["path"]).write_text(data[item["key"]])
                    written.append(path / item["path"])
            elif volume is not None and "secret" in volume:
                name = volume["secret"]["secretName"]
                assert name in self.secrets, f"{pod.name}: no Secret {name}"
                for key, value in self.secrets[name].items():
                    (path / key).write_text(value)
            elif volume is None and mount["name"] not in claims:
                raise AssertionError(f"{pod.name}: volume {mount['name']} is not declared")
        # The ConfigMap's files mention container paths: point them at the mounts.
        for file in written:
            file.write_text(self._rewrite(file.read_text(), out))
        return out

    @staticmethod
    def _rewrite(text: str, mounts: dict[str, Path]) -> str:
        """Container paths in ``text`` as their directories under the root, in one pass
        (a rewritten path is not rewritten again), longest mount first."""
        if not mounts:
            return text
        keys = sorted(mounts, key=len, reverse=True)
        pattern = re.compile("|".join(re.escape(k) for k in keys))
        return pattern.sub(lambda m: str(mounts[m.group(0)]), text)

    def env(self, pod: Pod, mounts: dict[str, Path]) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOSTNAME": pod.name,  # as the kubelet sets it
            "HOME": str(pod.root / "home" / "rocketq"),
            "PYTHONUNBUFFERED": "1",
        }
        fields = {
            "status.podIP": pod.host.ip,
            "metadata.name": pod.name,
            "metadata.namespace": pod.namespace,
        }
        given = container_env(pod.container, fields=fields, secrets=self.secrets)
        env.update({name: self._rewrite(value, mounts) for name, value in given.items()})
        return env

    def argv(self, pod: Pod, mounts: dict[str, Path]) -> list[str]:
        command = list(pod.container.get("command") or ["rocketq"])
        assert command[0] == "rocketq", f"{pod.name}: the image's entrypoint is rocketq"
        args = [*command[1:], *pod.container.get("args", [])]
        return [
            sys.executable,
            "-m",
            "rocketq.cli.main",
            *(self._rewrite(a, mounts) for a in args),
        ]

    def start(self, pod: Pod) -> None:
        mounts = self.mounts(pod)
        (pod.root / "home" / "rocketq").mkdir(parents=True, exist_ok=True)
        with pod.log.open("ab") as log:
            pod.proc = subprocess.Popen(
                [*pod.host.exec_prefix(), *self.argv(pod, mounts)],
                env=self.env(pod, mounts),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=pod.root,
                start_new_session=True,
            )

    def kill(self, pod: Pod, sig: signal.Signals = signal.SIGKILL) -> None:
        if pod.proc is None:
            return
        if pod.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pod.proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            pod.proc.wait(timeout=30)
        if pod.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pod.proc.pid, signal.SIGKILL)
            pod.proc.wait(timeout=10)

    @staticmethod
    def probe(pod: Pod, kind: str) -> bool:
        """The container's ``kind`` probe (readinessProbe, livenessProbe, startupProbe),
        an HTTP GET as the kubelet makes it: 200-399 passes. With ``scheme: HTTPS`` the
        kubelet, and so this, does not check the certificate."""
        get = pod.container[kind]["httpGet"]
        scheme = get.get("scheme", "HTTP").lower()
        url = f"{scheme}://{pod.host.ip}:{pod.port(get['port'])}{get['path']}"
        context = ssl._create_unverified_context() if scheme == "https" else None
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                status: int = resp.status
                return 200 <= status < 400
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, pods: list[Pod], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(pods)
        while waiting:
            for pod in list(waiting):
                if not pod.alive():
                    raise AssertionError(f"{pod.name} exited; its log:\n{tail(pod.log)}")
                if self.probe(pod, "readinessProbe"):
                    waiting.remove(pod)
            if waiting and time.monotonic() > deadline:
                names = ", ".join(p.name for p in waiting)
                logs = "\n".join(f"--- {p.name}\n{tail(p.log)}" for p in waiting)
                raise AssertionError(f"not ready within {timeout:g} s: {names}\n{logs}")
            time.sleep(0.2)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
