"""``rocketq bench produce --compare-security`` and ``rocketq bench replication
--compare-security``: tiny runs on real clusters (plain, auth, tls, auth_tls) whose reports
carry every variant, both loads and the ratios to plain; the plain clients sign nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rocketq.auth.credentials import load_credentials
from rocketq.bench.replication_bench import replication_security_bench
from rocketq.bench.security_bench import (
    LOADS,
    VARIANTS,
    table,
    unsigned_by_default,
)
from rocketq.cli.main import app


def _check_report(result: dict[str, Any], rounds: int) -> None:
    assert set(result["variants"]) == {"plain", "auth", "tls", "auth_tls"}
    assert result["settings"] == {
        "plain": {"auth": False, "tls": False},
        "auth": {"auth": True, "tls": False},
        "tls": {"auth": False, "tls": True},
        "auth_tls": {"auth": True, "tls": True},
    }
    for name, loads in result["variants"].items():
        assert set(loads) == set(LOADS)
        for load, s in loads.items():
            # Every variant's client reached its cluster: signed where auth is on, over
            # TLS where TLS is on, nothing refused.
            assert s["failed"] == 0, (name, load, s)
            assert len(s["runs_msgs_per_s"]) == rounds
            assert all(rate > 0 for rate in s["runs_msgs_per_s"]), (name, load, s)
            assert len(s["round_ratios"]) == rounds
            assert s["ratio"] > 0
            expected = [
                round(v / p, 3)
                for v, p in zip(
                    s["runs_msgs_per_s"],
                    result["variants"]["plain"][load]["runs_msgs_per_s"],
                    strict=True,
                )
            ]
            assert s["round_ratios"] == pytest.approx(expected, abs=0.002)
            # CPU per message of the client and the cluster's processes, and its ratio.
            assert s["cpu_us_per_msg"] > 0 and s["cpu_ratio"] > 0, (name, load, s)
            assert len(s["round_cpu_ratios"]) == rounds
    for load in LOADS:
        assert result["variants"]["plain"][load]["ratio"] == 1.0
        assert result["variants"]["plain"][load]["cpu_ratio"] == 1.0
    goal = result["variants"]["auth"]
    assert result["auth_within_goal"] == all(goal[load]["ratio"] >= 0.95 for load in LOADS)


def test_replication_compares_the_four_variants_of_each_kind(tmp_path: Path) -> None:
    result = replication_security_bench(
        modes=["lone"],
        rounds=1,
        size=256,
        concurrency=4,
        batch=1,
        duration=0.3,
        data_dir=str(tmp_path),
        echo=lambda line: None,
        warmup=0.1,
    )
    assert result["bench"] == "replication-security"
    assert list(result["modes"]) == ["lone"]
    _check_report(result["modes"]["lone"], rounds=1)
    assert result["auth_within_goal"] == result["modes"]["lone"]["auth_within_goal"]


def test_unknown_kind_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown cluster 'paxos'"):
        replication_security_bench(
            modes=["paxos"],
            rounds=1,
            size=1,
            concurrency=1,
            batch=1,
            duration=0.1,
            data_dir=str(tmp_path),
            echo=lambda line: None,
        )
    assert not any(tmp_path.iterdir())


def test_cli_produce_compare_security_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "bench", "produce", "--embedded", "--compare-security", "--rounds", "2",
            "--duration", "0.2", "-c", "2", "-s", "128", "--queues", "2",
            "--data-dir", str(tmp_path), "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    doc = json.loads(lines[-1])
    assert doc["bench"] == "produce-security" and doc["concurrency"] == 2
    assert doc["shape"] == "lone"
    _check_report(doc, rounds=2)
    # Each round starts one variant further along.
    order = [
        line.split(",")[0].removeprefix("--- ") for line in lines if "in flight (round" in line
    ]
    names = list(VARIANTS)
    second = names[1:] + names[:1]
    assert order == names + names + second + second
    report = table(doc)
    assert any(line.startswith("auth_tls  2 in flight") for line in report)
    assert report[-1].startswith("auth costs ") and "in CPU per message" in report[-1]
    assert not any(tmp_path.iterdir())  # every cluster's directory removed
    assert "--- summary ---" in result.output


def test_cli_compare_security_needs_embedded(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "produce", "--compare-security", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "add --embedded" in result.output
    assert not any(tmp_path.iterdir())


def test_plain_clients_sign_nothing_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ROCKETQ_ACCESS_KEY", "ak")
    monkeypatch.setenv("ROCKETQ_SECRET_KEY", "sk")
    assert load_credentials() is not None
    with unsigned_by_default():
        assert load_credentials() is None
        assert "ROCKETQ_ACCESS_KEY" not in os.environ
    assert os.environ["ROCKETQ_ACCESS_KEY"] == "ak" and os.environ["ROCKETQ_SECRET_KEY"] == "sk"


def test_a_home_credentials_file_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from rocketq.bench.security_bench import SecurityBenchError

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("ROCKETQ_ACCESS_KEY", "ROCKETQ_SECRET_KEY", "ROCKETQ_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".rocketq").mkdir()
    (tmp_path / ".rocketq" / "credentials").write_text('access_key = "a"\nsecret_key = "b"\n')
    with pytest.raises(SecurityBenchError, match="credentials exists"), unsigned_by_default():
        pass


def test_cli_produce_signs_and_uses_tls_against_a_secured_cluster(tmp_path: Path) -> None:
    from rocketq.cluster.launcher import ClusterSpec, LocalCluster

    spec = ClusterSpec(data_dir=tmp_path / "cluster", auth=True, tls=True, metrics=False)
    with LocalCluster(spec) as cluster:
        client = cluster.client_settings()
        base = ["bench", "produce", "-n", cluster.namesrv_addr, "--messages", "20", "-c", "2"]
        secured = [
            *base,
            "--access-key", client["access_key"], "--secret-key", client["secret_key"],
            "--tls", "--tls-ca-file", client["tls_ca_file"], "--json",
        ]  # fmt: skip
        result = CliRunner().invoke(app, secured, env={"ROCKETQ_ACCESS_KEY": None})
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output.strip().splitlines()[-1])
        assert doc["msgs"] == 20 and doc["failed"] == 0
        # Without credentials the same cluster refuses the benchmark's first request.
        with unsigned_by_default():
            refused = CliRunner().invoke(
                app, [*base, "--tls", "--tls-ca-file", client["tls_ca_file"]]
            )
        assert refused.exit_code == 1
        assert "NO_PERMISSION" in refused.output or "no credentials" in refused.output, (
            refused.output
        )


def test_settle_waits_for_the_clusters_to_be_quiet_and_gives_up_at_its_limit() -> None:
    from rocketq.bench.security_bench import settle

    spent = [0.0]

    def busy() -> float:  # a whole core, however long one waits
        spent[0] += 1.0
        return spent[0]

    waited = settle(lambda: 1.0, idle=0.02, limit=2.0)  # no CPU spent: quiet at once
    assert waited is not None and waited < 2.0
    started = time.monotonic()
    assert settle(busy, idle=0.02, limit=0.6) is None
    assert 0.6 <= time.monotonic() - started < 3.0
