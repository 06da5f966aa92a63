"""What every RPC of the v2 endpoint does first and last, shared by the endpoint's parts
(the endpoint itself, :mod:`rocketq.broker.grpc_v2.sending`,
:mod:`rocketq.broker.grpc_v2.pull`): the access check of a request (its signature, the time
it was signed, its user's ACL, for the RPC and for each resource found inside it) and its
count in ``rocketmq_rpc_latency``."""

from __future__ import annotations

import calendar
import hmac
import time
from collections.abc import Iterable
from typing import Any, Final

from rocketq.auth.model import Requirement
from rocketq.auth.request_map import create_requirement, v2_requirement
from rocketq.broker.grpc_v2 import convert as v2
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2.convert import EndpointHost, credential, signature
from rocketq.broker.metrics import GRPC

# How RocketMQ 5's clients write x-mq-date-time: UTC, basic ISO 8601 (20260101T120000Z).
_DATE_TIME_LENGTH: Final = len("20260101T120000Z")


def signed_time(text: str) -> float | None:
    """The POSIX time of an ``x-mq-date-time`` value (``yyyyMMdd'T'HHmmss'Z'``, UTC), or
    None when it is not one."""
    if len(text) != _DATE_TIME_LENGTH or text[8] != "T" or text[-1] != "Z":
        return None
    digits = text[:8] + text[9:15]
    if not digits.isascii() or not digits.isdigit():
        return None
    try:
        parsed = time.strptime(text, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return None
    return float(calendar.timegm(parsed))


class RpcBase:
    """The broker an endpoint serves, and the checks and counts of its RPCs."""

    def __init__(self, broker: EndpointHost) -> None:
        self.b = broker
        self.clock = time.time  # the wall clock signatures' times are held to

    def _refusal(
        self, rpc: str, context: Any, topic: str = "", group: str = "", *, windowed: bool = True
    ) -> d.Status | None:
        """None when the request may go on; else the status refusing it: UNAUTHORIZED when
        its signature does not verify or was made outside the signature window,
        FORBIDDEN when its user may not do it (the same users, ACLs and checks as the
        remoting port). ``windowed`` False: a later frame of a stream whose first frame
        was checked in the window (the stream's headers were signed when it opened)."""
        return self._refused(context, v2_requirement(rpc, topic, group), windowed=windowed)

    def _declared_refusal(
        self, rpc: str, context: Any, group: str, topics: Iterable[str], *, windowed: bool = True
    ) -> d.Status | None:
        """The check of what a Telemetry settings frame declares (``rpc``:
        ``Telemetry.publishing`` or ``Telemetry.subscription``)."""
        need = v2_requirement(rpc, "", group, list(topics))
        return self._refused(context, need, windowed=windowed)

    def _creation_refusal(self, context: Any, topic: str) -> d.Status | None:
        """The check of a request that would create ``topic``: Create on it."""
        return self._refused(context, create_requirement(topic))

    def _refused(
        self, context: Any, need: Requirement, *, windowed: bool = True
    ) -> d.Status | None:
        access = self.b.security.access
        if access is None:
            return None
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
        access_key, sig = credential(str(metadata.get("authorization", "")))
        date_time = str(metadata.get("x-mq-date-time", ""))
        if access_key and windowed:
            late = self._outside_window(date_time)
            if late is not None:
                return v2.status(d.Code.UNAUTHORIZED, late)

        def verify(secret: str) -> bool:
            return bool(sig) and hmac.compare_digest(signature(secret, date_time), sig.lower())

        why = access.check_signed(access_key, verify, need, v2.peer_ip(context.peer()))
        if why is None:
            return None
        code = d.Code.UNAUTHORIZED if why.startswith("authentication") else d.Code.FORBIDDEN
        return v2.status(code, why)

    def _outside_window(self, date_time: str) -> str | None:
        """Why a signature over ``date_time`` is too old, too new or timeless; None when
        its time is within ``authentication_signature_window_seconds`` of this clock (a
        captured authorization header stops working after that)."""
        window = float(self.b.config.authentication_signature_window_seconds)
        signed = signed_time(date_time)
        if signed is None:
            return (
                "authentication failed: x-mq-date-time "
                f"{date_time[:40]!r} is not a UTC time like 20260101T120000Z"
            )
        skew = self.clock() - signed
        if abs(skew) > window:
            return (
                f"authentication failed: the request was signed at {date_time}, "
                f"{abs(skew):.0f} s {'ago' if skew > 0 else 'ahead'}; a signature is "
                f"accepted for {window:.0f} s (authentication_signature_window_seconds); "
                "check the client's clock"
            )
        return None

    @staticmethod
    def _identity(context: Any) -> str:
        """The access key a request's credential names ("" when none): the user it was
        checked as, once :meth:`_refusal` let it through."""
        for key, value in context.invocation_metadata() or ():
            if key.lower() == "authorization":
                return credential(str(value))[0]
        return ""

    def _observe(self, rpc: str, started: float, code: int, *, held: bool = False) -> None:
        metrics = self.b.metrics
        if metrics is not None:
            name = v2.CODE_LABELS.get(code) or str(code)
            metrics.answered(rpc, name, started, held=held, protocol=GRPC)
