"""A broker takes its identity from its StatefulSet ordinal (``rocketq broker --ordinal N``
or ``--ordinal-from-hostname``): 0 the master, N a slave of broker id N, Raft member nN."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rocketq.broker.config import BrokerConfig, ordinal_of, ordinal_settings
from rocketq.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("hostname", "ordinal"),
    [("rocketq-broker-a-0", 0), ("rocketq-broker-b-12", 12), ("x-3\n", 3)],
)
def test_the_ordinal_is_the_host_names_last_number(hostname: str, ordinal: int) -> None:
    assert ordinal_of(hostname) == ordinal


@pytest.mark.parametrize("hostname", ["rocketq", "broker-a", "node-1a", ""])
def test_a_host_name_without_an_ordinal_says_so(hostname: str) -> None:
    with pytest.raises(ValueError, match="does not end in -<ordinal>"):
        ordinal_of(hostname)


def test_ordinal_zero_is_the_master_and_others_are_slaves() -> None:
    master = BrokerConfig(**ordinal_settings(0))  # type: ignore[arg-type]
    assert (master.broker_id, master.broker_role) == (0, "ASYNC_MASTER")
    slave = BrokerConfig(**ordinal_settings(2))  # type: ignore[arg-type]
    assert (slave.broker_id, slave.broker_role) == (2, "SLAVE")
    peers = "n0-a:40911;n1-b:40911;n2-c:40911"
    member = BrokerConfig(
        enable_dledger_commit_log=True,
        dledger_peers=peers,
        **ordinal_settings(1),  # type: ignore[arg-type]
    )
    assert member.dledger_self_id == "n1"


def test_the_cli_refuses_a_host_name_without_an_ordinal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTNAME", "workstation")
    result = runner.invoke(app, ["broker", "--ordinal-from-hostname"])
    assert result.exit_code == 2
    assert "--ordinal-from-hostname: host name 'workstation'" in result.output


def test_the_cli_refuses_two_broker_ids() -> None:
    result = runner.invoke(app, ["broker", "--ordinal", "1", "--broker-id", "1"])
    assert result.exit_code == 2
    assert "give one" in result.output
