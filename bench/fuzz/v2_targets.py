"""The v2 endpoint's gate under fuzzing: receipt handles and Telemetry commands, as a
RocketMQ 5 client hands them to a broker with authentication and authorization on.

Both run against a broker in this process on scratch files, holding a topic whose messages
a group has popped (so real check points are pending), a super user and a user ``alice``
allowed only that topic and group:

- ``v2_receipt``: the input is a receipt handle's text; it is parsed as the endpoint parses
  one and checked (:meth:`rocketq.broker.pop.PopService.verify_receipt`) for the group and
  topic alice may use. A handle that is not a pending pop of the group is refused with the
  broker's errors; anything else (or an accepted forgery) is a finding.
- ``v2_telemetry``: the first byte says who sends it (even: alice, odd: the super user), the
  rest is a serialized TelemetryCommand; a settings frame is checked as the endpoint checks
  it (:meth:`rocketq.broker.grpc_v2.endpoint.Endpoint._settings_refusal`) and, when let
  through, applied (``_settings``). Alice is never let through with a topic or group she
  may not use.

The grpc extra is imported when a harness starts, so the other harnesses need none of it.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from rocketq.bench.fuzz.harness import HangError, Harness, close_loop
from rocketq.common.exceptions import RocketqError

TOPIC: Final = "FuzzV2"
GROUP: Final = "fuzz-v2"
OTHER: Final = "FuzzSecret"
ALICE: Final = ("alice", "alice-secret")
ROOT: Final = ("root", "root-secret")
WALL_LIMIT: Final = 5.0


class ForgeryAcceptedError(AssertionError):
    """The gate let through what it must refuse (a finding)."""


class _Context:
    """What the endpoint reads of a gRPC call: its headers and its peer."""

    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self._metadata

    @staticmethod
    def peer() -> str:
        return "ipv4:127.0.0.1:40000"


class V2Gate:
    """A secured broker with pending pops and its v2 endpoint object (not listening), made
    once per process."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.directory: Path | None = None
        self.broker: Any = None
        self.endpoint: Any = None
        self.receipts: list[str] = []  # real handles, for the seeds and the checks
        self.let_through = 0  # settings frames the gate let through

    def setup(self) -> None:
        if self.loop is not None:
            return
        self.directory = Path(tempfile.mkdtemp(prefix="rocketq-fuzz-v2-"))
        self.receipts, self.let_through = [], 0  # this broker's, not an earlier one's
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._start(self.directory))

    async def _start(self, directory: Path) -> None:
        from rocketq.auth.model import User, decode_acl_info
        from rocketq.broker.broker import Broker
        from rocketq.broker.config import BrokerConfig
        from rocketq.broker.grpc_v2 import convert as v2
        from rocketq.common.config import StoreConfig
        from rocketq.common.message import TopicConfig
        from rocketq.common.record import encode_host, encode_record

        keys: dict[str, Any] = {
            "authentication_enabled": True,
            "authorization_enabled": True,
            "init_authentication_user": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
            "inner_client_authentication_credentials": json.dumps(
                {"accessKey": "inner", "secretKey": "inner-secret"}
            ),
        }
        b = Broker(
            BrokerConfig(listen_port=0, ha_listen_port=0, metrics_port=0, namesrv_addr="", **keys),
            StoreConfig(
                store_path_root_dir=str(directory / "store"),
                mapped_file_size_commit_log=4 << 20,
                mapped_file_size_consume_queue=20 * 1000,
            ),
        )
        await b.start()
        self.broker = b
        b.topics.update(TopicConfig(TOPIC, 2, 2))
        b.topics.update(TopicConfig(OTHER, 2, 2))
        b.groups.find_or_create(GROUP)
        b.auth_metadata.create_user(User(*ALICE))
        acl = {
            "subject": f"User:{ALICE[0]}",
            "policies": [
                {
                    "policyType": "Custom",
                    "entries": [
                        {"resource": r, "actions": ["All"], "decision": "Allow"}
                        for r in (f"Topic:{TOPIC}", f"Group:{GROUP}")
                    ],
                }
            ],
        }
        b.auth_metadata.create_acl(decode_acl_info(json.dumps(acl)))
        for topic in (TOPIC, OTHER):
            for i in range(4):
                record = encode_record(
                    topic=topic.encode(),
                    body=b"fuzz-%d" % i,
                    properties=b"",
                    born_timestamp=int(time.time() * 1000),
                    born_host=encode_host("127.0.0.1:1"),
                    queue_id=i % 2,
                )
                appended = b.send.append(record, topic, i % 2)
                await b.store.wait_stored(appended.end_offset)
        # The pops whose handles the harness holds: as soon as the queues index what was
        # stored (a busy machine may take a while).
        deadline = time.monotonic() + 30
        while True:
            answer = await b.pop.pop(
                GROUP, TOPIC, -1, max_nums=8, invisible_time=3_600_000, poll_time=1000
            )
            if answer.records or time.monotonic() > deadline:
                break
        from rocketq.common.record import decode_records

        for msg in decode_records(b"".join(answer.records)) if answer.records else []:
            self.receipts.append(v2.message(msg, 3_600_000).system_properties.receipt_handle)
        self.endpoint = endpoint_class()(b, "127.0.0.1", 0)

    def teardown(self) -> None:
        if self.loop is None:
            return
        if self.broker is not None:
            self.loop.run_until_complete(self.broker.stop())
            self.broker = None
        close_loop(self.loop, self.directory)
        self.loop = None

    def _run(self, what: Any) -> Any:
        assert self.loop is not None

        async def bounded() -> Any:
            try:
                return await asyncio.wait_for(what, WALL_LIMIT)
            except TimeoutError:
                raise HangError(f"unanswered after {WALL_LIMIT} s") from None

        return self.loop.run_until_complete(bounded())

    def receipt(self, data: bytes) -> None:
        """A receipt handle's text, parsed and checked as alice's group's."""
        self.setup()
        from rocketq.broker.grpc_v2 import convert as v2

        text = data.decode("utf-8", "replace")
        info, offset = v2.receipt(text)
        self._run(self.broker.pop.verify_receipt(GROUP, TOPIC, info, offset))
        # It verified: then it must be one the broker gave (or the same pop's fields).
        if not any(_same_pop(text, real) for real in self.receipts):
            raise ForgeryAcceptedError(f"a handle never given verified: {text[:120]!r}")

    def telemetry(self, data: bytes) -> None:
        """A TelemetryCommand from alice (first byte even) or the super user."""
        self.setup()
        from google.protobuf.message import DecodeError

        from rocketq.broker.grpc_v2 import convert as v2
        from rocketq.broker.grpc_v2 import service_pb2 as sv

        if not data:
            return
        who = ALICE if data[0] % 2 == 0 else ROOT
        try:
            command = sv.TelemetryCommand.FromString(data[1:])
        except (DecodeError, RecursionError, ValueError):
            return  # what gRPC would not hand the endpoint either
        if not command.HasField("settings"):
            return
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        sig = v2.signature(who[1], now)
        context = _Context(
            [
                ("x-mq-date-time", now),
                ("x-mq-client-id", f"fuzz-{who[0]}"),
                (
                    "authorization",
                    f"MQv2-HMAC-SHA1 Credential={who[0]}, SignedHeaders=x-mq-date-time, "
                    f"Signature={sig}",
                ),
            ]
        )
        settings = command.settings
        refused = self.endpoint._settings_refusal(
            settings, f"fuzz-{who[0]}", context, windowed=True
        )
        if refused is not None:
            return
        if who is ALICE:
            named = (
                {t.name for t in settings.publishing.topics}
                if settings.HasField("publishing")
                else set()
            )
            if settings.HasField("subscription"):
                named |= {e.topic.name for e in settings.subscription.subscriptions}
                group = settings.subscription.group.name
                if group != GROUP and (group or settings.subscription.subscriptions):
                    raise ForgeryAcceptedError(f"alice let into group {group[:80]!r}")
            if named - {TOPIC}:
                raise ForgeryAcceptedError(f"alice let at topics {sorted(named)[:4]!r}")
        self.let_through += 1
        self.endpoint._settings(settings)


def endpoint_class() -> type[Any]:
    """The v2 endpoint, which grpcio serves (the fuzz extra brings it), imported when a
    harness starts."""
    from rocketq.broker.grpc_v2.endpoint import Endpoint

    return Endpoint


def _same_pop(text: str, real: str) -> bool:
    """Whether a handle names the same pop, queue offset and message as a real one (the
    numbers may be written differently: '007' is 7)."""
    a, b = text.split(" "), real.split(" ")
    if len(a) < 9 or len(b) < 9:
        return False
    try:
        numbers = [0, 1, 3, 6, 7]
        same = all(int(a[i]) == int(b[i]) for i in numbers)
        return same and a[4] == b[4] and int(a[-1]) == int(b[-1])
    except ValueError:
        return False


V2_GATE: Final = V2Gate()

RECEIPT_HARNESS: Final = Harness(
    "v2_receipt",
    V2_GATE.receipt,
    (RocketqError,),
    "broker/grpc_v2/convert.py receipt and broker/pop.py verify_receipt: a v5 receipt handle",
    setup=V2_GATE.setup,
    teardown=V2_GATE.teardown,
)

TELEMETRY_HARNESS: Final = Harness(
    "v2_telemetry",
    V2_GATE.telemetry,
    (RocketqError,),
    "broker/grpc_v2/endpoint.py _settings_refusal and _settings: a v5 Telemetry command",
    setup=V2_GATE.setup,
    teardown=V2_GATE.teardown,
)
