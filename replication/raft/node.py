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
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from rocketq.common.exceptions import NotLeaderError

log = logging.getLogger(__name__)


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


Message = VoteRequest | VoteResponse | AppendRequest | AppendResponse | TimeoutNow


class RaftLog(Protocol):
    """Entries 1..last_index; index 0 is the empty prefix (term 0)."""

    def last_index(self) -> int: ...

    def term_at(self, index: int) -> int: ...

    def entries(self, start: int, max_count: int) -> list[Entry]: ...

    def append(self, entries: list[Entry]) -> None: ...

    def truncate_after(self, index: int) -> None: ...


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
class Peer:
    next_index: int = 1
    match_index: int = 0
    inflight: int = 0
    last_ack: float = float("-inf")
    last_sent: float = float("-inf")


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

    def __post_init__(self) -> None:
        self.term, self.voted_for = self.hard_state.load()
        self.role = Role.FOLLOWER
        self.leader: str | None = None
        self.commit_index = 0
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

    # -- helpers -----------------------------------------------------------------------

    @property
    def quorum(self) -> int:
        return (len(self.peers) + 1) // 2 + 1

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
        if now >= self.election_deadline:
            if self.config.pre_vote:
                self._start_pre_vote()
            else:
                self._start_election()

    def _check_quorum(self, now: float) -> None:
        cfg = self.config
        window = cfg.heartbeat_interval * cfg.max_heartbeat_leak
        alive = 1 + sum(1 for p in self.progress.values() if now - p.last_ack < window)
        if alive < self.quorum and now - self.leader_since >= window:
            log.warning(
                "%s: leader of term %d hears from %d of %d members for %.1f s: stepping down "
                "(LOST_QUORUM)",
                self.node_id,
                self.term,
                alive,
                len(self.peers) + 1,
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
        if len(self.votes) >= self.quorum:
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
        if len(self.votes) >= self.quorum:
            self._become_leader()
            return
        req = self._vote_request(self.term, pre=False, transfer=transfer)
        for p in self.peers:
            self.transport.send(p, req)

    def _on_vote_request(self, req: VoteRequest) -> None:
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
                if len(self.votes) >= self.quorum:
                    self._start_election()
            return
        if resp.term > self.term:
            self._become_follower(resp.term, None)
            self._reset_election_timer()
            return
        if self.role is not Role.CANDIDATE or resp.term != self.term or not resp.granted:
            return
        self.votes.add(resp.voter)
        if len(self.votes) >= self.quorum:
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
        if target not in self.progress:
            raise ValueError(f"{target} is not a member of this group")
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
            rest = [p for p in self.peers if p not in keep]
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
        cfg = self.config
        last = self.log.last_index()
        sent = False
        while pr.inflight < cfg.max_inflight_appends and pr.next_index <= last:
            entries = self.log.entries(pr.next_index, cfg.max_entries_per_append)
            if not entries:
                break
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
            self.transport.send(
                peer,
                AppendRequest(
                    self.term, self.node_id, prev, self.log.term_at(prev), (), self.commit_index
                ),
            )

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
                new.append(e)
        if new:
            self.log.append(new)
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
        matches = sorted(
            [self.log.last_index(), *(p.match_index for p in self.progress.values())],
            reverse=True,
        )
        n = matches[self.quorum - 1]
        if n > self.commit_index and self.log.term_at(n) == self.term:
            self._commit_to(n)

    def _commit_to(self, index: int) -> None:
        if index <= self.commit_index:
            return
        self.commit_index = index
        if self.on_commit is not None:
            self.on_commit(index)

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
        elif isinstance(msg, VoteRequest):
            self._on_vote_request(msg)
        else:
            self._on_vote_response(msg)
