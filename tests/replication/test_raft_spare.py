"""Spare followers: with ``spare_append_interval`` set, a leader of three sends each new
entry at once to one follower (what a quorum needs) and to the other in a batch once per
interval; an eager follower that stops answering is replaced by the spare, and a favoured
peer (the preferred leader) is kept eager."""

from __future__ import annotations

from rocketq.replication.raft.node import (
    AppendRequest,
    AppendResponse,
    Message,
    RaftConfig,
    RaftNode,
    Role,
    VoteResponse,
)
from tests.replication.raft_sim import MemoryHardState, MemoryLog

INTERVAL = 0.005


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Message]] = []

    def send(self, to: str, msg: Message) -> None:
        self.sent.append((to, msg))

    def appends(self) -> dict[str, list[AppendRequest]]:
        out: dict[str, list[AppendRequest]] = {}
        for to, msg in self.sent:
            if isinstance(msg, AppendRequest) and msg.entries:
                out.setdefault(to, []).append(msg)
        self.sent.clear()
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def leader_of_three(favoured: str | None = None) -> tuple[RaftNode, Recorder, Clock]:
    net, clock = Recorder(), Clock()
    node = RaftNode(
        "n0",
        ["n1", "n2"],
        MemoryLog(),
        MemoryHardState(),
        net,
        clock=clock,
        config=RaftConfig(pre_vote=False, spare_append_interval=INTERVAL),
    )
    node.favoured = favoured
    clock.now += 10  # past the election timeout
    node.tick()
    node.receive(VoteResponse(node.term, "n1", True))
    assert node.role is Role.LEADER
    for peer in ("n1", "n2"):  # both take the leader's empty entry
        node.receive(AppendResponse(node.term, peer, True, node.log.last_index()))
    net.sent.clear()
    return node, net, clock


def ack(node: RaftNode, peer: str) -> None:
    node.receive(AppendResponse(node.term, peer, True, node.log.last_index()))


def test_one_follower_gets_each_entry_at_once_the_spare_a_batch_per_interval() -> None:
    node, net, clock = leader_of_three()
    node.propose(b"a")
    (eager,) = net.appends()  # the spare was sent the empty entry just now: it waits
    spare = "n2" if eager == "n1" else "n1"
    ack(node, eager)
    for body in (b"b", b"c", b"d"):
        clock.now += INTERVAL / 5
        node.propose(body)
        ack(node, eager)
    sent = net.appends()
    assert [len(a.entries) for a in sent[eager]] == [1, 1, 1]
    assert spare not in sent  # within the interval: nothing yet
    assert node.commit_index == node.log.last_index()  # the eager follower is a quorum
    clock.now += INTERVAL
    node.tick()
    sent = net.appends()
    assert [len(a.entries) for a in sent[spare]] == [4]  # a to d in one append


def test_a_stalled_eager_follower_is_replaced_by_the_spare() -> None:
    node, net, clock = leader_of_three()
    node.propose(b"a")
    (eager,) = net.appends()  # which never answers from here on
    spare = "n2" if eager == "n1" else "n1"
    clock.now += 1.5 * INTERVAL
    node.tick()
    assert list(net.appends()) == [spare]  # its batch: "a"
    ack(node, spare)
    assert node.commit_index == node.log.last_index()  # committed by the spare, late
    clock.now += 2 * INTERVAL
    node.propose(b"b")
    assert spare in net.appends()  # it is eager now: sent at once
    ack(node, spare)
    assert node.commit_index == node.log.last_index()


def test_the_favoured_peer_stays_eager() -> None:
    for favoured in ("n1", "n2"):
        node, net, clock = leader_of_three(favoured)
        for body in (b"a", b"b", b"c"):
            clock.now += INTERVAL / 10
            node.propose(body)
            ack(node, favoured)
            ack(node, "n2" if favoured == "n1" else "n1")
        sent = net.appends()
        assert [len(a.entries) for a in sent[favoured]] == [1, 1, 1]


def test_without_an_interval_every_follower_gets_every_entry() -> None:
    net, clock = Recorder(), Clock()
    node = RaftNode(
        "n0", ["n1", "n2"], MemoryLog(), MemoryHardState(), net, clock=clock,
        config=RaftConfig(pre_vote=False),
    )  # fmt: skip
    clock.now += 10
    node.tick()
    node.receive(VoteResponse(node.term, "n1", True))
    net.sent.clear()
    node.propose(b"a")
    node.propose(b"b")
    assert {peer: len(a) for peer, a in net.appends().items()} == {"n1": 2, "n2": 2}
