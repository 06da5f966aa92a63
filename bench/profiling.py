"""Where a benchmark's time goes: py-spy profiles of its processes, and their summary.

:func:`recording` runs ``py-spy record --format raw`` against processes for as long as its
``with`` block lasts (``rocketq bench peers --profile``, ``rocketq bench replication
--profile``), one file of collapsed stacks per process. :func:`summarize` reads such a file
and :func:`format_summary` prints what ``rocketq bench profile`` shows: the samples of each
thread (with the time it was recorded, kept beside the file, the share of that time each
thread was busy: py-spy leaves idle samples out), and for the busiest thread (an event
loop, usually) each function's share of its samples, by itself ("self") and with what it
calls ("total"). :func:`compare` sets two profiles side by side (``rocketq bench profile
BASE OTHER --compare``): each function's own samples in both, as microseconds of CPU per
message when the benchmark noted how many messages went by while it recorded
(:func:`note_messages`, ``rocketq bench topics --profile``), else as shares of all samples;
the functions that grew most first.

py-spy sees Python frames only: in the compiled build (mypyc) the time of a compiled
function shows under the nearest Python frame that called it, so a profile that should name
the hot path's functions is taken with ``ROCKETQ_PURE=1``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

SAMPLE_RATE: Final = 200  # Hz
STOP_TIMEOUT: Final = 10.0  # s for py-spy to write its file after SIGINT

# "name (path/file.py:123)" -> "name (path/file.py)": lines of one function count together.
_LINE: Final = re.compile(r":\d+\)$")
_THREAD: Final = re.compile(r"^thread \((?:0x)?[0-9a-fA-F]+\)(?::\s*(.*))?$")
_PROCESS: Final = re.compile(r"^process \d+:")


class ProfileError(Exception):
    """A profile file that cannot be read as py-spy's collapsed stacks."""


def find_py_spy() -> str | None:
    """py-spy from PATH, or beside this Python (a virtualenv that is not activated)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which("py-spy", path=path)


@contextlib.contextmanager
def recording(
    targets: Sequence[tuple[str, int]],
    out_dir: Path,
    echo: Callable[[str], None],
    *,
    rate: int = SAMPLE_RATE,
) -> Iterator[dict[str, Path]]:
    """Record each (label, pid) of ``targets`` into ``out_dir/<label>.txt`` while the block
    runs; -> label -> file. Each py-spy is stopped by its pid when the block is left
    (SIGINT: it writes its file), killed if it does not exit in time. Without py-spy, says
    so and records nothing."""
    spy = find_py_spy()
    if spy is None:
        echo("py-spy not found (pip install 'rocketq[profile]'): no profile")
        yield {}
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    running: list[subprocess.Popen[bytes]] = []
    files: dict[str, Path] = {}
    started = time.monotonic()
    try:
        for label, pid in targets:
            out = out_dir / f"{label}.txt"
            argv = [spy, "record", "--format", "raw", "--rate", str(rate), "--threads"]
            argv += ["--nonblocking", "--pid", str(pid), "-o", str(out)]
            with open(out_dir / f"{label}.py-spy.log", "wb") as log:
                running.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
            files[label] = out
        yield files
    finally:
        for proc in running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        seconds = time.monotonic() - started
        for proc in running:
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for out in files.values():
            # How long each was recorded: its threads' busy shares of the wall time.
            meta = {"seconds": round(seconds, 3), "rate": rate}
            _meta_path(out).write_text(json.dumps(meta) + "\n")


def _meta_path(profile: Path) -> Path:
    return profile.with_name(profile.stem + ".meta.json")


@dataclass
class ThreadProfile:
    """One thread's samples, and each function's samples by itself and in all."""

    name: str
    samples: int = 0
    self_samples: Counter[str] = field(default_factory=Counter)
    total_samples: Counter[str] = field(default_factory=Counter)


@dataclass
class Profile:
    path: Path
    samples: int
    threads: dict[str, ThreadProfile]
    # How long it was recorded and at what rate, when :func:`recording` wrote it.
    seconds: float | None = None
    rate: int | None = None
    # The messages the benchmark moved while it was recorded (:func:`note_messages`).
    messages: int | None = None

    @property
    def busiest(self) -> ThreadProfile | None:
        return max(self.threads.values(), key=lambda t: t.samples, default=None)


def summarize(path: Path) -> Profile:
    """Read a ``py-spy record --format raw`` file: one stack per line, frames joined by
    ``;`` from the outermost, then a space and its sample count."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise ProfileError(f"cannot read the profile {path}: {exc.strerror}") from exc
    threads: dict[str, ThreadProfile] = {}
    total = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            raise ProfileError(
                f"{path}:{number}: not a py-spy raw stack ('frame;frame;... count'): {line[:80]!r}"
            )
        count = int(count_text)
        frames = stack.split(";")
        name = "all"
        if frames and _PROCESS.match(frames[0]):
            frames = frames[1:]
        if frames:
            thread = _THREAD.match(frames[0])
            if thread is not None:
                name = thread.group(1) or frames[0]
                frames = frames[1:]
        t = threads.get(name)
        if t is None:
            t = threads[name] = ThreadProfile(name)
        t.samples += count
        total += count
        functions = [_LINE.sub(")", f) for f in frames]
        if functions:
            t.self_samples[functions[-1]] += count
        for f in set(functions):
            t.total_samples[f] += count
    seconds, rate, messages = _read_meta(path)
    return Profile(path, total, threads, seconds, rate, messages)


def _read_meta(path: Path) -> tuple[float | None, int | None, int | None]:
    """The recording's wall time and rate, when :func:`recording` wrote them beside it,
    and the messages of :func:`note_messages`."""
    try:
        meta = json.loads(_meta_path(path).read_text())
        seconds, rate = meta["seconds"], meta["rate"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, None, None
    if not isinstance(seconds, (int, float)) or not isinstance(rate, int) or rate <= 0:
        return None, None, None
    messages = meta.get("messages")
    if not isinstance(messages, int) or isinstance(messages, bool) or messages <= 0:
        messages = None
    return float(seconds), rate, messages


def note_messages(paths: Iterable[Path], messages: int) -> None:
    """Record beside each profile (:func:`recording`'s) how many messages the benchmark
    moved while it was recorded: :func:`compare` then shows CPU per message."""
    for path in paths:
        meta_path = _meta_path(path)
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue  # not recorded (no py-spy): nothing to note
        if isinstance(meta, dict):
            meta["messages"] = messages
            meta_path.write_text(json.dumps(meta) + "\n")


@dataclass
class Change:
    """One function in two profiles: its own samples in each, as microseconds of CPU per
    message or as percent of all samples (``unit``)."""

    function: str
    base: float
    other: float

    @property
    def delta(self) -> float:
        return self.other - self.base


def _scale(profile: Profile, per_message: bool, rate: int | None) -> float:
    """What one sample of ``profile`` is: µs of CPU per message (``rate``: the sampling
    rate, if the profile does not say), or a percent of all its samples."""
    if per_message:
        assert profile.messages
        return 1e6 / (rate or profile.rate or SAMPLE_RATE) / profile.messages
    return 100 / profile.samples if profile.samples else 0.0


def _own(profile: Profile, scale: float) -> dict[str, float]:
    """Each function's own samples over every thread, times ``scale``."""
    out: dict[str, float] = {}
    for t in profile.threads.values():
        for func, n in t.self_samples.items():
            out[func] = out.get(func, 0.0) + n * scale
    return out


def compare(base: Profile, other: Profile, *, rate: int | None = None) -> tuple[str, list[Change]]:
    """Each function's own time in ``base`` and ``other`` -> (unit, changes, the largest
    growth first). The unit is "µs/msg" (CPU per message) when both profiles noted their
    messages, else "%" (share of all samples)."""
    per_message = base.messages is not None and other.messages is not None
    a = _own(base, _scale(base, per_message, rate))
    b = _own(other, _scale(other, per_message, rate))
    changes = [Change(f, a.get(f, 0.0), b.get(f, 0.0)) for f in a.keys() | b.keys()]
    changes.sort(key=lambda c: (-c.delta, c.function))
    return ("µs/msg" if per_message else "%"), changes


def comparison_json(base: Profile, other: Profile, *, rate: int | None = None) -> dict[str, object]:
    """``rocketq bench profile BASE OTHER --compare --json``: every function that changed."""
    unit, changes = compare(base, other, rate=rate)
    return {
        "base": str(base.path),
        "other": str(other.path),
        "unit": unit,
        "functions": [
            {
                "function": c.function,
                "base": round(c.base, 3),
                "other": round(c.other, 3),
                "change": round(c.delta, 3),
            }
            for c in changes
            if c.delta
        ],
    }


def format_comparison(
    base: Profile, other: Profile, *, top: int = 15, rate: int | None = None
) -> list[str]:
    """What ``rocketq bench profile BASE OTHER --compare`` prints: the totals, then the
    ``top`` functions that grew most and the ``top`` that shrank most."""
    unit, changes = compare(base, other, rate=rate)
    lines = [f"{base.path} -> {other.path}"]
    if unit == "µs/msg":
        assert base.messages and other.messages
        tb = base.samples * _scale(base, True, rate)
        to = other.samples * _scale(other, True, rate)
        lines.append(
            f"  CPU per message (every thread): {tb:.1f} -> {to:.1f} µs ({to - tb:+.1f}); "
            f"{base.messages:,} and {other.messages:,} messages"
        )
    else:
        lines.append("  shares of all samples (no message counts beside the profiles)")
    lines.append(f"  {unit:>8} {'':>8} {'change':>8}  function (own samples)")
    grew = [c for c in changes if c.delta > 0][:top]
    shrank = [c for c in reversed(changes) if c.delta < 0][:top]
    for c in grew:
        lines.append(f"  {c.base:8.2f} {c.other:8.2f} {c.delta:+8.2f}  {c.function}")
    if shrank:
        lines.append("  ...")
        for c in reversed(shrank):
            lines.append(f"  {c.base:8.2f} {c.other:8.2f} {c.delta:+8.2f}  {c.function}")
    return lines


def echo_summaries(paths: Iterable[Path], echo: Callable[[str], None], *, top: int) -> None:
    """Print each profile's summary (:func:`format_summary`), or why it has none: what a
    benchmark run with ``--profile`` prints after recording."""
    for path in paths:
        try:
            for line in format_summary(summarize(path), top=top):
                echo(line)
        except ProfileError as exc:
            echo(f"no profile summary: {exc}")


def format_summary(
    profile: Profile, *, top: int = 15, thread: str | None = None, rate: int | None = None
) -> list[str]:
    """What ``rocketq bench profile`` prints for one file (``rate``: the sampling rate, if
    the file does not say; default 200 Hz)."""
    rate = rate or profile.rate or SAMPLE_RATE
    wall = profile.seconds
    head = f"{profile.path}: {profile.samples:,} samples at {rate} Hz"
    lines = [head + (f", {wall:.1f} s recorded" if wall else "")]
    for t in sorted(profile.threads.values(), key=lambda t: -t.samples):
        busy = t.samples / rate
        share = f", {100 * busy / wall:.0f} % of the time" if wall else ""
        lines.append(f"  thread {t.name}: {t.samples:,} samples ({busy:.1f} s busy{share})")
    chosen = profile.threads.get(thread) if thread else profile.busiest
    if chosen is None:
        if thread:
            names = ", ".join(profile.threads) or "none"
            raise ProfileError(f"{profile.path} has no thread {thread!r} (threads: {names})")
        return lines
    lines.append(f"  {chosen.name}, by own samples (self) and with callees (total):")
    lines.append(f"  {'self %':>7} {'total %':>8}  function")
    for func, own in chosen.self_samples.most_common(top):
        lines.append(
            f"  {100 * own / chosen.samples:7.1f} "
            f"{100 * chosen.total_samples[func] / chosen.samples:8.1f}  {func}"
        )
    return lines


def summary_json(profile: Profile, *, top: int = 15, rate: int | None = None) -> dict[str, object]:
    rate = rate or profile.rate or SAMPLE_RATE
    return {
        "file": str(profile.path),
        "samples": profile.samples,
        "rate": rate,
        "recorded_seconds": profile.seconds,
        "busy_seconds": round(profile.samples / rate, 2),
        "threads": {
            t.name: {
                "samples": t.samples,
                "top_self": [
                    {
                        "function": func,
                        "self_pct": round(100 * own / t.samples, 2),
                        "total_pct": round(100 * t.total_samples[func] / t.samples, 2),
                    }
                    for func, own in t.self_samples.most_common(top)
                ],
            }
            for t in profile.threads.values()
        },
    }
