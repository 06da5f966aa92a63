"""What each request a broker or a nameserver answers requires of its sender, once
authentication and authorization are on.

Every request code maps to a :class:`~rocketq.auth.model.Requirement`: a gate, and for
``Gate.POLICY`` the resources the request touches with the action it takes on each. The
access check (``rocketq.auth.access``) lets the request through when the sender passes the
gate; a super user (or a node signing with the cluster's inner credentials) passes every
gate. RocketMQ 5.3 is the reference: the ``@RocketMQAction``/``@RocketMQResource``
annotations of its request headers and its DefaultAuthorizationContextBuilder. Where
RocketMQ lets a request through unchecked, or checks it against something its handler
does not hold the request to, rocketq asks more; each such place says so below.

Names are read from the same header fields (and, for the heartbeat and the queue-lock
bodies, from the same JSON body, with the same decoder) as the handler reads them, so the
resource checked is the one the handler acts on. A retry topic (``%RETRY%<group>``) stands
for its consumer group: a request on ``%RETRY%g`` needs Sub on ``Group:g`` (Pub and Sub on
the topic become Sub on the group; an admin action stays that action, on the group), and a
group name with that prefix is the group after it (as RocketMQ reads one). A request whose
header or body is too damaged to name its resources needs a super user (its handler would
refuse it anyway); an unknown code needs a super user.

"Cluster" below is ``Cluster:<the broker's cluster name>`` (the ``cluster`` argument of
:func:`broker_requirement`).

Broker, messages (POLICY):

- SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE: Pub on the topic (``topic``; ``b`` in
  the V2 and batch headers). To a retry topic: Sub on its group (RocketMQ takes the group
  from the producer group field when one is given; rocketq always from the topic, so a
  sender cannot fill another group's retry topic by naming its own group). A send to a
  topic the broker does not have would auto-create it: the handler then also asks Create on
  it (:func:`create_requirement`; RocketMQ creates it for anyone who may Pub).
- SEND_TOPICS_BATCH (rocketq's: many topics' messages in one request, the body's segments,
  ``common/topics_batch.py``): Pub on every topic a segment names, as for a send to each
  (the handler asks Create on each one it would auto-create).
- PULL_MESSAGE: Sub on the topic and Sub on the group (``consumerGroup``). RocketMQ skips
  the topic when it is a retry topic; rocketq asks Sub on that retry topic's group, so a
  group cannot read another group's retries.
- POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME: Sub on the topic and Sub on
  the group (``consumerGroup``), as RocketMQ 5.3 asks. The topic named is the one popped:
  a receipt for a message of the group's pop retry topic names the topic too.
- BATCH_ACK_MESSAGE (the body's acks, ``common/pop_body.py``): Sub on each ack's topic and
  group.
- QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET: Sub on the topic and Sub on the group
  (RocketMQ: Sub or Get, and Sub or Update; the consumer's action is the one asked).
- GET_CONSUMER_LIST_BY_GROUP: Sub on the group (RocketMQ: Sub or Get).
- HEART_BEAT (the body's HeartbeatData): Sub on each consumer group, Sub on each topic
  its subscriptions name, and Pub on each producer group but ``CLIENT_INNER_PRODUCER`` (the
  group every 4.x client registers for itself). RocketMQ does not check producer groups;
  rocketq does because a producer group's members receive its transaction checks (with
  the half message) and may end its transactions. A heartbeat naming no group: any user.
- LOCK_BATCH_MQ, UNLOCK_BATCH_MQ (the body's group and queues): Sub on the group and on
  each queue's topic.
- CONSUMER_SEND_MSG_BACK: Sub on the group (``group``), and on ``originTopic`` when given
  (the broker copies the message at ``offset`` onto the group's retry topic; that it be a
  message of ``originTopic`` is for the broker to check).
- END_TRANSACTION: Pub on the topic when the header names one (5.x clients) and Pub on
  the producer group (``producerGroup``; the broker ends only a half message of that
  group). RocketMQ checks the topic only, and nothing for a 4.x client's header.
- GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME:
  Get on the topic (so a consumer that starts from the last offset or seeks by time needs
  Get besides Sub, as in RocketMQ).

Broker, administration (POLICY):

- UPDATE_AND_CREATE_TOPIC: Create on the topic. DELETE_TOPIC_IN_BROKER: Delete on it.
- GET_TOPIC_STATS_INFO, QUERY_TOPIC_CONSUME_BY_WHO, QUERY_MESSAGE: Get on the topic
  (QUERY_MESSAGE: RocketMQ's Sub or Get; the admin's action is the one asked).
- GET_CONSUME_STATS: Get on the group, and on the topic when given.
- GET_CONSUMER_CONNECTION_LIST, GET_CONSUMER_RUNNING_INFO: Get on the group.
- INVOKE_BROKER_TO_RESET_OFFSET: Update on the group and Update on the topic.
- VIEW_MESSAGE_BY_ID: Get on Cluster. RocketMQ asks Get on the header's topic, but the
  broker returns whatever record lies at the offset, of any topic.
- GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET,
  GET_ALL_DELAY_OFFSET (the whole tables a slave copies and an admin lists),
  GET_BROKER_RUNTIME_INFO, GET_BROKER_CONFIG: Get on Cluster. RocketMQ leaves the first
  four unchecked (no resource named) and has no annotation for the last two.
- UNREGISTER_CLIENT: any user; with auth on the broker unregisters only the client ids that
  heartbeated over the same connection (a client leaving), never another client's.
- UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (RocketMQ: unchecked), CONSUME_MESSAGE_DIRECTLY
  (it hands any stored message to a consumer), TRANSFER_LEADER and RESEND_MESSAGE
  (rocketq's own: Raft leadership, a stored message copied onto a group's retry topic):
  Update on Cluster.
- RAFT_ADD_MEMBER, RAFT_REMOVE_MEMBER (rocketq's own: a Raft group's membership): Update
  on Cluster, the administrator's right, as RocketMQ asks for its broker config changes;
  RAFT_MEMBERS (the membership and each member's lag): Get on Cluster.
- AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER, AUTH_CREATE_ACL, AUTH_UPDATE_ACL,
  AUTH_DELETE_ACL: Update on Cluster; AUTH_GET_USER, AUTH_LIST_USER, AUTH_GET_ACL,
  AUTH_LIST_ACL: Get on Cluster (as RocketMQ).

Broker, node to node (SUPER: super users and nodes signing with the inner credentials):

- GET_AUTH_METADATA (rocketq's: a replica's copy of its master's users, with their
  secrets, and ACL policies).

Broker and nameserver, anyone (OPEN): AUTH_SESSION (rocketq's: which signatures the server
accepts, and whether it remembers the sender a connection's signed request verified; a
client asks it before it signs, and it tells nothing of anyone else).

Nameserver:

- OPEN (anyone): GET_ROUTEINFO_BY_TOPIC and GET_BROKER_CLUSTER_INFO, the reads every
  client makes to find brokers.
- SUPER, reads: GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER, GET_KV_CONFIG,
  GET_KVLIST_BY_NAMESPACE. A nameserver knows only the cluster's super user, its inner
  credentials and an ACL 1.0 file's accounts (the brokers hold the users), so it could not
  verify a normal user's signature; the admin tools that make these reads sign as a super
  user.
- SUPER (super users and brokers signing with the inner credentials): REGISTER_BROKER,
  UNREGISTER_BROKER, QUERY_DATA_VERSION (a broker's check that also keeps it alive in the
  routes), DELETE_TOPIC_IN_NAMESRV, PUT_KV_CONFIG, DELETE_KV_CONFIG.

apache.rocketmq.v2 endpoint: :func:`v2_requirement`, RPC by RPC, with what the endpoint
checks inside handles, ids and Telemetry declarations.

Policy actions are single: where RocketMQ accepts any one of several actions, the one
named above is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from rocketq.auth.model import Action, Gate, Requirement, Resource
from rocketq.common.exceptions import MessageIllegalError
from rocketq.common.pop_body import decode_batch_acks
from rocketq.common.topics_batch import segment_topics
from rocketq.remoting import fastjson
from rocketq.remoting.codes import RequestCode, RocketqRequestCode
from rocketq.remoting.command import RemotingCommand

__all__ = [
    "AUTH_CODES",
    "BROKER_CODES",
    "CLIENT_INNER_PRODUCER",
    "GET_AUTH_METADATA",
    "NAMESERVER_CODES",
    "broker_requirement",
    "create_requirement",
    "nameserver_requirement",
    "v2_requirement",
]

RETRY_PREFIX: Final = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
# The producer group every RocketMQ 4.x client registers for its own inner producer.
CLIENT_INNER_PRODUCER: Final = "CLIENT_INNER_PRODUCER"

# rocketq's request for a broker's users and ACL policies.
GET_AUTH_METADATA: Final = RocketqRequestCode.GET_AUTH_METADATA

SUPER: Final = Requirement(Gate.SUPER)
USER: Final = Requirement(Gate.USER)
OPEN: Final = Requirement(Gate.OPEN)

Need = tuple[Resource, Action]
# A broker rule: (header fields, the request, the cluster's name) -> requirement.
_Rule = Callable[[Mapping[str, str], RemotingCommand, str], Requirement]


class _UnreadableError(Exception):
    """The request names no resource the check can hold it to: a super user's only."""


# -- names ---------------------------------------------------------------------------------


def _name(value: object) -> str:
    """A resource name as the handler reads it: a non-blank string, else unreadable."""
    if not isinstance(value, str) or not value.strip():
        raise _UnreadableError
    return value


def _field(ext: Mapping[str, str], key: str) -> str:
    return _name(ext.get(key))


def _topic(name: str, action: Action) -> Need:
    """``action`` on a topic; a retry topic stands for its group (Pub and Sub become Sub on
    the group, other actions stay)."""
    if name.startswith(RETRY_PREFIX):
        return _group(name, Action.SUB if action in (Action.PUB, Action.SUB) else action)
    return Resource.topic(name), action


def _group(name: str, action: Action) -> Need:
    """``action`` on a group; a name with the retry prefix is the group after it (as
    RocketMQ's Resource.ofGroup reads one)."""
    if name.startswith(RETRY_PREFIX):
        name = _name(name[len(RETRY_PREFIX) :])
    return Resource.group(name), action


def _policy(needs: Iterable[Need]) -> Requirement:
    """POLICY over the needs, each once, in order; none at all: any user."""
    unique = tuple(dict.fromkeys(needs))
    return Requirement(Gate.POLICY, unique) if unique else USER


def _body(cmd: RemotingCommand) -> dict[str, Any]:
    """The request's JSON body as an object, read as the handlers read it; unreadable
    otherwise. Only the frame's own bytes are read."""
    doc = fastjson.loads(bytes(cmd.body or b""))
    if not isinstance(doc, dict):
        raise _UnreadableError
    return doc


def _array(doc: Mapping[str, Any], key: str) -> list[Any]:
    """A list field as the handlers read it: absent or null is empty, a non-list unreadable."""
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise _UnreadableError
    return value


# -- broker rules --------------------------------------------------------------------------


def _super(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    return SUPER


def _on_cluster(action: Action) -> _Rule:
    def rule(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
        return Requirement(Gate.POLICY, ((Resource.cluster(cluster), action),))

    return rule


def _on_topic(action: Action, key: str = "topic") -> _Rule:
    def rule(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
        return Requirement(Gate.POLICY, (_topic(_field(ext, key), action),))

    return rule


def _on_group(action: Action, key: str) -> _Rule:
    def rule(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
        return Requirement(Gate.POLICY, (_group(_field(ext, key), action),))

    return rule


def _on_topic_and_group(action: Action, group_key: str, topic_key: str = "topic") -> _Rule:
    def rule(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
        return _policy(
            (_topic(_field(ext, topic_key), action), _group(_field(ext, group_key), action))
        )

    return rule


def _send(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    key = "topic" if cmd.code == RequestCode.SEND_MESSAGE else "b"
    return Requirement(Gate.POLICY, (_topic(_field(ext, key), Action.PUB),))


def _send_topics(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    try:
        topics = segment_topics(cmd.body or b"")
    except MessageIllegalError:
        raise _UnreadableError from None
    return _policy([_topic(_name(topic), Action.PUB) for topic in dict.fromkeys(topics)])


def _heartbeat(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    doc = _body(cmd)
    needs: list[Need] = []
    for producer in _array(doc, "producerDataSet"):
        # The handler registers a producer entry only when it is an object with a group.
        if isinstance(producer, dict) and producer.get("groupName"):
            group = _name(producer["groupName"])
            if group != CLIENT_INNER_PRODUCER:
                needs.append(_group(group, Action.PUB))
    for consumer in _array(doc, "consumerDataSet"):
        if not isinstance(consumer, dict):
            raise _UnreadableError
        needs.append(_group(_name(consumer.get("groupName")), Action.SUB))
        for sub in _array(consumer, "subscriptionDataSet"):
            if not isinstance(sub, dict):
                raise _UnreadableError
            needs.append(_topic(_name(sub.get("topic")), Action.SUB))
    return _policy(needs)


def v2_requirement(rpc: str, topic: str, group: str, topics: Iterable[str] = ()) -> Requirement:
    """What an RPC of the apache.rocketmq.v2 endpoint requires, as RocketMQ 5.3's proxy
    asks it, at the depth of the remoting table (the endpoint checks the resources named
    inside handles, ids and declarations against the same table, :mod:`rocketq.broker.
    grpc_v2.base`):

    - SendMessage: Pub on the message's topic; creating a topic that does not exist also
      needs Create on it (:func:`create_requirement`).
    - EndTransaction: Pub on the topic, and the transaction id must name a half message of
      that topic (the endpoint reads it before anything is ended).
    - ReceiveMessage, QueryAssignment, PullMessage, UpdateOffset, GetOffset: Sub on the
      topic and the group.
    - AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: Sub on the topic
      and the group, and the receipt handle must name a message of that topic (or the
      group's pop retry topic of it) at the queue offset it gives, popped by that group with
      its check point still pending; a forged or spent handle is INVALID_RECEIPT_HANDLE and
      changes nothing.
    - QueryOffset: Sub on the topic.
    - QueryRoute: any action on the topic (RocketMQ: Pub or Sub; a policy allowing the
      user anything on the topic lets it see the topic's route), and Create on the topic
      when it does not exist and would be created.
    - Heartbeat: Sub on the group when it names a consumer group (the remoting HEART_BEAT
      asks the same); any user otherwise.
    - Telemetry (``topics``: those a settings frame declares): a publisher's settings Pub on
      each topic it publishes to (its stream then receives those topics' transaction
      checks, with the half message); a subscriber's Sub on its group and each topic it
      subscribes to.
    - NotifyClientTermination: any user; the client id must be bound to the same user (and
      connection) that registered it (the endpoint holds the binding).

    A request that names no topic or group where one is needed needs a super user."""
    try:
        if rpc in ("SendMessage", "EndTransaction"):
            return _policy([_topic(_name(topic), Action.PUB)])
        if rpc in (
            "ReceiveMessage",
            "AckMessage",
            "ChangeInvisibleDuration",
            "ForwardMessageToDeadLetterQueue",
            "QueryAssignment",
            "PullMessage",
            "UpdateOffset",
            "GetOffset",
        ):
            return _policy([_topic(_name(topic), Action.SUB), _group(_name(group), Action.SUB)])
        if rpc == "QueryOffset":
            return _policy([_topic(_name(topic), Action.SUB)])
        if rpc == "QueryRoute":
            return _policy([_topic(_name(topic), Action.ANY)])
        if rpc == "Heartbeat":
            return _policy([_group(_name(group), Action.SUB)] if group else [])
        if rpc == "Telemetry.publishing":
            return _policy([_topic(_name(t), Action.PUB) for t in topics])
        if rpc == "Telemetry.subscription":
            return _policy(
                [_group(_name(group), Action.SUB)] + [_topic(_name(t), Action.SUB) for t in topics]
            )
    except _UnreadableError:
        return SUPER
    return USER


def create_requirement(topic: str) -> Requirement:
    """Create on a topic a request would auto-create (a send or a v2 route query naming a
    topic that does not exist): with authorization on, no path creates a topic for a user
    whose policies do not allow it."""
    try:
        return _policy([_topic(_name(topic), Action.CREATE)])
    except _UnreadableError:
        return SUPER


def _batch_ack(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    try:
        acks = decode_batch_acks(cmd.body)
    except ValueError:
        raise _UnreadableError from None
    needs: list[Need] = []
    for a in acks:
        needs += [_topic(_name(a.topic), Action.SUB), _group(_name(a.group), Action.SUB)]
    return _policy(needs)


def _queue_lock(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    doc = _body(cmd)
    needs = [_group(_name(doc.get("consumerGroup")), Action.SUB)]
    for mq in _array(doc, "mqSet"):
        if not isinstance(mq, dict):
            raise _UnreadableError
        needs.append(_topic(_name(mq.get("topic")), Action.SUB))
    return _policy(needs)


def _send_back(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    needs = [_group(_field(ext, "group"), Action.SUB)]
    origin = ext.get("originTopic")
    if origin is not None and origin.strip():
        needs.append(_topic(origin, Action.SUB))
    return _policy(needs)


def _end_transaction(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    needs: list[Need] = []
    topic = ext.get("topic")
    if topic is not None and topic.strip():
        needs.append(_topic(topic, Action.PUB))
    needs.append(_group(_field(ext, "producerGroup"), Action.PUB))
    return _policy(needs)


def _consume_stats(ext: Mapping[str, str], cmd: RemotingCommand, cluster: str) -> Requirement:
    needs = [_group(_field(ext, "consumerGroup"), Action.GET)]
    topic = ext.get("topic")
    if topic is not None and topic.strip():
        needs.append(_topic(topic, Action.GET))
    return _policy(needs)


_BROKER_RULES: Final[dict[int, _Rule]] = {
    # messages
    RequestCode.SEND_MESSAGE: _send,
    RequestCode.SEND_MESSAGE_V2: _send,
    RequestCode.SEND_BATCH_MESSAGE: _send,
    RocketqRequestCode.SEND_TOPICS_BATCH: _send_topics,
    RequestCode.PULL_MESSAGE: _on_topic_and_group(Action.SUB, "consumerGroup"),
    RequestCode.POP_MESSAGE: _on_topic_and_group(Action.SUB, "consumerGroup"),
    RequestCode.ACK_MESSAGE: _on_topic_and_group(Action.SUB, "consumerGroup"),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: _on_topic_and_group(Action.SUB, "consumerGroup"),
    RequestCode.BATCH_ACK_MESSAGE: _batch_ack,
    RequestCode.QUERY_CONSUMER_OFFSET: _on_topic_and_group(Action.SUB, "consumerGroup"),
    RequestCode.UPDATE_CONSUMER_OFFSET: _on_topic_and_group(Action.SUB, "consumerGroup"),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _on_group(Action.SUB, "consumerGroup"),
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.LOCK_BATCH_MQ: _queue_lock,
    RequestCode.UNLOCK_BATCH_MQ: _queue_lock,
    RequestCode.CONSUMER_SEND_MSG_BACK: _send_back,
    RequestCode.END_TRANSACTION: _end_transaction,
    RequestCode.GET_MAX_OFFSET: _on_topic(Action.GET),
    RequestCode.GET_MIN_OFFSET: _on_topic(Action.GET),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _on_topic(Action.GET),
    RequestCode.GET_EARLIEST_MSG_STORETIME: _on_topic(Action.GET),
    # administration: topics, groups, messages
    RequestCode.UPDATE_AND_CREATE_TOPIC: _on_topic(Action.CREATE),
    RequestCode.DELETE_TOPIC_IN_BROKER: _on_topic(Action.DELETE),
    RequestCode.GET_TOPIC_STATS_INFO: _on_topic(Action.GET),
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _on_topic(Action.GET),
    RequestCode.QUERY_MESSAGE: _on_topic(Action.GET),
    RequestCode.GET_CONSUME_STATS: _consume_stats,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: _on_group(Action.GET, "consumerGroup"),
    RequestCode.GET_CONSUMER_RUNNING_INFO: _on_group(Action.GET, "consumerGroup"),
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: _on_topic_and_group(Action.UPDATE, "group"),
    RequestCode.VIEW_MESSAGE_BY_ID: _on_cluster(Action.GET),
    # administration: the broker as a whole
    RequestCode.GET_ALL_TOPIC_CONFIG: _on_cluster(Action.GET),
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _on_cluster(Action.GET),
    RequestCode.GET_ALL_CONSUMER_OFFSET: _on_cluster(Action.GET),
    RequestCode.GET_ALL_DELAY_OFFSET: _on_cluster(Action.GET),
    RequestCode.GET_BROKER_RUNTIME_INFO: _on_cluster(Action.GET),
    RequestCode.GET_BROKER_CONFIG: _on_cluster(Action.GET),
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _on_cluster(Action.UPDATE),
    RequestCode.UNREGISTER_CLIENT: lambda ext, cmd, cluster: USER,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: _on_cluster(Action.UPDATE),
    RocketqRequestCode.TRANSFER_LEADER: _on_cluster(Action.UPDATE),
    RocketqRequestCode.RESEND_MESSAGE: _on_cluster(Action.UPDATE),
    RocketqRequestCode.RAFT_ADD_MEMBER: _on_cluster(Action.UPDATE),
    RocketqRequestCode.RAFT_REMOVE_MEMBER: _on_cluster(Action.UPDATE),
    RocketqRequestCode.RAFT_MEMBERS: _on_cluster(Action.GET),
    # users and ACLs
    RequestCode.AUTH_CREATE_USER: _on_cluster(Action.UPDATE),
    RequestCode.AUTH_UPDATE_USER: _on_cluster(Action.UPDATE),
    RequestCode.AUTH_DELETE_USER: _on_cluster(Action.UPDATE),
    RequestCode.AUTH_GET_USER: _on_cluster(Action.GET),
    RequestCode.AUTH_LIST_USER: _on_cluster(Action.GET),
    RequestCode.AUTH_CREATE_ACL: _on_cluster(Action.UPDATE),
    RequestCode.AUTH_UPDATE_ACL: _on_cluster(Action.UPDATE),
    RequestCode.AUTH_DELETE_ACL: _on_cluster(Action.UPDATE),
    RequestCode.AUTH_GET_ACL: _on_cluster(Action.GET),
    RequestCode.AUTH_LIST_ACL: _on_cluster(Action.GET),
    # node to node
    GET_AUTH_METADATA: _super,
    RocketqRequestCode.AUTH_SESSION: lambda ext, cmd, cluster: OPEN,
}

_NAMESERVER_GATES: Final[dict[int, Requirement]] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: OPEN,
    RequestCode.GET_BROKER_CLUSTER_INFO: OPEN,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: SUPER,
    RequestCode.GET_TOPICS_BY_CLUSTER: SUPER,
    RequestCode.GET_KV_CONFIG: SUPER,
    RequestCode.GET_KVLIST_BY_NAMESPACE: SUPER,
    RequestCode.REGISTER_BROKER: SUPER,
    RequestCode.UNREGISTER_BROKER: SUPER,
    RequestCode.QUERY_DATA_VERSION: SUPER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: SUPER,
    RequestCode.PUT_KV_CONFIG: SUPER,
    RequestCode.DELETE_KV_CONFIG: SUPER,
    RocketqRequestCode.AUTH_SESSION: OPEN,
}

# ACL 2.0's user and policy requests (RocketMQ's RequestCode.AUTH_*), answered by brokers.
AUTH_CODES: Final = frozenset(range(RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_LIST_ACL + 1))
# Every request code each server answers, with its requirement here.
BROKER_CODES: Final = frozenset(_BROKER_RULES)
NAMESERVER_CODES: Final = frozenset(_NAMESERVER_GATES)


def broker_requirement(cmd: RemotingCommand, *, cluster: str = "") -> Requirement:
    """What a request to a broker requires (the table in this module's docstring).

    ``cluster`` is the broker's cluster name, the name of the ``Cluster`` resource that
    administration requests need an action on. Never raises: an unknown code, or a
    request whose header or body names no resource it can be held to, needs a super user.
    """
    rule = _BROKER_RULES.get(cmd.code)
    if rule is None:
        return SUPER
    try:
        return rule(cmd.ext or {}, cmd, cluster)
    except Exception:  # _UnreadableError, a body that is not JSON, anything unforeseen
        return SUPER


def nameserver_requirement(cmd: RemotingCommand) -> Requirement:
    """What a request to a nameserver requires (the table in this module's docstring): an
    unknown code needs a super user. Never raises; reads no header or body."""
    return _NAMESERVER_GATES.get(cmd.code, SUPER)
