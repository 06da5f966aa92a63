from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rocketq.cli.main import app

runner = CliRunner()


def test_bench_store_prints_tps_and_json(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["bench", "store", "--messages", "500", "--json", "--dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert any(line.startswith("[Store] Send TPS:") for line in lines)
    assert any(line.startswith("[Raw]") for line in lines)
    fields = json.loads(lines[-1])
    assert fields["messages"] == fields["stored_messages"] == 500
    assert fields["flush"] == "async" and fields["writers"] == 1 and fields["batch"] == 32
    assert fields["msgs_per_s"] > 0 and fields["ratio"] > 0
    assert list(tmp_path.iterdir()) == []  # the run's directory is removed


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--flush", "fast"], ["--flush", "async", "sync"]),
        (["--size", "0"], ["--size"]),
        (["--writers", "0"], ["--writers"]),
        (["--segment-size", "8192"], ["--batch", "--segment-size"]),
    ],
)
def test_bad_flags_are_usage_errors(args: list[str], words: list[str]) -> None:
    result = runner.invoke(app, ["bench", "store", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    for word in words:
        assert word in result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["replication", "--modes", "raft,paxos"], ["paxos", "async_master", "raft"]),
        (["replication", "--rounds", "0"], ["--rounds"]),
        (["failover", "--set", "novalue"], ["KEY=VALUE", "novalue"]),
        (["failover", "--kills", "0"], ["--kills"]),
    ],
)
def test_bad_replication_bench_flags_start_nothing(args: list[str], words: list[str]) -> None:
    result = runner.invoke(app, ["bench", *args], env={"COLUMNS": "200"})
    assert result.exit_code != 0
    assert all(w in result.output for w in words), result.output
    assert "Traceback" not in result.output


# -- help pages: paragraphs flow at any width ----------------------------------------------


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The app, every sub-app and every command, as the words that name it."""
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _command_paths(sub, (*path, name))


HELP_PAGES = list(_command_paths(typer.main.get_command(app)))
NARROW, WIDE = 80, 300  # at 300 columns no help text here needs to wrap
# Runs of text: words one space apart; table columns are two or more spaces apart.
TEXT_RUN = re.compile(r"\S+(?: \S+)*")


def _help_lines(path: tuple[str, ...], width: int) -> list[str]:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def _sentence_breaks(lines: list[str]) -> set[tuple[str, str]]:
    """Where a help text ends a line mid-sentence and the next line goes on with it, as
    (last word before the break, first word after it).

    Outside the panels, consecutive lines are one paragraph. In a panel, a line goes on with
    the cell above it when its text starts in that cell's column and the names column (the
    options' "*" and names, the commands' names) is empty; annotations such as "[x>=1]" or
    "[default: 8]" are not prose and are skipped.
    """
    breaks: set[tuple[str, str]] = set()
    names_x = -1  # where the rows of the current panel start
    above: list[tuple[int, str]] = []
    for line in lines:
        if line.lstrip().startswith(("╭", "╰")):  # a panel's top or bottom border
            names_x, above = -1, []
            continue
        in_panel = "│" in line
        runs = [(m.start(), m.group()) for m in TEXT_RUN.finditer(line.replace("│", " "))]
        if in_panel and names_x < 0 and runs:
            names_x = runs[0][0]
        x, text = next(((x, t) for x, t in runs if not t.startswith("[")), (-1, ""))
        # "*  --name": an option without the required mark starts 3 columns in.
        goes_on = bool(text) and (not in_panel or x > names_x + 3)
        if goes_on and text[0].islower():
            breaks.update(
                (before.split()[-1], text.split()[0])
                for bx, before in above
                if bx == x and before[-1] not in ".:;!?"
            )
        above = runs
    return breaks


@pytest.mark.parametrize("path", HELP_PAGES, ids=lambda p: " ".join(("rocketq", *p)))
def test_help_paragraphs_flow_at_any_width(path: tuple[str, ...]) -> None:
    """A line break that stays put whatever the width was made by hand in the source: the
    help formatter wraps a paragraph where the terminal ends, never mid-sentence at a fixed
    word (docstrings are wrapped at 100 columns in the source, Markdown re-flows them)."""
    narrow, wide = _help_lines(path, NARROW), _help_lines(path, WIDE)
    assert max(map(len, wide)) > NARROW  # the terminal width did reach the formatter
    fixed = _sentence_breaks(narrow) & _sentence_breaks(wide)
    assert not fixed, f"sentences broken by hand at {sorted(fixed)}:\n" + "\n".join(wide)


def test_the_help_check_sees_wrapped_lines() -> None:
    """The detector is not blind: at 80 columns long help texts do wrap mid-sentence."""
    found = set().union(*(_sentence_breaks(_help_lines(p, NARROW)) for p in HELP_PAGES))
    assert len(found) > 10, found


def test_help_text_is_shown_as_written() -> None:
    """Markdown help: brackets and angle brackets in help texts survive the formatter (Rich
    markup would take "[bench]" for a style tag; Markdown takes a bare <data-dir> for HTML,
    so the source quotes it as code)."""
    assert "rocketq[bench]" in "".join(_help_lines(("bench", "peers"), WIDE))
    assert "<data-dir>/cluster.json" in "".join(_help_lines(("cluster", "down"), WIDE))
