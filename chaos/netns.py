"""Hosts of a run's own: one network namespace per host, each with a veth into a bridge
that carries a private /24, and nftables rules inside a host's namespace to cut it off
from others. Needs root, iproute2 and nftables (`make test` installs nftables as root).

``with NetnsLab(3) as lab: lab.hosts[0].ip ...; lab.cut(lab.hosts[0], others)`` builds
the network on the way in and removes all of it (namespaces, links) on the way out.
:class:`NetnsCluster` runs each broker of a launcher cluster on a host of its own; the
nameservers and the clients stay in this namespace, on the bridge's address. With TLS its
certificates name the lab's addresses too (:func:`lab_certificates`): every node verifies
the others' certificates against the address it dials.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from rocketq.cluster.launcher import ClusterSpec, LocalCluster, Node
from rocketq.cluster.security import cluster_certificates
from rocketq.common.exceptions import RocketqError

TABLE: Final = "rocketq_partition"
# Labs built by one process get letters a..z in turn, so a lab never reuses the names of
# the one before it, even if that one's links outlived it.
_LABS = itertools.count()
_LETTERS: Final = "abcdefghijklmnopqrstuvwxyz"


class NetnsError(RocketqError):
    """This machine cannot build the lab (not root, or a tool missing), or a rule failed."""


def netns_unavailable_reason() -> str | None:
    """Why a lab cannot be built here, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool!r} is not installed (as root, `make test` installs nftables)"
    return None


def _run(*argv: str, stdin: str | None = None) -> None:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")


@dataclass(frozen=True)
class Host:
    name: str  # the namespace
    ip: str

    def exec_prefix(self) -> list[str]:
        """Prepended to a command to run it inside this host."""
        return ["ip", "netns", "exec", self.name]


class NetnsLab:
    def __init__(self, hosts: int) -> None:
        if not 1 <= hosts <= 250:
            raise NetnsError(f"a lab has 1 to 250 hosts, not {hosts}")
        n = next(_LABS)
        pid = os.getpid()
        tag = f"rq{pid % 100_000}{_LETTERS[n % len(_LETTERS)]}"  # "rq30725abr249": 13 < 16
        subnet = f"10.{200 + pid % 50}.{(pid + n) % 250}"
        self.bridge = f"{tag}br"
        self.gateway = f"{subnet}.254"  # the bridge's own address, in this namespace
        self.hosts = [Host(f"{tag}-h{i}", f"{subnet}.{i + 1}") for i in range(hosts)]
        self._made: list[Host] = []
        self._bridge_made = False

    def __enter__(self) -> NetnsLab:
        reason = netns_unavailable_reason()
        if reason is not None:
            raise NetnsError(reason)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    def _build(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i, host in enumerate(self.hosts):
            _run("ip", "netns", "add", host.name)
            self._made.append(host)
            outer = f"{self.bridge}{i}"
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0",
                 "netns", host.name)  # fmt: skip
            _run("ip", "link", "set", outer, "master", self.bridge, "up")
            _run("ip", "-n", host.name, "addr", "add", f"{host.ip}/24", "dev", "eth0")
            _run("ip", "-n", host.name, "link", "set", "eth0", "up")
            _run("ip", "-n", host.name, "link", "set", "lo", "up")

    def cut(self, host: Host, others: list[Host]) -> None:
        """Drop every packet between ``host`` and ``others`` (both ways), in ``host``'s
        namespace; the rest of the network (the bridge's address) still reaches it."""
        peers = ", ".join(o.ip for o in others)
        rules = (
            f"table inet {TABLE} {{\n"
            f"  chain input {{ type filter hook input priority 0; policy accept;\n"
            f"    ip saddr {{ {peers} }} drop\n  }}\n"
            f"  chain output {{ type filter hook output priority 0; policy accept;\n"
            f"    ip daddr {{ {peers} }} drop\n  }}\n"
            f"}}\n"
        )
        _run(*host.exec_prefix(), "nft", "-f", "-", stdin=rules)

    def heal(self, host: Host) -> None:
        _run(*host.exec_prefix(), "nft", "delete", "table", "inet", TABLE)

    def close(self) -> None:
        """Kill whatever still runs inside the hosts, then remove their veths, the
        namespaces and the bridge. A namespace a process still holds outlives ``ip netns
        del`` with its veth, so the processes go first, by pid."""
        for host in self._made:
            _kill_inside(host.name)
        for i, host in enumerate(self.hosts):
            if host not in self._made:
                continue
            outer = f"{self.bridge}{i}"
            subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=30)
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, timeout=30)
        self._made.clear()
        if self._bridge_made:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)
            self._bridge_made = False

    def namespaces(self) -> list[str]:
        """Every namespace this lab is made of (whether it exists now or not)."""
        return [h.name for h in self.hosts]


def _pids_inside(namespace: str) -> list[int]:
    done = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30
    )
    return [int(word) for word in done.stdout.split() if word.isdigit()]


def _kill_inside(namespace: str, deadline_s: float = 10.0) -> None:
    """SIGKILL every process in ``namespace`` and wait (up to ``deadline_s``) until none
    is left."""
    end = time.monotonic() + deadline_s
    while pids := _pids_inside(namespace):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > end:
            return
        time.sleep(0.05)


def existing(names: list[str]) -> list[str]:
    """Those of the namespaces ``names`` that exist now (a closed lab must leave none)."""
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    present = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    return [n for n in names if n in present]


def lab_certificates(data_dir: Path, addresses: Sequence[str]) -> None:
    """Make a cluster's TLS certificates where the launcher keeps them
    (``<data_dir>/tls``; it uses the files it finds there) for 127.0.0.1, localhost and
    ``addresses``, unless they exist already."""
    cluster_certificates(data_dir, tuple(addresses))


class NetnsCluster(LocalCluster):
    """Each broker runs in its own network namespace of ``lab``; the nameservers and the
    clients stay here, on the bridge's address."""

    def __init__(self, spec: ClusterSpec, lab: NetnsLab) -> None:
        if spec.tls:  # before the launcher looks for its certificates
            lab_certificates(spec.data_dir, [lab.gateway, *(h.ip for h in lab.hosts)])
        super().__init__(spec)
        if len(lab.hosts) < len(self.brokers):
            raise NetnsError(f"the lab has {len(lab.hosts)} hosts for {len(self.brokers)} brokers")
        self.lab = lab
        for ns in self.nameservers:
            ns.host = lab.gateway
        for broker, host in zip(self.brokers, lab.hosts, strict=False):
            broker.host = host.ip

    def host_of(self, node: Node) -> Host:
        for host in self.lab.hosts:
            if host.ip == node.host:
                return host
        raise NetnsError(f"{node.name} ({node.host}) runs on no host of the lab")

    def _command(self, node: Node) -> list[str]:
        cmd = super()._command(node)
        if node.role == "broker":
            cmd = [*self.host_of(node).exec_prefix(), *cmd]
        return cmd

    def isolate(self, node: Node) -> None:
        """Cut ``node`` off from the other members of its broker group."""
        others = [self.host_of(m) for m in self.group_members(node.broker_name) if m is not node]
        self.lab.cut(self.host_of(node), others)

    def heal(self, node: Node) -> None:
        self.lab.heal(self.host_of(node))
