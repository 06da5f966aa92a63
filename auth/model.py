"""The words of RocketMQ 5.3's ACL 2.0 model: resources, the actions on them and the
decision of a policy entry.

A resource is written as RocketMQ writes it: ``Topic:orders`` (one topic), ``Topic:order*``
(every topic whose name starts with ``order``), ``Topic:*`` (every topic), ``Group:g1``,
``Cluster:DefaultCluster``, or ``*`` (anything).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.Enum):
    """What a resource names (RocketMQ's ResourceType, as its JSON writes it)."""

    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(enum.Enum):
    """How a policy's resource name matches a request's: the whole name, a prefix of it
    (written with a trailing ``*``) or anything of its type (``*``)."""

    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Action(enum.Enum):
    """What a request does to a resource (RocketMQ's Action, as its JSON writes it)."""

    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class Decision(enum.Enum):
    """What a policy entry decides for the requests it matches; Deny wins over Allow."""

    ALLOW = "Allow"
    DENY = "Deny"


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource as a policy or a request names it."""

    type: ResourceType
    name: str = ""
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def group(cls, name: str) -> Resource:
        return cls(ResourceType.GROUP, name)

    @classmethod
    def cluster(cls, name: str = "") -> Resource:
        return cls(ResourceType.CLUSTER, name)


class Gate(enum.Enum):
    """Who may make a request once authentication is on, before any policy is read."""

    # Anyone, without credentials (nothing a request of this kind reads or changes is
    # private: e.g. a route lookup on the nameserver).
    OPEN = "open"
    # Any authenticated user; no policy is consulted.
    USER = "user"
    # Super users and the cluster's inner credentials only.
    SUPER = "super"
    # Any authenticated user whose policies allow every (resource, action) of the
    # requirement; super users always.
    POLICY = "policy"


@dataclass(frozen=True, slots=True)
class Requirement:
    """What a request needs: its gate, and for ``Gate.POLICY`` each resource with the
    action on it."""

    gate: Gate
    needs: tuple[tuple[Resource, Action], ...] = ()
