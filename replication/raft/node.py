"""The Raft state machine of one broker of a group (DLedger's elector and entry pusher).

Pure logic: time comes from an injected clock, messages leave through an injected
transport, the term and vote through an injected hard-state store (saved before they are
used), entries through an injected log. The same code runs over TCP between brokers and
over the simulated network of the tests.

Timers follow DLedger: the leader heartbeats every ``heartbeat_interval`` (2 s); a follower
that misses ``max_heartbeat_leak`` (3) of them starts an election after a random
``min_vote_interval``-``max_vote_interval`` (300-1000 ms) more, and a failed round retries
after such a random pause. Elections start with a pre-vote: a node only raises its term
when a majority would vote for it, so a node cut off from the group cannot depose a
healthy leader when it comes back. A leader that has not heard from a majority for
``max_heartbeat_leak`` heartbeats steps down and stops taking writes.

Entries are committed at the quorum's median match index, and only entries of the
leader's own term are counted (a new leader first commits an empty entry of its term).
Refusals carry a named reason, so the logs say why a vote or an append was refused.

Snapshots (DLedger's way, :mod:`rocketq.replication.raft.snapshot`): retention deletes old
CommitLog segments and the log forgets their entries (``first_index`` rises). A follower
whose next index lies below the leader's first index cannot be sent entries: the leader
streams it a snapshot instead (the CommitLog from the leader's min offset, and the raft
index units over it, up to the leader's commit index), in checked chunks the follower
acknowledges one by one and resumes from after a lost link or a restart. Once installed
the follower's log starts at the snapshot and appends follow as usual.

Rebuilding members and safety. While a member receives a snapshot it is *rebuilding*: it
grants no vote and no pre-vote (reason REBUILDING) and stands for no election; so does a
member that started with nothing at all (no term, no vote, no entries: a new disk, or a
wiped one) until a leader has sent it entries, towards a candidate whose log is not empty.
Why this is safe and keeps the group able to commit:

- A wiped member forgot its vote and the entries it acknowledged. Were it to vote, a
  candidate lacking entries committed with its old acknowledgement could win with it, and
  those entries would be lost; it could also vote twice in one term. Refusing keeps every
  elected leader backed by a majority of members that hold what they acknowledged, as
  Raft's proof assumes. (A member that started blank may still vote for a candidate whose
  log is empty too: that is a new group's first election, where no entry exists to lose.)
- The quorum stays a majority of all voters: a rebuilding member is not removed from the
  count (shrinking the count on one member's say-so would let two leaders count different
  majorities). It simply adds nothing: its match index is what it holds, so a leader
  counts it towards no commit it cannot hold, and a candidate gets no vote from it. The
  group therefore elects a leader whenever a majority of the voters are healthy members,
  and that leader can commit with them; the rebuilding member counts again once
  installed, holding every entry up to the snapshot's (committed) last index.
- The snapshot covers committed entries only (up to the leader's commit index), so a
  member never installs as committed an entry a later leader could overwrite; entries at
  or below a member's first index are committed and are never truncated.
- The cost: while one member of three is rebuilding and another is down, no leader can be
  elected until the down one returns. That is Raft's choice of consistency over
  availability for a group that has lost two copies, not a new one.
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from rocketq.common.exceptions import NotLeaderError, ServiceNotAvailableError
from rocketq.replication.raft.membership import (
    MemberHistory,
    Members,
    MembershipError,
    is_config,
)

log = logging.getLogger(__name__)


class CompactedError(LookupError):
    """Entry ``index`` lies below the log's first index: retention deleted its bytes (or
    a snapshot replaced it). A leader sends such a follower a snapshot."""

    def __init__(self, index: int, first_index: int) -> None:
        super().__init__(f"entry {index} is compacted (the log starts at entry {first_index})")
        self.index = index
        self.first_index = first_index


class Role(enum.Enum):
    FOLLOWER = "FOLLOWER"
    PRE_CANDIDATE = "PRE_CANDIDATE"
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"


@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class VoteRequest:
    term: int  # for a pre-vote: the term the candidate would take
    candidate: str
    last_index: int
    last_term: int
    pre: bool = False
    transfer: bool = False  # asked for by the leader handing over


@dataclass(frozen=True, slots=True)
class VoteResponse:
    term: int
    voter: str
    granted: bool
    pre: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class AppendRequest:
    term: int
    leader: str
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit: int


@dataclass(frozen=True, slots=True)
class AppendResponse:
    term: int
    follower: str
    success: bool
    match_index: int  # success: the follower's log matches the leader's up to here
    conflict_index: int = 0  # failure: where the leader should try next
    reason: str = ""


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """A leader handing over: the receiver starts an election at once (no pre-vote)."""

    term: int
    leader: str


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """Bytes ``offset``.. of snapshot ``snapshot_id`` (``size`` bytes in all, covering the
    leader's log up to ``last_index`` of ``last_term``); ``crc`` is the CRC-32 of
    ``payload``, ``chain`` the SHA-256 chain over every chunk up to and including this one
    (see the snapshot module): each chunk and the whole are checked."""

    term: int
    leader: str
    snapshot_id: int
    last_index: int
    last_term: int
    size: int
    offset: int
    payload: bytes
    crc: int
    chain: bytes


@dataclass(frozen=True, slots=True)
class SnapshotAck:
    """A follower's answer to a chunk: it has the snapshot's first ``next_offset`` bytes,
    whose chain is ``chain``, and wants what follows (a resumed or refused chunk says
    where to go on); ``match_index`` > 0 once the snapshot is installed up to there."""

    term: int
    follower: str
    snapshot_id: int
    next_offset: int
    chain: bytes
    match_index: int = 0
    reason: str = ""


Message = (
    VoteRequest
    | VoteResponse
    | AppendRequest
    | AppendResponse
    | TimeoutNow
    | SnapshotChunk
    | SnapshotAck
)


class RaftLog(Protocol):
    """Entries first_index..last_index; index 0 is the empty prefix (term 0). Entries below
    the first index were compacted: ``entries`` raises :class:`CompactedError` for them, and
    ``term_at`` answers for first_index - 1 (the snapshot's last entry) and up."""

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def term_at(self, index: int) -> int: ...

    def entries(self, start: int, max_count: int) -> list[Entry]: ...

    def append(self, entries: list[Entry]) -> None: ...

    def truncate_after(self, index: int) -> None: ...


@dataclass(frozen=True, slots=True)
class SnapshotOffer:
    """A snapshot a leader can send: the log up to ``last_index`` (of ``last_term``),
    ``size`` bytes in chunks of ``chunk_size``."""

    snapshot_id: int
    last_index: int
    last_term: int
    size: int
    chunk_size: int


class SnapshotError(Exception):
    """A chunk that does not check (refused and asked for again), or a snapshot that can
    no longer be read or installed; the message says what was wrong."""


class Snapshots(Protocol):
    """Where snapshots come from (leader) and go (follower)."""

    def offer(self, commit_index: int) -> SnapshotOffer | None:
        """A snapshot up to at most ``commit_index`` (the current one while it can still be
        read); None when there is nothing to send."""
        ...

    def chunk(self, offer: SnapshotOffer, offset: int) -> SnapshotChunk:
        """The chunk at ``offset`` (``term`` and ``leader`` left for the node to set);
        SnapshotError when its bytes are gone."""
        ...

    def chain_at(self, offer: SnapshotOffer, offset: int) -> bytes | None:
        """The chain over the first ``offset`` bytes as sent, None when not known."""
        ...

    def accept(self, chunk: SnapshotChunk) -> tuple[int, bytes, int]:
        """Take a chunk: -> (next offset wanted, chain so far, last index once installed
        else 0). SnapshotError for a chunk that does not check."""
        ...

    def receiving(self) -> bool:
        """A snapshot is partly received (on disk: it survives a restart)."""
        ...

    def abandon(self) -> None:
        """Drop a partly received snapshot (the leader sends entries instead)."""
        ...


# Snapshot chunks a leader has in flight to one follower.
MAX_SNAPSHOT_INFLIGHT = 4


class HardStateStore(Protocol):
    def load(self) -> tuple[int, str | None]: ...

    def save(self, term: int, voted_for: str | None) -> None: ...


class Transport(Protocol):
    def send(self, to: str, msg: Message) -> None: ...


def not_leader(leader: str | None) -> NotLeaderError:
    """The error a node raises for a write or a hand-over it cannot take as a follower (or
    while it hands leadership over); ``leader`` is the leader it knows of, if any."""
    return NotLeaderError(f"not the leader; the leader is {leader or 'unknown'}", leader=leader)


@dataclass(frozen=True, slots=True)
class RaftConfig:
    heartbeat_interval: float = 2.0
    max_heartbeat_leak: int = 3
    min_vote_interval: float = 0.3
    max_vote_interval: float = 1.0
    max_entries_per_append: int = 64
    max_inflight_appends: int = 8
    pre_vote: bool = True
    # Followers beyond what a quorum needs ("spares") get new entries at most this often
    # (s) instead of on every append; 0 sends every append to every follower at once.
    spare_append_interval: float = 0.0


@dataclass(slots=True)
class SnapshotSend:
    """A snapshot on its way to one follower: sent up to ``next_offset``, acknowledged up
    to ``acked``."""

    offer: SnapshotOffer
    started: float
    next_offset: int = 0
    acked: int = 0
    last_ack: float = float("-inf")


@dataclass(slots=True)
class Peer:
    next_index: int = 1
    match_index: int = 0
    inflight: int = 0
    last_ack: float = float("-inf")
    last_sent: float = float("-inf")
    snap: SnapshotSend | None = None


@dataclass
class RaftNode:
    node_id: str
    peers: list[str]  # the other members
    log: RaftLog
    hard_state: HardStateStore
    transport: Transport
    clock: Callable[[], float]
    rng: random.Random = field(default_factory=random.Random)
    config: RaftConfig = field(default_factory=RaftConfig)
    on_commit: Callable[[int], None] | None = None
    on_role: Callable[[Role, int, str | None], None] | None = None
    # The group's configurations by log index (None: ``peers`` and this node, all voters,
    # in memory); the newest one the log holds replaces ``peers`` (membership module).
    history: MemberHistory | None = None
    # Called with every member's address but this node's (the current configuration's,
    # and the previous one's while the newest is not committed) whenever that changes.
    on_members: Callable[[dict[str, str]], None] | None = None
    # Where snapshots come from and go (None: a log that is never compacted).
    snapshots: Snapshots | None = None

    def __post_init__(self) -> None:
        self.term, self.voted_for = self.hard_state.load()
        self.role = Role.FOLLOWER
        self.leader: str | None = None
        # CompactedError entries were committed (retention deletes committed segments only).
        self.commit_index = self.log.first_index() - 1
        # Started with nothing at all (a new or wiped disk): see the module docstring.
        self.blank = (
            self.snapshots is not None
            and self.term == 0
            and self.voted_for is None
            and self.log.last_index() == 0
        )
        self._refused_writes = 0  # appends the store refused (a full disk), for the logs
        self.votes: set[str] = set()
        self.progress: dict[str, Peer] = {}
        self.last_leader_contact = float("-inf")
        self.leader_since = 0.0
        self.transferring_to: str | None = None
        self.transfer_deadline = 0.0
        self.transfer_vote = False
        self.favoured: str | None = None  # a peer kept among the eager ones when it is alive
        self._eager: list[str] = []  # the followers sent every append at once
        self._reset_election_timer(initial=True)
        self.next_heartbeat = 0.0
        if self.history is None:
            self.history = MemberHistory(
                Members.bootstrap(dict.fromkeys([self.node_id, *self.peers], ""))
            )
        self.members_history: MemberHistory = self.history
        self.members_history.truncate_after(self.log.last_index())  # a crash before the append
        self.voters: frozenset[str] = frozenset()
        self.learners: frozenset[str] = frozenset()
        self.config_index = 0  # the raft index of the newest configuration's entry
        self._use_config()

    # -- helpers -----------------------------------------------------------------------

    @property
    def quorum(self) -> int:
        """A majority of the voters (learners and removed members do not count)."""
        return len(self.voters) // 2 + 1

    def _won(self) -> bool:
        return len(self.votes & self.voters) >= self.quorum

    def _save(self) -> None:
        self.hard_state.save(self.term, self.voted_for)

    def _reset_election_timer(self, *, initial: bool = False, retry: bool = False) -> None:
        cfg = self.config
        pause = self.rng.uniform(cfg.min_vote_interval, cfg.max_vote_interval)
        wait = pause if retry else cfg.heartbeat_interval * cfg.max_heartbeat_leak + pause
        self.election_deadline = self.clock() + wait

    def _set_role(self, role: Role, leader: str | None) -> None:
        changed = role is not self.role or leader != self.leader
        self.role, self.leader = role, leader
        if changed and self.on_role is not None:
            self.on_role(role, self.term, leader)

    def _become_follower(self, term: int, leader: str | None) -> None:
        if term > self.term:
            self.term, self.voted_for = term, None
            self._save()
        self.progress = {}
        self.transferring_to = None
        self._set_role(Role.FOLLOWER, leader)

    def _log_is_current(self, last_index: int, last_term: int) -> bool:
        my_last = self.log.last_index()
        my_term = self.log.term_at(my_last)
        return (last_term, last_index) >= (my_term, my_last)

    def _leader_alive(self) -> bool:
        cfg = self.config
        timeout = cfg.heartbeat_interval * cfg.max_heartbeat_leak
        return self.clock() - self.last_leader_contact < timeout

    # -- time --------------------------------------------------------------------------

    def tick(self) -> None:
        now = self.clock()
        if self.role is Role.LEADER:
            if self.transferring_to is not None and now >= self.transfer_deadline:
                log.warning(
                    "%s: %s did not take over in time; staying leader",
                    self.node_id,
                    self.transferring_to,
                )
                self.transferring_to = None
            if now >= self.next_heartbeat:
                self.next_heartbeat = now + self.config.heartbeat_interval
                self._check_quorum(now)
                if self.role is Role.LEADER:
                    self._broadcast(heartbeat=True)
            elif self.config.spare_append_interval:
                self._broadcast(heartbeat=False)  # what spares have not been sent yet
            return
        if self.node_id not in self.voters:
            return  # a learner or a removed member never stands
        if self.installing:
            self._reset_election_timer()  # a member being rebuilt never stands either
            return
        if now >= self.election_deadline:
            if self.config.pre_vote:
                self._start_pre_vote()
            else:
                self._start_election()

    def _check_quorum(self, now: float) -> None:
        cfg = self.config
        window = cfg.heartbeat_interval * cfg.max_heartbeat_leak
        alive = int(self.node_id in self.voters) + sum(
            1 for m, p in self.progress.items() if m in self.voters and now - p.last_ack < window
        )
        if alive < self.quorum and now - self.leader_since >= window:
            log.warning(
                "%s: leader of term %d hears from %d of %d members for %.1f s: stepping down "
                "(LOST_QUORUM)",
                self.node_id,
                self.term,
                alive,
                len(self.voters),
                window,
            )
            self._become_follower(self.term, None)
            self._reset_election_timer()

    def peer_lost(self, peer: str) -> None:
        """The connection from ``peer`` broke (its process likely died). A follower that
        loses its leader this way does not wait for the missed heartbeats: it starts a
        pre-vote after the short random pause, so a killed leader is replaced in about a
        second. The pre-vote keeps this safe: members that still hear the leader refuse it
        (LEADER_ALIVE), so a broken connection alone cannot depose a healthy leader."""
        if self.role is not Role.FOLLOWER or self.leader != peer:
            return
        log.info("%s: lost the connection from leader %s", self.node_id, peer)
        self.last_leader_contact = float("-inf")
        self._reset_election_timer(retry=True)

    # -- elections ---------------------------------------------------------------------

    def _vote_request(self, term: int, pre: bool, transfer: bool = False) -> VoteRequest:
        last = self.log.last_index()
        return VoteRequest(term, self.node_id, last, self.log.term_at(last), pre, transfer)

    def _start_pre_vote(self) -> None:
        self._set_role(Role.PRE_CANDIDATE, None)
        self.votes = {self.node_id}
        self._reset_election_timer(retry=True)
        if self._won():
            self._start_election()
            return
        req = self._vote_request(self.term + 1, pre=True)
        for p in self.peers:
            self.transport.send(p, req)

    def _start_election(self, *, transfer: bool = False) -> None:
        self.transfer_vote = transfer
        self.term += 1
        self.voted_for = self.node_id
        self._save()
        self._set_role(Role.CANDIDATE, None)
        self.votes = {self.node_id}
        self._reset_election_timer(retry=True)
        log.info("%s: candidate for term %d", self.node_id, self.term)
        if self._won():
            self._become_leader()
            return
        req = self._vote_request(self.term, pre=False, transfer=transfer)
        for p in self.peers:
            self.transport.send(p, req)

    def _on_vote_request(self, req: VoteRequest) -> None:
        if req.candidate not in self.voters:
            # A removed member (or one not yet a voter here) must not raise our term.
            self.transport.send(
                req.candidate,
                VoteResponse(self.term, self.node_id, False, req.pre, "NOT_A_MEMBER"),
            )
            return
        if self.rebuilding_for(req.last_index):
            if req.term > self.term and not req.pre:
                self._become_follower(req.term, None)
            log.info(
                "%s: refused %svote to %s for term %d (REBUILDING)",
                self.node_id,
                "pre-" if req.pre else "",
                req.candidate,
                req.term,
            )
            self.transport.send(
                req.candidate,
                VoteResponse(self.term, self.node_id, False, req.pre, "REBUILDING"),
            )
            return
        if req.pre:
            granted, reason = True, ""
            if req.term < self.term:
                granted, reason = False, "STALE_TERM"
            elif self.role is Role.LEADER or (self.leader is not None and self._leader_alive()):
                granted, reason = False, "LEADER_ALIVE"
            elif not self._log_is_current(req.last_index, req.last_term):
                granted, reason = False, "LOG_BEHIND"
            self.transport.send(
                req.candidate, VoteResponse(self.term, self.node_id, granted, True, reason)
            )
            return
        if req.term > self.term:
            self._become_follower(req.term, None)
        granted, reason = False, ""
        if req.term < self.term:
            reason = "STALE_TERM"
        elif self.voted_for not in (None, req.candidate):
            reason = "ALREADY_VOTED"
        elif not self._log_is_current(req.last_index, req.last_term):
            reason = "LOG_BEHIND"
        else:
            granted = True
            self.voted_for = req.candidate
            self._save()  # before the answer leaves
            self._reset_election_timer()
        if not granted:
            log.info(
                "%s: refused vote to %s for term %d (%s)",
                self.node_id,
                req.candidate,
                req.term,
                reason,
            )
        self.transport.send(
            req.candidate, VoteResponse(self.term, self.node_id, granted, False, reason)
        )

    def _on_vote_response(self, resp: VoteResponse) -> None:
        if resp.pre:
            if not resp.granted:
                if resp.term > self.term:  # the group has moved on: catch up
                    self._become_follower(resp.term, None)
                    self._reset_election_timer()
                return
            if self.role is Role.PRE_CANDIDATE:
                self.votes.add(resp.voter)
                if self._won():
                    self._start_election()
            return
        if resp.term > self.term:
            self._become_follower(resp.term, None)
            self._reset_election_timer()
            return
        if self.role is not Role.CANDIDATE or resp.term != self.term or not resp.granted:
            return
        self.votes.add(resp.voter)
        if self._won():
            self._become_leader()

    def _become_leader(self) -> None:
        now = self.clock()
        self.leader_since = now
        last = self.log.last_index()
        self.progress = {p: Peer(next_index=last + 1, last_ack=now) for p in self.peers}
        self._eager = []
        self._set_role(Role.LEADER, self.node_id)
        log.info("%s: leader of term %d", self.node_id, self.term)
        # An empty entry of this term: once it commits, everything before it has too.
        self.log.append([Entry(self.term, b"")])
        self.next_heartbeat = now + self.config.heartbeat_interval
        self._broadcast(heartbeat=True)
        self._advance_commit()

    # -- replication -------------------------------------------------------------------

    def transfer_leadership(self, target: str) -> None:
        """Hand leadership to ``target``: no new entries meanwhile; once ``target`` has
        everything, it is told to stand at once. Abandoned after one election timeout."""
        if self.role is not Role.LEADER:
            raise not_leader(self.leader)
        if target not in self.progress or target not in self.voters:
            raise ValueError(f"{target} is not a voting member of this group")
        cfg = self.config
        self.transferring_to = target
        self.transfer_deadline = self.clock() + cfg.heartbeat_interval * cfg.max_heartbeat_leak
        log.info("%s: handing leadership of term %d to %s", self.node_id, self.term, target)
        self._maybe_hand_over()

    def _maybe_hand_over(self) -> None:
        target = self.transferring_to
        if target is None:
            return
        pr = self.progress[target]
        if pr.match_index >= self.log.last_index():
            self.transport.send(target, TimeoutNow(self.term, self.node_id))
        else:
            self._send_appends(target, heartbeat=True)

    def propose(self, data: bytes) -> int:
        """Append an entry (leader only); -> its index. It is durable once committed."""
        if self.role is not Role.LEADER or self.transferring_to is not None:
            raise not_leader(self.leader if self.transferring_to is None else None)
        self.log.append([Entry(self.term, data)])
        return self.replicate()

    def replicate(self) -> int:
        """Send what the log holds past the followers' positions; -> the last index. For a
        leader whose entries are written to the log by someone else (a broker appends a
        batch to its CommitLog and records it in the raft index at this term)."""
        if self.role is not Role.LEADER:
            raise not_leader(self.leader)
        self._broadcast(heartbeat=False)
        self._advance_commit()
        return self.log.last_index()

    def _broadcast(self, *, heartbeat: bool) -> None:
        if heartbeat or not self.config.spare_append_interval:
            for p in self.peers:
                self._send_appends(p, heartbeat=heartbeat)
            return
        # The quorum's worth of followers most likely to acknowledge first get every
        # append at once; a spare gets what has gathered once per interval. A commit needs
        # only the eager ones; one that leaves appends unanswered for two intervals is
        # replaced by the spare furthest along (the favoured peer comes first when alive).
        now = self.clock()
        interval = self.config.spare_append_interval
        window = self.config.heartbeat_interval * self.config.max_heartbeat_leak
        progress = self.progress

        def stalled(p: str) -> bool:
            pr = progress[p]
            return pr.inflight > 0 and now - pr.last_ack > 2 * interval

        keep = [p for p in self._eager if p in progress and not stalled(p)]
        fav = self.favoured
        if (
            fav in progress
            and fav not in keep
            and not stalled(fav)
            and now - progress[fav].last_ack < window
        ):
            keep.insert(0, fav)
        need = self.quorum - 1
        if len(keep) < need:
            rest = [p for p in self.peers if p not in keep and p in self.voters]
            rest.sort(
                key=lambda p: (not stalled(p), progress[p].match_index, progress[p].last_ack),
                reverse=True,
            )
            keep += rest
        self._eager = eager = keep[:need]
        for p in self.peers:
            if p in eager or now - progress[p].last_sent >= interval:
                self._send_appends(p, heartbeat=False)

    def _send_appends(self, peer: str, *, heartbeat: bool) -> None:
        pr = self.progress[peer]
        if pr.snap is not None or (
            self.snapshots is not None and pr.next_index < self.log.first_index()
        ):
            self._send_snapshot(peer, pr, heartbeat=heartbeat)
            return
        cfg = self.config
        last = self.log.last_index()
        sent = False
        while pr.inflight < cfg.max_inflight_appends and pr.next_index <= last:
            try:
                entries = self.log.entries(pr.next_index, cfg.max_entries_per_append)
            except CompactedError:  # compacted since the check above: a snapshot next time
                break
            if not entries:
                break
            entries = self._with_changes(pr.next_index, entries)
            prev = pr.next_index - 1
            req = AppendRequest(
                self.term,
                self.node_id,
                prev,
                self.log.term_at(prev),
                tuple(entries),
                self.commit_index,
            )
            self.transport.send(peer, req)
            pr.next_index += len(entries)
            pr.inflight += 1
            sent = True
        if sent or heartbeat:
            pr.last_sent = self.clock()
        if heartbeat and not sent:
            prev = pr.next_index - 1
            try:
                prev_term = self.log.term_at(prev)
            except CompactedError:
                self._send_snapshot(peer, pr, heartbeat=True)
                return
            self.transport.send(
                peer,
                AppendRequest(self.term, self.node_id, prev, prev_term, (), self.commit_index),
            )

    # -- snapshots (see the module docstring) ---------------------------------------------

    @property
    def installing(self) -> bool:
        """This member is receiving a snapshot (it cannot take entries meanwhile)."""
        return self.snapshots is not None and self.snapshots.receiving()

    def rebuilding_for(self, candidate_last_index: int) -> bool:
        """Whether this member must refuse its vote to a candidate whose log ends at
        ``candidate_last_index``: while it receives a snapshot, or while it is blank (see
        the module docstring) and the candidate's log is not."""
        if self.installing:
            return True
        return self.blank and self.log.last_index() == 0 and candidate_last_index > 0

    def _send_snapshot(self, peer: str, pr: Peer, *, heartbeat: bool) -> None:
        """Send ``peer`` the next chunks of its snapshot (a new one when it has none), at
        most MAX_SNAPSHOT_INFLIGHT unacknowledged; on a heartbeat with nothing new to send
        (or after a heartbeat without an answer: the chunks were lost) the first chunk
        not acknowledged goes again, so the follower keeps hearing from its leader."""
        snapshots = self.snapshots
        if snapshots is None:
            return
        now = self.clock()
        snap = pr.snap
        if snap is None:
            offer = snapshots.offer(self.commit_index)
            if offer is None:
                return
            snap = pr.snap = SnapshotSend(offer, started=now, last_ack=now)
            log.info(
                "%s: %s needs entry %d, below this log's first entry %d: sending it snapshot "
                "%016x (entries up to %d, %d bytes)",
                self.node_id,
                peer,
                pr.next_index,
                self.log.first_index(),
                offer.snapshot_id,
                offer.last_index,
                offer.size,
            )
        offer = snap.offer
        if heartbeat and now - snap.last_ack > self.config.heartbeat_interval:
            snap.next_offset = snap.acked  # unanswered for a heartbeat: lost, send again
        sent = False
        while snap.next_offset < offer.size and (
            snap.next_offset - snap.acked < MAX_SNAPSHOT_INFLIGHT * offer.chunk_size
        ):
            if not self._send_chunk(peer, pr, snap.next_offset):
                return
            snap.next_offset = min(offer.size, snap.next_offset + offer.chunk_size)
            sent = True
        if heartbeat and not sent:
            again = min(snap.acked, max(0, offer.size - 1))
            self._send_chunk(peer, pr, again - again % offer.chunk_size)
        pr.last_sent = now

    def _send_chunk(self, peer: str, pr: Peer, offset: int) -> bool:
        snap = pr.snap
        if snap is None or self.snapshots is None:
            return False
        try:
            chunk = self.snapshots.chunk(snap.offer, offset)
        except SnapshotError as exc:
            log.warning(
                "%s: snapshot %016x for %s can no longer be read (%s); starting another",
                self.node_id,
                snap.offer.snapshot_id,
                peer,
                exc,
            )
            pr.snap = None
            return False
        self.transport.send(peer, replace(chunk, term=self.term, leader=self.node_id))
        return True

    def _on_snapshot_chunk(self, msg: SnapshotChunk) -> None:
        if msg.term < self.term:
            self.transport.send(
                msg.leader,
                SnapshotAck(self.term, self.node_id, msg.snapshot_id, 0, b"", 0, "STALE_TERM"),
            )
            return
        if msg.term > self.term or self.role is not Role.FOLLOWER or self.leader != msg.leader:
            self._become_follower(msg.term, msg.leader)
        self.last_leader_contact = self.clock()
        self._reset_election_timer()
        snapshots = self.snapshots
        if snapshots is None:
            self.transport.send(
                msg.leader,
                SnapshotAck(self.term, self.node_id, msg.snapshot_id, 0, b"", 0, "UNSUPPORTED"),
            )
            return
        reason = ""
        try:
            next_offset, chain, installed = snapshots.accept(msg)
        except SnapshotError as exc:
            log.warning(
                "%s: refused chunk at %d of snapshot %016x from %s: %s",
                self.node_id,
                msg.offset,
                msg.snapshot_id,
                msg.leader,
                exc,
            )
            next_offset, chain, installed = msg.offset, b"", 0
            reason = "BAD_CHUNK"
        if installed:
            self.blank = False
            self._use_config()  # the group's configurations came with the snapshot
            self.commit_index = max(self.commit_index, installed - 1)
            self._commit_to(installed)
        self.transport.send(
            msg.leader,
            SnapshotAck(
                self.term, self.node_id, msg.snapshot_id, next_offset, chain, installed, reason
            ),
        )

    def _on_snapshot_ack(self, ack: SnapshotAck) -> None:
        if ack.term > self.term:
            self._become_follower(ack.term, None)
            self._reset_election_timer()
            return
        if self.role is not Role.LEADER or ack.term != self.term:
            return
        pr = self.progress.get(ack.follower)
        if pr is None:
            return
        now = self.clock()
        pr.last_ack = now
        snap = pr.snap
        if ack.match_index:
            if ack.match_index > pr.match_index:
                pr.match_index = ack.match_index
            pr.next_index = max(pr.next_index, pr.match_index + 1)
            pr.inflight = 0
            if snap is not None:
                log.info(
                    "%s: %s installed snapshot %016x (entries up to %d, %d bytes) in %.1f s",
                    self.node_id,
                    ack.follower,
                    snap.offer.snapshot_id,
                    ack.match_index,
                    snap.offer.size,
                    now - snap.started,
                )
            pr.snap = None
            self._advance_commit()
            if self.role is Role.LEADER:
                self._send_appends(ack.follower, heartbeat=False)
            return
        if snap is None or self.snapshots is None:
            return
        snap.last_ack = now
        offer = snap.offer
        if ack.snapshot_id != offer.snapshot_id:
            snap.acked = snap.next_offset = 0  # it holds another one: from the start
        elif ack.reason == "BAD_CHUNK" or ack.next_offset < snap.acked:
            snap.acked = snap.next_offset = min(ack.next_offset, offer.size)
        elif ack.next_offset > snap.next_offset:
            # It holds more than this leader knows it was sent (it restarted, or acks were
            # lost): go on from there if its chain is the one sent, else start anew.
            if self.snapshots.chain_at(offer, ack.next_offset) == ack.chain:
                snap.acked = snap.next_offset = ack.next_offset
            else:
                log.warning(
                    "%s: %s holds %d bytes of snapshot %016x that do not check; starting another",
                    self.node_id,
                    ack.follower,
                    ack.next_offset,
                    offer.snapshot_id,
                )
                pr.snap = None
        else:
            snap.acked = max(snap.acked, ack.next_offset)
        self._send_appends(ack.follower, heartbeat=False)

    def _on_append_request(self, req: AppendRequest) -> None:
        if req.term < self.term:
            self.transport.send(
                req.leader,
                AppendResponse(self.term, self.node_id, False, 0, 0, "STALE_TERM"),
            )
            return
        if req.term > self.term or self.role is not Role.FOLLOWER or self.leader != req.leader:
            self._become_follower(req.term, req.leader)
        self.last_leader_contact = self.clock()
        self._reset_election_timer()
        last = self.log.last_index()
        base = self.log.first_index() - 1
        if req.prev_index < base:
            # Entries up to our base are committed (a snapshot or compaction): they match
            # the leader's. Keep only what follows it.
            skip = base - req.prev_index
            if skip >= len(req.entries):
                match = req.prev_index + len(req.entries)
                self.transport.send(
                    req.leader, AppendResponse(self.term, self.node_id, True, match)
                )
                return
            req = replace(
                req,
                prev_index=base,
                prev_term=req.entries[skip - 1].term,
                entries=req.entries[skip:],
            )
        if req.prev_index > last:
            self.transport.send(
                req.leader,
                AppendResponse(self.term, self.node_id, False, 0, last + 1, "GAP"),
            )
            return
        if self.log.term_at(req.prev_index) != req.prev_term:
            # Back up to the start of the conflicting term.
            bad_term = self.log.term_at(req.prev_index)
            first = req.prev_index
            while first > self.commit_index + 1 and self.log.term_at(first - 1) == bad_term:
                first -= 1
            self.transport.send(
                req.leader,
                AppendResponse(self.term, self.node_id, False, 0, first, "TERM_MISMATCH"),
            )
            return
        index = req.prev_index
        new: list[Entry] = []
        for i, e in enumerate(req.entries):
            index = req.prev_index + 1 + i
            if new or index > self.log.last_index():
                new.append(e)
            elif self.log.term_at(index) != e.term:
                if index <= self.commit_index:  # cannot happen in a correct cluster
                    log.error("%s: leader rewrites committed entry %d", self.node_id, index)
                    return
                self.log.truncate_after(index - 1)
                if self.members_history.truncate_after(index - 1):
                    self._use_config()
                new.append(e)
        if new:
            try:
                self._append_entries(new)
            except ServiceNotAvailableError as exc:
                # The store refuses writes (a full disk): acknowledge nothing, stay a
                # member; the leader sends again at its next heartbeat.
                self._refused_writes += 1
                if self._refused_writes == 1 or self._refused_writes % 100 == 0:
                    log.error(
                        "%s: cannot append the leader's entries (%s); not acknowledging "
                        "(%d refused)",
                        self.node_id,
                        exc,
                        self._refused_writes,
                    )
                return
            self._refused_writes = 0
            self.blank = False
        if self.snapshots is not None and self.snapshots.receiving():
            # Our log matches the leader's here: it sends entries, not the snapshot.
            self.snapshots.abandon()
        match = req.prev_index + len(req.entries)
        if req.commit > self.commit_index:
            self._commit_to(min(req.commit, match))
        self.transport.send(req.leader, AppendResponse(self.term, self.node_id, True, match))

    def _on_append_response(self, resp: AppendResponse) -> None:
        if resp.term > self.term:
            self._become_follower(resp.term, None)
            self._reset_election_timer()
            return
        if self.role is not Role.LEADER or resp.term != self.term:
            return
        pr = self.progress.get(resp.follower)
        if pr is None:
            return
        pr.inflight = max(0, pr.inflight - 1)
        pr.last_ack = self.clock()
        if resp.success:
            if resp.match_index > pr.match_index:
                pr.match_index = resp.match_index
            pr.next_index = max(pr.next_index, pr.match_index + 1)
            self._advance_commit()
            if self.role is not Role.LEADER:
                return  # the commit removed this leader from the group
            self._maybe_promote()
            if resp.follower == self.transferring_to:
                self._maybe_hand_over()
            if self.config.spare_append_interval:
                self._broadcast(heartbeat=False)  # this answer may change who is eager
                return
        else:
            # Start again from where the follower says; whatever was in flight is void.
            conflict = resp.conflict_index or 1
            if resp.reason == "GAP" and conflict <= pr.match_index:
                # It lost entries it had acknowledged (a member whose disk was wiped):
                # copy them again. Commits made with its old acknowledgement stand.
                log.warning(
                    "%s: %s lost its log after entry %d (had acknowledged %d); sending it "
                    "again from there",
                    self.node_id,
                    resp.follower,
                    conflict - 1,
                    pr.match_index,
                )
                pr.match_index = conflict - 1
            pr.next_index = max(1, min(pr.next_index, conflict))
            pr.next_index = max(pr.next_index, pr.match_index + 1)
            pr.inflight = 0
        self._send_appends(resp.follower, heartbeat=False)

    def _advance_commit(self) -> None:
        voters = self.voters
        matches = [p.match_index for m, p in self.progress.items() if m in voters]
        if self.node_id in voters:
            matches.append(self.log.last_index())
        if len(matches) < self.quorum:
            return
        matches.sort(reverse=True)
        n = matches[self.quorum - 1]
        if n > self.commit_index and self.log.term_at(n) == self.term:
            self._commit_to(n)

    def _commit_to(self, index: int) -> None:
        if index <= self.commit_index:
            return
        changing = self.config_index > self.commit_index
        self.commit_index = index
        if self.on_commit is not None:
            self.on_commit(index)
        if changing and index >= self.config_index:
            self._config_committed()

    # -- membership (see the membership module) ---------------------------------------

    def _use_config(self) -> None:
        """Take the newest configuration of the history as this node's: who votes, who is
        sent the log (a leader starts or stops following members), and which addresses
        the transport keeps links to."""
        index, members = self.members_history.latest()
        self.config_index = index
        self.voters, self.learners = members.voter_ids, members.learner_ids
        self.peers = sorted((self.voters | self.learners) - {self.node_id})
        if self.role is Role.LEADER:
            now, last = self.clock(), self.log.last_index()
            for p in self.peers:
                if p not in self.progress:
                    self.progress[p] = Peer(next_index=last + 1, last_ack=now)
            for p in [p for p in self.progress if p not in self.peers]:
                del self.progress[p]
            self._eager = [p for p in self._eager if p in self.progress]
            if self.transferring_to is not None and self.transferring_to not in self.voters:
                self.transferring_to = None
        self._announce_members()

    def reload_members(self) -> None:
        """The log was cut outside the node (a restart's reconcile of the raft index with
        the CommitLog): the changes past its end go, and the newest left is used."""
        if self.members_history.truncate_after(self.log.last_index()):
            self._use_config()

    def member_addresses(self) -> dict[str, str]:
        """The addresses the transport needs: every member of the newest configuration,
        and of the one before while the newest is not committed (a leader that removed
        itself still leads until then), this node's own left out."""
        _, members = self.members_history.latest()
        addresses = members.addresses
        if self.config_index > self.commit_index:
            addresses = {**self.members_history.previous().addresses, **addresses}
        addresses.pop(self.node_id, None)
        return addresses

    def _announce_members(self) -> None:
        if self.on_members is not None:
            self.on_members(self.member_addresses())

    def _with_changes(self, start: int, entries: list[Entry]) -> list[Entry]:
        """``entries`` from ``start`` with the data of the change entries among them,
        which the member history holds (a log over the CommitLog reads them empty)."""
        changes = self.members_history.between(start, start + len(entries) - 1)
        if not changes:
            return entries
        out = list(entries)
        for index, data in changes.items():
            out[index - start] = Entry(out[index - start].term, data)
        return out

    def _append_entries(self, entries: list[Entry]) -> None:
        """A follower appends the leader's entries; the change entries among them are
        recorded (durably) first and take effect at once."""
        first = self.log.last_index() + 1
        changes = [
            (first + i, e.term, Members.decode(e.data))
            for i, e in enumerate(entries)
            if is_config(e.data)
        ]
        for index, term, members in changes:
            self.members_history.record(index, term, members)
        try:
            self.log.append(entries)
        except BaseException:  # (a full disk): the history holds no change the log lacks
            if changes:
                self.members_history.truncate_after(self.log.last_index())
            raise
        if changes:
            self._use_config()
            log.info(
                "%s: group members now %s (entry %d)",
                self.node_id,
                self.members_history.latest()[1].to_doc(),
                self.config_index,
            )

    def _propose_config(self, members: Members, why: str) -> int:
        index = self.log.last_index() + 1
        self.members_history.record(index, self.term, members)
        try:
            self.log.append([Entry(self.term, members.encode())])
        except BaseException:
            self.members_history.truncate_after(self.log.last_index())
            raise
        log.info(
            "%s: %s; group members now %s (entry %d)", self.node_id, why, members.to_doc(), index
        )
        self._use_config()
        return self.replicate()

    def _check_change(self) -> Members:
        """The configuration a change starts from; raises when this node cannot make one."""
        if self.role is not Role.LEADER or self.transferring_to is not None:
            raise not_leader(self.leader if self.transferring_to is None else None)
        if self.config_index > self.commit_index:
            raise MembershipError(
                f"a membership change is in progress: entry {self.config_index} is not "
                f"committed yet (commit index {self.commit_index}); try again shortly"
            )
        return self.members_history.latest()[1]

    def add_member(self, member: str, address: str) -> int:
        """Leader only: add ``member`` at ``address`` as a learner; it becomes a voter once
        its log matches up to this change's entry. -> the entry's index."""
        current = self._check_change()
        if self.learners:
            waiting = sorted(self.learners)[0]
            pr = self.progress.get(waiting)
            raise MembershipError(
                f"a membership change is in progress: {waiting} is still catching up "
                f"(it has entry {pr.match_index if pr else 0} of {self.config_index}); wait "
                f"for it or remove it"
            )
        if self.members_history.ever_member(member) and member not in current.addresses:
            raise MembershipError(
                f"{member} was a member of this group before; give the new member a new id"
            )
        return self._propose_config(current.with_learner(member, address), f"adding {member}")

    def remove_member(self, member: str) -> int:
        """Leader only: remove ``member`` (a leader removing itself steps down once the
        change is committed). -> the entry's index."""
        current = self._check_change()
        return self._propose_config(current.without(member), f"removing {member}")

    def _maybe_promote(self) -> None:
        """A learner whose log matches up to the entry that added it becomes a voter."""
        if self.role is not Role.LEADER or not self.learners or self.transferring_to:
            return
        if self.config_index > self.commit_index:
            return  # one change at a time
        for p in sorted(self.learners):
            pr = self.progress.get(p)
            if pr is not None and pr.match_index >= self.config_index:
                members = self.members_history.latest()[1].promoted(p)
                self._propose_config(members, f"{p} caught up (entry {pr.match_index})")
                return

    def _config_committed(self) -> None:
        self._announce_members()  # the previous configuration's members are no longer needed
        if self.role is not Role.LEADER:
            return
        if self.node_id not in self.voters:
            # Removed ourselves: the most up-to-date voter stands at once; we step down.
            best = max(
                (p for p in self.progress if p in self.voters),
                key=lambda p: self.progress[p].match_index,
                default=None,
            )
            log.info(
                "%s: removed from the group (entry %d committed); stepping down%s",
                self.node_id,
                self.config_index,
                f", {best} to stand now" if best else "",
            )
            if best is not None:
                self.transport.send(best, TimeoutNow(self.term, self.node_id))
            self._become_follower(self.term, None)
            return
        self._maybe_promote()

    # -- input -------------------------------------------------------------------------

    def receive(self, msg: Message) -> None:
        if isinstance(msg, TimeoutNow):
            if msg.term == self.term and self.role is Role.FOLLOWER:
                log.info("%s: %s hands leadership over: standing now", self.node_id, msg.leader)
                self._start_election(transfer=True)
            return
        if isinstance(msg, AppendRequest):
            self._on_append_request(msg)
        elif isinstance(msg, AppendResponse):
            self._on_append_response(msg)
        elif isinstance(msg, SnapshotChunk):
            self._on_snapshot_chunk(msg)
        elif isinstance(msg, SnapshotAck):
            self._on_snapshot_ack(msg)
        elif isinstance(msg, VoteRequest):
            self._on_vote_request(msg)
        else:
            self._on_vote_response(msg)
