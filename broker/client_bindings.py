"""Which user, on which connection, a client id belongs to.

A client names itself by a client id (a 4.x client in its heartbeat's ``clientID``, a
RocketMQ 5 client in every request's ``x-mq-client-id`` header), and the broker keeps it in
its groups' client lists and routes what it has to tell the client (group changes,
transaction checks with their half messages, admin calls) by that id. With authentication
on, an id is bound to the user whose request first registered it (a HEART_BEAT, a v2
Heartbeat or Telemetry settings frame) and to that request's connection: another user
cannot register under it, join it to a group, take its channel or end it. The same user
registering again from a new connection (a client that reconnected) moves the binding
there, and a v2 NotifyClientTermination ends a client only from the connection that holds
its binding. A binding not renewed for ``ttl`` seconds (clients heartbeat every 10 to 30 s;
the broker drops a silent client after 120 s) is forgotten; at most ``capacity`` are held,
and a new id beyond that is refused rather than letting memory grow. The remoting port and
the v2 endpoint share the broker's one table (:attr:`ConsumerManager.bindings`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

DEFAULT_TTL_S: Final = 120.0
DEFAULT_CAPACITY: Final = 100_000
MAX_CLIENT_ID_CHARS: Final = 512


@dataclass(slots=True)
class _Binding:
    user: str
    peer: str
    seen: float


class ClientBindings:
    """Client id -> (user, connection), renewed by each registration."""

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL_S,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._clock = clock
        self._bound: dict[str, _Binding] = {}

    def __len__(self) -> int:
        return len(self._bound)

    def claim(self, client_id: str, user: str, peer: str) -> str | None:
        """Bind ``client_id`` to ``user`` on connection ``peer`` (or renew the binding);
        None when it is theirs now, else why not."""
        if len(client_id) > MAX_CLIENT_ID_CHARS:
            return f"client id of {len(client_id)} characters; at most {MAX_CLIENT_ID_CHARS}"
        now = self._clock()
        found = self._bound.get(client_id)
        if found is not None and now - found.seen > self.ttl:
            del self._bound[client_id]
            found = None
        if found is not None:
            if found.user != user:
                return f"client id {client_id[:80]!r} belongs to another user"
            found.peer, found.seen = peer, now
            return None
        if len(self._bound) >= self.capacity:
            self._forget_stale(now)
            if len(self._bound) >= self.capacity:
                return f"this endpoint holds {self.capacity} clients already; try again later"
        self._bound[client_id] = _Binding(user, peer, now)
        return None

    def owns(self, client_id: str, user: str, peer: str) -> bool:
        """Whether ``client_id`` is bound, now, to ``user`` on connection ``peer``."""
        found = self._bound.get(client_id)
        return (
            found is not None
            and self._clock() - found.seen <= self.ttl
            and found.user == user
            and found.peer == peer
        )

    def user_of(self, client_id: str) -> str | None:
        """The user ``client_id`` is bound to now, or None."""
        found = self._bound.get(client_id)
        if found is None or self._clock() - found.seen > self.ttl:
            return None
        return found.user

    def release(self, client_id: str) -> None:
        self._bound.pop(client_id, None)

    def _forget_stale(self, now: float) -> None:
        stale = [cid for cid, b in self._bound.items() if now - b.seen > self.ttl]
        for cid in stale:
            del self._bound[cid]
