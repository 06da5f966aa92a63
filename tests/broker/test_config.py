"""The broker's ports as RocketMQ derives them: ha_listen_port and metrics_port follow
listen_port (+ 1, + 2) unless set, so brokers on one host differ only in listen_port; an
explicit value wins (metrics_port 0: no metrics server); a derived port beyond 65535 is a
config error, and a derived port that is taken says which key to set."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rocketq.broker.broker import Broker
from rocketq.broker.config import BrokerConfig, load_broker_config
from rocketq.broker.runtime_info import config_table
from rocketq.cluster.launcher import port_free
from rocketq.common.config import StoreConfig, dump_toml
from rocketq.common.exceptions import ConfigError
from rocketq.nameserver.config import NameServerConfig
from rocketq.nameserver.server import NameServer
from rocketq.remoting.transport import request_once
from rocketq.sdk import admin_wire as aw

HOST = "127.0.0.1"


# --- the rule -----------------------------------------------------------------------------


def test_unset_ports_follow_the_listen_port() -> None:
    default = BrokerConfig()
    assert (default.ha_listen_port, default.metrics_port) == (None, None)
    assert default.port_of("ha_listen_port") == 10912  # RocketMQ's 10911 + 1
    assert default.port_of("metrics_port") == 10913
    assert default.ha_server_addr == "127.0.0.1:10912"
    second = BrokerConfig(listen_port=10921, broker_name="broker-b")
    assert second.port_of("ha_listen_port") == 10922
    assert second.port_of("metrics_port") == 10923
    assert second.ha_server_addr == "127.0.0.1:10922"
    assert second.metrics_enabled


def test_an_explicit_port_wins() -> None:
    cfg = BrokerConfig(listen_port=10921, ha_listen_port=20000, metrics_port=20001)
    assert cfg.port_of("ha_listen_port") == 20000
    assert cfg.port_of("metrics_port") == 20001
    assert cfg.port_origin("ha_listen_port") == "ha_listen_port"
    # 0 keeps its meanings: any free port for HA, no metrics server.
    zero = BrokerConfig(listen_port=10921, ha_listen_port=0, metrics_port=0)
    assert zero.port_of("ha_listen_port") == 0
    assert not zero.metrics_enabled


def test_listen_port_zero_makes_the_derived_ports_any_free_port() -> None:
    cfg = BrokerConfig(listen_port=0)
    assert cfg.port_of("ha_listen_port") == 0
    assert cfg.port_of("metrics_port") == 0
    assert cfg.metrics_enabled  # derived, not an explicit 0: a metrics server on a free port


@pytest.mark.parametrize(
    ("listen_port", "key", "derived", "limit"),
    [(65535, "ha_listen_port", 65536, 65534), (65534, "metrics_port", 65536, 65533)],
)
def test_a_derived_port_beyond_65535_is_a_config_error(
    listen_port: int, key: str, derived: int, limit: int
) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(listen_port=listen_port)
    assert str(info.value) == (
        f"BrokerConfig: {key}: unset, so derived as listen_port + {derived - listen_port} = "
        f"{derived}, which is not a port (at most 65535); set {key}, or a listen_port of at "
        f"most {limit}"
    )
    # Set, the ports are fine.
    BrokerConfig(listen_port=listen_port, ha_listen_port=1000, metrics_port=0)


def test_explicit_ports_are_still_checked() -> None:
    with pytest.raises(ConfigError, match="ha_listen_port = 65536: must be between 0 and 65535"):
        BrokerConfig(ha_listen_port=65536)
    with pytest.raises(ConfigError, match="metrics_port = -1: must be between 0 and 65535"):
        BrokerConfig(metrics_port=-1)


# --- loading and printing -------------------------------------------------------------------


def test_a_file_without_the_ports_leaves_them_unset(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text('broker_name = "broker-b"\nlisten_port = 10921\n')
    broker, store = load_broker_config(path, env={})
    assert (broker.ha_listen_port, broker.metrics_port) == (None, None)
    assert broker.port_of("ha_listen_port") == 10922
    assert store.store_host == "127.0.0.1:10921"


def test_the_file_the_environment_and_flags_set_them(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text("listen_port = 10921\nha_listen_port = 30000\n")
    broker, _ = load_broker_config(
        path, env={"ROCKETQ_METRICS_PORT": "0"}, overrides={"ha-listen-port": "30001"}
    )
    assert (broker.ha_listen_port, broker.metrics_port) == (30001, 0)


def test_a_bad_value_says_what_unset_means() -> None:
    with pytest.raises(ConfigError) as info:
        load_broker_config(env={}, overrides={"ha_listen_port": "next"})
    assert str(info.value) == (
        'flag --ha-listen-port = "next": must be an integer (unset by default: listen_port + 1)'
    )


def test_dump_toml_leaves_unset_ports_out_and_reads_back(tmp_path: Path) -> None:
    cfg = BrokerConfig(listen_port=10921, metrics_port=0)
    text = dump_toml(cfg)
    assert "ha_listen_port" not in text and "metrics_port = 0\n" in text
    path = tmp_path / "broker.toml"
    path.write_text(text)
    assert load_broker_config(path, env={})[0] == cfg


def test_the_config_table_writes_unset_as_empty() -> None:
    table = config_table(BrokerConfig())
    assert table["ha_listen_port"] == "" and table["listen_port"] == "10911"


# --- a running broker -------------------------------------------------------------------------


@pytest.fixture
async def nameserver(tmp_path: Path) -> AsyncIterator[NameServer]:
    ns = NameServer(
        NameServerConfig(listen_port=0, metrics_port=0, kv_config_path=str(tmp_path / "kv.json"))
    )
    await ns.start()
    try:
        yield ns
    finally:
        await ns.stop()


def status_of(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return int(resp.status)


def store_config(tmp_path: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
    )


async def test_with_listen_port_zero_the_derived_ports_are_free_ports_the_config_shows(
    tmp_path: Path, nameserver: NameServer
) -> None:
    b = Broker(
        BrokerConfig(listen_port=0, namesrv_addr=f"{HOST}:{nameserver.port}"),
        store_config(tmp_path),
    )
    await b.start()
    try:
        assert b.ha_socket is not None and b.metrics_server is not None
        ha, metrics = b.ha_socket.getsockname()[1], b.metrics_server.port
        assert 0 not in (ha, metrics) and len({b.port, ha, metrics}) == 3
        assert (b.config.ha_listen_port, b.config.metrics_port) == (ha, metrics)
        assert b.config.ha_server_addr == f"{HOST}:{ha}"
        answer = await request_once(f"{HOST}:{b.port}", aw.broker_config_request(), 5.0)
        table = aw.parse_broker_config(answer).table
        assert table["listen_port"] == str(b.port)
        assert (table["ha_listen_port"], table["metrics_port"]) == (str(ha), str(metrics))
        # /healthz asks the event loop, so the request leaves it free.
        assert await asyncio.to_thread(status_of, f"http://{HOST}:{metrics}/healthz") == 200
    finally:
        await b.stop()


async def test_an_explicit_metrics_port_zero_still_means_no_metrics_server(
    tmp_path: Path, nameserver: NameServer
) -> None:
    b = Broker(
        BrokerConfig(listen_port=0, metrics_port=0, namesrv_addr=f"{HOST}:{nameserver.port}"),
        store_config(tmp_path),
    )
    await b.start()
    try:
        assert b.metrics_server is None and b.metrics is None
        assert b.config.metrics_port == 0
    finally:
        await b.stop()


@contextmanager
def taken_port_after(offset: int) -> Iterator[int]:
    """A listen port P that is free while P + ``offset`` is taken (a listening socket held
    until the block ends), and the ports between are free."""
    for _ in range(50):
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        holder.bind((HOST, 0))
        holder.listen(1)
        port = holder.getsockname()[1] - offset
        if port > 0 and all(port_free(p) for p in range(port, port + offset)):
            try:
                yield port
            finally:
                holder.close()
            return
        holder.close()
    pytest.fail(f"found no free port {offset} below a taken one in 50 tries")


def test_a_taken_derived_ha_port_names_the_key(tmp_path: Path) -> None:
    with taken_port_after(1) as port:
        with pytest.raises(OSError) as info:
            Broker(BrokerConfig(listen_port=port, metrics_port=0), store_config(tmp_path))
        assert str(info.value) == (
            f"cannot listen on 127.0.0.1:{port + 1} for HA (ha_listen_port, derived as "
            "listen_port + 1; set ha_listen_port to choose another)"
        )
        assert port_free(port)  # the broker let go of its listen port


def test_a_taken_derived_metrics_port_names_the_key(tmp_path: Path) -> None:
    with taken_port_after(2) as port:
        with pytest.raises(OSError) as info:
            Broker(BrokerConfig(listen_port=port), store_config(tmp_path))
        assert str(info.value) == (
            f"cannot listen on 127.0.0.1:{port + 2} for metrics (metrics_port, derived as "
            "listen_port + 2; set metrics_port to choose another, or 0 to turn the metrics "
            "server off)"
        )
        assert port_free(port) and port_free(port + 1)


def test_a_taken_explicit_ha_port_keeps_its_message(tmp_path: Path) -> None:
    with taken_port_after(1) as port:
        with pytest.raises(OSError) as info:
            Broker(
                BrokerConfig(listen_port=0, ha_listen_port=port + 1, metrics_port=0),
                store_config(tmp_path),
            )
        assert str(info.value) == (
            f"cannot listen on 127.0.0.1:{port + 1} for HA; is another broker running there? "
            "set ha_listen_port"
        )


def test_the_cli_says_which_key_to_set_when_the_derived_ha_port_is_taken(
    tmp_path: Path,
) -> None:
    """What an operator sees: a second broker configured as RocketMQ's docs say, whose
    listen_port + 1 another process holds."""
    with taken_port_after(1) as port:
        cmd = [sys.executable, "-m", "rocketq.cli.main", "broker"]
        cmd += ["--listen-port", str(port), "--store-path-root-dir", str(tmp_path / "store")]
        cmd += ["-n", f"{HOST}:9", "--broker-name", "broker-b", "--set", "metrics_port=0"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: cannot listen on 127.0.0.1:{port + 1} for HA (ha_listen_port, derived as "
        "listen_port + 1; set ha_listen_port to choose another)"
    )
