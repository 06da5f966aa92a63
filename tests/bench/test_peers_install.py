"""``rocketq bench peers --install`` on a fresh machine, with a fake ``run`` that records
each command and does what apt-get and pip would: the exact command lines (one pip
argument per requirement, pinned as pyproject.toml's ``bench`` extra pins it), the peer
reported present once installed, and what is said when an install does not work. Nothing
is really installed."""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.util
import os
import re
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import rocketq.bench.peers.install as install
from rocketq.bench.peers.install import (
    BENCH_EXTRA,
    Client,
    Installer,
    Requirement,
    SystemMissingError,
)
from rocketq.bench.peers.runner import PeerRunOptions, run_peers
from rocketq.bench.peers.systems import nats_jetstream, rabbitmq, redis_streams
from rocketq.bench.peers.systems.base import PeerSystem
from rocketq.bench.peers.systems.stub import FakeSystem
from rocketq.bench.peers.workload import Scenario, Workload

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
PIP = [sys.executable, "-m", "pip", "install", "--quiet"]
APT_UPDATE = ["apt-get", "update", "-q"]
# Each peer: its module, its system class, its Debian package and its pinned client.
PEERS: dict[str, tuple[ModuleType, Callable[[], PeerSystem], str, str]] = {
    "redis": (redis_streams, redis_streams.RedisSystem, "redis-server", "redis>=5"),
    "nats": (nats_jetstream, nats_jetstream.NatsSystem, "nats-server", "nats-py>=2.7"),
    "rabbitmq": (rabbitmq, rabbitmq.RabbitmqSystem, "rabbitmq-server", "pika>=1.3"),
}


def apt_install(package: str) -> list[str]:
    return ["apt-get", "install", "-y", "-q", "--no-install-recommends", package]


def bench_extra() -> list[str]:
    doc = tomllib.loads(PYPROJECT.read_text())
    extra: list[str] = doc["project"]["optional-dependencies"]["bench"]
    return extra


class FakeMachine:
    """A machine with none of the peers: ``run`` records every command; ``apt-get
    install P`` puts an executable at ``servers[P]`` and ``pip install R ...`` makes each
    R's module importable (unless told to fail, or to "succeed" without doing it)."""

    def __init__(
        self,
        tmp: Path,
        monkeypatch: pytest.MonkeyPatch,
        *,
        apt_status: int = 0,
        pip_status: int = 0,
        pip_works: bool = True,
    ) -> None:
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.apt_status = apt_status
        self.pip_status = pip_status
        self.pip_works = pip_works
        self.commands: list[list[str]] = []
        self.servers: dict[str, Path] = {}  # Debian package -> where its binary goes
        self.modules: dict[str, str] = {}  # PyPI project -> the module it installs
        self.importable: set[str] = set()
        real_find_spec = importlib.util.find_spec

        def find_spec(name: str, package: str | None = None) -> Any:
            if name in self.modules.values():
                return (
                    importlib.machinery.ModuleSpec(name, None) if name in self.importable else None
                )
            return real_find_spec(name, package)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    def server(self, package: str, binary: str) -> str:
        """Where ``apt-get install package`` will put ``binary`` (absent until then)."""
        path = self.bin / Path(binary).name
        self.servers[package] = path
        return str(path)

    def client(self, module: str, requirement: str) -> Client:
        self.modules[re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]] = module
        return Client(module, requirement)

    def run(self, argv: Sequence[str]) -> int:
        argv = list(argv)
        self.commands.append(argv)
        if argv[:2] == ["apt-get", "install"] and self.apt_status == 0:
            path = self.servers[argv[-1]]
            path.write_text("#!/bin/sh\n")
            path.chmod(0o755)
            return 0
        if argv[: len(PIP)] == PIP:
            if self.pip_status == 0 and self.pip_works:
                for req in argv[len(PIP) :]:
                    self.importable.add(self.modules[re.split(r"[<>=!~;\[ ]", req)[0]])
            return self.pip_status
        return self.apt_status if argv[0] == "apt-get" else 0


def fresh_peer(
    name: str, machine: FakeMachine, monkeypatch: pytest.MonkeyPatch
) -> tuple[PeerSystem, Requirement]:
    """The real system ``name`` with its requirement, its server binary moved where the
    fake apt-get puts it (the clients are the system's own)."""
    module, make, package, _pin = PEERS[name]
    real: Requirement = module.REQUIREMENT  # type: ignore[attr-defined]
    req = dataclasses.replace(
        real,
        binary=machine.server(real.deb_package, real.binary),
        clients=tuple(machine.client(c.module, c.requirement) for c in real.clients),
    )
    assert real.deb_package == package
    monkeypatch.setattr(module, "REQUIREMENT", req)
    return make(), req


# -- pins -----------------------------------------------------------------------------------


def test_the_peers_clients_are_pinned_as_the_bench_extra() -> None:
    pins = [c.requirement for module, *_ in PEERS.values() for c in module.REQUIREMENT.clients]  # type: ignore[attr-defined]
    assert sorted(pins) == sorted(bench_extra())
    assert {name: PEERS[name][3] for name in PEERS} == {
        "redis": "redis>=5",
        "nats": "nats-py>=2.7",
        "rabbitmq": "pika>=1.3",
    }


# -- a fresh machine ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PEERS))
def test_install_runs_apt_get_then_pip_with_the_pin_and_the_peer_is_present(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch)
    system, req = fresh_peer(name, machine, monkeypatch)
    _module, _make, package, pin = PEERS[name]
    said: list[str] = []
    installer = Installer(True, said.append, run=machine.run)

    system.ensure_installed(installer)  # returns: the peer is present

    assert machine.commands == [APT_UPDATE, apt_install(package), [*PIP, pin]]
    assert not req.missing_binary() and req.missing_clients() == []
    assert any(f"'{pin}'" in line for line in said)  # the exact command, shown as typed
    system.ensure_installed(installer)  # present now: nothing more to run
    assert len(machine.commands) == 3


def test_pip_gets_one_argument_per_requirement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch)
    req = Requirement(
        os.path.realpath("/bin/sh"),
        "dash",
        (machine.client("redis", "redis>=5"), machine.client("nats", "nats-py>=2.7")),
    )
    Installer(True, lambda _l: None, run=machine.run).ensure("two", req)
    assert machine.commands == [[*PIP, "redis>=5", "nats-py>=2.7"]]  # no apt-get: sh is here


def test_the_run_reports_an_installed_peer_present_and_computes_its_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch)
    req = Requirement(
        machine.server("redis-server", "redis-server"),
        "redis-server",
        (machine.client("redis", "redis>=5"),),
    )
    w = Workload(duration=0.2, warmup=0.05, drain_timeout=2.0, scenarios=(Scenario.PRODUCE,))
    installer = Installer(True, lambda _l: None, run=machine.run)
    report = run_peers(
        PeerRunOptions(w, install=True),
        [FakeSystem("rocketq"), FakeSystem("redis", requirement=req)],
        lambda _l: None,
        installer=installer,
    )
    assert report.missing == {}
    assert [c[:2] for c in machine.commands] == [
        ["apt-get", "update"],
        ["apt-get", "install"],
        PIP[:2],
    ]
    produce = next(r for r in report.ratios() if r.name == "produce")
    assert produce.best_peer == "redis" and produce.value is not None


def test_a_failed_install_is_reported_missing_with_no_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch, pip_status=1)
    req = Requirement(os.path.realpath("/bin/sh"), "dash", (machine.client("redis", "redis>=5"),))
    w = Workload(duration=0.2, warmup=0.05, drain_timeout=2.0, scenarios=(Scenario.PRODUCE,))
    report = run_peers(
        PeerRunOptions(w, install=True),
        [FakeSystem("rocketq"), FakeSystem("redis", requirement=req)],
        lambda _l: None,
        installer=Installer(True, lambda _l: None, run=machine.run),
    )
    assert "pip install --quiet 'redis>=5' failed" in report.missing["redis"]
    produce = next(r for r in report.ratios() if r.name == "produce")
    assert produce.value is None


# -- what is said when it does not work -----------------------------------------------------


def test_a_failing_pip_names_the_command_its_status_and_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch, pip_status=1)
    system, _req = fresh_peer("redis", machine, monkeypatch)
    with pytest.raises(SystemMissingError) as err:
        system.ensure_installed(Installer(True, lambda _l: None, run=machine.run))
    message = str(err.value)
    assert message.startswith("redis: ")
    assert f"{sys.executable} -m pip install --quiet 'redis>=5' failed (exit status 1)" in message
    assert BENCH_EXTRA in message


def test_pip_that_succeeds_without_an_importable_client_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch, pip_works=False)
    system, _req = fresh_peer("nats", machine, monkeypatch)
    with pytest.raises(SystemMissingError) as err:
        system.ensure_installed(Installer(True, lambda _l: None, run=machine.run))
    assert f"pip installed nats-py>=2.7, but {sys.executable} still cannot import nats" in str(
        err.value
    )


def test_without_install_the_message_gives_the_pinned_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch)
    req = Requirement(os.path.realpath("/bin/sh"), "dash", (machine.client("pika", "pika>=1.3"),))
    with pytest.raises(SystemMissingError) as err:
        Installer(False, lambda _l: None, run=machine.run).ensure("rabbitmq", req)
    assert "pip install 'pika>=1.3'" in str(err.value) and "--install" in str(err.value)
    assert machine.commands == []


@pytest.mark.parametrize(
    ("status", "euid", "hint"),
    [
        (100, 1000, "apt-get needs root: run as root, or sudo apt-get install redis-server"),
        (install.NOT_FOUND_STATUS, 0, "there is no apt-get here"),
        (100, 0, "see apt-get's output above"),
    ],
)
def test_a_failing_apt_get_says_why(
    status: int,
    euid: int,
    hint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine = FakeMachine(tmp_path, monkeypatch, apt_status=status)
    system, _req = fresh_peer("redis", machine, monkeypatch)
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    with pytest.raises(SystemMissingError) as err:
        system.ensure_installed(Installer(True, lambda _l: None, run=machine.run))
    assert f"apt-get install redis-server failed (exit status {status}); {hint}" in str(err.value)
    assert machine.commands == [APT_UPDATE, apt_install("redis-server")]  # no pip after that


def test_no_apt_get_on_the_machine_is_a_status_not_a_crash() -> None:
    assert install._run(["/nonexistent/apt-get", "install", "x"]) == install.NOT_FOUND_STATUS


# -- the real lookups -----------------------------------------------------------------------


def test_a_client_pip_just_wrote_is_importable_by_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    monkeypatch.syspath_prepend(str(site_dir))
    module = "rocketq_bench_fake_client"
    assert importlib.util.find_spec(module) is None  # the finder has listed the empty dir
    ran: list[list[str]] = []

    def pip(argv: Sequence[str]) -> int:
        ran.append(list(argv))
        (site_dir / module).mkdir()
        (site_dir / module / "__init__.py").write_text("")
        return 0

    req = Requirement(os.path.realpath("/bin/sh"), "dash", (Client(module, "fake-client>=1"),))
    Installer(True, lambda _l: None, run=pip).ensure("fake", req)
    assert ran == [[*PIP, "fake-client>=1"]]
    assert req.missing_clients() == []


def test_a_server_in_sbin_is_found_off_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    server = sbin / "some-server"
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(install, "_SBIN_DIRS", (str(sbin),))
    assert Requirement("some-server", "some-server").server_path() == str(server)
    assert Requirement("other-server", "other-server").missing_binary()
