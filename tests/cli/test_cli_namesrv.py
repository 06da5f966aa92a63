"""Which nameserver ``rocketq send``, ``consume`` and ``admin ...`` talk to: ``-n`` if
given, else NAMESRV_ADDR, else RocketMQ's 127.0.0.1:9876, where ``rocketq cluster up`` puts
its nameserver when the port is free (and says so, or which port it used instead). The SDK
and the launcher are replaced by fakes that record the address, so no server is needed;
tests/cluster/test_launcher.py starts real ones on a preferred port."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import rocketq
import rocketq.cli.admin_cli as admin_cli
import rocketq.cluster.launcher as launcher
from rocketq.cli.main import app
from rocketq.cli.options import DEFAULT_NAMESRV, DEFAULT_NAMESRV_PORT
from rocketq.cluster.launcher import ClusterSpec

runner = CliRunner()


class Used:
    """The nameserver addresses the fakes were given."""

    addrs: list[str] = []


class FakeProducer:
    def __init__(self, group: str, namesrv: str, **_: Any) -> None:
        Used.addrs.append(namesrv)

    async def __aenter__(self) -> FakeProducer:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        return None

    async def send(self, _msg: object) -> Any:
        return SimpleNamespace(
            status=SimpleNamespace(name="SEND_OK"),
            msg_id="m",
            offset_msg_id="o",
            queue=SimpleNamespace(broker_name="broker-a", queue_id=0),
            queue_offset=0,
        )


class FakePushConsumer:
    def __init__(self, group: str, namesrv: str, **_: Any) -> None:
        Used.addrs.append(namesrv)

    def subscribe(self, topic: str, expression: str) -> None:
        pass

    def on_message(self, handler: object) -> None:
        pass

    async def start(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass


async def fake_with_admin(namesrv: str, fn: Callable[[Any], Awaitable[Any]]) -> Any:
    Used.addrs.append(namesrv)
    return await fn(SimpleNamespace(topic_list=_no_topics))


async def _no_topics() -> list[str]:
    return []


@pytest.fixture(autouse=True)
def fake_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    Used.addrs = []
    monkeypatch.setattr(rocketq, "Producer", FakeProducer, raising=False)
    monkeypatch.setattr(rocketq, "PushConsumer", FakePushConsumer, raising=False)
    monkeypatch.setattr(admin_cli, "_with_admin", fake_with_admin)
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)


COMMANDS = {
    "send": ["send", "-t", "Orders"],
    "consume": ["consume", "-t", "Orders", "--timeout", "0.01"],
    "admin": ["admin", "topic-list"],
}


def test_the_default_is_rocketmqs_port() -> None:
    assert DEFAULT_NAMESRV == f"127.0.0.1:{DEFAULT_NAMESRV_PORT}" == "127.0.0.1:9876"


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("env", "flag", "expected"),
    [
        (None, [], "127.0.0.1:9876"),  # neither: RocketMQ's default
        ("10.0.0.7:9876;10.0.0.8:9876", [], "10.0.0.7:9876;10.0.0.8:9876"),  # NAMESRV_ADDR
        ("10.0.0.7:9876", ["-n", "127.0.0.1:40001"], "127.0.0.1:40001"),  # -n wins
        (None, ["--namesrv", "127.0.0.1:40002"], "127.0.0.1:40002"),
    ],
)
def test_namesrv_comes_from_the_flag_then_the_env_then_the_default(
    command: str, env: str | None, flag: list[str], expected: str
) -> None:
    result = runner.invoke(app, [*COMMANDS[command], *flag], env={"NAMESRV_ADDR": env})
    assert result.exit_code == 0, result.output
    assert Used.addrs == [expected]


class FakeCluster:
    """What ``cluster up`` sees of a started cluster whose nameserver got ``port``."""

    started: list[ClusterSpec] = []
    port = DEFAULT_NAMESRV_PORT

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        node = SimpleNamespace(addr=f"127.0.0.1:{self.port}")
        self.nameservers = [node]
        self.nodes: list[Any] = []
        self.namesrv_addr = node.addr
        self.secrets = None  # no --auth
        self.port_fallbacks: list[Any] = []  # the brokers' and console's: none here

    def start(self) -> None:
        FakeCluster.started.append(self.spec)

    @property
    def namesrv_port_busy(self) -> bool:
        return self.spec.namesrv_port not in (None, self.port)


@pytest.mark.parametrize(
    ("args", "got", "asked", "says"),
    [
        ([], 9876, 9876, "(port 9876, RocketMQ's default: `rocketq send`, `consume` and "
         "`admin` find it without -n)"),
        ([], 41234, 9876, "port 9876 is taken, so the nameserver listens on 127.0.0.1:41234 "
         "instead: give clients -n 127.0.0.1:41234 or export NAMESRV_ADDR=127.0.0.1:41234"),
        (["--namesrv-port", "0"], 41234, None, "namesrv addr: 127.0.0.1:41234"),
    ],
)  # fmt: skip
def test_cluster_up_asks_for_rocketmqs_port_and_says_what_it_got(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    got: int,
    asked: int | None,
    says: str,
) -> None:
    monkeypatch.setattr(launcher, "LocalCluster", FakeCluster)
    monkeypatch.setattr(FakeCluster, "port", got)
    FakeCluster.started = []
    result = runner.invoke(app, ["cluster", "up", "--data-dir", str(tmp_path), *args])
    assert result.exit_code == 0, result.output
    assert [s.namesrv_port for s in FakeCluster.started] == [asked]
    assert f"namesrv addr: 127.0.0.1:{got}\n" in result.output
    assert says in result.output
    if asked is None:
        assert "9876" not in result.output and "taken" not in result.output
