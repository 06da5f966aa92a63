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

Ports: a node started for the first time binds port 0 for its client, HA and metrics ports
and reports the ports it got in its ready line (``{"ready": "broker", "port": 40123,
"ports": {"client": 40123, "ha": 40124, "metrics": 40125}}``), so no other program can take
them between a choice and the bind. Two kinds of port must be known before the start, and
the launcher chooses them: the Raft ports (the members of a group list each other's) and
the metrics port of a nameserver on a fixed port (``ClusterSpec.namesrv_port``; port 0 for
the client port is what makes the others any free port). When another process took one of
those before the node bound it, the node says so on stdout (``{"failed": ...,
"port_name": "raft", "in_use": true}``) and the launcher starts the node, or the whole
Raft group, again on new ports, up to ``PORT_ATTEMPTS`` times, with a warning in its log.
A restarted node asks for the ports recorded in ``cluster.json``; if another process holds
one, the restart fails with an error that says which.

A pid is signalled only while ``/proc/<pid>`` shows a ``rocketq.cli.main`` process started at the
recorded time, so a pid the kernel has handed to another process is never signalled.
"""

from __future__ import annotations

import contextlib
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
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

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
from rocketq.common.ports import PORT_NAMES, PortName

if TYPE_CHECKING:
    from rocketq.remoting.tls import ClientSecurity

log = logging.getLogger(__name__)

Replication = Literal["none", "ha", "raft"]
Role = Literal["nameserver", "broker"]

HOST: Final = "127.0.0.1"
CLUSTER_FILE: Final = "cluster.json"
# How long a restart keeps retrying while the node's old port is briefly busy.
PORT_RETRY_SECONDS: Final = 5.0
# Starts of a node (or a Raft group) on newly chosen ports when another process took one
# of the ports chosen for it before it bound them.
PORT_ATTEMPTS: Final = 5
_AVAILABLE_REPLICATION: Final = ("none", "ha", "raft")
RAFT_MEMBERS: Final = 3  # processes per broker group with replication "raft"


class LauncherError(RocketqError):
    """A node did not start, or the cluster's state on disk does not allow the action."""


class _ChosenPortTakenError(LauncherError):
    """Another process took a port the launcher chose for a node before the node bound it."""

    def __init__(self, node: Node, port_name: PortName, port: int) -> None:
        super().__init__(
            f"{node.name} could not listen on its {port_name} port {node.host}:{port}: "
            "another process took it after the launcher chose it"
        )
        self.node = node
        self.port_name = port_name
        self.port = port


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
    """``count`` distinct ports free on this host now (held open together while chosen)."""
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
        """Start the nameservers, then the brokers; return once every broker is registered."""
        self._refuse_if_running()
        # The nodes' data, secrets and logs are this user's (logs readable by its group):
        # what an older version made readable by others is narrowed first.
        private_dir(self.data_dir)
        tighten(self.data_dir, "cluster data", is_log=self.is_log)
        private_dir(self.data_dir / "logs")
        for n in self.nodes:
            n.port, n.pid, n.start_time, n.process = 0, 0, 0, None
            n.raft_port = n.metrics_port = n.ha_port = n.grpc_port = 0
        wanted = self.spec.namesrv_port
        if wanted is not None and port_free(wanted):
            self.nameservers[0].port = wanted
        wanted = self.spec.grpc_port
        if self.spec.grpc and wanted is not None and port_free(wanted):
            self.brokers[0].grpc_port = wanted
        try:
            for ns in self.nameservers:
                self._start_fresh([ns])
            # A Raft group starts (and starts again on new Raft ports) as a whole: its
            # members list each other's Raft addresses.
            groups = [[b] for b in self.brokers]
            if self.spec.replication == "raft":
                names = dict.fromkeys(b.broker_name for b in self.brokers)
                groups = [self.group_members(name) for name in names]
            for members in groups:
                self._start_fresh(members)
            self._wait_registered(self.brokers, self.nameservers[:1])
        except BaseException:
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

    def _choose_ports(self, nodes: list[Node]) -> None:
        """The ports ``nodes`` must be told before they start, chosen together so no two
        are the same: Raft ports, and the metrics port of a node on a fixed client port
        (with client port 0 the node binds any free metrics port itself)."""
        raft = [n for n in nodes if n.role == "broker" and self.spec.replication == "raft"]
        metrics = [n for n in nodes if self.spec.metrics and n.port]
        if not raft and not metrics:
            return
        ports = free_ports(len(raft) + len(metrics))
        for n, port in zip(raft, ports, strict=False):
            n.raft_port = port
        for n, port in zip(metrics, ports[len(raft) :], strict=True):
            n.metrics_port = port

    def _prefers_a_port(self, node: Node) -> bool:
        """The node asks for a port the spec prefers (the first nameserver's, the first
        broker's gRPC port), which may be taken between the check and the bind: then it
        takes any free port."""
        if node is self.nameservers[0]:
            return self.spec.namesrv_port is not None
        return node is self.brokers[0] and self.spec.grpc_port is not None

    def _start_fresh(self, nodes: list[Node]) -> None:
        """Start ``nodes`` for the first time. When another process took a port the
        launcher chose for one of them before it bound it, the ones started are stopped and
        all start again on new ports, up to ``PORT_ATTEMPTS`` times."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._choose_ports(nodes)
            try:
                for n in nodes:
                    # The preferred port may be taken between the check and the bind.
                    any_port = self._prefers_a_port(n)
                    self._launch(n, self.spec.ready_timeout, any_port_if_busy=any_port)
                    self._save()
                return
            except _ChosenPortTakenError as taken:
                started = [n for n in nodes if self._alive(n)]
                for n in started:
                    self._signal(n, signal.SIGKILL)
                if self._wait_exit(started, time.monotonic() + self.spec.ready_timeout):
                    raise LauncherError(
                        f"could not stop {', '.join(n.name for n in started)} to start them "
                        "again on other ports"
                    ) from None
                names = ", ".join(n.name for n in nodes)
                if attempt == PORT_ATTEMPTS:
                    raise LauncherError(
                        f"{taken}; {names} could not start in {PORT_ATTEMPTS} attempts on "
                        "newly chosen ports, as other processes kept taking them"
                    ) from None
                log.warning(
                    "%s; starting %s again on new ports (attempt %d of %d)",
                    taken, names, attempt + 1, PORT_ATTEMPTS,
                )  # fmt: skip

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
        """The node's metrics port: none (0) without metrics, the recorded or chosen port,
        or unset, which with client port 0 is any free port (the node reports it)."""
        if not self.spec.metrics:
            return ["--set", "metrics_port=0"]
        if node.metrics_port:
            return ["--set", f"metrics_port={node.metrics_port}"]
        return []

    def _spawn(self, node: Node) -> tuple[subprocess.Popen[bytes], int]:
        """Start the node's process; the offset where this run's log begins."""
        private_dir(node.home)
        # The node runs this interpreter, so it imports the same rocketq (installed, or
        # the editable install of a checkout), whatever its working directory.
        out_fd = open_log(node.out)
        os.ftruncate(out_fd, 0)
        with open(out_fd, "wb") as out, open(open_log(node.log), "ab") as err:
            offset = err.seek(0, os.SEEK_END)
            env = None
            if self.secrets is not None:
                env = {**os.environ, **self.secrets.node_env()}
            proc = subprocess.Popen(
                self._command(node),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=node.home,
                start_new_session=True,
                umask=SERVER_UMASK,  # what it makes is private (the node sets it too)
            )
        return proc, offset

    def _launch(
        self, node: Node, timeout: float, *, port_retry: float = 0.0, any_port_if_busy: bool = False
    ) -> None:
        """Start the node and wait for its ready line; record the ports it reports.

        A port the node was given that another process holds: with ``port_retry`` (a
        restart, on the recorded ports) the node is started again until that many seconds
        have passed, then a LauncherError names the port; with ``any_port_if_busy`` a taken
        client port gives way to any free one; a Raft or metrics port the launcher chose
        raises :class:`_ChosenPortTakenError` for the caller to choose again. Without
        ``port_retry`` the launcher chose every fixed port but the client port."""
        retry_until = time.monotonic() + port_retry
        while True:
            proc, offset = self._spawn(node)
            node.process, node.pid = proc, proc.pid
            ports = self._await_ready(node, proc, offset, time.monotonic() + timeout)
            if ports is not None:
                break
            log_text = tail(node.log, offset)
            failed = self._bind_failure(node)
            if failed is not None and failed.in_use:
                if time.monotonic() < retry_until:
                    time.sleep(POLL_INTERVAL * 4)
                    continue
                if failed.port_name == "client" and any_port_if_busy and node.port:
                    log.info(
                        "%s: port %d was taken after the check; it listens on any free port",
                        node.name, node.port,
                    )  # fmt: skip
                    node.port = 0
                    continue
                if failed.port_name == "grpc" and any_port_if_busy and node.grpc_port:
                    log.info(
                        "%s: gRPC port %d was taken after the check; any free port instead",
                        node.name, node.grpc_port,
                    )  # fmt: skip
                    node.grpc_port = 0
                    continue
                chosen = {"raft": node.raft_port, "metrics": node.metrics_port}
                if not port_retry and failed.port and chosen.get(failed.port_name) == failed.port:
                    raise _ChosenPortTakenError(node, failed.port_name, failed.port)
                if port_retry:
                    raise LauncherError(
                        f"{node.role} {node.name} cannot listen on its {failed.port_name} port "
                        f"{node.host}:{failed.port}, recorded in {self.cluster_file}: another "
                        f"process holds it (still after {port_retry:g} s); stop that process, "
                        f"or start the cluster again; the end of {node.log}:\n{log_text}"
                    )
            raise LauncherError(
                f"{node.role} {node.name} exited before it was ready "
                f"(exit code {proc.returncode}); the end of {node.log}:\n{log_text}"
            )
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
