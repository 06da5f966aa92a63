"""The pieces of the v2 endpoint's gate that need no server: what each RPC requires (and
the resources inside a Telemetry declaration), the signature window's reading of
``x-mq-date-time``, and the binding of client ids to users and connections."""

from __future__ import annotations

import calendar
import time

from hypothesis import given
from hypothesis import strategies as st

from rocketq.auth.model import Action, Gate, Resource
from rocketq.auth.request_map import SUPER, USER, create_requirement, v2_requirement
from rocketq.broker.client_bindings import MAX_CLIENT_ID_CHARS, ClientBindings
from rocketq.broker.grpc_v2.base import signed_time


def test_the_rpcs_acting_on_resources_need_them() -> None:
    assert v2_requirement("Heartbeat", "", "cg").needs == ((Resource.group("cg"), Action.SUB),)
    assert v2_requirement("Heartbeat", "", "") is USER  # a producer's: no group
    publishing = v2_requirement("Telemetry.publishing", "", "", ["a", "b", "a"])
    assert publishing.gate is Gate.POLICY
    assert publishing.needs == (
        (Resource.topic("a"), Action.PUB),
        (Resource.topic("b"), Action.PUB),
    )
    subscription = v2_requirement("Telemetry.subscription", "", "cg", ["t"])
    assert subscription.needs == (
        (Resource.group("cg"), Action.SUB),
        (Resource.topic("t"), Action.SUB),
    )
    # A retry topic is its group's.
    retry = v2_requirement("Telemetry.subscription", "", "cg", ["%RETRY%other"])
    assert (Resource.group("other"), Action.SUB) in retry.needs
    # A declaration naming a blank topic or group is a super user's.
    assert v2_requirement("Telemetry.publishing", "", "", [""]) is SUPER
    assert v2_requirement("Telemetry.subscription", "", "", ["t"]) is SUPER
    for rpc in ("ForwardMessageToDeadLetterQueue", "AckMessage", "ChangeInvisibleDuration"):
        assert v2_requirement(rpc, "t", "cg").needs == (
            (Resource.topic("t"), Action.SUB),
            (Resource.group("cg"), Action.SUB),
        )
    assert v2_requirement("NotifyClientTermination", "", "") is USER
    assert v2_requirement("QueryRoute", "t", "").needs == ((Resource.topic("t"), Action.ANY),)
    assert create_requirement("t").needs == ((Resource.topic("t"), Action.CREATE),)
    assert create_requirement(" ") is SUPER


@given(st.text(max_size=40))
def test_any_date_time_text_reads_as_a_time_or_none(text: str) -> None:
    found = signed_time(text)
    assert found is None or isinstance(found, float)


@given(st.integers(min_value=0, max_value=253402300799))
def test_a_written_time_reads_back(seconds: int) -> None:
    text = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(seconds))
    assert signed_time(text) == seconds


def test_what_is_not_a_utc_basic_time() -> None:
    for text in ("", "now", "2001-01-01T00:00:00Z", "20010101T000000", "20011301T000000Z"):
        assert signed_time(text) is None, text
    assert signed_time("20010101T000000Z") == calendar.timegm((2001, 1, 1, 0, 0, 0, 0, 1, 0))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_client_id_is_its_first_users_on_its_connection() -> None:
    clock = Clock()
    bindings = ClientBindings(ttl=120, clock=clock)
    assert bindings.claim("c1", "bob", "ipv4:127.0.0.1:1") is None
    assert bindings.claim("c1", "alice", "ipv4:127.0.0.1:2") is not None
    assert bindings.owns("c1", "bob", "ipv4:127.0.0.1:1")
    assert not bindings.owns("c1", "bob", "ipv4:127.0.0.1:9")  # another connection
    assert not bindings.owns("c1", "alice", "ipv4:127.0.0.1:1")
    # Bob reconnects: the binding moves with him.
    assert bindings.claim("c1", "bob", "ipv4:127.0.0.1:9") is None
    assert bindings.owns("c1", "bob", "ipv4:127.0.0.1:9")
    assert not bindings.owns("c1", "bob", "ipv4:127.0.0.1:1")
    assert bindings.user_of("c1") == "bob"
    # Silent past the time to live: forgotten, anyone's again.
    clock.now = 121
    assert bindings.user_of("c1") is None
    assert bindings.claim("c1", "alice", "ipv4:127.0.0.1:2") is None
    assert bindings.claim("x" * (MAX_CLIENT_ID_CHARS + 1), "bob", "p") is not None


def test_bindings_are_bounded() -> None:
    clock = Clock()
    bindings = ClientBindings(ttl=10, capacity=3, clock=clock)
    for i in range(3):
        assert bindings.claim(f"c{i}", "u", "p") is None
    assert bindings.claim("c3", "u", "p") is not None  # full: refused, nothing grows
    assert len(bindings) == 3
    assert bindings.claim("c0", "u", "p") is None  # a renewal is not a new binding
    clock.now = 11  # all stale: they make room
    assert bindings.claim("c3", "u", "p") is None
    assert len(bindings) == 1


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("uv"), st.sampled_from("pq"))))
def test_a_binding_never_changes_user_while_it_lives(claims: list[tuple[str, str, str]]) -> None:
    bindings = ClientBindings(ttl=1e9, clock=lambda: 0.0)
    first: dict[str, str] = {}
    for cid, user, peer in claims:
        why = bindings.claim(cid, user, peer)
        first.setdefault(cid, user)
        assert (why is None) == (first[cid] == user)
        assert bindings.user_of(cid) == first[cid]
