"""Bad options of ``rocketq chaos run|check`` get an error naming the flag and the fix, and
start nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.chaos.faults import FAULT_KINDS, parse_faults
from rocketq.chaos.history import ChaosError
from rocketq.chaos.runner import ChaosOptions, ChaosRun
from rocketq.chaos.workers import worker_env
from rocketq.chaos.workload import client_settings
from rocketq.cli.main import app


def test_fault_lists_parse_in_order_without_repeats() -> None:
    assert parse_faults("kill-master, pause,kill-master") == ("kill-master", "pause")
    assert set(parse_faults(",".join(FAULT_KINDS))) == set(FAULT_KINDS)


@pytest.mark.parametrize("text", ["", "kill-everything", "pause,nuke"])
def test_unknown_faults_are_named(text: str) -> None:
    with pytest.raises(ChaosError, match=r"--faults: unknown fault .*choose from kill-master"):
        parse_faults(text)


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"replication": "none"}, "--replication"),
        ({"role": "SLAVE"}, "--role"),
        ({"groups": 0}, "--groups"),
        ({"producers": 0}, "--producers"),
        ({"duration": 0}, "--duration"),
        ({"interval": -1}, "--interval"),
        ({"fault_duration": float("nan")}, "--fault-duration"),
        ({"rate": 0}, "--rate"),
        ({"faults": ("kill-consumer",), "consumers": 1}, "--consumers"),
    ],
)
def test_bad_options_name_their_flag(changes: dict[str, object], flag: str, tmp_path: Path) -> None:
    opts = ChaosOptions(data_dir=tmp_path / "run", **changes)  # type: ignore[arg-type]
    with pytest.raises(ChaosError, match=f"^{flag}: "):
        opts.validate()
    assert not (tmp_path / "run").exists()


def test_a_data_dir_with_an_earlier_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("")
    run = ChaosRun(ChaosOptions(data_dir=tmp_path), echo=lambda _line: None)
    with pytest.raises(ChaosError, match="holds an earlier run"):
        run.run()
    assert run.cluster is None  # nothing was started


def test_cli_bad_fault_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["chaos", "run", "--faults", "melt", "--data-dir", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert "unknown fault melt" in result.output
    assert not (tmp_path / "x").exists()


def test_cli_check_of_a_missing_history_says_where_histories_come_from(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["chaos", "check", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1
    assert "no such history" in result.output


def test_a_second_signal_does_not_cut_the_teardown_short() -> None:
    """Inside the teardown a Ctrl-C is held until the end, then raised."""
    import os
    import signal

    from rocketq.chaos.runner import _signals_held

    # What SIGINT did before (a shell's background job starts with it ignored) comes back.
    before = signal.getsignal(signal.SIGINT)
    finished = False
    with pytest.raises(KeyboardInterrupt), _signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is before


# ---------------------------------------------------------------- auth and TLS


def test_auth_and_tls_are_off_by_default_and_recorded_in_the_run_record(tmp_path: Path) -> None:
    plain = ChaosOptions(data_dir=tmp_path)
    assert (plain.auth, plain.tls) == (False, False)
    assert plain.security == "auth off, TLS off"
    secured = ChaosOptions(data_dir=tmp_path, auth=True, tls=True)
    doc = secured.to_dict()
    assert (doc["auth"], doc["tls"]) == (True, True)
    assert secured.security == "auth on, TLS on"


def test_tls_without_trustme_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "trustme" else real(name, *a)
    )
    with pytest.raises(ChaosError, match=r"^--tls: .*rocketq\[tls\]"):
        ChaosOptions(data_dir=tmp_path / "run", tls=True).validate()
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("auth", "tls"), [(True, True), (True, False), (False, True)])
def test_the_run_s_cluster_gets_the_options_security(tmp_path: Path, auth: bool, tls: bool) -> None:
    """The cluster the run starts has auth and TLS as asked, its secrets and certificates
    in the run's directory, and the clients' settings and environment follow."""
    run = ChaosRun(ChaosOptions(data_dir=tmp_path, auth=auth, tls=tls), echo=lambda _l: None)
    cluster, partitioner = run._make_cluster()
    assert partitioner is None
    assert (cluster.spec.auth, cluster.spec.tls) == (auth, tls)
    assert cluster.data_dir == tmp_path / "cluster"
    settings = cluster.client_settings()
    env = worker_env(cluster.client_env(), base={})
    assert ("access_key" in settings) == auth
    assert (env.get("ROCKETQ_CREDENTIALS_FILE") is not None) == auth
    assert settings.get("tls", False) == tls
    assert client_settings(env) == {
        **({"credentials_file": str(cluster.secrets.admin_file)} if cluster.secrets else {}),
        **({"tls": True, "tls_ca_file": str(cluster.certs.ca_file)} if cluster.certs else {}),
    }


def test_workers_get_the_cluster_s_client_environment_and_not_the_harness_s() -> None:
    base = {
        "PATH": "/bin",
        "ROCKETQ_ACCESS_KEY": "someone-else",
        "ROCKETQ_SECRET_KEY": "their-secret",
        "ROCKETQ_TLS": "false",
        "ROCKETQ_TLS_CERT_FILE": "/elsewhere.pem",
        "ROCKETQ_LOG_LEVEL": "INFO",
    }
    cluster_env = {
        "NAMESRV_ADDR": "127.0.0.1:9876",
        "ROCKETQ_CREDENTIALS_FILE": "/run/secrets/admin.credentials",
        "ROCKETQ_TLS": "true",
        "ROCKETQ_TLS_CA_FILE": "/run/tls/ca.pem",
    }
    env = worker_env(cluster_env, base=base)
    assert env == {"PATH": "/bin", "ROCKETQ_LOG_LEVEL": "INFO", **cluster_env}
    assert client_settings(env) == {
        "credentials_file": "/run/secrets/admin.credentials",
        "tls": True,
        "tls_ca_file": "/run/tls/ca.pem",
    }
    assert client_settings({"PATH": "/bin"}) == {}
    assert client_settings({"ROCKETQ_TLS": "0", "ROCKETQ_TLS_CA_FILE": "/x"}) == {}


def test_cli_auth_and_tls_reach_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rocketq.chaos.runner as runner

    seen: list[ChaosOptions] = []

    class Recorder:
        def __init__(self, opts: ChaosOptions, echo: object = None) -> None:
            seen.append(opts)
            raise ChaosError("recorded")

    monkeypatch.setattr(runner, "ChaosRun", Recorder)
    for flags, expected in (([], (False, False)), (["--auth", "--tls"], (True, True))):
        result = CliRunner().invoke(
            app, ["chaos", "run", *flags, "--data-dir", str(tmp_path / "x")]
        )
        assert result.exit_code == 2 and "recorded" in result.output
        assert (seen[-1].auth, seen[-1].tls) == expected
    assert not (tmp_path / "x").exists()


def test_lab_certificates_name_every_address_of_the_lab(tmp_path: Path) -> None:
    """Brokers in network namespaces are dialled at the lab's addresses: the certificates
    the launcher finds in the run's directory name them (no namespace is made here)."""
    from cryptography import x509

    from rocketq.chaos.netns import NetnsCluster, NetnsLab
    from rocketq.cluster.launcher import ClusterSpec

    lab = NetnsLab(3)
    spec = ClusterSpec(data_dir=tmp_path, replication="raft", auth=True, tls=True)
    cluster = NetnsCluster(spec, lab)
    assert cluster.certs is not None
    cert = x509.load_pem_x509_certificate(cluster.certs.cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    assert {"127.0.0.1", lab.gateway, *(h.ip for h in lab.hosts)} <= ips
    assert {b.host for b in cluster.brokers} <= ips
    # Made once: a second handle on the same directory keeps them.
    before = cluster.certs.cert_file.read_bytes()
    assert NetnsCluster(spec, lab).certs is not None
    assert cluster.certs.cert_file.read_bytes() == before


def test_a_lab_closes_even_with_a_process_left_inside_and_the_next_one_gets_new_names() -> None:
    """A process still running in a host keeps its namespace (and the veth into the
    bridge) alive after ``ip netns del``; closing the lab kills it first, so nothing is
    left, and a second lab of this process never reuses the first one's names."""
    import subprocess

    from rocketq.chaos.netns import NetnsLab, existing, netns_unavailable_reason
    from tests.system_deps import unavailable

    reason = netns_unavailable_reason()
    if reason is not None:
        unavailable(f"the lab test cannot run: {reason}")
    first, second = NetnsLab(2), NetnsLab(2)
    assert first.bridge != second.bridge
    assert not set(first.namespaces()) & set(second.namespaces())
    assert first.gateway != second.gateway
    with first as lab:
        stray = subprocess.Popen(
            [*lab.hosts[1].exec_prefix(), "sleep", "300"], start_new_session=True
        )
    try:
        assert stray.wait(timeout=15) != 0
    finally:
        if stray.poll() is None:
            stray.kill()
    assert existing(first.namespaces()) == []
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert first.bridge not in links
    with second:  # its own names, so it builds whatever the first left
        pass
    assert existing(second.namespaces()) == []
