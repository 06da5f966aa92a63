"""The local multi-process launcher: one nameserver and broker processes on this machine.

``rocketq cluster up``, the integration tests and the chaos harness all start clusters
through :class:`LocalCluster`. Every node is ``python -m rocketq.cli.main nameserver|broker`` in
its own session, with stdout (the one ``{"ready": ...}`` line) in
``<data_dir>/logs/<name>.out`` and its log in ``<data_dir>/logs/<name>.log``. The cluster's
addresses, ports and pids go to ``<data_dir>/cluster.json``, from which
:meth:`LocalCluster.load` rebuilds a handle in another process
(``rocketq cluster down|status``). The data dir is its user's alone, as the nodes keep their
stores (common/file_modes.py): folders 0700, files 0600, the logs 0640; a data dir an older
version left readable by others is narrowed at the start.

Ports: the launcher binds every port a node serves (client, HA, Raft, metrics) before the
node starts, and hands each listening socket down to the node's process as an inherited
file descriptor (``--listen-fd raft=7``), as systemd's socket activation does; it closes
its own copies once the node is ready. A port is never chosen by one process and bound
later by another, so no other program can take it in between, and the nodes of a cluster
start at once: a Raft member's peers, or a broker's nameserver, may be called before they
run, and the call waits in the backlog of the socket the launcher made. The first
nameserver and the first broker ask for RocketMQ's ports first (``ClusterSpec.namesrv_port``
and ``broker_port``: 9876, and 10911 with HA on 10912 and metrics on 10913 as a broker
derives them); a taken one gives way to any free port, which the launcher logs and keeps
in :attr:`LocalCluster.port_fallbacks`. Every node reports what it serves in its ready line
(``{"ready": "broker", "port": 10911, "ports": {"client": 10911, "ha": 10912, "metrics":
10913}}``), the gRPC endpoint included: gRPC's server cannot serve a socket it did not
bind, so the endpoint binds its port itself (any free port, or the spec's ``grpc_port``
when it was free a moment before; taken by then, the broker says so on stdout,
``{"failed": "broker", "port_name": "grpc", "in_use": true}``, and starts again on any
free port). A restarted node is handed the ports recorded in ``cluster.json``; if another
process holds one, the restart fails with an error that says which.

A node whose address this process cannot bind (a broker in a network namespace of its
own, chaos/netns.py) binds its own ports: any free ones, reported in its ready line, and
its Raft port ``OWN_NAMESPACE_RAFT_PORT`` + its broker id, which nothing else in its
namespace takes.

A pid is signalled only while ``/proc/<pid>`` shows a ``rocketq.cli.main`` process started at the
recorded time, so a pid the kernel has handed to another process is never signalled.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, get_args

from rocketq.cluster.pids import POLL_INTERVAL, is_ours, proc_stat, tail, wait_until
from rocketq.cluster.security import (
    ClusterCertificates,
    ClusterSecrets,
    cluster_certificates,
    cluster_secrets,
)
from rocketq.common.exceptions import ConfigError, RocketqError
from rocketq.common.file_modes import SERVER_UMASK, open_log, private_dir, tighten
from rocketq.common.json_file import read_json, write_json_atomic
from rocketq.common.ports import PORT_NAMES, PortName, listen_fd_arg

if TYPE_CHECKING:
    from rocketq.remoting.tls import ClientSecurity

log = logging.getLogger(__name__)

Replication = Literal["none", "ha", "raft"]
Role = Literal["nameserver", "broker"]

HOST: Final = "127.0.0.1"
CLUSTER_FILE: Final = "cluster.json"
# How long a restart keeps retrying while the node's old port is briefly busy.
PORT_RETRY_SECONDS: Final = 5.0
# The backlog of a port the launcher listens on for a node: connections wait there until
# the node accepts them (its peers may be up before it).
LISTEN_BACKLOG: Final = 1024
# The Raft port of a member that binds its own ports (its address is in a network
# namespace of its own, which this process cannot bind in): n0 on 40911, n1 on 40912 and
# so on, as RocketMQ's DLedger examples number them. The namespace is the member's
# alone, so nothing else takes the port before the member binds it.
OWN_NAMESPACE_RAFT_PORT: Final = 40911
# A broker's other ports follow its client port (broker/config.py's DERIVED_PORTS); a
# nameserver's metrics port follows its client port too (listen_port + 1).
BROKER_PORT_OFFSETS: Final[dict[PortName, int]] = {"ha": 1, "metrics": 2}
NAMESERVER_PORT_OFFSETS: Final[dict[PortName, int]] = {"metrics": 1}
_AVAILABLE_REPLICATION: Final = ("none", "ha", "raft")
RAFT_MEMBERS: Final = 3  # processes per broker group with replication "raft"
# Where a node keeps each of its ports.
_PORT_ATTRS: Final[dict[PortName, str]] = {
    "client": "port",
    "ha": "ha_port",
    "raft": "raft_port",
    "metrics": "metrics_port",
    "grpc": "grpc_port",
}


class LauncherError(RocketqError):
    """A node did not start, or the cluster's state on disk does not allow the action."""


@dataclass(frozen=True)
class BindFailure:
    """What a node that could not listen on one of its ports left on stdout."""

    port_name: PortName
    port: int
    in_use: bool  # another process holds it


@dataclass(frozen=True)
class ClusterSpec:
    data_dir: Path
    nameservers: int = 1
    brokers: int = 1
    replication: Replication = "none"
    # Extra ``--set KEY=VALUE`` for every broker / every nameserver.
    broker_settings: Mapping[str, str] = field(default_factory=dict)
    nameserver_settings: Mapping[str, str] = field(default_factory=dict)
    # Seconds a node may take to print its ready line (and the brokers to register).
    ready_timeout: float = 30.0
    # Every node serves /metrics, /healthz and /readyz on a free port of its own (kept
    # across restarts); False: no metrics servers, nothing counted.
    metrics: bool = True
    # The port the first nameserver listens on if it is free (another free port if it is
    # not: LocalCluster.namesrv_port_busy says so); None: a free port, as for the others.
    namesrv_port: int | None = None
    # Authentication and authorization on every node, with a super user and inner
    # credentials made once in <data_dir>/secrets (cluster/security.py).
    auth: bool = False
    # TLS only on every remoting port, with certificates made once in <data_dir>/tls.
    tls: bool = False
    # Brokers serve the apache.rocketmq.v2 endpoint for RocketMQ 5's clients (rocketq[grpc]).
    grpc: bool = False
    # With grpc, the port the first broker's endpoint listens on if it is free (another
    # free port if it is not); None: a free port, as for the others.
    grpc_port: int | None = None
    # The port the first broker listens on if it is free, its HA and metrics ports then
    # following it as a broker's do (+ 1, + 2) when free (other free ports for the taken
    # ones: LocalCluster.port_fallbacks says which); None: free ports, as for the others.
    broker_port: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(self.data_dir).absolute())
        object.__setattr__(self, "broker_settings", dict(self.broker_settings))
        object.__setattr__(self, "nameserver_settings", dict(self.nameserver_settings))
        if self.nameservers < 1:
            raise ConfigError(f"nameservers must be >= 1, got {self.nameservers}")
        if self.brokers < 1:
            raise ConfigError(f"brokers must be >= 1, got {self.brokers}")
        if self.replication not in get_args(Replication):
            raise ConfigError(
                f"unknown replication {self.replication!r}; expected one of "
                f"{', '.join(get_args(Replication))}"
            )
        if self.replication not in _AVAILABLE_REPLICATION:
            raise ConfigError(
                f"replication {self.replication!r} is not available yet; use replication 'none'"
            )
        if self.ready_timeout <= 0:
            raise ConfigError(f"ready_timeout must be > 0, got {self.ready_timeout}")
        if self.namesrv_port is not None and not 0 < self.namesrv_port < 65536:
            raise ConfigError(f"namesrv_port must be a port (1-65535), got {self.namesrv_port}")
        if self.grpc_port is not None and not 0 < self.grpc_port < 65536:
            raise ConfigError(f"grpc_port must be a port (1-65535), got {self.grpc_port}")
        if self.broker_port is not None and not 0 < self.broker_port < 65535 - 2:
            raise ConfigError(
                f"broker_port must be a port (1-65533: its metrics port is 2 above), "
                f"got {self.broker_port}"
            )

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["data_dir"] = str(self.data_dir)
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ClusterSpec:
        return cls(**doc)


def broker_group_name(index: int) -> str:
    """broker-a, broker-b, ..., broker-z, broker-aa, broker-ab, ..."""
    letters = ""
    n = index + 1
    while n:
        n, rem = divmod(n - 1, 26)
        letters = chr(ord("a") + rem) + letters
    return f"broker-{letters}"


@dataclass
class Node:
    """One process of the cluster; ``process`` is set only in the process that started it."""

    name: str
    role: Role
    data_dir: Path
    port: int = 0
    pid: int = 0
    start_time: int = 0  # /proc/<pid>/stat field 22, against pid reuse
    broker_name: str = ""
    broker_id: int = 0
    raft_port: int = 0  # replication "raft": the member's Raft port, fixed before the start
    metrics_port: int = 0  # its HTTP port (/metrics, /healthz, /readyz); 0: none
    ha_port: int = 0  # a master's HA port (its slaves connect there); 0: none
    grpc_port: int = 0  # a broker's apache.rocketmq.v2 endpoint (spec.grpc); 0: none
    host: str = HOST  # the address it binds and is reached at
    metrics_tls: bool = False  # its metrics port serves HTTPS (a cluster with TLS)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    # The listening sockets the launcher holds for it from their bind until it is ready,
    # handed down to its process (``--listen-fd NAME=FD``); empty once it is.
    sockets: dict[PortName, socket.socket] = field(default_factory=dict, repr=False, compare=False)
    # Its address is not one this process can bind (a network namespace of its own), or
    # its command takes no sockets: it binds its ports itself.
    binds_own_ports: bool = field(default=False, repr=False, compare=False)

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        """Where its metrics are ("" without a metrics server)."""
        return self.metrics_base + "/metrics" if self.metrics_port else ""

    @property
    def metrics_base(self) -> str:
        """Its metrics port's URL without a path (https with TLS)."""
        scheme = "https" if self.metrics_tls else "http"
        return f"{scheme}://{self.host}:{self.metrics_port}"

    @property
    def log(self) -> Path:
        return self.data_dir / "logs" / f"{self.name}.log"

    @property
    def out(self) -> Path:
        return self.data_dir / "logs" / f"{self.name}.out"

    @property
    def home(self) -> Path:
        return self.data_dir / self.name

    @property
    def store(self) -> Path:
        return self.home / "store"

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "host": self.host,
            "addr": self.addr,
            "port": self.port,
            "pid": self.pid,
            "start_time": self.start_time,
            "log": str(self.log),
        }
        if self.metrics_port:
            doc["metrics_port"] = self.metrics_port
        if self.ha_port:
            doc["ha_port"] = self.ha_port
        if self.grpc_port:
            doc["grpc_port"] = self.grpc_port
        if self.role == "broker":
            doc |= {
                "broker_name": self.broker_name,
                "broker_id": self.broker_id,
                "store": str(self.store),
            }
            if self.raft_port:
                doc["raft_port"] = self.raft_port
        return doc


class _Begun(NamedTuple):
    """A node's process just started: its Popen, where its log of this run begins, and
    when it must be ready."""

    proc: subprocess.Popen[bytes]
    offset: int
    deadline: float


@dataclass(frozen=True)
class NodeStatus:
    name: str
    role: Role
    addr: str
    pid: int
    alive: bool
    paused: bool


@dataclass(frozen=True)
class ClusterStatus:
    nodes: list[NodeStatus]
    # What a nameserver reports: broker name -> {broker id: address}; None if none answered.
    registered: dict[str, dict[int, str]] | None
    info_from: str | None  # the nameserver that answered

    @property
    def all_alive(self) -> bool:
        return all(n.alive for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [asdict(n) for n in self.nodes],
            "registered": None
            if self.registered is None
            else {b: {str(i): a for i, a in ids.items()} for b, ids in self.registered.items()},
            "info_from": self.info_from,
        }


def _fetch_cluster_info(
    addr: str, timeout: float = 2.0, security: ClientSecurity | None = None
) -> dict[str, dict[int, str]]:
    from rocketq.remoting.codes import RequestCode, ResponseCode
    from rocketq.remoting.command import RemotingCommand
    from rocketq.remoting.route_data import parse_cluster_info
    from rocketq.remoting.transport import request_blocking

    answer = request_blocking(
        addr, RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), timeout, security=security
    )
    if answer.code != ResponseCode.SUCCESS:
        raise ConnectionError(f"nameserver {addr} answered {answer.code}: {answer.remark}")
    info = parse_cluster_info(answer.body or b"{}")
    return {name: dict(data.broker_addrs) for name, data in info.broker_addr_table.items()}


def raft_member_id(node: Node) -> str:
    """A Raft member's id in its group: n0, n1, n2."""
    return f"n{node.broker_id}"


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on this host now (held open together while chosen;
    free, not held, once returned: for tests that need a port nobody listens on)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_free(port: int, host: str = HOST) -> bool:
    """Whether a server could listen on ``host:port`` now. Bound as the servers bind
    (SO_REUSEADDR), so a port whose last connections are in TIME_WAIT counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def listen_on(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (0: any free port), bound as the servers bind
    (SO_REUSEADDR), to be handed to the server that will serve it. OSError when it cannot
    be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


@dataclass(frozen=True)
class PortFallback:
    """A port asked for first (RocketMQ's default) was taken, so another one was used."""

    what: str  # "namesrv-0's client port", "the console's port"
    asked: int
    got: int

    def __str__(self) -> str:
        return f"port {self.asked} is taken, so {self.what} is {self.got} instead"


def hold_port(host: str, preferred: int, what: str) -> tuple[socket.socket, PortFallback | None]:
    """A socket listening on ``preferred`` when it is free (0: any free port), else on
    any free port, with what says so (also logged). OSError when ``host`` cannot be bound
    at all."""
    if preferred:
        try:
            return listen_on(host, preferred), None
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        sock = listen_on(host, 0)
        fallback = PortFallback(what, preferred, sock.getsockname()[1])
        log.warning("%s", fallback)
        return sock, fallback
    return listen_on(host, 0), None


def ready_ports(doc: Mapping[str, Any]) -> dict[PortName, int] | None:
    """The ports of a node's ready line by name (``client`` always), None if it is not
    one: ``{"ready": "broker", "port": P, "ports": {"client": P, "metrics": M, ...}}``
    (a line without ``ports`` names the client port alone)."""
    try:
        ports: dict[PortName, int] = {"client": int(doc["port"])}
        for name, port in dict(doc.get("ports", {})).items():
            if name in PORT_NAMES and int(port) > 0:
                ports[name] = int(port)
    except (KeyError, TypeError, ValueError):
        return None
    return ports


def bind_failure(doc: Mapping[str, Any]) -> BindFailure | None:
    """What a node's bind failure line says, None if it is not one:
    ``{"failed": "broker", "port_name": "raft", "port": 40123, "in_use": true}``."""
    name = doc.get("port_name")
    try:
        port, in_use = int(doc["port"]), doc["in_use"]
    except (KeyError, TypeError, ValueError):
        return None
    if name not in PORT_NAMES or not isinstance(in_use, bool):
        return None
    return BindFailure(name, port, in_use)


# ------------------------------------------------------------------ the cluster


class LocalCluster:
    """Start, fault and stop a cluster of local processes.

    ``with LocalCluster(ClusterSpec(data_dir=d, brokers=2)) as c: ...`` starts it and stops
    it on the way out, errors included.
    """

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.data_dir = spec.data_dir
        self.nameservers = [
            Node(f"namesrv-{i}", "nameserver", self.data_dir) for i in range(spec.nameservers)
        ]
        # Each broker group: its master, and with replication "ha" a slave (broker id 1);
        # with "raft" three members n0-n2 (which one is the master the election decides).
        ids: tuple[int, ...] = (0,)
        if spec.replication == "ha":
            ids = (0, 1)
        elif spec.replication == "raft":
            ids = tuple(range(RAFT_MEMBERS))
        self.brokers = [
            Node(f"{g}-{i}", "broker", self.data_dir, broker_name=g, broker_id=i)
            for g in map(broker_group_name, range(spec.brokers))
            for i in ids
        ]
        for n in self.nodes:
            n.metrics_tls = spec.tls
        self.secrets: ClusterSecrets | None = None
        self.certs: ClusterCertificates | None = None
        # The preferred ports that were taken at the last start, and what was used instead.
        self.port_fallbacks: list[PortFallback] = []
        self.spawns = 0  # node processes this launcher started (a node started again counts)
        self._security: ClientSecurity | None = None
        self._prepare_security()

    def _prepare_security(self) -> None:
        if self.spec.auth:
            self.secrets = cluster_secrets(self.data_dir)
        if self.spec.tls:
            self.certs = cluster_certificates(self.data_dir)

    # ---------------------------------------------------------------- handles

    def client_settings(self) -> dict[str, Any]:
        """The SDK settings a client of this cluster needs besides ``namesrv``: the super
        user's credentials with auth, the cluster's CA with TLS."""
        settings: dict[str, Any] = {}
        if self.secrets is not None:
            settings |= {"access_key": self.secrets.username, "secret_key": self.secrets.password}
        if self.certs is not None:
            settings |= {"tls": True, "tls_ca_file": str(self.certs.ca_file)}
        return settings

    def client_env(self) -> dict[str, str]:
        """The environment a CLI or SDK process needs for this cluster (as
        ``rocketq cluster up`` prints it)."""
        env = {"NAMESRV_ADDR": self.namesrv_addr}
        if self.secrets is not None:
            env["ROCKETQ_CREDENTIALS_FILE"] = str(self.secrets.admin_file)
        if self.certs is not None:
            env |= {"ROCKETQ_TLS": "true", "ROCKETQ_TLS_CA_FILE": str(self.certs.ca_file)}
        return env

    def metrics_headers(self) -> dict[str, str]:
        """The headers a request to a node's /metrics carries: the cluster's metrics token
        with auth (the nodes ask for it), none without."""
        if self.secrets is None:
            return {}
        return {"Authorization": f"Bearer {self.secrets.metrics_token}"}

    def metrics_context(self) -> ssl.SSLContext | None:
        """The TLS context that trusts the nodes' metrics ports (None without TLS)."""
        if self.certs is None:
            return None
        return ssl.create_default_context(cafile=str(self.certs.ca_file))

    def fetch_metrics(self, node: Node, path: str = "/metrics", timeout: float = 5.0) -> bytes:
        """The body of ``path`` on ``node``'s metrics port, over HTTPS with the cluster's CA
        and with its metrics token as the cluster needs (an OSError, urllib's HTTPError
        included, when it does not answer 200)."""
        if not node.metrics_port:
            raise LauncherError(f"{node.name} serves no metrics (started without metrics)")
        request = urllib.request.Request(node.metrics_base + path, headers=self.metrics_headers())
        with urllib.request.urlopen(request, timeout=timeout, context=self.metrics_context()) as r:
            return bytes(r.read())

    def client_security(self) -> ClientSecurity | None:
        """How the launcher's own requests reach the cluster (signed, over TLS)."""
        from rocketq.auth.credentials import Credentials
        from rocketq.remoting.tls import ClientSecurity, client_context

        if self.secrets is None and self.certs is None:
            return None
        if self._security is not None:
            return self._security
        sign = None
        if self.secrets is not None:
            sign = Credentials(self.secrets.username, self.secrets.password).sign
        ssl = client_context(str(self.certs.ca_file)) if self.certs is not None else None
        self._security = ClientSecurity(ssl=ssl, sign=sign)
        return self._security

    @property
    def nodes(self) -> list[Node]:
        return [*self.nameservers, *self.brokers]

    @property
    def namesrv_addr(self) -> str:
        return ";".join(n.addr for n in self.nameservers)

    @property
    def namesrv_port_busy(self) -> bool:
        """The spec's ``namesrv_port`` was taken, so the first nameserver listens on
        another port."""
        wanted, port = self.spec.namesrv_port, self.nameservers[0].port
        return wanted is not None and port not in (0, wanted)

    @property
    def cluster_file(self) -> Path:
        return self.data_dir / CLUSTER_FILE

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        known = ", ".join(n.name for n in self.nodes)
        raise LauncherError(f"no node {name!r} in this cluster; its nodes are {known}")

    def is_alive(self, name: str) -> bool:
        return self._alive(self.node(name))

    @classmethod
    def load(cls, data_dir: str | os.PathLike[str]) -> LocalCluster:
        """A handle on the cluster described by ``<data_dir>/cluster.json``."""
        path = Path(data_dir).absolute() / CLUSTER_FILE
        doc = read_json(path, "cluster description")
        if doc is None:
            raise LauncherError(
                f"no {CLUSTER_FILE} in {path.parent}; start a cluster with "
                f"`rocketq cluster up --data-dir {path.parent}`"
            )
        try:
            spec = ClusterSpec.from_dict({**doc["spec"], "data_dir": path.parent})
            cluster = cls(spec)
            cluster.brokers += [  # members added at run time (add_raft_member)
                Node(
                    str(b["name"]),
                    "broker",
                    cluster.data_dir,
                    broker_name=str(b["broker_name"]),
                    broker_id=int(b["broker_id"]),
                    metrics_tls=spec.tls,
                )
                for b in doc["brokers"][len(cluster.brokers) :]
            ]
            for node, saved in zip(
                cluster.nodes, [*doc["nameservers"], *doc["brokers"]], strict=True
            ):
                node.port = int(saved["port"])
                node.pid = int(saved["pid"])
                node.start_time = int(saved.get("start_time", 0))
                node.raft_port = int(saved.get("raft_port", 0))
                node.metrics_port = int(saved.get("metrics_port", 0))
                node.ha_port = int(saved.get("ha_port", 0))
                node.grpc_port = int(saved.get("grpc_port", 0))
                node.host = str(saved.get("host", HOST))
        except (KeyError, TypeError, ValueError) as exc:
            raise LauncherError(f"{path}: not a cluster description ({exc!r})") from None
        return cluster

    def _save(self) -> None:
        write_json_atomic(
            self.cluster_file,
            {
                "namesrv_addr": self.namesrv_addr,
                "nameservers": [n.to_dict() for n in self.nameservers],
                "brokers": [n.to_dict() for n in self.brokers],
                "spec": self.spec.to_dict(),
            },
        )

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        """Start the nameservers and the brokers; return once every broker is registered.

        Every port is bound here first and handed down, so the nodes start at once: a
        broker that calls its nameserver, or a Raft member its peers, before they run
        waits in the backlog of the port the launcher listens on for them."""
        self._refuse_if_running()
        # The nodes' data, secrets and logs are this user's (logs readable by its group):
        # what an older version made readable by others is narrowed first.
        private_dir(self.data_dir)
        tighten(self.data_dir, "cluster data", is_log=self.is_log)
        private_dir(self.data_dir / "logs")
        for n in self.nodes:
            n.port, n.pid, n.start_time, n.process = 0, 0, 0, None
            n.raft_port = n.metrics_port = n.ha_port = n.grpc_port = 0
        self.port_fallbacks = []
        wanted = self.spec.grpc_port
        if self.spec.grpc and wanted is not None and port_free(wanted):
            # gRPC's server cannot serve a socket it did not bind: the endpoint binds its
            # port itself, and one taken after this check gives way to any free port.
            self.brokers[0].grpc_port = wanted
        try:
            for n in self.nodes:
                self._hold_ports(n)
            for b in self.brokers:
                if self.spec.replication == "raft" and b.binds_own_ports and not b.raft_port:
                    b.raft_port = OWN_NAMESPACE_RAFT_PORT + b.broker_id
            begun = {n.name: self._begin(n) for n in self.nameservers}
            if any(n.binds_own_ports for n in self.nameservers):
                # Its address is known once it is ready, and the brokers are told it.
                for n in self.nameservers:
                    self._finish(n, begun.pop(n.name))
            begun |= {b.name: self._begin(b) for b in self.brokers}
            self._save()
            for n in self.nodes:
                if n.name in begun:
                    self._finish(n, begun[n.name], any_port_if_busy=self._prefers_a_port(n))
                    self._save()
            self._wait_registered(self.brokers, self.nameservers[:1])
        except BaseException:
            for n in self.nodes:
                self._release(n)
            with contextlib.suppress(LauncherError):
                self.stop()
            raise

    def is_log(self, path: Path) -> bool:
        """Whether ``path`` under the data dir is a log (0640, where data is 0600): a node's
        log and stdout in ``logs/``, a sidecar's ``<name>.log`` in its home."""
        parent = path.parent
        if parent == self.data_dir / "logs":
            return True
        return parent.parent == self.data_dir and path.name == f"{parent.name}.log"

    # -- ports: bound here, handed down ---------------------------------------------------

    def holds_ports(self, node: Node) -> bool:
        """Whether the launcher binds ``node``'s ports and hands them down (True), or the
        node binds its own. (A subclass that starts a node with a command of its own, which
        takes no ``--listen-fd``, says False; a node whose address this process cannot bind,
        one in a network namespace of its own, binds its own ports whatever this says.)"""
        return True

    def port_names(self, node: Node) -> list[PortName]:
        """The ports ``node`` serves that the launcher binds for it, its client port first
        (not the gRPC endpoint's: gRPC's server binds its port itself)."""
        names: list[PortName] = ["client"]
        if node.role == "broker":
            if self.spec.replication == "raft":
                names.append("raft")
            elif not (self.spec.replication == "ha" and node.broker_id > 0):
                names.append("ha")  # a master's: its slaves connect there
        if self.spec.metrics:
            names.append("metrics")
        return names

    def _preferred_client_port(self, node: Node) -> int:
        """The port a node asks for first: RocketMQ's default for the first nameserver
        and the first broker (as the spec gives it), 0 (any free port) for the others."""
        if node is self.nameservers[0]:
            return self.spec.namesrv_port or 0
        if node is self.brokers[0]:
            return self.spec.broker_port or 0
        return 0

    def _hold_ports(self, node: Node, *, recorded: bool = False) -> None:
        """Bind ``node``'s ports (see :meth:`port_names`) and keep them until it is ready.
        A first start asks for the preferred ports (a node's other ports follow its client
        port as the servers derive them) and takes any free port for a taken one, which
        :attr:`port_fallbacks` and the log say; ``recorded`` (a restart) asks for the
        ports in cluster.json, waiting up to PORT_RETRY_SECONDS while one is busy, then
        fails naming it. A node whose address this process cannot bind binds its own."""
        self._release(node)
        node.binds_own_ports = not self.holds_ports(node)
        if node.binds_own_ports:
            return
        offsets = BROKER_PORT_OFFSETS if node.role == "broker" else NAMESERVER_PORT_OFFSETS
        preferred = 0 if recorded else self._preferred_client_port(node)
        deadline = time.monotonic() + PORT_RETRY_SECONDS
        held: dict[PortName, socket.socket] = {}
        try:
            for name in self.port_names(node):
                if recorded:
                    held[name] = self._bind_recorded(node, name, deadline)
                    continue
                asked = preferred if name == "client" else 0
                if name != "client" and preferred and node.port == preferred:
                    asked = preferred + offsets.get(name, 0) if name in offsets else 0
                sock, fallback = hold_port(node.host, asked, f"{node.name}'s {name} port")
                held[name] = sock
                setattr(node, _PORT_ATTRS[name], sock.getsockname()[1])
                if fallback is not None:
                    self.port_fallbacks.append(fallback)
        except OSError as exc:
            for sock in held.values():
                sock.close()
            if exc.errno == errno.EADDRNOTAVAIL and not held:
                # Not an address of this network namespace: the node's own.
                node.binds_own_ports = True
                log.info("%s: %s is not an address here; it binds its own ports",
                         node.name, node.host)  # fmt: skip
                return
            raise LauncherError(
                f"cannot listen on {node.host} for {node.name}: {exc.strerror or exc}"
            ) from None
        except BaseException:
            for sock in held.values():
                sock.close()
            raise
        node.sockets = held
        for name, sock in held.items():
            setattr(node, _PORT_ATTRS[name], sock.getsockname()[1])

    def _bind_recorded(self, node: Node, name: PortName, deadline: float) -> socket.socket:
        """A socket on the port cluster.json records for ``node`` (any free one if none is
        recorded), tried again while another process holds it, until ``deadline``."""
        port = getattr(node, _PORT_ATTRS[name])
        while True:
            try:
                return listen_on(node.host, port)
            except OSError as exc:
                if exc.errno == errno.EADDRNOTAVAIL:
                    raise  # a node in a namespace of its own: it binds its own ports
                if exc.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                    raise LauncherError(
                        f"{node.role} {node.name} cannot listen on its {name} port "
                        f"{node.host}:{port}, recorded in {self.cluster_file}: "
                        + (
                            f"another process holds it (still after {PORT_RETRY_SECONDS:g} "
                            "s); stop that process, or start the cluster again"
                            if exc.errno == errno.EADDRINUSE
                            else str(exc.strerror or exc)
                        )
                    ) from None
            time.sleep(POLL_INTERVAL * 4)

    def _release(self, node: Node) -> None:
        """Close the launcher's copies of the node's sockets (its process has its own)."""
        for sock in node.sockets.values():
            sock.close()
        node.sockets = {}

    def _prefers_a_port(self, node: Node) -> bool:
        """The node's gRPC endpoint asks for the spec's preferred port, which may be taken
        between the check and the endpoint's bind: then it takes any free port."""
        return node is self.brokers[0] and self.spec.grpc and self.spec.grpc_port is not None

    def _refuse_if_running(self) -> None:
        if not self.cluster_file.exists():
            return
        try:
            other = LocalCluster.load(self.data_dir)
        except LauncherError:
            return  # a damaged file describes nothing we could stop
        if any(other._alive(n) for n in other.nodes):
            raise LauncherError(
                f"a cluster is already running from {self.data_dir}; run "
                f"`rocketq cluster down --data-dir {self.data_dir}`"
            )

    def _command(self, node: Node) -> list[str]:
        cmd = [sys.executable, "-m", "rocketq.cli.main", node.role]
        if node.role == "nameserver":
            cmd += ["--port", str(node.port), "--bind", node.host]
            cmd += ["--kv-config-path", str(node.home / "kvConfig.json")]
            cmd += self._metrics_setting(node)
            settings: Mapping[str, str] = self.spec.nameserver_settings
        else:
            cmd += [
                "--listen-port", str(node.port),
                "-n", self.namesrv_addr,
                "--broker-name", node.broker_name,
                "--broker-id", str(node.broker_id),
                "--store-path-root-dir", str(node.store),
                "--set", f"bind_address={node.host}",
                "--set", f"broker_ip1={node.host}",
                # 0 (any free port) before its first start, the port it got after it.
                "--set", f"ha_listen_port={node.ha_port}",
                *self._metrics_setting(node),
            ]  # fmt: skip
            if self.spec.grpc:
                # The v2 endpoint for RocketMQ 5's clients: any free port, then the same.
                cmd += ["--set", f"grpc_listen_port={node.grpc_port}"]
            settings = self.spec.broker_settings
        if node.role == "broker" and self.spec.replication == "raft":
            cmd += [
                "--set", "enable_dledger_commit_log=true",
                "--set", f"dledger_group={node.broker_name}",
                "--set", f"dledger_peers={self.raft_peers(node)}",
                "--set", f"dledger_self_id={raft_member_id(node)}",
            ]  # fmt: skip
        if self.certs is not None:
            settings = {**self.certs.node_settings(), **settings}
        for key, value in settings.items():
            cmd += ["--set", f"{key}={value}"]
        if node.role == "broker" and node.broker_id > 0 and self.spec.replication != "raft":
            cmd += ["--set", "broker_role=SLAVE"]  # whatever role the masters were given
        return cmd

    def _metrics_setting(self, node: Node) -> list[str]:
        """The node's metrics port: none (0) without metrics, the held or recorded port,
        or unset, which with client port 0 is any free port (the node reports it)."""
        if not self.spec.metrics:
            return ["--set", "metrics_port=0"]
        if node.metrics_port:
            return ["--set", f"metrics_port={node.metrics_port}"]
        return []

    def _spawn(self, node: Node) -> tuple[subprocess.Popen[bytes], int]:
        """Start the node's process, handing it the sockets held for it; the offset where
        this run's log begins."""
        private_dir(node.home)
        # The node runs this interpreter, so it imports the same rocketq (installed, or
        # the editable install of a checkout), whatever its working directory.
        command = self._command(node)
        for name, sock in node.sockets.items():
            command += ["--listen-fd", listen_fd_arg(name, sock)]
        out_fd = open_log(node.out)
        os.ftruncate(out_fd, 0)
        with open(out_fd, "wb") as out, open(open_log(node.log), "ab") as err:
            offset = err.seek(0, os.SEEK_END)
            env = None
            if self.secrets is not None:
                env = {**os.environ, **self.secrets.node_env()}
            proc = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=node.home,
                start_new_session=True,
                umask=SERVER_UMASK,  # what it makes is private (the node sets it too)
                pass_fds=[sock.fileno() for sock in node.sockets.values()],
            )
        self.spawns += 1
        return proc, offset

    def _launch(
        self, node: Node, timeout: float, *, port_retry: float = 0.0, any_port_if_busy: bool = False
    ) -> None:
        """Start the node and wait (up to ``timeout`` s) for its ready line; record the
        ports it reports. See :meth:`_finish` for ``port_retry`` and ``any_port_if_busy``."""
        self._finish(
            node,
            self._begin(node, timeout),
            port_retry=port_retry,
            any_port_if_busy=any_port_if_busy,
        )

    def _begin(self, node: Node, timeout: float | None = None) -> _Begun:
        """Start the node's process (not waiting for it)."""
        proc, offset = self._spawn(node)
        node.process, node.pid = proc, proc.pid
        deadline = time.monotonic() + (self.spec.ready_timeout if timeout is None else timeout)
        return _Begun(proc, offset, deadline)

    def _finish(
        self, node: Node, begun: _Begun, *, port_retry: float = 0.0, any_port_if_busy: bool = False
    ) -> None:
        """Wait for the ready line of the node ``begun`` started; record its ports and
        close the launcher's copies of its sockets.

        The ports the launcher holds for a node cannot be taken. A node that binds a port
        itself (its gRPC endpoint; every port of a node that binds its own) may find it
        taken: with ``port_retry`` (a restart, on the recorded ports) it is started again
        until that many seconds have passed, then a LauncherError names the port; with
        ``any_port_if_busy`` a taken gRPC port the spec preferred gives way to any free
        one."""
        retry_until = time.monotonic() + port_retry
        proc, offset, deadline = begun
        try:
            while True:
                ports = self._await_ready(node, proc, offset, deadline)
                if ports is not None:
                    break
                log_text = tail(node.log, offset)
                failed = self._bind_failure(node)
                if failed is not None and failed.in_use:
                    if time.monotonic() < retry_until:
                        time.sleep(POLL_INTERVAL * 4)
                        proc, offset, deadline = self._begin(node)
                        continue
                    if failed.port_name == "grpc" and any_port_if_busy and node.grpc_port:
                        log.warning(
                            "%s: gRPC port %d was taken after the check; any free port instead",
                            node.name, node.grpc_port,
                        )  # fmt: skip
                        node.grpc_port = 0
                        proc, offset, deadline = self._begin(node)
                        continue
                    if port_retry:
                        raise LauncherError(
                            f"{node.role} {node.name} cannot listen on its {failed.port_name} "
                            f"port {node.host}:{failed.port}, recorded in {self.cluster_file}: "
                            f"another process holds it (still after {port_retry:g} s); stop "
                            f"that process, or start the cluster again; the end of "
                            f"{node.log}:\n{log_text}"
                        )
                raise LauncherError(
                    f"{node.role} {node.name} exited before it was ready "
                    f"(exit code {proc.returncode}); the end of {node.log}:\n{log_text}"
                )
        finally:
            self._release(node)
        node.port = ports["client"]
        node.metrics_port = ports.get("metrics", 0)
        node.ha_port = ports.get("ha", 0)
        node.grpc_port = ports.get("grpc", 0)
        node.raft_port = ports.get("raft", node.raft_port)
        stat = proc_stat(proc.pid)
        node.start_time = stat[1] if stat else 0

    def _await_ready(
        self, node: Node, proc: subprocess.Popen[bytes], offset: int, deadline: float
    ) -> dict[PortName, int] | None:
        """The ports from the ready line; None if the process exited first."""
        while True:
            ports = self._ready_ports(node)
            if ports is not None:
                return ports
            if proc.poll() is not None:
                return None
            if time.monotonic() >= deadline:
                self._signal(node, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
                raise LauncherError(
                    f"{node.role} {node.name} was not ready within "
                    f"{self.spec.ready_timeout:g} s; the end of {node.log}:\n"
                    f"{tail(node.log, offset)}"
                )
            time.sleep(POLL_INTERVAL)

    def _out_lines(self, node: Node) -> list[dict[str, Any]]:
        """The JSON objects on the node's stdout (its ready or bind failure line)."""
        try:
            text = node.out.read_text(errors="replace")
        except OSError:
            return []
        docs = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict):
                    docs.append(doc)
        return docs

    def _ready_ports(self, node: Node) -> dict[PortName, int] | None:
        for doc in self._out_lines(node):
            if doc.get("ready") == node.role:
                return ready_ports(doc)
        return None

    def _bind_failure(self, node: Node) -> BindFailure | None:
        for doc in self._out_lines(node):
            if doc.get("failed") == node.role:
                return bind_failure(doc)
        return None

    def group_members(self, broker_name: str) -> list[Node]:
        return [b for b in self.brokers if b.broker_name == broker_name]

    def add_raft_member(self, broker_name: str) -> Node:
        """Start a new member of Raft group ``broker_name``, as a replacement host would
        be: a new broker process with the next member id (``n<broker id>``), ports of its
        own, and dledger_peers naming the group's members and itself. It waits to be added
        (``rocketq admin raft add-member --broker-name <group> --id <raft_member_id(node)>
        --address <node.host>:<node.raft_port>``); -> the node, ready and recorded in
        cluster.json."""
        if self.spec.replication != "raft":
            raise LauncherError(
                f"this cluster runs replication {self.spec.replication!r}, not raft"
            )
        group = self.group_members(broker_name)
        if not group:
            known = ", ".join(sorted({b.broker_name for b in self.brokers}))
            raise LauncherError(f"no broker group {broker_name!r}; the groups are {known}")
        member_id = max(b.broker_id for b in group) + 1
        node = Node(
            f"{broker_name}-{member_id}",
            "broker",
            self.data_dir,
            broker_name=broker_name,
            broker_id=member_id,
            host=group[0].host,
            metrics_tls=self.spec.tls,
        )
        self.brokers.append(node)
        try:
            self._hold_ports(node)
            self._launch(node, self.spec.ready_timeout)
        except BaseException:
            self._release(node)
            self.brokers.remove(node)
            raise
        self._save()
        log.info("%s: started as raft member %s", node.name, raft_member_id(node))
        return node

    def raft_peers(self, node: Node) -> str:
        """``dledger_peers`` for a member: every member of its group as id-host:port.
        (Tests override it to put a proxy between members.)"""
        return ";".join(
            f"{raft_member_id(m)}-{m.host}:{m.raft_port}"
            for m in self.group_members(node.broker_name)
        )

    def _registered(self, brokers: list[Node], nameserver: Node) -> bool:
        try:
            info = _fetch_cluster_info(nameserver.addr, security=self.client_security())
        except Exception:  # not answering yet is "not registered yet"
            return False
        if self.spec.replication == "raft":
            # Any member may be the master (id 0); each group needs one.
            return all(
                b.addr in info.get(b.broker_name, {}).values() and 0 in info.get(b.broker_name, {})
                for b in brokers
            )
        return all(info.get(b.broker_name, {}).get(b.broker_id) == b.addr for b in brokers)

    def _wait_registered(self, brokers: list[Node], nameservers: list[Node]) -> None:
        """Wait until each of ``nameservers`` lists every one of ``brokers``."""
        deadline = time.monotonic() + self.spec.ready_timeout
        for ns in nameservers:
            if not wait_until(functools.partial(self._registered, brokers, ns), deadline):
                names = ", ".join(b.name for b in brokers)
                raise LauncherError(
                    f"brokers {names} did not register with nameserver {ns.name} ({ns.addr}) "
                    f"within {self.spec.ready_timeout:g} s; see the logs in "
                    f"{self.data_dir / 'logs'}"
                )

    # ---------------------------------------------------------------- faults

    def _alive(self, node: Node) -> bool:
        if node.process is not None and node.process.pid == node.pid:
            return node.process.poll() is None
        return is_ours(node.pid, node.start_time)

    def _signal(self, node: Node, sig: signal.Signals) -> bool:
        """Send ``sig`` if the pid is still the node's process; False if it is gone."""
        if not self._alive(node):
            return False
        try:
            os.kill(node.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _wait_exit(self, nodes: list[Node], deadline: float) -> list[Node]:
        """Wait for the nodes to exit (reaping our children); those still running."""
        wait_until(lambda: not any(self._alive(n) for n in nodes), deadline)
        return [n for n in nodes if self._alive(n)]

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL, *, wait: bool = True) -> None:
        """Send ``sig`` to a node. For SIGKILL and SIGTERM, ``wait`` waits until it exited."""
        node = self.node(name)
        if not self._signal(node, sig):
            return
        if sig == signal.SIGTERM:
            self._signal(node, signal.SIGCONT)  # a paused process cannot handle SIGTERM
        if wait and sig in (signal.SIGKILL, signal.SIGTERM):
            deadline = time.monotonic() + self.spec.ready_timeout
            if self._wait_exit([node], deadline):
                raise LauncherError(f"{node.name} (pid {node.pid}) did not exit after {sig.name}")

    def pause(self, name: str) -> None:
        """SIGSTOP: the process stays, its sockets stay open, it answers nothing."""
        self._signal(self.node(name), signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self._signal(self.node(name), signal.SIGCONT)

    def restart(self, name: str) -> None:
        """Start the node again with the same store and port (stopping it first if it is
        running); return once it is ready and registered again."""
        node = self.node(name)
        if self._alive(node):
            self.kill(name, signal.SIGTERM)
        self._hold_ports(node, recorded=True)
        self._launch(node, self.spec.ready_timeout, port_retry=PORT_RETRY_SECONDS)
        self._save()
        live_ns = [n for n in self.nameservers if self._alive(n)]
        if node.role == "broker":
            self._wait_registered([node], live_ns)
        else:
            self._wait_registered([b for b in self.brokers if self._alive(b)], [node])

    def status(self) -> ClusterStatus:
        nodes = []
        for n in self.nodes:
            alive = self._alive(n)
            stat = proc_stat(n.pid) if alive else None
            paused = stat is not None and stat[0] in ("T", "t")
            nodes.append(NodeStatus(n.name, n.role, n.addr, n.pid, alive, paused))
        for ns in self.nameservers:
            if not self._alive(ns):
                continue
            try:
                info = _fetch_cluster_info(ns.addr, security=self.client_security())
                return ClusterStatus(nodes, info, ns.addr)
            except Exception:  # not answering: try the next nameserver
                continue
        return ClusterStatus(nodes, None, None)

    # ---------------------------------------------------------------- stop

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the brokers, then the nameservers; SIGKILL what is left at the deadline."""
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            self._release(n)
        for group in (self.brokers, self.nameservers):
            for n in group:
                if self._signal(n, signal.SIGTERM):
                    self._signal(n, signal.SIGCONT)
            left = self._wait_exit(group, max(deadline, time.monotonic() + 1.0))
            for n in left:
                self._signal(n, signal.SIGKILL)
            if self._wait_exit(left, time.monotonic() + 5.0):
                raise LauncherError(
                    "could not stop " + ", ".join(f"{n.name} (pid {n.pid})" for n in left)
                )

    def __enter__(self) -> LocalCluster:
        if not any(self._alive(n) for n in self.nodes):
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
