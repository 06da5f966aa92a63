"""``rocketq bench transport``: a short run measures all three cases (the socket floor,
the remoting transport in one process and across two) and stops the echo server it
started."""

from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from rocketq.bench import transport_bench
from rocketq.cli.main import app


def test_a_short_run_measures_every_case() -> None:
    children_before = _children()
    result = CliRunner().invoke(app, ["bench", "transport", "-d", "0.3", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output.strip().splitlines()[-1])
    assert doc["bench"] == "transport"
    cases = doc["cases"]
    assert list(cases) == ["socket", "remoting-in-process", "remoting"]
    for case in cases.values():
        assert case["round_trips_per_s"] > 0 and 0 < case["p50_ms"] <= case["p99_ms"]
    assert doc["of_socket_floor"]["socket"] == 1.0
    assert "the socket floor" in result.output
    assert _children() == children_before  # the echo server and the socket child are gone


def test_the_echo_answers_like_a_broker_answers_a_send() -> None:
    request = transport_bench._request(16)
    answer = transport_bench._echo(None, request)  # type: ignore[arg-type]
    assert answer.is_response and answer.opaque == request.opaque
    assert set(answer.ext or {}) == {"msgId", "queueId", "queueOffset"}
    assert request.body == b"x" * 16


def _children() -> set[int]:
    """This process's live children (zombies excluded)."""
    out = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
                out.update(int(p) for p in f.read().split())
        except OSError:
            continue
    return {p for p in out if _state(p) not in ("Z", "")}


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""
