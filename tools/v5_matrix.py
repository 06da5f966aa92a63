"""The v5 conformance matrix: which official RocketMQ 5 client passes which scenario
against rocketq, as ``tests/conformance/test_v5_matrix.py`` finds it.

The test writes ``.build/v5-matrix.json`` and ``.build/v5-matrix.md`` when its module ends.
This module holds the matrix's clients and scenarios (the test is parametrized from them,
and a test checks that docs/compatibility.md lists the same), renders the table, and puts
the last run's table into docs/compatibility.md:

    python -m tools.v5_matrix                 # print the table of .build/v5-matrix.json
    python -m tools.v5_matrix --write-docs    # replace the table in docs/compatibility.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
RESULTS_JSON: Final = ROOT / ".build" / "v5-matrix.json"
RESULTS_MD: Final = ROOT / ".build" / "v5-matrix.md"
DOCS: Final = ROOT / "docs" / "compatibility.md"
DOCS_SECTION: Final = "## RocketMQ 5 clients: the conformance matrix"
# The table sits between these two comments in the docs section (the rendered page does
# not show them).
BEGIN: Final = "<!-- v5-matrix: begin (python -m tools.v5_matrix --write-docs) -->"
END: Final = "<!-- v5-matrix: end -->"

# Column key -> heading: the official clients, each run unmodified in its own process.
CLIENTS: Final[Mapping[str, str]] = {
    "python": "Python 5.1.2",
    "nodejs": "Node.js 1.0.8",
}

# Row key -> what the scenario shows (the runners' contract has the details).
SCENARIOS: Final[Mapping[str, str]] = {
    "send_normal": "normal send; each received field: id, tag, keys, properties, attempt, ...",
    "send_fifo": "FIFO send in two message groups: each group received in order",
    "send_delay": "delivery time 3 s ahead: not received before it",
    "transaction": "commit, rollback, and an open one committed through the broker's check",
    "simple_ack": "SimpleConsumer receive and ack: nothing acknowledged comes again",
    "change_invisible": "invisible duration changed to 2 s: back after ~2 s, attempt 2",
    "push_retry_dlq": "PushConsumer failures retried (attempts 1, 2, 3), then the DLQ",
    "push_fifo": "FIFO PushConsumer: in order, a failure retried in place, then the DLQ",
    "filter_tag": "tag subscription `TagA||TagB`: exactly those",
    "filter_sql": "SQL92 subscription: exactly the matching messages",
    "new_group": "a new group gets what was sent before it (a young queue starts at 0)",
    "two_brokers": "two broker groups through one endpoint: both store, all received",
    "volume_simple": "2,000 messages drained by one SimpleConsumer within the bound",
    "volume_push": "2,000 messages drained by one PushConsumer within the bound",
    "acl_tls": "ACL and TLS: signed send and receive; a wrong secret key refused",
}

Outcome = str  # "pass", "fail" or "not run"
OUTCOMES: Final = ("pass", "fail", "not run")


def render(outcomes: Mapping[str, Mapping[str, Outcome]]) -> str:
    """The markdown table: a row per scenario, a column per client; ``outcomes`` is
    client -> scenario -> outcome (a missing cell is "not run")."""
    head = "| scenario | " + " | ".join(CLIENTS.values()) + " |"
    rule = "|---|" + "---|" * len(CLIENTS)
    rows = [head, rule]
    for scenario in SCENARIOS:
        cells = [outcomes.get(client, {}).get(scenario, "not run") for client in CLIENTS]
        rows.append(f"| `{scenario}` | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def read_results(path: Path = RESULTS_JSON) -> dict[str, dict[str, Outcome]]:
    """client -> scenario -> outcome from the test's JSON (its ``cells``)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise SystemExit(
            f"{path} does not exist: run tests/conformance/test_v5_matrix.py"
        ) from None
    outcomes: dict[str, dict[str, Outcome]] = {}
    for cell in doc["cells"]:
        if cell["outcome"] not in OUTCOMES:
            raise SystemExit(f"{path}: unknown outcome {cell['outcome']!r}")
        outcomes.setdefault(cell["client"], {})[cell["scenario"]] = cell["outcome"]
    return outcomes


def docs_table(text: str) -> tuple[list[str], list[str]]:
    """The client headings and the scenario names of the table in the docs section."""
    start, end = text.find(BEGIN), text.find(END)
    if text.find(DOCS_SECTION) < 0 or not 0 <= start < end:
        raise ValueError(f"no table between {BEGIN!r} and {END!r} under {DOCS_SECTION!r}")
    lines = [ln.strip() for ln in text[start + len(BEGIN) : end].strip().splitlines()]
    table = [ln for ln in lines if ln.startswith("|")]
    if len(table) < 2:
        raise ValueError("the matrix table has no heading")
    clients = [c.strip() for c in table[0].strip("|").split("|")][1:]
    scenarios = []
    for row in table[2:]:
        match = re.fullmatch(r"\|\s*`([a-z_0-9]+)`\s*\|.*", row)
        if match is None:
            raise ValueError(f"a matrix row does not start with a `scenario`: {row!r}")
        scenarios.append(match[1])
    return clients, scenarios


def write_docs(table: str, path: Path = DOCS) -> None:
    """Replace the table between the markers of the docs section with ``table``."""
    text = path.read_text()
    docs_table(text)  # the markers and the section are there
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    path.write_text(text[:start] + "\n\n" + table + "\n" + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_JSON)
    parser.add_argument("--write-docs", action="store_true", help=f"update {DOCS.name}")
    args = parser.parse_args(argv)
    table = render(read_results(args.results))
    if args.write_docs:
        write_docs(table)
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
