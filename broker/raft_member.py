"""A broker as a member of a Raft group (DLedger mode, ``enable_dledger_commit_log``).

The group's leader is its master: once the entries of earlier terms are committed (the
empty entry a new leader writes commits them) and dispatched, it takes the next queue
offsets from its ConsumeQueues, starts the services that write (delay levels, timer,
transaction checks), and registers as broker id 0 at once. Every other member is a slave
(broker id = its place in ``dledger_peers`` + 1), refuses writes with NOT_LEADER (the SDK
refreshes its route and retries) and serves reads up to the commit point.

Sends: the leader's broker appends a batch to its CommitLog as always; an append listener
records the batch in the raft index at the current term (so the delay, timer, transaction
and retry writers are covered as well), and replication is kicked once per event-loop turn,
so a burst of sends goes out in a few AppendRequests. A send is answered once its entry is
committed: one heap of waiting sends keyed by their CommitLog end, emptied up to the
commit point on every commit, no polling. Timeout (``sync_flush_timeout``) answers
FLUSH_SLAVE_TIMEOUT as RocketMQ; a leader that steps down fails its waiting sends at once
with NOT_LEADER. The store runs with ``auto_commit=False``: dispatch (and so every
consumer) stops at the commit point on the leader and on followers, so nothing a consumer
sees can be rolled back.

What survives a leader change, and how: messages, retries, delayed, timed and half
messages are CommitLog entries, so Raft keeps them. Consumer offsets, topic configs,
subscription groups and delay-level offsets are not in the log: followers copy them from
the leader every ``dledger_sync_interval`` (1 s) with the SlaveSynchronizer's call, offsets
merged by taking the larger, and a new leader takes back the offsets its followers hold
that are ahead of its own (consumers commit to whichever member they read from). We chose
copying over writing them through the log because it is what RocketMQ's DLedger mode does,
it keeps the CommitLog free of non-message records every reader would have to skip, and the
worst a leader change costs is re-delivery of up to a second of consumption (at-least-once
holds) and, for a topic created in the last second, its auto-creation again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from rocketq.broker.host import BrokerHost
from rocketq.broker.slave_sync import SlaveSynchronizer
from rocketq.common.aio import cancel_all
from rocketq.common.exceptions import NotLeaderError, RocketqError, RocketqSystemError
from rocketq.common.message import MASTER_ID
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.route_data import RouteBodyError, parse_cluster_info
from rocketq.remoting.transport import request_once
from rocketq.replication.raft.members_view import describe
from rocketq.replication.raft.membership import MemberHistory, Members
from rocketq.replication.raft.node import CompactedError, RaftConfig, Role
from rocketq.replication.raft.server import RaftServer
from rocketq.replication.raft.snapshot import CommitLogSnapshots
from rocketq.replication.raft.store import CommitLogRaftLog, HardStateFile, RaftIndex
from rocketq.replication.waiters import OffsetWaiters, resolver
from rocketq.storage.results import PutStatus

if TYPE_CHECKING:
    from rocketq.broker.config import BrokerConfig
    from rocketq.broker.pull_processor import PullProcessor
    from rocketq.broker.send_processor import SendProcessor
    from rocketq.broker.transaction import TransactionalMessageService

log = logging.getLogger(__name__)

# A new leader asks the nameserver for its group's members again every TAKE_BACK_RETRY
# seconds, for at most TAKE_BACK_WINDOW, until each other member gave its offsets.
TAKE_BACK_RETRY: Final = 0.5
TAKE_BACK_WINDOW: Final = 30.0

LEADER_ROLE = "SYNC_MASTER"  # what a serving leader reports (RocketMQ's DLedger does too)


class RaftHost(BrokerHost, Protocol):
    """The broker as its Raft member sees it: a change of role reaches the processors'
    config, and the writers run on the serving leader only."""

    send: SendProcessor
    pull: PullProcessor
    transactions: TransactionalMessageService
    # The Raft port's listening socket, when the process that started the broker holds
    # it (None: the member binds the port of its dledger_peers entry).
    raft_socket: socket.socket | None


def raft_config(cfg: BrokerConfig) -> RaftConfig:
    return RaftConfig(
        heartbeat_interval=cfg.dledger_heartbeat_interval / 1000,
        max_heartbeat_leak=cfg.dledger_max_heartbeat_leak,
        min_vote_interval=cfg.dledger_min_vote_interval / 1000,
        max_vote_interval=cfg.dledger_max_vote_interval / 1000,
        max_entries_per_append=256,  # entries are batches of a few hundred bytes and up
        spare_append_interval=cfg.dledger_spare_append_interval / 1000,
    )


def slave_id_of(cfg: BrokerConfig) -> int:
    """A follower's broker id: its place in dledger_peers + 1."""
    return list(cfg.raft_peers).index(cfg.dledger_self_id) + 1


class RaftMember:
    def __init__(self, broker: RaftHost) -> None:
        cfg = broker.config
        self.b = broker
        self.store = broker.store
        self.group = cfg.dledger_group or cfg.broker_name
        self.self_id = cfg.dledger_self_id
        members = cfg.raft_peers
        self.slave_id = slave_id_of(cfg)
        port = members[self.self_id].rpartition(":")[2]
        root = Path(broker.store_config.store_path_root_dir) / "dledger"
        self.index = RaftIndex(root / "index")
        # The group's membership: dledger_peers to start with, then the changes made at
        # run time, kept in members.json (which wins on a restart).
        self.members = MemberHistory(Members.bootstrap(members), root / "members.json")
        self.log = CommitLogRaftLog(self.store, self.index)
        # Members behind the compaction point are rebuilt from snapshots; retention
        # compacts committed entries only.
        self.snapshots = CommitLogSnapshots(self.log, root / "snapshot", history=self.members)
        self.store.cleaner.keep_below = lambda: self.store.committed_offset
        self.server = RaftServer(
            self.self_id,
            f"{cfg.bind_address}:{port}",
            {m: a for m, a in members.items() if m != self.self_id},
            self.log,
            HardStateFile(root / "hard_state.json"),
            config=raft_config(cfg),
            on_commit=self._on_commit,
            on_role=self._on_role,
            bounds=cfg,  # the Raft port keeps the broker's server bounds too
            # Links between members are signed with the inner credentials and encrypted
            # as the broker's ports are.
            inner=broker.inner_credentials,
            tls=broker.security.tls,
            ssl=broker.client_security.ssl if broker.client_security is not None else None,
            snapshots=self.snapshots,
            history=self.members,
        )
        self.node = self.server.node
        self.preferred = cfg.dledger_preferred_leader_id
        self.node.favoured = self.preferred or None  # kept up to date to take over sooner
        self.serving = False  # leader, earlier terms committed and dispatched
        self.serving_since = 0.0
        self._serve_from = 0  # the raft index of this term's empty entry
        self.elected_at = 0.0
        self.last_takeover_ms = -1.0  # election -> serving, for the logs and runtime info
        self.elections = 0  # this member stood for election (its metrics)
        self.leader_changes = 0  # the leader it knows of became another member
        self._known_leader: str | None = None
        self._waiting = OffsetWaiters()  # sends until a quorum committed them
        # CommitLog bytes appended since the store last settled, not yet indexed: (start, end).
        self._pending: tuple[int, int] | None = None
        self._switch: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._side: set[asyncio.Task[None]] = set()
        self.sync = SlaveSynchronizer(
            broker, master_addr=self.leader_broker_addr, interval_ms=cfg.dledger_sync_interval
        )
        self.store.append_listeners.append(self._on_append)
        self.store.settle_listeners.append(self._kick)

    # -- life --------------------------------------------------------------------------

    async def start(self) -> None:
        """After the store has loaded: make the raft index and the CommitLog agree, then
        join the group as a follower."""
        await asyncio.to_thread(self.log.reconcile)
        self.node.reload_members()  # none the reconciled log lacks
        await self.server.start(self.b.raft_socket)
        self.sync.start()
        self._tasks = [asyncio.ensure_future(self._watch())]
        log.info(
            "raft member %s of group %s listening on %s (%d entries, term %d)",
            self.self_id,
            self.group,
            self.server.bind,
            self.index.last_index(),
            self.node.term,
        )

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []
        await self.server.stop()
        await self._waiting.close()
        if self._switch is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._switch
        await self.sync.stop()
        for task in list(self._side):
            task.cancel()
        self.index.close()

    # -- writes ------------------------------------------------------------------------

    def not_leader(self) -> NotLeaderError:
        node = self.node
        if node.role is Role.LEADER and not self.serving:
            state = "was just elected and is committing the entries of earlier terms"
        elif node.role is Role.LEADER:
            state = f"is handing leadership to {node.transferring_to}"
        else:
            state = f"is a follower (the leader is {node.leader or 'being elected'})"
        return NotLeaderError(
            f"broker {self.b.config.broker_name} member {self.self_id} of raft group "
            f"{self.group} {state}; refresh the route and send to the master"
        )

    def check_writable(self) -> None:
        if not self.serving or self.node.transferring_to is not None:
            raise self.not_leader()

    def _on_append(self, end: int) -> None:
        """The store appended a batch ending at ``end``: it joins the entry collected until
        the store settles its appends (one raft entry per stream message and segment, not
        one per send), which :meth:`_kick` indexes at our term and replicates."""
        if not self.serving or self.node.role is not Role.LEADER:
            # Writers are stopped before this member stops serving; should one still get
            # through, its bytes must not stay where the leader's entries will go.
            prev = self._pending[0] if self._pending else self.log.end_of(self.index.last_index())
            log.error(
                "%s: a write reached the CommitLog while not the serving leader; cutting "
                "it (%d-%d)",
                self.self_id,
                prev,
                end,
            )
            self._pending = None
            self.store.truncate_to(prev)
            return
        file_size = self.store.commitlog.file_size
        segment = (end - 1) // file_size * file_size  # a batch never spans segments
        if self._pending is None:
            prev = self.log.end_of(self.index.last_index())
            self._pending = (max(prev, segment), end)  # after a roll, past the blank
        elif segment > self._pending[0]:
            # This batch rolled to a new segment: the entry so far ends in the old one.
            start, stop = self._pending
            self.log.record(self.node.term, start, stop - start)
            self._pending = (segment, end)
        else:
            self._pending = (self._pending[0], end)

    def _record_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        start, end = pending
        # Held appends whose write failed were never stored: the entry ends where the
        # CommitLog does.
        end = min(end, self.store.commitlog.max_offset)
        if end <= start:
            return
        if self.node.role is Role.LEADER:
            self.log.record(self.node.term, start, end - start)
        else:  # stepped down in this turn: these bytes are no entry of ours
            log.warning(
                "%s: cutting %d bytes appended just before stepping down", self.self_id, end - start
            )
            self.store.truncate_to(start)

    def _kick(self) -> None:
        """After a run of appends (the store settles them): make them this term's entry
        and send it."""
        self._record_pending()
        if self.node.role is Role.LEADER:
            with contextlib.suppress(NotLeaderError):
                self.node.replicate()
            self.server.flush()  # the entry leaves now, not a loop turn later

    def wait_committed_then(
        self,
        end_offset: int,
        timeout: float,
        done: Callable[[PutStatus | NotLeaderError], None],
    ) -> None:
        """Call ``done`` with PUT_OK once everything below ``end_offset`` is committed by
        a quorum; FLUSH_SLAVE_TIMEOUT after ``timeout``; a NotLeaderError if this member
        stops leading. At once when the answer is known now, else from the commit that
        reaches the offset (or the sweep that gives up on it)."""
        if self.store.committed_offset >= end_offset:
            done(PutStatus.PUT_OK)
            return
        if not self.serving:
            done(self.not_leader())
            return

        def reached(result: bool | None) -> None:
            if result is None:
                done(PutStatus.FLUSH_SLAVE_TIMEOUT)
            else:
                done(PutStatus.PUT_OK if result else self.not_leader())

        self._waiting.add(end_offset, timeout, reached)

    async def wait_committed(self, end_offset: int, timeout: float) -> PutStatus:
        """:meth:`wait_committed_then` as a coroutine (NotLeaderError raised)."""
        fut: asyncio.Future[PutStatus | NotLeaderError] = asyncio.get_running_loop().create_future()
        self.wait_committed_then(end_offset, timeout, resolver(fut))
        result = await fut
        if isinstance(result, NotLeaderError):
            raise result
        return result

    def _fail_waiting(self) -> None:
        self._waiting.fail_all()

    # -- Raft callbacks ----------------------------------------------------------------

    def _on_commit(self, index: int) -> None:
        end = min(self.log.end_of(index), self.store.max_phy_offset)
        leading = self.node.role is Role.LEADER
        if leading and self.serving:
            # Answer the waiting sends first, here, before the dispatch step that the
            # commit wakes. (Until it serves, a leader takes no sends, so nobody waits.)
            self._waiting.advance(end)
        self.store.commit(end)
        if leading and not self.serving and index >= self._serve_from:
            self._serve()

    def _on_role(self, role: Role, term: int, leader: str | None) -> None:
        if role is Role.CANDIDATE:
            self.elections += 1
        now_leader = self.self_id if role is Role.LEADER else leader
        if now_leader is not None and now_leader != self._known_leader:
            self.leader_changes += 1
            self._known_leader = now_leader
        if role is not Role.LEADER:
            # Before any entry of another leader lands: bytes of ours not yet indexed go.
            self._record_pending()
        if role is Role.LEADER:
            # Called before the empty entry of this term is appended: it goes right after.
            self._serve_from = self.index.last_index() + 1
            self.elected_at = time.monotonic()
            log.info(
                "%s: elected leader of group %s for term %d; serving once entry %d commits",
                self.self_id,
                self.group,
                term,
                self._serve_from,
            )
            return
        if self.serving or self.b.config.broker_id == MASTER_ID:
            self._step_down(term, leader)
        elif role is Role.FOLLOWER and leader is not None:
            log.info("%s: follower of %s in term %d", self.self_id, leader, term)

    def _serve(self) -> None:
        self.store.refresh_queue_offsets()  # dispatches up to the commit point first
        self.serving = True
        self.serving_since = time.monotonic()
        self.last_takeover_ms = (self.serving_since - self.elected_at) * 1000
        self._set_role(LEADER_ROLE, MASTER_ID)
        log.info(
            "%s: master of %s in term %d, serving %.0f ms after the election (CommitLog end %d)",
            self.self_id,
            self.group,
            self.node.term,
            self.last_takeover_ms,
            self.store.max_phy_offset,
        )
        self._switch_services(True)

    def _step_down(self, term: int, leader: str | None) -> None:
        was_serving = self.serving
        self.serving = False
        self._set_role("SLAVE", self.slave_id)
        self._fail_waiting()
        log.warning(
            "%s: no longer the leader of %s (term %d, leader %s)%s",
            self.self_id,
            self.group,
            term,
            leader or "unknown",
            "; failing waiting sends with NOT_LEADER" if was_serving else "",
        )
        self._switch_services(False)

    def _set_role(self, role: str, broker_id: int) -> None:
        b = self.b
        b.config = replace(b.config, broker_role=role, broker_id=broker_id)  # type: ignore[arg-type]
        b.send.config = b.pull.config = b.transactions.config = b.config
        b.registration.register_now()

    def _switch_services(self, on: bool) -> None:
        """Start (leader) or stop (follower) the writers and the follower's copying, one
        switch after the other."""
        previous = self._switch

        async def switch() -> None:
            if previous is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await previous
            b = self.b
            if on:
                await self.sync.stop()
                if not self.serving:
                    return
                b.schedule.start()
                b.transactions.start()
                if b.config.timer_wheel_enable:
                    b.timer.start()
                task = asyncio.ensure_future(self._take_back_offsets())
                self._side.add(task)
                task.add_done_callback(self._side.discard)
            else:
                await b.schedule.stop()
                await b.transactions.stop()
                await b.timer.stop()
                if not self.serving:
                    self.sync.start()

        self._switch = asyncio.ensure_future(switch())

    # -- the group's other members ---------------------------------------------------------

    async def _cluster_addrs(self) -> dict[int, str]:
        """This broker group's registered members (broker id -> address), from the first
        nameserver that answers."""
        name = self.b.config.broker_name
        for ns in self.b.config.namesrv_addrs:
            try:
                answer = await request_once(
                    ns,
                    RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO),
                    2.0,
                    security=self.b.client_security,  # TLS and inner credentials
                )
                info = parse_cluster_info(answer.body or b"{}")
            except (RocketqError, RouteBodyError):
                continue
            data = info.broker_addr_table.get(name)
            return dict(data.broker_addrs) if data is not None else {}
        return {}

    async def leader_broker_addr(self) -> str:
        """The client address of the group's master, "" while there is none (or it is us)."""
        if self.serving or self.node.leader is None:
            return ""
        addr = (await self._cluster_addrs()).get(MASTER_ID, "")
        return "" if addr == self.b.config.broker_addr else addr

    async def _take_back_offsets(self) -> None:
        """A new leader adopts the consumer offsets its followers hold ahead of its own
        (merged by taking the larger). The members are found at the nameserver, where the
        member that led before may still be registered as the master, or not at all while
        it registers again as a follower: every registered address but ours counts, and
        the nameserver is asked again until each other member has answered, for at most
        TAKE_BACK_WINDOW seconds while this member serves."""
        me = self.b.config.broker_addr
        taken: set[str] = set()
        deadline = time.monotonic() + TAKE_BACK_WINDOW
        while self.serving:
            for addr in (await self._cluster_addrs()).values():
                fresh = addr != me and addr not in taken and self.serving
                if fresh and await self.sync.take_back_offsets(addr):
                    taken.add(addr)
            if len(taken) >= len(self.server.peers) or time.monotonic() > deadline:
                return
            await asyncio.sleep(TAKE_BACK_RETRY)

    # -- leadership transfer -----------------------------------------------------------

    def transfer(self, group: str, to: str) -> None:
        if group and group != self.group:
            raise RocketqSystemError(
                f"broker {self.b.config.broker_name} is a member of raft group {self.group}, "
                f"not {group}"
            )
        if to == self.self_id and self.serving:
            return
        if not self.serving:
            raise self.not_leader()
        try:
            self.node.transfer_leadership(to)
        except ValueError:
            members = ", ".join(sorted([self.self_id, *self.server.peers]))
            raise RocketqSystemError(
                f"{to!r} is not a member of raft group {self.group} (members: {members})"
            ) from None

    async def _watch(self) -> None:
        """Hand leadership back to the preferred member once it is alive and caught up."""
        interval = self.node.config.heartbeat_interval
        while True:
            await asyncio.sleep(interval)
            node = self.node
            pref = self.preferred
            if not pref or pref == self.self_id or not self.serving:
                continue
            if node.transferring_to is not None:
                continue
            if time.monotonic() - self.serving_since < 2 * interval:
                continue  # settle first: no hand-over storms right after an election
            pr = node.progress.get(pref)
            if pr is None or time.monotonic() - pr.last_ack > 2 * interval:
                continue
            if pr.match_index >= self.index.last_index():
                log.info("%s: preferred leader %s is caught up; handing over", self.self_id, pref)
                with contextlib.suppress(NotLeaderError, ValueError):  # (not a voter now)
                    node.transfer_leadership(pref)

    # -- state for admins --------------------------------------------------------------

    def follower_lag_bytes(self) -> dict[str, int]:
        """On the leader: CommitLog bytes each follower lacks; elsewhere nothing."""
        if self.node.role is not Role.LEADER:
            return {}
        end = self.store.max_phy_offset
        lags = {}
        for member, peer in list(self.node.progress.items()):
            try:
                have = self.log.end_of(min(peer.match_index, self.index.last_index()))
            except CompactedError:  # behind the compaction point: it lacks all we hold
                have = max(self.store.min_phy_offset, 0)
            except (IndexError, ValueError, OSError):
                continue
            lags[member] = max(0, end - have)
        return lags

    # -- membership ----------------------------------------------------------------------

    def change_members(self, group: str, member: str, address: str | None) -> int:
        """Add ``member`` at ``address`` (None: remove it) to this group; the leader only.
        -> the raft index of the change's entry."""
        if group and group != self.group:
            raise RocketqSystemError(
                f"broker {self.b.config.broker_name} is a member of raft group {self.group}, "
                f"not {group}"
            )
        if not self.serving:
            raise self.not_leader()
        self._record_pending()  # the change's entry goes after every byte written so far
        if address is None:
            index = self.node.remove_member(member)
        else:
            index = self.node.add_member(member, address)
        self.server.flush()
        return index

    def members_view(self) -> dict[str, object]:
        """The membership as this member sees it (on the leader with each one's lag)."""
        view = describe(self.node, self.log.end_of)
        view["group"] = self.group
        return view

    def runtime_info(self) -> dict[str, str]:
        node = self.node
        return {
            "raftMembership": self.members.latest()[1].role_of(self.self_id),
            "raftGroup": self.group,
            "raftSelfId": self.self_id,
            "raftRole": node.role.value,
            "raftTerm": str(node.term),
            "raftLeader": node.leader or "",
            "raftServing": str(self.serving).lower(),
            "raftCommitIndex": str(node.commit_index),
            "raftLastIndex": str(self.index.last_index()),
            "raftCommittedOffset": str(self.store.committed_offset),
            "raftTakeoverMs": f"{self.last_takeover_ms:.0f}",
            "raftFirstIndex": str(self.index.first_index()),
            # Receiving a snapshot (and how far), and each follower's lag on a leader
            # ("member=bytes,..."): cluster-list's Raft lag column.
            "raftRebuilding": str(self.snapshots.receiving()).lower(),
            "raftSnapshotReceived": str(self.snapshots.progress()[0]),
            "raftSnapshotSize": str(self.snapshots.progress()[1]),
            "raftSnapshotsInstalled": str(self.snapshots.installed),
            "raftFollowerLagBytes": ",".join(
                f"{m}={lag}" for m, lag in sorted(self.follower_lag_bytes().items())
            ),
        }
