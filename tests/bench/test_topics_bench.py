"""``rocketq bench topics``: flags checked before anything starts, and a short run end to
end on real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rocketq.bench.profiling import summarize
from rocketq.bench.report import BenchOptionError
from rocketq.bench.topics_bench import parse_counts, run_topics_bench
from rocketq.cli.main import app


def test_counts_are_parsed_sorted_and_checked() -> None:
    assert parse_counts("1000,1,100,100") == [1, 100, 1000]
    for bad in ("", "a,b", "0,10", "1,1000000"):
        with pytest.raises(BenchOptionError) as info:
            parse_counts(bad)
        assert info.value.flag == "--topics"


def test_bad_flags_fail_before_anything_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "topics", "--topics", "x", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "comma list" in result.output
    result = CliRunner().invoke(
        app, ["bench", "topics", "--rounds", "0", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--rounds" in result.output
    with pytest.raises(BenchOptionError) as info:
        run_topics_bench([1], rounds=0, data_dir=str(tmp_path))
    assert info.value.flag == "--rounds"
    assert not any(tmp_path.iterdir())


def test_a_short_run_reports_every_count(tmp_path: Path) -> None:
    lines: list[str] = []
    profiles = tmp_path / "profiles"
    result = run_topics_bench(
        [1, 6],
        queues=2,
        concurrency=4,
        duration=0.5,
        data_dir=str(tmp_path / "data"),
        echo=lines.append,
        profile_dir=profiles,
        rounds=2,
    )
    steps = result["steps"]
    assert [s["topics"] for s in steps] == [1, 6]
    assert [s["created"] for s in steps] == [1, 5]
    for step in steps:
        assert step["msgs"] > 0 and step["failed"] == 0, step
        assert step["broker_rss_mb"] > 0
        assert step["create_total_s"] >= step["create_s"] > 0
        assert step["queues_ready_s"] >= step["create_s"]
        assert step["register_full_bytes"] > 0 and step["register_sent_bytes"] >= 0
        # What each message cost the broker's process and the producer's, in CPU.
        assert step["broker_cpu_us_per_msg"] > 0 and step["client_cpu_us_per_msg"] > 0
    assert steps[0]["ratio_to_one_topic"] == 1.0
    # Two rounds: each count's sends ran twice, counts in turn; the ratio is the median
    # of the rounds' ratios, each against the same round's one topic.
    assert result["rounds"] == 2
    for step in steps:
        assert len(step["round_msgs_per_s"]) == 2 and all(r > 0 for r in step["round_msgs_per_s"])
        assert step["round_msgs_per_s"][0] == step["msgs_per_s"]
    assert steps[0]["round_ratios_to_one_topic"] == [1.0, 1.0]
    six = steps[1]
    expected = [
        r / one
        for r, one in zip(six["round_msgs_per_s"], steps[0]["round_msgs_per_s"], strict=True)
    ]
    assert six["round_ratios_to_one_topic"] == pytest.approx(expected, abs=0.002)
    assert six["ratio_to_one_topic"] == pytest.approx(sum(expected) / 2, abs=0.002)
    assert any(line.startswith("[Round 2, topics 6]") for line in lines)
    assert any(line.startswith("topics 6: ratio to one topic per round ") for line in lines)
    assert any(line.lstrip().startswith("6 ") for line in lines)  # the table's last row
    json.dumps(result)  # one JSON line
    assert not any(p.name.startswith("bench-topics-") for p in (tmp_path / "data").iterdir())
    # --profile: the broker and the producer, per count, each summarized after its step.
    for count in (1, 6):
        for side in ("broker", "client"):
            profile = summarize(profiles / f"topics-{count}-{side}.txt")
            assert "MainThread" in profile.threads and profile.seconds is not None
            # The messages sent while it recorded (the first round's): --compare per message.
            step = result["steps"][0 if count == 1 else 1]
            assert profile.messages == step["msgs"] > 0, (profile.messages, step)
            assert any(
                line.startswith(f"{profiles / f'topics-{count}-{side}.txt'}: ") for line in lines
            )
