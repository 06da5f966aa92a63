"""rocketq's strong remoting signature: what it covers (keys and values with their
boundaries, the code, the body), its replay window (timestamp and nonce), the server's
check of it and of RocketMQ's legacy signature with ``require_strong_signature``, and
AUTH_SESSION's announcement of it."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.auth.access import AccessControl
from rocketq.auth.credentials import Credentials
from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.model import Gate, Requirement, User, UserType
from rocketq.auth.replay import ReplayWindow
from rocketq.auth.request_map import broker_requirement
from rocketq.auth.server_security import MemoryAuthMetadata, ServerSecurity
from rocketq.auth.signature import compute_signature
from rocketq.auth.strong_signature import (
    DOMAIN,
    NONCE,
    SIGNATURE_METHOD,
    SIGNATURE_V2,
    TIMESTAMP,
    StrongFields,
    compute_strong_signature,
    parse_strong_fields,
    strong_signature_content,
)
from rocketq.remoting.codes import RequestCode, ResponseCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.tls import ClientSecurity
from rocketq.remoting.transport import Connection, RemotingServer, connect, request_blocking
from tests.integration.waiting import wait_until

NOW = 1_800_000_000.0  # the server's wall clock in these tests
NOW_MS = int(NOW * 1000)
ROOT = Credentials("root", "root-secret")
ALICE = Credentials("alice", "alice-secret")
INNER = Credentials("inner-node", "inner-secret")
SERVER_A = "server-a-audience"  # the audience the tests' server announces


@pytest.fixture
def meta(tmp_path: Path) -> AuthMetadata:
    m = AuthMetadata(tmp_path)
    m.load()
    m.create_user(User("root", "root-secret", UserType.SUPER))
    m.create_user(User("alice", "alice-secret"))
    return m


class Clock:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def control(meta: AuthMetadata, clock: Clock | None = None, **kw: Any) -> AccessControl:
    return AccessControl(
        authentication=True,
        authorization=True,
        metadata=meta,
        requirement=lambda cmd: broker_requirement(cmd, cluster="DefaultCluster"),
        inner=INNER,
        wall_clock=clock or Clock(),
        **{"audience": SERVER_A, **kw},
    )


def delete_topic(topic_ext: dict[str, str]) -> RemotingCommand:
    return RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, dict(topic_ext))


def signed(
    cmd: RemotingCommand, creds: Credentials = ROOT, audience: str = SERVER_A, **kw: Any
) -> RemotingCommand:
    kw.setdefault("now_ms", NOW_MS)
    creds.sign_strong(cmd, audience, **kw)
    return cmd


def copy(cmd: RemotingCommand, code: int | None = None) -> RemotingCommand:
    """The same request as a capture re-sent (a new object, the same fields)."""
    return RemotingCommand(
        cmd.code if code is None else code, dict(cmd.ext or {}), cmd.body, version=cmd.version
    )


# -- what the signature covers --------------------------------------------------------------


def test_the_recut_of_a_captured_delete_is_refused(meta: AuthMetadata) -> None:
    captured = signed(delete_topic({"topic": "zzvictim"}))
    recut = copy(captured)
    assert recut.ext is not None
    del recut.ext["topic"]
    recut.ext |= {"ZZ": "zz", "topic": "victim"}
    # Under RocketMQ's scheme both sign the same bytes (values only, no boundaries) ...
    legacy = {k: v for k, v in (captured.ext or {}).items()}
    assert compute_signature("root-secret", legacy, None) == compute_signature(
        "root-secret", recut.ext, None
    )
    # ... under the strong one they do not, and the server refuses the re-cut.
    answer = control(meta).check(recut, "10.0.0.1")
    assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
    assert "strong signature of access key 'root' does not match" in (answer.remark or "")


def test_a_signature_covers_the_code_the_version_and_the_body(meta: AuthMetadata) -> None:
    access = control(meta)
    original = signed(RemotingCommand(RequestCode.SEND_MESSAGE_V2, {"a": "orders"}, b"body"))
    other_code = copy(original, RequestCode.DELETE_TOPIC_IN_BROKER)
    other_body = copy(original)
    other_body.body = b"bodx"
    other_version = copy(original)
    other_version.version += 1
    key_renamed = copy(original)
    assert key_renamed.ext is not None
    key_renamed.ext["topic"] = key_renamed.ext.pop("a")
    for forged in (other_code, other_body, other_version, key_renamed):
        answer = access.check(forged, "10.0.0.1")
        assert answer is not None and "does not match" in (answer.remark or ""), forged
    assert access.check(original, "10.0.0.1") is None


def test_the_content_is_length_prefixed_fields_in_key_order() -> None:
    content = strong_signature_content(7, 3, {"b": "2", "a": "xy", SIGNATURE_V2: "skip"}, b"hi")
    assert content == (
        DOMAIN
        + struct.pack(">iiI", 7, 3, 2)
        + struct.pack(">I", 1)
        + b"a"
        + struct.pack(">I", 2)
        + b"xy"
        + struct.pack(">I", 1)
        + b"b"
        + struct.pack(">I", 1)
        + b"2"
        + struct.pack(">Q", 2)
        + b"hi"
    )
    assert strong_signature_content(7, 3, {}, None) == strong_signature_content(7, 3, {}, b"")


def _decode(content: bytes) -> tuple[int, int, list[tuple[str, str]], bytes]:
    """The one (code, version, fields, body) a content encodes: a left inverse of the
    encoding, so no two requests share a content."""
    assert content.startswith(DOMAIN)
    pos = len(DOMAIN)
    code, version, count = struct.unpack_from(">iiI", content, pos)
    pos += 12
    fields = []
    for _ in range(count):
        parts = []
        for _ in range(2):
            (size,) = struct.unpack_from(">I", content, pos)
            pos += 4
            parts.append(content[pos : pos + size].decode("utf-8", "surrogatepass"))
            pos += size
        fields.append((parts[0], parts[1]))
    (size,) = struct.unpack_from(">Q", content, pos)
    pos += 8
    body = content[pos:]
    assert len(body) == size
    return code, version, fields, body


int32s = st.integers(-(2**31), 2**31 - 1)
ext_maps = st.dictionaries(st.text(max_size=10), st.text(max_size=16), max_size=6)
bodies = st.none() | st.binary(max_size=64)


@given(int32s, int32s, ext_maps, bodies)
def test_the_content_decodes_back_to_the_request(
    code: int, version: int, ext: dict[str, str], body: bytes | None
) -> None:
    decoded = _decode(strong_signature_content(code, version, ext, body))
    signed_fields = {k: v for k, v in ext.items() if k != SIGNATURE_V2}
    assert decoded == (code, version, sorted(signed_fields.items(), key=_key_bytes), body or b"")


def _key_bytes(item: tuple[str, str]) -> bytes:
    return item[0].encode("utf-8", "surrogatepass")


@st.composite
def recuts(draw: st.DrawFn) -> tuple[Any, Any]:
    """Two requests (fields, body) whose texts run together are the same, cut at other
    places: the values joined (what RocketMQ's scheme signs), a key and its value joined,
    the last value and the body joined; or any two."""
    kind = draw(st.sampled_from(["values", "key and value", "value and body", "any"]))
    text = draw(st.text(min_size=1, max_size=12))
    i, j = sorted(draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=2)))
    if kind == "values":  # keys "a" < "b" either way: the values run together in order
        return ({"a": text[:i], "b": text[i:]}, b""), ({"a": text[:j], "b": text[j:]}, b"")
    if kind == "key and value":
        return ({text[:i]: text[i:]}, b""), ({text[:j]: text[j:]}, b"")
    if kind == "value and body":
        raw = text.encode("utf-8", "surrogatepass")
        cut_i, cut_j = min(i, len(raw)), min(j, len(raw))
        return ({"k": raw[:cut_i].decode("latin-1")}, raw[cut_i:]), (
            {"k": raw[:cut_j].decode("latin-1")},
            raw[cut_j:],
        )
    return (draw(ext_maps), draw(bodies)), (draw(ext_maps), draw(bodies))


@given(recuts(), int32s)
@settings(max_examples=400)
def test_different_requests_never_sign_the_same_bytes(pair: tuple[Any, Any], code: int) -> None:
    (a, body_a), (b, body_b) = pair
    same = {k: v for k, v in a.items() if k != SIGNATURE_V2} == {
        k: v for k, v in b.items() if k != SIGNATURE_V2
    } and (body_a or b"") == (body_b or b"")
    content_a = strong_signature_content(code, 0, a, body_a)
    content_b = strong_signature_content(code, 0, b, body_b)
    assert (content_a == content_b) == same


# -- the fields and the replay window -------------------------------------------------------


def test_the_strong_fields_are_checked_for_form() -> None:
    good = {SIGNATURE_METHOD: "HmacSHA256", TIMESTAMP: str(NOW_MS), NONCE: "n" * 22}
    good[SIGNATURE_V2] = "A" * 44
    assert parse_strong_fields(good) == StrongFields(NOW_MS, "n" * 22, "A" * 44)
    bad = [
        ({SIGNATURE_METHOD: None}, "carries no SignatureMethod"),
        ({SIGNATURE_METHOD: "HmacSHA1"}, "this server knows HmacSHA256"),
        ({TIMESTAMP: None}, "carries no Timestamp"),
        ({TIMESTAMP: "-5"}, "not milliseconds"),
        ({TIMESTAMP: "1" * 16}, "not milliseconds"),
        ({TIMESTAMP: "١٢٣"}, "not milliseconds"),  # digits, but not ASCII ones
        ({NONCE: None}, "carries no Nonce"),
        ({NONCE: "short"}, "16 to 64"),
        ({NONCE: "n" * 21 + "\n"}, "16 to 64"),
        ({SIGNATURE_V2: "A" * 43}, "not the base64"),
    ]
    for change, why in bad:
        fields = {k: v for k, v in {**good, **change}.items() if v is not None}
        result = parse_strong_fields(fields)
        assert isinstance(result, str) and why in result, (change, result)


@given(
    st.dictionaries(
        st.sampled_from([SIGNATURE_METHOD, TIMESTAMP, NONCE, SIGNATURE_V2, "AccessKey", "x"])
        | st.text(max_size=8),
        st.text(max_size=70) | st.sampled_from(["HmacSHA256", str(NOW_MS), "n" * 20]),
        max_size=7,
    )
)
def test_parsing_the_strong_fields_is_total(ext: dict[str, str]) -> None:
    result = parse_strong_fields(ext)
    assert isinstance(result, (str, StrongFields))


@given(
    st.dictionaries(
        st.sampled_from([SIGNATURE_METHOD, TIMESTAMP, NONCE, SIGNATURE_V2, "AccessKey", "topic"]),
        st.text(max_size=70)
        | st.sampled_from(["HmacSHA256", str(NOW_MS), "n" * 20, "root", "inner-node"]),
        max_size=6,
    ).map(lambda ext: {**ext, SIGNATURE_V2: ext.get(SIGNATURE_V2, "")}),
    st.integers(-(2**40), 2**40),
)
@settings(max_examples=300)
def test_the_check_of_any_strong_fields_is_an_answer(ext: dict[str, str], code: int) -> None:
    meta = MemoryAuthMetadata()
    meta.create_user(User("root", "root-secret", UserType.SUPER))
    cmd = RemotingCommand(code, ext, b"x")
    answer = control(meta).check(cmd, "10.0.0.1", None, {})
    assert answer is None or answer.code == ResponseCode.NO_PERMISSION


def test_a_replayed_nonce_is_refused_on_a_new_connection(meta: AuthMetadata) -> None:
    access = control(meta)
    captured = signed(delete_topic({"topic": "victim"}))
    assert access.check(copy(captured), "10.0.0.1", None, {}) is None
    for session in ({}, None):  # another connection, stateful or not
        answer = access.check(copy(captured), "10.0.0.2", None, session)
        assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
        assert "reuses a Nonce" in (answer.remark or "")
    # The same nonce from another access key is its own.
    assert access.check(signed(delete_topic({"topic": "v"}), INNER, nonce="n" * 22), "1") is None
    assert access.check(signed(delete_topic({"topic": "v"}), ROOT, nonce="n" * 22), "1") is None
    again = access.check(signed(delete_topic({"topic": "v"}), INNER, nonce="n" * 22), "1")
    assert again is not None and "reuses a Nonce" in (again.remark or "")


def test_a_capture_replays_at_no_other_server_nor_after_a_restart(meta: AuthMetadata) -> None:
    captured = signed(delete_topic({"topic": "victim"}))
    assert control(meta).check(copy(captured), "1") is None
    # Another broker of the cluster (same users), and this one restarted, never saw the
    # nonce: the audience refuses it.
    for other in (control(meta, audience="server-b-audience"), control(meta, audience=None)):
        answer = other.check(copy(captured), "1")
        assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
        assert "signed for another server" in (answer.remark or "")
    for forged_audience in ("", "server-b-audience"):
        unaddressed = signed(delete_topic({"topic": "victim"}), audience=forged_audience)
        answer = control(meta).check(unaddressed, "1")
        assert answer is not None and "signed for another server" in (answer.remark or "")
    assert control(meta, audience=None).audience != control(meta, audience=None).audience


@pytest.mark.parametrize("offset_s", [-901.0, 901.0])
def test_a_timestamp_outside_the_window_is_refused(meta: AuthMetadata, offset_s: float) -> None:
    access = control(meta, signature_window_seconds=900)
    late = signed(delete_topic({"topic": "t"}), now_ms=int((NOW + offset_s) * 1000))
    answer = access.check(late, "10.0.0.1")
    assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
    assert "outside its 900 s window" in (answer.remark or "")
    assert ("ahead of" if offset_s > 0 else "behind") in (answer.remark or "")
    edge = signed(delete_topic({"topic": "t"}), now_ms=int((NOW + offset_s * 0.99) * 1000))
    assert access.check(edge, "10.0.0.1") is None


def test_a_capture_replays_nowhere_once_its_window_has_passed(meta: AuthMetadata) -> None:
    clock = Clock()
    access = control(meta, clock, signature_window_seconds=60)
    captured = signed(delete_topic({"topic": "t"}))
    assert access.check(copy(captured), "1") is None
    assert len(access.replay) == 1
    clock.now += 61
    answer = access.check(copy(captured), "1")
    assert answer is not None and "outside its 60 s window" in (answer.remark or "")
    fresh = signed(delete_topic({"topic": "t"}), now_ms=int(clock.now * 1000))
    assert access.check(fresh, "1") is None
    assert len(access.replay) == 1  # the old nonce is forgotten: its time refuses it


def test_the_nonces_kept_are_bounded_and_no_forgotten_one_replays() -> None:
    window = ReplayWindow(900, capacity=100)
    for i in range(1000):  # a flood of verified signatures, one millisecond apart
        assert window.admit("alice", f"nonce-{i:012d}", NOW_MS - 5000 + i, NOW_MS) is None
        assert len(window) <= 100
    assert window.floor_ms("alice") == NOW_MS - 5000 + 899
    # Every forgotten nonce is refused by the floor, every kept one as seen.
    for i in range(1000):
        why = window.admit("alice", f"nonce-{i:012d}", NOW_MS - 5000 + i, NOW_MS)
        assert why is not None
        assert ("no later than the oldest" in why) if i < 900 else ("reuses a Nonce" in why)
    # New signatures with the right time still pass.
    assert window.admit("alice", "nonce-fresh-000001", NOW_MS, NOW_MS) is None
    assert len(window) == 100


@pytest.mark.parametrize("skew_ms", [-899_000, 899_000])
def test_a_flood_from_one_user_raises_no_other_users_floor_past_their_own_times(
    skew_ms: int,
) -> None:
    window = ReplayWindow(900, capacity=100)
    for i in range(50):  # bob's own signatures, his clock right
        assert window.admit("bob", f"bob-nonce-{i:08d}", NOW_MS - 100 + i, NOW_MS) is None
    # alice floods, her timestamps as old or as new as the window lets them be.
    for i in range(1000):
        assert window.admit("alice", f"alice-{i:012d}", NOW_MS + skew_ms + i, NOW_MS) is None
    assert len(window) == 100
    floor = window.floor_ms("bob")
    assert floor is None or floor <= NOW_MS - 100 + 49  # never past his own times
    assert window.admit("bob", "bob-nonce-next-0001", NOW_MS, NOW_MS) is None
    # The forgotten ones of both are refused still.
    assert window.admit("bob", "bob-nonce-00000000", NOW_MS - 100, NOW_MS) is not None
    assert window.admit("alice", "alice-000000000000", NOW_MS + skew_ms, NOW_MS) is not None


def test_keys_with_nothing_left_are_forgotten() -> None:
    window = ReplayWindow(1, capacity=10)
    for i in range(500):  # one nonce each from many keys, a second apart
        assert window.admit(f"user-{i}", "n" * 16, NOW_MS + 1000 * i, NOW_MS + 1000 * i) is None
    assert len(window) <= 2
    assert len(window._keys) < 200


def test_a_replay_window_needs_a_positive_window_and_capacity() -> None:
    with pytest.raises(ValueError, match="window"):
        ReplayWindow(0)
    with pytest.raises(ValueError, match="capacity"):
        ReplayWindow(900, capacity=0)


# -- legacy and strong together ----------------------------------------------------------------


def test_the_legacy_signature_is_refused_when_the_strong_one_is_required(
    meta: AuthMetadata,
) -> None:
    legacy = delete_topic({"topic": "t"})
    ROOT.sign(legacy)
    assert control(meta).check(copy(legacy), "1") is None
    strict = control(meta, require_strong_signature=True)
    answer = strict.check(copy(legacy), "1")
    assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
    assert "authentication_require_strong_signature = true" in (answer.remark or "")
    assert "is signed with RocketMQ's Signature" in (answer.remark or "")
    unsigned = strict.check(delete_topic({"topic": "t", "AccessKey": "root"}), "1")
    assert unsigned is not None and "carries no SignatureV2" in (unsigned.remark or "")
    assert strict.check(signed(delete_topic({"topic": "t"})), "1") is None
    # Nodes sign their own calls with the inner credentials the same way.
    assert strict.check(signed(delete_topic({"topic": "t"}), INNER), "1") is None
    inner_legacy = delete_topic({"topic": "t"})
    INNER.sign(inner_legacy)
    assert strict.check(inner_legacy, "1") is not None


def test_a_strong_signature_is_never_judged_the_legacy_way(meta: AuthMetadata) -> None:
    # A legacy Signature beside a bad SignatureV2 does not rescue it.
    cmd = signed(delete_topic({"topic": "t"}))
    assert cmd.ext is not None
    cmd.ext["SignatureV2"] = "B" * 44
    cmd.ext["Signature"] = compute_signature("root-secret", cmd.ext, None)
    answer = control(meta).check(cmd, "1")
    assert answer is not None and "strong signature" in (answer.remark or "")


def test_signing_again_replaces_the_other_way(meta: AuthMetadata) -> None:
    cmd = delete_topic({"topic": "t"})
    ROOT.sign(cmd)
    signed(cmd)
    assert cmd.ext is not None and "Signature" not in cmd.ext
    ROOT.sign(cmd)
    assert not {SIGNATURE_V2, TIMESTAMP, NONCE, SIGNATURE_METHOD} & set(cmd.ext)
    assert control(meta).check(cmd, "1") is None


def test_identity_does_not_spend_the_nonce_the_check_accepted(meta: AuthMetadata) -> None:
    access = control(meta)
    cmd = signed(delete_topic({"topic": "t"}), ALICE)
    access.check(cmd, "1")
    assert access.identity(cmd) == "alice"
    assert access.identity(cmd) == "alice"


# -- stateful authentication ------------------------------------------------------------------


def test_a_remembered_connection_spends_the_nonces_it_is_sent(meta: AuthMetadata) -> None:
    access = control(meta, stateful_seconds=60)
    conn: dict[str, object] = {}
    assert access.check(signed(delete_topic({"topic": "a"})), "1", None, conn) is None
    # Keyless on that connection: its sender's.
    assert access.check(delete_topic({"topic": "b"}), "1", None, conn) is None
    # Signed again on it (not verified: remembered), its nonce still spent there ...
    again = signed(delete_topic({"topic": "c"}))
    assert access.check(copy(again), "1", None, conn) is None
    # ... so a capture of it replays nowhere else, nor on that connection.
    for session in ({}, conn):
        answer = access.check(copy(again), "2", None, session)
        assert answer is not None and "reuses a Nonce" in (answer.remark or ""), session
    # A keyless request on a connection nobody was verified on is refused.
    assert access.check(delete_topic({"topic": "d"}), "3", None, {}) is not None


def _session_answer(security: ServerSecurity, ext: Mapping[str, str], conn: Any) -> dict[str, str]:
    answer = security.session(conn, RemotingCommand(RocketqRequestCode.AUTH_SESSION, dict(ext)))
    assert answer.code == ResponseCode.SUCCESS
    return dict(answer.ext or {})


class _Conn:
    def __init__(self) -> None:
        self.attrs: dict[str, object] = {}


@pytest.mark.parametrize("required", [False, True])
def test_auth_session_announces_the_strong_signature(meta: AuthMetadata, required: bool) -> None:
    access = control(meta, stateful_seconds=60, require_strong_signature=required)
    security = ServerSecurity(
        access=access, tls=None, metrics_tls=None, client=None, inner=INNER, metadata=meta
    )
    conn = _Conn()
    probe = _session_answer(security, {}, conn)
    assert probe == {
        "ttlSeconds": "0",
        "strongSignature": "required" if required else "accepted",
        "signatureAudience": SERVER_A,
        "statefulSeconds": "60",
    }
    assert access.check(signed(delete_topic({"topic": "a"})), "1", None, conn.attrs) is None
    remembered = _session_answer(security, {"AccessKey": "root"}, conn)
    assert remembered["ttlSeconds"] == "60" and remembered["keyless"] == "true"
    # A server without authentication takes anything, the strong signature too.
    open_server = ServerSecurity(
        access=None, tls=None, metrics_tls=None, client=None, inner=None, metadata=meta
    )
    assert _session_answer(open_server, {}, _Conn()) == {
        "ttlSeconds": "0",
        "strongSignature": "accepted",
    }


def test_a_code_beyond_int32_is_refused_not_raised(meta: AuthMetadata) -> None:
    cmd = signed(delete_topic({"topic": "t"}))
    forged = copy(cmd, 2**40)
    answer = control(meta).check(forged, "1")
    assert answer is not None and answer.code == ResponseCode.NO_PERMISSION
    with pytest.raises(struct.error):
        compute_strong_signature("s", 2**40, 0, {}, None)


# -- the client -----------------------------------------------------------------------------

ECHO = 1100


class Recorder:
    """A real server on loopback, checking requests as ``security`` says and recording the
    ext fields of each request its echo handler answers."""

    def __init__(self, security: ServerSecurity | None, session: bool = True) -> None:
        self.seen: list[dict[str, str]] = []
        handlers: dict[int, Any] = {ECHO: self._echo}
        if session and security is not None:
            handlers[RocketqRequestCode.AUTH_SESSION] = security.session
        self.server = RemotingServer(
            handlers, access=security.check if security and security.access else None
        )

    def _echo(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.seen.append(dict(cmd.ext or {}))
        return cmd.response(ResponseCode.SUCCESS)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture
async def recorder(request: pytest.FixtureRequest, meta: AuthMetadata) -> AsyncIterator[Recorder]:
    kind: str = request.param
    if kind == "stock":  # a server that knows neither AUTH_SESSION nor the strong signature
        rec = Recorder(None, session=False)
    elif kind == "older":  # AUTH_SESSION for signed senders only, no strong signature
        access = AccessControl(
            authentication=True,
            authorization=False,
            metadata=meta,
            requirement=lambda cmd: Requirement(Gate.USER),
            stateful_seconds=60,
        )

        def older_session(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            if access.remembers(conn.attrs, (cmd.ext or {}).get("AccessKey", "")):
                return cmd.response(ResponseCode.SUCCESS, {"ttlSeconds": "60", "keyless": "true"})
            return cmd.response(ResponseCode.SUCCESS, {"ttlSeconds": "0"})

        security = ServerSecurity(
            access=access, tls=None, metrics_tls=None, client=None, inner=None, metadata=meta
        )
        rec = Recorder(security, session=False)
        rec.server.handlers[RocketqRequestCode.AUTH_SESSION] = older_session
    else:
        access = AccessControl(
            authentication=True,
            authorization=False,
            metadata=meta,
            requirement=lambda cmd: broker_requirement(cmd, cluster="DefaultCluster"),
            inner=INNER,
            stateful_seconds=60 if kind == "stateful" else 0,
            require_strong_signature=True,
        )
        rec = Recorder(
            ServerSecurity(
                access=access, tls=None, metrics_tls=None, client=None, inner=INNER, metadata=meta
            )
        )
    await rec.server.start("127.0.0.1", 0)
    try:
        yield rec
    finally:
        await rec.server.stop()


def sdk_security(creds: Credentials = ALICE) -> ClientSecurity:
    return ClientSecurity(
        sign=creds.sign, access_key=creds.access_key, sessions=True, sign_strong=creds.sign_strong
    )


@pytest.mark.parametrize("recorder", ["stateful"], indirect=True)
async def test_the_client_signs_strong_once_then_goes_keyless(recorder: Recorder) -> None:
    conn = await connect(recorder.addr, {}, security=sdk_security())
    try:
        assert conn.session_ttl == 60 and conn.keyless
        for _ in range(3):
            assert (await conn.invoke(RemotingCommand(ECHO, {"k": "v"}), 3.0)).code == 0
    finally:
        conn.close()
    first, *rest = recorder.seen
    assert {"AccessKey", SIGNATURE_V2, NONCE, TIMESTAMP, SIGNATURE_METHOD} <= set(first)
    assert "Signature" not in first
    assert rest == [{"k": "v"}, {"k": "v"}]


@pytest.mark.parametrize("recorder", ["stateless"], indirect=True)
async def test_every_request_is_signed_strong_with_its_own_nonce(recorder: Recorder) -> None:
    node = ClientSecurity(sign=INNER.sign, sign_strong=INNER.sign_strong)  # as nodes sign
    conn = await connect(recorder.addr, {}, security=node)
    try:
        cmd = RemotingCommand(ECHO, {"k": "v"})
        for _ in range(3):  # the same request object sent again is signed again
            assert (await conn.invoke(cmd, 3.0)).code == ResponseCode.SUCCESS
        conn.invoke_oneway(RemotingCommand(ECHO))
        await wait_until(lambda: len(recorder.seen) == 4, "the oneway request")
    finally:
        conn.close()
    assert len({seen[NONCE] for seen in recorder.seen}) == 4
    assert all(SIGNATURE_V2 in seen and "Signature" not in seen for seen in recorder.seen)
    # A one-shot blocking request (the launcher's) greets the same way.
    answer = await asyncio.to_thread(
        request_blocking, recorder.addr, RemotingCommand(ECHO, {"b": "1"}), 3.0, security=node
    )
    assert answer.code == ResponseCode.SUCCESS and SIGNATURE_V2 in recorder.seen[-1]


@pytest.mark.parametrize("recorder", ["stock"], indirect=True)
async def test_a_server_that_announces_nothing_gets_rocketmqs_signature(
    recorder: Recorder,
) -> None:
    conn = await connect(recorder.addr, {}, security=sdk_security())
    try:
        assert conn.session_ttl == 0
        assert (await conn.invoke(RemotingCommand(ECHO, {"k": "v"}), 3.0)).code == 0
    finally:
        conn.close()
    answer = await asyncio.to_thread(
        request_blocking, recorder.addr, RemotingCommand(ECHO), 3.0, security=sdk_security()
    )
    assert answer.code == ResponseCode.SUCCESS
    for seen in recorder.seen:
        assert "Signature" in seen and not {SIGNATURE_V2, NONCE, TIMESTAMP} & set(seen)
    expected = dict(recorder.seen[0])
    given = expected.pop("Signature")
    assert compute_signature(ALICE.secret_key, expected, None) == given


@pytest.mark.parametrize("recorder", ["older"], indirect=True)
async def test_a_server_without_the_strong_signature_keeps_its_sessions(
    recorder: Recorder,
) -> None:
    conn = await connect(recorder.addr, {}, security=sdk_security())
    try:
        # The unsigned question was refused; the RocketMQ-signed one started the session.
        assert conn.session_ttl == 60 and conn.keyless
        assert (await conn.invoke(RemotingCommand(ECHO, {"k": "v"}), 3.0)).code == 0
    finally:
        conn.close()
    assert recorder.seen == [{"k": "v"}]
