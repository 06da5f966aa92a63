"""What every RPC of the v2 endpoint does first and last, shared by the endpoint's parts
(the endpoint itself, :mod:`rocketq.broker.grpc_v2.sending`,
:mod:`rocketq.broker.grpc_v2.pull`): the access check of a request (its signature, its
user's ACL) and its count in ``rocketmq_rpc_latency``."""

from __future__ import annotations

import hmac
from typing import Any

from rocketq.auth.request_map import v2_requirement
from rocketq.broker.grpc_v2 import convert as v2
from rocketq.broker.grpc_v2 import definition_pb2 as d
from rocketq.broker.grpc_v2.convert import EndpointHost, credential, signature
from rocketq.broker.metrics import GRPC


class RpcBase:
    """The broker an endpoint serves, and the checks and counts of its RPCs."""

    def __init__(self, broker: EndpointHost) -> None:
        self.b = broker

    def _refusal(self, rpc: str, context: Any, topic: str = "", group: str = "") -> d.Status | None:
        """None when the request may go on; else the status refusing it: UNAUTHORIZED when
        its signature does not verify, FORBIDDEN when its user may not do it (the same
        users, ACLs and checks as the remoting port)."""
        access = self.b.security.access
        if access is None:
            return None
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
        access_key, sig = credential(str(metadata.get("authorization", "")))
        date_time = str(metadata.get("x-mq-date-time", ""))

        def verify(secret: str) -> bool:
            return bool(sig) and hmac.compare_digest(signature(secret, date_time), sig.lower())

        why = access.check_signed(
            access_key, verify, v2_requirement(rpc, topic, group), v2.peer_ip(context.peer())
        )
        if why is None:
            return None
        code = d.Code.UNAUTHORIZED if why.startswith("authentication") else d.Code.FORBIDDEN
        return v2.status(code, why)

    def _observe(self, rpc: str, started: float, code: int, *, held: bool = False) -> None:
        metrics = self.b.metrics
        if metrics is not None:
            name = v2.CODE_LABELS.get(code) or str(code)
            metrics.answered(rpc, name, started, held=held, protocol=GRPC)
