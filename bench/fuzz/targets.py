"""The fuzz harnesses: one per decoder of outside bytes, each calling its decoder as the
code that receives those bytes does, and accepting the error that decoder documents.

Where one input has to say two things (which of two decoders, a flag, two files), its
first byte (or a separator) says it, so that every byte string is a valid input. Inputs
that carry a checksum have it fixed up first, so the fuzzer gets past it into the
structure behind it (a second form of the input leaves the checksum as it is).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from rocketq.auth import model as auth_model
from rocketq.auth.access import AccessControl
from rocketq.auth.credentials import Credentials
from rocketq.auth.metadata import AuthMetadata
from rocketq.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Requirement,
    Resource,
    Subject,
    User,
    UserStatus,
    UserType,
)
from rocketq.auth.plain_acl import translate_plain_acl
from rocketq.auth.request_map import broker_requirement, nameserver_requirement
from rocketq.auth.server_security import MemoryAuthMetadata
from rocketq.auth.signature import ACCESS_KEY, SIGNATURE, compute_signature
from rocketq.auth.strong_signature import SIGNATURE_V2, TIMESTAMP, compute_strong_signature
from rocketq.bench.fuzz import server_targets, v2_targets
from rocketq.bench.fuzz.harness import Harness
from rocketq.broker.config import load_broker_config
from rocketq.broker.config_json import group_of, topic_of
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.broker.wire.send import batch_records
from rocketq.common.config import load_config
from rocketq.common.exceptions import (
    ConfigError,
    MessageIllegalError,
    RocketqError,
    StoreCorruptError,
    SubscriptionParseFailedError,
)
from rocketq.common.message import decode_properties
from rocketq.common.record import (
    decode_record,
    decode_records,
    encode_properties,
    iter_records,
    property_value,
    record_properties,
)
from rocketq.common.sql92 import compile_expression
from rocketq.nameserver.config import NameServerConfig
from rocketq.remoting import fastjson
from rocketq.remoting.broker_tables import (
    parse_all_consumer_offset,
    parse_all_delay_offset,
    parse_all_subscription_group_config,
    parse_all_topic_config,
)
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand, RemotingError, decode
from rocketq.remoting.register_body import RegisterBodyError, decode_body
from rocketq.remoting.route_data import RouteBodyError, parse_cluster_info, parse_route
from rocketq.replication.ha.wire import (
    TRANSFER,
    HAProtocolError,
    check_hello,
    decode_hello,
    decode_transfer_head,
)
from rocketq.replication.raft import wire as raft_wire
from rocketq.sdk import admin_wire, client_wire
from rocketq.sdk.pulling import finish_messages
from rocketq.sdk.trace import parse_events
from rocketq.sdk.wire import parse_pull, parse_send
from rocketq.storage.checkpoint import CheckpointFile
from rocketq.storage.queue_ends import QueueEndsError
from rocketq.storage.queue_ends import decode as decode_queue_ends

# Separates the two files of a topics input: the snapshot (topics.json), then the log.
FILE_SEPARATOR: Final = b"\n\x00\x00\n"
# Message properties the SQL92 harness evaluates each compiled expression against.
SQL_PROPERTIES: Final[tuple[dict[str, str], ...]] = (
    {},
    {"a": "1", "b": "x", "TAGS": "TagA", "c": "true"},
    {"a": "-3.5", "b": "", "d": "NaN", "e": "1e308"},
)


# -- the remoting protocol -------------------------------------------------------------------


def remoting_frame(data: bytes) -> None:
    """A frame after its length word, as the transport hands it to ``decode``."""
    cmd = decode(data)
    repr(cmd)
    if cmd.ext:
        for key in cmd.ext:
            cmd.field(key)


def fastjson_body(data: bytes) -> None:
    """A JSON body as RocketMQ's fastjson writes it (route, heartbeat, admin bodies)."""
    fastjson.loads(data)


# -- bodies of requests and answers ----------------------------------------------------------


def send_batch(data: bytes) -> None:
    """SEND_BATCH_MESSAGE's body (RocketMQ's batch encoding) into CommitLog records; the
    first byte says whether the header's properties are added to each message."""
    extra = b"CLUSTER\x01DefaultCluster\x02" if data[:1] == b"\x01" else b""
    batch_records(
        data[1:],
        b"FuzzTopic",
        queue_id=0,
        born_timestamp=1_700_000_000_000,
        born=b"\x7f\x00\x00\x01\x00\x00\x27\x10",
        sys_flag=0,
        reconsume_times=0,
        batch_properties=extra,
    )


def records(data: bytes) -> None:
    """Stored records as a pull answer brings them: the broker walks records and reads
    their properties (filters); a transaction check decodes the first; the SDK decodes
    every record and reads what a consumer reads (finish_messages checks and inflates
    bodies)."""
    for pos, size in iter_records(data):
        record_properties(memoryview(data)[pos : pos + size])
    decode_record(data)
    finished: Any = finish_messages(decode_records(data), "FuzzGroup")
    # -> (good messages, errors of the bad ones); a plain list before bodies were checked.
    msgs = finished[0] if isinstance(finished, tuple) else finished
    for m in msgs:
        m.properties  # noqa: B018 (decoded on first use)
        m.tags  # noqa: B018
        m.keys  # noqa: B018
        m.msg_id  # noqa: B018
        m.offset_msg_id  # noqa: B018
        m.born_host  # noqa: B018
        m.store_host  # noqa: B018
        m.delay_level  # noqa: B018
        m.user_properties()
        repr(m)


def message_properties(data: bytes) -> None:
    """A record's properties (``name\\x01value\\x02``): decoded, one read straight from the
    bytes, and written back (a name or value the encoder refuses is MessageIllegalError)."""
    props = decode_properties(data)
    property_value(data, b"TAGS")
    property_value(data, b"UNIQ_KEY")
    encode_properties(props)


def register_body(data: bytes) -> None:
    """REGISTER_BROKER's body; the first byte is the header's ``compressed`` flag."""
    decode_body(data[1:], compressed=data[:1] == b"\x01", crc=0)


def route_body(data: bytes) -> None:
    """GET_ROUTEINFO_BY_TOPIC's answer, or (first byte 1) GET_BROKER_CLUSTER_INFO's."""
    if data[:1] == b"\x01":
        parse_cluster_info(data[1:])
    else:
        parse_route(data[1:])


def topic_body(data: bytes) -> None:
    """Topic and group config bodies. First byte 1: GET_ALL_TOPIC_CONFIG's answer, 2:
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG's (as an admin and a slave read them); otherwise one
    TopicConfig and SubscriptionGroupConfig object as the broker reads an update's body
    and a slave its master's tables."""
    mode, body = data[:1], data[1:]
    if mode == b"\x01":
        parse_all_topic_config(RemotingCommand(ResponseCode.SUCCESS, None, body))
        return
    if mode == b"\x02":
        parse_all_subscription_group_config(RemotingCommand(ResponseCode.SUCCESS, None, body))
        return
    doc = fastjson.loads(body)
    if not isinstance(doc, dict):
        return
    try:
        topic_of(doc)
    finally:
        group_of(doc)


def sql92(data: bytes) -> None:
    """A SQL92 subscription expression (as a header's text), compiled, then evaluated."""
    text = data.decode("utf-8", errors="replace")
    compiled = compile_expression(text)
    for props in SQL_PROPERTIES:
        compiled.matches(props)


# -- answers and requests the SDK reads -----------------------------------------------------


def _group_answer(answer: RemotingCommand) -> object:
    return admin_wire.parse_subscription_group(answer, "cg")


def _trace_events(answer: RemotingCommand) -> object:
    return parse_events(bytes(answer.body or b""))


# The SDK's readers of what a broker sends it, by name; the sdk_answers input's first byte
# picks one (modulo their number).
SDK_READERS: Final[tuple[tuple[str, Callable[[RemotingCommand], object]], ...]] = (
    ("send", parse_send),
    ("pull", parse_pull),
    ("offset", client_wire.parse_offset),
    ("consumer_list", client_wire.parse_consumer_list),
    ("lock_batch", client_wire.parse_lock_batch),
    ("notice", client_wire.parse_notice),
    ("consumer_request", client_wire.parse_consumer_request),
    ("topic_stats", admin_wire.parse_topic_stats),
    ("subscription_group", _group_answer),
    ("consume_stats", admin_wire.parse_consume_stats),
    ("reset_offset", admin_wire.parse_reset_offset_by_time),
    ("consume_by_who", admin_wire.parse_query_topic_consume_by_who),
    ("connections", admin_wire.parse_consumer_connection_list),
    ("running_info", admin_wire.parse_consumer_running_info),
    ("consume_directly", admin_wire.parse_consume_message_directly),
    ("query_message", admin_wire.parse_query_message),
    ("view_message", admin_wire.parse_view_message),
    ("resend", admin_wire.parse_resend_message),
    ("runtime_info", admin_wire.parse_broker_runtime_info),
    ("broker_config", admin_wire.parse_broker_config),
    ("consumer_offsets", parse_all_consumer_offset),
    ("delay_offsets", parse_all_delay_offset),
    ("trace_events", _trace_events),
)


def sdk_answers(data: bytes) -> None:
    """A frame a broker sends the SDK (an answer, or a request to a consumer): the first
    byte picks the reader, the rest is the frame after its length word."""
    if not data:
        return
    _, read = SDK_READERS[data[0] % len(SDK_READERS)]
    read(decode(data[1:]))


# -- replication -----------------------------------------------------------------------------


def ha_frame(data: bytes) -> None:
    """An HA connection's fixed headers: a slave's hello to the master (first byte 0), read
    as the master reads it (version 1, or version 2 signed with inner credentials, then
    checked against INNER at SIGNED_AT), or a master's transfer header to the slave
    (otherwise), read as exactly its size."""
    if data[:1] == b"\x00":
        decoded = decode_hello(bytearray(data[1:]))
        if decoded is not None:
            check_hello(decoded[0], INNER, now=SIGNED_AT)
    else:
        decode_transfer_head(data[1 : 1 + TRANSFER.size].ljust(TRANSFER.size, b"\0"))


def raft_frame(data: bytes) -> None:
    """A Raft frame after its length word: the kind byte, then the body. A handshake (kind
    HELLO) is read and checked as member RAFT_RECEIVER holding INNER at SIGNED_AT."""
    if not data:
        return
    with memoryview(data) as view, view[1:] as body:
        if data[0] == raft_wire.HELLO:
            handshake = raft_wire.decode_handshake(body)
            raft_wire.check_handshake(handshake, RAFT_RECEIVER, INNER, now=SIGNED_AT)
        else:
            raft_wire.decode(data[0], body)


# -- users and ACLs ----------------------------------------------------------------------------


def _text(data: bytes) -> str:
    """Bytes as the text of a header field (which may hold any character, a lone surrogate
    from JSON's ``\\ud800`` too)."""
    return data.decode("utf-8", errors="surrogateescape")


# The decoders of ACL 2.0's bodies and header texts, by name; the auth_body input's first
# byte picks one (modulo their number).
AUTH_READERS: Final[tuple[tuple[str, Callable[[bytes], object]], ...]] = (
    ("user_info", auth_model.decode_user_info),
    ("user_infos", auth_model.decode_user_infos),
    ("acl_info", auth_model.decode_acl_info),
    ("acl_info_subject", lambda d: auth_model.decode_acl_info(d, "User:alice")),
    ("acl_infos", auth_model.decode_acl_infos),
    ("resource", lambda d: Resource.parse(_text(d))),
    ("subject", lambda d: Subject.parse(_text(d))),
)


def auth_body(data: bytes) -> None:
    """A UserInfo or AclInfo body (one, or a list as list_users and list_acls answer), an
    ACL request's subject (the header's, with a body naming none) or a resource or subject
    text as a header carries it: the first byte picks the reader."""
    if not data:
        return
    _, read = AUTH_READERS[data[0] % len(AUTH_READERS)]
    read(data[1:])


def plain_acl(data: bytes) -> None:
    """An ACL 1.0 plain_acl.yml, translated as a server translates its ``acl_v1_file``
    (read as UTF-8 text; bytes that are not UTF-8 are replaced, the translator sees text)."""
    translate_plain_acl(data.decode("utf-8", errors="replace"))


def auth_metadata(data: bytes) -> None:
    """A node's users and ACLs. First byte 0: a master's ``snapshot`` as a replica restores
    it; a refused one must change nothing, and what it takes must read back from the
    files it writes as the same users and ACLs. Otherwise users.json and acls.json, split
    by FILE_SEPARATOR, loaded as a broker loads them at start."""
    where = _Scratch.fresh()
    metadata = AuthMetadata(where)
    if data[:1] == b"\x00":
        before = metadata.snapshot()
        try:
            metadata.restore(data[1:])
        except ValueError:
            if metadata.snapshot() != before:
                raise AssertionError("a refused auth snapshot changed the metadata") from None
            raise
        again = AuthMetadata(where)
        again.load()
        if again.snapshot() != metadata.snapshot():
            raise AssertionError("a restored auth snapshot reads back differently from its files")
        return
    users, _, acls = data[1:].partition(FILE_SEPARATOR)
    if users:
        metadata.users_path.write_bytes(users)
    if acls:
        metadata.acls_path.write_bytes(acls)
    try:
        metadata.load()
    except StoreCorruptError:
        raise
    except ValueError as exc:  # load documents StoreCorruptError only
        raise AssertionError(f"load raised {type(exc).__name__}, not StoreCorruptError") from exc


# The access check's fixed world: a super user, a normal user with an ACL, a disabled user
# (passwords are their secret keys), and the nodes' inner credentials.
INNER: Final = Credentials("rocketq-inner", "inner-secret-key")
SIGNED_AT: Final = 1_700_000_000_000  # the clock the signed HA hellos and Raft handshakes read
RAFT_RECEIVER: Final = "n1"
ALICE_ACL: Final = Acl(
    Subject("alice"),
    (
        Policy(
            PolicyType.CUSTOM,
            (
                PolicyEntry(Resource.parse("Topic:FuzzTopic"), (Action.PUB, Action.SUB)),
                PolicyEntry(Resource.parse("Topic:Fuzz*"), (Action.GET,)),
                PolicyEntry(Resource.parse("Group:cg"), (Action.SUB,)),
                PolicyEntry(
                    Resource.parse("Topic:secret"),
                    (Action.ALL,),
                    ("10.0.0.0/8", "192.168.1.1-100"),
                    Decision.DENY,
                ),
            ),
        ),
        Policy(PolicyType.DEFAULT, (PolicyEntry(Resource.parse("Topic:*"), (Action.SUB,)),)),
    ),
)
AUTH_USERS: Final = (
    User("admin", "admin-secret-key", UserType.SUPER),
    User("alice", "alice-secret-key"),
    User("bob", "bob-secret-key", user_status=UserStatus.DISABLE),
)
SECRETS: Final = {
    **{u.username: u.password for u in AUTH_USERS},
    INNER.access_key: INNER.secret_key,
}
PEER_IPS: Final = ("10.0.0.5", "::ffff:192.168.1.7", "[fe80::1%eth0]", "not an address")
# The audience the access checks announce (strong signatures of the seeds name it).
AUDIENCE: Final = "fuzz-server-audience"
TLS_IDENTITIES: Final = (None, "alice", "admin", "mallory")


class NotARequestError(Exception):
    """The access_check input's frame is one the transport's decoder refuses (so no check
    runs on it)."""


class _Checks:
    """The access checks of the access_check harness, made once per process."""

    controls: tuple[AccessControl, ...] = ()

    @classmethod
    def get(cls) -> tuple[AccessControl, ...]:
        if not cls.controls:
            metadata = MemoryAuthMetadata()
            for user in AUTH_USERS:
                metadata.create_user(user)
            metadata.update_acl(ALICE_ACL)
            kinds = (  # authentication, authorization, the global whitelist
                (True, True, ()),
                (False, True, ()),
                (True, False, ()),
                (True, True, ("192.168.*.*",)),
            )
            cls.controls = tuple(
                AccessControl(
                    authentication=authn,
                    authorization=authz,
                    metadata=metadata,
                    requirement=requirement,
                    inner=INNER,
                    super_users=("ops",),
                    whitelist=white,
                    audience=AUDIENCE,
                )
                for requirement in (_broker_requirement, nameserver_requirement)
                for authn, authz, white in kinds
            )
        return cls.controls


def _broker_requirement(cmd: RemotingCommand) -> Requirement:
    return broker_requirement(cmd, cluster="DefaultCluster")


def access_check(data: bytes) -> None:
    """The access check a server runs before a handler, on a request decoded from the frame
    after the first byte (as the transport decodes it). The first byte picks the server
    (bit 0: a broker's request map or a nameserver's), the check's kind (bits 1-2), the
    peer's address (bits 3-4), the verified certificate name (bits 5-6) and (bit 7) whether
    the request is signed again for the user its AccessKey names, as a check-sum is fixed
    up, so that what follows a good signature is fuzzed (one carrying ``SignatureV2`` with
    rocketq's strong signature, stamped now: its nonce, audience and other fields as
    fuzzed). A
    request the decoder refuses is NotARequestError; the check and the request maps never
    raise (a refusal is an answer)."""
    if not data:
        return
    mode = data[0]
    try:
        cmd = decode(data[1:])
    except RemotingError as exc:
        raise NotARequestError(str(exc)) from None
    if mode & 0x80 and cmd.ext and (secret := SECRETS.get(cmd.ext.get(ACCESS_KEY, ""))):
        if SIGNATURE_V2 in cmd.ext:
            cmd.ext[TIMESTAMP] = str(int(time.time() * 1000))
            cmd.ext[SIGNATURE_V2] = compute_strong_signature(
                secret, cmd.code, cmd.version, cmd.ext, cmd.body
            )
        else:
            cmd.ext[SIGNATURE] = compute_signature(secret, cmd.ext, cmd.body)
    requirement = nameserver_requirement if mode & 1 else _broker_requirement
    requirement(cmd)  # documented never to raise (the check would hide it)
    control = _Checks.get()[(mode & 1) * 4 + (mode >> 1 & 3)]
    answer = control.check(cmd, PEER_IPS[mode >> 3 & 3], TLS_IDENTITIES[mode >> 5 & 3])
    if answer is not None and answer.code != ResponseCode.NO_PERMISSION:
        raise AssertionError(f"the access check answered with code {answer.code}")
    control.identity(cmd)


# -- files read at start ---------------------------------------------------------------------


class _Scratch:
    """One temporary directory per process for the file harnesses (emptied per input)."""

    path: Path | None = None

    @classmethod
    def fresh(cls) -> Path:
        if cls.path is None:
            cls.path = Path(tempfile.mkdtemp(prefix="rocketq-fuzz-"))
        for child in cls.path.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        return cls.path


def checkpoint_file(data: bytes) -> None:
    """The store's checkpoint file as the store reads it at start."""
    path = _Scratch.fresh() / "checkpoint"
    path.write_bytes(data)
    cp = CheckpointFile(path)
    try:
        cp.read()
    finally:
        cp.close()


def queue_ends(data: bytes) -> None:
    """The queue ends file; first byte 0: the rest as it is, otherwise the rest with a
    correct checksum after it (so that the structure behind the checksum is fuzzed)."""
    body = data[1:]
    if data[:1] != b"\x00":
        body += zlib.crc32(body).to_bytes(4, "big")
    decode_queue_ends(body)


def topics_files(data: bytes) -> None:
    """The broker's topic snapshot (topics.json) and its change log (topics.log), split by
    FILE_SEPARATOR, loaded as a broker loads them at start."""
    snapshot, _, log = data.partition(FILE_SEPARATOR)
    where = _Scratch.fresh() / "topics.json"
    if snapshot:
        where.write_bytes(snapshot)
    if log:
        where.with_suffix(".log").write_bytes(log)
    TopicConfigManager(where, auto_create=True, default_queue_nums=4).load()


def config_toml(data: bytes) -> None:
    """A broker.toml (broker and store keys) or, first byte 1, a nameserver's TOML."""
    path = _Scratch.fresh() / "config.toml"
    path.write_bytes(data[1:])
    if data[:1] == b"\x01":
        load_config(NameServerConfig, path, env={})
    else:
        load_broker_config(path, env={})


HARNESSES: Final = {
    h.name: h
    for h in (
        Harness(
            "remoting_frame",
            remoting_frame,
            (RemotingError,),
            "remoting/command.py decode: JSON and ROCKETMQ headers",
        ),
        Harness(
            "fastjson",
            fastjson_body,
            (ValueError,),  # FastjsonDecodeError, or bytes that are not UTF-8
            "remoting/fastjson.py loads: fastjson's loose JSON",
        ),
        server_targets.BROKER_HARNESS,
        server_targets.NAMESERVER_HARNESS,
        Harness(
            "send_batch",
            send_batch,
            (MessageIllegalError,),
            "broker/wire/send.py batch_records: the batch encoding",
        ),
        Harness(
            "records",
            records,
            (MessageIllegalError,),
            "common/record.py decoders as the broker and the SDK use them",
        ),
        Harness(
            "message_properties",
            message_properties,
            (MessageIllegalError,),
            "common/message.py decode_properties, common/record.py property_value",
        ),
        Harness(
            "register_body",
            register_body,
            (RegisterBodyError,),
            "remoting/register_body.py decode_body: compressed and JSON",
        ),
        Harness(
            "route_body",
            route_body,
            (RouteBodyError,),
            "remoting/route_data.py parse_route, parse_cluster_info",
        ),
        Harness(
            "topic_body",
            topic_body,
            (RocketqError, ValueError),  # MessageIllegalError, a malformed answer; fastjson
            "broker/config_json.py topic_of, group_of; broker_tables parse_all_*_config",
        ),
        Harness(
            "sql92",
            sql92,
            (SubscriptionParseFailedError,),
            "common/sql92.py compile_expression and matches",
        ),
        Harness(
            "sdk_answers",
            sdk_answers,
            (RocketqError, RemotingError),
            "sdk/wire.py, client_wire.py, admin_wire.py, trace.py: what a broker sends the SDK",
        ),
        Harness(
            "ha_frame",
            ha_frame,
            (HAProtocolError,),
            "replication/ha/wire.py decode_hello (signed too), check_hello, transfer headers",
        ),
        Harness(
            "raft_frame",
            raft_frame,
            (raft_wire.FrameError,),
            "replication/raft/wire.py decode, decode_handshake and check_handshake",
        ),
        Harness(
            "auth_body",
            auth_body,
            (ValueError,),
            "auth/model.py UserInfo and AclInfo bodies, Resource.parse, Subject.parse",
        ),
        Harness(
            "plain_acl",
            plain_acl,
            (ValueError,),  # PlainAclError
            "auth/plain_acl.py translate_plain_acl: ACL 1.0's plain_acl.yml",
        ),
        Harness(
            "auth_metadata",
            auth_metadata,
            (ValueError, StoreCorruptError),  # restore's, load's
            "auth/metadata.py AuthMetadata.restore and load: users.json and acls.json",
        ),
        Harness(
            "access_check",
            access_check,
            (NotARequestError,),
            "auth/access.py AccessControl.check, auth/request_map.py on decoded requests",
        ),
        v2_targets.RECEIPT_HARNESS,
        v2_targets.TELEMETRY_HARNESS,
        Harness(
            "checkpoint",
            checkpoint_file,
            (StoreCorruptError,),
            "storage/checkpoint.py CheckpointFile.read",
        ),
        Harness(
            "queue_ends",
            queue_ends,
            (QueueEndsError,),
            "storage/queue_ends.py decode",
        ),
        Harness(
            "topics_files",
            topics_files,
            (StoreCorruptError,),
            "broker/topic_config.py TopicConfigManager.load: topics.json and topics.log",
        ),
        Harness(
            "config_toml",
            config_toml,
            (ConfigError,),
            "common/config.py load_configs: broker.toml, the nameserver's TOML",
        ),
    )
}


def cleanup() -> None:
    """Remove the file harnesses' scratch directory."""
    if _Scratch.path is not None:
        shutil.rmtree(_Scratch.path, ignore_errors=True)
        _Scratch.path = None
