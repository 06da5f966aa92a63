"""``rocketq chaos run``: a cluster under load, faults on a seeded schedule, then the check.

The run, in order: launch the cluster (the launcher of ``rocketq cluster up``; as root with
``partition`` each broker in a network namespace of its own; with ``protocol`` v5 every
broker serving the apache.rocketmq.v2 gRPC endpoint), create the topics (with ``orderly``
and v5 the orderly group made a FIFO group on every broker), start the
consumers and then the producers (processes of their own: rocketq's SDK over the remoting
protocol, or RocketMQ 5's official Python client given every broker's v2 endpoint), inject
one fault at a time -
``interval`` seconds of calm, then a fault held ``fault_duration`` seconds and healed -
until ``duration`` has passed, wait until every node is up and every group has a master
again, let the producers send a little longer, stop them, wait until the consumers have
received every acknowledged message (or the drain times out), stop them, tear everything
down, and check the history. Right after the producers stop, every member of every group
must hold what its leader or master holds within ``CAUGHT_UP_TIMEOUT_S`` (a ``members``
record says how it went). With ``disk-full`` each broker's home is a small tmpfs of its own
(root only), mounted before the brokers start; with ``wipe-member`` or ``replace-member``
the brokers get small segments and retention that deletes every segment but the newest,
so a wiped or new member lacks entries its leader no longer holds. Teardown also runs on
Ctrl-C or an error: every process the run started is stopped by pid, every namespace, rule,
filler and mount it made removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from rocketq.chaos.checker import CheckResult, broken_promises, check
from rocketq.chaos.disk import (
    DEFAULT_DISK_MIB,
    MIN_DISK_MIB,
    SmallDisks,
    small_disks_unavailable_reason,
)
from rocketq.chaos.faults import MASTER_FAULTS, ActiveFault, Faults, Partitioner
from rocketq.chaos.history import HISTORY_FILE, ChaosError, HistoryWriter, read_history
from rocketq.chaos.members import PROBE_TOPIC, wait_caught_up
from rocketq.chaos.netns import NetnsCluster, NetnsLab, netns_unavailable_reason
from rocketq.chaos.proxy import ProxiedCluster, ProxyNet
from rocketq.chaos.report import hostile_broken, hostile_json
from rocketq.chaos.server_memory import ServerMemory
from rocketq.chaos.store_report import store_broken, store_json
from rocketq.chaos.workers import (
    STOP_TIMEOUT_S,
    V5_WORKLOAD_MODULE,
    WORKLOAD_MODULE,
    Workers,
    worker_env,
)
from rocketq.chaos.workload import ORDERLY_GROUP, ORDERLY_TOPIC, TOPIC
from rocketq.cluster.launcher import ClusterSpec, LocalCluster
from rocketq.cluster.pids import wait_until
from rocketq.common.exceptions import RocketqError
from rocketq.sdk import admin_wire as aw
from rocketq.sdk.admin import Admin

QUEUES_PER_GROUP: Final = 4
ORDERLY_SHARDS: Final = 2  # per producer, with --orderly
TOPICS_TIMEOUT_S: Final = 30.0  # for the topics to reach every group, the FIFO group every broker
RECOVERY_TIMEOUT_S: Final = 120.0
SETTLE_S: Final = 3.0  # sends after recovery, before the producers stop
DRAIN_TIMEOUT_S: Final = 180.0
DRAIN_IDLE_S: Final = 60.0  # no new receipt this long ends the drain early
# The clients of a run: rocketq's SDK over RocketMQ's remoting protocol, or RocketMQ 5's
# official Python client (rocketq[v5client]) over the brokers' v2 gRPC endpoints.
PROTOCOLS: Final = ("remoting", "v5")
# A v5 worker's own deadline past the run's schedule: it ends even if the harness is cut
# off before it could stop it (it also ends when the harness process is gone).
V5_DEADLINE_MARGIN_S: Final = 600.0
# Brokers re-register every 5 s (RocketMQ: 30 s), so a restarted nameserver knows them soon.
CHAOS_BROKER_SETTINGS: Final = {
    "register_name_server_period": "5000",
    "flush_disk_type": "ASYNC_FLUSH",
}
# With disk-full: files small enough for a small disk (1 MiB CommitLog segments, 6,000
# entries a ConsumeQueue file, small index files) and the disk checked every second.
DISK_FULL_SETTINGS: Final = {
    "mapped_file_size_commit_log": str(1 << 20),
    "mapped_file_size_consume_queue": str(6000 * 20),
    "max_hash_slot_num": "5000",
    "max_index_num": "20000",
    "clean_resource_interval": "1000",
}
# With wipe-member or replace-member: retention at every hour deletes every CommitLog
# segment but the newest (file_reserved_time 0; whether consumed or not, as RocketMQ's),
# each segment 256 KiB, checked every second, so a group's log is trimmed seconds into the
# run.
RETENTION_SETTINGS: Final = {
    "mapped_file_size_commit_log": str(256 << 10),
    "file_reserved_time": "0",
    "delete_when": ";".join(f"{hour:02d}" for hour in range(24)),
    "clean_resource_interval": "1000",
}
# After the producers stop, for every member to hold what its leader or master holds.
CAUGHT_UP_TIMEOUT_S: Final = 60.0


@dataclass(frozen=True)
class ChaosOptions:
    replication: str = "raft"
    role: str = "SYNC_MASTER"
    groups: int = 2
    nameservers: int = 2
    producers: int = 2
    consumers: int = 2
    orderly: bool = False
    faults: tuple[str, ...] = ("kill-master",)
    # The faults in the given order, round after round (else each drawn from the seed);
    # with ``rounds`` > 0 the faults end after that many rounds (or at ``duration``).
    in_turn: bool = False
    rounds: int = 0
    interval: float = 5.0
    fault_duration: float = 5.0
    duration: float = 60.0
    seed: int = 0
    data_dir: Path = Path("data/chaos")
    rate: float = 200.0  # messages a second per producer
    settings: dict[str, str] = field(default_factory=dict)  # extra broker --set
    drain_timeout: float = DRAIN_TIMEOUT_S
    # Authentication and authorization on every node: every client of the run signs as the
    # cluster's super user (cluster/security.py).
    auth: bool = False
    # TLS enforcing on every remoting port (and, with v5, every v2 endpoint serving TLS
    # only): every client connects over TLS.
    tls: bool = False
    # The clients: "remoting" (rocketq's SDK) or "v5" (RocketMQ 5's official Python client
    # over every broker's apache.rocketmq.v2 endpoint).
    protocol: str = "remoting"
    # With disk-full: the size of each broker's small disk (a tmpfs), MiB.
    disk_mib: int = DEFAULT_DISK_MIB

    def validate(self) -> None:
        def bad(flag: str, why: str) -> ChaosError:
            return ChaosError(f"{flag}: {why}")

        if self.replication not in ("raft", "ha"):
            raise bad("--replication", f"{self.replication!r}: choose raft or ha")
        if self.protocol not in PROTOCOLS:
            raise bad("--protocol", f"{self.protocol!r}: choose {' or '.join(PROTOCOLS)}")
        if self.protocol == "v5":
            self._validate_v5(bad)
        if self.role not in ("SYNC_MASTER", "ASYNC_MASTER"):
            raise bad("--role", f"{self.role!r}: choose SYNC_MASTER or ASYNC_MASTER")
        for flag, value, low in (
            ("--groups", self.groups, 1),
            ("--nameservers", self.nameservers, 1),
            ("--producers", self.producers, 1),
            ("--consumers", self.consumers, 1),
        ):
            if value < low:
                raise bad(flag, f"must be at least {low}, got {value}")
        for flag, seconds in (
            ("--interval", self.interval),
            ("--fault-duration", self.fault_duration),
            ("--duration", self.duration),
            ("--drain-timeout", self.drain_timeout),
        ):
            if not seconds > 0:
                raise bad(flag, f"must be more than 0 seconds, got {seconds:g}")
        if not self.rate > 0:
            raise bad("--rate", f"must be more than 0 messages a second, got {self.rate:g}")
        self._validate_store_faults(bad)
        if self.rounds < 0:
            raise bad("--rounds", f"must be 0 (no limit) or more, got {self.rounds}")
        if self.rounds and not self.in_turn:
            raise bad("--rounds", "counts rounds of --in-turn; add --in-turn")
        if "kill-consumer" in self.faults and self.consumers < 2:
            raise bad("--consumers", "kill-consumer needs at least 2 consumers")
        if "partition" in self.faults and self.replication == "ha" and os.geteuid() != 0:
            raise bad(
                "--faults",
                "partition of a master/slave group needs root (network namespaces); run "
                "as root, or use --replication raft (partitioned through the TCP proxy)",
            )
        if self.tls and importlib.util.find_spec("trustme") is None:
            raise bad(
                "--tls",
                "the cluster's test certificates need trustme: pip install 'rocketq[tls]'",
            )
        if "partition" in self.faults and os.geteuid() == 0:
            reason = netns_unavailable_reason()
            if reason is not None:
                raise bad("--faults", f"partition needs network namespaces: {reason}")

    def _validate_store_faults(self, bad: Callable[[str, str], ChaosError]) -> None:
        if self.disk_mib < MIN_DISK_MIB:
            raise bad("--disk-mib", f"must be at least {MIN_DISK_MIB} MiB, got {self.disk_mib}")
        if "replace-member" in self.faults and self.replication != "raft":
            raise bad(
                "--faults",
                "replace-member changes a Raft group's members; use --replication raft",
            )
        if "disk-full" in self.faults:
            reason = small_disks_unavailable_reason()
            if reason is not None:
                raise bad("--faults", f"disk-full: {reason}; run as root, or leave it out")

    def _validate_v5(self, bad: Callable[[str, str], ChaosError]) -> None:
        if importlib.util.find_spec("rocketmq") is None:
            raise bad(
                "--protocol",
                "v5 runs RocketMQ 5's official Python client: pip install 'rocketq[v5client]'",
            )
        if importlib.util.find_spec("grpc") is None:
            raise bad(
                "--protocol",
                "v5 needs the brokers' v2 gRPC endpoint: pip install 'rocketq[grpc]'",
            )

    @property
    def clients(self) -> str:
        """The run's clients, in words."""
        if self.protocol == "v5":
            return "RocketMQ 5's official Python client over the v2 gRPC endpoints"
        return "rocketq's SDK over the remoting protocol"

    @property
    def security(self) -> str:
        """What the run's cluster requires of its clients, in words."""
        return f"auth {'on' if self.auth else 'off'}, TLS {'on' if self.tls else 'off'}"

    @property
    def promise_role(self) -> str:
        return self.role if self.replication == "ha" else "RAFT"

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["data_dir"] = str(self.data_dir)
        doc["faults"] = list(self.faults)
        return doc


def v5_access_point(cluster: LocalCluster, *, one: int | None = None) -> str:
    """Every broker's apache.rocketmq.v2 endpoint, ``host:port`` joined by ';' (the access
    point RocketMQ 5's clients take); with ``one``, the endpoint of the broker at that
    index (modulo their number) alone.

    The access point over TLS is one endpoint: the official client makes a list of them one
    gRPC target (``ipv4:h1:p1,h2:p2``), whose authority - the name the server's
    certificate is verified against - is the whole list, which no certificate names."""
    missing = [b.name for b in cluster.brokers if not b.grpc_port]
    if missing:
        raise ChaosError(
            f"brokers {', '.join(missing)} serve no v2 endpoint; the cluster was started "
            "without grpc"
        )
    brokers = cluster.brokers if one is None else [cluster.brokers[one % len(cluster.brokers)]]
    return ";".join(f"{b.host}:{b.grpc_port}" for b in brokers)


async def fifo_group_missing(admin: Admin, group: str) -> list[str]:
    """The registered brokers (masters and followers) on which ``group`` is not a FIFO group
    (or that did not answer)."""
    missing = []
    for addr in sorted(await admin.broker_addrs()):
        try:
            answer = await admin.client.broker(addr).invoke(
                aw.all_subscription_group_config_request(), admin.timeout
            )
            table = aw.parse_all_subscription_group_config(answer).subscription_group_table
        except (RocketqError, OSError):
            missing.append(addr)
            continue
        config = table.get(group)
        if config is None or not config.consume_message_orderly:
            missing.append(addr)
    return missing


@dataclass
class RunOutcome:
    history: Path
    result: CheckResult
    broken: list[str]
    recovered: bool
    faults_made: int
    errors: list[str] = field(default_factory=list)


class _Tail:
    """Follows the history file, counting acknowledged keys not yet received."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.acked: set[str] = set()
        self.received: set[str] = set()
        self.last_receive = time.monotonic()

    def poll(self) -> int:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return len(self.acked - self.received)
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if rec.get("type") == "send_ok":
                    self.acked.update(rec.get("keys") or ())
                elif rec.get("type") == "receive" and rec.get("key"):
                    if rec["key"] not in self.received:
                        self.last_receive = time.monotonic()
                    self.received.add(rec["key"])
        return len(self.acked - self.received)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM are noted, not raised, inside; one that came is raised on the way
    out (as KeyboardInterrupt) unless an exception is already on its way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: caught.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if caught:
        raise KeyboardInterrupt(f"signal {caught[0]} during the teardown")


class ChaosRun:
    def __init__(self, opts: ChaosOptions, echo: Callable[[str], None] = print) -> None:
        opts.validate()
        self.opts = opts
        self.echo = echo
        self.data_dir = opts.data_dir.absolute()
        self.history_path = self.data_dir / HISTORY_FILE
        self.rng = random.Random(opts.seed)
        self.t0 = time.monotonic()
        self.lab: NetnsLab | None = None
        self.net: ProxyNet | None = None
        self.cluster: LocalCluster | None = None
        self.workers = Workers(self.data_dir / "logs")
        self.history: HistoryWriter | None = None
        self.producers = [f"producer-{i}" for i in range(opts.producers)]
        self.consumers = [f"consumer-{i}" for i in range(opts.consumers)]
        self.active: ActiveFault | None = None
        self.faults_made = 0
        self.errors: list[str] = []
        self.memory: ServerMemory | None = None
        self.disks: SmallDisks | None = None
        self.faults: Faults | None = None

    # ---------------------------------------------------------------- helpers

    def _say(self, text: str) -> None:
        self.echo(f"[{time.monotonic() - self.t0:7.1f} s] {text}")

    def _write(self, type_: str, **fields: Any) -> None:
        assert self.history is not None
        self.history.write(type_, **fields)

    def _phase(self, phase: str) -> None:
        self._write("phase", phase=phase)
        self._say(phase.replace("_", " "))

    def _wait(self, seconds: float) -> None:
        """The schedule's pauses (Ctrl-C interrupts them)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.2))

    # ---------------------------------------------------------------- set-up

    def _make_cluster(self) -> tuple[LocalCluster, Partitioner | None]:
        o = self.opts
        settings = {**CHAOS_BROKER_SETTINGS}
        if "disk-full" in o.faults:
            settings.update(DISK_FULL_SETTINGS)
        if {"wipe-member", "replace-member"} & set(o.faults):
            settings.update(RETENTION_SETTINGS)
        if o.replication == "ha":
            settings["broker_role"] = o.role
        settings.update(o.settings)
        spec = ClusterSpec(
            data_dir=self.data_dir / "cluster",
            nameservers=o.nameservers,
            brokers=o.groups,
            replication="raft" if o.replication == "raft" else "ha",
            broker_settings=settings,
            ready_timeout=60.0,
            auth=o.auth,
            tls=o.tls,
            grpc=o.protocol == "v5",
        )
        members = o.groups * (3 if o.replication == "raft" else 2)
        if "partition" not in o.faults:
            return LocalCluster(spec), None
        if os.geteuid() == 0:
            self.lab = NetnsLab(members)
            self.lab.__enter__()
            netns_cluster = NetnsCluster(spec, self.lab)
            return netns_cluster, netns_cluster
        self.net = ProxyNet()
        proxied = ProxiedCluster(spec, self.net)
        return proxied, proxied

    async def _create_topics(self, cluster: LocalCluster) -> None:
        async with Admin(cluster.namesrv_addr, **cluster.client_settings()) as admin:
            topics = [(TOPIC, False)] + ([(ORDERLY_TOPIC, True)] if self.opts.orderly else [])
            if "disk-full" in self.opts.faults:
                topics.append((PROBE_TOPIC, False))
            for topic, order in topics:
                await admin.update_topic(
                    topic,
                    read_queue_nums=QUEUES_PER_GROUP,
                    write_queue_nums=QUEUES_PER_GROUP,
                    order=order,
                )
            if self.opts.orderly and self.opts.protocol == "v5":
                await self._make_fifo_group(admin)
            # Every group's queues in the route before the load starts.
            deadline = time.monotonic() + TOPICS_TIMEOUT_S
            while True:
                groups: set[str] = set()
                for topic, _order in topics:
                    try:
                        route = await admin.topic_route(topic)
                    except RocketqError:  # not registered with the nameserver yet
                        groups = set()
                        break
                    groups = {qd.broker_name for qd in route.queue_datas}
                    if len(groups) < self.opts.groups:
                        break
                if len(groups) >= self.opts.groups:
                    return
                if time.monotonic() > deadline:
                    raise ChaosError(
                        f"the topics did not reach every broker group in {TOPICS_TIMEOUT_S:g} s"
                    )
                await asyncio.sleep(0.2)

    async def _make_fifo_group(self, admin: Admin) -> None:
        """The orderly group made a FIFO group (``consume_message_orderly``, RocketMQ 5's
        consumeMessageOrderly) on every master, then waited for on every broker: followers
        copy their leader's groups every second, and a follower elected before it had the
        flag would pop the group's queues unordered. Done before the consumers start: the
        v2 endpoint reads the flag at each receive."""
        await admin.update_sub_group(ORDERLY_GROUP, consume_message_orderly=True)
        deadline = time.monotonic() + TOPICS_TIMEOUT_S
        while lacking := await fifo_group_missing(admin, ORDERLY_GROUP):
            if time.monotonic() > deadline:
                raise ChaosError(
                    f"brokers {', '.join(lacking)} did not have {ORDERLY_GROUP} as a FIFO "
                    f"group within {TOPICS_TIMEOUT_S:g} s"
                )
            await asyncio.sleep(0.2)

    def _start_workload(self, cluster: LocalCluster) -> None:
        if self.opts.protocol == "v5":
            self._start_v5_workload(cluster)
            return
        o = self.opts
        namesrv = cluster.namesrv_addr
        history = str(self.history_path)
        cluster_dir = str(self.data_dir / "cluster")
        for name in self.consumers:
            args = ["consumer", "--name", name, "--namesrv", namesrv, "--history", history]
            args += ["--cluster-dir", cluster_dir] + (["--orderly"] if o.orderly else [])
            self.workers.add(name, args, ready_line=True)
            self.workers.start(name)
        for i, name in enumerate(self.producers):
            args = ["producer", "--name", name, "--namesrv", namesrv, "--history", history]
            args += ["--rate", str(o.rate), "--seed", str(o.seed * 1000 + i)]
            args += ["--shards", str(ORDERLY_SHARDS)] if o.orderly else []
            self.workers.add(name, args, module=WORKLOAD_MODULE)
            self.workers.start(name)

    def _start_v5_workload(self, cluster: LocalCluster) -> None:
        """RocketMQ 5's client in every worker, its access point every broker's v2 endpoint
        joined by ';' (the client fails over between them; the endpoint it reaches answers
        the route), over TLS one broker's endpoint per worker. With ``orderly`` the
        producers send FIFO messages in shards and the consumers also receive the orderly
        topic as its FIFO group; with ``tls`` the workers' environment (the cluster's
        ``client_env``) turns TLS on."""
        o = self.opts
        history = str(self.history_path)
        logs = self.data_dir / "logs"
        deadline = (
            o.duration + RECOVERY_TIMEOUT_S + SETTLE_S + o.drain_timeout
            + 2 * STOP_TIMEOUT_S + V5_DEADLINE_MARGIN_S
        )  # fmt: skip
        roles = [("consumer", name) for name in self.consumers]
        roles += [("producer", name) for name in self.producers]
        for index, (role, name) in enumerate(roles):
            # Over TLS each worker asks one broker's endpoint for routes (see
            # v5_access_point), the workers spread over the brokers.
            endpoints = v5_access_point(cluster, one=index if o.tls else None)
            args = [role, "--name", name, "--endpoints", endpoints, "--history", history]
            args += ["--deadline", f"{deadline:g}"]
            args += ["--client-home", str(logs / f"{name}-client")]
            if role == "producer":
                args += ["--rate", str(o.rate)]
                args += ["--shards", str(ORDERLY_SHARDS)] if o.orderly else []
            else:
                args += ["--orderly"] if o.orderly else []
            self.workers.add(name, args, ready_line=role == "consumer", module=V5_WORKLOAD_MODULE)
            self.workers.start(name)

    # ---------------------------------------------------------------- the run

    def _fault_cycle(self, faults: Faults, end: float) -> None:
        turn = 0
        last_turn = self.opts.rounds * len(self.opts.faults) if self.opts.rounds else None
        while time.monotonic() + self.opts.interval < end:
            if last_turn is not None and turn >= last_turn:
                return
            self._wait(self.opts.interval)
            if self.opts.in_turn:
                kind = self.opts.faults[turn % len(self.opts.faults)]
                turn += 1
            else:
                kind = self.rng.choice(self.opts.faults)
            try:
                fault = faults.inject(kind)
            except (ChaosError, RocketqError) as exc:
                self.errors.append(f"{kind}: not injected: {exc}")
                self._say(f"{kind}: not injected: {exc}")
                continue
            self.active = fault
            self.faults_made += 1
            self._write("fault_start", fault=kind, target=fault.target, group=fault.group)
            self._say(f"{kind} {fault.target}" + (f" ({fault.group})" if fault.group else ""))
            self._wait(self.opts.fault_duration)
            self._heal()

    def _heal(self) -> None:
        fault, self.active = self.active, None
        if fault is None:
            return
        error = None
        try:
            fault.heal()
        except (ChaosError, RocketqError, OSError) as exc:
            error = str(exc)[:500]
            self.errors.append(f"{fault.kind} {fault.target}: heal failed: {error}")
        detail = {"detail": fault.detail} if fault.detail else {}
        self._write(
            "fault_end",
            fault=fault.kind,
            target=fault.target,
            group=fault.group,
            error=error,
            **detail,
        )
        self._say(f"healed {fault.kind} {fault.target}" + (f": {error}" if error else ""))

    def _removed(self) -> set[str]:
        """Members taken out of their group for good (replace-member)."""
        return self.faults.removed if self.faults is not None else set()

    def _recovered(self, cluster: LocalCluster) -> bool:
        """Every node alive (but members removed from their group) and every group with a
        master listed by a nameserver."""
        removed = self._removed()
        for node in cluster.nodes:
            if node.name not in removed and not cluster.is_alive(node.name):
                with contextlib.suppress(RocketqError):
                    cluster.restart(node.name)
        for name in self.consumers:
            if name not in self.workers.alive():
                with contextlib.suppress(ChaosError):
                    self.workers.start(name)
        status = cluster.status()
        if status.registered is None:
            return False
        if not all(n.alive for n in status.nodes if n.name not in removed):
            return False
        groups = {b.broker_name for b in cluster.brokers}
        return all(0 in status.registered.get(g, {}) for g in groups)

    def _mount_small_disks(self, cluster: LocalCluster) -> None:
        """A tmpfs of ``disk_mib`` MiB on each broker's home, before the brokers start."""
        disks = self.disks = SmallDisks(self.opts.disk_mib)
        for broker in cluster.brokers:
            disks.mount(broker.home)
        self._say(f"a {self.opts.disk_mib} MiB tmpfs on each of {len(disks.mounts)} brokers")

    def _check_members(self, cluster: LocalCluster) -> None:
        """Every member of every group holds what its leader or master holds (within
        ``CAUGHT_UP_TIMEOUT_S``): a ``members`` record either way."""
        removed = self._removed()
        members = [b for b in cluster.brokers if b.name not in removed]
        done, view, waited = wait_caught_up(cluster, members, CAUGHT_UP_TIMEOUT_S)
        self._write(
            "members",
            caught_up=done,
            waited_ms=round(waited * 1000),
            timeout_s=CAUGHT_UP_TIMEOUT_S,
            groups=view,
        )
        if done:
            self._say(f"every member caught up with its leader ({waited:.1f} s)")
        else:
            lagging = [
                f"{name} ({behind if behind is not None else '?'} bytes behind)"
                for g in view.values()
                for name, behind in g["behind"].items()
                if behind != 0
            ]
            self._say(f"members not caught up after {waited:.0f} s: {', '.join(lagging)}")

    def _drain(self) -> bool:
        tail = _Tail(self.history_path)
        deadline = time.monotonic() + self.opts.drain_timeout
        tail.last_receive = time.monotonic()

        def drained() -> bool:
            missing = tail.poll()
            idle = time.monotonic() - tail.last_receive > DRAIN_IDLE_S
            return missing == 0 or idle

        done = wait_until(drained, deadline)
        missing = tail.poll()
        self._say(f"drain: {len(tail.acked):,} acknowledged, {missing:,} not received")
        return done and missing == 0

    def run(self) -> RunOutcome:
        o = self.opts
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.history_path.exists():
            raise ChaosError(
                f"{self.history_path} exists: {self.data_dir} holds an earlier run; give "
                "another --data-dir or remove it"
            )
        recovered = False
        try:
            cluster, partitioner = self._make_cluster()
            self.cluster = cluster
            self._say(
                f"starting {o.groups} {o.replication} group(s) and {o.nameservers} "
                f"nameserver(s) in {self.data_dir} ({o.security}; clients: {o.clients})"
            )
            if "disk-full" in o.faults:
                self._mount_small_disks(cluster)
            cluster.start()
            # The workload signs as the cluster's super user and trusts its CA.
            self.workers.env = worker_env(cluster.client_env())
            asyncio.run(self._create_topics(cluster))
            self.history = HistoryWriter(self.history_path)
            self._write("run", config=o.to_dict())
            memory = self.memory = ServerMemory(cluster, self._write)
            memory.start()
            self._start_workload(cluster)
            self._say(f"{o.producers} producer(s), {o.consumers} consumer(s) running")
            load_started = time.monotonic()
            faults = self.faults = Faults(
                cluster,
                self.workers,
                self.consumers,
                self.rng,
                partitioner=partitioner,
                disks=self.disks,
            )
            self._fault_cycle(faults, load_started + o.duration)
            self._phase("faults_stopped")
            recovered = wait_until(
                lambda: self._recovered(cluster), time.monotonic() + RECOVERY_TIMEOUT_S
            )
            if recovered:
                self._phase("recovered")
            else:
                self.errors.append(f"the cluster did not recover in {RECOVERY_TIMEOUT_S:g} s")
                self._say(self.errors[-1])
            self._wait(SETTLE_S)
            killed = self.workers.stop(self.producers)
            if killed:
                self.errors.append(f"producers killed at the stop deadline: {killed}")
            self._phase("producers_stopped")
            self._check_members(cluster)
            if self._drain():
                self._phase("drained")
            self.workers.stop(self.consumers)
            memory.stop()
            self._phase("done")
        finally:
            self._teardown()
        history = read_history(self.history_path)
        result = check(history, str(self.history_path))
        broken = broken_promises(result, replication=o.replication, role=o.role, orderly=o.orderly)
        broken += hostile_broken(hostile_json(history))
        broken += store_broken(store_json(history))
        if not recovered:
            broken.append(f"the cluster did not recover within {RECOVERY_TIMEOUT_S:g} s")
        return RunOutcome(
            self.history_path, result, broken, recovered, self.faults_made, self.errors
        )

    def _teardown(self) -> None:
        """Stop what the run started, whatever state it is in; a second Ctrl-C (or SIGTERM)
        while it runs waits until it is done instead of cutting it short."""
        with _signals_held():
            self._stop_everything()

    def _stop_everything(self) -> None:
        problems: list[str] = []
        with contextlib.suppress(Exception):
            if self.active is not None and self.active.undo is not None:
                self.active.undo()
        with contextlib.suppress(Exception):
            if self.active is not None and self.active.kind in MASTER_FAULTS | {
                "kill-consumer",
                "hostile",
            }:
                self._heal_quietly()
        with contextlib.suppress(Exception):
            if self.memory is not None and self.history is not None:
                self.memory.stop()
        try:
            self.workers.stop()
        except Exception as exc:  # keep tearing down
            problems.append(f"workers: {exc}")
        if self.cluster is not None:
            try:
                self.cluster.stop()
            except Exception as exc:
                problems.append(f"cluster: {exc}")
        if self.disks is not None:
            problems += self.disks.close()
        if self.net is not None:
            self.net.close()
        if self.lab is not None:
            self.lab.close()
        if self.history is not None:
            self.history.close()
        if problems:
            raise ChaosError("teardown left work undone: " + "; ".join(problems))

    def _heal_quietly(self) -> None:
        """Undo a pause, a cut or hostile traffic before the stop (a restart is not needed to
        stop)."""
        fault = self.active
        if fault is None or fault.kind not in ("pause", "partition", "hostile"):
            return
        fault.heal()
        self.active = None

    def started_pids(self) -> Iterator[int]:
        """Every pid the run started (its nodes and workers), for a cleanup check."""
        if self.cluster is not None:
            yield from (n.pid for n in self.cluster.nodes if n.pid)
        yield from self.workers.pids()
