"""``rocketq bench fuzz``: each harness under atheris in a process of its own, bounded in
time (and optionally in executions), then what it did and what it found.

Per harness the worker (``worker.py``) fuzzes from the checked-in seeds and regressions
plus a working corpus that grows between runs (``<findings>/<harness>/corpus/``); its
inputs that are findings land in ``<findings>/<harness>/`` (``crash-``, ``hang-`` and
``oom-<sha1>`` with a ``.txt`` naming the exception, or libFuzzer's own ``timeout-`` and
``oom-`` artifacts), its output in ``<findings>/<harness>/fuzz.log``. A worker that
outlives its time by ``GRACE`` seconds is stopped (its process group, by its pid).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from rocketq.bench.report import BenchOptionError, json_line

PACKAGE: Final = Path(__file__).resolve().parent
CORPUS: Final = PACKAGE / "corpus"
REGRESSIONS: Final = PACKAGE / "regressions"
# The harness names (targets.HARNESSES), listed here so that the runner and the CLI do
# not import every decoder; tests/bench/test_fuzz.py checks the two agree.
HARNESS_NAMES: Final = (
    "remoting_frame",
    "fastjson",
    "broker_requests",
    "nameserver_requests",
    "send_batch",
    "records",
    "message_properties",
    "register_body",
    "route_body",
    "topic_body",
    "sql92",
    "sdk_answers",
    "ha_frame",
    "raft_frame",
    "auth_body",
    "plain_acl",
    "auth_metadata",
    "access_check",
    "v2_receipt",
    "v2_telemetry",
    "checkpoint",
    "queue_ends",
    "topics_files",
    "config_toml",
)
GRACE: Final = 60.0  # start-up (imports, a broker) and libFuzzer's final report
ARTIFACT: Final = re.compile(r"^(crash|hang|oom|timeout|leak|slow-unit)-[0-9a-f]+$")
_STAT: Final = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)
_CORP: Final = re.compile(r"corp: (\d+)/")
_DONE: Final = re.compile(r"Done (\d+) runs in (\d+) second")


@dataclass(frozen=True, slots=True)
class FuzzOptions:
    """What ``rocketq bench fuzz`` was asked for; checked at once."""

    seconds: float = 180.0
    harnesses: tuple[str, ...] = HARNESS_NAMES
    runs: int = 0  # executions per harness (0: until the time is up)
    findings: Path = Path("fuzz-findings")
    jobs: int = 1
    time_limit: float = 1.0
    memory_mb: int = 2048
    max_len: int = 16384

    def __post_init__(self) -> None:
        if self.seconds < 1:
            raise BenchOptionError("--seconds", "fuzz each harness for 1 second at least")
        unknown = [h for h in self.harnesses if h not in HARNESS_NAMES]
        if unknown:
            raise BenchOptionError(
                "--harness", f"no harness {unknown[0]!r}; the harnesses: {', '.join(HARNESS_NAMES)}"
            )
        if self.runs < 0 or self.jobs < 1 or self.max_len < 1 or self.memory_mb < 64:
            raise BenchOptionError("--runs", "runs >= 0, jobs >= 1, max_len >= 1, memory >= 64 MB")
        if self.time_limit <= 0:
            raise BenchOptionError("--time-limit", "the time limit per input must be positive")


@dataclass(frozen=True, slots=True)
class FindingFile:
    """A finding's input as written, and what it raised."""

    harness: str
    kind: str
    path: str
    exception: str
    input_hex: str  # the first 256 bytes


@dataclass(slots=True)
class HarnessRun:
    """One harness's run: executions, their rate, the corpus it ended with, what it found."""

    harness: str
    executions: int = 0
    exec_per_s: float = 0.0
    corpus: int = 0
    new_units: int = 0
    seconds: float = 0.0
    exit_code: int | None = None
    stopped: bool = False  # outlived its time and was killed
    findings: list[FindingFile] = field(default_factory=list)
    log: str = ""

    @property
    def ok(self) -> bool:
        """No finding, and the worker ended as libFuzzer ends a bounded run."""
        return not self.findings and self.exit_code == 0 and not self.stopped


def _describe(path: Path, log_text: str) -> str:
    note = path.with_name(path.name + ".txt")
    if note.exists():
        lines = note.read_text(errors="replace").splitlines()
        return lines[1] if len(lines) > 1 else lines[0] if lines else "?"
    kind = path.name.split("-", 1)[0]
    for line in log_text.splitlines():
        if line.startswith("==") and "ERROR: libFuzzer" in line:
            return line.split("ERROR: ", 1)[1]
    return f"libFuzzer {kind}"


def _artifacts(folder: Path) -> set[Path]:
    if not folder.is_dir():
        return set()
    return {p for p in folder.iterdir() if p.is_file() and ARTIFACT.match(p.name)}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the worker's process group (it leads one: start_new_session), TERM then KILL."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def worker_command(name: str, options: FuzzOptions, folder: Path) -> list[str]:
    """The worker's command line for one harness."""
    dirs = [folder / "corpus", CORPUS / name]
    if (REGRESSIONS / name).is_dir():
        dirs.append(REGRESSIONS / name)
    libfuzzer = [
        f"-max_total_time={max(1, round(options.seconds))}",
        f"-timeout={max(10, round(options.time_limit * 10))}",
        f"-rss_limit_mb={options.memory_mb + 1024}",
        f"-max_len={options.max_len}",
        f"-artifact_prefix={folder}/",
        "-print_final_stats=1",
    ]
    if options.runs:
        libfuzzer.append(f"-runs={options.runs}")
    return [
        sys.executable, "-m", "rocketq.bench.fuzz.worker", name,
        "--findings", str(folder),
        "--time-limit", str(options.time_limit),
        "--memory-mb", str(options.memory_mb),
        "--", *libfuzzer, *map(str, dirs),
    ]  # fmt: skip


def run_harness(name: str, options: FuzzOptions) -> HarnessRun:
    """Fuzz one harness in a worker process; its figures and its new findings."""
    folder = (options.findings / name).resolve()
    (folder / "corpus").mkdir(parents=True, exist_ok=True)
    scratch = folder / "tmp"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    before = _artifacts(folder)
    log_path = folder / "fuzz.log"
    run = HarnessRun(name, log=str(log_path))
    env = {**os.environ, "TMPDIR": str(scratch)}  # the worker's scratch files, removed below
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            worker_command(name, options, folder),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            run.exit_code = proc.wait(options.seconds + GRACE)
        except subprocess.TimeoutExpired:
            run.stopped = True
            _stop(proc)
            run.exit_code = proc.returncode
        except BaseException:
            _stop(proc)
            raise
    run.seconds = time.monotonic() - started
    shutil.rmtree(scratch, ignore_errors=True)
    text = log_path.read_text(errors="replace")
    stats = {k: int(v) for k, v in _STAT.findall(text)}
    run.executions = stats.get("number_of_executed_units", 0)
    run.exec_per_s = float(stats.get("average_exec_per_sec", 0))
    run.new_units = stats.get("new_units_added", 0)
    if not run.executions and (done := _DONE.findall(text)):
        runs, secs = map(int, done[-1])
        run.executions, run.exec_per_s = runs, runs / max(secs, 1)
    corp = _CORP.findall(text)
    run.corpus = int(corp[-1]) if corp else 0
    for path in sorted(_artifacts(folder) - before):
        data = path.read_bytes()
        run.findings.append(
            FindingFile(name, path.name.split("-", 1)[0], str(path), _describe(path, text),
                        data[:256].hex())
        )  # fmt: skip
    return run


def run_fuzz(options: FuzzOptions, echo: Callable[[str], None]) -> list[HarnessRun]:
    """Every chosen harness, ``options.jobs`` at a time; a line per harness as it ends."""

    def one(name: str) -> HarnessRun:
        run = run_harness(name, options)
        echo(line(run))
        for f in run.findings:
            echo(f"  {f.kind}: {f.exception}\n    input {f.path}\n    hex {f.input_hex}")
        return run

    echo(
        f"fuzzing {len(options.harnesses)} harnesses for {options.seconds:g} s each, "
        f"{options.jobs} at a time; findings under {options.findings}/"
    )
    with ThreadPoolExecutor(options.jobs) as pool:
        return list(pool.map(one, options.harnesses))


def line(run: HarnessRun) -> str:
    """One harness's figures."""
    status = "stopped" if run.stopped else f"exit {run.exit_code}"
    return (
        f"[{run.harness}] executions: {run.executions:,} | exec/s: {run.exec_per_s:,.0f} | "
        f"corpus: {run.corpus} ({run.new_units} new) | findings: {len(run.findings)} | "
        f"{run.seconds:.0f} s, {status}"
    )


def summary(runs: Sequence[HarnessRun]) -> str:
    found = sum(len(r.findings) for r in runs)
    bad = [r.harness for r in runs if r.exit_code != 0 or r.stopped]
    tail = f"; workers that did not end cleanly: {', '.join(bad)}" if bad else ""
    executions = sum(r.executions for r in runs)
    return f"{len(runs)} harnesses, {executions:,} executions, {found} findings{tail}"


def json_report(runs: Sequence[HarnessRun]) -> str:
    """One JSON object on one line, as the other bench commands print with --json."""
    return json_line(
        {
            "harnesses": [
                {
                    **{k: v for k, v in asdict(r).items() if k != "findings"},
                    "exec_per_s": round(r.exec_per_s, 1),
                    "seconds": round(r.seconds, 1),
                    "findings": [asdict(f) for f in r.findings],
                }
                for r in runs
            ],
            "executions": sum(r.executions for r in runs),
            "findings": sum(len(r.findings) for r in runs),
        }
    )
