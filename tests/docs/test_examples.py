"""The Python examples of the manual (docs/**/*.md and README.md) run against a real local
cluster.

Every fenced block whose language is ``python`` is a whole program: it runs in a process
of its own, with ``NAMESRV_ADDR`` naming the cluster's nameserver, and must exit 0 within
``EXAMPLE_TIMEOUT`` seconds. Examples may write the nameserver as ``"127.0.0.1:9876"`` (the
default port; the test puts the cluster's address in its place) or leave it out (the clients
then read ``NAMESRV_ADDR``); a RocketMQ 5 client's endpoint is written ``"127.0.0.1:8081"``
(the port `rocketq cluster up --grpc` asks for first; the test puts its broker's in its
place).

Blocks not meant to run are marked by their fence language: ``py`` is highlighted as Python
but not run (fragments, code that needs Spark or a Kubernetes cluster), though it must
still compile (top-level ``await`` allowed); ``sh``, ``toml``, ``yaml``, ``text`` ... are
never run. The cluster (one nameserver, one broker) is started
once for the module by the launcher ``rocketq cluster up`` uses, with message delay levels
short enough for the delayed-message and retry examples to finish in seconds.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from rocketq.cluster.launcher import ClusterSpec, LocalCluster

ROOT: Final = Path(__file__).resolve().parents[2]
DOCS: Final = ROOT / "docs"
# The address examples write for the nameserver, replaced by the test cluster's.
DEFAULT_NAMESRV: Final = "127.0.0.1:9876"
# The v2 endpoint examples write, replaced by the test broker's.
DEFAULT_V5_ENDPOINT: Final = "127.0.0.1:8081"
# Seconds one example may take (a consumer example waits for its messages within it).
EXAMPLE_TIMEOUT: Final = 20.0
# The opening fence of a block, its indentation and its language (info string's first word).
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<lang>[\w+-]*)[^\n]*$")
# Levels 1-3 are short so that delayed messages and retries (level 3 + reconsume times)
# arrive within an example's time.
EXAMPLE_BROKER_SETTINGS: Final = {
    "mapped_file_size_commit_log": str(64 * 1024 * 1024),
    "message_delay_level": "1s 1s 1s " + " ".join(["1s"] * 15),
    "enable_property_filter": "true",
}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page: where it starts (1-based line), language, text."""

    page: str
    line: int
    lang: str
    code: str

    @property
    def runs(self) -> bool:
        return self.lang == "python"

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def code_blocks(page: str, text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, indented ones (in admonitions) dedented."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        if j == len(lines):
            raise ValueError(f"{page}:{i + 1}: the code block is never closed")
        blocks.append(Block(page, i + 1, m.group("lang").lower(), textwrap.dedent("\n".join(body))))
        i = j + 1
    return blocks


def pages() -> list[Path]:
    """The manual's pages and the README, whose quick start must run as well."""
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def all_blocks() -> list[Block]:
    found: list[Block] = []
    for path in pages():
        found.extend(code_blocks(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    return found


EXAMPLES: Final = [b for b in all_blocks() if b.runs]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("docs-cluster"),
        broker_settings=EXAMPLE_BROKER_SETTINGS,
        metrics=False,
        grpc=True,
    )
    cluster = LocalCluster(spec)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_the_manual_has_examples_on_every_sdk_page() -> None:
    pages = {b.page for b in EXAMPLES}
    for page in sorted((DOCS / "sdk").glob("*.md")):
        assert str(page.relative_to(ROOT)) in pages, f"{page.name} has no runnable example"
    assert "docs/getting-started.md" in pages


def test_blocks_are_found_and_marked_by_language() -> None:
    page = textwrap.dedent(
        """\
        ```python
        print("runs")
        ```

        ```py
        fragment()
        ```

        !!! note
            ```python title="in an admonition"
            print("indented")
            ```

        ```sh
        rocketq send -t T -b x
        ```
        """
    )
    blocks = code_blocks("p.md", page)
    assert [(b.line, b.lang, b.runs) for b in blocks] == [
        (1, "python", True),
        (5, "py", False),
        (10, "python", True),
        (14, "sh", False),
    ]
    assert blocks[2].code == 'print("indented")'


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.lang == "py"], ids=str)
def test_fragment_compiles(block: Block) -> None:
    compile(block.code, str(block), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.mark.parametrize("block", EXAMPLES, ids=str)
def test_example_runs(block: Block, cluster: LocalCluster, tmp_path: Path) -> None:
    namesrv = cluster.namesrv_addr
    broker = cluster.brokers[0]
    code = block.code.replace(DEFAULT_NAMESRV, namesrv)
    code = code.replace(DEFAULT_V5_ENDPOINT, f"{broker.host}:{broker.grpc_port}")
    env = {**os.environ, "NAMESRV_ADDR": namesrv, "HOME": str(tmp_path)}
    with subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=EXAMPLE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{block} did not finish in {EXAMPLE_TIMEOUT} s:\n{out}\n{err}")
    assert proc.returncode == 0, f"{block} failed:\n{out}\n{err}"


_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)(?:#[^)\s]*)?\)")


def test_readme_links_point_to_files() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = _LINK.findall(text)
    assert any(link.startswith("docs/") for link in links), "the README links to no docs page"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
